import json
import os
import stat

import pytest

from seed_tot.records import (
    RecordLog,
    append_json_lines,
    child_peak_rss_mib,
    machine_facts,
    peak_rss_mib,
    settings_key,
    write_json_atomically,
    write_text_atomically,
)


def test_record_log_round_trips_and_ignores_a_torn_last_line(tmp_path):
    path = tmp_path / "log.jsonl"
    log = RecordLog(path)
    log.add(settings_key("a", {"x": 1}), {"value": 1})
    log.add(settings_key("b", {"x": 1}), {"value": 2})
    with path.open("a") as stream:
        stream.write('{"key": "c", "rec')  # killed mid-write
    again = RecordLog(path)
    assert again.get(settings_key("a", {"x": 1})) == {"value": 1}
    assert again.get(settings_key("b", {"x": 1})) == {"value": 2}
    assert again.get(settings_key("a", {"x": 2})) is None
    assert again.get("c") is None
    again.add("d", {"value": 4})
    assert RecordLog(path).get("d") == {"value": 4}


def test_get_or_compute_computes_once():
    calls = []
    log = RecordLog(None)
    assert log.get_or_compute("k", lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    assert log.get_or_compute("k", lambda: calls.append(1) or {"v": 2}) == {"v": 1}
    assert calls == [1]


def test_append_json_lines_ends_a_torn_line_first_when_asked(tmp_path):
    path = tmp_path / "rows.jsonl"
    append_json_lines(path, [{"a": 1}])
    with path.open("a") as stream:
        stream.write('{"a": ')  # killed mid-write
    append_json_lines(path, [{"b": 2}, {"c": 3}], end_torn_line=True)
    assert path.read_text().splitlines() == ['{"a": 1}', '{"a": ', '{"b": 2}', '{"c": 3}']


def test_atomic_json_write_keeps_the_old_file_when_the_rename_fails(tmp_path, monkeypatch):
    path = write_json_atomically(tmp_path / "out" / "report.json", {"v": 1})
    assert json.loads(path.read_text()) == {"v": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~current_umask()  # as open() would create it

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_text_atomically(path, "half")
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temporary file left behind


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_machine_facts_name_the_load_the_code_and_the_memory():
    facts = machine_facts()
    assert len(facts["load_average"]) == 3 and facts["cpu_count"] >= 1
    assert facts["peak_rss_mib"] == pytest.approx(peak_rss_mib(), abs=50) and facts["peak_rss_mib"] > 10
    assert child_peak_rss_mib(os.getpid()) == pytest.approx(peak_rss_mib(), abs=50)
