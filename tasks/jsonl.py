"""Reading JSON-lines data files with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path

from seed_tot.errors import SeedTotError


def read_jsonl(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    """(line number, row) for every non-blank line; each row must be an object with `required` keys."""
    if not path.is_file():
        raise SeedTotError(f"Data file {path} does not exist: pass the path of an existing JSONL file.")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise SeedTotError(
                    f"{path}, line {line_no}: not valid JSON ({error.msg}); each line must be one JSON "
                    f"object with the keys {', '.join(required)}."
                ) from None
            if not isinstance(row, dict) or any(key not in row for key in required):
                raise SeedTotError(
                    f"{path}, line {line_no}: expected a JSON object with the keys {', '.join(required)}."
                )
            rows.append((line_no, row))
    if not rows:
        raise SeedTotError(f"Data file {path} holds no rows: give a JSONL file with one problem per line.")
    return rows
