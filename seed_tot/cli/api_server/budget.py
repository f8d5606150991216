"""What one request may cost, known before any work: an upper bound on the tokens its trees can
generate, from its settings alone, and the setting whose lowering saves the most.

The bound follows the searches' own shape (seed_tot/search/): a BFS step expands at most `breadth`
states (the first step only the root), an MCTS iteration expands at most one state per level down
to the depth limit (after the first, which expands the root, from level 1 on), best-of-n samples `n_thoughts` whole chains; every expansion asks for
`n_thoughts` thoughts and rates each with `value_samples` evaluator replies (sampled value mode
only: logits, learned and constant generate nothing); the chains of thought (the greedy one, the
samples, and a second round where the vote is unsure) each get the chains' token budget. Every
request is counted at its full `max_new_tokens`, so the bound holds whatever the model writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# the most any model id's defaults need (gsm8k/mcts: 62,080); at the 64-77 tokens/s the default pair
# decodes 16 requests at once on a 2-core CPU, about a quarter of an hour of the whole server
DEFAULT_MAX_REQUEST_TOKENS = 65536


@dataclass(frozen=True)
class Work:
    """The numbers that bound one request's generated tokens (one tree's, times `trees`)."""

    search: str  # "bfs", "mcts", "best-of-n" or "self-consistency"
    trees: int  # the request's n
    n_thoughts: int
    depth: int  # the step limit
    breadth: int  # bfs only
    iterations: int  # mcts only
    thought_tokens: int  # per thought; 0 when thoughts are chosen or drawn without generating
    value_samples: int  # evaluator replies per state that generate text
    value_tokens: int
    chains: int  # first round of chains of thought
    second_round: int  # chains drawn where the vote is unsure
    chain_tokens: int


# a request parameter -> the Work fields it sets and the least value they take
_KNOBS = {
    "n": (("trees",), 1), "max_tokens": (("thought_tokens", "chain_tokens"), 1),
    "seed_tot.n_thoughts": (("n_thoughts",), 1), "seed_tot.depth": (("depth",), 1),
    "seed_tot.breadth": (("breadth",), 1), "seed_tot.iterations": (("iterations",), 1),
    "seed_tot.value_samples": (("value_samples",), 1), "seed_tot.value_max_tokens": (("value_tokens",), 1),
    "seed_tot.cot_samples": (("chains",), 1), "seed_tot.escalate_samples": (("second_round",), 0),
}


def expansions(work: Work) -> int:
    """The most states one tree expands."""
    if work.search == "bfs":
        return 1 + (work.depth - 1) * work.breadth
    if work.search == "mcts":
        return 1 + work.iterations * (work.depth - 1)
    return 0


def tree_tokens(work: Work) -> int:
    """The most tokens one tree's search itself generates (thoughts and their ratings)."""
    rating = work.value_samples * work.value_tokens
    if work.search == "best-of-n":
        return work.n_thoughts * (work.chain_tokens + rating)
    return expansions(work) * work.n_thoughts * (work.thought_tokens + rating)


def token_bound(work: Work) -> int:
    """The most tokens the request can generate: every tree's search and chains of thought."""
    return work.trees * (tree_tokens(work) + (work.chains + work.second_round) * work.chain_tokens)


def heaviest_setting(work: Work, default: Work) -> str:
    """The request parameter to lower: the one whose return to the model's default (`default`, one
    tree) saves the most; when the request asks for nothing above the defaults, the one whose
    halving saves the most."""
    bound = token_bound(work)

    def saved(values) -> dict[str, int]:
        return {param: bound - token_bound(replace(work, **{name: values(name, least) for name in names}))
                for param, (names, least) in _KNOBS.items()}

    back = saved(lambda name, least: min(getattr(work, name), getattr(default, name)))
    if max(back.values()) > 0:
        return max(back, key=back.get)
    halved = saved(lambda name, least: max(least, getattr(work, name) // 2))
    return max(halved, key=halved.get)


def work_of(config, search: str, trees: int, task) -> Work:
    """The Work of `trees` trees of `search` with `config` (a SearchConfig) on `task` (its depth
    and chain prompt)."""
    from seed_tot.search.base import step_limit
    from seed_tot.search.chains import chain_indices, escalation_indices

    generates_values = config.value_mode == "samples"
    value_samples = (1 if config.value_decode.greedy else config.value_samples) if generates_values else 0
    has_chains = config.cot_candidate and task.cot_prompt is not None
    first = chain_indices(config)
    return Work(
        search=search, trees=trees, n_thoughts=config.n_thoughts, depth=step_limit(task, config),
        breadth=getattr(config, "breadth", 1), iterations=getattr(config, "iterations", 1),
        thought_tokens=0 if config.thought_mode in ("choose", "random") else config.thought_decode.max_new_tokens,
        value_samples=value_samples, value_tokens=config.value_decode.max_new_tokens,
        chains=len(first) if has_chains else 0,
        second_round=len(escalation_indices(config, first)) if has_chains and task.votable else 0,
        chain_tokens=config.cot_decode.max_new_tokens,
    )


def over_budget(work: Work, default: Work, budget: int) -> str | None:
    """None when the request fits `budget` tokens; else the one sentence that refuses it."""
    bound = token_bound(work)
    if bound <= budget:
        return None
    return (f"This request may generate up to {bound:,} tokens, over this server's budget of {budget:,} "
            f"per request: lower {heaviest_setting(work, default)} (GET /v1/models gives each model's "
            "budget and caps).")


def default_work(entry) -> Work:
    """The work of one tree at a model id's defaults (`entry`: a catalog ModelEntry)."""
    from seed_tot_tasks import get_task

    return work_of(entry.config, entry.search_cls.name, 1, get_task(entry.task_name))
