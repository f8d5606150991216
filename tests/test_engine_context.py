"""llama.cpp allocates every slot's KV cache when it starts, so a run whose requests are all whole
chains of thought (self-consistency) sizes each slot's context to its longest request; a tree,
whose prompts grow with its states, keeps the engine's default."""

import json

import pytest
from click.testing import CliRunner

from seed_tot.cli import main
from seed_tot.engines.setup import DEFAULT_CTX_PER_SLOT, slot_context
from seed_tot.search.settings import SearchConfig


def test_a_slot_holds_the_longest_request_rounded_up_to_256():
    assert slot_context(1) == 256
    assert slot_context(240) == 256
    assert slot_context(241) == 512
    assert slot_context(850) == 1024


def engine_record(tmp_path, *args) -> dict:
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["gsm8k", "--tiny", "--method", "llama-cpp", "--limit", "1",
                                       "--max-new-tokens", "8", "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    trace = json.loads(next((out / "traces").glob("*.json")).read_text())
    return trace["config"]["engine"]


@pytest.mark.slow
def test_chains_of_thought_size_the_slots_and_trees_keep_the_default(tmp_path):
    from seed_tot.engines.setup import tokenizer_for
    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot_tasks import get_task

    task = get_task("gsm8k")
    formatter = PromptFormatter(tokenizer_for("tiny-target"))
    longest = max(len(formatter.encode(task.cot_prompt(p))) for p in task.load()[:1])
    budget = SearchConfig().cot_decode.max_new_tokens
    chains = engine_record(tmp_path / "chains", "--search", "self-consistency", "--cot-samples", "1")
    assert chains["ctx_per_slot"] == slot_context(longest + budget) < DEFAULT_CTX_PER_SLOT
    tree = engine_record(tmp_path / "tree", "--search", "bfs", "--depth", "1", "--thoughts", "2")
    assert tree["ctx_per_slot"] == DEFAULT_CTX_PER_SLOT
