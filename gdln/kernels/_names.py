"""The names the kernel experiments are chosen by, light enough for the command line's help.

Nothing here imports numpy, torch or sympy, so ``gdln kernel --help`` can list the choices
without loading them.

Modes of a deep gated network (:data:`MODES`; Sec. 4 of Lakshminarayanan & Singh, *Neural
Path Features and Neural Path Kernel* (NPF/NPK), Tables 2-3 of their *Deep Gated
Networks* (DGN)):

``"relu"``
    $\\Theta^F=\\Theta^V$ (one tied set of weights): the ordinary ReLU network, or the
    soft-ReLU network with soft gates.
``"frnpf_ii"``, ``"galu"``
    fixed random NPF, independent initialisation: $\\Theta^F$ random and frozen,
    $\\Theta^V$ random and independent of it. ``"galu"`` is the same network under the
    name of the DGN paper (gates from a separate frozen ReLU network).
``"frnpf_di"``
    fixed random NPF, dependent initialisation: $\\Theta^V_0=\\Theta^F_0$, $\\Theta^F$ frozen.
``"flnpf"``
    fixed learnt NPF: $\\Theta^F$ copied from a (trained) ``"relu"`` network and frozen.
``"dnpfl"``
    decoupled NPF learning: $\\Theta^F$ and $\\Theta^V$ both trained.
``"frg"``
    fixed random gating: Bernoulli($p$) gates drawn once per example, no feature network.
"""

MODES: tuple[str, ...] = ("relu", "frnpf_ii", "frnpf_di", "flnpf", "dnpfl", "galu", "frg")
"""The modes :func:`gdln.kernels.make_dgn` and :func:`gdln.kernels.make_conv_dgn` accept."""

DATASETS: tuple[str, ...] = ("digits", "digits47", "identical", "uniform2d")
"""The data sets :func:`gdln.kernels.make_dataset` builds."""

ACTIVATIONS: tuple[str, ...] = ("identity", "relu", "sigmoid", "tanh")
"""The node activations :func:`gdln.kernels.path_gram` knows the derivatives of."""
