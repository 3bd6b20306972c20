"""Schedules solved: blocked, interleaved or any sequence of phases, each from the last's end.

A :class:`gdln.task.Schedule` says in which order the contexts are trained;
:func:`gdln.solve` with ``schedule=`` integrates each phase from the previous phase's end
state by the reduced dynamics (Eq. 10 of Saxe, Sodhani & Lewallen 2022), the λ-balanced
closed form or the full matrices (:func:`run_schedule`), and records every context's loss
all along; :meth:`ScheduleResult.of` reads the phases off its trajectory and
:class:`ScheduleMeasures` forgetting, transfer and savings. :func:`gdln.simulate` and
:func:`gdln.compare` with ``schedule=`` train the network through it.
"""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
