#!/usr/bin/env bash
# The blind Blocksworld tree (random legal moves, constant values: no model call) with seeds
# FIRST..LAST on instances 41-80 (6-step plans, depth 7) and PlanBench step-8 instances 1-40
# (depth 9), every other setting as the stored blind runs (results/blocksworld-blind/README.md).
# Each seed's run goes to OUT/step6-41-80/seedK and OUT/step8-1-40/seedK; a run already finished
# is skipped, so the script resumes. Seconds per run: its traces are not worth storing.
#
#   scripts/blocksworld_blind_seeds.sh 3 19 [OUT]     # OUT defaults to runs/blocksworld-blind-seeds
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
    . .venv/bin/activate
fi
FIRST=${1:?first seed}
LAST=${2:?last seed}
OUT=${3:-runs/blocksworld-blind-seeds}
BLIND=(--search mcts --thought-mode random --value-mode constant --no-cot --method batched-lookup --dtype auto
       --concurrency 5)
mkdir -p "$OUT/step6-41-80" "$OUT/step8-1-40"
for seed in $(seq "$FIRST" "$LAST"); do
    if [ ! -s "$OUT/step6-41-80/seed$seed/results.jsonl" ]; then
        seed-tot blocksworld "${BLIND[@]}" --start 40 --limit 40 --seed "$seed" --out "$OUT/step6-41-80/seed$seed" \
            >"$OUT/step6-41-80/seed$seed.log" 2>&1
    fi
    if [ ! -s "$OUT/step8-1-40/seed$seed/results.jsonl" ]; then
        seed-tot blocksworld "${BLIND[@]}" --data tasks/data/blocksworld/planbench_step8.jsonl --depth 9 --start 0 \
            --limit 40 --seed "$seed" --out "$OUT/step8-1-40/seed$seed" >"$OUT/step8-1-40/seed$seed.log" 2>&1
    fi
    echo "seed $seed done"
done
