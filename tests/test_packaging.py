"""A package, not a checkout (issue 38 item 1): what the wheel carries, LICENSE,
CITATION.cff, and a changelog that agrees with ``gdln --version`` and lists every old
spelling the code still reads with the release that removes it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from helpers import GRAPHS, ROOT, run_cli

import gdln


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
PYPROJECT_TEXT = (ROOT / "pyproject.toml").read_text()


def test_the_package_list_is_every_package_of_the_tree_and_the_graphs() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "gdln").rglob("__init__.py")
    }
    assert sorted(setuptools["packages"]) == sorted(found | {"gdln.graphs"})
    assert setuptools["package-dir"] == {"gdln.graphs": "graphs"}
    assert setuptools["package-data"]["gdln.graphs"] == ["*.yaml"]
    assert not list(GRAPHS.glob("*.py"))  # graphs/ holds graph files only


def test_the_changelog_and_the_version_agree(capsys) -> None:
    release = re.search(r"^## (\S+)", CHANGELOG, re.M)
    assert release is not None
    assert release.group(1) == gdln.__version__
    assert re.search(rf'^version = "{re.escape(gdln.__version__)}"$', PYPROJECT_TEXT, re.M)
    code, out, _ = run_cli(["--version"], capsys)
    assert code == 0 and out.split()[-1] == release.group(1)
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == release.group(1) and cff["license"] == "MIT"


def _deprecated_spellings() -> list[str]:
    """Every old spelling the code reads, as the changelog writes it, found in the one
    table the doors translate them by (``gdln.settings.OLD_SPELLINGS``), not in a list
    kept beside it."""
    spellings = []
    for row in gdln.settings.OLD_SPELLINGS:
        if row.where.startswith("gdln "):  # a command's option
            spellings.append(f"| `{row.old}` |")
        elif row.where == "graph files":
            spellings.append(f"`{row.old}`")
        elif row.where == "gdln.graphfile":
            spellings.append(f"`gdln.graphfile.{row.old}`")
        else:  # a keyword; lr keeps its old meaning without dynamics=
            old = f"`{row.where}(lr=" if row.old == "lr" else f"`{row.where}({row.old}=...)`"
            spellings.append(old)
    from gdln.graphfile import _MOVED  # type: ignore[attr-defined]
    from gdln.settings._spellings import DEPRECATED_KEYS

    spellings += [f"`{key}`" for key in DEPRECATED_KEYS]
    spellings += [f"`gdln.graphfile.{name}`" for name in _MOVED]
    spellings.append("`solve(lr=...)` without `dynamics=`")
    return spellings


def test_the_changelog_lists_every_old_spelling_with_the_release_that_removes_it() -> None:
    section = CHANGELOG.split(f"### Deprecated (removed in {gdln.REMOVED_IN})")[1].split("\n## ")[0]
    spellings = _deprecated_spellings()
    assert len(spellings) >= 20
    missing = [s for s in spellings if s not in section]
    assert not missing
    major, minor, _ = (int(part) for part in gdln.__version__.split("."))
    assert f"{major}.{minor + 2}.0" == gdln.REMOVED_IN  # two releases on


def test_license_is_mit() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    project = _pyproject()["project"]
    assert (project["license"], project["license-files"]) == ("MIT", ["LICENSE"])


def test_citation_names_the_software_and_the_papers_it_implements() -> None:
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    titles = [reference["title"] for reference in cff["references"]]
    assert titles[0] == "The Neural Race Reduction: Dynamics of Abstraction in Gated Networks"
    assert any("Stochastic Depth" in title for title in titles)
    assert all(reference["authors"] for reference in cff["references"])


@pytest.mark.slow
def test_the_wheel_runs_a_graph_by_name_outside_the_checkout(tmp_path: Path) -> None:
    """Build the wheel from a copy of the tree, install it (without its dependencies,
    which this environment has) into a folder and run it from another folder (~15 s)."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("gdln", "graphs"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        check=True,
    )
    (wheel,) = wheels.glob("gdln-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n for n in names if n.startswith("gdln/graphs/")) == sorted(
        f"gdln/graphs/{path.name}" for path in GRAPHS.glob("*.yaml")
    )
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any(n.startswith(("graphs/", "tests/")) for n in names)
    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = (
        "import gdln, gdln.cli, sys; print(gdln.__file__); sys.argv[0] = 'gdln'; gdln.cli.main()"
    )
    for argv, expected in (
        (
            ["derive", "routing", "--param", "M=3", "--param", "K=2"],
            "routing: route quotient, lump=symmetry",
        ),
        (["graphs"], "routing"),
    ):
        result = subprocess.run(
            [sys.executable, "-c", probe, *argv],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        where, out = result.stdout.split("\n", 1)
        assert Path(where).is_relative_to(target) and expected in out
    assert str(target / "gdln" / "graphs") in out
