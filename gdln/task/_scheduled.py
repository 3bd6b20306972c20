"""What each form of a schedule takes: one table for the library and the command line.

:func:`gdln.solve`, :func:`gdln.simulate` and :func:`gdln.compare` given ``schedule=``
(and ``gdln solve``, ``simulate`` and ``compare --schedule``) follow the schedule phase
by phase and take only the keywords listed here; any other keyword given is refused in
one line that names it and lists these (:func:`schedule_refusal`). A schedule lasts the
sum of its phases, so none takes ``t_max`` or ``steps``.

Imports nothing: the simulation process reads it without sympy.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["SCHEDULE_TAKES", "schedule_refusal"]

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


def schedule_refusal(form: str, given: str, *, options: bool = False) -> str:
    """The one line that refuses ``given`` with a schedule and lists what ``form`` takes.

    Parameters
    ----------
    form
        ``"solve"``, ``"simulate"`` or ``"compare"`` (a key of :data:`SCHEDULE_TAKES`).
    given
        The keyword given that the form does not take.
    options
        Spell the names as the command line's options (``--init-scale``, ``solve
        --schedule``) instead of keywords (``init_scale``, ``solve with a schedule``).

    Returns
    -------
    str
        The message, one line.

    Examples
    --------
    >>> schedule_refusal("simulate", "t_max", options=True)[:48]
    '--schedule and --t-max: a schedule takes its len'
    """
    spell = _option if options else str
    flag, how = (
        ("--schedule", f"{form} --schedule") if options else ("schedule", f"{form} with a schedule")
    )
    return (
        f"{flag} and {spell(given)}: a schedule takes its length from its phases, and {how} "
        f"takes only {', '.join(spell(t) for t in SCHEDULE_TAKES[form])}"
    )


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")
