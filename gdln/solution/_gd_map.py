r"""Which reduced system the gradient-descent map iterates, so that it stays exact.

Tying edge variables by symmetry or by equal initial values (``symmetry``, ``balanced``)
is exact for gradient descent: every member of a block takes the same step. Eliminating a
variable through a conserved quadratic quantity $Q$ (Eq. 15 of Saxe et al. 2022, lumping
``full``) is exact for gradient *flow* only: a discrete step $B \leftarrow B+\mathrm{lr}\,f(B)$
changes $Q$ by $O(\mathrm{lr}^2)$. So the map iterates the tied system *before*
elimination, whose variables are the free and the eliminated ones together, and reports
them under the same names; nothing is reconstructed from $Q$.
"""

from __future__ import annotations

import weakref

from ..reduction._internal import replace
from ..reduction._lumping import before_elimination
from ..reduction._system import ReducedSystem, Reduction

__all__: list[str] = []  # package-internal: the system the GD map iterates, for solve

_TIED: weakref.WeakKeyDictionary[ReducedSystem, ReducedSystem] = weakref.WeakKeyDictionary()


def tied_system(system: ReducedSystem) -> ReducedSystem:
    r"""``system`` with nothing eliminated (``reduction._lumping.before_elimination``).

    Built once per system (the ODE solver and the map share caches keyed by system).
    """
    if not system.eliminated:
        return system  # stored, it would keep itself alive in the weak cache
    if system not in _TIED:
        _TIED[system] = before_elimination(system)
    return _TIED[system]


def map_reduction(reduction: Reduction) -> tuple[Reduction, str]:
    """The reduction whose systems the exact gradient-descent map iterates, and a note.

    The note (recorded as ``meta["system"]``) says which system was iterated:
    ``"reduced"`` when no variable was eliminated (the reduction's own systems, exact for
    the map), else ``"tied"`` (the tied system of ``lump="full"`` before Eq. 15).
    """
    systems = tuple(tied_system(s) for s in reduction.systems)
    if all(new is old for new, old in zip(systems, reduction.systems, strict=True)):
        return reduction, "reduced"
    return replace(reduction, systems=systems), "tied"
