"""What each form of a schedule takes: one table for the library and the command line.

:func:`gdln.solve`, :func:`gdln.simulate` and :func:`gdln.compare` given ``schedule=``
(and ``gdln solve``, ``simulate`` and ``compare --schedule``) follow the schedule phase
by phase and take only the keywords listed here; any other keyword given is refused in
one line that names it and lists these. A schedule
lasts the sum of its phases, so none takes ``t_max`` or ``steps``.

Imports nothing: the simulation process reads it without sympy.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["SCHEDULE_TAKES", "refusal"]

_START = ("init_scheme", "init_scale", "b0", "seeds", "seed")

SCHEDULE_TAKES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "solve": (
            "lump",
            "b0",
            "route",
            "lr",
            "weight_decay",
            "dynamics",
            "points",
            "method",
            "seed",
        ),
        "simulate": ("lr", "points", *_START, "weight_decay"),
        "compare": ("lr", "points", *_START, "weight_decay"),
    }
)
"""Form (``"solve"``, ``"simulate"``, ``"compare"``) -> the settings it takes with
``schedule=`` beside the problem (and ``weights``, ``times``, ``out_dir`` where the form
takes them)."""


def refusal(form: str, given: str) -> str:
    """The one line that refuses the keyword ``given`` with a schedule: what ``form``
    takes (the command line words the same with its options)."""
    return (
        f"schedule and {given}: a schedule takes its length from its phases, and {form} "
        f"with a schedule takes only {', '.join(SCHEDULE_TAKES[form])}"
    )
