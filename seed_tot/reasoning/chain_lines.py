"""Thought mode "line": a state is the beginning of one chain of thought, a thought is its next line.

The target continues its own chain-of-thought reply (the task's cot_prompt, the state as the reply
so far) to the end of its next non-blank line, so every state is a chain prefix written exactly as
a whole chain is: the format a learned judge is trained on (seed_tot/values/states.py). A line that ends the
reply (EOS) completes the chain, and that state holds the answer. BFS in this mode with a learned
judge is OVM's value-guided beam search (Yu et al., 2024): n sampled next lines per kept partial
chain, the b best partial chains kept per line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seed_tot.config import DecodeConfig
from seed_tot.reasoning.generator import Thought, thought_requests
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.requests import GenerationRequest, GenerationResult
from seed_tot.task import Problem, Task

if TYPE_CHECKING:  # a runtime import would cycle: seed_tot.search imports this module
    from seed_tot.tree import ThoughtNode

LINE_STOP = ("\n",)
# The step limit when the config names none. Chains of the default target on GSM8K training
# problems have a median of 18 non-blank lines, 34 at the 95th percentile (560 chains).
LINE_DEPTH = 40


class ChainLines:
    def __init__(self, task: Task, formatter: PromptFormatter, decode: DecodeConfig, n: int, run_seed: int):
        self.task = task
        self.formatter = formatter
        self.decode = decode.model_copy(update={"stop": LINE_STOP, "stop_after_text": True})
        self.n = n
        self.run_seed = run_seed

    def requests(self, problem: Problem, node: ThoughtNode) -> list[GenerationRequest]:
        """The n requests that continue `node`'s partial chain by one line: one prompt, n seeds."""
        prompt_ids = self.formatter.encode(self.task.cot_prompt(problem), node.state)
        return thought_requests(prompt_ids, self.decode, self.run_seed, problem, node, self.n)

    def read(
        self, problem: Problem, node: ThoughtNode, requests: list[GenerationRequest], results: list[GenerationResult]
    ) -> list[Thought]:
        return [line_thought(node.state, result, request.seed) for request, result in zip(requests, results, strict=True)]


def line_thought(state: str, result: GenerationResult, seed: int) -> Thought:
    """The partial chain `state` extended by one generated line exactly as written: the line breaks
    before it and the one that ended it are kept, so the next prompt ends on the token the model
    wrote (cut at the line's last character, it would end on a token such as ":" that the model
    writes merged with its line break, and the continuation drifts)."""
    text = result.text if state else result.text.lstrip()
    return Thought(
        text=text.strip(),
        state=state + text,
        terminal=result.finish_reason == "eos",
        seed=seed,
        finish_reason=result.finish_reason,
        stats=result.stats,
    )
