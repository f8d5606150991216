"""Prompt templates (<task>/<name>.txt), shipped as package data so a plain `pip install .` has them."""

from importlib.resources import files


def read_template(task: str, name: str) -> str:
    return files(__name__).joinpath(task, f"{name}.txt").read_text(encoding="utf-8")
