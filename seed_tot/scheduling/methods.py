"""Every method (`--method`, `make_executor`) in one table: what builds its executor and what the
rest of the package may ask about it.

The CLI's choices and help, the run configuration's defaults, the Python API, Ray, the API server
and the resume check read these records; no other module tests a method's name.

To add a method, write its builder (seed_tot/scheduling/builders.py: `build(method, target, draft,
settings) -> Executor`) and add one `Method` below. tests/test_methods.py checks each record
against the executor its builder makes.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from seed_tot.config import draft_shape
from seed_tot.errors import ConfigError

# Problems searched at once when --concurrency is not given. The batched methods decode every
# problem's rows in one forward, whose cost per row falls with its width (measured:
# docs/many_problems.md#throughput-12-problems-at-c--1-4-8-16); a server needs enough requests in
# flight to fill its slots; the other methods run requests one after another, so more problems at
# once would only delay each one's result.
BATCHED_CONCURRENCY = 16
ENGINE_CONCURRENCY = 4
SERIAL_CONCURRENCY = 1

# Draft tokens per batched-lookup step over all rows. A drafted token costs a slot of the forward
# whether accepted or not, so it pays only while its acceptance beats its share of the forward's
# cost, which falls as rows are added: with lookup's acceptance, k=2 up to 4 rows, k=1 up to 8,
# none beyond (measured: docs/many_problems.md#what-a-wide-forward-costs).
LOOKUP_DRAFT_SLOT_BUDGET = 8

CHAIN_OF_4 = (1, 1, 1, 1)
TREE_221 = (2, 2, 1)

BATCHED_SETTINGS = frozenset({"share_prefix", "compact_slack", "prefix_cache_mb", "max_kv_tokens"})
SPECULATION_SETTINGS = frozenset({"k", "adaptive_k", "max_k"})
SEED_SETTINGS = frozenset({
    "k", "k_config", "num_workers",  # and every SeedOptions field:
    "discipline", "batched_verify", "share_prefix", "adaptive_k", "max_depth", "target_threads", "worker_threads",
    "start_timeout_s", "stall_timeout_s", "inject_fault",
})


@dataclass(frozen=True)
class Method:
    """One method: how its executor is built and what it can do."""

    name: str
    summary: str  # what runs, in a few words (--help)
    build: str  # "module:function" that builds its executor, imported on first use
    settings: frozenset[str] = frozenset()  # the settings it takes (--method-option NAME=VALUE)
    defaults: Mapping[str, Any] = field(default_factory=dict, compare=False)  # settings it gets unless given
    k_config: tuple[int, ...] | None = None  # its default draft shape (--k, --k-config); None: it drafts none
    needs_draft: bool = False  # a draft model is loaded beside the target
    optional_draft: bool = False  # --with-draft adds one (llama.cpp's own speculative decoding)
    draft_workers: bool = False  # its draft runs in `num_workers` processes (--workers, default: the thoughts)
    can_score: bool = True  # reads next-token log-probabilities (--value-mode logits, --thought-mode choose)
    engine: bool = False  # its tokens come from an inference server, not from a model loaded here
    connects: bool = False  # to a server already running at --server-url
    continuous_batching: bool = False  # requests join and leave its decode batch (--batching continuous)
    concurrency: int = SERIAL_CONCURRENCY  # problems searched at once unless --concurrency says
    greedy_only: bool = False  # decodes greedily only (approximate by design)
    decoder: str | None = None  # a single-sequence decoder "module:function" run request by request

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))

    @property
    def in_process(self) -> bool:
        """Its models are loaded in this process (by name: every Ray actor can load them too)."""
        return not self.engine

    @property
    def memory_bounded(self) -> bool:
        """Its rows and prefix cache are sized to the memory budget (--max-memory)."""
        return "max_kv_tokens" in self.settings

    def builder(self) -> Callable:
        """The function that builds its executor: (method, target, draft, settings) for an in-process
        method, (EngineSettings) for an engine."""
        module, name = self.build.split(":")
        return getattr(importlib.import_module(module), name)

    def decode_function(self) -> Callable:
        module, name = self.decoder.split(":")
        return getattr(importlib.import_module(module), name)


BUILDERS = "seed_tot.scheduling.builders"

_RECORDS = [
    Method("ar", "plain autoregressive decoding, request after request", f"{BUILDERS}:build_ar"),
    Method("sd", "serial speculative decoding, a chain of k draft tokens", f"{BUILDERS}:build_serial_speculative",
           settings=frozenset({"k", "k_config"}), k_config=CHAIN_OF_4, needs_draft=True),
    Method("mcsd", "serial speculative decoding with a token tree (--k-config)", f"{BUILDERS}:build_serial_speculative",
           settings=frozenset({"k", "k_config"}), k_config=TREE_221, needs_draft=True),
    Method("batched", "autoregressive decoding of the requests in one padded batch", f"{BUILDERS}:build_batched",
           settings=BATCHED_SETTINGS, continuous_batching=True, concurrency=BATCHED_CONCURRENCY),
    Method("batched-sd", "speculative decoding batched across the requests", f"{BUILDERS}:build_batched_speculative",
           settings=BATCHED_SETTINGS | SPECULATION_SETTINGS | {"k_config"}, k_config=CHAIN_OF_4, needs_draft=True,
           continuous_batching=True, concurrency=BATCHED_CONCURRENCY),
    Method("batched-mcsd", "batched-sd with a token tree", f"{BUILDERS}:build_batched_speculative",
           settings=BATCHED_SETTINGS | SPECULATION_SETTINGS | {"k_config"}, k_config=TREE_221, needs_draft=True,
           continuous_batching=True, concurrency=BATCHED_CONCURRENCY),
    Method("batched-lookup", "batched speculation with n-gram lookup drafts, no draft model",
           f"{BUILDERS}:build_batched_lookup",
           settings=BATCHED_SETTINGS | SPECULATION_SETTINGS | {"max_ngram", "min_ngram", "draft_slot_budget"},
           defaults={"draft_slot_budget": LOOKUP_DRAFT_SLOT_BUDGET}, k_config=(1, 1),
           continuous_batching=True, concurrency=BATCHED_CONCURRENCY),
    Method("seed", "the SEED paper's draft processes and first-come-first-served verify queue",
           f"{BUILDERS}:build_seed",
           settings=SEED_SETTINGS, defaults={"num_workers": 3}, k_config=(1, 1, 1), needs_draft=True,
           draft_workers=True, can_score=False, continuous_batching=True),
    Method("seed-mcsd", "SEED with token trees", f"{BUILDERS}:build_seed",
           settings=SEED_SETTINGS, defaults={"num_workers": 3}, k_config=TREE_221, needs_draft=True,
           draft_workers=True, can_score=False, continuous_batching=True),
    Method("lookahead", "lookahead decoding, request by request", f"{BUILDERS}:build_serial_decoder",
           settings=frozenset({"window", "ngram", "candidates", "pool_per_key", "seed_pool_from_prompt"}),
           decoder="seed_tot.decoding.lookahead:lookahead_decode"),
    Method("jacobi", "Jacobi decoding, request by request", f"{BUILDERS}:build_serial_decoder",
           settings=frozenset({"block_size"}), decoder="seed_tot.decoding.jacobi:jacobi_decode"),
    Method("fastcot", "FastCoT, request by request (greedy, approximate)", f"{BUILDERS}:build_serial_decoder",
           settings=frozenset({"window", "max_iterations", "trigger", "check_every", "check_answer_tokens",
                               "max_answer_tokens", "init_ids"}),
           greedy_only=True, decoder="seed_tot.decoding.fastcot:fastcot_decode"),
    Method("cllm", "Jacobi decoding of a model trained by `seed-tot train cllm` (checkpoint=...)",
           f"{BUILDERS}:build_serial_decoder", settings=frozenset({"checkpoint", "block_size"}),
           decoder="seed_tot.decoding.cllm:cllm_decode"),
    Method("bita", "BiTA, the target drafting with prompt/mask tokens from `seed-tot train bita` (checkpoint=...)",
           f"{BUILDERS}:build_bita", settings=frozenset({"checkpoint", "candidates", "depth"})),
    Method("hf-generate", "transformers' generate(), request after request (the usual baseline)",
           f"{BUILDERS}:build_hf_generate", can_score=False),
    Method("llama-cpp", "llama.cpp's server started for the run on the target's GGUF file",
           "seed_tot.engines.setup:start_llama_cpp", optional_draft=True, can_score=False, engine=True,
           continuous_batching=True, concurrency=ENGINE_CONCURRENCY),
    Method("server", "a running llama.cpp, vLLM or SGLang server (--server-url)",
           "seed_tot.engines.setup:connect_server", can_score=False, engine=True, connects=True,
           continuous_batching=True, concurrency=ENGINE_CONCURRENCY),
]
METHODS: Mapping[str, Method] = MappingProxyType({m.name: m for m in _RECORDS})
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)
CONCURRENCY_DEFAULTS = (  # --help's words for the defaults above
    f"{BATCHED_CONCURRENCY} for the batched methods (a wider forward costs less per row), {ENGINE_CONCURRENCY} for the "
    f"servers ({', '.join(m.name for m in _RECORDS if m.engine)}), {SERIAL_CONCURRENCY} for the others")

# The default is "auto": on a CPU the fastest path for the target, by a timed probe cached per
# machine (seed_tot/calibration); in process (batched-lookup) on a GPU, for the tiny test models
# and on Ray actors. Where no measurement is cached and none may be made (--print-config), "auto"
# follows the CPU-flags rule below: llama-cpp for a GGUF target on a CPU without native 16-bit
# arithmetic, else batched-lookup.
AUTO = "auto"
DEFAULT_METHOD = AUTO
IN_PROCESS_DEFAULT_METHOD = "batched-lookup"
AUTO_CPU_ENGINE = "llama-cpp"


def method_named(name: str) -> Method:
    """The record of `name`; an unknown name is refused in one sentence that lists the methods."""
    if name not in METHODS:
        raise ConfigError(f"Unknown method {name!r}: use one of {', '.join(METHOD_NAMES)}.")
    return METHODS[name]


def names_where(test: Callable[[Method], bool]) -> list[str]:
    """The methods whose record passes `test`, in table order (for messages)."""
    return [m.name for m in _RECORDS if test(m)]


def checked_settings(method: Method, settings: dict) -> dict:
    """`settings` with the method's defaults added and its draft shape resolved (k or k_config ->
    k_config); a setting the method does not have, or a bad draft shape, is refused in one sentence."""
    unknown = sorted(set(settings) - method.settings)
    if unknown:
        valid = ", ".join(sorted(method.settings)) or "none"
        raise ConfigError(f"Method {method.name!r} has no option {', '.join(unknown)}: its options are {valid}.")
    settings = dict(method.defaults) | settings
    if method.k_config is not None:
        settings["k_config"] = draft_shape(settings.pop("k", None), settings.pop("k_config", None), method.k_config)
    return settings


def resolve_method(name: str, target: str, tiny: bool, device: str, on_ray: bool = False) -> str:
    """The method a run uses: `name`, or the CPU-flags rule for "auto" where no measurement
    decided it (seed_tot/cli/run_config.py: resolve_auto). Ray actors, the tiny models and a GPU
    run in process; on a CPU with native 16-bit arithmetic the in-process executor (bfloat16)
    answered 1.9-2.0x sooner than a tuned llama.cpp (docs/engines.md#comparing-engines); without
    it the in-process target runs in float32 and a GGUF target runs on llama.cpp."""
    if name != AUTO:
        return method_named(name).name
    if on_ray or tiny or device not in ("auto", "cpu") or not runs_on_llama_cpp(target):
        return IN_PROCESS_DEFAULT_METHOD
    from seed_tot.models.loading import cpu_supports_bf16, cpu_supports_fp16

    if device == "auto":
        import torch

        if torch.cuda.is_available():
            return IN_PROCESS_DEFAULT_METHOD
    if cpu_supports_bf16() or cpu_supports_fp16():
        return IN_PROCESS_DEFAULT_METHOD
    return AUTO_CPU_ENGINE


def runs_on_llama_cpp(target: str) -> bool:
    """A GGUF target (a default alias or a .gguf file) where llama.cpp's wheel is installed."""
    import importlib.util

    from seed_tot.models.registry import ALIASES

    gguf = target in ALIASES or target.endswith(".gguf")
    return gguf and importlib.util.find_spec("xllamacpp") is not None


def method_help() -> str:
    """--method's help: auto, then every method's summary."""
    listed = "; ".join(f"{m.name}: {m.summary}" for m in _RECORDS)
    return (
        "Executor for every tree expansion. auto: on a CPU, the path that ran the target fastest on this machine, "
        "timed once per machine and target and cached (`seed-tot calibrate`): in process in each dtype, or "
        f"{AUTO_CPU_ENGINE} for a GGUF target; {IN_PROCESS_DEFAULT_METHOD} on a GPU and for --tiny "
        f"(docs/engines.md#the-path-chosen-by-measurement). {listed}. "
        "--method is the one way to choose the inner per-node decoders; docs/executors.md lists each method's settings."
    )
