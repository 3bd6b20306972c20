"""The settings tables of the docs, generated from the declarations (gdln.settings).

``docs/graph_files.md`` lists every graph-file key of the ``solve:`` and ``simulate:``
sections, ``docs/guide/cli.md`` every option; both are rows of
:func:`gdln.settings.declarations`. After declaring or changing a setting, run

    python docs/_ext/settings_tables.py

which rewrites the two tables in place; ``tests/test_settings.py`` fails while they differ.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILE_HEAD = "`{section}:`\n\n| key | values | default | option | meaning |\n|---|---|---|---|---|\n"
CLI_HEAD = "| option | commands | file key | default | meaning |\n|---|---|---|---|---|\n"


def file_rows(section: str) -> str:
    """The rows of the graph-file reference's table of ``section``."""
    from gdln.settings import declarations

    rows = []
    for declaration in declarations().values():
        if not declaration.file_key or not declaration.file_key.startswith(f"{section}."):
            continue
        key = declaration.file_key.split(".", 1)[1]
        choices = declaration.choices
        values = ", ".join(f"`{c}`" for c in choices) if choices else "expression"
        if declaration.expected == "true or false":
            values = "`true`, `false`"
        rows.append(
            f"| `{key}` | {values} | `{declaration.shown}` | `{declaration.option}` "
            f"| {declaration.meaning} |"
        )
    return "\n".join(rows)


def cli_rows() -> str:
    """The rows of the command-line guide's table of options."""
    from gdln.cli._common import COMMAND_SETTINGS
    from gdln.settings import declarations

    rows = []
    for name, declaration in declarations().items():
        commands = ", ".join(c for c, names in COMMAND_SETTINGS.items() if name in names)
        key = f"`{declaration.file_key}`" if declaration.file_key else "none"
        rows.append(
            f"| `{declaration.option}` | {commands} | {key} | `{declaration.shown}` "
            f"| {declaration.meaning} |"
        )
    return "\n".join(rows)


def pages() -> dict[Path, list[tuple[str, str]]]:
    """Each page -> (the heading its table follows, the table's rows)."""
    return {
        ROOT / "docs" / "graph_files.md": [
            (FILE_HEAD.format(section=s), file_rows(s)) for s in ("solve", "simulate")
        ],
        ROOT / "docs" / "guide" / "cli.md": [(CLI_HEAD, cli_rows())],
    }


def table_in(text: str, head: str) -> tuple[int, int]:
    """Where the rows after ``head`` start and end in ``text``."""
    start = text.index(head) + len(head)
    return start, text.index("\n\n", start)


def main() -> None:
    for page, tables in pages().items():
        text = page.read_text(encoding="utf-8")
        for head, rows in tables:
            start, end = table_in(text, head)
            text = text[:start] + rows + text[end:]
        page.write_text(text, encoding="utf-8")
        print(f"wrote {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
