"""BiTA: exact decoding with any prompt parameters, training pipeline, checkpoints, wiring (tiny, float32)."""

import json

import pytest
import torch
from click.testing import CliRunner

import seed_tot.decoding.bita as bita_module
from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.bita import BitaDecoder, bita_decode, candidate_tree, step_input
from seed_tot.decoding.bita_params import init_prompt, load_prompt, save_prompt
from seed_tot.decoding.verify import Verdict
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationRequest
from seed_tot.runtime import ModelRunner
from seed_tot.runtime.masks import anchored_chains_mask, prefixed_tree_mask
from seed_tot.scheduling.factory import make_executor
from seed_tot.training.bita.data import Sample, collect_samples, read_samples
from seed_tot.training.bita.loss import sample_loss
from seed_tot.training.bita.trainer import PARAMS_FILE, TrainSettings, train_bita

from test_jacobi import check_equal_to_reference, prompt_cases, reference_greedy, with_eos


@pytest.fixture(scope="module")
def target(tiny_pair):
    return tiny_pair[1]


@pytest.fixture(scope="module")
def random_prompt(target):
    return init_prompt(target, prefix_len=5, masks=3, seed=7, how="random")


def bita_with(prompt):
    def decode(target, prompt_ids, config, seed=0, **params):
        return bita_decode(target, prompt_ids, config, seed, prompt=prompt, **params)
    return decode


# -- exactness -------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["random", "tokens"])
@pytest.mark.parametrize("candidates,depth", [(5, 3), (3, 2), (1, 1), (4, 0)])
def test_greedy_equals_autoregressive_with_untrained_parameters(target, how, candidates, depth):
    prompt = init_prompt(target, prefix_len=4, masks=3, seed=3, how=how)
    check_equal_to_reference(bita_with(prompt), target, prompt_cases(12, seed=21), candidates=candidates, depth=depth)


def test_greedy_equals_autoregressive_under_eager_attention(tiny_eager_pair):
    target = tiny_eager_pair[1]
    prompt = init_prompt(target, prefix_len=4, masks=3, seed=5, how="random")
    check_equal_to_reference(bita_with(prompt), target, prompt_cases(8, seed=4))


def test_stops_at_eos_and_stop_strings_like_autoregressive(target, random_prompt):
    prompt_ids = [5, 6, 7, 8, 9]
    plain = reference_greedy(target, prompt_ids, DecodeConfig(max_new_tokens=40))[0]
    eos_runner = with_eos(target, plain[17])
    config = DecodeConfig(max_new_tokens=40)
    expected = autoregressive_decode(eos_runner, prompt_ids, config)
    got = bita_decode(eos_runner, prompt_ids, config, prompt=random_prompt)
    assert got.token_ids == expected.token_ids and got.finish_reason == expected.finish_reason == "eos"
    stop = target.decode(plain[10:12])
    config = DecodeConfig(max_new_tokens=40, stop=[stop])
    expected = autoregressive_decode(target, prompt_ids, config)
    got = bita_decode(target, prompt_ids, config, prompt=random_prompt)
    assert got.token_ids == expected.token_ids and got.finish_reason == expected.finish_reason


def test_trained_drafts_are_accepted_and_output_stays_exact(target):
    """Parameters fitted to the model's own output make the same forward accept drafted tokens."""
    prompt_ids = list(range(30, 45))
    config = DecodeConfig(max_new_tokens=48)
    reference = autoregressive_decode(target, prompt_ids, config).token_ids
    prompt = init_prompt(target, prefix_len=4, masks=2, seed=0, how="tokens")
    optimizer = torch.optim.Adam(prompt.parameters(), lr=0.05)
    for step in range(60):
        loss, _ = sample_loss(target, prompt, prompt_ids, reference, 64, torch.Generator().manual_seed(step))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    out = bita_decode(target, prompt_ids, config, prompt=prompt)
    assert out.token_ids == reference
    assert out.stats.draft_tokens_accepted > 10
    assert out.stats.target_forwards < len(reference) - 10


def test_negative_control_accepting_the_first_candidate_unchecked_breaks_exactness(target, monkeypatch):
    """If verification trusted the drafts (first candidate at every level), output would differ from
    AR: the equality tests above can fail."""
    def trusting(tokens, parents, logits, temperature, top_p, generator):
        node, path = -1, []
        while (child := next((c for c, p in enumerate(parents) if p == node), None)) is not None:
            path.append(child)
            node = child
        return Verdict(path, [tokens[i] for i in path], int(logits[1 + node].argmax()))

    monkeypatch.setattr(bita_module, "verify_guesses", trusting)
    prompt = init_prompt(target, prefix_len=4, masks=3, seed=3, how="random")
    with pytest.raises(AssertionError):
        check_equal_to_reference(bita_with(prompt), target, prompt_cases(6, seed=21))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_sampling_is_token_identical_to_autoregressive_sampling(target, seed):
    prompt = init_prompt(target, prefix_len=4, masks=3, seed=seed, how="random")
    for temperature, top_p in [(1.0, 1.0), (0.7, 0.9)]:
        for prompt_ids, budget in prompt_cases(4, seed=100 + seed):
            config = DecodeConfig(max_new_tokens=budget, temperature=temperature, top_p=top_p)
            expected = autoregressive_decode(target, prompt_ids, config, seed=seed)
            got = bita_decode(target, prompt_ids, config, seed=seed, prompt=prompt)
            assert got.token_ids == expected.token_ids


def test_sampling_negative_control_a_different_seed_differs(target, random_prompt):
    config = DecodeConfig(max_new_tokens=40, temperature=1.0)
    expected = autoregressive_decode(target, [1, 2, 3], config, seed=0).token_ids
    assert bita_decode(target, [1, 2, 3], config, seed=1, prompt=random_prompt).token_ids != expected


# -- tree and masks --------------------------------------------------------------------------


def test_candidate_tree_extends_only_the_top_candidate():
    tokens, parents = candidate_tree([[10, 11, 12], [20, 21], [30]])
    assert tokens == [10, 11, 12, 20, 21, 30]
    assert parents == [-1, -1, -1, 0, 0, 3]


def test_step_input_gives_every_node_a_mask_chain():
    step = step_input(7, [[10, 11], [20]], masks=2)
    assert step.token_ids[:4] == [7, 10, 11, 20]
    assert step.group_start == [4, 6, 8, 10]
    assert step.parents[4:] == [0, 4, 1, 6, 2, 8, 3, 10]
    assert step.mask_slot == [-1] * 4 + [0, 1] * 4


def test_only_masks_see_the_prefix():
    mask = prefixed_tree_mask([-1, 0, 1], past_len=2, prefix_len=3, sees_prefix=[False, False, True], dtype=torch.float32)
    allowed = mask[0, 0] == 0
    assert allowed.shape == (3, 3 + 2 + 3)
    assert not allowed[:2, :3].any() and allowed[2, :3].all()
    assert allowed[:, 3:5].all()
    assert allowed[2, 5:].all() and not allowed[0, 6:].any()


def test_anchored_chains_see_their_anchor_only():
    mask, positions = anchored_chains_mask([1, 3], chain_len=2, past_len=5, prefix_len=2, dtype=torch.float32)
    allowed = mask[0, 0] == 0
    assert positions.tolist() == [[2, 3, 4, 5]]
    assert allowed[0].tolist() == [True, True] + [True, True, False, False, False] + [True, False, False, False]
    assert allowed[3].tolist() == [True, True] + [True] * 4 + [False] + [False, False, True, True]


# -- training --------------------------------------------------------------------------------


def test_one_training_step_lowers_the_loss(target):
    prompt_ids = list(range(40, 50))
    response = autoregressive_decode(target, prompt_ids, DecodeConfig(max_new_tokens=30)).token_ids
    prompt = init_prompt(target, prefix_len=4, masks=3, seed=0)
    optimizer = torch.optim.Adam(prompt.parameters(), lr=0.02)
    before, _ = sample_loss(target, prompt, prompt_ids, response, 64, torch.Generator().manual_seed(0))
    optimizer.zero_grad()
    before.backward()
    assert prompt.prefix_keys.grad.abs().sum() > 0 and prompt.mask_embeddings.grad.abs().sum() > 0
    assert all(p.grad is None for p in target.model.parameters())
    optimizer.step()
    after, _ = sample_loss(target, prompt, prompt_ids, response, 64, torch.Generator().manual_seed(0))
    assert after.item() < before.item()


def test_collection_appends_and_resumes(target, tmp_path):
    executor = make_executor("ar", target)
    prompts = [(f"p{i}", [10 + i, 20, 30]) for i in range(3)]
    path = tmp_path / "samples.jsonl"
    first = collect_samples(executor, prompts[:2], path, max_new_tokens=8, batch_size=1)
    calls = []
    executor_run = executor.run
    executor.run = lambda requests: calls.append(len(requests)) or executor_run(requests)
    second = collect_samples(executor, prompts, path, max_new_tokens=8, batch_size=4)
    assert [s.key for s in first] == ["p0", "p1"] and [s.key for s in second] == ["p0", "p1", "p2"]
    assert calls == [1]  # only the missing prompt was decoded
    expected = autoregressive_decode(target, [12, 20, 30], DecodeConfig(max_new_tokens=8)).token_ids
    assert second[2].response_ids == expected


def _samples(target, count=3):
    out = []
    for i in range(count):
        ids = [60 + i, 61, 62, 63]
        out.append(Sample(str(i), ids, autoregressive_decode(target, ids, DecodeConfig(max_new_tokens=20)).token_ids))
    return out


def test_resumed_training_equals_uninterrupted_training(target, tmp_path):
    samples = _samples(target)
    settings = TrainSettings(steps=6, prefix_len=3, masks=2, groups=8, save_every=3)
    whole = train_bita(target, samples, tmp_path / "whole", settings)
    train_bita(target, samples, tmp_path / "parts", TrainSettings(steps=3, prefix_len=3, masks=2, groups=8, save_every=3))
    resumed = train_bita(target, samples, tmp_path / "parts", settings)
    # the first part ran a 3-step schedule, so compare a run resumed with the same settings instead
    again = train_bita(target, samples, tmp_path / "whole", TrainSettings(steps=6, prefix_len=3, masks=2, groups=8, save_every=3))
    assert torch.equal(again.prefix_keys, whole.prefix_keys)
    assert len((tmp_path / "parts" / "log.jsonl").read_text().splitlines()) == 6
    assert not torch.equal(resumed.prefix_keys, init_prompt(target, 3, 2).prefix_keys)


def test_interrupted_training_resumes_to_the_same_parameters(target, tmp_path, monkeypatch):
    samples = _samples(target)
    settings = TrainSettings(steps=6, prefix_len=3, masks=2, groups=8, save_every=2)
    whole = train_bita(target, samples, tmp_path / "whole", settings)

    class Stop(Exception):
        pass

    def stop_after_four(step, record):
        if step == 4:
            raise Stop
    with pytest.raises(Stop):
        train_bita(target, samples, tmp_path / "cut", settings, on_step=stop_after_four)
    resumed = train_bita(target, samples, tmp_path / "cut", settings)
    assert torch.allclose(resumed.prefix_keys, whole.prefix_keys, atol=1e-6)
    assert torch.allclose(resumed.mask_embeddings, whole.mask_embeddings, atol=1e-6)


def test_resume_with_other_settings_is_refused(target, tmp_path):
    samples = _samples(target, 1)
    train_bita(target, samples, tmp_path, TrainSettings(steps=1, prefix_len=3, masks=2, groups=4))
    with pytest.raises(ConfigError, match="other settings"):
        train_bita(target, samples, tmp_path, TrainSettings(steps=2, prefix_len=4, masks=2, groups=4))


def test_checkpoint_round_trip_decodes_the_same(target, random_prompt, tmp_path):
    path = save_prompt(random_prompt, tmp_path / "b.safetensors")
    loaded = load_prompt(path)
    for name in ("prefix_keys", "prefix_values", "mask_embeddings"):
        assert torch.equal(getattr(loaded, name), getattr(random_prompt, name))
    config = DecodeConfig(max_new_tokens=24)
    a = BitaDecoder(target, random_prompt).decode([3, 4, 5], config)
    b = BitaDecoder(target, loaded).decode([3, 4, 5], config)
    assert a.token_ids == b.token_ids and a.stats.draft_tokens_accepted == b.stats.draft_tokens_accepted


def test_checkpoint_for_another_model_is_refused(target, tmp_path):
    from transformers import Qwen2ForCausalLM

    from seed_tot.models.tiny import tiny_config

    other_config = tiny_config(258, 256, 257)
    other_config.num_key_value_heads = 1
    other = ModelRunner(Qwen2ForCausalLM(other_config).eval(), target.tokenizer, "other")
    path = save_prompt(init_prompt(other, 2, 2), tmp_path / "other.safetensors")
    with pytest.raises(ConfigError, match="trained for a model"):
        BitaDecoder(target, load_prompt(path))
    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="Cannot read"):
        load_prompt(tmp_path / "junk.safetensors")
    with pytest.raises(ConfigError, match="does not exist"):
        load_prompt(tmp_path / "missing.safetensors")


# -- wiring ----------------------------------------------------------------------------------


def test_executor_from_a_checkpoint_and_its_options(target, random_prompt, tmp_path):
    path = save_prompt(random_prompt, tmp_path / "b.safetensors")
    executor = make_executor("bita", target, checkpoint=str(path), candidates=3)
    request = GenerationRequest(prompt_ids=[1, 2, 3], config=DecodeConfig(max_new_tokens=12), seed=0, request_id="r")
    result = executor.run([request])[0]
    assert result.token_ids == reference_greedy(target, [1, 2, 3], DecodeConfig(max_new_tokens=12))[0]
    assert result.stats.draft_tokens_proposed > 0
    with pytest.raises(ConfigError, match="has no option"):
        make_executor("bita", target, window=3)
    with pytest.raises(ConfigError, match="Bad BiTA settings"):
        make_executor("bita", target, depth=9)


def test_train_command_and_task_run_with_the_checkpoint(tmp_path):
    from seed_tot.cli import main

    runner = CliRunner()
    out = tmp_path / "run"
    args = ["train", "bita", "--tiny", "--out", str(out), "--prompts", "2", "--max-new-tokens", "12", "--steps", "2",
            "--prefix", "3", "--groups", "4", "--threads", "1"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert (out / PARAMS_FILE).is_file() and len(read_samples(out / "samples.jsonl")) == 2
    refused = runner.invoke(main, ["train", "bita", "--tiny", "--out", str(out), "--start", "10"])
    assert refused.exit_code == 2 and "kept for evaluation" in refused.output
    run_dir = tmp_path / "gsm8k"
    result = runner.invoke(main, ["gsm8k", "--tiny", "--method", "bita", "--method-option", f"checkpoint={out / PARAMS_FILE}",
                                  "--limit", "1", "--thoughts", "1", "--depth", "1", "--max-new-tokens", "8",
                                  "--value-max-new-tokens", "4", "--value-samples", "1", "--cot-samples", "0", "--search", "bfs", "--no-cot",
                                  "--out", str(run_dir), "--threads", "1"])
    assert result.exit_code == 0, result.output
    trace = json.loads(next((run_dir / "traces").glob("*.json")).read_text())
    assert "bita" in json.dumps(trace) and str(out / PARAMS_FILE) in json.dumps(trace)
