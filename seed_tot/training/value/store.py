"""Features of a pool's chains on disk: one shard per group of problems, written atomically, so an
interrupted extraction resumes with the problems it has not stored. features.json names the
target, its weights fingerprint, dtype and layers; a store is never extended with another."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison.folders import bundled_loader
from seed_tot.observe.comparison.pools import chain_answer, pool_problems
from seed_tot.records import write_json_atomically
from seed_tot.values.features import FEATURE_RULE, FeatureReader, Reading
from seed_tot.values.states import reading_ends
from seed_tot.training.value.fit import StateTable

SETTINGS_FILE = "features.json"


@dataclass(frozen=True)
class Chain:
    index: int  # 0 greedy, then the samples
    text: str
    correct: bool
    answer: str | None = None  # what it votes (None: cut off or rejected)


@dataclass(frozen=True)
class ProblemChains:
    problem_id: str
    message: str  # the chain-of-thought prompt's user message
    chains: tuple[Chain, ...]


def chains_of_pool(pool: Path, task_of, samples: int | None = None) -> list[ProblemChains]:
    """Every pool problem's chains with their outcome (the vote's answer rule, scored against the
    gold): the greedy chain and the samples (the first `samples` of them when given).
    `task_of(name)` gives the task the pool's rows name."""
    items = []
    for pid, entry in pool_problems(pool, task_of, bundled_loader()).items():
        results = ([entry.greedy] if entry.greedy is not None else []) + entry.samples[:samples]
        first = 0 if entry.greedy is not None else 1
        chains = []
        for index, result in enumerate(results, first):
            answer = chain_answer(entry.task, entry.problem, result, index)
            correct = answer is not None and entry.task.score(entry.problem, answer) == 1.0
            chains.append(Chain(index, result.text.strip(), correct, answer))
        items.append(ProblemChains(pid, entry.task.cot_prompt(entry.problem), tuple(chains)))
    return items


def chain_keys(items: list[ProblemChains]) -> set[tuple[str, int]]:
    """(problem id, chain index) of every chain of the items: what a measurement reads from a store."""
    return {(item.problem_id, chain.index) for item in items for chain in item.chains}


def feature_settings(target, fingerprint: str, layers: tuple[int, ...]) -> dict:
    """What a store's features.json records: the target, its weights fingerprint, dtype, layers and rule."""
    return {"target": target.name, "target_fingerprint": fingerprint, "dtype": str(target.dtype).removeprefix("torch."),
            "layers": list(layers), "feature_rule": FEATURE_RULE}


class FeatureStore:
    def __init__(self, folder: Path, settings: dict) -> None:
        self.folder = folder
        self.settings = settings
        stored = folder / SETTINGS_FILE
        if stored.is_file():
            old = json.loads(stored.read_text())
            if old != settings:
                changed = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
                raise SeedTotError(f"{folder} holds features made with other settings ({', '.join(changed)}): "
                                   "give another folder, or the same target, dtype and layers.")

    @classmethod
    def open(cls, folder: Path) -> "FeatureStore":
        """A store written before, with the settings it recorded."""
        return cls(folder, json.loads((folder / SETTINGS_FILE).read_text()))

    def shards(self) -> list[Path]:
        return sorted(self.folder.glob("shard-*.pt"))

    def done(self) -> set[tuple[str, int]]:
        """(problem id, chain index) of every chain the store holds."""
        return {(row["problem_id"], row["chain_index"]) for shard in self.shards() for row in torch.load(shard)["rows"]}

    def append(self, rows: list[dict], features: torch.Tensor) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / SETTINGS_FILE).is_file():
            write_json_atomically(self.folder / SETTINGS_FILE, self.settings)
        path = self.folder / f"shard-{len(self.shards()):05d}.pt"
        partial = path.with_name(path.name + ".partial")
        torch.save({"rows": rows, "features": features.to(torch.float16)}, partial)
        os.replace(partial, path)

    def table(self, chains: set[tuple[str, int]] | None = None) -> StateTable:
        """The stored states, of the given (problem id, chain index) chains only when `chains` is given
        (a store may hold more chains than one measurement asks for)."""
        rows, features = [], []
        for shard in self.shards():
            data = torch.load(shard)
            keep, start = [], 0
            for row in data["rows"]:
                if chains is None or (row["problem_id"], row["chain_index"]) in chains:
                    rows.append(row)
                    keep.append(torch.arange(start, start + row["states"]))
                start += row["states"]
            if keep:
                features.append(data["features"][torch.cat(keep)])
        if not rows:
            raise SeedTotError(f"{self.folder} holds no features of the chains asked for yet.")
        problems, labels, chains, final, index = [], [], [], [], []
        for number, row in enumerate(rows):
            index += [row["chain_index"]] * row["states"]
            problems += [row["problem_id"]] * row["states"]
            labels += [row["correct"]] * row["states"]
            chains += [number] * row["states"]
            final += [False] * (row["states"] - 1) + [True]
        return StateTable(torch.cat(features), torch.tensor(labels), problems, torch.tensor(chains),
                          torch.tensor(final), tuple(self.settings["layers"]), torch.tensor(index))


def extract(store: FeatureStore, reader: FeatureReader, items: list[ProblemChains], per_shard: int = 4,
            progress: bool = True) -> int:
    """Read and store the features of every chain of the items the store lacks (a problem whose pool
    gained samples gets only its new chains); returns how many problems had chains to read."""
    done = store.done()
    todo = [(item, missing) for item in items
            if (missing := [chain for chain in item.chains if (item.problem_id, chain.index) not in done])]
    for first in tqdm(range(0, len(todo), per_shard), desc="judge features", unit="shard", disable=not progress):
        group = todo[first:first + per_shard]
        readings, rows = [], []
        for item, missing in group:
            for chain in missing:
                ends = reading_ends(chain.text, chain.answer)
                if not ends:  # an empty chain has no state
                    continue
                readings.append(Reading(item.message, chain.text, tuple(ends)))
                rows.append({"problem_id": item.problem_id, "chain_index": chain.index,
                             "correct": chain.correct, "states": len(ends)})
        if readings:
            features = reader.read(readings)
            store.append(rows, torch.cat(features))
    return len(todo)
