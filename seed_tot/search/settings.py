"""The settings every search shares (SearchConfig); a search's own settings subclass it (BFSConfig,
MCTSConfig). The defaults written here are the only place the numbers live: the run configuration
and the command options read theirs from these fields."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from seed_tot.config import DecodeConfig
from seed_tot.task import DEFAULT_THOUGHT_TOKENS


class SearchConfig(BaseModel):
    """Settings every search shares (defaults chosen for small open models: README, "How an answer is chosen")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_thoughts: int = Field(3, ge=1, description="thoughts generated per expanded state (n)")
    depth: int | None = Field(None, ge=1, description="step limit T; None uses the task's default depth")
    thought_decode: DecodeConfig = DecodeConfig(max_new_tokens=DEFAULT_THOUGHT_TOKENS, temperature=0.7, top_p=0.95)
    value_decode: DecodeConfig = DecodeConfig(max_new_tokens=128, temperature=0.7, top_p=0.95)
    value_samples: int = Field(3, ge=1, description="evaluator replies per state, averaged (k)")
    value_mode: Literal["samples", "logits", "learned", "constant"] = Field(
        "samples", description="samples: k sampled evaluator replies, parsed; logits: the verdict words' "
        "probabilities from one forward per state (tasks with verdict_values); learned: a value head on the "
        "target's hidden states (a LearnedJudge given to the search), which also rates the chains of thought; "
        "constant: every state no rule rejects is worth 0.5, no model call (a blind baseline)"
    )
    vote: bool = Field(True, description="majority vote over answer leaves, for tasks with comparable answers")
    vote_weight: Literal["leaf", "path", "value"] = Field(
        "leaf", description="leaf: one vote per answer node; path: the answer leaves of one parent state share "
        "one vote (each chain of thought is its own path); value: each answer node votes with its value "
        "(value mode learned, which rates every answer node)"
    )
    cot_candidate: bool = Field(
        True, description="one greedy chain-of-thought of the target joins the vote (ties go to it), "
        "for tasks with a cot_prompt"
    )
    cot_samples: int = Field(
        4, ge=0, description="sampled chains of thought (at the thought temperature and top_p) that join the "
        "vote beside the greedy one: independent paths, as in self-consistency; none when thoughts are greedy "
        "or there is no vote"
    )
    escalate_samples: int = Field(
        0, ge=0, description="sampled chains of thought drawn in a second round where the vote over the first is "
        "unsure (its winner holds less than escalate_below of the votes); 0: never"
    )
    escalate_below: float = Field(
        0.7, ge=0.0, le=1.0, description="the winning answer's share of the votes below which escalate_samples "
        "more chains are drawn (0.7 was chosen on GSM8K training problems for the learned judge's weighted vote)"
    )
    escalate_from: Literal["root", "chains"] = Field(
        "root", description="root: the second round's chains start afresh; chains: each continues the first half "
        "of the best-valued chain of the vote's leading answer or its runner-up (a tree that decodes only the rest)"
    )
    stop_when_decided: bool = Field(
        True, description="a search made of chains alone cancels the chains still running once they can no longer "
        "change the vote's answer (nor whether a second round is drawn), plain or judged (the judge reads each chain "
        "as it ends): same answer, fewer tokens"
    )
    cot_decode: DecodeConfig = DecodeConfig(max_new_tokens=512, temperature=0.0)
    thought_mode: Literal["sample", "line", "choose", "random"] = Field(
        "sample", description="sample: n sampled thoughts per state; line: for tasks with a cot_prompt, a state is "
        "a partial chain of thought and a thought its next line (n sampled lines per state; with a learned judge, "
        "BFS is a value-guided beam over lines); choose: for tasks that list their moves "
        "(next_moves), the target's n most likely listed moves, read from one forward per point where they part; "
        "random: n of the listed moves drawn at random with a per-node seed, no model call (a blind baseline)"
    )
    known_states: bool = Field(
        True, description="for tasks that name their states (state_key, reaches_goal): prune thoughts that "
        "return to a state on their path or already in the tree, and stop at a state shown to reach the goal"
    )
    seed: int = 0
