"""``gdln stats --compact`` (issue 38 item 2): equal statistics printed once, headed by
every path or pair they hold for. Checked against the full printout: every block the full
printout shows is named exactly once in the compact one, with the same matrix."""

from __future__ import annotations

import re

from helpers import GRAPHS, run_cli

ROUTING = [str(GRAPHS / "routing.yaml"), "--param", "M=3", "--param", "K=2"]


def _blocks(text: str) -> dict[str, str]:
    """Statistic name -> its matrix text, from a printout (full or compact)."""
    statistics = text.split("\n\ndiagonal values")[0].replace("\n    ", " ")  # unwrap
    found: dict[str, str] = {}
    for head, body in re.findall(r"^(Sigma_.*) =\n((?:  .*\n?)+)", statistics, re.M):
        head = " ".join(head.split())
        kind = head.split("(")[0].split()[0]
        if " for " in head:  # Sigma_x for 6 pairs: (j, p), (j, p), ...
            names = [f"{kind}{args}" for args in re.findall(r"\([^()]*\)", head.split(": ", 1)[1])]
        else:
            names = [head]
        for name in names:
            assert name not in found, f"{name} printed twice"
            found[name] = body.rstrip("\n")
    return found


def test_compact_prints_each_block_once_with_every_pair_it_holds_for(capsys) -> None:
    code, full, _ = run_cli(["stats", *ROUTING], capsys)
    assert code == 0
    code, compact, _ = run_cli(["stats", *ROUTING, "--compact"], capsys)
    assert code == 0
    assert _blocks(compact) == _blocks(full)  # the same block for every path and pair
    assert len(_blocks(full)) == 12 and compact.count("\nSigma_") == 1  # 12 blocks, 2 distinct
    assert len(compact.splitlines()) < 0.6 * len(full.splitlines())
    assert "6 equal: S(x0->h1->h2->y0)" in compact  # the values per mode too


def test_compact_is_for_text(capsys) -> None:
    code, out, err = run_cli(["stats", *ROUTING, "--compact", "--format", "json"], capsys)
    assert (code, out) == (2, "") and err == "gdln: error: --compact: text output only, not json\n"
