"""Human views of a trace: an indented text tree, a networkx drawing of the tree, and the
answer each answer node gives (read back with the trace's task)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import networkx as nx
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from seed_tot.observe.trace import Trace
from seed_tot.search.answers import marks_chain
from seed_tot.task import Problem, Task

TaskLookup = Callable[[str], Task | None]  # a task by its name (None: unknown)


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


def node_answers(trace: Trace, task_named: TaskLookup | None = None) -> dict[int, str | None]:
    """The answer the trace's task reads in each answer node (None for other nodes, and for all
    nodes when `task_named` knows no task of the trace's name). The engine never imports the
    bundled tasks: the CLI passes a lookup that does."""
    task = task_named(trace.task) if task_named is not None else None
    if task is None:
        return {node.id: None for node in trace.nodes}
    # newer traces keep the problem's task data (e.g. Blocksworld's PDDL) beside question and gold
    meta = getattr(trace, "problem_meta", None) or {}
    problem = Problem(id=trace.problem_id, question=trace.question, gold=trace.gold, meta=dict(meta))

    def read(state: str) -> str | None:
        try:
            return task.extract_answer(problem, state)
        except Exception:  # best effort: a state the task cannot parse shows no answer
            return None

    return {node.id: read(node.state) if node.kind == "answer" else None for node in trace.nodes}


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


def plot_tree(trace: Trace, path: str | Path, task_named: TaskLookup | None = None) -> Path:
    """Draw the tree: node colour = value, thick red edges = chosen path, short answers under
    answer leaves, rejected nodes ringed in red, chains of thought as squares set apart."""
    chains = [n for n in trace.nodes if marks_chain(n.info)]
    chain_ids = {n.id for n in chains}
    graph = nx.DiGraph()
    depth = {n.id: n.depth for n in trace.nodes}
    graph.add_nodes_from(n.id for n in trace.nodes if n.id not in chain_ids)
    graph.add_edges_from((e.source, e.target) for e in trace.edges if e.target not in chain_ids)
    positions = _layered_positions(graph, depth)
    right = max((x for x, _ in positions.values()), default=0.0)
    for index, node in enumerate(sorted(chains, key=lambda n: n.id)):
        positions[node.id] = (right + 1.5 + index, -1.0)
    values = {n.id: (n.value if n.value is not None else 0.0) for n in trace.nodes}
    by_id = {n.id: n for n in trace.nodes}
    answers = node_answers(trace, task_named)
    chosen = list(trace.chosen_path)
    chosen_edges = {(a, b) for a, b in zip(chosen, chosen[1:]) if b not in chain_ids}
    columns = right + 1 + (1.5 + len(chains) if chains else 0)
    figure = Figure(figsize=(max(6.0, columns * 0.6), 1.5 + 1.2 * (max(depth.values(), default=0) + 1)))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    tree_nodes = list(graph.nodes)
    nx.draw_networkx_edges(
        graph, positions, ax=axes, edgelist=[e for e in graph.edges if e not in chosen_edges], edge_color="gray"
    )
    nx.draw_networkx_edges(graph, positions, ax=axes, edgelist=list(chosen_edges), edge_color="red", width=2.5)
    drawn = nx.draw_networkx_nodes(
        graph, positions, ax=axes, nodelist=tree_nodes, node_color=[values[n] for n in tree_nodes], cmap="viridis",
        node_size=380, edgecolors=["red" if "rejected" in by_id[n].info else "white" for n in tree_nodes], linewidths=1.5,
    )
    if chains:
        nx.draw_networkx_nodes(
            graph, positions, ax=axes, nodelist=[n.id for n in chains], node_shape="s", node_color="mediumpurple",
            node_size=380, edgecolors=["red" if n.id in chosen else "white" for n in chains], linewidths=2.0,
        )
        xs = [positions[n.id][0] for n in chains]
        axes.text((min(xs) + max(xs)) / 2, -0.55, "chains of thought", ha="center", fontsize=8, color="rebeccapurple")
    nx.draw_networkx_labels(graph, positions, ax=axes, labels={n: str(n) for n in positions}, font_size=7, font_color="white")
    for node_id, answer in answers.items():
        if answer is not None:
            x, y = positions[node_id]
            axes.text(x, y - 0.3, _short(answer, 10), ha="center", va="top", fontsize=7,
                      bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "lightgray"})
    figure.colorbar(drawn, ax=axes, label="value")
    axes.set_title(
        f"{trace.task} {trace.problem_id}: {trace.search} tree (red = chosen path, red ring = rejected); "
        f"answer {_short(str(trace.final_answer), 16)}, gold {_short(str(trace.gold), 16)}"
    )
    axes.set_axis_off()
    axes.margins(x=0.05, y=0.15)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path
