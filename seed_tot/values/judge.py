"""A learned judge bound to a loaded target: the value of a state is the head's probability that
it reaches a correct answer, read from one forward of the target over the task's chain-of-thought
prompt and the state (stopped at the head's layer; no token decoded)."""

from __future__ import annotations

import time
from pathlib import Path

from seed_tot.errors import ConfigError
from seed_tot.models.fingerprint import weights_fingerprint
from seed_tot.runtime.runner import ModelRunner
from seed_tot.task import Problem, Task
from seed_tot.values.features import FeatureReader, Reading
from seed_tot.values.head import ValueHead, load_head
from seed_tot.values.reading_memory import ReadingMemory
from seed_tot.values.states import reading_ends

PACKAGED_HEADS = Path(__file__).resolve().parent / "heads"


def packaged_head(fingerprint: str) -> Path | None:
    """The head shipped for the target with these weights (heads/<fingerprint>.safetensors), if any."""
    path = PACKAGED_HEADS / f"{fingerprint}.safetensors"
    return path if path.is_file() else None


def require_chain_prompt(task: Task) -> None:
    """A learned judge reads states against the task's chain-of-thought prompt."""
    if task.cot_prompt is None:
        raise ConfigError(f"Task {task.name!r} has no chain-of-thought prompt, which a learned judge reads "
                          "states against: use --value-mode logits or samples.")


class LearnedJudge:
    def __init__(self, head: ValueHead, target: ModelRunner) -> None:
        self.head = head
        self.reader = FeatureReader(target, head.layers, memory=ReadingMemory())  # a state's children start where it ends
        self.seconds = 0.0

    @classmethod
    def load(cls, target: ModelRunner, path: str | Path | None = None) -> LearnedJudge:
        """The head at `path` (default: the one shipped for this target), refused for another target."""
        fingerprint = weights_fingerprint(target.model)
        if path is None:
            path = packaged_head(fingerprint)
            if path is None:
                raise ConfigError(
                    f"No value head ships for {target.name!r}: train one with `seed-tot train value --target "
                    f"{target.name}` and pass --value-model OUT/value_head.safetensors."
                )
        head = load_head(Path(path), target.name, fingerprint)
        return cls(head, target)

    @property
    def head_id(self) -> str:
        return self.head.head_id

    def values(self, task: Task, problem: Problem, states: list[str], answers: list[str | None] | None = None) -> list[float]:
        """P(correct) of each state of `problem` (a state with no text gets the head's value of the prompt
        alone). `answers[i]`: the answer state i gives, read there (None: a state without one, rated by
        the head's step head if it has one)."""
        require_chain_prompt(task)
        message = task.cot_prompt(problem)
        texts = [state.strip() or "." for state in states]
        answers = answers or [None] * len(texts)
        readings = [Reading(message, text, (reading_ends(text, answer)[-1],))
                    for text, answer in zip(texts, answers, strict=True)]
        started = time.perf_counter()
        features = self.reader.read(readings)
        self.seconds += time.perf_counter() - started
        layers = self.head.layers
        heads = [self.head.for_state(answer is not None) for answer in answers]
        return [float(head.probability(f[:, layers.index(head.layer)])[0]) for head, f in zip(heads, features, strict=True)]


def judge_record(judge: LearnedJudge, path: str | None) -> dict:
    """What a trace records of the judge a run used."""
    steps = judge.head.steps
    return {"id": judge.head_id, "path": str(path or "packaged"), "layer": judge.head.layer,
            "steps_layer": steps.layer if steps else None}


def judge_totals(judge: LearnedJudge) -> dict:
    """What a run's judge cost: seconds spent reading states and token positions read (no token decoded)."""
    return {"seconds": round(judge.seconds, 1), "tokens_read": judge.reader.tokens_read}
