"""A batch of sequences that grow by different amounts per step, sharing one KV cache.

Every forward appends the same number of slots to every row (a row with fewer tokens gets
pad slots at the end). The slots written since the last `commit` form the current *step*:
inside a step a token sees the row's committed tokens, its own ancestors in the step (a
token tree) and itself. `commit` turns chosen step slots into committed context; every other
slot (pads, rejected draft tokens) stays in the cache but is masked out forever, so no
per-row rollback or copy is needed. Position ids count only a row's committed tokens plus
the depth inside the step, so each row's logits equal those of its own sequence computed
alone. `compact` drops dead slots once they pile up.
"""

from __future__ import annotations

import torch

from seed_tot.runtime.cache import RowKV, concat_left_padded, gather_positions, row_positions, select_rows, stack_rows
from seed_tot.runtime.masks import additive_mask
from seed_tot.runtime.runner import ModelRunner


class RaggedBatchCache:
    """Ragged batch of sequences over one append-only DynamicCache of one ModelRunner."""

    def __init__(self, runner: ModelRunner, batch_size: int, compact_slack: int = 32):
        self.runner = runner
        self.cache = runner.new_cache()
        self.compact_slack = compact_slack
        self.valid = torch.zeros(batch_size, 0, dtype=torch.bool)  # committed slots
        self.lengths = [0] * batch_size  # committed tokens per row = next position id
        self._step_start = 0
        self._reset_step(batch_size)

    @classmethod
    def from_rows(cls, runner: ModelRunner, rows: list[RowKV], compact_slack: int = 32) -> "RaggedBatchCache":
        """A batch whose row r starts with rows[r] as committed context (KV kept from an earlier
        batch, positions 0..len-1; a row may be empty)."""
        batch = cls(runner, len(rows), compact_slack)
        batch.cache, pads = stack_rows(rows)
        width = rows[0][0][0].shape[-2] + pads[0]
        batch.valid = torch.zeros(len(rows), width, dtype=torch.bool)
        for row, pad in enumerate(pads):
            batch.valid[row, pad:] = True
        batch.lengths = [width - pad for pad in pads]
        batch._reset_step(len(rows))
        return batch

    def extend(self, other: "RaggedBatchCache") -> None:
        """Append the rows of `other` (same model, no open step in either) after this batch's rows:
        requests join a running batch between steps (continuous batching)."""
        self._require_no_step("extend")
        other._require_no_step("extend")
        self.cache, pad_self, pad_other = concat_left_padded(self.cache, self.batch_size, other.cache, other.batch_size)
        left = torch.zeros(self.batch_size, pad_self, dtype=torch.bool)
        right = torch.zeros(other.batch_size, pad_other, dtype=torch.bool)
        self.valid = torch.cat([torch.cat([left, self.valid], 1), torch.cat([right, other.valid], 1)], 0)
        self.lengths = self.lengths + other.lengths
        self._reset_step(self.batch_size)

    def committed_kv(self, row: int) -> RowKV:
        """A copy of one row's committed KV, in order (to keep a prompt's KV for a later batch)."""
        self._require_no_step("committed_kv")
        return row_positions(self.cache, row, self.valid[row].nonzero().flatten())

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    @property
    def width(self) -> int:
        """Slots held in the cache (committed, dead and current-step)."""
        return int(self.valid.shape[1])

    @property
    def step_width(self) -> int:
        """Slots appended since the last commit; the next forward's token i lands in slot step_width + i."""
        return self.width - self._step_start

    def _reset_step(self, batch_size: int) -> None:
        self._step_start = self.width
        self._visible = torch.zeros(batch_size, 0, 0, dtype=torch.bool)  # step slot sees step slot
        self._depth = torch.zeros(batch_size, 0, dtype=torch.long)
        self._parent = torch.zeros(batch_size, 0, dtype=torch.long)
        self._pad = torch.zeros(batch_size, 0, dtype=torch.bool)

    def forward(
        self, tokens: list[list[int]], parents: list[list[int]], logits_at: list[int] | None = None
    ) -> torch.Tensor:
        """Append one group of tokens per row to the current step; return their logits (B, q, V).

        parents[r][i] is the step slot of token i's parent (an earlier slot of this step, or of
        this call: step_width before the call + j), or -1 when the token directly follows the
        row's committed tokens. Row r's logits for tokens[r][i] are at [r, i]. With `logits_at`
        (one index per row) only those logits are computed and returned, (B, 1, V).
        """
        batch = self.batch_size
        if len(tokens) != batch or len(parents) != batch:
            raise ValueError(f"expected {batch} rows of tokens and parents")
        q = max(len(t) for t in tokens)
        if q == 0:
            raise ValueError("forward needs at least one token")
        if any(len(t) != len(p) for t, p in zip(tokens, parents)):
            raise ValueError("every token needs a parent entry")
        pad_id = self.runner.pad_token_id
        ids = torch.tensor([list(t) + [pad_id] * (q - len(t)) for t in tokens], dtype=torch.long)
        par = torch.tensor([list(p) + [-1] * (q - len(p)) for p in parents], dtype=torch.long)
        pad = torch.tensor([[False] * len(t) + [True] * (q - len(t)) for t in tokens], dtype=torch.bool)
        self.runner.pad_slots += batch * q - sum(len(t) for t in tokens)

        s = self.step_width
        visible = torch.zeros(batch, s + q, s + q, dtype=torch.bool)
        visible[:, :s, :s] = self._visible
        depth = torch.cat([self._depth, torch.zeros(batch, q, dtype=torch.long)], 1)
        all_pad = torch.cat([self._pad, pad], 1)
        for i in range(q):
            slot = s + i
            rows = (par[:, i] >= 0).nonzero().flatten()
            if rows.numel():
                parent = par[rows, i]
                if bool((parent >= slot).any()) or bool(all_pad[rows, parent].any()):
                    raise ValueError("a parent must be an earlier, non-pad slot of the current step")
                visible[rows, slot] = visible[rows, parent]
                depth[rows, slot] = depth[rows, parent] + 1
            visible[:, slot, slot] = True

        past = self.valid[:, : self._step_start].unsqueeze(1).expand(batch, q, -1) & ~pad.unsqueeze(-1)
        allowed = torch.cat([past, visible[:, s:, :]], dim=2)
        positions = torch.tensor(self.lengths, dtype=torch.long).unsqueeze(1) + depth[:, s:]
        keep = 0 if logits_at is None else torch.tensor(logits_at, dtype=torch.long).unsqueeze(1)
        logits = self.runner.forward(
            ids,
            self.cache,
            position_ids=positions,
            attention_mask=additive_mask(allowed, self.runner.dtype),
            logits_to_keep=keep,
        )

        self.valid = torch.cat([self.valid, torch.zeros(batch, q, dtype=torch.bool)], 1)
        self._visible, self._depth, self._pad = visible, depth, all_pad
        self._parent = torch.cat([self._parent, par], 1)
        return logits

    def commit(self, keep: list[list[int]]) -> None:
        """Make step slots keep[r] (a chain from the committed tokens, in order) row r's context; end the step."""
        if len(keep) != self.batch_size:
            raise ValueError(f"expected {self.batch_size} rows to commit")
        depth, parent, pad = self._depth.tolist(), self._parent.tolist(), self._pad.tolist()
        for row, slots in enumerate(keep):
            for j, slot in enumerate(slots):
                expected_parent = slots[j - 1] if j else -1
                if pad[row][slot] or depth[row][slot] != j or parent[row][slot] != expected_parent:
                    raise ValueError(f"row {row}: committed slots must form a chain starting after the committed tokens")
            if slots:
                index = torch.tensor(slots, dtype=torch.long) + self._step_start
                self.valid[row, index] = True
            self.lengths[row] += len(slots)
        self._reset_step(self.batch_size)
        if self.width - max(self.lengths, default=0) > self.compact_slack:
            self.compact()

    def _require_no_step(self, what: str) -> None:
        if self.step_width:
            raise ValueError(f"{what} needs a committed step")

    def select(self, rows: list[int]) -> None:
        """Keep (or repeat) the given rows, in this order: drop finished rows, share a prefilled prompt."""
        part = self.subset(rows)
        self.cache, self.valid, self.lengths = part.cache, part.valid, part.lengths
        self._reset_step(len(rows))

    def subset(self, rows: list[int]) -> "RaggedBatchCache":
        """A new batch holding copies of the given rows, in this order (this batch is unchanged)."""
        self._require_no_step("subset")
        part = RaggedBatchCache(self.runner, len(rows), self.compact_slack)
        part.cache = select_rows(self.cache, rows)
        part.valid = self.valid[torch.tensor(rows, dtype=torch.long)]
        part.lengths = [self.lengths[r] for r in rows]
        part._reset_step(len(rows))
        return part

    def compact(self) -> None:
        """Rewrite the cache so each row holds only its committed slots, left-padded."""
        self._require_no_step("compact")
        width = max(self.lengths, default=0)
        index = torch.zeros(self.batch_size, width, dtype=torch.long)
        valid = torch.zeros(self.batch_size, width, dtype=torch.bool)
        for row, length in enumerate(self.lengths):
            if length:
                index[row, width - length :] = self.valid[row].nonzero().flatten()
                valid[row, width - length :] = True
        self.cache = gather_positions(self.cache, index)
        self.valid = valid
        self._reset_step(self.batch_size)
