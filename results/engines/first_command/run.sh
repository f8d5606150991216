set -e
# FIRSTCMD: a folder holding a fresh clone of the repository in FIRSTCMD/repo (default ./firstcmd);
# the timings and logs land beside it.
root="$(cd "${FIRSTCMD:-firstcmd}" && pwd)"
cd "$root/repo"
export XDG_CACHE_HOME="$root/xdg" PIP_NO_CACHE_DIR=1
rm -rf "$root/xdg"
s=$(date +%s.%N)
python3 -m venv .venv && . .venv/bin/activate && pip install -q torch==2.13.0 && pip install -q -e .
i=$(date +%s.%N)
/usr/bin/time -v seed-tot models pull > "$root/pull.log" 2>&1
p=$(date +%s.%N)
/usr/bin/time -v seed-tot gsm8k --limit 1 > "$root/gsm8k.log" 2>&1
g=$(date +%s.%N)
echo "install $(echo "$i-$s"|bc) pull $(echo "$p-$i"|bc) gsm8k $(echo "$g-$p"|bc) total $(echo "$g-$s"|bc)"
uptime
