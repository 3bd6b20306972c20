"""The names of the simulator's choices, light enough for the command line's help.

This module imports nothing outside the standard library: ``gdln simulate --help`` builds
its choices from these tables without loading torch or numpy. The machinery behind each
name lives in a private table keyed by the same names (the initialisations in
``_init.py``, the optimisers in ``_optimizers.py``, the torch dtypes in ``_device.py``),
and a test checks that the keys agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["DTYPES", "INITS", "OPTIMIZERS"]

INITS: Mapping[str, str] = MappingProxyType(
    {
        "xavier": "Xavier-normal entries times the initial scale sigma0 (Fig. 4e: sigma0 = 0.2)",
        "singular": "random orthonormal factors, every singular value = sigma0",
        "orthogonal": "a random (semi-)orthogonal matrix times the gain sigma0, "
        "W^T W = sigma0^2 I (W W^T if wide), as torch.nn.init.orthogonal_: the authors' "
        "default for the full network",
        "given": "explicit weights, e.g. the decoupled ones of Eq. (9) from "
        "Reduction.decoupled_weights",
    }
)
"""Initialisation schemes (``init_scheme`` of :func:`gdln.simulate`), name -> description.

Every scheme but ``"given"`` draws random weights at the initial scale ``init``
($\\sigma_0$)."""

OPTIMIZERS: Mapping[str, str] = MappingProxyType(
    {
        "gd": "full-batch gradient descent: the Euler discretisation of Eq. (2)",
        "sgd": "minibatch SGD (examples drawn with probability = their weight), heavy-ball "
        "momentum as in App. D, Table 1",
    }
)
"""Optimisers (``SimulationSettings.optimizer``), name -> description."""

DTYPES: tuple[str, ...] = ("float64", "float32")
"""Floating-point types of a simulation (``SimulationSettings.dtype``)."""
