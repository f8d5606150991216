"""State Evaluator: k sampled replies per state (n states per expansion), aggregated as in ToT,
or (value mode "logits") the verdict distribution read from one forward per state.

Logit mode: the prompt is the value prompt followed by the task's `verdict_prefix` as the start
of the model's reply ("Verdict:" for GSM8K, nothing for Blocksworld), and the executor returns
the next-token log-probabilities of the verdict words' first tokens (no token is generated).
The value is the expectation of the task's `verdict_values` (e.g. sure 20, likely 1,
impossible 0.001) under the verdict probabilities renormalised over the verdict words. Rules:
- a word's token is the first token of the word as it would follow the prefix (after one space
  when the prefix is not empty and does not end in white space); the word and its capitalised
  form both count ("sure", "Sure");
- words whose first tokens coincide share that token's probability equally (e.g. with a
  tokenizer that writes " sure" as " s" + "ure" and " slightly" as " s" + "lightly"); when every
  word begins with the same token, logit mode is refused (one forward cannot tell them apart);
- the probabilities are those of the model at temperature 1, whatever the value temperature.
The trace records each word's renormalised probability and the verdict words' total mass.

Constant mode (a blind baseline): every state no rule rejects is worth CONSTANT_VALUE, with no
request, so the search ranks states by nothing the model knows.

Before asking the model, a state is checked by rules that need no model: a thought cut off
by the token budget, or a step the task itself can show wrong (GSM8K arithmetic, an illegal
Blocksworld move), is *rejected*: it gets value 0.0 and no evaluator request is sent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.request_seeds import search_request
from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats
from seed_tot.task import Problem, Task

if TYPE_CHECKING:  # a runtime import would cycle: seed_tot.search imports this module
    from seed_tot.tree import ThoughtNode

REJECTED_VALUE = 0.0
CONSTANT_VALUE = 0.5  # value mode "constant": between a rejected state (0.0) and a sure one (1.0)
VALUE_MODES = ("samples", "logits", "learned", "constant")


@dataclass
class Evaluation:
    value: float  # mean of the samples' values (unparseable samples count as the fallback)
    parsed: bool  # False when no sample could be parsed
    raw: list[str]  # the evaluator's replies, one per sample
    seeds: list[int]
    stats: GenerationStats
    rejected: str | None = None  # why a rule rejected the state (then no replies)
    sample_values: list[float | None] = field(default_factory=list)
    verdict_probs: dict[str, float] | None = None  # logit mode: renormalised P(word)
    verdict_mass: float | None = None  # logit mode: P(any verdict word's first token) before renormalising
    judge: str | None = None  # learned mode: the value head's id


@dataclass(frozen=True)
class VerdictTokens:
    """The verdict words of a task as next-token ids (see the module docstring for the rules)."""

    words: tuple[str, ...]
    values: tuple[float, ...]
    token_ids: tuple[int, ...]  # distinct first tokens, asked for as score_tokens
    shares: tuple[tuple[tuple[int, float], ...], ...]  # per word: (index in token_ids, share of its probability)

    def read(self, logprobs: list[float]) -> tuple[float, dict[str, float], float]:
        """(value, renormalised word probabilities, verdict mass) from the log-probs of token_ids."""
        top = max(logprobs)
        relative = [math.exp(lp - top) for lp in logprobs]  # shifted: no underflow when every lp is small
        word_weight = [sum(relative[i] * share for i, share in shares) for shares in self.shares]
        total = sum(word_weight)
        probs = {word: weight / total for word, weight in zip(self.words, word_weight)}
        value = sum(probs[word] * v for word, v in zip(self.words, self.values))
        return value, probs, math.exp(top) * total


def verdict_tokens(task: Task, formatter: PromptFormatter) -> VerdictTokens:
    """The task's verdict words (`verdict_values`, after `verdict_prefix`) as first-token ids."""
    values = task.verdict_values
    if not values:
        raise ConfigError(
            f"Task {task.name!r} names no verdict words (verdict_values), so its values cannot be read "
            "from logits: use --value-mode samples."
        )
    prefix = task.verdict_prefix or ""
    separator = " " if prefix and not prefix[-1].isspace() else ""
    context = formatter.reply_context("?", prefix)
    base = formatter.encode_text(context)
    firsts: dict[str, list[int]] = {}
    for word in values:
        for variant in dict.fromkeys((word, word[:1].upper() + word[1:])):
            ids = formatter.encode_text(context + separator + variant)
            if ids[: len(base)] != base or len(ids) == len(base):
                raise ConfigError(
                    f"The verdict word {variant!r} does not tokenize apart from the verdict prefix {prefix!r} "
                    "with this tokenizer: use --value-mode samples."
                )
            firsts.setdefault(word, [])
            if ids[len(base)] not in firsts[word]:
                firsts[word].append(ids[len(base)])
    owners: dict[int, list[str]] = {}
    for word, tokens in firsts.items():
        for token in tokens:
            owners.setdefault(token, []).append(word)
    if len(values) > 1 and all(len(words) == len(values) for words in owners.values()):
        raise ConfigError(
            f"The verdict words {', '.join(values)} all begin with the same token with this tokenizer, so one "
            "forward cannot tell them apart: use --value-mode samples."
        )
    token_ids = tuple(sorted(owners))
    index = {token: i for i, token in enumerate(token_ids)}
    return VerdictTokens(
        words=tuple(values),
        values=tuple(float(values[w]) for w in values),
        token_ids=token_ids,
        shares=tuple(tuple((index[t], 1.0 / len(owners[t])) for t in firsts[w]) for w in values),
    )


def read_value(task: Task, text: str) -> tuple[float, bool]:
    """(value, parsed): the task's parse of `text`, or its fallback value when that fails."""
    value = task.parse_value(text)
    if value is None or not math.isfinite(float(value)):
        return float(task.fallback_value), False
    return float(value), True


def rejection(task: Task, problem: Problem, node: ThoughtNode) -> str | None:
    """Why `node` is rejected without asking the model, or None."""
    if node.info.get("rejected"):  # already rejected by the search (e.g. a repeated state)
        return node.info["rejected"]
    if node.info.get("finish_reason") == "length":
        return "truncated: the thought hit the token budget"
    if node.info.get("finish_reason") == "cancelled":
        return "cancelled: the vote was decided without it"
    return task.check_step(problem, node.state)


class StateEvaluator:
    def __init__(
        self, task: Task, formatter: PromptFormatter, decode: DecodeConfig, run_seed: int, samples: int = 1,
        mode: str = "samples", judge=None,
    ):
        if mode not in VALUE_MODES:
            raise ConfigError(f"Unknown value mode {mode!r}: use samples, logits, learned or constant.")
        if mode == "learned" and judge is None:
            raise ConfigError("Value mode learned needs a value head bound to the target (a LearnedJudge): "
                              "load one with seed_tot.values.judge.LearnedJudge.load(target, path).")
        self.task = task
        self.formatter = formatter
        self.decode = decode.with_stop(task.value_stop)  # end the reply at its verdict
        self.run_seed = run_seed
        self.mode = mode
        self.judge = judge if mode == "learned" else None
        self.verdicts = verdict_tokens(task, formatter) if mode == "logits" else None
        # greedy replies would all be the same; logit mode reads the whole distribution at once
        self.samples = 1 if self.decode.greedy or mode == "logits" else samples

    def prompt_ids(self, problem: Problem, node: ThoughtNode) -> list[int]:
        """The evaluator's prompt for `node` (in logit mode, ending with the verdict prefix)."""
        message = self.task.value_prompt(problem, node.state, node.depth - 1)
        if self.verdicts is None:
            return self.formatter.encode(message)
        return self.formatter.encode(message, reply_start=self.task.verdict_prefix or "")

    def requests(self, problem: Problem, nodes: list[ThoughtNode]) -> list[GenerationRequest]:
        """k requests per node that no rule rejects (the step is the parent's depth); none in learned
        mode (the judge reads the target's hidden states itself, in `read`) nor in constant mode."""
        if self.judge is not None or self.mode == "constant":
            return []
        requests = []
        for node in nodes:
            if rejection(self.task, problem, node) is not None:
                continue
            prompt_ids = self.prompt_ids(problem, node)
            for index in range(self.samples):
                request = search_request(prompt_ids, self.decode, self.run_seed, problem.id, node.id, "value", index)
                if self.verdicts is not None:
                    request.score_tokens = self.verdicts.token_ids
                requests.append(request)
        return requests

    def read(
        self, problem: Problem, nodes: list[ThoughtNode], requests: list[GenerationRequest],
        results: list[GenerationResult],
    ) -> list[Evaluation]:
        """One Evaluation per node, from `requests(problem, nodes)` and their results."""
        if self.judge is not None:
            return self._read_learned(problem, nodes)
        if self.mode == "constant":
            return [self._read_constant(problem, node) for node in nodes]
        answered = iter(zip(requests, results, strict=True))
        evaluations = []
        for node in nodes:
            reason = rejection(self.task, problem, node)
            if reason is not None:
                evaluations.append(
                    Evaluation(REJECTED_VALUE, True, [], [], GenerationStats(), rejected=reason)
                )
                continue
            replies = [next(answered) for _ in range(self.samples)]
            evaluations.append(self._aggregate(replies) if self.verdicts is None else self._read_logits(*replies[0]))
        return evaluations

    def _read_learned(self, problem: Problem, nodes: list[ThoughtNode]) -> list[Evaluation]:
        reasons = [rejection(self.task, problem, node) for node in nodes]
        rated = [node for node, reason in zip(nodes, reasons, strict=True) if reason is None]
        answers = [self.task.extract_answer(problem, node.state) if node.kind == "answer" else None for node in rated]
        values = iter(self.judge.values(self.task, problem, [node.state for node in rated], answers) if rated else [])
        return [
            Evaluation(REJECTED_VALUE, True, [], [], GenerationStats(), rejected=reason) if reason is not None
            else Evaluation(value=next(values), parsed=True, raw=[], seeds=[], stats=GenerationStats(),
                            judge=self.judge.head_id)
            for reason in reasons
        ]

    def _read_constant(self, problem: Problem, node: ThoughtNode) -> Evaluation:
        reason = rejection(self.task, problem, node)
        if reason is not None:
            return Evaluation(REJECTED_VALUE, True, [], [], GenerationStats(), rejected=reason)
        return Evaluation(value=CONSTANT_VALUE, parsed=True, raw=[], seeds=[], stats=GenerationStats())

    def _read_logits(self, request: GenerationRequest, result: GenerationResult) -> Evaluation:
        if result.candidate_logprobs is None or len(result.candidate_logprobs) != len(self.verdicts.token_ids):
            raise ConfigError(
                "The executor returned no verdict log-probabilities (it generated text instead): use "
                "--value-mode samples, or an in-process method such as ar, batched or batched-lookup."
            )
        value, probs, mass = self.verdicts.read(result.candidate_logprobs)
        return Evaluation(
            value=value, parsed=True, raw=[], seeds=[request.seed], stats=result.stats,
            verdict_probs=probs, verdict_mass=mass,
        )

    def _aggregate(self, replies: list[tuple[GenerationRequest, GenerationResult]]) -> Evaluation:
        values, parsed, stats = [], [], GenerationStats()
        for _, result in replies:
            value, ok = read_value(self.task, result.text)
            values.append(value)
            parsed.append(value if ok else None)
            stats = stats.merge(result.stats)
        return Evaluation(
            value=sum(values) / len(values),
            parsed=any(p is not None for p in parsed),
            raw=[result.text for _, result in replies],
            seeds=[request.seed for request, _ in replies],
            stats=stats,
            sample_values=parsed,
        )
