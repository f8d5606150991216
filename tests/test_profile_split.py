"""scripts/profile_split.py splits a py-spy profile's decode steps by the innermost known frame."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "profile_split.py"
STEP = "DecodeSession.step (seed_tot/scheduling/session.py:120)"
LM = "Qwen2ForCausalLM.forward (transformers/models/qwen2/modeling_qwen2.py:444)"
RAW = "\n".join([
    f"thread (1): MainThread;main (a.py:1);{STEP};{LM};PackedLinear.forward (seed_tot/runtime/packed_linear.py:73);GOMP_parallel (libgomp.so.1) 6",
    f"thread (1): MainThread;main (a.py:1);{STEP};{LM};sdpa_attention_forward (transformers/integrations/sdpa_attention.py:193) 2",
    f"thread (1): MainThread;main (a.py:1);{STEP};{LM};Qwen2RMSNorm.forward (transformers/models/qwen2/modeling_qwen2.py:60) 1",
    f"thread (1): MainThread;main (a.py:1);{STEP};sample (seed_tot/decoding/sampling.py:10) 1",
    "thread (1): MainThread;main (a.py:1);load_model (seed_tot/models/loading.py:196) 5",
    f"thread (2): tqdm_monitor;{STEP};{LM} 9",
])


def test_profile_split_shares_the_decode_steps_by_part(tmp_path):
    profile, out = tmp_path / "profile.txt", tmp_path / "split.json"
    profile.write_text(RAW + "\n")
    subprocess.run([sys.executable, str(SCRIPT), str(profile), "--json-out", str(out)], check=True, capture_output=True)
    rows = {row["part"]: row for row in json.loads(out.read_text())["rows"]}
    shares = {part: row["share_of_decode_steps"] for part, row in rows.items()}
    assert shares == {"linear layers": 0.6, "attention": 0.2, "rest of the model forward": 0.1,
                      "step outside the model (drafts, sampling, verify, Python)": 0.1, "outside decode steps": None}
    assert rows["outside decode steps"]["samples"] == 5  # another thread's samples count nowhere


def test_profile_split_refuses_a_profile_without_decode_steps(tmp_path):
    profile = tmp_path / "profile.txt"
    profile.write_text("thread (1): MainThread;main (a.py:1) 3\n")
    done = subprocess.run([sys.executable, str(SCRIPT), str(profile)], capture_output=True, text=True)
    assert done.returncode != 0 and "--native" in done.stderr
