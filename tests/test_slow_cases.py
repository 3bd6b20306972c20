"""The list of cases measured slow names tests that exist (a renamed test would otherwise
silently return to the default run)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import slow_cases

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_case_names_an_existing_test_function() -> None:
    missing = []
    for nodeid in sorted(slow_cases()):
        path, _, rest = nodeid.partition("::")
        name = re.split(r"[\[:]", rest, maxsplit=1)[0]
        source = ROOT / path
        if not source.is_file() or not re.search(
            rf"^\s*def {re.escape(name)}\(", source.read_text(encoding="utf-8"), re.M
        ):
            missing.append(nodeid)
    assert not missing, missing
