import json
import os
import stat

import pytest

from seed_tot.records import ProblemRecord, RecordLog, append_json_lines, append_record, finished_ids, load_records, read_json_lines, settings_key, write_json_atomically, write_text_atomically
from seed_tot.machine_facts import child_peak_rss_mib, machine_facts, peak_rss_mib


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


def test_append_json_lines_ends_a_torn_line_first(tmp_path):
    path = tmp_path / "rows.jsonl"
    append_json_lines(path, [{"a": 1}])
    with path.open("a") as stream:
        stream.write('{"a": ')  # killed mid-write
    append_json_lines(path, [{"b": 2}, {"c": 3}])
    assert path.read_text().splitlines() == ['{"a": 1}', '{"a": ', '{"b": 2}', '{"c": 3}']
    assert read_json_lines(path) == [{"a": 1}, {"b": 2}, {"c": 3}]
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    append_json_lines(empty, [{"d": 4}])
    assert empty.read_text() == '{"d": 4}\n'


def test_a_problem_recorded_after_a_torn_line_counts_as_finished(tmp_path):
    results = tmp_path / "results.jsonl"
    append_record(results, problem_record("p1"))
    with results.open("a") as stream:
        stream.write('{"problem_id": "p2", "met')  # killed while recording p2
    assert finished_ids(results) == {"p1"}  # --resume computes p2 again ...
    append_record(results, problem_record("p2"))
    assert finished_ids(results) == {"p1", "p2"}  # ... and its record is kept
    assert [r.problem_id for r in load_records(results)] == ["p1", "p2"]


def problem_record(problem_id: str) -> ProblemRecord:
    return ProblemRecord(problem_id, "ar", "7", "7", 1.0, True, 10, 1.0, 10.0, None, 10, 0, 0, f"traces/{problem_id}.json")


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
    assert facts["cpu"]["model"] and facts["cpu"]["cores_available"] >= 1  # which machine the figures were measured on


def test_cpu_facts_name_the_model_and_the_vector_flags_that_set_the_speed():
    from seed_tot.machine_facts import cpu_facts

    cpuinfo = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
               "flags\t\t: fpu sse4_2 avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile ht\nprocessor\t: 1\n")
    facts = cpu_facts(cpuinfo)
    assert facts["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert facts["vector_flags"] == ["amx_bf16", "amx_tile", "avx2", "avx512_bf16", "avx512f", "fma", "sse4_2"]
