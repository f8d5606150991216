"""A judge beside an engine loads only the target layers it reads, and rates states exactly as a
judge on the whole loaded target does."""

from __future__ import annotations

import pytest
import torch
from value_heads import tiny_value_head

from seed_tot.errors import ConfigError
from seed_tot.models.fingerprint import weights_fingerprint
from seed_tot.models.loading import load_model
from seed_tot.runtime.packed_linear import packing_works
from seed_tot.values.judge import LearnedJudge, judge_record
from seed_tot_tasks.gsm8k import Gsm8kTask

STATES = ["First, 3 + 4 = 7.\n", "First, 3 + 4 = 7.\nSo the answer is 7.", ""]


@pytest.fixture(scope="module")
def saved_target(tmp_path_factory):
    """The tiny target saved as a transformers model folder (safetensors + tokenizer)."""
    folder = tmp_path_factory.mktemp("tiny-target")
    target = load_model("tiny-target", dtype="float32")
    target.model.save_pretrained(folder)
    target.tokenizer.save_pretrained(folder)
    return target, folder


def test_a_judge_beside_an_engine_reads_only_its_layers_and_rates_as_the_whole_target(saved_target, tmp_path):
    target, folder = saved_target
    head = tiny_value_head(target, tmp_path / "head.safetensors")  # layer 1 of 2
    whole = LearnedJudge.load(load_model(str(folder), dtype="float32"), head)
    beside = LearnedJudge.beside_engine(str(folder), dtype="float32", device="cpu", path=head)

    model = beside.reader.target.model
    layers = model.get_decoder().layers
    assert all(not p.is_meta for p in layers[0].parameters())
    assert any(p.is_meta for p in layers[1].parameters()) and model.lm_head.weight.is_meta
    assert weights_fingerprint(model) == weights_fingerprint(target.model)
    assert judge_record(beside, str(head))["weights_loaded"] < 1.0 == judge_record(whole, str(head))["weights_loaded"]

    task = Gsm8kTask()
    problem = task.load()[0]
    answers = [None, "7", None]
    expected = whole.values(task, problem, STATES, answers)
    got = beside.values(task, problem, STATES, answers)
    assert torch.allclose(torch.tensor(got), torch.tensor(expected), atol=1e-6)


@pytest.mark.skipif(not packing_works(torch.bfloat16), reason="this CPU packs no bfloat16 linear layers")
def test_a_bfloat16_judge_beside_an_engine_packs_the_layers_it_reads_as_the_whole_target_does(saved_target, tmp_path):
    _, folder = saved_target
    whole_target = load_model(str(folder), dtype="bfloat16")
    head = tiny_value_head(whole_target, tmp_path / "head.safetensors")  # a head for the bfloat16 weights
    whole = LearnedJudge.load(whole_target, head)
    beside = LearnedJudge.beside_engine(str(folder), dtype="bfloat16", device="cpu", path=head)
    assert 0 < beside.reader.target.packed_layers < whole.reader.target.packed_layers  # layer 1's, not layer 2's
    assert judge_record(beside, str(head))["weights_loaded"] < 1.0
    task = Gsm8kTask()
    problem = task.load()[0]
    expected = whole.values(task, problem, STATES)
    assert beside.values(task, problem, STATES) == pytest.approx(expected, abs=1e-6)


def test_a_judge_beside_an_engine_without_a_head_for_its_target_says_how_to_train_one(saved_target):
    _, folder = saved_target
    with pytest.raises(ConfigError, match="No value head ships .*seed-tot train value"):
        LearnedJudge.beside_engine(str(folder), dtype="float32", device="cpu")


@pytest.mark.skipif(not packing_works(torch.bfloat16), reason="this CPU packs no bfloat16 linear layers")
def test_a_judge_beside_an_engine_keeps_a_stored_bfloat16_embedding_table_in_the_file(tmp_path):
    """A run reads a few thousand of the table's rows: the rest need not be in memory."""
    from seed_tot.models.tiny import build_tiny_pair

    folder = tmp_path / "bf16-target"
    _, model, tokenizer = build_tiny_pair(dtype=torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    target = load_model(str(folder), dtype="bfloat16")
    head = tiny_value_head(target, tmp_path / "head.safetensors")
    beside = LearnedJudge.beside_engine(str(folder), dtype="bfloat16", device="cpu", path=head)
    table = beside.reader.target.model.get_input_embeddings().weight
    assert table.untyped_storage().nbytes() == (folder / "model.safetensors").stat().st_size
    assert beside.reader.target.packed_layers > 0
    whole = LearnedJudge.load(target, head)
    task = Gsm8kTask()
    problem = task.load()[0]
    assert beside.values(task, problem, STATES) == pytest.approx(whole.values(task, problem, STATES), abs=1e-6)
