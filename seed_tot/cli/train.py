"""`seed-tot train <method>`: the training pipelines of the decoders that need a trained model."""

from __future__ import annotations

import click

from seed_tot.cli.train_bita import bita
from seed_tot.cli.train_cllm import cllm


@click.group()
def train() -> None:
    """Train the accelerator of a decoding method (resumable; checkpoints as safetensors)."""


train.add_command(cllm)
train.add_command(bita)
