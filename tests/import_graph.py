"""The import graph of a source tree, read statically (tests/test_layers.py checks its shape).

Every way a module names another counts as an edge: `import a.b`, `from a import b`, relative
imports (`from ..b import c`, resolved against the module's package), `importlib.import_module`
(and `__import__`) with a literal name, and, in a module that calls import_module with a computed
name, every module of the tree named by a string literal in it (its lookup table). Imports
inside functions and under `if TYPE_CHECKING:` count too: a cycle through them is still a cycle
in the design, even when Python happens to tolerate it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

DYNAMIC_IMPORTERS = ("import_module", "__import__")


def module_name(path: Path, root: Path, import_names: dict[str, str] | None = None) -> str:
    """The dotted name `path` is imported as; `import_names` maps a top folder to the name it installs as."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts[0] = (import_names or {}).get(parts[0], parts[0])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of `from <level dots><target> import ...` written in `module`."""
    package = module if is_package else module.rpartition(".")[0]
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        raise ValueError(f"{module}: relative import beyond the top-level package")
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def imported_names(source: str, module: str, is_package: bool = False) -> set[str]:
    """Names `source` (the text of `module`) imports, each also as `<from-module>.<name>` so a
    submodule imported by `from package import submodule` is found."""
    names: set[str] = set()
    dynamic = False
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = resolve_relative(module, is_package, node.level, node.module)
            if base:
                names.add(base)
            names.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
        elif isinstance(node, ast.Call) and _called_name(node) in DYNAMIC_IMPORTERS and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                name = first.value
                if name.startswith("."):
                    level = len(name) - len(name.lstrip("."))
                    name = resolve_relative(module, is_package, level, name.lstrip(".") or None)
                names.add(name)
            else:
                dynamic = True
    if dynamic:  # the computed name comes from somewhere: count the module names the source spells
        names.update(
            node.value.partition(":")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        )
    return names


def read_imports(root: Path, packages: tuple[str, ...], import_names: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Module name -> imported names, for every .py file of the folders `packages` under `root`."""
    files = [p for package in packages for p in (root / package).rglob("*.py")]
    names = {p: module_name(p, root, import_names) for p in files}
    return {names[p]: imported_names(p.read_text(), names[p], p.name == "__init__.py") for p in files}


def module_graph(imports: dict[str, set[str]]) -> nx.DiGraph:
    """Edges between the modules of the tree (names outside it are dropped)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(imports)
    for module, names in imports.items():
        for name in names:
            # A submodule importing its own package is not an edge (the package's __init__ runs first).
            if name in imports and name != module and not module.startswith(name + "."):
                graph.add_edge(module, name)
    return graph


def package_of(module: str, root_packages: tuple[str, ...] = ("seed_tot",)) -> str:
    """The layer a module belongs to: the subpackage (or top-level module) right below a root
    package, e.g. seed_tot.search.bfs -> seed_tot.search, seed_tot.requests -> seed_tot.requests;
    outside the root packages, the top-level package (seed_tot_tasks.gsm8k -> seed_tot_tasks)."""
    parts = module.split(".")
    if parts[0] in root_packages:
        return ".".join(parts[:2])
    return parts[0]


def package_graph(modules: nx.DiGraph, root_packages: tuple[str, ...] = ("seed_tot",)) -> nx.DiGraph:
    """Edges between layers: package A -> B when a module of A imports a module of B."""
    graph = nx.DiGraph()
    for source, target in modules.edges:
        a, b = package_of(source, root_packages), package_of(target, root_packages)
        if a != b:
            graph.add_edge(a, b, via=graph.get_edge_data(a, b, {}).get("via", []) + [(source, target)])
    return graph


def cycles_with_evidence(graph: nx.DiGraph) -> list[list[str]]:
    """Each simple cycle, its edges written `a -> b (module -> module, ...)` where the graph keeps them."""
    found = []
    for cycle in nx.simple_cycles(graph):
        steps = []
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            via = graph.edges[a, b].get("via")
            steps.append(f"{a} -> {b}" + (f" ({', '.join(f'{s} -> {t}' for s, t in sorted(via))})" if via else ""))
        found.append(steps)
    return found
