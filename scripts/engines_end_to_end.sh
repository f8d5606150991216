#!/usr/bin/env bash
# GSM8K test problems 31-42 end to end, one method after another on the same machine, each with
# the CLI's defaults for that method (so each method runs at its own default concurrency):
# wall time, tokens/s over the run, accuracy and peak RSS of the whole process tree.
#
#   scripts/engines_end_to_end.sh [OUT] [METHOD ...]
#   METHOD: batched-lookup | batched-lookup-logits | llama-cpp | llama-cpp-draft | hf-generate | ar | ...
#   (batched-lookup-logits: batched-lookup with the logit State Evaluator, --value-mode logits)
#   E2E_START / E2E_LIMIT select other problems (default 30 / 12: problems 31-42).
#
# A method whose folder already holds runs.jsonl is skipped, so an interrupted run resumes by
# running the same command again (each folder also resumes problem by problem).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/engines/gsm8k_31_42}
shift || true
START=${E2E_START:-30}
LIMIT=${E2E_LIMIT:-12}
[ $# -gt 0 ] || set -- batched-lookup llama-cpp llama-cpp-draft
for method in "$@"; do
    folder="$OUT/$method"
    if [ -f "$folder/runs.jsonl" ]; then
        echo "skip $method: $folder/runs.jsonl exists"
        continue
    fi
    mkdir -p "$folder"
    args=(--search bfs --no-backtrack --method "$method")
    [ "$method" = llama-cpp-draft ] && args=(--search bfs --no-backtrack --method llama-cpp --with-draft)
    [ "$method" = batched-lookup-logits ] && args=(--search bfs --no-backtrack --method batched-lookup --value-mode logits)
    uptime >"$folder/uptime_before.txt"
    echo "== $(date -u +%FT%TZ) seed-tot gsm8k --start $START --limit $LIMIT ${args[*]}"
    /usr/bin/time -v -o "$folder/time_v.txt" \
        seed-tot gsm8k --start "$START" --limit "$LIMIT" "${args[@]}" --resume --out "$folder" \
        >"$folder/run.log" 2>&1 || echo "$method failed: see $folder/run.log"
    uptime >"$folder/uptime_after.txt"
done
