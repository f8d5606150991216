"""A learned judge bound to a loaded target: the value of a state is the head's probability that
it reaches a correct answer, read from one forward of the target over the task's chain-of-thought
prompt and the state (stopped at the head's layer; no token decoded)."""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path

from seed_tot.errors import ConfigError
from seed_tot.models.fingerprint import weights_fingerprint
from seed_tot.runtime.runner import ModelRunner
from seed_tot.task import Problem, Task
from seed_tot.values.features import FeatureReader, Reading
from seed_tot.values.head import ValueHead, head_target_name, load_head
from seed_tot.values.reading_memory import ReadingMemory
from seed_tot.values.states import reading_ends

PACKAGED_HEADS = Path(__file__).resolve().parent / "heads"


def ships_head_for(target_name: str) -> bool:
    """True when a packaged head names this target (its alias, e.g. default-target) as the one it
    was trained for; loading it still checks the weights' fingerprint."""
    return target_name in packaged_head_targets()


@lru_cache(maxsize=1)
def packaged_head_targets() -> frozenset[str]:
    return frozenset(head_target_name(path) for path in PACKAGED_HEADS.glob("*.safetensors"))


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
        return cls(_head_for(target.name, weights_fingerprint(target.model), path), target)

    @classmethod
    def beside_engine(cls, target_name: str, dtype: str = "auto", device: str = "auto",
                      path: str | Path | None = None) -> LearnedJudge:
        """A judge for a run whose model decodes in an engine (llama.cpp, a server): it loads the
        target's layers up to the head's, for reading only (seed_tot/models/reading_target.py). A
        target with no saved model folder (a .gguf file, a hub id, the tiny test models) loads whole."""
        from seed_tot.models.loading import load_model, load_tokenizer, local_model_dir, resolve_device, resolve_dtype
        from seed_tot.models.reading_target import fill_layers, move_loaded, skeleton_for_reading
        from seed_tot.runtime.packed_linear import pack_linear_layers

        folder = local_model_dir(target_name)
        if folder is None:
            return cls.load(load_model(target_name, dtype=dtype, device=device), path)
        torch_device = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, torch_device, target_name)
        model = skeleton_for_reading(folder, torch_dtype)
        head = _head_for(target_name, weights_fingerprint(model), path)
        fill_layers(model, folder, torch_dtype, max(head.layers))
        move_loaded(model, torch_device)
        # as load_model does: bfloat16 reads on CPUs that pack them; every tensor was read by
        # read_cast, so none views a whole-file mapping and the embedding table may stay mapped
        pack_linear_layers(model, copy_out=False)
        return cls(head, ModelRunner(model, load_tokenizer(target_name), name=target_name))

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


def _head_for(target_name: str, fingerprint: str, path: str | Path | None) -> ValueHead:
    """The head at `path` (default: the one shipped for these weights), refused for another target."""
    if path is None:
        path = packaged_head(fingerprint)
        if path is None:
            raise ConfigError(
                f"No value head ships for {target_name!r}: train one with `seed-tot train value --target "
                f"{target_name}` and pass --value-model OUT/value_head.safetensors."
            )
    return load_head(Path(path), target_name, fingerprint)


def load_judge(target: ModelRunner | None, target_name: str, dtype: str, device: str,
               path: str | Path | None) -> LearnedJudge:
    """A run's judge: on its loaded target, or beside its engine when the run loaded none."""
    if target is not None:
        return LearnedJudge.load(target, path)
    return LearnedJudge.beside_engine(target_name, dtype, device, path)


def judge_record(judge: LearnedJudge, path: str | None) -> dict:
    """What a trace records of the judge a run used."""
    steps = judge.head.steps
    from seed_tot.models.reading_target import all_values, loaded_values

    model = judge.reader.target.model
    return {"id": judge.head_id, "path": str(path or "packaged"), "layer": judge.head.layer,
            "steps_layer": steps.layer if steps else None, "reads_with": judge.reader.target.name,
            "dtype": str(judge.reader.target.dtype).removeprefix("torch."),
            "weights_loaded": round(loaded_values(model) / all_values(model), 3)}


def judge_totals(judge: LearnedJudge) -> dict:
    """What a run's judge cost: seconds spent reading states and token positions read (no token decoded)."""
    return {"seconds": round(judge.seconds, 1), "tokens_read": judge.reader.tokens_read}
