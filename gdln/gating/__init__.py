"""ReLU networks through their gated networks (issue 37).

A ReLU network is the gated deep linear network of its own activation patterns while no
pattern flips (Sec. 2 of Saxe, Sodhani & Lewallen 2022). :func:`extract` reads that gated
network off a run recorded with ``record_patterns`` and writes it as a graph file every
command reads; :func:`predict_gating` goes the other way: from a task with contexts, the
GDLN with one pathway per candidate gating, solved, ranks which gating wins (Jarvis,
Klein, Rosman & Saxe 2025 wrote that network by hand); :func:`gating_agreement` scores a
ReLU run against the prediction over time.
"""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
