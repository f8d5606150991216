"""Tiny deterministic draft/target pair built in-process (no download) for tests and smoke runs.

The target is a random-weight Qwen2-architecture model; the draft is the target with every
weight perturbed by seeded Gaussian noise (DRAFT_NOISE), so the two are correlated but not
equal: the target accepts many drafted tokens and rejects others, and tests exercise both paths.
Both share a byte-level tokenizer (256 byte tokens + end-of-text + pad).
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers.pre_tokenizers import ByteLevel
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
DRAFT_NOISE = 0.025  # relative weight noise of the draft; sets the acceptance rate


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer: every UTF-8 byte is one token, ids 0-255; then EOS=256, PAD=257."""
    alphabet = ByteLevel.alphabet()
    alphabet.sort()
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([EOS_TOKEN, PAD_TOKEN])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN)


def tiny_config(vocab_size: int, eos_token_id: int | None, pad_token_id: int | None) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        initializer_range=0.3,
        tie_word_embeddings=False,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
        attn_implementation="sdpa",
    )


def small_causal_lm(vocab_size: int, hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int,
                    eos_token_id: int, pad_token_id: int) -> Qwen2ForCausalLM:
    """A freshly initialised Qwen2-architecture model (tied embeddings) to train from scratch."""
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=1024,
        tie_word_embeddings=True, eos_token_id=eos_token_id, pad_token_id=pad_token_id, bos_token_id=None,
        attn_implementation="sdpa",
    ))


def _seeded_model(config: Qwen2Config, seed: int, dtype: torch.dtype) -> Qwen2ForCausalLM:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    return model.to(dtype).eval()


def _perturbed_copy(target: Qwen2ForCausalLM, seed: int, noise: float) -> Qwen2ForCausalLM:
    draft = Qwen2ForCausalLM(target.config).to(target.dtype).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for (name, p_draft), (_, p_target) in zip(draft.named_parameters(), target.named_parameters()):
            scale = p_target.float().std() if p_target.numel() > 1 else torch.tensor(0.0)
            if "norm" in name:
                scale = torch.tensor(0.0)
            delta = torch.randn(p_target.shape, generator=generator) * scale * noise
            p_draft.copy_((p_target.float() + delta).to(p_target.dtype))
    return draft


def build_tiny_pair(
    seed: int = 0,
    vocab_size: int | None = None,
    dtype: torch.dtype = torch.float32,
    noise: float = DRAFT_NOISE,
    attn_implementation: str = "sdpa",
):
    """Return (draft_model, target_model, tokenizer).

    With `vocab_size` given, the models use that vocabulary and no tokenizer (None): used by
    the distribution tests, which need a vocabulary small enough to count every outcome.
    """
    tokenizer = None if vocab_size is not None else byte_tokenizer()
    if tokenizer is not None:
        vocab_size = len(tokenizer)
        eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    else:
        eos, pad = None, None
    config = tiny_config(vocab_size, eos, pad)
    config._attn_implementation = attn_implementation
    target = _seeded_model(config, seed, dtype)
    draft = _perturbed_copy(target, seed + 1, noise)
    return draft, target, tokenizer
