"""The run configuration (seed_tot/cli/run_config.py): resolved once into a frozen object,
printed by --print-config without loading a model, read back by --config FILE."""

import json

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from seed_tot.cli import main
from seed_tot.cli.run_config import NOT_RECORDED, RunConfig, resolve_config


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def printed(*args: str) -> dict:
    result = run(*args, "--print-config")
    assert result.exit_code == 0, (result.exception, result.stderr[-2000:])
    return json.loads(result.stdout)


def test_print_config_resolves_every_default_and_loads_nothing():
    # neither the model nor the data file is read: both would be refused by a run
    config = printed("blocksworld", "--target", "/no/such/model", "--data", "/no/such/file.jsonl")
    assert set(config) == set(RunConfig.model_fields)
    assert (config["method"], config["concurrency"]) == ("batched-lookup", 16)
    assert (config["search"], config["thought_mode"], config["value_mode"]) == ("mcts", "choose", "logits")
    serial = printed("gsm8k", "--tiny", "--method", "seed")
    assert (serial["concurrency"], serial["search"], serial["value_mode"]) == (1, "self-consistency", "samples")


def test_print_config_then_config_gives_the_identical_config(tmp_path):
    first = printed("blocksworld", "--tiny", "--method", "batched-sd", "--k-config", "2,1", "--method-option",
                    "share_prefix=false", "--thoughts", "2", "--no-cot", "--limit", "3")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(first))
    assert printed("blocksworld", "--config", str(path)) == first


def test_an_option_given_on_the_command_line_replaces_the_files_value(tmp_path):
    first = printed("gsm8k", "--tiny", "--temperature", "0.5")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(first))
    again = printed("gsm8k", "--config", str(path), "--temperature", "0.2", "--search", "bfs")
    assert (again["temperature"], again["search"]) == (0.2, "bfs")
    assert {k: v for k, v in again.items() if k not in ("temperature", "search")} == {
        k: v for k, v in first.items() if k not in ("temperature", "search")}


@pytest.mark.parametrize("content, needle", [
    ('{"tiny": true, "thoughtz": 3}', "unknown setting 'thoughtz'"),
    ("tiny: true", "is not JSON"),
    ("[1, 2]", "one JSON object"),
])
def test_a_bad_config_file_is_refused_in_one_sentence(tmp_path, content, needle):
    path = tmp_path / "run.json"
    path.write_text(content)
    result = run("gsm8k", "--config", str(path), "--print-config")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert needle in result.stderr.strip().splitlines()[-1]


def test_the_resolved_config_is_frozen_and_resolving_it_again_changes_nothing():
    from seed_tot_tasks import get_task

    config = RunConfig(**printed("gsm8k", "--tiny", "--method", "auto"))
    assert resolve_config(config, get_task("gsm8k")) == config
    with pytest.raises(ValidationError):
        config.method = "ar"
    recorded = config.recorded()
    assert recorded["method"] == "batched-lookup" and not NOT_RECORDED & set(recorded)


def test_the_chain_budget_reaches_the_search_and_zero_is_refused():
    from seed_tot.cli.run_config import search_settings
    from seed_tot_tasks import get_task

    config = RunConfig(**printed("gsm8k", "--tiny", "--cot-max-new-tokens", "64"))
    assert search_settings(config, get_task("gsm8k"))["cot_decode"].max_new_tokens == 64
    result = run("gsm8k", "--tiny", "--cot-max-new-tokens", "0", "--print-config")
    assert result.exit_code != 0 and "--cot-max-new-tokens must be at least 1" in result.stderr


def test_the_api_prints_its_settings_without_the_key_and_reads_them_back(tmp_path):
    first = printed("api", "--tiny", "--api-key", "secret", "--port", "8123", "--concurrency", "4")
    assert (first["method"], first["concurrency"], first["port"]) == ("batched-lookup", 4, 8123)
    assert first["search"] is None and "api_key" not in first and "secret" not in json.dumps(first)
    path = tmp_path / "api.json"
    path.write_text(json.dumps(first))
    assert printed("api", "--config", str(path)) == first
    assert printed("api", "--config", str(path), "--port", "9000")["port"] == 9000


def test_a_learned_judge_on_a_task_without_a_chain_prompt_is_refused_before_loading():
    result = run("creative-writing", "--tiny", "--value-mode", "learned", "--print-config")
    assert result.exit_code != 0 and "has no chain-of-thought prompt" in result.stderr


@pytest.mark.parametrize("args, expected", [
    (("--method", "batched-lookup"), ("learned", "value", 4)),  # the target decodes in process and a head ships for it
    (("--method", "batched-lookup", "--escalate", "0"), ("learned", "value", 0)),  # a named second round is kept
    (("--method", "llama-cpp"), ("samples", "leaf", 0)),  # the judge would load a second copy of the target
    (("--tiny",), ("samples", "leaf", 0)),  # no head ships for the tiny target
    (("--tiny", "--escalate", "2"), ("samples", "leaf", 2)),
    (("--target", "/no/such/model"), ("samples", "leaf", 0)),  # nor for another model
    (("--method", "batched-lookup", "--search", "bfs"), ("samples", "leaf", 0)),  # the rule measured the vote only
    (("--method", "batched-lookup", "--vote-weight", "leaf"), ("samples", "leaf", 0)),  # a named weight or mode is kept
    (("--method", "batched-lookup", "--value-mode", "logits"), ("logits", "leaf", 0)),
    (("--int8",), ("samples", "leaf", 0)),  # the head reads the 16-bit target's hidden states
])
def test_gsm8k_self_consistency_is_judged_by_default_only_where_a_head_ships_in_process(args, expected):
    config = printed("gsm8k", "--limit", "1", *args)
    assert (config["value_mode"], config["vote_weight"], config["escalate"]) == expected


def test_a_task_without_a_judged_vote_keeps_the_plain_vote():
    config = printed("blocksworld", "--search", "self-consistency", "--limit", "1", "--method", "batched-lookup")
    assert (config["value_mode"], config["vote_weight"]) == ("logits", "leaf")


@pytest.mark.parametrize("args, needle", [
    (("--int8", "--value-mode", "learned"), "reads the 16-bit target's hidden states"),
    (("--int8", "--method", "llama-cpp"), "decodes elsewhere"),
])
def test_int8_is_refused_where_it_cannot_apply_before_loading(args, needle):
    result = run("gsm8k", "--limit", "1", *args, "--print-config")
    assert result.exit_code != 0 and needle in result.stderr


def test_the_second_round_reaches_the_search_and_bad_values_are_refused():
    from seed_tot.cli.run_config import search_settings
    from seed_tot_tasks import get_task

    config = RunConfig(**printed("gsm8k", "--tiny", "--escalate", "4", "--escalate-below", "0.6"))
    settings = search_settings(config, get_task("gsm8k"))
    assert (settings["escalate_samples"], settings["escalate_below"]) == (4, 0.6)
    assert search_settings(RunConfig(**printed("gsm8k", "--tiny")), get_task("gsm8k"))["escalate_samples"] == 0
    in_process = RunConfig(**printed("gsm8k", "--method", "batched-lookup"))
    assert search_settings(in_process, get_task("gsm8k"))["escalate_samples"] == 4
    for flag, value, needle in (("--escalate", "-1", "--escalate must be 0"), ("--escalate-below", "1.5", "between 0 and 1")):
        result = run("gsm8k", "--tiny", flag, value, "--print-config")
        assert result.exit_code != 0 and needle in result.stderr


def test_every_option_default_is_the_default_of_the_field_it_fills():
    """A default is written once: each task command's (and the API's) option defaults to its RunConfig
    field, and the search settings the defaults make are the search configs' own defaults."""
    import click

    from seed_tot.cli.api import api, server_options
    from seed_tot.cli.run_config import search_settings
    from seed_tot.cli.tasks import blocksworld, creative_writing, gsm8k
    from seed_tot.search import SEARCHES
    from seed_tot_tasks import get_task

    server_only = {p.name for p in server_options(click.command()(lambda **_: None)).params}
    for command in (gsm8k, creative_writing, blocksworld, api):
        context = click.Context(command)
        filled = [p for p in command.params if p.name in RunConfig.model_fields
                  and not (command is api and p.name in server_only)]
        assert len(filled) >= 40, command.name
        for param in filled:
            expected = RunConfig.model_fields[param.name].default
            assert param.get_default(context) == expected, param.name
    search_option = next(p for p in gsm8k.params if p.name == "search")
    assert list(search_option.type.choices) == list(SEARCHES)

    task = get_task("gsm8k")
    for name, search in SEARCHES.items():
        defaults = search.config_class()
        settings = search_settings(RunConfig(search=name), task)
        for field, value in settings.items():
            if value is not None:  # None: decided by the task or the method (resolve_config)
                assert value == getattr(defaults, field), (name, field)
