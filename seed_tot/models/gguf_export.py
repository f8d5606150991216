"""Write a small Qwen2 model and its byte-level tokenizer as a GGUF file llama.cpp can serve.

Used by the tests to start a real llama.cpp server from the tiny in-process models (no
download). Only what llama.cpp's `qwen2` architecture and `gpt2` (byte-level BPE) vocabulary
need is written: hyper-parameters, every tensor unchanged (float32 or float16), the token list
in byte-level form and the special token ids. Qwen2 uses NeoX-style rotary embeddings in
llama.cpp, the same rotate-half layout as transformers, so no tensor is permuted.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch

# transformers' Qwen2 parameter names -> llama.cpp's (per layer after "model.layers.N.").
_LAYER_TENSORS = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_GLOBAL_TENSORS = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_FILE_TYPES = {torch.float32: gguf.LlamaFileType.ALL_F32, torch.float16: gguf.LlamaFileType.MOSTLY_F16}


def gguf_tensor_name(hf_name: str) -> str:
    if hf_name in _GLOBAL_TENSORS:
        return _GLOBAL_TENSORS[hf_name]
    prefix, _, rest = hf_name.partition(".layers.")
    index, _, suffix = rest.partition(".")
    if prefix != "model" or suffix not in _LAYER_TENSORS:
        raise ValueError(f"no GGUF name for tensor {hf_name!r}")
    return f"blk.{int(index)}.{_LAYER_TENSORS[suffix]}"


def _tensor_array(name: str, tensor: torch.Tensor, dtype: torch.dtype) -> np.ndarray:
    # Norms and biases stay float32 (llama.cpp adds them in float32 either way).
    keep_float32 = tensor.ndim == 1
    return tensor.detach().to(torch.float32 if keep_float32 else dtype).cpu().numpy()


def _rope_theta(config) -> float:
    parameters = getattr(config, "rope_parameters", None) or {}
    return float(parameters.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def _write_tokenizer(writer: gguf.GGUFWriter, tokenizer) -> None:
    vocab = tokenizer.get_vocab()
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise ValueError("the tokenizer's ids are not contiguous from 0")
    special = set(tokenizer.all_special_tokens)
    types = [gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    # llama.cpp refuses a BPE vocabulary without merges; this one joins two special tokens, which
    # never sit side by side inside a word, so every byte stays its own token as in `tokenizer`.
    writer.add_token_merges([f"{tokens[-2]} {tokens[-1]}"])
    if tokenizer.eos_token_id is not None:
        writer.add_eos_token_id(tokenizer.eos_token_id)
    if tokenizer.pad_token_id is not None:
        writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_add_bos_token(False)


def write_qwen2_gguf(model, tokenizer, path: str | Path, dtype: torch.dtype = torch.float32) -> Path:
    """Write `model` (a transformers Qwen2ForCausalLM) and its byte-level `tokenizer` to `path`."""
    if dtype not in _FILE_TYPES:
        raise ValueError(f"GGUF export writes float32 or float16, not {dtype}")
    config = model.config
    path = Path(path)
    writer = gguf.GGUFWriter(str(path), arch="qwen2")
    writer.add_name("seed-tot tiny qwen2")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(_rope_theta(config))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_file_type(_FILE_TYPES[dtype])
    _write_tokenizer(writer, tokenizer)
    for name, tensor in model.state_dict().items():
        writer.add_tensor(gguf_tensor_name(name), _tensor_array(name, tensor, dtype))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
