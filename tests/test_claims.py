"""Every figure of README.md's "What it achieves" table and of results/README.md's summary tables
is re-derived from the stored files under results/ (no model), and the text as written must hold
it; a figure that no stored file gives is listed with the reason (tests/claims_helpers.py),
counted and printed. A figure in those tables that is neither derived nor listed fails."""

import re
import warnings
from collections import Counter

import pytest

from claims_helpers import ROOT, TABLES, Claim, all_claims, claims_of, figures, table_rows, vote_by_counts

CLAIMS = all_claims()
DERIVED = [c for c in CLAIMS if c.derive is not None]
LISTED = [c for c in CLAIMS if c.derive is None]


def rows_of(doc: str) -> dict[str, str]:
    """Each summary-table row of `doc` by its first cell: the whole row, and its result cell."""
    found = {}
    for heading, result in TABLES.get(doc, ()):
        for first, cells in table_rows(doc, heading).items():
            found[first] = (" | ".join(cells), cells[result])
    return found


def row_text(claim: Claim) -> str:
    """The text the claim sits in: its table row (first cell starting with `claim.row`), or the
    page itself with its lines joined where the claim is in a paragraph."""
    matches = [whole for first, (whole, _) in rows_of(claim.doc).items() if first.startswith(claim.row)]
    if matches:
        assert len(matches) == 1, f"{claim.row!r} names {len(matches)} rows of {claim.doc}"
        return matches[0]
    page = re.sub(r"\s+", " ", (ROOT / claim.doc).read_text())
    assert claim.row in page, f"{claim.doc} has no row or paragraph starting {claim.row!r}"
    return page


def claim_id(claim: Claim) -> str:
    return f"{claim.doc}:{claim.row[:30]}:{claim.text[:40]}"


@pytest.mark.parametrize("claim", DERIVED, ids=claim_id)
def test_a_derived_figure_is_what_the_page_says(claim):
    assert claim.files and all((ROOT / "results" / f).exists() for f in claim.files), f"{claim_id(claim)} names no stored file"
    assert claim.text in row_text(claim), f"the page no longer says {claim.text!r}"
    assert claim.derive() == claim.text, f"the stored files give {claim.derive()!r}, the page says {claim.text!r}"


@pytest.mark.parametrize("claim", LISTED, ids=claim_id)
def test_a_figure_listed_as_not_derivable_is_on_the_page_with_why(claim):
    assert claim.text in row_text(claim), f"the page no longer says {claim.text!r}: drop or update the listing"
    assert len(claim.not_derivable) > 20 and (claim.files or "no stored run" in claim.not_derivable)
    assert all((ROOT / "results" / f).exists() for f in claim.files), claim.files
    if claim.stored is not None:  # the stored aggregate report says the same
        assert claim.stored() == claim.text


@pytest.mark.parametrize("doc", list(TABLES))
def test_every_figure_in_a_table_is_derived_or_listed_as_not_derivable(doc):
    missing = {}
    for first, (_, result) in rows_of(doc).items():
        covered = sum((figures(c.text) for c in claims_of(doc) if first.startswith(c.row)), Counter())
        if figures(result) - covered:
            missing[first[:60]] = sorted((figures(result) - covered).elements())
    assert not missing, f"figures in {doc}'s tables that no claim derives or lists: {missing}"


def test_the_claims_are_counted_and_the_not_derivable_ones_printed():
    for claim in CLAIMS:
        assert (claim.derive is None) != (not claim.not_derivable), f"{claim_id(claim)}: derive it or say why not"
    numbers = {name: sum(sum(figures(c.text).values()) for c in group) for name, group in (("derived", DERIVED),
                                                                                          ("listed", LISTED))}
    lines = [f"{len(DERIVED)} claims ({numbers['derived']} numbers) re-derived from stored files, "
             f"{len(LISTED)} claims ({numbers['listed']} numbers) not derivable:"]
    lines += [f"  {c.doc}: {c.text!r}: not derivable: {c.not_derivable}" for c in LISTED]
    print("\n".join(lines))
    warnings.warn(UserWarning("\n".join(lines)))
    assert DERIVED and numbers["derived"] > numbers["listed"]


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
    claim = next(c for c in DERIVED if "4.66x (T 0.2)" in c.text)
    text = (ROOT / claim.doc).read_text()
    altered = text.replace(claim.text, claim.text.replace("4.66x", "4.76x"))
    assert altered != text
    original_read = type(ROOT).read_text
    monkeypatch.setattr(type(ROOT), "read_text",
                        lambda self, *a, **k: altered if self == ROOT / claim.doc else original_read(self, *a, **k))
    with pytest.raises(AssertionError, match="no longer says"):
        test_a_derived_figure_is_what_the_page_says(claim)
