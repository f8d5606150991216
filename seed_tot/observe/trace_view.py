"""Human views of a trace: an indented text tree and a networkx drawing of the tree."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from seed_tot.observe.trace import Trace


def _short(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def render_text(trace: Trace, width: int = 90) -> str:
    """The tree, one node a line, indented by depth; '*' marks the chosen path."""
    children: dict[int | None, list] = {}
    for node in trace.nodes:
        children.setdefault(node.parent, []).append(node)
    chosen = set(trace.chosen_path)
    lines = [
        f"{trace.task} problem {trace.problem_id} | search {trace.search} | executor {trace.executor}",
        f"question: {_short(trace.question, width)}",
    ]

    def walk(parent: int | None) -> None:
        for node in sorted(children.get(parent, []), key=lambda n: n.id):
            mark = "*" if node.id in chosen else " "
            value = "  -  " if node.value is None else f"{node.value:5.2f}"
            fallback = " (fallback)" if node.value_parsed is False else ""
            text = node.thought if node.kind != "root" else "(root)"
            lines.append(f"{mark} {'  ' * node.depth}[{node.id}] d{node.depth} v={value}{fallback} {_short(text, width)}")
            walk(node.id)

    walk(None)
    m = trace.metrics
    rate = "n/a" if m.acceptance_rate is None else f"{m.acceptance_rate:.1%}"
    tps = "n/a" if m.tokens_per_second is None else f"{m.tokens_per_second:.1f}"
    lines += [
        f"answer: {trace.final_answer!r}   gold: {trace.gold!r}   correct: {trace.correct}   score: {trace.score}",
        f"tokens {m.new_tokens}  seconds {m.wall_seconds:.1f}  tokens/s {tps}  acceptance {rate}  "
        f"target forwards {m.target_forwards}  draft forwards {m.draft_forwards}  "
        f"batches {m.batches}  parse failures {m.parse_failures}",
    ]
    return "\n".join(lines)


def _layered_positions(graph: nx.DiGraph, depth: dict[int, int]) -> dict[int, tuple[float, float]]:
    """Leaves spread evenly left to right; a parent sits above the middle of its children."""
    positions: dict[int, tuple[float, float]] = {}
    next_x = [0.0]

    def place(node: int) -> float:
        kids = sorted(graph.successors(node))
        if not kids:
            x = next_x[0]
            next_x[0] += 1.0
        else:
            xs = [place(k) for k in kids]
            x = sum(xs) / len(xs)
        positions[node] = (x, -float(depth[node]))
        return x

    for root in [n for n in graph.nodes if graph.in_degree(n) == 0]:
        place(root)
    return positions


def plot_tree(trace: Trace, path: str | Path) -> Path:
    """Draw the tree: node colour = value, thick red edges = chosen path."""
    graph = nx.DiGraph()
    depth = {n.id: n.depth for n in trace.nodes}
    for node in trace.nodes:
        graph.add_node(node.id)
    graph.add_edges_from((e.source, e.target) for e in trace.edges)
    positions = _layered_positions(graph, depth)
    values = {n.id: (n.value if n.value is not None else 0.0) for n in trace.nodes}
    chosen = list(trace.chosen_path)
    chosen_edges = set(zip(chosen, chosen[1:]))
    leaves = max(1, sum(1 for n in graph.nodes if graph.out_degree(n) == 0))
    figure = Figure(figsize=(max(6.0, leaves * 0.6), 1.5 + 1.2 * (max(depth.values(), default=0) + 1)))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    nodes = list(graph.nodes)
    nx.draw_networkx_edges(
        graph, positions, ax=axes, edgelist=[e for e in graph.edges if e not in chosen_edges], edge_color="gray"
    )
    nx.draw_networkx_edges(graph, positions, ax=axes, edgelist=list(chosen_edges), edge_color="red", width=2.5)
    drawn = nx.draw_networkx_nodes(
        graph, positions, ax=axes, nodelist=nodes, node_color=[values[n] for n in nodes], cmap="viridis", node_size=380
    )
    nx.draw_networkx_labels(graph, positions, ax=axes, labels={n: str(n) for n in nodes}, font_size=7, font_color="white")
    figure.colorbar(drawn, ax=axes, label="value")
    axes.set_title(f"{trace.task} {trace.problem_id}: {trace.search} tree (red = chosen path)")
    axes.set_axis_off()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path
