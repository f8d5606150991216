"""A scripted test executor: replies are computed from the prompt text and the request seed,
and every batch it receives is recorded. It stands in for a model in tests of search logic."""

from __future__ import annotations

from typing import Callable

from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats

Reply = Callable[[str, GenerationRequest], str]


class ScriptedExecutor:
    name = "scripted"

    def __init__(self, tokenizer, reply: Reply, events: bool = False):
        self.tokenizer = tokenizer
        self.reply = reply
        self.batches: list[list[GenerationRequest]] = []
        self.prompts: list[list[str]] = []
        self.emit_events = events
        self.last_events: list[dict] | None = None
        self.closed = False

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        self.batches.append(list(requests))
        prompts = [self.tokenizer.decode(r.prompt_ids) for r in requests]
        self.prompts.append(prompts)
        results = []
        for prompt, request in zip(prompts, requests):
            text = self.reply(prompt, request)
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            stats = GenerationStats(new_tokens=len(ids), target_forwards=len(ids), wall_seconds=0.001)
            results.append(GenerationResult(request.request_id, ids, text, "eos", stats))
        if self.emit_events:
            self.last_events = [
                {"kind": "verify", "request": r.request_id, "tokens": len(res.token_ids)}
                for r, res in zip(requests, results)
            ]
        return results

    def close(self) -> None:
        self.closed = True


class ScoringByModel:
    """Scoring requests (score_tokens) go to a real executor; every other reply is scripted by
    `reply(request)`. Every batch it receives is recorded."""

    name = "scoring-by-model"

    def __init__(self, executor, reply: Callable[[GenerationRequest], str]):
        self.executor = executor
        self.reply = reply
        self.batches: list[list[GenerationRequest]] = []

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        self.batches.append(list(requests))
        scored = iter(self.executor.run([r for r in requests if r.score_tokens is not None]))
        return [next(scored) if r.score_tokens is not None
                else GenerationResult(r.request_id, [1], self.reply(r), "eos") for r in requests]

    def close(self) -> None:
        self.executor.close()
