#!/usr/bin/env bash
# GPU readiness check: the tiny-model lossless tests on cuda, then executor timings on
# random-weight models of the default pair's shapes. Run from the repository root on a machine
# with CUDA, torch and the project's dependencies (docs/gpu.md):
#
#     bash scripts/gpu_check.sh            # output in $OUT, else /tmp/gpu_check_out
#
# Wheels in .whl/ (packages that machine lacks) are installed to /tmp/site first, and the
# project runs from this folder through PYTHONPATH, so nothing is built there.
# SEED_TOT_GPU_CHECK_DEVICE=cpu runs the same steps on a CPU (a dry run of this script).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu_check_out}"
device="${SEED_TOT_GPU_CHECK_DEVICE:-cuda}"
mkdir -p "$out"
log="$out/gpu_check.log"
export PYTHONUNBUFFERED=1

if ls .whl/*.whl >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "wheel install failed" | tee -a "$log"; exit 1; }
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi

{
    echo "== $(date -u +%FT%TZ) gpu_check on $device"
    nvidia-smi 2>&1 | head -15 || true
    python3 - <<'EOF'
import platform, torch, transformers, pydantic
print("python", platform.python_version(), "torch", torch.__version__, "transformers", transformers.__version__,
      "pydantic", pydantic.__version__)
print("cuda available", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")
EOF
} 2>&1 | tee -a "$log"

# The lossless tests: greedy equality with AR and sampled identity / distribution checks for AR,
# speculative decoding, batched executors, SEED (spawned workers on the device), Jacobi and
# lookahead. conftest puts the shared tiny pair on SEED_TOT_TEST_DEVICE; tests that build their
# own small-vocabulary models keep them on the CPU. float32 matmuls stay full precision (no TF32).
echo "== lossless tests on $device" | tee -a "$log"
SEED_TOT_TEST_DEVICE="$device" timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
    tests/test_autoregressive.py tests/test_speculative.py tests/test_batched.py tests/test_seed.py \
    tests/test_jacobi.py tests/test_lookahead.py -rfs --durations=10 2>&1 | tee -a "$log"
tests_rc=${PIPESTATUS[0]}
echo "== tests exit code $tests_rc" | tee -a "$log"

echo "== executor timings, random weights of the default pair's shapes, on $device" | tee -a "$log"
if [ "$device" = cpu ]; then shapes=(--tiny --dtype float32 --new-tokens 16 --requests 3); else shapes=(); fi
timeout 300 python3 scripts/bench_gpu_shapes.py --device "$device" "${shapes[@]}" --out "$out/shapes" 2>&1 | tee -a "$log"
bench_rc=${PIPESTATUS[0]}
echo "== bench exit code $bench_rc" | tee -a "$log"
cp "$out/shapes/results.json" "$out/shapes_results.json" 2>/dev/null
cp "$out/shapes/results.md" "$out/shapes_results.md" 2>/dev/null
exit $(( tests_rc != 0 || bench_rc != 0 ))
