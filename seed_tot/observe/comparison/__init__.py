"""The analysis behind `seed-tot report RUN [RUN...]`, re-derived from the files runs and pools store.

- runs.py: a tree run's folder (results.jsonl, traces, added chains) scored answer rule by answer rule.
- pools.py: chains of thought, from a pool's cot_samples.jsonl or from a run's traces, as votes.
- folders.py: the folders given, as tree runs and one source of chains, with their labels.
- points.py: accuracy and tokens per problem of each answer (greedy CoT, self-consistency at K,
  best-of-K, each tree run), the matched K and what a paired interval supports.
- text.py: the report as markdown (a run's table, the compute-matched comparison).
- plot.py: the comparison's points as a PNG, accuracy against tokens per problem.
"""

from seed_tot.observe.comparison.folders import bundled_loader, load_folders, run_label
from seed_tot.observe.comparison.plot import draw
from seed_tot.observe.comparison.points import SELF_CONSISTENCY_K, Point
from seed_tot.observe.comparison.pools import VALUES_FILE, chain_answer, pool_chains, pool_problems, stored_values
from seed_tot.observe.comparison.runs import ProblemReport, report_run
from seed_tot.observe.comparison.text import comparison_report, problem_line, table

__all__ = [
    "SELF_CONSISTENCY_K",
    "VALUES_FILE",
    "Point",
    "ProblemReport",
    "bundled_loader",
    "chain_answer",
    "comparison_report",
    "draw",
    "load_folders",
    "pool_chains",
    "pool_problems",
    "problem_line",
    "report_run",
    "run_label",
    "stored_values",
    "table",
]
