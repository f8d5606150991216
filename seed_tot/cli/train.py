"""`seed-tot train`: training pipelines of the decoders that learn their accelerator."""

from __future__ import annotations

import click

from seed_tot.cli.train_bita import bita


@click.group("train")
def train() -> None:
    """Train a decoder's accelerator (BiTA's prompt and mask tokens)."""


train.add_command(bita)
