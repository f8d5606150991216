"""A plain (non-editable) install from a built wheel has every prompt template and data file:
the wheel is built from this checkout, installed into an empty directory, and every task renders
its prompts from there, outside the source tree."""

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a wheel build and install

REPO = Path(__file__).resolve().parent.parent

CHECK = textwrap.dedent(
    """
    import sys
    import seed_tot_prompts, seed_tot_tasks
    from seed_tot_tasks import TASK_NAMES, get_task

    for module in (seed_tot_prompts, seed_tot_tasks):
        assert module.__file__.startswith(sys.argv[1]), module.__file__
    for name in TASK_NAMES:
        task = get_task(name)
        problem = task.load()[0]
        assert problem.question and task.thought_prompt(problem, "", 0, 4) and task.value_prompt(problem, "", 0)
    print("ok", len(TASK_NAMES))
    """
)


def test_wheel_ships_prompts_and_data(tmp_path):
    dist, site = tmp_path / "dist", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(REPO)], check=True, cwd=tmp_path)
    wheel = next(dist.glob("seed_tot-*.whl"))
    shipped = set(zipfile.ZipFile(wheel).namelist())
    templates = ["seed_tot_prompts/" + path.relative_to(REPO / "prompts").as_posix() for path in REPO.glob("prompts/*/*.txt")]
    assert templates and not [name for name in templates if name not in shipped]
    assert "seed_tot/observe/viewer.html" in shipped  # the HTML viewer's page template
    subprocess.run(pip + ["install", "--no-deps", "--target", str(site), str(wheel)], check=True, cwd=tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(site)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok 3")


def test_every_package_folder_is_listed_in_pyproject():
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "seed_tot").rglob("__init__.py")}
    assert found | {"seed_tot_tasks", "seed_tot_prompts"} == listed


def test_the_readme_map_names_every_package_folder():
    """README.md's "Where the code is" table has a row for every package folder and the other top folders."""
    readme = (REPO / "README.md").read_text()
    rows = {line.split("`")[1] for line in readme.split("## Where the code is", 1)[1].split("\n## ", 1)[0].splitlines()
            if line.startswith("| `")}
    folders = {"/".join(p.parent.relative_to(REPO).parts) + "/" for p in (REPO / "seed_tot").rglob("__init__.py")}
    folders.discard("seed_tot/")  # its row names its own modules: "seed_tot/ (its own modules)"
    assert "seed_tot/" in rows
    others = {"tasks/", "prompts/", "scripts/", "tests/", "results/", "docs/"}
    assert sorted((folders | others) - rows) == []
    assert sorted(rows - folders - others - {"seed_tot/"}) == []  # no row for a folder that is gone
