"""What ships names no absolute machine path: the stored results, the packaged judge heads, the
docs and the README name files by their path in the repository (data files with their sha256),
and new runs write paths that mean the same on another machine."""

import gzip
import hashlib
import json
import struct
import sys

import pytest

from script_helpers import load_script

strip = load_script("strip_machine_paths")


def test_no_shipped_file_names_a_machine_path():
    files = strip.shipped_files()
    assert len(files) > 1000  # results/, seed_tot/, docs/, the README, tasks/ and prompts/, traces included
    found = {}
    for path in files:
        text = strip.shipped_text(path, path.read_bytes())
        paths = strip.machine_paths(text) if text is not None else []
        if paths:
            found[str(path.relative_to(strip.ROOT))] = sorted(set(paths))[:3]
    assert not found, f"{len(found)} shipped files name machine paths (run scripts/strip_machine_paths.py): {found}"


@pytest.mark.parametrize("text, expected", [
    ("/work/main/.venv/bin/python -m seed_tot gsm8k", "python -m seed_tot gsm8k"),
    ('{"path": "/work/main/tasks/data/gsm8k/test.jsonl"}', '{"path": "tasks/data/gsm8k/test.jsonl"}'),
    ("/work/wt-bench/tasks/data/gsm8k/test.jsonl", "tasks/data/gsm8k/test.jsonl"),
    ("/work/main/.venv/lib/python3.11/site-packages/click/core.py", "site-packages/click/core.py"),
    ("/root/.cache/seed-tot/models/a.gguf", "~/.cache/seed-tot/models/a.gguf"),
    ("--out /tmp/peers --run-dir /work/cllm_runs/synthetic", "--out peers --run-dir cllm_runs/synthetic"),
    ("cd /work/main && ls", "cd . && ls"),
    ("/usr/bin/time -v seed-tot gsm8k", "/usr/bin/time -v seed-tot gsm8k"),  # a system tool, every machine has it
    ("GET /v1/chat/completions 1/20", "GET /v1/chat/completions 1/20"),
])
def test_each_machine_path_is_rewritten_to_what_it_means_anywhere(text, expected):
    assert strip.rewrite_text(text) == expected
    assert not strip.machine_paths(expected)


def test_the_check_finds_every_kind_of_machine_path():
    text = "/work/main/x /root/.cache/y /tmp/z /home/me/w /usr/lib/python3.12/a.py /Users/me/v"
    assert len(strip.machine_paths(text)) == 6
    assert strip.machine_paths("/tmp/gpu_check_out and /tmp/site") == []  # scripts/gpu_check.sh's documented defaults


def test_a_bare_data_path_gets_its_sha256_beside_it():
    digest = hashlib.sha256((strip.ROOT / "tasks/data/gsm8k/train.jsonl").read_bytes()).hexdigest()
    text = '{"data": "/work/main/tasks/data/gsm8k/train.jsonl", "n": 1}'
    once = strip.add_data_hashes(strip.rewrite_text(text))
    assert json.loads(once) == {"data": "tasks/data/gsm8k/train.jsonl", "data_sha256": digest, "n": 1}
    assert strip.add_data_hashes(once) == once  # written once
    assert strip.add_data_hashes('{"data": "tasks/data/none.jsonl"}') == '{"data": "tasks/data/none.jsonl"}'


def test_a_compressed_trace_is_rewritten_the_way_results_stores_it(tmp_path):
    text = json.dumps({"data_file": {"path": "/work/main/tasks/data/gsm8k/test.jsonl", "sha256": "ab"}}, indent=2)
    path = tmp_path / "t.json.gz"
    first = strip.rewritten(path, gzip.compress(text.encode(), mtime=1234))
    assert json.loads(gzip.decompress(first))["data_file"]["path"] == "tasks/data/gsm8k/test.jsonl"
    assert first[4:8] == b"\0\0\0\0"  # no time stamp: the same content gives the same bytes
    assert strip.rewritten(path, first) == first


def test_a_heads_metadata_is_rewritten_and_its_tensors_kept(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    meta = {"head_id": "h", "train_data": "/work/main/tasks/data/gsm8k/train.jsonl", "train_problem_ids": ["a"]}
    tensors = {"weight": torch.arange(6, dtype=torch.float32), "mean": torch.ones(3)}
    path = tmp_path / "head.safetensors"
    save_file(tensors, str(path), metadata={"seed_tot_value_head": json.dumps(meta)})
    path.write_bytes(strip.rewritten(path, path.read_bytes()))
    header = json.loads(path.read_bytes()[8:8 + struct.unpack("<Q", path.read_bytes()[:8])[0]])
    got = json.loads(header["__metadata__"]["seed_tot_value_head"])
    assert got["train_data"] == "tasks/data/gsm8k/train.jsonl" and len(got["train_data_sha256"]) == 64
    loaded = load_file(str(path))
    assert all(torch.equal(loaded[k], tensors[k]) for k in tensors)


def test_a_run_names_a_bundled_data_file_by_its_repository_path_and_a_users_file_as_typed(tmp_path, monkeypatch):
    from seed_tot_tasks.base import DATA_DIR, data_file_record

    bundled = data_file_record(DATA_DIR / "gsm8k" / "test.jsonl")
    assert bundled["path"] == "tasks/data/gsm8k/test.jsonl"
    assert bundled["sha256"] == hashlib.sha256((DATA_DIR / "gsm8k" / "test.jsonl").read_bytes()).hexdigest()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "q.jsonl").write_text("{}\n")
    assert data_file_record(tmp_path / "mine" / "q.jsonl")["path"] == "mine/q.jsonl"  # below the working directory
    assert data_file_record("mine/q.jsonl")["path"] == "mine/q.jsonl"


def test_a_recorded_command_names_python_and_paths_portably(tmp_path, monkeypatch):
    from seed_tot.records import portable_command, portable_path

    monkeypatch.chdir(tmp_path)
    assert portable_path(tmp_path / "runs" / "x") == "runs/x" and portable_path(tmp_path) == "."
    assert portable_path("runs/x") == "runs/x"
    assert portable_command([sys.executable, str(tmp_path / "scripts" / "a.py"), "--out", str(tmp_path / "o"), "a b"]) \
        == "python scripts/a.py --out o 'a b'"


def test_a_trained_head_names_its_training_data_by_repository_path_and_sha256(tmp_path):
    torch = pytest.importorskip("torch")
    from seed_tot.cli.train_value import fit_and_save
    from seed_tot.values.features import FEATURE_RULE
    from seed_tot.values.head import load_head
    from seed_tot.training.value.fit import StateTable
    from seed_tot_tasks.base import DATA_DIR

    g = torch.Generator().manual_seed(0)
    rows = [(p, c, s, bool((p + c) % 2)) for p in range(8) for c in range(4) for s in range(2)]
    features = torch.randn(len(rows), 1, 8, generator=g)
    features[:, 0, 0] += torch.tensor([2.0 if label else -2.0 for *_, label in rows])
    table = StateTable(features.half(), torch.tensor([label for *_, label in rows]), [f"p{p}" for p, *_ in rows],
                       torch.tensor([p * 4 + c for p, c, _, _ in rows]), torch.tensor([s == 1 for _, _, s, _ in rows]),
                       (5,), torch.tensor([c for _, c, _, _ in rows]))
    data = DATA_DIR / "gsm8k" / "train.jsonl"
    settings = {"target": "tiny", "target_fingerprint": "0" * 16, "dtype": "float32", "layers": [5], "feature_rule": FEATURE_RULE}
    report = fit_and_save(table, tmp_path, settings, table.problem_ids(), data, seed=0)
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    meta = load_head(tmp_path / "value_head.safetensors").meta
    assert (meta["train_data"], meta["train_data_sha256"]) == ("tasks/data/gsm8k/train.jsonl", digest)
    assert (report["train"]["data"], report["train"]["data_sha256"]) == ("tasks/data/gsm8k/train.jsonl", digest)
