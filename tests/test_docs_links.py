"""Every relative link in README.md, docs/**/*.md and results/**/*.md points at a file or folder that exists.

Pure Python and fast: it reads the Markdown files, skips fenced code blocks and inline code,
and resolves each inline link `[text](target)` (images too) against the linking file's folder.
Web links (`https:`, `mailto:` ...) and in-page anchors (`#section`) are not checked; an
absolute path is refused, because it cannot resolve on a user's clone.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files(root: Path = ROOT) -> list[Path]:
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return pages + (sorted((root / "results").rglob("*.md")) if (root / "results").is_dir() else [])


def links(markdown: str) -> list[str]:
    """The link targets of one Markdown text, outside code blocks and inline code."""
    text = _INLINE_CODE.sub("", _FENCE.sub("", markdown))
    return [m.group(1) for m in _LINK.finditer(text)]


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """The relative link targets in `path` that do not resolve to an existing file or folder."""
    broken = []
    for target in links(path.read_text(encoding="utf-8")):
        if _SCHEME.match(target) or target.startswith("#"):
            continue
        if target.startswith("/"):
            broken.append(f"{target} (absolute path)")
            continue
        relative = target.split("#", 1)[0].split("?", 1)[0]
        if not (path.parent / relative).exists():
            broken.append(target)
    return broken


def test_every_relative_link_in_readme_docs_and_results_resolves():
    problems = {
        str(path.relative_to(ROOT)): bad
        for path in markdown_files()
        if (bad := broken_links(path))
    }
    assert not problems, f"broken links (path: targets): {problems}"


def test_the_checker_sees_the_links_it_checks():
    # A pattern that matched nothing would pass the test above vacuously.
    readme_links = links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len([t for t in readme_links if t.startswith("docs/")]) >= 10
    assert len(markdown_files()) >= 8


def test_a_broken_link_is_reported(tmp_path):
    (tmp_path / "docs" / "results" / "run").mkdir(parents=True)
    (tmp_path / "docs" / "page.md").write_text(
        "ok [folder](results/run/) and [anchor](#x) and [web](https://example.org)\n"
        "broken [missing](results/gone.json) and ![img](missing.png) and [abs](/etc/hosts)\n"
        "`[in code](nowhere.md)`\n```\n[in a fence](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    (tmp_path / "README.md").write_text("[page](docs/page.md#x) [bad](docs/nope.md)\n", encoding="utf-8")
    found = {str(p.relative_to(tmp_path)): broken_links(p, tmp_path) for p in markdown_files(tmp_path)}
    assert found == {
        "README.md": ["docs/nope.md"],
        "docs/page.md": ["results/gone.json", "missing.png", "/etc/hosts (absolute path)"],
    }


# -- code comments point at the doc that holds a measurement ------------------------------------

_MEASURED = re.compile(r"measured:\s*(docs/[\w./-]+\.md)#([\w-]+)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)


def heading_anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_measured_pointers(root: Path = ROOT) -> list[str]:
    """`measured: docs/FILE.md#anchor` pointers in the package's code whose file or heading is missing."""
    broken = []
    for source in sorted((root / "seed_tot").rglob("*.py")):
        text = re.sub(r"\s*\n\s*#?\s*", " ", source.read_text(encoding="utf-8"))  # a pointer may wrap
        for doc, anchor in _MEASURED.findall(text):
            path = root / doc
            markdown = _FENCE.sub("", path.read_text(encoding="utf-8")) if path.is_file() else ""
            if anchor not in {heading_anchor(h) for h in _HEADING.findall(markdown)}:
                broken.append(f"{source.relative_to(root)}: {doc}#{anchor}")
    return broken


def test_measured_pointers_in_code_name_an_existing_doc_section():
    assert broken_measured_pointers() == []
    assert len(re.findall("measured: docs/", "".join(p.read_text() for p in (ROOT / "seed_tot").rglob("*.py")))) >= 8


def test_a_measured_pointer_to_a_missing_section_is_reported(tmp_path):
    (tmp_path / "seed_tot").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n## What a `wide` forward costs\n```\n# not a heading\n```\n")
    (tmp_path / "seed_tot" / "x.py").write_text(
        "# ok (measured: docs/page.md#what-a-wide-forward-costs)\n"
        "# gone (measured:\n# docs/page.md#not-a-heading)\n"
        '"""no file (measured: docs/nope.md#page)"""\n'
    )
    assert broken_measured_pointers(tmp_path) == ["seed_tot/x.py: docs/page.md#not-a-heading", "seed_tot/x.py: docs/nope.md#page"]
    assert heading_anchor("The batched executors (seed_tot/scheduling/batched.py)") == "the-batched-executors-seed_totschedulingbatchedpy"
    assert heading_anchor("Throughput: 12 problems at C = 1, 4, 8, 16") == "throughput-12-problems-at-c--1-4-8-16"
