"""Serial executors: the requests of a batch run one after another through one decoder (AR, SD, MCSD)."""

from __future__ import annotations

import time
from typing import Callable

from seed_tot.config import DecodeConfig, parse_k_config
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.drafters import speculative_decode
from seed_tot.decoding.output import DecodeOutput
from seed_tot.models.loading import check_pair
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationRequest, GenerationResult, scoring_refusal
from seed_tot.runtime import ModelRunner
from seed_tot.scheduling.scoring import is_scoring, scored_result
from seed_tot.requests import cancelled_result

DecodeFn = Callable[[list[int], DecodeConfig, int], DecodeOutput]


class SerialExecutor:
    """Runs each request with `decode_fn(prompt_ids, config, seed)`; text = `detokenize(token_ids)`.
    With a `scorer` (the target), scoring requests (score_tokens) run one forward over the prompt."""

    def __init__(
        self, name: str, decode_fn: DecodeFn, detokenize: Callable[[list[int]], str], scorer: ModelRunner | None = None
    ):
        self.name = name
        self.decode_fn = decode_fn
        self.detokenize = detokenize
        self.scorer = scorer

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        if self.scorer is None and any(is_scoring(r) for r in requests):
            raise ConfigError(scoring_refusal(self.name))
        results = []
        for request in requests:
            started = time.perf_counter()
            if request.cancel is not None and request.cancel.is_set():  # the rest of a cancelled batch never runs
                results.append(cancelled_result(request, len(results)))
                continue
            if is_scoring(request):
                logits, _ = self.scorer.prefill(request.prompt_ids)
                results.append(scored_result(request, logits, time.perf_counter() - started))
                continue
            out = self.decode_fn(request.prompt_ids, request.config, request.seed)
            out.stats.wall_seconds = time.perf_counter() - started
            results.append(
                GenerationResult(
                    request_id=request.request_id,
                    token_ids=out.token_ids,
                    text=self.detokenize(out.token_ids),
                    finish_reason=out.finish_reason,
                    stats=out.stats,
                )
            )
        return results

    def close(self) -> None:
        return None


def ar_executor(target: ModelRunner) -> SerialExecutor:
    def decode(prompt_ids: list[int], config: DecodeConfig, seed: int) -> DecodeOutput:
        return autoregressive_decode(target, prompt_ids, config, seed)

    return SerialExecutor("ar", decode, target.decode, scorer=target)


def mcsd_executor(draft: ModelRunner, target: ModelRunner, k_config: tuple[int, ...] | str = (2, 2, 1)) -> SerialExecutor:
    check_pair(draft, target)
    shape = parse_k_config(k_config)

    def decode(prompt_ids: list[int], config: DecodeConfig, seed: int) -> DecodeOutput:
        return speculative_decode(draft, target, prompt_ids, config, shape, seed)

    return SerialExecutor(f"mcsd{shape}", decode, target.decode, scorer=target)
