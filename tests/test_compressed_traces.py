"""Traces stored gzip-compressed (`<id>.json.gz`, as results/ keeps them) read back exactly like
plain ones: `seed-tot report`, `seed-tot trace show|view|plot` and the scripts that read traces
give the same output for either, and a results row naming `<id>.json` finds `<id>.json.gz`."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from script_helpers import load_script

from seed_tot.cli import main
from seed_tot.errors import SeedTotError
from seed_tot.observe.trace import load_trace
from seed_tot.records import read_stored_text, stored_file, stored_files

ROOT = Path(__file__).resolve().parents[1]
STORED_RUN = ROOT / "results" / "gsm8k-31-42"  # 12 GSM8K trees, traces stored as .json.gz


def test_the_stored_results_keep_their_traces_compressed():
    assert len(list((STORED_RUN / "traces").glob("*.json.gz"))) == 12
    assert not [p for p in (ROOT / "results").rglob("*.json") if "traces" in p.parts]


def test_stored_file_and_text_read_a_path_or_its_gz(tmp_path):
    plain = tmp_path / "a.json"
    plain.write_text('{"x": 1}', encoding="utf-8")
    packed = tmp_path / "b.json.gz"
    packed.write_bytes(gzip.compress('{"x": 2}'.encode()))
    assert stored_file(plain) == plain and read_stored_text(plain) == '{"x": 1}'
    assert stored_file(tmp_path / "b.json") == packed  # only the compressed copy is stored
    assert read_stored_text(tmp_path / "b.json") == read_stored_text(packed) == '{"x": 2}'
    assert stored_file(tmp_path / "c.json") == tmp_path / "c.json"  # neither: the path asked for
    with pytest.raises(FileNotFoundError):
        read_stored_text(tmp_path / "c.json")


def test_stored_files_list_plain_and_compressed_once_each_plain_first(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("b.json", "sub/c.json", "d.json", "e.txt"):
        (tmp_path / name).write_text("{}")
    for name in ("a.json.gz", "sub/c.json.gz", "x.txt.gz"):
        (tmp_path / name).write_bytes(gzip.compress(b"{}"))
    found = [p.relative_to(tmp_path).as_posix() for p in stored_files(tmp_path, "*.json")]
    assert found == ["a.json.gz", "b.json", "d.json", "sub/c.json"]
    assert [p.name for p in stored_files(tmp_path, "*.json", recursive=False)] == ["a.json.gz", "b.json", "d.json"]


def plain_and_packed_copies(tmp_path: Path) -> tuple[Path, Path]:
    """The stored run twice under the same folder name: traces decompressed, and as stored."""
    packed = tmp_path / "packed" / STORED_RUN.name
    shutil.copytree(STORED_RUN, packed, ignore=shutil.ignore_patterns("*.png", "*.html"))
    plain = tmp_path / "plain" / STORED_RUN.name
    shutil.copytree(packed, plain)
    for path in (plain / "traces").glob("*.json.gz"):
        path.with_name(path.name.removesuffix(".gz")).write_bytes(gzip.decompress(path.read_bytes()))
        path.unlink()
    return plain, packed


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_report_and_trace_view_read_a_compressed_run_as_the_plain_one(tmp_path, monkeypatch):
    plain, packed = plain_and_packed_copies(tmp_path)
    reports = []
    for run in (plain, packed):
        monkeypatch.chdir(run.parent)  # the report names the folder as given: the same relative name
        reports.append(cli("report", "--no-plot", run.name))
    assert reports[0] == reports[1] and "gsm8k-31: gold" in reports[1]
    # a run folder: one index page holding every tree
    cli("trace", "view", str(plain))
    cli("trace", "view", str(packed))
    assert (plain / "index.html").read_text() == (packed / "index.html").read_text()
    # one trace, by its stored name or by the plain name results.jsonl records: FILE.html beside it
    one = "traces/gsm8k-31.json"
    cli("trace", "view", str(plain / one))
    cli("trace", "view", str(packed / f"{one}.gz"))
    assert (packed / "traces" / "gsm8k-31.html").read_text() == (plain / "traces" / "gsm8k-31.html").read_text()
    assert cli("trace", "view", str(packed / one), "-o", str(tmp_path / "by_plain_name.html"))
    assert (tmp_path / "by_plain_name.html").read_text() == (plain / "traces" / "gsm8k-31.html").read_text()
    assert cli("trace", "show", str(plain / one)) == cli("trace", "show", str(packed / f"{one}.gz"))


def test_trace_plot_names_its_pictures_after_the_trace_not_its_gz(tmp_path):
    _, packed = plain_and_packed_copies(tmp_path)
    cli("trace", "plot", str(packed / "traces" / "gsm8k-31.json.gz"), "--out", str(tmp_path / "pictures"))
    assert (tmp_path / "pictures" / "gsm8k-31.tree.png").is_file()


def test_scripts_read_compressed_traces_under_the_names_they_were_written_with(tmp_path):
    plain, packed = plain_and_packed_copies(tmp_path)
    auroc = load_script("evaluator_auroc")
    steps = {}
    for run in (plain, packed):
        found, loaded = auroc.read_steps(auroc.trace_files([run / "traces"]))
        steps[run] = [(Path(s.trace).relative_to(run).as_posix(), s.node_id, s.value, s.reaches) for s in found]
        assert all(Path(key).suffix == ".json" for key in loaded)  # a --logits file's keys stay valid
    assert steps[plain] == steps[packed] and steps[plain]
    repeats = load_script("count_repeats")
    tables = []
    for run in (plain, packed):
        result = CliRunner().invoke(repeats.main, [str(run / "traces")])
        assert result.exit_code == 0, result.output
        tables.append(result.output.replace(str(run), "RUN"))
    assert tables[0] == tables[1] and "| RUN/traces | 12 |" in tables[1]


def test_a_damaged_compressed_trace_is_refused_in_one_sentence(tmp_path):
    (tmp_path / "t.json.gz").write_bytes(b"not gzip at all")
    with pytest.raises(SeedTotError, match="not a readable gzip file"):
        load_trace(tmp_path / "t.json")
    (tmp_path / "u.json.gz").write_bytes(gzip.compress(b'{"schema_version": 1')[:-8])  # cut short
    with pytest.raises(SeedTotError, match="not a readable gzip file|not valid JSON"):
        load_trace(tmp_path / "u.json.gz")
