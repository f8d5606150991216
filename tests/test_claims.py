"""Every figure of README.md's "What it achieves" table is re-derived from the stored files under
results/ (no model), and the text as written must hold it; a figure that no stored file gives is
listed with the reason (tests/claims_helpers.py), counted and printed. A figure in the table that
is neither derived nor listed fails."""

import re
import warnings
from collections import Counter

import pytest

from claims_helpers import CLAIMS, README, ROOT, Claim, claims_of, figures, table_rows, vote_by_counts

README_TABLE = "## What it achieves"


def row_text(claim: Claim) -> str:
    """The text the claim sits in: its table row (first cell starting with `claim.row`), or the
    page itself with its lines joined where the claim is in a paragraph."""
    rows = table_rows(claim.doc, README_TABLE) if claim.doc == README else {}
    matches = [" | ".join(cells) for first, cells in rows.items() if first.startswith(claim.row)]
    if matches:
        assert len(matches) == 1, f"{claim.row!r} names {len(matches)} rows of {claim.doc}"
        return matches[0]
    page = re.sub(r"\s+", " ", (ROOT / claim.doc).read_text())
    assert claim.row in page, f"{claim.doc} has no row or paragraph starting {claim.row!r}"
    return page


def claim_id(claim: Claim) -> str:
    return f"{claim.doc}:{claim.row[:30]}:{claim.text[:40]}"


DERIVED = [c for c in CLAIMS if c.derive is not None]


@pytest.mark.parametrize("claim", DERIVED, ids=claim_id)
def test_a_derived_figure_is_what_the_page_says(claim):
    assert claim.text in row_text(claim), f"the page no longer says {claim.text!r}"
    assert claim.derive() == claim.text, f"the stored files give {claim.derive()!r}, the page says {claim.text!r}"


def test_every_figure_is_derived_or_listed_as_not_derivable_with_why():
    for claim in CLAIMS:
        assert (claim.derive is None) != (not claim.not_derivable), f"{claim_id(claim)}: derive it or say why not"
        assert claim.derive is not None or claim.files or "no stored run" in claim.not_derivable, claim_id(claim)
    rows = table_rows(README, README_TABLE)
    missing = {}
    for first, cells in rows.items():
        stated = figures(cells[-1])
        covered = sum((figures(c.text) for c in claims_of(README) if first.startswith(c.row)), Counter())
        if stated - covered:
            missing[first[:50]] = sorted((stated - covered).elements())
    assert not missing, f"figures in README.md's table that no claim derives or lists: {missing}"
    listed = [c for c in CLAIMS if c.derive is None]
    derived_figures = sum(sum(figures(c.text).values()) for c in DERIVED)
    listed_figures = sum(sum(figures(c.text).values()) for c in listed)
    lines = [f"{len(DERIVED)} claims ({derived_figures} numbers) re-derived from stored files, "
             f"{len(listed)} claims ({listed_figures} numbers) not derivable:"]
    lines += [f"  {c.doc}: {c.text!r}: not derivable: {c.not_derivable}" for c in listed]
    print("\n".join(lines))
    warnings.warn(UserWarning("\n".join(lines)))


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.stored is not None], ids=claim_id)
def test_a_figure_only_a_stored_report_gives_matches_that_report(claim):
    assert claim.text in row_text(claim)
    assert claim.stored() == claim.text


@pytest.mark.parametrize("answers, correct", [
    (["4", "4", "5", None, "5", "6", "4", None], {"4"}),
    (["1", "2", "3", "1", "2", "3"], {"2"}),
    ([None, None, "7", "8"], {"8"}),
    (["9"] * 5 + ["3"] * 5, {"3"}),
])
def test_counting_the_votes_gives_the_mean_over_every_subset(answers, correct):
    from seed_tot.observe.paired_stats import expected_vote_accuracy

    for k in range(1, len(answers) + 1):
        assert vote_by_counts(answers, correct, k) == pytest.approx(expected_vote_accuracy(answers, correct, k))


def test_a_changed_figure_fails(monkeypatch):
    claim = next(c for c in DERIVED if "4.66x" in c.text)
    text = (ROOT / README).read_text()
    altered = text.replace(claim.text, claim.text.replace("4.66x", "4.76x"))
    assert altered != text
    original_read = type(ROOT).read_text
    monkeypatch.setattr(type(ROOT), "read_text",
                        lambda self, *a, **k: altered if self == ROOT / README else original_read(self, *a, **k))
    with pytest.raises(AssertionError, match="no longer says"):
        test_a_derived_figure_is_what_the_page_says(claim)
