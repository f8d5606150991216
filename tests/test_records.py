from seed_tot.records import RecordLog, settings_key


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
