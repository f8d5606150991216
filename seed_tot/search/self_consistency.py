"""Self-consistency: no tree, only chains of thought of the whole problem, answered by majority
vote (Wang et al., 2023). The greedy chain and `cot_samples` sampled ones (at the thought
temperature and top-p) run as one batch; ties go to the greedy chain's answer.

On 40 held-out GSM8K problems these chains voting answered as well as the tree that also ran them,
at half its tokens (docs/quality.md), so GSM8K's CLI default is this search.
"""

from __future__ import annotations

from seed_tot.errors import ConfigError
from seed_tot.search.base import Search, SearchRun
from seed_tot.search.chains import require_cot_prompt
from seed_tot.search.settings import SearchConfig
from seed_tot.search.steps import Steps


class SelfConsistency(Search):
    name = "self-consistency"
    config_class = SearchConfig
    whole_chains_only = True

    @classmethod
    def check(cls, task, config: SearchConfig) -> None:
        require_cot_prompt(task, cls.name)
        if not config.cot_candidate or not config.vote:
            raise ConfigError("self-consistency answers by a vote over chains of thought: drop --no-cot and --no-vote.")

    def _search(self, run: SearchRun) -> Steps[int]:
        """No tree: the chains of thought and their vote (seed_tot/search/chains.py), which every search
        composes, are the whole search."""
        yield from ()
        return run.tree.root.id
