"""Continuous batching (seed_tot/scheduling/session.py): requests that join a running batch at
different steps, while others leave, get exactly the tokens they get alone, greedy and sampled.
A negative control shows the check catches a join that lets rows see the pad slots."""

from dataclasses import replace

import pytest
import torch

import seed_tot.runtime.ragged as ragged
from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.requests import Cancel, GenerationRequest
from seed_tot.scheduling.batched import BatchedARExecutor, BatchedSpeculativeExecutor
from seed_tot.scheduling.session import drain
from session_helpers import cancelled_midway, staggered

TEXTS = ["Hello world", "The quick brown fox jumps", "Hello world", "Q: 3 apples and 4 pears. How many?", "zz",
         "Tree of thoughts: step 1 of 4,", "The quick brown fox jumps over", "b"]
LENGTHS = [20, 6, 20, 30, 4, 12, 25, 9]
JOINS = [0, 0, 2, 3, 3, 8, 14, 30]  # decode step at which request i joins (some join after others left)


def make(method, pair, **options):
    draft, target = pair
    if method == "batched":
        return BatchedARExecutor(target, **options)
    if method == "batched-lookup":
        return BatchedSpeculativeExecutor(target, None, (1, 1, 1), drafter="lookup", **options)
    return BatchedSpeculativeExecutor(target, draft, (2, 1), **options)


def requests(tokenizer, temperature=0.0, top_p=1.0):
    out = [GenerationRequest(tokenizer.encode(text), DecodeConfig(max_new_tokens=n, temperature=temperature, top_p=top_p),
                             seed=50 + i, request_id=f"r{i}", group=f"g{i % 3}")
           for i, (text, n) in enumerate(zip(TEXTS, LENGTHS))]
    out.append(GenerationRequest([7], DecodeConfig(max_new_tokens=10, temperature=temperature, top_p=top_p), seed=9,
                                 request_id="one-token prompt"))
    return out


JOIN_STEPS = JOINS + [5]


@pytest.mark.parametrize("method", ["batched", "batched-lookup", "batched-sd"])
def test_greedy_rows_joining_a_running_batch_equal_autoregressive_decoding(tiny_pair, method):
    _, target = tiny_pair
    reqs = requests(target.tokenizer)
    session = make(method, tiny_pair, prefix_cache_mb=0).session()
    found = staggered(session, reqs, JOIN_STEPS)
    assert session.joins_while_busy >= 4
    assert [r.token_ids for r in found] == [
        autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in reqs]
    assert [r.request_id for r in found] == [r.request_id for r in reqs]


@pytest.mark.parametrize("method", ["batched", "batched-lookup", "batched-sd"])
def test_sampled_rows_joining_a_running_batch_equal_each_request_alone(tiny_pair, method):
    _, target = tiny_pair
    reqs = requests(target.tokenizer, temperature=1.0, top_p=0.9)
    executor = make(method, tiny_pair, prefix_cache_mb=0)
    alone = [executor.run([r])[0].token_ids for r in reqs]
    assert [r.token_ids for r in staggered(executor.session(), reqs, JOIN_STEPS)] == alone
    assert len({tuple(tokens) for tokens in alone}) > 5  # the rows really differ


@pytest.mark.parametrize("method", ["batched", "batched-lookup", "batched-sd"])
def test_cancelled_rows_leave_at_once_and_the_others_keep_their_tokens(tiny_pair, method):
    _, target = tiny_pair
    reqs = requests(target.tokenizer, temperature=1.0, top_p=0.9)
    executor = make(method, tiny_pair, prefix_cache_mb=0)
    alone = [executor.run([r])[0].token_ids for r in reqs]
    dropped = [0, 3, 6, 8]  # 0 and 3 decoding (20 and 30 tokens), 6 and 8 still queued
    found, width, kept = cancelled_midway(executor.session(), reqs, first=6, steps=3, dropped=dropped)
    assert width == kept
    assert sorted(found) == [i for i in range(len(reqs)) if i not in dropped]
    assert all(found[i].token_ids == alone[i] for i in found)


@pytest.mark.parametrize("method", ["batched", "batched-lookup", "batched-sd"])
def test_a_cancel_flag_set_from_outside_ends_its_rows_at_the_next_step(tiny_pair, method):
    """The sender sets the flag between two steps (as another thread would): at the next step its
    rows, decoding and queued, end as "cancelled" with no tokens and leave the batch, before any
    forward; the other rows keep their tokens."""
    _, target = tiny_pair
    reqs = requests(target.tokenizer, temperature=1.0, top_p=0.9)
    executor = make(method, tiny_pair, prefix_cache_mb=0)
    alone = [executor.run([r])[0].token_ids for r in reqs]
    flag = Cancel()
    dropped = {0, 3, 8}  # 0 and 3 decoding (20 and 30 tokens), 8 queued when the flag is set
    flagged = [replace(r, cancel=flag) if i in dropped else r for i, r in enumerate(reqs)]
    session = executor.session()
    tickets = session.add(flagged[:6])
    results = {}
    for _ in range(3):
        results.update(session.step())
    tickets += session.add(flagged[6:])
    flag.set()
    ended = dict(session.step())
    assert {tickets[i] for i in dropped} <= set(ended)
    assert all(ended[tickets[i]].finish_reason == "cancelled" and not ended[tickets[i]].token_ids for i in dropped)
    assert all(row.ticket not in {tickets[i] for i in dropped} for row in session.active)
    results.update(ended)
    while session.busy:
        results.update(session.step())
    assert all(results[tickets[i]].token_ids == alone[i] for i in range(len(reqs)) if i not in dropped)


def test_run_ends_early_for_a_cancelled_request(tiny_pair):
    """An executor's run (a round) does not wait for a cancelled request's budget."""
    _, target = tiny_pair
    flag = Cancel()
    flag.set()
    long = GenerationRequest(target.tokenizer.encode("Hello"), DecodeConfig(max_new_tokens=500, temperature=1.0),
                             seed=1, cancel=flag)
    short = GenerationRequest(target.tokenizer.encode("Hi"), DecodeConfig(max_new_tokens=5), seed=2)
    executor = make("batched", tiny_pair, prefix_cache_mb=0)
    cut, kept = executor.run([long, short])
    assert cut.finish_reason == "cancelled" and cut.token_ids == []
    assert kept.token_ids == executor.run([short])[0].token_ids


def test_a_serial_executor_skips_the_cancelled_requests_of_a_batch(tiny_pair):
    from seed_tot.scheduling.serial import ar_executor

    _, target = tiny_pair
    flag = Cancel()
    flag.set()
    executor = ar_executor(target)
    kept = GenerationRequest(target.tokenizer.encode("Hi"), DecodeConfig(max_new_tokens=4), seed=2)
    cut, done = executor.run([GenerationRequest(kept.prompt_ids, DecodeConfig(max_new_tokens=400), cancel=flag), kept])
    assert (cut.finish_reason, cut.token_ids) == ("cancelled", [])
    assert done.token_ids == executor.run([kept])[0].token_ids


def test_a_cancel_flag_travels_to_another_process_unset():
    import copy
    import pickle

    flag = Cancel()
    flag.set()
    request = GenerationRequest([1, 2], cancel=flag)
    assert not pickle.loads(pickle.dumps(request)).cancel.is_set()
    assert copy.deepcopy(request).cancel is flag


def test_joining_rows_start_from_the_prefix_cache_and_stay_exact(tiny_pair):
    _, target = tiny_pair
    reqs = requests(target.tokenizer)
    executor = make("batched-lookup", tiny_pair, prefix_cache_mb=64)
    executor.run(reqs[:3])  # keeps those prompts' KV
    found = staggered(executor.session(), reqs, JOIN_STEPS)
    assert executor.prefix_cache.reused_tokens > 0
    assert [r.token_ids for r in found] == [
        autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in reqs]


def test_run_is_one_session_drained(tiny_pair):
    _, target = tiny_pair
    reqs = requests(target.tokenizer, temperature=1.0, top_p=0.9)
    executor = make("batched-lookup", tiny_pair, prefix_cache_mb=0)
    assert [r.token_ids for r in drain(executor.session(), reqs)] == [r.token_ids for r in executor.run(reqs)]
    assert executor.run([]) == []


def test_the_check_catches_a_join_that_lets_rows_see_pad_slots(tiny_pair, monkeypatch):
    """Negative control: a join that marks the left-pad slots as context must break the equality."""
    _, target = tiny_pair
    reqs = requests(target.tokenizer)

    def leaky_extend(self, other):
        self.cache, pad_self, pad_other = ragged.concat_left_padded(self.cache, self.batch_size, other.cache,
                                                                    other.batch_size)
        left = torch.ones(self.batch_size, pad_self, dtype=torch.bool)  # the bug: pads count as context
        right = torch.ones(other.batch_size, pad_other, dtype=torch.bool)
        self.valid = torch.cat([torch.cat([left, self.valid], 1), torch.cat([right, other.valid], 1)], 0)
        self.lengths = self.lengths + other.lengths
        self._reset_step(self.batch_size)

    monkeypatch.setattr(ragged.RaggedBatchCache, "extend", leaky_extend)
    found = staggered(make("batched", tiny_pair, prefix_cache_mb=0).session(), reqs, JOIN_STEPS)
    assert [r.token_ids for r in found] != [
        autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in reqs]


def test_session_work_counts_prefill_and_decode_slots_and_pads(tiny_pair):
    """Two prompts of 5 and 9 tokens prefill in one forward (9 slots each, 4 pads); then each of
    3 steps draws a token per row and all but the last feed both rows (2 slots each, no pads)."""
    _, target = tiny_pair
    executor = BatchedARExecutor(target, share_prefix=False, prefix_cache_mb=0)
    config = DecodeConfig(max_new_tokens=3, temperature=0.0, ignore_eos=True)
    requests = [GenerationRequest(list(range(10, 10 + n)), config, seed=0) for n in (5, 9)]
    drain(executor.session(), requests)
    work = executor.work.as_dict()
    assert work["join"]["slots"] == 18 and work["join"]["pad_slots"] == 4
    assert work["step"]["slots"] == 4 and work["step"]["pad_slots"] == 0
    assert work["steps"] == 3 and work["step_rows"] == 6
