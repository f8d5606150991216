"""CLLM on the tiny model: trajectories are the model's own Jacobi iteration, training lowers the
loss and resumes exactly, checkpoints round-trip, and --method cllm decodes the trained model's
greedy output token for token (float32)."""

import importlib.util
import json
import random

import pytest
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.cllm import cllm_decode, trained_runner
from seed_tot.errors import ConfigError
from seed_tot.models.checkpoints import apply_checkpoint, resolve_checkpoint
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.runtime import ModelRunner
from seed_tot.scheduling.factory import make_executor
from seed_tot.training.cllm_collect import collect_to_file, read_blocks
from seed_tot.training.cllm_loss import cllm_loss, forward_kl
from seed_tot.training.cllm_trajectory import collect_trajectories
from seed_tot.training.cllm_train import TrainSettings, train_cllm

PROMPTS = [list(b"Question: 12 apples and 7 pears. "), list(b"The sum of 3 and 4 is "), list(b"abcabcabc ")]
has_peft = importlib.util.find_spec("peft") is not None


def fresh_target() -> ModelRunner:
    _, target, tokenizer = build_tiny_pair(seed=0)
    return ModelRunner(target, tokenizer, "tiny-target")


def naive_jacobi_states(model, context: list[int], first: list[int]) -> list[list[int]]:
    """Plain Jacobi iteration without a cache: every state until the fixed point."""
    states, state = [first], first
    while True:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([context + state])).logits[0]
        update = logits[len(context) - 1 : len(context) - 1 + len(state)].argmax(-1).tolist()
        if update == state:
            return states
        states.append(update)
        state = update


@pytest.mark.parametrize("block_size", [2, 5, 8])
def test_fixed_points_are_the_greedy_output(block_size):
    target = fresh_target()
    for prompt in PROMPTS:
        blocks = collect_trajectories(target, prompt, block_size, 30)
        expected = autoregressive_decode(target, prompt, DecodeConfig(max_new_tokens=30)).token_ids
        assert [t for b in blocks for t in b.fixed_point] == expected
        generated = []
        for block in blocks:
            assert block.context_ids == prompt + generated
            assert all(len(s) == len(block.fixed_point) for s in block.states) and block.forwards == len(block.states)
            generated += block.fixed_point


def test_states_are_the_plain_jacobi_iteration():
    target = fresh_target()
    checked = 0
    for prompt in PROMPTS:
        for block in collect_trajectories(target, prompt, 6, 24):
            naive = naive_jacobi_states(target.model, block.context_ids, block.states[0])
            assert naive[-1] == block.fixed_point
            assert block.states == naive[: len(block.states)]  # committing converged tokens saves forwards, changes no state
            checked += len(block.states)
    assert checked > 10


def test_forward_kl_is_zero_only_for_equal_distributions():
    logits = torch.randn(3, 11)
    assert forward_kl(logits, logits).item() == pytest.approx(0.0, abs=1e-6)
    assert forward_kl(logits, logits + torch.randn(3, 11)).item() > 1e-3  # negative control


def blocks_of(target, block_size=4, max_new_tokens=16):
    return [b for p in PROMPTS for b in collect_trajectories(target, p, block_size, max_new_tokens, prompt_id=str(p))]


def total_loss(model, blocks) -> float:
    with torch.no_grad():
        return sum(cllm_loss(model, b, random.Random(0)).total.item() for b in blocks)


def test_training_lowers_the_loss(tmp_path):
    target = fresh_target()
    blocks = blocks_of(target)
    before = total_loss(target.model, blocks)
    model = train_cllm(target.model, blocks, tmp_path, TrainSettings(steps=len(blocks) * 2, lr=3e-3, lora=False), {}, progress=False)
    assert total_loss(model, blocks) < 0.9 * before
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == len(blocks) * 2 and all(row["consistency"] >= 0 for row in log)


def test_training_resumes_where_it_stopped(tmp_path):
    settings = TrainSettings(steps=6, lr=3e-3, lora=False, save_every=3)
    straight = train_cllm(fresh_target().model, blocks_of(fresh_target()), tmp_path / "a", settings, {}, progress=False)
    train_cllm(fresh_target().model, blocks_of(fresh_target()), tmp_path / "b", TrainSettings(steps=3, lr=3e-3, lora=False), {}, progress=False)
    resumed = train_cllm(fresh_target().model, blocks_of(fresh_target()), tmp_path / "b", settings, {}, progress=False)
    assert len((tmp_path / "b" / "train_log.jsonl").read_text().splitlines()) == 6
    for (name, a), b in zip(straight.named_parameters(), resumed.parameters()):
        assert torch.allclose(a, b, atol=1e-6), name
    untrained = fresh_target().model
    assert not all(torch.equal(a, b) for a, b in zip(straight.parameters(), untrained.parameters()))  # negative control


def trained_checkpoint(path, lora: bool):
    target = fresh_target()
    settings = TrainSettings(steps=12, lr=2e-2 if lora else 1e-2, lora=lora, lora_r=4, lora_alpha=8)
    model = train_cllm(target.model, blocks_of(target), path, settings, {"method": "cllm", "base_model": "tiny-target", "block_size": 4}, progress=False)
    return model


def test_full_checkpoint_round_trip(tmp_path):
    model = trained_checkpoint(tmp_path, lora=False)
    fresh = fresh_target().model
    apply_checkpoint(fresh, resolve_checkpoint(str(tmp_path)))
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name


@pytest.mark.skipif(not has_peft, reason="LoRA training needs peft (pip install 'seed-tot[train]')")
def test_lora_checkpoint_merges_into_the_same_model(tmp_path):
    peft_model = trained_checkpoint(tmp_path, lora=True)
    merged = fresh_target().model
    apply_checkpoint(merged, resolve_checkpoint(str(tmp_path)))
    ids = torch.tensor([PROMPTS[0]])
    with torch.no_grad():
        expected, got, base = peft_model(input_ids=ids).logits, merged(input_ids=ids).logits, fresh_target().model(input_ids=ids).logits
    assert torch.allclose(expected, got, atol=1e-4)
    assert not torch.allclose(base, got, atol=1e-3)  # negative control: the adapter changed the model


def test_cllm_decoding_is_the_trained_models_greedy_output(tmp_path):
    trained_checkpoint(tmp_path, lora=False)
    base = fresh_target()
    trained = trained_runner(base, str(tmp_path))
    differs = 0
    for prompt in PROMPTS + [list(b"x"), list(b"Once upon a time")]:
        config = DecodeConfig(max_new_tokens=40)
        out = cllm_decode(base, prompt, config, checkpoint=str(tmp_path), block_size=6)
        assert out.token_ids == autoregressive_decode(trained, prompt, config).token_ids
        differs += out.token_ids != autoregressive_decode(base, prompt, config).token_ids
    assert differs > 0  # negative control: the base model's greedy output is a different answer
    executor = make_executor("cllm", base, checkpoint=str(tmp_path), block_size=4)
    assert executor is not None


def test_bad_cllm_input_gets_one_sentence(tmp_path):
    base = fresh_target()
    with pytest.raises(ConfigError, match="checkpoint"):
        cllm_decode(base, PROMPTS[0], DecodeConfig(max_new_tokens=4))
    with pytest.raises(ConfigError, match="No checkpoint"):
        cllm_decode(base, PROMPTS[0], DecodeConfig(max_new_tokens=4), checkpoint=str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="2 or more"):
        collect_trajectories(base, PROMPTS[0], 1, 8)
    from seed_tot.cli.train_cllm import parse_rows

    assert parse_rows("301-1319") == (301, 1319)
    with pytest.raises(ConfigError, match="evaluation"):
        parse_rows("250-400")


def test_collection_resumes_and_drops_a_cut_line(tmp_path):
    target = fresh_target()
    path = tmp_path / "t.jsonl"
    prompts = [(f"p{i}", p) for i, p in enumerate(PROMPTS)]
    first = collect_to_file(target, prompts[:2], path, 4, 12, progress=False)
    with open(path, "a") as f:
        f.write('{"prompt_id": "p2", "cont')  # an interrupted write
    calls = []
    original = collect_trajectories

    def counting(runner, ids, *args):
        calls.append(ids)
        return original(runner, ids, *args)

    import seed_tot.training.cllm_collect as module

    module.collect_trajectories = counting
    try:
        everything = collect_to_file(target, prompts, path, 4, 12, progress=False)
    finally:
        module.collect_trajectories = original
    assert calls == [PROMPTS[2]]
    assert read_blocks(path) == everything and len(everything) > len(first)


def test_convergence_counts_on_a_handmade_trajectory():
    from seed_tot.training.cllm_metrics import block_counts
    from seed_tot.training.cllm_trajectory import BlockTrajectory

    y = [1, 2, 3, 4, 5]
    # forward 1 fixes token 0; token 3 is right from state 1 on while token 1 is wrong (stationary);
    # forward 2 fixes tokens 1-3 at once; forward 3 the last one.
    states = [[9, 9, 9, 9, 9], [1, 8, 8, 4, 8], [1, 2, 3, 4, 7]]
    counts = block_counts(BlockTrajectory("p", [0], 1, states, y, 3))
    assert counts == {"tokens": 5, "forwards": 3, "max_fast_forward": 3, "stationary": 1}
    broken = [[9, 9, 9, 9, 9], [1, 8, 8, 4, 8], [1, 2, 3, 9, 7]]  # token 3 lost again: not stationary
    assert block_counts(BlockTrajectory("p", [0], 1, broken, y, 3))["stationary"] == 0


def test_train_cllm_command_runs_resumes_and_refuses_evaluation_rows(tmp_path):
    from click.testing import CliRunner

    from seed_tot.cli import main

    args = ["train", "cllm", "--model", "tiny", "--out", str(tmp_path / "ck"), "--limit", "2", "--block-size", "4",
            "--max-new-tokens", "8", "--full", "--threads", "1"]
    first = CliRunner().invoke(main, args + ["--steps", "2"])
    assert first.exit_code == 0, first.output
    assert "tokens per forward" in first.output and (tmp_path / "ck" / "model.safetensors").is_file()
    again = CliRunner().invoke(main, args + ["--steps", "3"])
    assert again.exit_code == 0, again.output
    assert len((tmp_path / "ck" / "train_log.jsonl").read_text().splitlines()) == 3  # resumed at step 2
    assert json.loads((tmp_path / "ck" / "checkpoint.json").read_text())["steps_done"] == 3
    refused = CliRunner().invoke(main, ["train", "cllm", "--model", "tiny", "--rows", "1-100"])
    assert refused.exit_code == 2 and "kept for evaluation" in refused.output


def test_train_cllm_takes_prompts_from_a_file(tmp_path):
    from click.testing import CliRunner

    from seed_tot.cli import main
    from seed_tot.models.tiny import byte_tokenizer

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Q: 2+3?\\nA:"}\n{"id": "b", "prompt": "Q: 7*8?\\nA:"}\n')
    args = ["train", "cllm", "--model", "tiny", "--out", str(tmp_path / "ck"), "--prompts", str(prompts),
            "--block-size", "4", "--max-new-tokens", "8", "--collect-only", "--threads", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    blocks = read_blocks(tmp_path / "ck" / "trajectories.jsonl")
    assert [b.prompt_id for b in blocks if b.context_ids[: b.prompt_length] == b.context_ids] == ["a", "b"]
    encoded = byte_tokenizer()("Q: 7*8?\nA:", add_special_tokens=False)["input_ids"]
    assert [b.context_ids[: b.prompt_length] for b in blocks if b.prompt_id == "b"][0] == encoded  # verbatim, no template
    prompts.write_text('{"id": "a", "prompt": "x"}\n{"prompt": "no id"}\n')
    bad = CliRunner().invoke(main, args[:5] + [str(tmp_path / "bad")] + args[6:])
    assert bad.exit_code != 0 and "line 2" in bad.output
