"""The `seed-tot` command: one group, subcommands registered from their own modules."""

from __future__ import annotations

import logging
import sys

import click

from seed_tot.errors import SeedTotError


class FriendlyGroup(click.Group):
    """Turns user errors (SeedTotError) into one sentence on stderr and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except SeedTotError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(2)

    # Subcommands are imported on first use: most import torch + transformers (seconds), and
    # `seed-tot models pull` on a filled cache must stay fast.
    def get_command(self, ctx, name):
        if name not in self.commands:
            _register(only=name)
        return super().get_command(ctx, name)

    def list_commands(self, ctx):
        _register()
        return super().list_commands(ctx)


@click.group(cls=FriendlyGroup)
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages (worker processes included).")
def main(verbose: bool) -> None:
    """seed-tot: fast, lossless tree-of-thought reasoning (SEED scheduled speculative decoding)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(processName)s %(name)s %(levelname)s: %(message)s",
    )


_COMMAND_MODULES = [
    ("seed_tot.cli.models", "models"),
    ("seed_tot.cli.tasks", "gsm8k"),
    ("seed_tot.cli.tasks", "creative_writing"),
    ("seed_tot.cli.tasks", "blocksworld"),
    ("seed_tot.cli.bench", "bench"),
    ("seed_tot.cli.trace", "trace"),
    ("seed_tot.cli.report", "report"),
    ("seed_tot.cli.fastcot", "fastcot"),
    ("seed_tot.cli.serve", "serve"),
    ("seed_tot.cli.api", "api"),
    ("seed_tot.cli.calibrate", "calibrate"),
    ("seed_tot.cli.train", "train"),
]


def _register(only: str | None = None) -> None:
    """Add the subcommands of _COMMAND_MODULES; with `only`, just seed_tot.cli.<only>:<only>
    when that pair is listed (else all of them, as a command's name may differ from its module)."""
    import importlib

    entries = [e for e in _COMMAND_MODULES if e == (f"seed_tot.cli.{only}", only)] or _COMMAND_MODULES
    for module_name, attr in entries:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        command = getattr(module, attr)
        if command.name not in main.commands:
            main.add_command(command)
