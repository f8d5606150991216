"""Evaluator-reranked best-of-N: n complete chains of thought, each rated by the State Evaluator;
the best-rated chain answers. The baseline a tree must beat with the same evaluator: it spends
the evaluator on whole solutions instead of on partial steps.

The chains are sampled from the task's chain-of-thought prompt at the thought temperature and
top-p (`n_thoughts` of them, the search's `cot_decode` budget) and hang from the root as answer
nodes; a chain cut off by the budget, or shown wrong by the task, is rejected and never chosen
while another is left. With `vote` the search's choice still goes through the usual answer vote
(then this is self-consistency with an evaluator tie-break); `--no-vote` keeps the reranking.
"""

from __future__ import annotations

from seed_tot.reasoning.request_seeds import search_request
from seed_tot.search.base import Search, SearchRun
from seed_tot.search.chains import add_cot_node, require_cot_prompt
from seed_tot.search.settings import SearchConfig
from seed_tot.tree import value_key
from seed_tot.search.steps import Batch, Steps


class BestOfN(Search):
    name = "best-of-n"
    config_class = SearchConfig

    @classmethod
    def check(cls, task, config: SearchConfig) -> None:
        require_cot_prompt(task, cls.name)

    def _search(self, run: SearchRun) -> Steps[int]:
        task, problem, cfg = self.task, run.problem, self.config
        prompt = task.cot_prompt
        decode = cfg.cot_decode.model_copy(
            update={"temperature": cfg.thought_decode.temperature, "top_p": cfg.thought_decode.top_p}
        )
        prompt_ids = self.formatter.encode(prompt(problem))
        root = run.tree.root.id
        requests = [search_request(prompt_ids, decode, cfg.seed, problem.id, root, "chain", index)
                    for index in range(cfg.n_thoughts)]
        outcome = yield Batch("thought", root, requests)
        run.log.add("thought", root, outcome.results, outcome)
        chains = []
        for index, result in enumerate(outcome.results):
            node = add_cot_node(run.tree, task, problem, result, index + 1, cfg.seed)
            del node.info["cot_sample"]  # a reranked chain, not a self-consistency sample
            node.info["chain"] = index
            node.seeds = {"thought": requests[index].seed}
            chains.append(node)
        value_requests = run.evaluator.requests(problem, chains)
        outcome = yield Batch("value", root, value_requests)
        if value_requests:
            run.log.add("value", root, outcome.results, outcome)
        for node, evaluation in zip(chains, run.evaluator.read(problem, chains, value_requests, outcome.results),
                                    strict=True):
            node.value, node.value_parsed, node.raw_values = evaluation.value, evaluation.parsed, evaluation.raw
            node.evaluation = evaluation.stats
            if evaluation.rejected is not None:
                node.info.setdefault("rejected", evaluation.rejected)
        return min(chains, key=value_key).id
