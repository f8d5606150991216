import random, sys
sys.path.insert(0, "scripts")
from pathlib import Path
import evaluator_auroc as e
steps, _ = e.read_steps(e.trace_files([Path("results/quality-gsm8k/traces"), Path("results/gsm8k-31-42/traces")]))
logits = e.read_logits(Path("results/evaluator_auroc/gsm8k_logits.jsonl"))
rows = [(s.value, logits[(s.trace, s.node_id)]["value"], s.reaches) for s in steps if (s.trace, s.node_id) in logits and s.answered]
rng = random.Random(0)
diffs, a_s, a_l = [], [], []
for _ in range(2000):
    sample = [rows[rng.randrange(len(rows))] for _ in rows]
    lab = [r[2] for r in sample]
    s = e.auroc([r[0] for r in sample], lab); l = e.auroc([r[1] for r in sample], lab)
    if s is None or l is None: continue
    a_s.append(s); a_l.append(l); diffs.append(l - s)
def ci(x):
    x = sorted(x); return f"[{x[int(0.025*len(x))]:.3f}, {x[int(0.975*len(x))-1]:.3f}]"
lab = [r[2] for r in rows]
print(f"steps {len(rows)}, reaching gold {sum(lab)}; samples AUROC {e.auroc([r[0] for r in rows], lab):.3f} 95% CI {ci(a_s)}; "
      f"logits AUROC {e.auroc([r[1] for r in rows], lab):.3f} 95% CI {ci(a_l)}; logits - samples 95% CI {ci(diffs)} "
      f"(bootstrap over steps, 2000 resamples, seed 0)")
