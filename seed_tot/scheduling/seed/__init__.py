"""SEED: speculative scheduled execution with a rounds-scheduled strategy (Algorithm 1 of the paper).

n draft worker processes (worker.py) draft in parallel, one request
each; their drafts enter a verify queue; this process, the verifier, owns the target model,
takes drafts first-come-first-served (or by another discipline), verifies them losslessly
(target_probs_for_tree + verify_tree), commits its per-request target cache and sends the
verdict back, after which that worker drafts again. Requests beyond n wait for a free worker.
A session (continuous batching) lets new requests join that waiting line between verify steps.

Every random choice of a request comes from generators seeded by the request's seed (one
for drafting in the worker, one for verification here), so results do not depend on the
schedule, the discipline, batching or the number of workers.

The parts: options.py (SeedOptions), executor.py (SeedExecutor: the pool's lifecycle),
worker.py (a draft worker: its draft model, the messages it exchanges with the verifier),
verifier.py (the verifier loop, a session), pool.py (worker processes, messages, reaping),
logs.py (worker logs into this process's loggers), signals.py (Ctrl-C held over critical sections).
"""

from seed_tot.scheduling.seed.executor import SeedExecutor
from seed_tot.scheduling.seed.options import SeedOptions, shaped_k_config

__all__ = ["SeedExecutor", "SeedOptions", "shaped_k_config"]
