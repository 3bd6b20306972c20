r"""The ODE steppers by name, and the rule that ``method="auto"`` follows.

The public names and their meanings are :data:`gdln.settings.METHODS` (the setting
``method``: ``solve.method`` in a graph file, ``--method``, ``solve(method=)``); this
module holds the stepper of each name but ``"auto"``, which is a rule:

=========  =======================================================================
``name``   stepper
=========  =======================================================================
dop853     :class:`~gdln.solution._dop853.Dop853`: explicit Runge-Kutta 8(5,3), error
           control per member of a batch (numpy across the batch; numba compiles the
           right-hand side of large batches)
lsoda      :class:`~gdln.solution._lsoda.Lsoda`: Adams/BDF switching, implicit where
           stiff (Fortran ``odeint``)
=========  =======================================================================

``"auto"`` (the default of :func:`gdln.solve` and :func:`gdln.solution.solve_batch`):

* **one system** (a single solve, or a batch of one): ``lsoda``. Driven from Fortran
  with a compiled scalar right-hand side and an analytic Jacobian it is the fastest on one
  system, where numpy's per-call cost makes DOP853 many times slower
  (``benchmarks/bench_solve.py`` measures both; ``benchmarks/README.md`` has the figures).
* **a batch**: ``dop853``, which shares numpy's per-call cost across the batch and keeps
  each member's own step control, as if it were solved alone. Where DOP853 stops (a
  stiff system: more than :data:`~gdln.solution._dop853.STIFF_STEPS` steps beyond two per
  recorded time; a value that is not finite), ``lsoda`` solves the batch instead, and
  its checks name the cause of a failure. ``meta["integrator"]`` records which stepper
  solved, and ``meta["integrator_fallback"]`` why DOP853 did not.

A method named explicitly is used alone: if it stops, the error says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .._errors import GdlnError
from ._dop853 import Dop853
from ._lsoda import Lsoda
from ._stepper import Stepper

__all__ = ["AUTO", "STEPPERS", "steppers_for"]

AUTO = "auto"
"""The method name that lets the size of the batch choose (see the module docstring)."""

STEPPERS: Mapping[str, Stepper] = MappingProxyType({"dop853": Dop853(), "lsoda": Lsoda()})
"""Name -> stepper, for every name of :data:`gdln.settings.METHODS` but ``"auto"``:
``"dop853"``, explicit Runge-Kutta 8(5,3) over a batch axis, each member with its own
step control; ``"lsoda"``, Adams/BDF, implicit where stiff."""


def steppers_for(method: str, batch: int) -> tuple[Stepper, ...]:
    """The steppers to try, in order, for ``method`` on a batch of ``batch`` members.

    Raises
    ------
    GdlnError
        ``method`` is neither ``"auto"`` nor a name of :data:`STEPPERS`.
    """
    if method == AUTO:
        if batch == 1:
            return (STEPPERS["lsoda"],)
        return STEPPERS["dop853"], STEPPERS["lsoda"]
    if not isinstance(method, str) or method not in STEPPERS:
        names = ", ".join(repr(m) for m in (AUTO, *STEPPERS))
        raise GdlnError(f"method: expected one of {names}, got {method!r}")
    return (STEPPERS[method],)
