"""A finished tree as one choice of a reply: the answer as content (GSM8K: after the chosen
chain's text), why it ended, its token counts and the `seed_tot` extension object."""

from __future__ import annotations

from seed_tot.cli.api_server.catalog import ModelEntry
from seed_tot.cli.api_server.service import Finished


def answer_content(finished: Finished, votable: bool) -> str:
    """GSM8K-like tasks (comparable answers): the chosen chain, then 'Answer: X'; others: the answer
    itself (the plan, the passage); the chosen state's text when no answer was found."""
    result = finished.result
    chain = result.chosen.state.strip() if result.chosen_path else ""
    answer = result.answer
    if answer is None:
        return chain
    if votable and chain and chain != answer.strip():
        return f"{chain}\n\nAnswer: {answer}"
    return answer


def was_cut(result, content: str) -> bool:
    """A token cap cut the answer: a generation on the chosen path ended at its budget, or nothing
    was answered (an empty content, or no answer found) while some generation of the tree did."""
    tree = result.tree
    if any(tree.node(i).info.get("finish_reason") == "length" for i in result.chosen_path):
        return True
    unanswered = not content.strip() or result.answer is None
    return unanswered and any(node.info.get("finish_reason") == "length" for node in tree.nodes())


def choice_of(finished: Finished, entry: ModelEntry, seed: int) -> dict:
    from seed_tot_tasks import get_task

    result = finished.result
    selection = result.selection
    trace_id = finished.trace_id
    extension = {
        "trace_id": trace_id,
        "trace_url": f"/v1/traces/{trace_id}",
        "trace_html_url": f"/traces/{trace_id}.html",
        "task": entry.task_name,
        "search": entry.search_cls.name,
        "seed": seed,
        "problem_id": result.problem.id,
        "answer": result.answer,
        "search_answer": selection.search_answer if selection is not None else None,
        "cot_answer": selection.cot_answer if selection is not None else None,
        "votes": dict(selection.votes) if selection is not None else {},
        "selection": selection.method if selection is not None else None,
        "score": result.score,
        "nodes": len(list(result.tree.nodes())),
        "batches": len(result.batches),
        "executor_seconds": round(result.metrics.wall_seconds, 3),
    }
    content = answer_content(finished, get_task(entry.task_name).votable)
    return {
        "content": content,
        "finish_reason": "length" if was_cut(result, content) else "stop",
        "usage": {"prompt_tokens": finished.prompt_tokens, "completion_tokens": finished.completion_tokens},
        "seed_tot": extension,
    }
