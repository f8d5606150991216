"""A measurement script's report: OUT.json (the figures and settings) and OUT.md (the tables), also
printed, so the terminal shows what the files hold."""

from __future__ import annotations

import json
from pathlib import Path


def write_report(out: Path, found: dict, markdown: str, indent: int = 2) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(found, indent=indent) + "\n")
    out.with_suffix(".md").write_text(markdown + "\n")
    print(markdown)
