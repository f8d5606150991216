"""Subnormal floats flushed to zero on the CPU, in every thread that computes.

A model whose activations reach the subnormal range (below ~1.2e-38 in float32) otherwise runs
each such product through the CPU's slow microcode path, many times slower (measured:
docs/models.md#subnormal-floats-and-models-of-other-families). torch.set_flush_denormal changes only the calling thread's mode, and
a thread inherits the mode of the thread that starts it, so the mode is set when seed_tot.runtime
is imported, before torch starts its worker threads, and checked in all of them.
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)

# Enough elements that an element-wise product is split over every intra-op thread.
_PROBE_ELEMENTS = 1 << 20


def flush_subnormals() -> bool:
    """Flush subnormals in this thread (and the threads it starts); True when every intra-op
    thread flushes them, checked by a parallel product whose exact results are all subnormal."""
    if not torch.set_flush_denormal(True):
        return False
    products = torch.full((_PROBE_ELEMENTS,), 1e-30) * 1e-10
    everywhere = bool((products == 0).all())
    if not everywhere:
        log.warning(
            "Subnormal floats are flushed in the main thread only (torch started its worker threads "
            "before seed_tot was imported), so a model with very small activations may run slowly: "
            "import seed_tot first, or call torch.set_flush_denormal(True) before any other torch work."
        )
    return everywhere
