"""The method registry (seed_tot/scheduling/methods.py): every method the CLI offers has a record,
each record says what its executor really does, and no other module tests a method's name."""

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from seed_tot.errors import ConfigError
from seed_tot.requests import ContinuousBatching, GenerationRequest
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.methods import METHOD_NAMES, METHODS, checked_settings, method_named

PACKAGE = Path(__file__).resolve().parent.parent / "seed_tot"
REGISTRY = PACKAGE / "scheduling" / "methods.py"
IN_PROCESS = [m.name for m in METHODS.values() if m.in_process]
ENGINES = [m.name for m in METHODS.values() if m.engine]


def test_every_method_the_cli_offers_has_a_record():
    from seed_tot.cli.tasks import gsm8k

    choice = next(p for p in gsm8k.params if p.name == "method").type.choices
    assert list(choice) == ["auto", *METHOD_NAMES]
    assert all(method_named(name).name == name for name in METHOD_NAMES)
    help_text = next(p for p in gsm8k.params if p.name == "method").help
    assert all(f"{name}:" in help_text for name in METHOD_NAMES)


def test_an_unknown_method_is_refused_with_the_list():
    with pytest.raises(ConfigError, match="Unknown method 'beam': use one of ar, sd"):
        method_named("beam")


def test_records_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        METHODS["ar"].can_score = False
    with pytest.raises(TypeError):
        METHODS["batched-lookup"].defaults["draft_slot_budget"] = 1


def _keyword_names(function, skip: int) -> set[str]:
    return set(list(inspect.signature(function).parameters)[skip:])


def test_settings_are_what_the_executors_take():
    from seed_tot.decoding.bita import BitaDecoder
    from seed_tot.scheduling.batched import BatchedARExecutor, BatchedSpeculativeExecutor
    from seed_tot.scheduling.seed import SeedOptions

    for method in METHODS.values():
        if method.decoder is not None:  # decode(target, prompt_ids, config, seed, **settings)
            assert method.settings == _keyword_names(method.decode_function(), 4), method.name
    seed_options = {f.name for f in dataclasses.fields(SeedOptions)}
    assert METHODS["seed"].settings == METHODS["seed-mcsd"].settings == seed_options | {"k", "num_workers"}
    assert METHODS["batched"].settings <= _keyword_names(BatchedARExecutor, 1)
    speculative = _keyword_names(BatchedSpeculativeExecutor, 2) | {"k"}
    assert all(METHODS[name].settings <= speculative for name in ("batched-sd", "batched-mcsd", "batched-lookup"))
    assert METHODS["bita"].settings == _keyword_names(BitaDecoder, 2) | {"checkpoint"}
    assert all(not METHODS[name].settings for name in ("ar", "hf-generate", *ENGINES))


def scoring_request(tokenizer) -> GenerationRequest:
    return GenerationRequest(tokenizer.encode("Is it right?"), request_id="s", score_tokens=(5, 6))


@pytest.mark.parametrize("name", IN_PROCESS)
def test_each_in_process_record_matches_its_executor(tiny_pair, name):
    draft, target = tiny_pair
    method = METHODS[name]
    if method.needs_draft:
        with pytest.raises(ConfigError, match="needs a draft"):
            make_executor(name, target)
    executor = make_executor(name, target, draft if method.needs_draft else None)
    try:
        assert isinstance(executor, ContinuousBatching) == method.continuous_batching
        shape = getattr(executor, "k_config", None) or getattr(getattr(executor, "options", None), "k_config", None)
        if method.k_config is not None and shape is not None:
            assert shape == method.k_config
        for setting, value in method.defaults.items():
            assert getattr(executor, setting, None) in (value, None)
        if method.draft_workers:  # SEED: running a request would start the draft worker processes
            from seed_tot.scheduling.seed.verifier import SeedSession

            assert SeedSession.can_score == method.can_score and executor.num_workers == method.defaults["num_workers"]
        elif method.can_score:
            [result] = executor.run([scoring_request(target.tokenizer)])
            assert len(result.candidate_logprobs) == 2
        else:
            with pytest.raises(ConfigError, match="cannot read next-token log-probabilities"):
                executor.run([scoring_request(target.tokenizer)])
    finally:
        executor.close()


def test_engine_records_name_builders_that_start_or_connect_to_a_server():
    from seed_tot.engines.server_executor import ServerExecutor
    from seed_tot.engines.setup import connect_server, start_llama_cpp

    assert METHODS["llama-cpp"].builder() is start_llama_cpp and METHODS["server"].builder() is connect_server
    assert all(METHODS[name].continuous_batching == hasattr(ServerExecutor, "session") for name in ENGINES)
    assert all(not METHODS[name].can_score for name in ENGINES)
    with pytest.raises(ConfigError, match="runs on an inference server"):
        make_executor("server", object())


def test_the_draft_shape_rule_is_one_for_every_method():
    assert checked_settings(METHODS["batched-sd"], {"k": 3})["k_config"] == (1, 1, 1)
    assert checked_settings(METHODS["seed-mcsd"], {})["k_config"] == (2, 2, 1)
    assert checked_settings(METHODS["batched-lookup"], {}) == {"draft_slot_budget": 8, "k_config": (1, 1)}
    with pytest.raises(ConfigError, match="either k or k_config"):
        checked_settings(METHODS["sd"], {"k": 2, "k_config": "2,1"})
    with pytest.raises(ConfigError, match="no option k_config"):
        checked_settings(METHODS["batched-lookup"], {"k_config": "1,1"})


def _method_literal(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in METHODS


def _names_a_method(node) -> bool:
    collection = isinstance(node, (ast.Set, ast.Tuple, ast.List))
    return _method_literal(node) or (collection and any(map(_method_literal, node.elts)))


def _method_name_tests(source: str) -> list[str]:
    """Comparisons with a method's name (==, !=, in), collections of method names, and
    startswith("seed")-style tests of a method family."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            hit = any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops) and any(
                map(_names_a_method, [node.left, *node.comparators]))
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            hit = sum(map(_method_literal, node.elts)) >= 2
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("startswith", "endswith"):
            hit = any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and any(m == a.value or m.startswith(a.value + "-") for m in METHODS) for a in node.args)
        else:
            hit = False
        if hit:
            found.append(f"line {node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_the_checker_finds_method_name_tests():
    source = ('a = method == "seed"\nb = opts.method in ("sd", "mcsd")\nc = {"batched", "batched-sd"}\n'
              'd = m.startswith("seed")\ne = selection.method in ("vote", "goal")\nf = name == "ar-like"\n')
    assert sorted({hit.split(":")[0] for hit in _method_name_tests(source)}) == ["line 1", "line 2", "line 3", "line 4"]


def test_no_module_but_the_registry_tests_a_method_name():
    found = {str(path.relative_to(PACKAGE)): hits for path in sorted(PACKAGE.rglob("*.py"))
             if path != REGISTRY and (hits := _method_name_tests(path.read_text()))}
    assert found == {}
