"""The chains of thought of the whole problem and the answer vote: the step generator every search
composes (`VotedChains.decide`).

Beside a search's own steps, the first round of chains runs in the same batches: the greedy chain
(index 0) and `cot_samples` sampled ones at the thought temperature and top-p, for a task with a
`cot_prompt` and `cot_candidate` set. Each hangs from the root as an answer node, never expanded
nor rated by the evaluator (a learned judge rates it). The answer is then chosen over the tree's
answer leaves (seed_tot/search/answers.py: the vote, ties to the greedy chain). Where that vote
is unsure (seed_tot/search/escalation.py), a second round of `escalate_samples` chains is drawn,
afresh or continuing the first round's leading chains (seed_tot/search/branching.py), and the
vote is taken again. A search without a tree of its own (self-consistency) is these chains alone.
"""

from __future__ import annotations

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.metrics import BatchLog
from seed_tot.reasoning.evaluator import rejection
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.request_seeds import request_seed, search_request
from seed_tot.requests import GenerationRequest
from seed_tot.search.answers import Selection, select_answer, vote_candidates, vote_weights
from seed_tot.search.branching import plan_branches
from seed_tot.search.early_vote import vote_decided
from seed_tot.search.escalation import unsure
from seed_tot.search.settings import SearchConfig
from seed_tot.search.steps import Batch, Steps, gather
from seed_tot.task import Problem, Task
from seed_tot.tree import ReasoningTree, ThoughtNode


class VotedChains:
    """The chains of thought beside a search, and the vote that picks the answer."""

    def __init__(self, task: Task, formatter: PromptFormatter, config: SearchConfig, judge=None,
                 chains_only: bool = False):
        """`judge`: a learned judge that rates the chains (value mode "learned"), else None;
        `chains_only`: the search adds no answers of its own, so the chains alone make the vote."""
        self.task = task
        self.formatter = formatter
        self.config = config
        self.judge = judge
        self.chains_only = chains_only

    def decide(self, problem: Problem, tree: ReasoningTree, log: BatchLog, search: Steps[int]) -> Steps[Selection]:
        """Run `search` (the search's own steps, which return the node it chose) beside the first
        round of chains, vote, draw the second round where the vote is unsure; return the selection."""
        task, cfg = self.task, self.config
        cot_prompt = task.cot_prompt
        first_round = chain_indices(cfg)
        second_round = escalation_indices(cfg, first_round)
        values = ChainValues(self.judge, task, problem) if self.judge is not None else None
        if cfg.cot_candidate and cot_prompt is not None:
            decided = self._decided_rule(problem, values, first_round, escalates=bool(second_round))
            chosen_id, cot_results = yield from gather(
                [search, self._cot(problem, log, cot_prompt(problem), first_round, decided)])
            self._add_chains(tree, problem, cot_results, first_round, values)
        else:
            chosen_id = yield from search
        selection = select_answer(task, problem, tree, chosen_id, vote=cfg.vote, weight=cfg.vote_weight)
        if second_round and cot_prompt is not None and task.votable and unsure(selection, cfg.escalate_below):
            sources, prefixes = (plan_branches(task, problem, tree, selection.votes, len(second_round))
                                 if cfg.escalate_from == "chains" else ([], []))
            if sources:
                yield from self._branch(problem, tree, log, cot_prompt(problem), second_round, sources, prefixes)
            else:  # afresh, as asked, or because no chain of the first round answered
                decided = self._decided_rule(problem, values, second_round, escalates=False, cast=self._cast(problem, tree))
                more = yield from self._cot(problem, log, cot_prompt(problem), second_round, decided)
                self._add_chains(tree, problem, more, second_round, values)
            selection = select_answer(task, problem, tree, chosen_id, vote=cfg.vote, weight=cfg.vote_weight)
        return selection

    def _decided_rule(self, problem: Problem, values: "ChainValues | None", indices: range, escalates: bool,
                      cast: tuple[tuple[str, float], ...] = ()):
        """The early stop of the round of chains `indices` (see seed_tot/search/early_vote.py), where
        it applies: the chains alone vote, plainly or weighted by a learned judge that reads each
        chain as it ends; else None (every chain runs). `cast`: the votes of earlier rounds."""
        cfg, task = self.config, self.task
        if not (cfg.stop_when_decided and self.chains_only and cfg.vote and task.votable):
            return None
        judged = cfg.vote_weight == "value"
        if judged and values is None:
            return None
        threshold = cfg.escalate_below if escalates else None

        def decided(results: list) -> bool:
            votes = list(cast)
            for index, result in zip(indices, results, strict=True):
                if result is not None:
                    answer = chain_vote(task, problem, result)
                    weight = 1.0 if not judged or answer is None else values.of(index, result.text, answer)
                    votes.append((answer, weight))
            return vote_decided(votes, sum(result is None for result in results), threshold)

        return decided

    def _cast(self, problem: Problem, tree: ReasoningTree) -> tuple[tuple[str, float], ...]:
        """The votes the tree's answers cast now, as the vote counts them."""
        candidates = vote_candidates(self.task, problem, tree)
        weights = vote_weights(candidates, self.config.vote_weight)
        return tuple((answer, weight) for (answer, _), weight in zip(candidates, weights, strict=True))

    def _cot(self, problem: Problem, log: BatchLog, prompt: str, indices: range, decided=None) -> Steps[list]:
        """The chains of thought `indices` (0 greedy, then samples) of the whole problem, as one batch
        (`decided`: the rule that may cancel the chains still running, see Batch.decided)."""
        requests = cot_requests(self.formatter.encode(prompt), self.config, problem.id, indices)
        outcome = yield Batch("cot", 0, requests, decided=decided)
        log.add("cot", 0, outcome.results, outcome)
        return outcome.results

    def _add_chains(self, tree: ReasoningTree, problem: Problem, results: list, indices: range,
                    values: "ChainValues | None" = None) -> None:
        chains = [add_cot_node(tree, self.task, problem, result, index, self.config.seed)
                  for index, result in zip(indices, results, strict=True)]
        if self.judge is not None:
            known = {place: values.known[index] for place, index in enumerate(indices)
                     if values is not None and index in values.known}
            rate_chains(self.judge, self.task, problem, chains, known)

    def _branch(self, problem: Problem, tree: ReasoningTree, log: BatchLog, prompt: str, indices: range,
                sources: list[ThoughtNode], prefixes: list[str]) -> Steps[None]:
        """The second round as branches: chains `indices` continue `prefixes` of `sources`
        (seed_tot/search/branching.py), as one batch."""
        requests = branch_requests(self.formatter, prompt, self.config, problem.id, sources, prefixes, indices)
        outcome = yield Batch("cot", 0, requests)
        log.add("cot", 0, outcome.results, outcome)
        branches = [add_branch_node(tree, self.task, problem, result, index, source, prefix, request.seed)
                    for result, index, source, prefix, request
                    in zip(outcome.results, indices, sources, prefixes, requests, strict=True)]
        if self.judge is not None:
            rate_chains(self.judge, self.task, problem, branches)


def require_cot_prompt(task: Task, search_name: str) -> None:
    """Raise ConfigError when `task` has no chain-of-thought prompt for a search built on whole chains."""
    if task.cot_prompt is None:
        raise ConfigError(f"{search_name} needs a task with a chain-of-thought prompt; {task.name} has none: "
                          "use a tree search (bfs or mcts).")


def sampled_chains_run(config: SearchConfig) -> bool:
    # greedy thoughts would make every sample a copy of the greedy chain; without a vote they are unused
    return config.thought_decode.temperature > 0 and config.vote


def chain_indices(config: SearchConfig) -> range:
    """The first round's chains of thought: the greedy one (index 0), then `cot_samples` sampled ones."""
    return range(1 + (config.cot_samples if sampled_chains_run(config) else 0))


def escalation_indices(config: SearchConfig, first_round: range) -> range:
    """The sampled chains of the second round, drawn only where the first round's vote is unsure."""
    more = config.escalate_samples if sampled_chains_run(config) and config.cot_candidate else 0
    return range(first_round.stop, first_round.stop + more)


def sampled_cot_decode(config: SearchConfig) -> DecodeConfig:
    """A sampled chain's decoding: the chains' token budget at the thought temperature and top-p."""
    return config.cot_decode.model_copy(
        update={"temperature": config.thought_decode.temperature, "top_p": config.thought_decode.top_p}
    )


def cot_requests(prompt_ids: list[int], config: SearchConfig, problem_id: str,
                 indices: range | None = None) -> list[GenerationRequest]:
    """The chains of thought `indices` (default: the first round's): index 0 greedy, the others sampled
    at the thought temperature and top-p, each with its own seed (a chain is the same in either round)."""
    sampled = sampled_cot_decode(config)
    return [
        search_request(prompt_ids, sampled if index else config.cot_decode, config.seed, problem_id, 0, "cot", index)
        for index in (chain_indices(config) if indices is None else indices)
    ]


def branch_requests(formatter: PromptFormatter, prompt: str, config: SearchConfig, problem_id: str,
                    sources: list[ThoughtNode], prefixes: list[str], indices: range) -> list[GenerationRequest]:
    """Chains `indices` continuing `prefixes` of `sources` (the reply so far), sampled like the chains
    and seeded by the chain they continue; each decodes what is left of a whole chain's token budget."""
    sampled = sampled_cot_decode(config)
    prompt_length = len(formatter.encode(prompt))
    requests = []
    for source, prefix, index in zip(sources, prefixes, indices, strict=True):
        prompt_ids = formatter.encode(prompt, prefix)
        left = max(1, sampled.max_new_tokens - (len(prompt_ids) - prompt_length))
        decode = sampled.model_copy(update={"max_new_tokens": left})
        requests.append(search_request(prompt_ids, decode, config.seed, problem_id, source.id, "branch", index))
    return requests


def add_cot_node(
    tree: ReasoningTree, task: Task, problem: Problem, result, index: int, run_seed: int
) -> ThoughtNode:
    """Chain of thought `index` (0 greedy, then the samples) as a child of the root, never expanded
    or rated: the greedy one is marked info["cot"] (ties go to it), a sample info["cot_sample"]."""
    node = add_chain(tree, task, problem, result.text, result)
    if index == 0:
        node.info["cot"] = True
    else:
        node.info["cot_sample"] = index
    node.seeds["cot"] = request_seed(run_seed, problem.id, 0, "cot", index)
    return node


def add_branch_node(tree: ReasoningTree, task: Task, problem: Problem, result, index: int, source: ThoughtNode,
                    prefix: str, seed: int) -> ThoughtNode:
    """Chain `index` that continued the first `len(prefix)` characters of chain `source`, as a child
    of the root beside it (info["cot_branch"], info["branched_from"], info["prefix_chars"])."""
    node = add_chain(tree, task, problem, prefix + result.text, result)
    node.info.update({"cot_branch": index, "branched_from": source.id, "prefix_chars": len(prefix)})
    node.seeds["branch"] = seed
    return node


def add_chain(tree: ReasoningTree, task: Task, problem: Problem, text: str, result) -> ThoughtNode:
    """A whole chain of thought (`text`, generated as `result`) as an answer node under the root."""
    text = text.strip()
    node = tree.add_child(tree.root.id, thought=text, state=task.cot_state(text), kind="answer", generation=result.stats)
    node.info["finish_reason"] = result.finish_reason
    reason = rejection(task, problem, node)  # cut off, or shown wrong: it does not vote
    if reason is not None:
        node.info["rejected"] = reason
    return node


def chain_vote(task: Task, problem: Problem, result) -> str | None:
    """The answer an ended chain votes for, as add_chain and the vote would count it: none where it
    was cut off or cancelled, or the task shows its written steps wrong."""
    if result.finish_reason in ("length", "cancelled"):
        return None
    state = task.cot_state(result.text.strip())
    if task.check_step(problem, state) is not None:
        return None
    return task.extract_answer(problem, state)


class ChainValues:
    """A learned judge's values of one problem's chains by chain index, each read once: as the chain
    ends, where its vote may stop early, or with the rest of its round (rate_chains)."""

    def __init__(self, judge, task: Task, problem: Problem):
        self.judge, self.task, self.problem = judge, task, problem
        self.known: dict[int, float] = {}

    def of(self, index: int, text: str, answer: str) -> float:
        if index not in self.known:
            state = self.task.cot_state(text.strip())
            [self.known[index]] = self.judge.values(self.task, self.problem, [state], [answer])
        return self.known[index]


def rate_chains(judge, task: Task, problem: Problem, chains: list[ThoughtNode], known: dict[int, float] | None = None) -> None:
    """Learned values for the chains of thought no rule rejected (no token decoded: one forward each);
    `known`: values already read, by the chain's place in `chains`."""
    known = known or {}
    rated = [(place, node) for place, node in enumerate(chains) if "rejected" not in node.info]
    unread = [(place, node) for place, node in rated if place not in known]
    answers = [task.extract_answer(problem, node.state) for _, node in unread]
    read = judge.values(task, problem, [node.state for _, node in unread], answers) if unread else []
    values = {**known, **{place: value for (place, _), value in zip(unread, read, strict=True)}}
    for place, node in rated:
        node.value, node.value_parsed = values[place], True
        node.info["judge"] = judge.head_id
