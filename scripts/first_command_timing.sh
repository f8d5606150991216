#!/usr/bin/env bash
# The README's first command on this machine: `seed-tot models pull` (a fresh download where the
# models are not cached yet, else only their checksums), then the problem once with an empty
# calibration folder (the first run times each path for --method auto), once more with the
# measurement cached. Writes OUT (default results/first-command/<cpu>-<cores>c) with lscpu, the
# three commands' logs and /usr/bin/time output, the runs' folders and the calibration record.
#   bash scripts/first_command_timing.sh [OUT]
set -euo pipefail
cpu=$(lscpu | sed -n 's/^Model name: *//p' | tr ' ' '-' | tr -cd 'A-Za-z0-9-')
out="${1:-results/first-command/${cpu}-$(nproc)c}"
rm -rf "$out" && mkdir -p "$out/calibration"
lscpu > "$out/lscpu.txt"
uptime > "$out/load_before.txt"
/usr/bin/time -v seed-tot models pull > "$out/pull.log" 2> "$out/pull.stderr"
for run in first cached; do
    SEED_TOT_CALIBRATION_DIR="$out/calibration" /usr/bin/time -v \
        seed-tot gsm8k --limit 1 --out "$out/$run" > "$out/$run.log" 2> "$out/$run.stderr"
done
uptime > "$out/load_after.txt"
grep -E "Elapsed|Maximum resident" "$out/pull.stderr" "$out/first.stderr" "$out/cached.stderr"
