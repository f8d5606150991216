"""In-process batched executors: every request of a tree expansion advances in one batch.

BatchedARExecutor (ar.py): one target forward per token for all rows together.
BatchedSpeculativeExecutor (speculative.py): lossless speculative decoding batched across the
rows. A step runs one batched draft forward per tree level and ONE batched target forward that
verifies every row's token tree; each row keeps what verify_tree accepted. Rows accept
different numbers of tokens, so both models keep a RaggedBatchCache (seed_tot/runtime/ragged.py):
rejected slots stay in the cache, masked out, and are never copied or rolled back.

Both executors share the prefill of identical prompts and of long common prompt prefixes
(prefill.py) and give each request its own generator seeded with the request's seed, used in
the same order as the serial decoders (seed_tot/decoding/), so the tokens chosen for a row never
depend on the other rows (rows.py: a row, its result, joining and leaving the batch).
"""

from seed_tot.scheduling.batched.ar import BatchedARExecutor
from seed_tot.scheduling.batched.speculative import BatchedSpeculativeExecutor

__all__ = ["BatchedARExecutor", "BatchedSpeculativeExecutor"]
