#!/usr/bin/env bash
# Held-out GSM8K test problems 43-100 (--start 42 --limit 58): the runs behind the compute-matched
# comparison, one heavy process at a time, each stage resumable. Run it again with the same
# command after an interruption: every stage skips what its folder already holds. The problems go
# in chunks of HELDOUT_CHUNK (default 10), every stage on a chunk before the next chunk starts, so
# a run stopped part-way leaves all configurations on the same problems (a paired comparison).
#
#   nice -n 5 scripts/heldout_gsm8k.sh            # all stages in order
#   scripts/heldout_gsm8k.sh pool8 tree           # some stages only
#   HELDOUT_FIRST=100 HELDOUT_COUNT=60 HELDOUT_OUT=results/heldout-gsm8k-101-160 scripts/heldout_gsm8k.sh pool8
#                                                 # other test problems (101-160), e.g. to confirm a result
#   seed-tot report results/heldout-gsm8k-43-100/cot-pool results/heldout-gsm8k-43-100/tree-bfs-logits-path
#
# Stages (why these settings: results/heldout-gsm8k-43-100/README.md):
#   pool8   8 sampled chains + the greedy chain per problem (self-consistency K = 1..8)
#   tree    BFS n=3 b=1, logit State Evaluator, one vote per path, 4 sampled chains in the vote
#   rerank  the logit State Evaluator rates the pool's chains: best-of-K against the vote on the same
#           chains (scripts/rerank_pool.py; forwards only, no token generated)
#   pool16  16 sampled chains per problem (adds samples 9..16 only; K = 16)
#   bon     the best-of-n search itself on 8 new chains (logit evaluator); not in the default list:
#           rerank measures the same rule on the pool's chains, paired, without generating
#   beam    the tree's settings with breadth 2 (the 2 best states kept per level); not in the default list
#   mcts    MCTS (10 iterations, logit State Evaluator, one vote per path, 4 sampled chains); not in the
#           default list: about 4x the tokens of the BFS tree
#   mcts-learned  the mcts stage's settings with the packaged learned judge (--value-mode learned): states
#           valued by the step head, the final vote weighted by each answer's value; not in the default list
#   tree-learned  the tree's settings with the packaged learned judge (--value-mode learned): states
#           ranked by the step head, the final vote weighted by each chain's value; not in the default list
#   beam-learned  the same with breadth 2; not in the default list
#   line-beam  a value-guided beam over the lines of one chain of thought (--thought-mode line, breadth 2,
#           3 sampled next lines per kept partial chain, the packaged learned judge), no separate chains;
#           the final vote weighted by each complete chain's value; not in the default list
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
    . .venv/bin/activate
fi

OUT=${HELDOUT_OUT:-results/heldout-gsm8k-43-100}
FIRST=${HELDOUT_FIRST:-42}   # problem 43
COUNT=${HELDOUT_COUNT:-58}   # to problem 100
CHUNK=${HELDOUT_CHUNK:-10}
CONCURRENCY=${HELDOUT_CONCURRENCY:-4}
POOL_METHOD=${HELDOUT_POOL_METHOD:-batched-lookup}   # llama-cpp: the pool's chains from llama.cpp's server
PER_CALL=${HELDOUT_PER_CALL:-4}
mkdir -p "$OUT"
LOCK="${TMPDIR:-/tmp}/heldout_gsm8k.$(echo "$PWD/$OUT" | md5sum | cut -c1-8).lock"
exec 9>"$LOCK"
if ! flock -n 9; then
    echo "another scripts/heldout_gsm8k.sh already runs on $OUT ($LOCK): one heavy process at a time" >&2
    exit 1
fi

stamp() { echo "== $(date -u +%FT%TZ) $* | $(uptime)"; }

pool() {  # pool SAMPLES
    mkdir -p "$OUT/cot-pool"
    stamp "pool --samples $1 --method $POOL_METHOD --per-call $PER_CALL" >>"$OUT/cot-pool/add_cot_samples.log"
    python scripts/add_cot_samples.py "$OUT/cot-pool" --task gsm8k "${SELECT[@]}" --samples "$1" --per-call "$PER_CALL" \
        --method "$POOL_METHOD" \
        >>"$OUT/cot-pool/add_cot_samples.log" 2>&1
}

rerank() {
    stamp "rerank_pool.py --score" >>"$OUT/cot-pool/rerank.log"
    python scripts/rerank_pool.py "$OUT/cot-pool" --score >>"$OUT/cot-pool/rerank.log" 2>&1
}

tree_run() {  # tree_run FOLDER ARGS...
    local folder="$OUT/$1"
    shift
    mkdir -p "$folder"
    stamp "seed-tot gsm8k $* ${SELECT[*]} --concurrency $CONCURRENCY --resume" >>"$folder/run.log"
    seed-tot gsm8k "${SELECT[@]}" --concurrency "$CONCURRENCY" --resume --out "$folder" "$@" >>"$folder/run.log" 2>&1
}

stage() {
    case "$1" in
        pool8) pool 8 ;;
        tree) tree_run tree-bfs-logits-path --search bfs --no-backtrack --value-mode logits --vote-weight path ;;
        rerank) rerank ;;
        pool16) pool 16 ;;
        bon) tree_run best-of-8-logits --search best-of-n --thoughts 8 --value-mode logits --cot-samples 0 ;;
        beam) tree_run tree-bfs-b2-logits-path --search bfs --no-backtrack --breadth 2 --value-mode logits --vote-weight path ;;
        mcts) tree_run mcts-logits-path --search mcts --value-mode logits --vote-weight path ;;
        mcts-learned) tree_run mcts-learned-value --search mcts --value-mode learned --vote-weight value ;;
        tree-learned) tree_run tree-bfs-learned-value --search bfs --no-backtrack --value-mode learned --vote-weight value ;;
        beam-learned) tree_run tree-bfs-b2-learned-value --search bfs --no-backtrack --breadth 2 --value-mode learned --vote-weight value ;;
        line-beam) tree_run line-beam-b2-n3-learned --search bfs --no-backtrack --thought-mode line --breadth 2 --thoughts 3 \
            --max-new-tokens 128 --no-cot --cot-samples 0 --value-mode learned --vote-weight value ;;
        *) echo "unknown stage $1: use pool8, rerank, tree, pool16, bon, beam, mcts, mcts-learned, tree-learned, beam-learned or line-beam" >&2; exit 2 ;;
    esac
}

if [ $# -eq 0 ]; then
    set -- pool8 rerank tree pool16 rerank
fi
for ((start = FIRST; start < FIRST + COUNT; start += CHUNK)); do
    limit=$((FIRST + COUNT - start < CHUNK ? FIRST + COUNT - start : CHUNK))
    SELECT=(--start "$start" --limit "$limit")
    for name in "$@"; do
        stage "$name" || echo "stage $name on problems $((start + 1))-$((start + limit)) failed (exit $?); its log is in its folder; going on" >&2
    done
done
stamp "done: $*"
