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


@click.group(cls=FriendlyGroup)
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages (worker processes included).")
def main(verbose: bool) -> None:
    """seed-tot: fast, lossless tree-of-thought reasoning (SEED scheduled speculative decoding)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(processName)s %(name)s %(levelname)s: %(message)s",
    )


def _register() -> None:
    import importlib

    for module_name, attr in [
        ("seed_tot.commands.models", "models"),
        ("seed_tot.commands.tasks", "gsm8k"),
        ("seed_tot.commands.tasks", "creative_writing"),
        ("seed_tot.commands.tasks", "blocksworld"),
        ("seed_tot.commands.bench", "bench"),
        ("seed_tot.commands.trace", "trace"),
        ("seed_tot.commands.fastcot", "fastcot"),
    ]:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        main.add_command(getattr(module, attr))


_register()
