"""Imports go one way: tasks -> engine, decoders below scheduling, transformers behind runtime/,
the measurement scripts' code (seed_tot/analysis/) above everything the product runs, and no cycle between modules or between packages (seed_tot.search, seed_tot.observe, ...).

The graph (tests/import_graph.py) holds every import statement (module level, inside functions,
under TYPE_CHECKING), relative imports and importlib.import_module edges. The checker itself is
tested on synthetic sources below, so a breach written in any of those ways cannot pass.
"""

from pathlib import Path

import pytest

from import_graph import (
    cycles_with_evidence,
    imported_names,
    module_graph,
    package_graph,
    package_of,
    read_imports,
)

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("seed_tot", "tasks", "prompts")  # folders
IMPORT_NAMES = {"tasks": "seed_tot_tasks", "prompts": "seed_tot_prompts"}  # pyproject.toml's package-dir
BUNDLED = tuple(IMPORT_NAMES.values())
CLI_LAYER = ("seed_tot.cli",)  # may import the bundled tasks
TRANSFORMERS_OWNERS = ("seed_tot.runtime", "seed_tot.models", "seed_tot.scheduling.peers")
ANALYSIS = ("seed_tot.analysis",)  # what only scripts/ (and tests) import
IMPORTED_AS = ("seed_tot", *BUNDLED)  # every module of the tree, by its import name


def within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def offenders(imports: dict[str, set[str]], importers, forbidden, exempt=()) -> dict[str, list[str]]:
    """Modules within `importers` (and not `exempt`) that import something within `forbidden`."""
    found = {m: sorted(n for n in names if within(n, forbidden))
             for m, names in imports.items() if within(m, importers) and not within(m, exempt)}
    return {m: n for m, n in found.items() if n}


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    return read_imports(ROOT, PACKAGES, IMPORT_NAMES)


@pytest.fixture(scope="module")
def graph(imports):
    return module_graph(imports)


# -- the real package ------------------------------------------------------------------------


def test_the_checker_sees_lazy_imports(graph):
    # task_run imports the bundled tasks inside a function: the graph must hold that edge.
    assert graph.has_edge("seed_tot.cli.task_run", "seed_tot_tasks")


def test_the_checker_sees_import_module_tables(graph):
    # seed_tot/__init__.py imports its public names lazily through a table of module names.
    assert graph.has_edge("seed_tot", "seed_tot.api")


def test_no_import_cycles(graph):
    assert cycles_with_evidence(graph) == []


def test_no_package_cycles(graph):
    assert cycles_with_evidence(package_graph(graph)) == []


def test_engine_does_not_import_the_bundled_tasks(imports):
    assert offenders(imports, ("seed_tot",), BUNDLED, exempt=CLI_LAYER) == {}


def test_decoders_sit_below_scheduling_and_search(imports):
    upper = ("seed_tot.scheduling", "seed_tot.search", "seed_tot.reasoning")
    assert offenders(imports, ("seed_tot.decoding",), upper) == {}


def test_search_knows_executors_only_through_requests(imports):
    # sessions and capabilities are declared in seed_tot/requests.py; search never sees scheduling/
    assert offenders(imports, ("seed_tot.search", "seed_tot.reasoning"), ("seed_tot.scheduling",)) == {}


def test_the_product_does_not_import_the_analysis_code(imports):
    assert offenders(imports, IMPORTED_AS, ANALYSIS, exempt=ANALYSIS) == {}


def test_the_analysis_package_exists(imports):
    # the rule above holds vacuously if the package moves: make it fail instead
    assert any(within(m, ANALYSIS) for m in imports)


def test_transformers_only_behind_runtime_and_models(imports):
    assert offenders(imports, PACKAGES, ("transformers",), exempt=TRANSFORMERS_OWNERS) == {}


# -- the checker, on synthetic sources (negative controls) -------------------------------------


def test_relative_imports_resolve_against_the_package():
    names = imported_names("from ..scheduling import session\nfrom . import tree\n", "seed_tot.search.driver")
    assert {"seed_tot.scheduling.session", "seed_tot.search.tree"} <= names
    # in a package's __init__, one dot is the package itself
    assert "seed_tot.search.bfs" in imported_names("from .bfs import BFS\n", "seed_tot.search", is_package=True)


def test_import_module_with_a_literal_name_is_an_edge():
    source = "import importlib\ndef f():\n    return importlib.import_module('seed_tot.scheduling.session')\n"
    assert "seed_tot.scheduling.session" in imported_names(source, "seed_tot.decoding.x")
    bare = "from importlib import import_module\nimport_module('.session', __package__)\n"
    assert "seed_tot.scheduling.session" in imported_names(bare, "seed_tot.scheduling.batched")


def test_import_module_through_a_table_is_an_edge():
    source = "import importlib\nTABLE = {'x': 'seed_tot.search.bfs:BFS'}\ndef f(k):\n    return importlib.import_module(TABLE[k])\n"
    assert "seed_tot.search.bfs" in imported_names(source, "seed_tot.decoding.x")


def test_a_relative_upward_import_breaks_the_layer_rule():
    imports = {"seed_tot.decoding.x": imported_names("from ..scheduling import session\n", "seed_tot.decoding.x")}
    assert offenders(imports, ("seed_tot.decoding",), ("seed_tot.scheduling",)) == {
        "seed_tot.decoding.x": ["seed_tot.scheduling", "seed_tot.scheduling.session"]
    }


def test_an_import_module_breach_breaks_the_layer_rule():
    source = "def f():\n    import importlib\n    return importlib.import_module('seed_tot.search.bfs')\n"
    imports = {"seed_tot.decoding.x": imported_names(source, "seed_tot.decoding.x")}
    assert offenders(imports, ("seed_tot.decoding",), ("seed_tot.search",)) == {"seed_tot.decoding.x": ["seed_tot.search.bfs"]}


def test_a_product_import_of_the_analysis_code_breaks_the_layer_rule():
    source = "def f():\n    from seed_tot.analysis.reranking import rerank_table\n"
    imports = {"seed_tot.observe.x": imported_names(source, "seed_tot.observe.x"),
               "seed_tot_tasks.y": imported_names("from seed_tot import analysis\n", "seed_tot_tasks.y"),
               "seed_tot.analysis.z": imported_names("from seed_tot.analysis import reranking\n", "seed_tot.analysis.z")}
    assert offenders(imports, IMPORTED_AS, ANALYSIS, exempt=ANALYSIS) == {
        "seed_tot.observe.x": ["seed_tot.analysis.reranking", "seed_tot.analysis.reranking.rerank_table"],
        "seed_tot_tasks.y": ["seed_tot.analysis"],
    }


def write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_package_cycle_is_found_even_without_a_module_cycle(tmp_path):
    # a.one -> b.one and b.two -> a.two: no module cycle, but packages a and b import each other,
    # and the upward edge hides under TYPE_CHECKING.
    write_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "",
        "pkg/a/one.py": "from pkg.b import one\n",
        "pkg/a/two.py": "",
        "pkg/b/__init__.py": "",
        "pkg/b/one.py": "",
        "pkg/b/two.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a.two import X\n",
    })
    graph = module_graph(read_imports(tmp_path, ("pkg",)))
    assert cycles_with_evidence(graph) == []
    cycles = cycles_with_evidence(package_graph(graph, ("pkg",)))
    assert len(cycles) == 1 and sorted(cycles[0]) == [
        "pkg.a -> pkg.b (pkg.a.one -> pkg.b, pkg.a.one -> pkg.b.one)", "pkg.b -> pkg.a (pkg.b.two -> pkg.a.two)"
    ]


def test_an_acyclic_package_tree_passes(tmp_path):
    write_tree(tmp_path, {
        "pkg/__init__.py": "", "pkg/a/__init__.py": "", "pkg/a/one.py": "from ..b import one\n",
        "pkg/b/__init__.py": "", "pkg/b/one.py": "from pkg import base\n", "pkg/base.py": "",
    })
    graph = package_graph(module_graph(read_imports(tmp_path, ("pkg",))), ("pkg",))
    assert cycles_with_evidence(graph) == [] and set(graph.edges) == {("pkg.a", "pkg.b"), ("pkg.b", "pkg.base")}


def test_layers_are_subpackages_or_top_level_modules():
    assert package_of("seed_tot.search.bfs") == "seed_tot.search"
    assert package_of("seed_tot.requests") == "seed_tot.requests"
    assert package_of("seed_tot_tasks.gsm8k") == "seed_tot_tasks"
