"""The named choices of gdln's settings, each name with what it means.

Every family of variants that a setting chooses by name is one table here, light enough
for the command line's help (only the standard library is imported): the lumpings, the
routes, the dynamics, the ODE steppers, the initial-weight schemes, the optimisers and the
floating-point types, and the activations a hidden node of a graph file may
carry. The machinery behind each name lives with its stage, in a table
keyed by the same names (the lumpings in :mod:`gdln.reduction`, the steppers in
:mod:`gdln.solution`, the initialisations and optimisers in :mod:`gdln.simulation`), and a
test checks that the keys agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "ACTIVATIONS",
    "DTYPES",
    "DYNAMICS",
    "INITS",
    "LUMPINGS",
    "METHODS",
    "OPTIMIZERS",
    "ROUTES",
    "THEORY_STARTS",
]

LUMPINGS: Mapping[str, str] = MappingProxyType(
    {
        "none": "one variable per trained edge and mode (Eq. 10)",
        "symmetry": "edges tied by the graph's symmetry (a directed colour refinement), kept "
        "only where every member of a block has the same right-hand side; exact for the ODE "
        "and the gradient-descent map alike (Eqs. 44-46 for routing)",
        "balanced": "the same verified tying, started from edges grouped by equal initial "
        "value instead of by the graph's symmetry (Eqs. 47-48)",
        "full": "balanced, then variables eliminated through conserved quadratic quantities "
        "(Eq. 15), which gradient flow conserves",
    }
)
"""The lumpings of :func:`gdln.reduce`, from finest to coarsest: name -> what it ties.

Equation numbers are those of Saxe, Sodhani & Lewallen (2022)."""

ROUTES: Mapping[str, str] = MappingProxyType(
    {
        "auto": "the exact reduction where the statistics share bases (quotient where the "
        "task has a repeat: family of contexts and its symmetry holds, else contexts; "
        "moments where the paths are too many to list), else what applies: matrix for "
        "solve and compare, the asymptotic stages for timescales; derive refuses",
        "quotient": "derive from one context per orbit of the file's cyclic symmetry",
        "contexts": "derive from every context, listing the co-active paths",
        "moments": "the same expected loss and dynamics evaluated without listing paths "
        "(one variable per trained edge, no lumping)",
        "matrix": "no reduction: the full-matrix gradient flow of Eqs. 3-4 (for statistics "
        "without common bases)",
    }
)
"""How the dynamics of a file are obtained: name -> what it does."""

DYNAMICS: Mapping[str, str] = MappingProxyType(
    {
        "flow": "gradient flow, the ODE tau dW/dt = -dL/dW (Eq. 2)",
        "gd-map": "full-batch gradient descent with learning rate lr, exactly (the Euler "
        "map of the flow with dt = lr)",
    }
)
"""What :func:`gdln.solve` integrates: name -> meaning."""

METHODS: Mapping[str, str] = MappingProxyType(
    {
        "auto": "lsoda for one system; for a batch of initial scales dop853, and lsoda where "
        "dop853 stops (a stiff system)",
        "dop853": "the explicit Runge-Kutta pair of order 8(5,3) of Dormand and Prince",
        "lsoda": "LSODA, switching between Adams and BDF steps as the dynamics turn stiff",
    }
)
"""The steppers of the ODE (``method`` of :func:`gdln.solve`): name -> what it is."""

INITS: Mapping[str, str] = MappingProxyType(
    {
        "xavier": "Xavier-normal entries times the initial scale sigma0 (Fig. 4e: sigma0 = 0.2)",
        "singular": "random orthonormal factors, every singular value = sigma0",
        "orthogonal": "a random (semi-)orthogonal matrix times the gain sigma0, "
        "W^T W = sigma0^2 I (W W^T if wide), as torch.nn.init.orthogonal_: the authors' "
        "default for the full network",
        "decoupled": "the weights of Eq. (9), W_e = R_t B_e R_s^T, with every b_e = b0 and "
        "hidden bases drawn from the seed: the start from which the reduction is exact",
        "given": "explicit weights (the weights= argument of gdln.simulate)",
    }
)
"""Initialisation schemes (``init_scheme`` of :func:`gdln.simulate`), name -> description.

The random schemes (``xavier``, ``singular``, ``orthogonal``) draw weights at the initial
scale ``init_scale`` ($\\sigma_0$); ``decoupled`` starts from $b(0)$ = ``b0``."""

OPTIMIZERS: Mapping[str, str] = MappingProxyType(
    {
        "gd": "full-batch gradient descent: the Euler discretisation of Eq. (2)",
        "sgd": "minibatch SGD (examples drawn with probability = their weight), heavy-ball "
        "momentum as in App. D, Table 1",
    }
)
"""Optimisers (``optimizer`` of :func:`gdln.simulate`), name -> description."""

DTYPES: Mapping[str, str] = MappingProxyType(
    {"float64": "double precision", "float32": "single precision"}
)
"""Floating-point types of a simulation (``dtype``), name -> description."""

THEORY_STARTS: Mapping[str, str] = MappingProxyType(
    {
        "auto": "the nearer source decides: b0 given for this call, else random if "
        "init_scale is given for it, else b0 if the file writes solve.b0, else random",
        "b0": "the b0 setting (given, else the file's solve.b0, else its default)",
        "random": "read off the random runs' initial weights (their mode strengths, averaged "
        "over the seeds), so that theory and random runs start alike",
    }
)
"""Where :func:`gdln.compare` starts the theory and the decoupled run: name -> meaning."""

ACTIVATIONS: Mapping[str, str] = MappingProxyType(
    {
        "linear": "h_v = g_v sum_q g_q W_q h_s(q), the gated linear node of Sec. 2 (the default)",
        "relu": "h_v = max(0, g_v sum_q g_q W_q h_s(q)) unit by unit: a ReLU network, which is "
        "the gated network whose gates are its own activation patterns while none flips; "
        "gdln simulate trains it, gdln extract reads its gated network off a run",
    }
)
"""What a hidden node of a graph file computes (its ``activation:`` key): name -> meaning.

The path theory (Eqs. 3-10 of Saxe, Sodhani & Lewallen 2022) holds for linear nodes only;
a graph with a ``relu`` node is simulated, and its gated network is extracted from the
patterns of a run (:func:`gdln.extract`)."""
