"""The learned judge's parts: hidden states stopped at a layer, state boundaries, features, the head
file and its target check, fitting and the within-problem measurements."""

import pytest
import torch

from seed_tot.errors import ConfigError
from seed_tot.models.fingerprint import weights_fingerprint
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.runtime.hidden import layer_states
from seed_tot.values.features import FEATURE_RULE, FeatureReader, Reading, families, shared_tokens
from seed_tot.values.reading_memory import ReadingMemory, common_length
from seed_tot.values.head import ValueHead, fit_logistic, load_head
from seed_tot.values.states import answer_end, last_token_before, reading_ends, state_ends
from seed_tot.training.value.fit import (
    StateTable,
    calibration,
    fit_head,
    grouped_folds,
    judge_metrics,
    choose_step_settings,
    out_of_fold,
    predict,
    within_problem_auroc,
)


def test_layer_states_match_the_full_forward_and_ignore_padding(tiny_pair):
    _, target = tiny_pair
    model = target.model
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    hooks_before = sum(len(m._forward_hooks) for m in model.modules())
    got = layer_states(model, ids, mask, (1, 2))
    assert sum(len(m._forward_hooks) for m in model.modules()) == hooks_before  # ours removed
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    assert torch.allclose(got[1][0], full.hidden_states[1][0], atol=1e-5)
    alone = layer_states(model, ids[1:, :6], torch.ones(1, 6, dtype=torch.long), (1, 2))
    for layer in (1, 2):
        assert torch.allclose(alone[layer][0], got[layer][1, :6], atol=1e-4)


def test_layer_states_stop_at_the_deepest_layer(tiny_pair):
    _, target = tiny_pair
    ran = []
    last = target.model.get_decoder().layers[-1]
    handle = last.register_forward_hook(lambda *args: ran.append(True))
    try:
        layer_states(target.model, torch.tensor([[1, 2, 3]]), torch.ones(1, 3, dtype=torch.long), (1,))
    finally:
        handle.remove()
    assert ran == []  # the layer above the one asked for never ran


def test_layer_states_refuse_a_layer_the_model_lacks(tiny_pair):
    _, target = tiny_pair
    with pytest.raises(ConfigError, match="outside 1..2"):
        layer_states(target.model, torch.tensor([[1]]), torch.ones(1, 1, dtype=torch.long), (3,))


def test_state_ends_are_line_ends_without_trailing_space():
    text = "First line.  \n\n  Second: 3 x 4 = 12\nThe answer is 12."
    ends = state_ends(text)
    assert [text[:e] for e in ends] == ["First line.", "First line.  \n\n  Second: 3 x 4 = 12", text]
    assert state_ends("") == [] and state_ends("\n \n") == []


def test_last_token_before_picks_the_token_holding_the_last_character():
    offsets = [(0, 3), (3, 5), (5, 9)]
    assert last_token_before(offsets, 5) == 1
    assert last_token_before(offsets, 6) == 2
    assert last_token_before(offsets, 1) == 0


def test_one_forward_gives_each_prefix_its_own_features(tiny_pair):
    """Causal attention: the feature at a line end of the whole chain equals the feature of that
    prefix read alone (the byte tokenizer never merges across the cut)."""
    _, target = tiny_pair
    reader = FeatureReader(target, (1, 2))
    text = "Step one: 2 + 2 = 4\nStep two: 4 x 3 = 12\nThe answer is 12."
    ends = tuple(state_ends(text))
    whole = reader.read([Reading("Q?", text, ends)])[0]
    assert whole.shape == (3, 2, target.model.config.hidden_size)
    for i, end in enumerate(ends):
        alone = reader.read([Reading("Q?", text[:end], (end,))])[0]
        assert torch.allclose(alone[0], whole[i], atol=1e-4)


def test_the_answer_is_found_where_it_is_last_written():
    text = "Half of 2,400 is 1,200.\nSo she has 1,200 left.\nThe answer is 1,200 dollars."
    assert text[:answer_end(text, "1200")].endswith("The answer is 1,200")
    assert answer_end(text, "1,200") == answer_end(text, "1200")
    assert answer_end(text, "7") is None and answer_end(text, None) is None


def test_a_state_with_its_answer_is_read_at_the_answer_and_the_others_at_their_line_ends():
    text = "Step one: 2 + 2 = 4\nThe answer is 12."
    assert reading_ends(text, "12") == [len("Step one: 2 + 2 = 4"), len(text) - 1]
    assert reading_ends(text, None) == state_ends(text) == reading_ends(text, "99")


def test_reading_at_the_answer_equals_reading_the_text_cut_after_it(tiny_pair):
    _, target = tiny_pair
    reader = FeatureReader(target, (2,))
    text = "Step one: 2 + 2 = 4\nThe answer is 12, as shown."
    ends = tuple(reading_ends(text, "12"))
    whole = reader.read([Reading("Q?", text, ends)])[0]
    cut = text[:answer_end(text, "12")]
    alone = reader.read([Reading("Q?", cut, (len(cut),))])[0]
    assert torch.allclose(alone[0], whole[-1], atol=1e-4)
    last = reader.read([Reading("Q?", text, (len(text),))])[0]
    assert not torch.allclose(last[0], whole[-1], atol=1e-4)


def test_batched_readings_equal_readings_one_at_a_time(tiny_pair):
    _, target = tiny_pair
    readings = [Reading("Q?", "a short one", (11,)), Reading("Q2?", "a much longer reply\nwith two lines", (19, 33))]
    together = FeatureReader(target, (2,)).read(readings)
    apart = [FeatureReader(target, (2,), max_batch_tokens=1).read([r])[0] for r in readings]
    for a, b in zip(together, apart):
        assert torch.allclose(a, b, atol=1e-4)


def test_fingerprint_names_the_weights_not_the_dtype():
    draft, target, _ = build_tiny_pair(seed=0)
    assert weights_fingerprint(target) == weights_fingerprint(target.to(torch.bfloat16))
    assert weights_fingerprint(target) != weights_fingerprint(draft)


def _head(hidden: int = 4, **meta) -> ValueHead:
    return ValueHead(layer=1, mean=torch.zeros(hidden), scale=torch.ones(hidden), weight=torch.arange(hidden).float(),
                     bias=-1.0, meta={"feature_rule": FEATURE_RULE, **meta})


def test_a_head_read_by_another_feature_rule_is_refused_in_one_sentence(tmp_path):
    path = tmp_path / "old.safetensors"
    _head(feature_rule="the state's last token only").save(path)
    with pytest.raises(ConfigError, match="by another rule than this version.*train it again"):
        load_head(path)


def test_head_file_round_trip_and_target_check(tmp_path):
    path = tmp_path / "head.safetensors"
    _head(target="t", target_fingerprint="abc", head_id="h1").save(path)
    loaded = load_head(path, "t", "abc")
    x = torch.randn(5, 4)
    assert torch.allclose(loaded.probability(x), _head().probability(x))
    assert loaded.head_id == "h1"
    with pytest.raises(ConfigError, match="was trained on 't'.*not on this target 'other'"):
        load_head(path, "other", "def")
    assert not list(tmp_path.glob("*.partial"))


def test_a_chain_head_keeps_its_step_head_through_the_file(tmp_path):
    head = _head(head_id="chains")
    head.steps = ValueHead(layer=3, mean=torch.ones(4), scale=torch.full((4,), 2.0), weight=-torch.arange(4).float(),
                           bias=0.5, meta={"scope": "all"})
    path = tmp_path / "head.safetensors"
    head.save(path)
    loaded = load_head(path)
    x = torch.randn(5, 4)
    assert loaded.layers == (1, 3) and loaded.for_state(gives_answer=True) is loaded
    assert torch.allclose(loaded.for_state(gives_answer=False).probability(x), head.steps.probability(x))
    assert "steps" not in loaded.meta and loaded.steps.meta["scope"] == "all"
    plain = _head()
    assert plain.layers == (1,) and plain.for_state(gives_answer=False) is plain


def test_a_file_that_is_no_head_is_refused_in_one_sentence(tmp_path):
    bad = tmp_path / "x.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(ConfigError, match="is not a seed-tot value head"):
        load_head(bad)
    with pytest.raises(ConfigError, match="No value head at"):
        load_head(tmp_path / "missing.safetensors")


def _table(problems: int = 30, chains: int = 6, states: int = 3, hidden: int = 8, signal: float = 2.0, seed: int = 0):
    """A synthetic table: the first feature carries the chain's label (plus noise)."""
    g = torch.Generator().manual_seed(seed)
    feats, labels, pids, chain_ids, final, index = [], [], [], [], [], []
    number = 0
    for p in range(problems):
        for c in range(chains):
            label = bool(torch.rand(1, generator=g) < 0.5)
            for s in range(states):
                x = torch.randn(hidden, generator=g)
                x[0] += signal * (1 if label else -1) * (s + 1) / states
                feats.append(x)
                labels.append(label)
                pids.append(f"p{p}")
                chain_ids.append(number)
                final.append(s == states - 1)
                index.append(c)
            number += 1
    return StateTable(torch.stack(feats)[:, None, :].half(), torch.tensor(labels), pids, torch.tensor(chain_ids),
                      torch.tensor(final), (5,), torch.tensor(index))


def test_fit_learns_a_signal_and_says_so_out_of_fold():
    table = _table()
    probs = out_of_fold(table, 5, 0.1, "all", folds=5)
    metrics = judge_metrics(probs, table)
    assert metrics["chain_auroc_within"] > 0.85
    assert metrics["state_auroc_within"] > 0.7
    noise = _table(signal=0.0, seed=1)
    chance = judge_metrics(out_of_fold(noise, 5, 0.1, "all"), noise)["chain_auroc_within"]
    assert 0.3 < chance < 0.7


def test_final_scope_trains_on_whole_chains_only():
    table = _table()
    head = fit_head(table, 5, 0.1, "final")
    assert predict(head, table).shape == (len(table.labels),)


def test_a_step_head_rates_the_states_before_a_chains_end():
    table = _table()
    head = fit_head(table, 5, 0.1, "final")
    alone = predict(head, table)
    head.steps = fit_head(table, 5, 1.0, "all")
    both = predict(head, table)
    assert torch.equal(both[table.final], alone[table.final])
    assert torch.allclose(both[~table.final], predict(head.steps, table)[~table.final])
    assert not torch.allclose(both[~table.final], alone[~table.final])


def test_the_step_head_is_chosen_by_its_step_auroc_among_every_state_heads():
    table = _table()
    metrics = judge_metrics(out_of_fold(table, 5, 0.1, "all"), table)
    assert metrics["step_auroc_within"] > 0.6 and metrics["step_problems_with_both"] > 0
    grid = [{"layer": 5, "l2": 0.1, "scope": "all", "step_auroc_within": 0.6},
            {"layer": 7, "l2": 1.0, "scope": "all", "step_auroc_within": 0.7},
            {"layer": 7, "l2": 0.1, "scope": "final", "step_auroc_within": 0.9}]
    assert choose_step_settings(grid) == {"layer": 7, "l2": 1.0, "scope": "all"}


def test_grouped_folds_partition_the_problems():
    ids = [f"p{i}" for i in range(23)]
    folds = grouped_folds(ids, 5, seed=3)
    assert sorted(i for fold in folds for i in fold) == sorted(ids)
    assert sum(len(f) for f in folds) == len(ids)


def test_within_problem_auroc_averages_only_problems_with_both_labels():
    scores = [0.9, 0.1, 0.5, 0.2, 0.8, 0.3]
    labels = [True, False, True, True, False, True]
    problems = ["a", "a", "b", "b", "c", "c"]
    value, count = within_problem_auroc(scores, labels, problems)
    assert (value, count) == (pytest.approx(0.5), 2)  # a: 1.0, c: 0.0; b has no wrong chain


def test_logistic_fit_weights_count():
    x = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
    y = torch.tensor([0, 0, 1, 1])
    _, _, w, b = fit_logistic(x, y, torch.ones(4), l2=0.01)
    assert float(w[0]) > 0


def test_calibration_of_a_perfect_predictor_is_zero():
    probs = torch.tensor([0.0, 0.0, 1.0, 1.0])
    error, bins = calibration(probs, torch.tensor([False, False, True, True]))
    assert error == pytest.approx(0.0)
    assert [b["count"] for b in bins] == [2, 2]


def test_siblings_read_their_parent_once_and_get_the_features_of_reading_alone(tiny_pair):
    _, target = tiny_pair
    parent = "Step one: 2 + 2 = 4\n\nStep two: 4 * 3 = 12"
    texts = [parent + line for line in ("\n\nSo 12.", "\n\nThen 12 + 1 = 13", "\nThe answer is 12.")]
    readings = [Reading("Q?", text, (len(text),)) for text in texts]
    reader = FeatureReader(target, (1, 2))
    together = reader.read(readings)
    apart = [FeatureReader(target, (1, 2)).read([r])[0] for r in readings]
    for a, b in zip(together, apart, strict=True):
        assert torch.allclose(a, b, atol=1e-4)
    assert reader.tokens_read < sum(len(target.tokenizer(t)["input_ids"]) for t in texts)


def test_a_reader_with_memory_starts_children_where_their_parent_ended_and_reads_the_same(tiny_pair):
    _, target = tiny_pair
    parent = "Step one: 2 + 2 = 4\n\nStep two: 4 * 3 = 12\n"
    children = [parent + line for line in ("\nSo 12.", "\nThen 12 + 1 = 13\n")]
    grandchild = children[1] + "\nThe answer is 13."
    reader = FeatureReader(target, (1, 2), memory=ReadingMemory())
    calls = [[parent], children, [grandchild, parent + "Or 5."]]
    for texts in calls:
        before = reader.tokens_read
        got = reader.read([Reading("Q?", text, (len(text.rstrip()),)) for text in texts])
        alone = [FeatureReader(target, (1, 2)).read([Reading("Q?", text, (len(text.rstrip()),))])[0] for text in texts]
        for a, b in zip(got, alone, strict=True):
            assert torch.allclose(a, b, atol=1e-4)
        fresh = sum(len(target.tokenizer(text)["input_ids"]) for text in texts)
        assert texts == [parent] or reader.tokens_read - before < fresh / 2  # the prompt and the parent were kept


def test_kept_readings_start_only_the_readings_that_share_them(tiny_pair):
    _, target = tiny_pair
    reader = FeatureReader(target, (2,), memory=ReadingMemory())
    reader.read([Reading("Q?", "Step one: 2 + 2 = 4", (19,))])
    texts = ["Step one: 2 + 2 = 4 and so on", "Totally different"]  # one family (one line each), no common token
    got = reader.read([Reading("Q?", text, (len(text),)) for text in texts])
    for text, features in zip(texts, got, strict=True):
        assert torch.allclose(features, FeatureReader(target, (2,)).read([Reading("Q?", text, (len(text),))])[0], atol=1e-4)


def test_a_family_shares_its_common_tokens_up_to_its_first_reading_point():
    assert families([0, 1, 2], ["a\nb\nc", "a\nb\nd ", "a\nx"]) == [[0, 1], [2]]
    assert shared_tokens([([1, 2, 3, 4], [3]), ([1, 2, 3, 5], [3])]) == 3
    assert shared_tokens([([1, 2, 3, 4], [1, 3]), ([1, 2, 3, 5], [3])]) == 1  # a state read at token 1
    assert shared_tokens([([1, 2, 3], [2])]) == 0


def test_shared_prompt_features_equal_one_plain_forward_over_prompt_and_reply(tiny_pair):
    _, target = tiny_pair
    reader = FeatureReader(target, (1, 2))
    text = "Step one: 2 + 2 = 4\nThe answer is 4."
    ends = tuple(state_ends(text))
    got = reader.read([Reading("What is 2 + 2?", text, ends), Reading("What is 2 + 2?", "No idea.", (8,))])[0]
    prompt = reader.formatter.encode_text(reader.formatter.reply_prefix("What is 2 + 2?"))
    reply = target.tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + list(reply)])
    plain = layer_states(target.model, ids, torch.ones_like(ids), (1, 2))
    for i, end in enumerate(ends):
        position = len(prompt) + len(target.tokenizer(text[:end], add_special_tokens=False)["input_ids"]) - 1
        for j, layer in enumerate((1, 2)):
            assert torch.allclose(got[i, j], plain[layer][0, position], atol=1e-4)


def test_every_shipped_head_was_trained_on_training_problems_only():
    from seed_tot.values.judge import PACKAGED_HEADS
    from seed_tot_tasks.gsm8k import Gsm8kTask

    heads = sorted(PACKAGED_HEADS.glob("*.safetensors"))
    assert heads, "the package ships a head for the default target"
    task = Gsm8kTask()
    train_ids = {p.id for p in task.load(task.train_data_path)}
    test_ids = {p.id for p in task.load()}
    for path in heads:
        head = load_head(path)
        ids = set(head.meta["train_problem_ids"])
        assert ids and ids <= train_ids and not ids & test_ids
        assert path.stem == head.meta["target_fingerprint"]  # found by the weights it was trained on


def test_a_store_reads_only_the_chains_it_lacks_and_gives_back_the_chains_asked_for(tiny_pair, tmp_path):
    from seed_tot.training.value.store import Chain, FeatureStore, ProblemChains, chain_keys, extract

    _, target = tiny_pair
    reader = FeatureReader(target, (1,))
    chains = [Chain(index, f"step {index}\nso {index}", index % 2 == 0, str(index)) for index in range(5)]
    store = FeatureStore(tmp_path / "store", {"layers": [1]})
    first = [ProblemChains("p-1", "question?", tuple(chains[:3]))]
    assert extract(store, reader, first, progress=False) == 1
    read = reader.tokens_read
    assert extract(store, reader, first, progress=False) == 0 and reader.tokens_read == read  # nothing new
    more = [ProblemChains("p-1", "question?", tuple(chains))]  # the pool gained two samples
    assert extract(store, reader, more, progress=False) == 1
    assert store.done() == {("p-1", index) for index in range(5)}
    table = store.table(chain_keys(first))
    assert table.chain_index.unique().tolist() == [0, 1, 2] and len(table.labels) == 3 * 2  # two lines each
    assert torch.equal(table.features, store.table().features[: 3 * 2])
    assert len(store.table().labels) == 5 * 2


def test_reading_memory_drops_the_least_recently_used_prompt_with_its_readings():
    memory = ReadingMemory(prompts=2)
    for message in ("a", "b"):
        memory.keep_prompt(message, [1], None)
        memory.keep_readings(message, [((1, 2), None)])
    memory.prompt("a")  # used: "b" is now the oldest
    memory.keep_prompt("c", [1], None)
    assert memory.prompt("b") is None and memory.prompt("a") is not None
    assert memory.longest("b", [1, 2], 1) == (0, None)
    assert common_length([1, 2, 3], (1, 2, 4)) == 2 and common_length([1], [1, 2]) == 1
