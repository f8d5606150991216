"""The memory budget: sizes, the plan, the refusal before loading, and the admission bound of the
batched sessions (rows wait; outputs unchanged)."""

from __future__ import annotations

import pytest

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.memory import (
    GIB, MIB, RUNTIME_RESERVE, WORKER_RESERVE, ModelLoad, check_before_loading, kv_bytes_per_token, model_weight_bytes,
    parse_size, plan_memory, stored_weight_bytes,
)
from seed_tot.scheduling.session import admitted, drain, held_tokens


@pytest.mark.parametrize("text, size", [("8G", 8 * GIB), ("8GiB", 8 * GIB), ("512M", 512 * MIB), ("1.5g", int(1.5 * GIB)),
                                        ("2", 2 * GIB), ("100 MiB", 100 * MIB)])
def test_sizes_read_in_binary_units(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "eight", "4x", "0", "-1G"])
def test_a_bad_size_is_refused_in_one_sentence(text):
    with pytest.raises(ConfigError, match="give a"):
        parse_size(text)


def test_the_plan_splits_what_the_weights_leave():
    plan = plan_memory(10 * GIB, 3 * GIB, 28 * 1024, 1024)
    free = 10 * GIB - RUNTIME_RESERVE - 3 * GIB
    assert plan.prefix_cache_mb == 1024  # the wanted cache fits in its share
    assert plan.max_kv_tokens == int((free - 1024 * MIB) * 0.8 // (28 * 1024))
    small = plan_memory(6 * GIB, 3 * GIB, 28 * 1024, 1024)
    assert small.prefix_cache_mb < 1024 and small.max_kv_tokens < plan.max_kv_tokens


def test_a_budget_below_the_weights_and_one_row_is_refused_with_the_least_that_fits():
    with pytest.raises(ConfigError, match=r"cannot hold this run even one row.*at least 4\.\d GiB"):
        plan_memory(3 * GIB, 3 * GIB, 28 * 1024, 1024)


def test_a_tiny_budget_is_named_in_the_unit_it_was_given():
    with pytest.raises(ConfigError, match=r"--max-memory 1\.0 MiB cannot hold"):
        plan_memory(parse_size("1MB"), 3 * GIB, 28 * 1024, 1024)


def test_kv_per_token_from_a_config():
    config = {"num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "hidden_size": 1536}
    assert kv_bytes_per_token(config, 2) == 2 * 28 * 2 * 128 * 2


def test_a_saved_model_is_sized_from_its_file_headers_and_refused_before_loading(tiny_pair, tmp_path):
    _, target = tiny_pair
    target.model.save_pretrained(tmp_path)
    loaded = model_weight_bytes(target.model)
    assert stored_weight_bytes(tmp_path, 4) == pytest.approx(loaded, rel=0.01)
    with pytest.raises(ConfigError, match="cannot hold this run"):
        check_before_loading(RUNTIME_RESERVE, [ModelLoad(str(tmp_path), 4)])
    check_before_loading(2 * GIB, [ModelLoad(str(tmp_path), 4)])  # fits: no error


def test_every_process_that_loads_a_draft_counts_before_loading(tiny_pair, tmp_path):
    draft, target = tiny_pair
    target.model.save_pretrained(tmp_path / "target")
    draft.model.save_pretrained(tmp_path / "draft")
    one_row = 2048 * sum(kv_bytes_per_token(r.model.config.to_dict(), 4) for r in (draft, target))
    weights = stored_weight_bytes(tmp_path / "target", 4) + 3 * stored_weight_bytes(tmp_path / "draft", 4)
    least = RUNTIME_RESERVE + weights + 3 * WORKER_RESERVE + one_row / 0.8
    loads = [ModelLoad(str(tmp_path / "target"), 4), ModelLoad(str(tmp_path / "draft"), 4, copies=3)]
    check_before_loading(int(least) + MIB, loads, extra_processes=3)
    with pytest.raises(ConfigError, match="cannot hold this run"):
        check_before_loading(int(least) - MIB, loads, extra_processes=3)
    check_before_loading(int(least) - MIB, loads[:1])  # the target alone fits


def test_a_method_with_draft_workers_loads_no_draft_in_this_process():
    from seed_tot.distributed.spec import ExecutorSpec, model_names
    from seed_tot.scheduling.seed.worker import NamedDraft

    target, draft = ExecutorSpec(method="seed", target="tiny-target", draft="tiny-draft", dtype="float32",
                                 device="cpu").load_models()
    assert draft == NamedDraft("tiny-draft", dtype="float32", device="cpu")
    assert model_names(target, draft) == {"target": "tiny-target", "draft": "tiny-draft", "draft_dtype": "float32"}
    _, loaded = ExecutorSpec(method="batched-sd", target="tiny-target", draft="tiny-draft", dtype="float32",
                             device="cpu").load_models()
    assert loaded.model is not None  # a draft used in this process is loaded here


def _requests(prompts: list[list[int]], new_tokens: int, temperature: float) -> list[GenerationRequest]:
    config = DecodeConfig(max_new_tokens=new_tokens, temperature=temperature)
    return [GenerationRequest(prompt_ids=p, config=config, seed=11 + i) for i, p in enumerate(prompts)]


def test_admission_keeps_queue_order_within_the_budget_and_always_starts_an_empty_batch():
    queued = list(enumerate(_requests([[1] * 10, [2] * 10, [3] * 10], 10, 0.0)))
    assert held_tokens(queued[0][1]) == 20
    now, later = admitted(queued, [], 45)
    assert [t for t, _ in now] == [0, 1] and [t for t, _ in later] == [2]
    now, later = admitted(queued, [], 5)  # larger than the budget: runs alone
    assert len(now) == 1 and len(later) == 2
    assert admitted(queued, [], None) == (queued, [])


@pytest.mark.parametrize("method", ["batched-lookup", "batched"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_bounded_batch_holds_at_most_its_budget_and_decodes_the_same_tokens(tiny_pair, method, temperature):
    _, target = tiny_pair
    prompts = [[5 + i, 17, 33 + i, 8] * (2 + i % 3) for i in range(6)]
    requests = _requests(prompts, 24, temperature)
    free = drain(make_executor(method, target).session(), requests)
    budget = 2 * max(held_tokens(r) for r in requests)
    session = make_executor(method, target, max_kv_tokens=budget).session()
    tickets = session.add(requests)
    found, widest = {}, 0
    while session.busy:
        found.update(session.step())
        widest = max(widest, len(session.active))
        assert sum(held_tokens(row.request) for row in session.active) <= budget
    assert 1 <= widest <= 2
    assert [found[t].token_ids for t in tickets] == [r.token_ids for r in free]


def test_a_streamed_cast_loads_the_same_weights_as_transformers(tiny_pair, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from seed_tot.models.streamed_cast import load_streamed, needs_streamed_cast

    _, target = tiny_pair
    target.model.save_pretrained(tmp_path)
    assert needs_streamed_cast(tmp_path, torch.bfloat16) and not needs_streamed_cast(tmp_path, torch.float32)
    streamed = load_streamed(str(tmp_path), torch.bfloat16)
    reference = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    ours, theirs = streamed.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    ids = torch.tensor([[3, 14, 15, 92, 65]])
    assert torch.equal(streamed(ids).logits, reference(ids).logits)


def test_embedding_tables_stored_in_the_computing_dtype_are_mapped_not_read(tmp_path):
    """A run looks up a few thousand rows of a table that holds the whole vocabulary, so the table
    stays a view of the file, whose pages come into memory only when touched; the values and the
    model's outputs are those of transformers' own load."""
    import torch
    from transformers import AutoModelForCausalLM

    from seed_tot.models.streamed_cast import embedding_names, load_streamed, read_cast
    from seed_tot.models.tiny import build_tiny_pair

    _, model, _ = build_tiny_pair(seed=3, dtype=torch.bfloat16)
    model.save_pretrained(tmp_path)
    file_bytes = (tmp_path / "model.safetensors").stat().st_size
    names = embedding_names(model)
    assert names == {"model.embed_tokens.weight"}

    mapped = dict(read_cast(tmp_path, torch.bfloat16, mapped=names.__contains__))
    assert [n for n, t in mapped.items() if t.untyped_storage().nbytes() == file_bytes] == sorted(names)
    cast = dict(read_cast(tmp_path, torch.float32, mapped=names.__contains__))  # another dtype: read and cast
    assert all(t.untyped_storage().nbytes() < file_bytes for t in cast.values())

    streamed = load_streamed(str(tmp_path), torch.bfloat16)
    assert streamed.get_input_embeddings().weight.untyped_storage().nbytes() == file_bytes
    reference = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    ours, theirs = streamed.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    ids = torch.tensor([[3, 14, 15, 92, 65]])
    assert torch.equal(streamed(ids).logits, reference(ids).logits)
