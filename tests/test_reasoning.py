import pytest
from search_helpers import PROBLEM, make_task

from seed_tot.config import DecodeConfig
from seed_tot.errors import SeedTotError
from seed_tot.metrics import BatchRecord, RunMetrics, aggregate, summarize
from seed_tot.models.tiny import byte_tokenizer
from seed_tot.reasoning.evaluator import StateEvaluator, read_value
from seed_tot.reasoning.generator import ThoughtGenerator
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.request_seeds import request_seed
from seed_tot.reasoning.simple_task import SimpleTask, fill, first_number
from seed_tot.requests import GenerationStats
from seed_tot.tree import ReasoningTree

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_plain_tokenizer_encodes_the_message_itself():
    tokenizer = byte_tokenizer()
    formatter = PromptFormatter(tokenizer)
    assert not formatter.uses_chat_template
    assert formatter.format("Hi") == "Hi"
    assert tokenizer.decode(formatter.encode("Hi there")) == "Hi there"


def test_chat_template_wraps_one_user_message_with_a_generation_prompt():
    tokenizer = byte_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    formatter = PromptFormatter(tokenizer)
    assert formatter.uses_chat_template
    assert formatter.format("Hi") == "<|user|>Hi\n<|assistant|>"
    assert tokenizer.decode(formatter.encode("Hi")) == "<|user|>Hi\n<|assistant|>"


def test_missing_tokenizer_is_a_clear_error():
    with pytest.raises(SeedTotError, match="tokenizer"):
        PromptFormatter(None)


def test_request_seeds_are_stable_and_distinct():
    assert request_seed(0, "p1", 3, "thought", 1) == request_seed(0, "p1", 3, "thought", 1)
    seeds = {
        request_seed(run, problem, node, role, index)
        for run in (0, 1)
        for problem in ("p1", "p2")
        for node in (0, 1)
        for role in ("thought", "value")
        for index in (0, 1, 2)
    }
    assert len(seeds) == 2 * 2 * 2 * 2 * 3
    assert all(0 <= s < 2**63 for s in seeds)
    # pinned: a change here would silently change every seeded run and trace
    assert request_seed(7, "x", 2, "value", 0) == 2470482060492866627


def test_thought_generator_sends_one_prompt_with_n_seeds():
    task = make_task()
    tree = ReasoningTree()
    root = tree.add_root("")
    decode = DecodeConfig(max_new_tokens=16, temperature=0.7)
    generator = ThoughtGenerator(task, PromptFormatter(byte_tokenizer()), decode, n=4, run_seed=9, depth=3)
    requests = generator.requests(PROBLEM, root)
    assert len(requests) == 4
    assert len({tuple(r.prompt_ids) for r in requests}) == 1
    assert [r.seed for r in requests] == [request_seed(9, PROBLEM.id, root.id, "thought", i) for i in range(4)]
    assert all(r.config == decode for r in requests)
    assert len({r.request_id for r in requests}) == 4


def test_state_evaluator_rates_each_state_with_its_own_prompt():
    task = make_task()
    tree = ReasoningTree()
    root = tree.add_root("")
    children = [tree.add_child(root.id, f"t{i}", f"t{i}\n") for i in range(3)]
    evaluator = StateEvaluator(task, PromptFormatter(byte_tokenizer()), DecodeConfig(), run_seed=0)
    requests = evaluator.requests(PROBLEM, children)
    assert len({tuple(r.prompt_ids) for r in requests}) == 3
    assert [r.seed for r in requests] == [request_seed(0, PROBLEM.id, c.id, "value", 0) for c in children]


def test_read_value_falls_back_on_unparseable_or_non_finite_replies():
    task = make_task()
    assert read_value(task, "8/10, good") == (8.0, True)
    assert read_value(task, "cannot say") == (-1.0, False)
    nan_task = SimpleTask("t", "v", parse=lambda text: float("nan"), fallback_value=0.5)
    assert read_value(nan_task, "anything") == (0.5, False)


def test_simple_task_fills_templates_and_finds_answers(tmp_path):
    task = make_task()
    prompt = task.thought_prompt(PROBLEM, "", 0, 2)
    assert "What is 6 * 7?" in prompt and "(nothing yet)" in prompt and "step 1:" in prompt
    assert fill("{a} {json: {b}}", a=1) == "1 {json: {b}}"
    state = task.extend_state(task.extend_state("", "first", 0), "ANSWER: 42", 1)
    assert state == "first\nANSWER: 42\n"
    assert task.is_terminal(PROBLEM, state, 1, 2) and not task.is_terminal(PROBLEM, "first\n", 0, 2)
    assert task.extract_answer(PROBLEM, state) == "42"
    assert task.score(PROBLEM, "42.0") == 1.0 and task.score(PROBLEM, "41") == 0.0 and task.score(PROBLEM, None) == 0.0
    assert first_number("score: -3.5 of 10") == -3.5 and first_number("none") is None
    data = tmp_path / "problems.jsonl"
    data.write_text('{"question": "1+1?", "answer": "2"}\n\n{"id": "b", "question": "2+2?"}\n')
    problems = task.load(data)
    assert [(p.id, p.question, p.gold) for p in problems] == [("1", "1+1?", "2"), ("b", "2+2?", None)]
    data.write_text('{"answer": 3}\n')
    with pytest.raises(SeedTotError, match="Line 1"):
        task.load(data)
    with pytest.raises(SeedTotError, match="does not exist"):
        task.load(tmp_path / "missing.jsonl")


def test_metrics_sum_executor_calls_and_compute_tokens_per_second():
    batches = [
        BatchRecord("thought", 0, 3, 2.0, GenerationStats(new_tokens=30, draft_tokens_proposed=20,
                                                         draft_tokens_accepted=15, target_forwards=10)),
        BatchRecord("value", 0, 3, 1.0, GenerationStats(new_tokens=30, target_forwards=30, draft_forwards=4)),
    ]
    metrics = summarize(batches, parse_failures=1, evaluations=3)
    assert (metrics.new_tokens, metrics.wall_seconds, metrics.requests, metrics.batches) == (60, 3.0, 6, 2)
    assert metrics.tokens_per_second == 20.0 and metrics.acceptance_rate == 0.75
    assert (metrics.target_forwards, metrics.draft_forwards, metrics.parse_failures) == (40, 4, 1)
    total = aggregate([metrics, RunMetrics(new_tokens=40, wall_seconds=2.0, requests=2, batches=1)])
    assert total.problems == 2 and total.new_tokens == 100 and total.tokens_per_second == 20.0
    assert RunMetrics().tokens_per_second is None and RunMetrics().acceptance_rate is None
    assert metrics.as_dict()["tokens_per_second"] == 20.0


def test_scheduler_events_become_dicts_with_times_from_the_first_event():
    from dataclasses import dataclass

    from seed_tot.metrics import event_records

    @dataclass
    class Tick:
        time: float
        kind: str

    assert event_records([Tick(105.5, "b"), Tick(105.0, "a")]) == [
        {"time": 0.5, "kind": "b"},
        {"time": 0.0, "kind": "a"},
    ]
    assert event_records([{"kind": "x"}]) == [{"kind": "x"}]
