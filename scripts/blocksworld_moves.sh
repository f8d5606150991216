#!/usr/bin/env bash
# Blocksworld instances 21-40 (held out: 1-20 were looked at), the BFS tree with sampled thoughts
# against the BFS tree whose children are the target's most likely legal moves (--thought-mode
# choose), same instances, same other settings: logit State Evaluator, known states, the greedy
# chain and 4 sampled chains in the vote. The instances go in chunks of BW_CHUNK (default 5), both
# arms on a chunk before the next, so a run stopped part-way leaves both arms on the same
# instances. Resumable: run the same command again.
#
#   nice -n 5 scripts/blocksworld_moves.sh [OUT]     # default results/blocksworld-21-40
#   seed-tot report OUT/sample OUT/choose
#   BW_START=40 BW_ARMS=choose scripts/blocksworld_moves.sh results/blocksworld-41-60   # one arm, instances 41-60
#   BW_SEARCH=mcts BW_START=40 BW_ARMS=choose scripts/blocksworld_moves.sh results/blocksworld-41-60   # MCTS, into mcts-choose/
#   BW_DTYPE=bfloat16 ...    # --dtype bfloat16, into choose-bfloat16/ (default: --dtype auto, no suffix)
#   BW_BREADTH=2 BW_START=40 BW_ARMS=choose scripts/blocksworld_moves.sh results/blocksworld-41-60   # beam b = 2, into choose-b2/
#   BW_VALUE=samples ...     # --value-mode samples (the sampled State Evaluator), into <arm>-value-samples/
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
    . .venv/bin/activate
fi

OUT=${1:-results/blocksworld-21-40}
FIRST=${BW_START:-20}
COUNT=${BW_LIMIT:-20}
CHUNK=${BW_CHUNK:-5}
CONCURRENCY=${BW_CONCURRENCY:-5}
ARMS=${BW_ARMS:-choose sample}
SEARCH=${BW_SEARCH:-bfs}
BREADTH=${BW_BREADTH:-1}
DTYPE=${BW_DTYPE:-auto}
VALUE=${BW_VALUE:-logits}

run_arm() {  # run_arm MODE START LIMIT
    local folder="$OUT/$1"
    if [ "$SEARCH" != bfs ]; then
        folder="$OUT/$SEARCH-$1"
    fi
    if [ "$BREADTH" != 1 ]; then
        folder="$folder-b$BREADTH"
    fi
    if [ "$VALUE" != logits ]; then
        folder="$folder-value-$VALUE"
    fi
    if [ "$DTYPE" != auto ]; then
        folder="$folder-$DTYPE"
    fi
    mkdir -p "$folder"
    echo "== $(date -u +%FT%TZ) seed-tot blocksworld --search $SEARCH --thought-mode $1 --value-mode $VALUE --breadth $BREADTH --dtype $DTYPE --start $2 --limit $3 --concurrency $CONCURRENCY | $(uptime)" >>"$folder/run.log"
    seed-tot blocksworld --search "$SEARCH" --thought-mode "$1" --value-mode "$VALUE" --breadth "$BREADTH" --dtype "$DTYPE" --start "$2" --limit "$3" \
        --concurrency "$CONCURRENCY" --resume --out "$folder" >>"$folder/run.log" 2>&1
}

for ((start = FIRST; start < FIRST + COUNT; start += CHUNK)); do
    limit=$((FIRST + COUNT - start < CHUNK ? FIRST + COUNT - start : CHUNK))
    for arm in $ARMS; do
        run_arm "$arm" "$start" "$limit"
    done
done
echo "done: $OUT"
