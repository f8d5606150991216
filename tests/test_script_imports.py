"""The measurement scripts (scripts/) use seed-tot through its public names only: no name with a
leading underscore, imported or reached as an attribute, and from the command-line package
(seed_tot.cli) only its commands, which a script may run as a user would. What a script needs
beyond that is a public function of the package (or of seed_tot/analysis/, for code only scripts
use)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "scripts").rglob("*.py"))
OURS = ("seed_tot", "seed_tot_tasks", "seed_tot_prompts")
CLI = "seed_tot.cli"
# The endpoint's own load tools size their requests with its budget rule and name problems as it does.
SERVER_TOOLS = {("seed_tot.cli.api_server.budget", "Work"), ("seed_tot.cli.api_server.budget", "token_bound"),
                ("seed_tot.cli.api_server.problems", "problem_id")}


def ours(module: str) -> bool:
    return module.split(".")[0] in OURS


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str) -> list[str]:
    """Every private name `source` takes from seed-tot: `from seed_tot.x import _y`, a private module
    in an import (`seed_tot._x`, `seed_tot.x._y`, also through importlib.import_module), and an
    attribute `_y` of a name a seed-tot import bound (`module._y`, `Class._y`)."""
    tree = ast.parse(source)
    found, bound = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and ours(node.module or ""):
            if any(private(part) for part in node.module.split(".")):
                found.append(node.module)
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{node.module}.{alias.name}")
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name):
                    if any(private(part) for part in alias.name.split(".")):
                        found.append(alias.name)
                    bound.add(alias.asname or alias.name.split(".")[0])
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            name = node.args[0].value
            if ours(name) and any(private(part) for part in name.split(".")):
                found.append(name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append(f"{ast.unparse(node.value)}.{node.attr}")
    return found


def cli_imports(source: str) -> list[tuple[str, str]]:
    """(module, name) of each `from seed_tot.cli... import name` in `source`."""
    return [(node.module, alias.name) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.level == 0
            and (node.module == CLI or (node.module or "").startswith(CLI + "."))
            for alias in node.names]


def is_command(module: str, name: str) -> bool:
    return isinstance(getattr(importlib.import_module(module), name, None), click.Command)


# -- the scripts ---------------------------------------------------------------------------------


def test_there_are_scripts_to_check():
    assert len(SCRIPTS) > 20


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_script_takes_no_private_name(script):
    assert private_uses(script.read_text()) == []


def test_scripts_take_only_commands_from_the_command_line_package():
    taken = {(module, name) for script in SCRIPTS for module, name in cli_imports(script.read_text())}
    assert taken, "no script runs a command: the check below would hold vacuously"
    assert sorted(pair for pair in taken - SERVER_TOOLS if not is_command(*pair)) == []


# -- the checks, on synthetic sources (negative controls) ---------------------------------------


def test_a_private_import_is_found():
    assert private_uses("from seed_tot.runtime.runner import _eos_ids, ModelRunner\n") == ["seed_tot.runtime.runner._eos_ids"]
    assert private_uses("from seed_tot.runtime._impl import x\n") == ["seed_tot.runtime._impl"]
    assert private_uses("import seed_tot._private as p\n") == ["seed_tot._private"]
    assert private_uses("import importlib\nimportlib.import_module('seed_tot.search._x')\n") == ["seed_tot.search._x"]


def test_a_private_attribute_of_a_seed_tot_name_is_found():
    source = ("import seed_tot.runtime.runner\nfrom seed_tot.search import chains\nfrom seed_tot.task import Task\n"
              "a = seed_tot.runtime.runner._eos_ids\nb = chains._helper()\nc = Task._hidden\n")
    assert sorted(private_uses(source)) == ["Task._hidden", "chains._helper", "seed_tot.runtime.runner._eos_ids"]


def test_public_names_and_other_packages_pass():
    source = ("import os\nfrom seed_tot.search.chains import cot_requests\nfrom seed_tot import __version__\n"
              "x = os._exit\ny = cot_requests.__name__\n")
    assert private_uses(source) == []


def test_a_cli_helper_is_not_a_command():
    assert cli_imports("from seed_tot.cli.task_run import plan_run\nfrom seed_tot.cli import main\n") == [
        ("seed_tot.cli.task_run", "plan_run"), ("seed_tot.cli", "main")]
    assert not is_command("seed_tot.cli.task_run", "plan_run")
    assert is_command("seed_tot.cli", "main")
