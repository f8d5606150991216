"""Creative Writing (ToT): a passage of 4 short paragraphs that end with 4 given sentences, in order."""

from __future__ import annotations

import re
from pathlib import Path

from seed_tot.errors import SeedTotError
from seed_tot_tasks.base import DATA_DIR, Problem, Task, load_template, row_id
from seed_tot_tasks.values import parse_rating

DEFAULT_PATH = DATA_DIR / "creative_writing" / "data_100_random_text.txt"
N_SENTENCES = 4

_SENTENCE_END = re.compile(r"(?<=[.!?][\"'\u201d\u2019)])\s+|(?<=[.!?])\s+")
# A sentence fragment without final punctuation, followed by the next sentence: "... party You realize".
_RUN_ON = re.compile(r"(?<=[a-z])\s+(?=(?!I\b|I['\u2019])[A-Z])")
_ABBREVIATIONS = ("mr.", "mrs.", "ms.", "dr.", "st.", "jr.", "sr.", "vs.", "etc.", "e.g.", "i.e.")


def _header(word: str) -> re.Pattern[str]:
    """A line that opens a section: "Plan:", "**Plan:**", "## Passage", "Passage" alone."""
    return re.compile(rf"^[ \t*#_>]*{word}[ \t*_]*(?::[ \t*_]*|[ \t*_:]*$)", re.IGNORECASE | re.MULTILINE)


_PLAN_HEADER = _header("plan")
_PASSAGE_HEADER = _header("passage")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})


def split_sentences(line: str, expected: int = N_SENTENCES) -> list[str]:
    """The sentences of one input line.

    Splits after . ! ? (with closing quotes), re-joins common abbreviations, and, when a source
    line has fewer sentences than expected because a fragment lost its final punctuation (the
    ToT data has a few, e.g. "Instead of a bachelorette party You realize ..."), splits at the
    earliest lower-case-word / capitalised-word boundary until the count is reached.
    """
    parts = [p.strip() for p in _SENTENCE_END.split(line.strip()) if p.strip()]
    merged: list[str] = []
    for part in parts:
        if merged and merged[-1].split()[-1].lower() in _ABBREVIATIONS:
            merged[-1] += " " + part
        else:
            merged.append(part)
    while len(merged) < expected:
        boundaries = [(i, m.start(), m.end()) for i, p in enumerate(merged) for m in _RUN_ON.finditer(p)]
        if not boundaries:
            break
        index, start, end = boundaries[0]
        part = merged[index]
        merged[index : index + 1] = [part[:start], part[end:]]
    return merged


def normalise_text(text: str) -> str:
    """Lower case, straight quotes, single spaces, no markdown emphasis or surrounding quotes."""
    text = text.translate(_QUOTES).replace("*", "").replace("_", " ")
    text = re.sub(r"\s+", " ", text).strip().lower()
    return text.strip("\"' ")


def split_paragraphs(passage: str) -> list[str]:
    """Paragraphs separated by blank lines; one per line when the passage has no blank lines."""
    blocks = [b.strip() for b in re.split(r"\n\s*\n", passage.strip()) if b.strip()]
    if len(blocks) == 1:
        blocks = [line.strip() for line in passage.splitlines() if line.strip()]
    return blocks


def _ends_with(paragraph: str, sentence: str) -> bool:
    paragraph, sentence = normalise_text(paragraph), normalise_text(sentence)
    return bool(sentence) and paragraph.endswith(sentence)


def constraint_count(passage: str, sentences: list[str]) -> int:
    """How many of `sentences` end paragraphs of `passage`, in order (0..len(sentences)).

    The largest number of sentences that end distinct paragraphs in the same relative order
    (a longest common subsequence), so one extra or missing paragraph costs only what it breaks.
    """
    paragraphs = split_paragraphs(passage)
    rows, cols = len(sentences), len(paragraphs)
    best = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(1, rows + 1):
        for j in range(1, cols + 1):
            match = best[i - 1][j - 1] + 1 if _ends_with(paragraphs[j - 1], sentences[i - 1]) else 0
            best[i][j] = max(best[i - 1][j], best[i][j - 1], match)
    return best[rows][cols]


def constraint_fraction(passage: str, sentences: list[str]) -> float:
    return constraint_count(passage, sentences) / len(sentences) if sentences else 0.0


def _after_header(text: str, header: re.Pattern[str]) -> str | None:
    matches = list(header.finditer(text))
    return text[matches[-1].end() :].strip() if matches else None


def plan_of(text: str) -> str:
    """The plan in a generated thought: after "Plan:" and before "Passage:" when they are there."""
    passage_start = _PASSAGE_HEADER.search(text)
    text = text[: passage_start.start()] if passage_start else text
    plan = _after_header(text, _PLAN_HEADER)
    return plan if plan is not None else text.strip()


def passage_of(text: str) -> str | None:
    """The passage after the last "Passage:" header, or None when there is no such header."""
    return _after_header(text, _PASSAGE_HEADER)


class CreativeWritingTask(Task):
    """ToT Creative Writing as in SEED (Appendix D), depth 2.

    Step 0 writes a plan, step 1 the passage following the plan. The state is "Plan:\\n..." and
    then "Plan:\\n...\\n\\nPassage:\\n...". The evaluator rates coherency 1-10 ("The coherency
    score is N"); an unreadable reply gets `fallback_value` = 1.0, the lowest rating. `score`
    is the deterministic constraint fraction (how many of the 4 sentences end the 4
    paragraphs, in order, divided by 4); the coherency judge (the `judge_prompt` / `judge_record` hook)
    is run by the engine with a model.
    """

    name = "creative_writing"
    default_data_path = DEFAULT_PATH  # the bundled data, read when no path is given
    default_depth = 2
    fallback_value = 1.0
    thought_tokens = 768  # a 4-paragraph passage needs more than the 256 of a GSM8K step

    def load(self, path: str | Path | None = None) -> list[Problem]:
        source = Path(path) if path is not None else DEFAULT_PATH
        if not source.is_file():
            raise SeedTotError(f"Data file {source} does not exist: pass a text file with one input per line.")
        problems = []
        for line_no, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            sentences = split_sentences(line)
            if len(sentences) != N_SENTENCES:
                raise SeedTotError(
                    f"{source}, line {line_no}: expected {N_SENTENCES} sentences ending in . ! or ?, "
                    f"found {len(sentences)}."
                )
            problem_id = row_id({}, "cw", source, DEFAULT_PATH, line_no)
            problems.append(Problem(id=problem_id, question=line.strip(), gold=sentences, meta={"line": line_no}))
        if not problems:
            raise SeedTotError(f"Data file {source} holds no inputs: give one line of 4 sentences per problem.")
        return problems

    @staticmethod
    def _sentences(problem: Problem) -> str:
        return "\n".join(f"{i}. {s}" for i, s in enumerate(problem.gold, start=1))

    def thought_prompt(self, problem: Problem, state: str, step: int, depth: int) -> str:
        if step == 0:
            return load_template(self.name, "thought_plan").format(sentences=self._sentences(problem))
        return load_template(self.name, "thought_passage").format(
            sentences=self._sentences(problem), plan=plan_of(state)
        )

    def value_prompt(self, problem: Problem, state: str, step: int) -> str:
        passage = passage_of(state)
        if passage is None:
            return load_template(self.name, "value_plan").format(
                sentences=self._sentences(problem), plan=plan_of(state)
            )
        return load_template(self.name, "value_passage_check").format(
            sentences=self._sentences(problem), passage=passage.strip()
        )

    def parse_value(self, text: str) -> float | None:
        """The concluding "Thus the coherency score is N" (the value prompts reason first)."""
        return parse_rating(text, prefer_last=True)

    def extend_state(self, state: str, thought: str, step: int) -> str:
        if step == 0:
            return "Plan:\n" + plan_of(thought)
        passage = passage_of(thought)
        return state.rstrip() + "\n\nPassage:\n" + (passage if passage is not None else thought.strip())

    def is_terminal(self, problem: Problem, state: str, step: int, depth: int) -> bool:
        return passage_of(state) is not None

    def extract_answer(self, problem: Problem, state: str) -> str | None:
        return passage_of(state)

    def score(self, problem: Problem, answer: str | None) -> float:
        return constraint_fraction(answer or "", problem.gold)

    def judge_prompt(self, passage: str) -> str:
        return load_template(self.name, "value_passage").format(passage=passage.strip())

    def parse_judge(self, text: str) -> float | None:
        """Coherency 1-10 from "The coherency score is N" (the first stated rating).

        The prompts ask for the score first (Appendix D's completion "The coherency score is:
        {value}"), so a reply cut off by the token budget still carries it.
        """
        return parse_rating(text)

    def judge_record(self, reply: str) -> dict:
        """The record fields of the coherency judge's reply: the score and the reply itself."""
        return {"coherency": self.parse_judge(reply), "coherency_reply": reply}
