"""Shared pieces of the engine tests: real llama.cpp servers on the tiny pair written as GGUF."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers.pre_tokenizers import ByteLevel
from transformers import PreTrainedTokenizerFast

from seed_tot.config import DecodeConfig
from seed_tot.requests import GenerationRequest

xllamacpp = pytest.importorskip("xllamacpp")

from seed_tot.engines.connect import connect  # noqa: E402
from seed_tot.engines.embedded import LlamaServer, LlamaServerSettings  # noqa: E402
from seed_tot.engines.server_executor import ServerExecutor  # noqa: E402
from seed_tot.engines.setup import write_tiny_gguf  # noqa: E402
from seed_tot.models.tiny import byte_tokenizer  # noqa: E402

# One llama.cpp thread: on a shared 2-core machine its threads wait for each other at every
# operation, and a 2-thread server can run the tiny model 40x slower than a 1-thread one.
THREADS = 1
PROMPTS = [
    "Question: what is 2+3?\nAnswer:",
    "The quick brown fox",
    "Tree of thoughts, step 1:",
    "Hi ",
    "Let us think step by step about 17 * 3.",
    "x",
]


def tiny_gguf(directory: Path, name: str = "tiny-target") -> str:
    return str(write_tiny_gguf(name, directory))


@contextmanager
def tiny_server(directory: Path, slots: int = 4, draft: bool = False):
    settings = LlamaServerSettings(
        model=tiny_gguf(directory), draft=tiny_gguf(directory, "tiny-draft") if draft else None,
        slots=slots, ctx_per_slot=4096, threads=THREADS,
    )
    with LlamaServer(settings) as server:
        yield server


def executor_for(url: str, parallel: int = 4, **options) -> ServerExecutor:
    tokenizer = byte_tokenizer()
    return ServerExecutor(connect(url, tokenizer), tokenizer, parallel=parallel, **options)


def requests_for(config: DecodeConfig, seeds=None) -> list[GenerationRequest]:
    tokenizer = byte_tokenizer()
    seeds = seeds or range(len(PROMPTS))
    return [
        GenerationRequest(tokenizer.encode(prompt, add_special_tokens=False), config, seed, f"r{i}")
        for i, (prompt, seed) in enumerate(zip(PROMPTS, seeds))
    ]


def reversed_byte_tokenizer() -> PreTrainedTokenizerFast:
    """The tiny byte tokenizer with its byte ids in reverse order: same texts, other ids."""
    alphabet = sorted(ByteLevel.alphabet(), reverse=True)
    backend = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(["<|endoftext|>", "<|pad|>"])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>", pad_token="<|pad|>")
