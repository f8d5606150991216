"""Imports go one way: tasks -> engine, decoders below scheduling, transformers behind runtime/.

Reads every import statement (module level and inside functions) of seed_tot, tasks and
prompts, so a lazy import that closes a cycle counts too.
"""

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("seed_tot", "tasks", "prompts")
CLI_LAYER = ("seed_tot.cli",)  # may import the bundled tasks
TRANSFORMERS_OWNERS = ("seed_tot.runtime", "seed_tot.models", "seed_tot.scheduling.peers")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    files = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    return {module_name(p): imported_names(p) for p in files}


@pytest.fixture(scope="module")
def graph(imports) -> nx.DiGraph:
    graph = nx.DiGraph()
    for module, names in imports.items():
        for name in names:
            # A submodule importing its own package is not an edge (the package's __init__ runs first).
            if name in imports and name != module and not module.startswith(name + "."):
                graph.add_edge(module, name)
    return graph


def test_the_checker_sees_lazy_imports(graph):
    # task_run imports the bundled tasks inside a function: the graph must hold that edge.
    assert graph.has_edge("seed_tot.cli.task_run", "tasks")


def test_no_import_cycles(graph):
    assert list(nx.simple_cycles(graph)) == []


def test_engine_does_not_import_the_bundled_tasks(imports):
    offenders = {m: sorted(n for n in names if within(n, ("tasks", "prompts")))
                 for m, names in imports.items() if within(m, ("seed_tot",)) and not within(m, CLI_LAYER)}
    assert {m: n for m, n in offenders.items() if n} == {}


def test_decoders_sit_below_scheduling_and_search(imports):
    upper = ("seed_tot.scheduling", "seed_tot.search", "seed_tot.reasoning")
    offenders = {m: sorted(n for n in names if within(n, upper))
                 for m, names in imports.items() if within(m, ("seed_tot.decoding",))}
    assert {m: n for m, n in offenders.items() if n} == {}


def test_transformers_only_behind_runtime_and_models(imports):
    offenders = sorted(m for m, names in imports.items()
                       if within(m, PACKAGES) and not within(m, TRANSFORMERS_OWNERS)
                       and any(within(n, ("transformers",)) for n in names))
    assert offenders == []
