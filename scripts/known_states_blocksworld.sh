#!/usr/bin/env bash
# Blocksworld with and without known states, on the same instances, same settings: the
# before/after of pruning repeated positions and stopping at the goal. The instances go in
# chunks of KS_CHUNK (default 5), both arms on a chunk before the next chunk starts, so a run
# stopped part-way leaves both arms on the same instances. Resumable: run the same command again.
#
#   nice -n 5 scripts/known_states_blocksworld.sh [OUT]     # default results/known_states/blocksworld-1-20
#   seed-tot report OUT/before ; seed-tot report OUT/after
#   python scripts/count_repeats.py OUT/before/traces OUT/after/traces
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
    . .venv/bin/activate
fi

OUT=${1:-results/known_states/blocksworld-1-20}
FIRST=${KS_START:-0}
COUNT=${KS_LIMIT:-20}
CHUNK=${KS_CHUNK:-5}
CONCURRENCY=${KS_CONCURRENCY:-5}

run_arm() {  # run_arm NAME FLAG START LIMIT
    local folder="$OUT/$1"
    mkdir -p "$folder"
    echo "== $(date -u +%FT%TZ) seed-tot blocksworld --search bfs --no-backtrack --start $3 --limit $4 $2 | $(uptime)" >>"$folder/run.log"
    seed-tot blocksworld --search bfs --no-backtrack --start "$3" --limit "$4" "$2" --cot-samples 0 --concurrency "$CONCURRENCY" \
        --resume --out "$folder" >>"$folder/run.log" 2>&1
}

for ((start = FIRST; start < FIRST + COUNT; start += CHUNK)); do
    limit=$((FIRST + COUNT - start < CHUNK ? FIRST + COUNT - start : CHUNK))
    run_arm before --no-known-states "$start" "$limit"
    run_arm after --known-states "$start" "$limit"
done
echo "done: $OUT"
