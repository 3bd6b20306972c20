r"""What recording a ReLU network's activation patterns implies, checked before a run.

A ReLU node $v$ (``activation: relu``) computes $h_v = \max(0, z_v)$ of its gated sum
$z_v$, so on example $n$ its units are gated by the pattern $P_v(n) = 1[z_v(n) > 0]$: the
network is the gated linear network of Sec. 2 of Saxe, Sodhani & Lewallen (2022) with
these gates, exactly, while no pattern flips. With ``record_patterns`` a run keeps, at
each recorded step, every pattern (one byte per example and unit), every weight (what
the gated network starts from) and, in its ``meta``, the training examples, so that
:func:`gdln.extract` can write the gated network of any recorded step. The run's file
must be readable again within ``data_bytes``, so the records are counted here first.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence

from .._edge import Edge
from ..graphfile._limits import current_limits
from ..solution._bounds import beyond
from ._errors import SimulationSpecError

__all__ = ["check_pattern_records"]

WEIGHT_BYTES = 8
"""Bytes of one recorded weight (float64 in the run's file)."""


def check_pattern_records(
    relu: Collection[Hashable],
    *,
    records: int,
    seeds: int,
    rows: int,
    sizes: Mapping[Hashable, int],
    edges: Sequence[Edge],
) -> None:
    """Refuse ``record_patterns`` without a ReLU node, or whose records would not fit.

    Parameters
    ----------
    relu
        The ReLU nodes of the graph.
    records
        The number of recorded steps.
    seeds, rows
        Repetitions and training examples.
    sizes, edges
        Node -> width, and the edges ``(source, target)``.

    Raises
    ------
    SimulationSpecError
        The graph has no ReLU node, or the patterns and weights of every record take
        more than :class:`gdln.graphfile.Limits` ``data_bytes`` (the run's file could not
        be read back).
    """
    if not relu:
        raise SimulationSpecError(
            "record_patterns: the graph has no ReLU node (activation: relu), so there are "
            "no activation patterns to record"
        )
    units = sum(int(sizes[v]) for v in relu)
    weights = sum(int(sizes[t]) * int(sizes[s]) for s, t in edges)
    size = records * seeds * (rows * units + WEIGHT_BYTES * weights)
    if size > current_limits().data_bytes:
        raise SimulationSpecError(
            beyond(
                "data_bytes",
                f"record_patterns: {records} records x {seeds} seed(s) x ({rows} examples x "
                f"{units} units + {weights} weights x {WEIGHT_BYTES} bytes) = {size} bytes",
            )
            + "; record fewer steps (--points, record_every, record_steps)"
        )
