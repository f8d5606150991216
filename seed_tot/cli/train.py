"""`seed-tot train <method>`: the training pipelines of the decoders that need a trained model."""

from __future__ import annotations

import click

from seed_tot.cli.train_bita import bita
from seed_tot.cli.train_cllm import cllm
from seed_tot.cli.train_value import value


@click.group()
def train() -> None:
    """Train what a method needs: a decoder's accelerator (cllm, bita) or a learned judge (value);
    resumable, saved as safetensors."""


train.add_command(cllm)
train.add_command(bita)
train.add_command(value)
