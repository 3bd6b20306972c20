"""CI installs gdln exactly as the README tells a newcomer to (issue 23 item 1).

``.ci/run`` must make a fresh virtual environment (never one left in the checkout), run the
README's first command and its test command in that order, and only then the slow tests
and the docs build, so that a dependency release that breaks gdln fails CI first.
"""

from __future__ import annotations

import re
import shlex
import subprocess

from helpers import ROOT

README = (ROOT / "README.md").read_text()
CI = ROOT / ".ci" / "run"


def _commands() -> list[str]:
    """The commands of ``.ci/run`` in order, comments and blank lines dropped."""
    lines = [line.split(" #")[0].strip() for line in CI.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _readme_commands() -> tuple[list[str], list[str]]:
    """The README's install command and its test command, each split at ``&&``."""
    blocks = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    install = next(b for b in blocks if b.startswith("python -m venv"))
    test = next(b for b in blocks if "pytest" in b)
    return [c.strip() for c in install.split("&&")], [c.strip() for c in test.split("&&")]


def test_ci_runs_the_readmes_commands_in_a_fresh_environment() -> None:
    install, test = _readme_commands()
    assert install[:2] == ["python -m venv .venv", ". .venv/bin/activate"]
    commands = _commands()
    assert commands[0] == "set -euo pipefail"
    # a new environment, made in a new temporary folder and activated
    venv = next(i for i, c in enumerate(commands) if " -m venv " in c)
    made = shlex.split(commands[venv])[-1]
    assert made.startswith("$venv_root/")
    assert any(re.fullmatch(r"venv_root=\$\(mktemp -d .*\)", c) for c in commands[:venv])
    assert commands[venv + 1] == '. "$venv_root/.venv/bin/activate"'
    # then the README's commands, verbatim and in order, before anything else installs
    rest = commands[venv + 2 :]
    expected = [*install[2:], *test]
    positions = [rest.index(c) for c in expected]
    assert positions == sorted(positions) and positions[0] == 0
    assert not any(c.startswith("pip install") for c in rest[: positions[-1]] if c not in expected)
    after = rest[positions[-1] + 1 :]
    assert after.index("python -m pytest -m slow") < after.index(
        "python -m sphinx -W -q -b html docs docs/_build/html"
    )
    assert "pip freeze" in rest  # the versions a run used are in its log


def test_ci_script_is_valid_bash() -> None:
    assert subprocess.run(["bash", "-n", str(CI)], check=False).returncode == 0


def test_ci_builds_the_wheel_and_runs_it_outside_the_checkout_on_a_graph_by_name() -> None:
    commands = _commands()
    build = commands.index('python -m build --outdir "$venv_root/dist" .')  # sdist, then wheel
    assert "pip install build" in commands[:build]
    # after the README's test command, before the slow tests
    assert commands.index("python -m pytest") < build < commands.index("python -m pytest -m slow")
    rest = commands[build + 1 :]
    venv = shlex.split(rest[0])
    assert venv[1:] == ["-m", "venv", "$venv_root/wheel"]  # a second fresh environment
    assert rest[1] == '"$venv_root/wheel/bin/pip" install "$venv_root"/dist/gdln-*.whl'
    run = next(c for c in rest if c.startswith("(cd "))
    assert run.startswith('(cd "$venv_root" && ')  # outside the checkout
    steps = [shlex.split(step.strip(" ()")) for step in run.split("&&")[1:]]
    assert ["$venv_root/wheel/bin/gdln", "derive", "routing", "--symbolic", "M,K"] in steps
    assert ["$venv_root/wheel/bin/gdln", "graphs"] in steps  # the graph by name, not by path
