"""What the texts say about the command line is what it takes (issue 33, 12).

The README, ``docs/``, ``benchmarks/README.md``, the examples, every command's ``--help``
and the package's own strings name commands, options, choices and graph-file keys. Each is
checked against the code's own tables (the command table, click's options, the declared
settings), not against a list kept here:

* every ``gdln <command>`` named is a command;
* every ``--option`` written after a command is a visible option of that command, and
  every option named on its own is one of some command's (or of an example's or a
  benchmark's script); an old, hidden spelling only where the text says what replaced it;
* every value given to a choice option (``--route X``, ``route="X"``, ``route: X``) is
  one of its choices;
* every graph-file setting key (``solve.X``, ``simulate.X``) is declared.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from helpers import ROOT

from gdln.cli._main import COMMANDS, cli
from gdln.settings import declarations
from gdln.settings._declared import DEPRECATED_KEYS

_CONTEXT = click.Context(cli, info_name="gdln")
COMMAND = {name: cli.get_command(_CONTEXT, name) for name in COMMANDS}


def _options(command: click.Command, *, hidden: bool) -> set[str]:
    return {
        spelling
        for p in command.params
        if isinstance(p, click.Option) and p.hidden == hidden
        for spelling in (*p.opts, *p.secondary_opts)
    }


VISIBLE = {name: _options(c, hidden=False) | {"--help", "-h"} for name, c in COMMAND.items()}
OLD = {name: _options(c, hidden=True) for name, c in COMMAND.items()}
CHOICES = {
    (name, spelling): set(p.type.choices)
    for name, c in COMMAND.items()
    for p in c.params
    if isinstance(p, click.Option) and isinstance(p.type, click.Choice)
    for spelling in p.opts
}
SETTINGS = declarations()
FILE_KEYS = {d.file_key for d in SETTINGS.values() if d.file_key}
SCRIPTS = [*sorted((ROOT / "examples").rglob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py"))]
SCRIPT_OPTIONS = {
    o for path in SCRIPTS for o in re.findall(r"""["'](--[a-z][\w-]*)["']""", path.read_text())
}
TOOLS = ("pip", "python", "pytest", "sphinx", "ruff", "mypy", "git", "nbclient")
OTHER_TOOLS_OPTIONS = {"--doctest-modules", "--durations"}  # pytest's, named in prose
OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
CODE = re.compile(r"```.*?```|``?[^`\n]+``?", re.S)
# where "gdln WORD" is a command line: at the start of code, after a prompt or a pipe
COMMAND_LINE = re.compile(
    r"(?:^|[$&|;(`]\s*)gdln ([a-z][a-z-]*)((?:[ \t]+(?!gdln\b)[^\s`|;&()]+)*)"
)
COMMAND_IN_TEXT = re.compile(r"gdln ([a-z][\w-]*)(?='s|\s+(?:FILE|graphs/|--|-o |-L )|`)")
KEY = re.compile(r"(?<![\w./-])(solve|simulate)\.([a-z_]\w*)\b(?!\()")


def _docs() -> list[Path]:
    pages = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *SCRIPTS]
    built = ("_build", "api", "examples", "notebooks")
    pages += [p for p in sorted((ROOT / "docs").rglob("*.md")) if not set(p.parts) & set(built)]
    return pages


DOCS = _docs()
HELP = {
    name: command.get_help(click.Context(command, info_name=name, parent=_CONTEXT))
    for name, command in COMMAND.items()
}


def _code(text: str) -> Iterator[tuple[str, int]]:
    """The code of a page, fenced blocks and inline spans (continuation lines joined),
    each with where it ends in ``text``."""
    for match in CODE.finditer(text):
        yield re.sub(r"\\\n\s*", " ", match.group(0).strip("`")), match.end()


def _replaced_here(text: str, end: int) -> bool:
    """Whether an old spelling ending at ``end`` is named as replaced (``... (now ...)``)."""
    after = text[end : end + 80]
    return bool(re.match(r"`?\s*(?:\(now\s|, the key of an earlier release|is now\s)", after))


def _command_lines(text: str) -> Iterator[tuple[str, str, int]]:
    """(command, the rest of its line, where its code ends) for every ``gdln COMMAND ...``
    in code, and for a command named alone before its options (``compare --b0``)."""
    for code, end in _code(text):
        for line in code.splitlines():
            for match in COMMAND_LINE.finditer(line):
                yield match.group(1), match.group(2), end
            bare = re.match(rf"\s*({'|'.join(COMMANDS)})((?:\s+--\S+(?:\s+[^\s-]\S*)?)+)\s*$", line)
            if bare:
                yield bare.group(1), bare.group(2), end


def _where(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_tables_are_read() -> None:
    # the checks below read these; an empty table would make them pass vacuously
    assert {"derive", "solve", "simulate", "compare", "timescales"} <= set(COMMAND)
    assert "--route" in VISIBLE["solve"] and "--init" in OLD["simulate"]
    assert ("solve", "--route") in CHOICES and "solve.b0" in FILE_KEYS
    assert "--quick" in SCRIPT_OPTIONS and len(DOCS) > 20


def test_every_command_named_exists() -> None:
    wrong = []
    for path in DOCS:
        for name, _, _ in _command_lines(path.read_text()):
            if name not in COMMAND:
                wrong.append(f"{_where(path)}: gdln {name}")
    texts = {f"gdln {n} --help": h for n, h in HELP.items()}
    texts |= {_where(p): p.read_text() for p in sorted((ROOT / "gdln").rglob("*.py"))}
    for where, text in texts.items():
        for match in COMMAND_IN_TEXT.finditer(text):
            if match.group(1) not in COMMAND:
                wrong.append(f"{where}: {match.group(0)!r}")
    assert not wrong, "commands that do not exist:\n" + "\n".join(wrong)


def _option_errors(where: str, text: str, name: str, rest: str, start: int = -1) -> list[str]:
    out = []
    for match in OPTION.finditer(rest):
        option = match.group(1)
        if option in VISIBLE[name]:
            continue
        if option in OLD[name] and start >= 0 and _replaced_here(text, start):
            continue
        out.append(f"{where}: gdln {name} {option}")
    return out


def test_every_option_after_a_command_is_that_commands() -> None:
    wrong = []
    for path in DOCS:
        text = path.read_text()
        for name, rest, end in _command_lines(text):
            if name in COMMAND:
                wrong += _option_errors(_where(path), text, name, rest, end)
    for name, help_text in HELP.items():
        for line in help_text.splitlines():
            # an example line "gdln OTHER ..." is OTHER's; the rest is this command's
            head, *examples = re.split(r"\bgdln (?=[a-z])", line)
            if not line.lstrip().startswith("-"):  # an option's own row names itself
                wrong += _option_errors(f"gdln {name} --help", "", name, head)
            for example in examples:
                other, _, rest = example.partition(" ")
                if other.strip("`'\".,") in COMMAND:
                    wrong += _option_errors(f"gdln {name} --help", "", other, rest)
    assert not wrong, "options the command does not take:\n" + "\n".join(wrong)


def test_every_option_named_alone_exists() -> None:
    known = set().union(*VISIBLE.values()) | SCRIPT_OPTIONS | OTHER_TOOLS_OPTIONS
    known |= {"--version", "--debug"}
    old = set().union(*OLD.values())
    wrong = []
    for path in DOCS[:2] + [p for p in DOCS if p.suffix == ".md"][2:]:
        text = path.read_text()
        for match in CODE.finditer(text):
            code = match.group(0)
            if any(re.search(rf"\b{tool}\b", code) for tool in TOOLS):
                continue
            for option in OPTION.finditer(code):
                spelled = option.group(1)
                if spelled in known:
                    continue
                if spelled in old and _replaced_here(text, match.end()):
                    continue
                wrong.append(f"{_where(path)}: {spelled} in {code[:60]!r}")
    assert not wrong, "options no command takes:\n" + "\n".join(wrong)


def _choice_errors(where: str, code: str) -> list[str]:
    """Values in ``code`` given to a choice (``--route X``, ``route="X"``, a graph file's
    ``route: X``) that are not among its choices."""
    by_option: dict[str, set[str]] = {}
    for (_, option), choices in CHOICES.items():
        by_option.setdefault(option, set()).update(choices)
    keywords = {name: set(d.choices) for name, d in SETTINGS.items() if d.choices}
    wrong = []
    placeholder = re.compile(r"[A-Z][A-Z0-9_]*")  # --route X, route="NAME"
    for option, value in re.findall(r"(--[a-z][\w-]*)[ =]([\w.:-]+)", code):
        if placeholder.fullmatch(value):
            continue
        if option in by_option and value not in by_option[option]:
            wrong.append(f"{where}: {option} {value}")
    for name, value in re.findall(r"\b(\w+)=[\"']([^\"'\n]+)[\"']", code):
        if name in keywords and value not in keywords[name] and not placeholder.fullmatch(value):
            wrong.append(f"{where}: {name}={value!r}")
    if re.search(r"\b(solve|simulate):", code):  # a graph file's settings
        for name, value in re.findall(r"\b(\w+): *([\w-]+)", code):
            if name in keywords and value not in keywords[name] and not value[0].isdigit():
                wrong.append(f"{where}: {name}: {value}")
    return wrong


def test_every_choice_given_is_declared() -> None:
    wrong = [
        error
        for path in DOCS
        for code, _ in _code(path.read_text())
        for error in _choice_errors(_where(path), code)
    ]
    assert not wrong, "values that are not among the declared choices:\n" + "\n".join(wrong)


def test_every_settings_key_named_is_declared() -> None:
    texts = {_where(p): p.read_text() for p in DOCS}
    texts |= {f"gdln {n} --help": h for n, h in HELP.items()}
    package = sorted((ROOT / "gdln").rglob("*.py"))
    texts |= {_where(p): p.read_text() for p in package if p.parent.name != "settings"}
    wrong = []
    for where, text in texts.items():
        for match in KEY.finditer(text):
            key = match.group(0)
            if key in FILE_KEYS or match.group(2) in ("md", "py", "yaml", "json"):
                continue
            if key in DEPRECATED_KEYS and _replaced_here(text, match.end()):
                continue
            wrong.append(f"{where}: {key}")
    assert not wrong, "graph-file keys that are not declared:\n" + "\n".join(wrong)


def test_the_checks_catch_what_they_are_for() -> None:
    # the checks above pass on today's texts; these would not
    text = "run `gdln simulate FILE --init 0.1` or set `solve.init: 0.1`"
    assert _option_errors("x", text, "simulate", " FILE --init 0.1", text.index("--init"))
    assert not _replaced_here(text, text.index("solve.init") + len("solve.init"))
    listed = "`--init` (now `--b0`) and the file key `solve.init` (now `solve.b0`)"
    assert _replaced_here(listed, listed.index("`--init`") + len("`--init`"))
    assert _replaced_here(listed, listed.index("solve.init") + len("solve.init"))
    assert _choice_errors("x", "gdln timescales FILE --route aligned")
    assert _choice_errors("x", 'gdln.solve(problem, route="every context")')
    assert _choice_errors("x", "solve: {lump: fast}")
    assert not _choice_errors("x", "gdln solve FILE --route contexts --lump none")
    assert not _choice_errors("x", '`--route X`, `route="X"`')  # placeholders
    assert [c for c, _, _ in _command_lines("`gdln reduce FILE`")] == ["reduce"]
    assert list(COMMAND_IN_TEXT.finditer("as in gdln reduce's text"))


def test_simulate_help_says_how_the_gradients_are_computed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # full-batch gd differentiates by hand (gdln/simulation/_backprop.py): it runs with
    # torch's autograd switched off, and the help must not credit autograd with it
    import torch

    import gdln

    problem = gdln.load(ROOT / "graphs" / "chain.yaml")

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("autograd was called")

    monkeypatch.setattr(torch.autograd, "grad", refused)
    monkeypatch.setattr(torch.Tensor, "backward", refused)
    settings = dict(threads=1)
    run = gdln.simulate(problem, t_max=0.2, lr=0.05, seeds=1, points=3, **settings)
    assert run.loss[-1][0] < run.loss[0][0]
    with pytest.raises(AssertionError, match="autograd was called"):
        sgd = dict(optimizer="sgd", batch_size=2, threads=1)
        gdln.simulate(problem, t_max=0.2, lr=0.05, seeds=1, points=3, **sgd)
    said = " ".join(HELP["simulate"].split())
    assert "by the chain rule written out (--optimizer gd)" in said
    assert "gradients by autograd" not in said
