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



def test_llama_cpp_gets_a_slot_per_row_as_many_as_the_memory_holds():
    from seed_tot.scheduling.memory import GIB, engine_slots

    per_token = 28 * 1024  # the default 1.5B target's float16 KV
    assert engine_slots(5, 768, per_token, 12 * GIB) == 5  # the first command: no chain waits for a slot
    assert engine_slots(80, 768, per_token, 12 * GIB) == 80
    # 4,096-token slots of a tree: 10 GiB leaves 7.2 GiB for KV after the reserve, 65 slots of 112 MiB
    assert engine_slots(200, 4096, per_token, 10 * GIB) == 65
    assert engine_slots(8, 4096, per_token, GIB) == 1  # never none


def test_the_kv_size_is_read_from_the_config_beside_the_gguf_file(tmp_path):
    from seed_tot.scheduling.memory import kv_bytes_beside

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    assert kv_bytes_beside(str(gguf)) is None  # then the engine keeps its default slots
    (tmp_path / "config.json").write_text(json.dumps(
        {"num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "hidden_size": 1536}))
    assert kv_bytes_beside(str(gguf)) == 2 * 28 * 2 * 128 * 2


def test_a_started_llama_cpp_gets_the_runs_width_where_the_kv_size_is_known(tmp_path, monkeypatch):
    from seed_tot.cli import run_executor
    from seed_tot.cli.run_config import RunConfig

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    (tmp_path / "config.json").write_text(json.dumps(
        {"num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "hidden_size": 1536}))
    started = {}
    monkeypatch.setattr("seed_tot.engines.setup.open_llama_cpp",
                        lambda target, draft, slots, *args, **kwargs: started.setdefault("slots", slots))
    config = RunConfig(method="llama-cpp", target=str(gguf), limit=3, cot_samples=4, max_memory="12GB")
    run_executor.open_engine(config, 700)
    assert started["slots"] == 3 * 5  # 3 problems at once x (greedy + 4 chains)
    started.clear()
    run_executor.open_engine(config.model_copy(update={"server_parallel": 2}), 700)
    assert started["slots"] == 2
