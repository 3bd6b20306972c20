r"""The results of the exact reduction: one reduced ODE per class of modes, and the whole.

See :mod:`gdln.reduction._reduce` for how they are built (Sec. 3.1 of Saxe et al. 2022).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from .._edge import Edge
from .._errors import GdlnError
from ..paths._statistics import ActivePaths
from ..task._problem import Problem
from ._bases import Modes
from ._closed_form import ClosedForm
from ._decoupled import DecoupledBases
from ._internal import replace
from ._modes import mode_values
from ._numeric import NumericFlow, reduction_flow
from ._poly import Polynomial

__all__ = ["ReducedSystem", "Reduction"]


QUOTIENT_ROUTE = "symmetry quotient"
"""How :attr:`Reduction.route` starts when the systems come from the symmetry quotient."""


@dataclass(frozen=True, eq=False)
class ReducedSystem:
    r"""The reduced ODE for one class of modes: $\tau\,\dot B = f(B)$ with $\tau = 1$.

    Modes whose 1-D networks have the same edges share one system; their data symbols
    take different values (``symbols``).

    Parameters
    ----------
    variables
        The dynamical variables ($b_e$ per edge, or lumped $B_k$).
    edges
        Variable -> the edges it stands for (its orbit; ``len`` is the orbit size).
    rhs
        Variable -> right-hand side, in units where $\tau = 1$ (Eq. 10, lumped).
    loss
        The per-mode loss $\mathcal{L}_\alpha$ in these variables (no constant term),
        with the weight-decay penalty $\tfrac\gamma2\sum_k|O_k|B_k^2$ when $\gamma > 0$.
    symbols
        Data symbol -> its value in each mode of ``modes``.
    modes
        The mode indices this system describes.
    initial
        Variable -> initial value (also for eliminated variables).
    conserved
        Conserved quadratic quantities $Q$ with $\nabla Q\cdot f \equiv 0$.
    decaying
        With weight decay $\gamma > 0$, the quadratic quantities that would be conserved
        without it: each obeys $\tau\dot Q = -2\gamma Q$, so
        $Q(t) = Q(0)e^{-2\gamma t}$ (for a two-layer pathway
        $\frac{d}{dt}(a^2-b^2) = -2\gamma(a^2-b^2)$); empty without decay.
    weight_decay
        The weight decay $\gamma$ in ``rhs`` and ``loss`` (0: none).
    eliminated
        Eliminated variable -> its expression in the others and the constants (Eq. 15).
    constants
        Constant of a conserved quantity, used by ``eliminated`` -> its value.
    closed_form
        What sympy could solve, each a :class:`~gdln.reduction.ClosedForm` that says what it
        is (its ``kind``, ``meaning`` and labels), keyed by its ``key``: ``"t"`` (the formal
        separable solution $t(B)$) and, where found, the explicit solution $B(t)$ keyed by
        the variable's name; where a conserved constant left a factor $B^2 + k$, the forms
        in the angle $\theta$ of $B=\sqrt{k}\sinh\theta$: $\theta(B)$ (``"theta"``),
        $\tau\,d\theta/dt$ (``"theta_rhs"``) and $t(\theta)$ (``"t_theta"``).
    sizes
        Variable -> its orbit size where that is not ``len(edges[variable])``: an
        expression in the family's parameters (``derive --symbolic``).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10) (reduced dynamics), Eq. (15)
    (elimination) and Eqs. (44)-(48) (lumping).
    """

    variables: tuple[sp.Symbol, ...]
    edges: Mapping[sp.Symbol, tuple[Edge, ...]]
    rhs: Mapping[sp.Symbol, sp.Expr]
    loss: sp.Expr
    symbols: Mapping[sp.Symbol, tuple[Any, ...]]
    modes: tuple[int, ...]
    initial: Mapping[sp.Symbol, Any]
    conserved: tuple[sp.Expr, ...] = ()
    decaying: tuple[sp.Expr, ...] = ()
    weight_decay: Any = 0
    eliminated: Mapping[sp.Symbol, sp.Expr] = field(default_factory=dict)
    constants: Mapping[sp.Symbol, Any] = field(default_factory=dict)
    closed_form: Mapping[str, ClosedForm] = field(default_factory=dict)
    sizes: Mapping[sp.Symbol, Any] = field(default_factory=dict)
    # internal (set by the lumping, not in the signature): the lumped, pre-elimination
    # polynomial form used for numbers
    _lumped: tuple[sp.Symbol, ...] = field(init=False, repr=False, compare=False, default=())
    _generators: tuple[sp.Symbol, ...] = field(init=False, repr=False, compare=False, default=())
    _context_losses: tuple[Polynomial, ...] = field(
        init=False, repr=False, compare=False, default=()
    )
    _loss_poly: Polynomial = field(
        init=False, repr=False, compare=False, default_factory=Polynomial
    )

    def __repr__(self) -> str:
        names = ", ".join(str(v) for v in self.variables)
        return f"ReducedSystem(variables=[{names}], modes={list(self.modes)})"

    def _repr_latex_(self) -> str:
        """The system as display math, for Jupyter (``reduction._latex.system_latex``)."""
        from ._latex import system_latex

        return system_latex(self)

    def orbit(self, variable: sp.Symbol) -> Any:
        """The number of edges ``variable`` stands for, $|O_k|$ (Eqs. 44-48).

        Parameters
        ----------
        variable
            One of :attr:`variables` or :attr:`eliminated`.

        Returns
        -------
        Any
            An int, or an expression in the family's parameters (``sizes``).
        """
        return self.sizes.get(variable, len(self.edges[variable]))

    def equations(self) -> list[sp.Eq]:
        r"""$\tau\,\dot B = f(B)$ (Eq. 10, lumped) as sympy equations.

        Returns
        -------
        list of sympy.Eq
            One per variable, with $t$ and $\tau$ as symbols.
        """
        t, tau = sp.symbols("t tau", positive=True)
        return [
            sp.Eq(tau * sp.Derivative(sp.Function(str(v))(t), t), self.rhs[v])
            for v in self.variables
        ]

    def tied(self) -> ReducedSystem:
        r"""This system with nothing eliminated: $\tau\dot B_k=-\frac1{|O_k|}\,\partial\mathcal L/\partial B_k$.

        Tying edge variables by symmetry or by equal initial values is exact for gradient
        descent as for gradient flow (every member of a block takes the same step), but
        eliminating a variable through a conserved quadratic quantity $Q$ (Eq. 15 of Saxe
        et al. 2022, ``lump="full"``) is exact for the flow only: a step
        $B \leftarrow B+\mathrm{lr}\,f(B)$ changes $Q$ by $O(\mathrm{lr}^2)$. The tied
        system keeps the same variables (the eliminated ones dynamical again), blocks,
        loss and initial values (the gradient-descent map iterates it, since a discrete
        step does not conserve $Q$). A system with nothing eliminated is returned as it
        is; the tied system is built once.

        Returns
        -------
        ReducedSystem
            The tied system: :attr:`variables` are the lumped variables before Eq. (15),
            nothing is eliminated and there are no constants.
        """
        if not self.eliminated:
            return self
        if self not in _TIED:
            rhs = {
                v: sp.expand(
                    self._loss_poly.diff(k).to_sympy(self._generators)
                    * sp.Rational(-1, self.orbit(v))
                )
                for k, v in enumerate(self._lumped)
            }
            _TIED[self] = replace(
                self,
                variables=tuple(self._lumped),
                rhs=rhs,
                eliminated={},
                constants={},
                closed_form={},
            )
        return _TIED[self]


_TIED: weakref.WeakKeyDictionary[ReducedSystem, ReducedSystem] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class Reduction(DecoupledBases):
    """The reduction of a problem: bases, per-mode systems, and how to use them.

    Parameters
    ----------
    problem
        What was reduced.
    systems
        One :class:`ReducedSystem` per class of modes.
    constant
        $\\tfrac12\\langle\\lVert y\\rVert^2\\rangle$, the loss at zero weights.
    context_constants
        Per context, $\\tfrac12\\langle\\lVert y\\rVert^2\\rangle_c$.
    modes
        Per component of coupled paths, its :class:`~gdln.reduction.Modes`.
    lump
        The lumping used.
    active
        The active paths and co-active pairs whose statistics were diagonalised.
    route
        How the systems were derived when it is not from every context: the symmetry
        quotient (``problem`` then holds one representative context per orbit, with the
        orbit's probability), or why the quotient did not apply.
    symbolic
        The parameters kept as symbols in the systems (``reduce(symbolic=...)``).
    weight_decay
        The weight decay $\\gamma$ of the systems (``reduce(weight_decay=...)``; 0: none).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (7)-(10).
    """

    problem: Problem
    systems: tuple[ReducedSystem, ...]
    constant: Any
    context_constants: tuple[Any, ...]
    modes: tuple[Modes, ...]
    lump: str
    active: ActivePaths = field(repr=False)
    route: str = ""
    symbolic: tuple[str, ...] = ()
    weight_decay: Any = 0
    # internal (set by reduce, not in the signature): node and edge bookkeeping for the
    # bases and decoupled weights of Eq. (9)
    _space: Mapping[tuple[int, Hashable], Hashable] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    _edge_component: Mapping[Edge, int] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    _slot_edges: Mapping[int, frozenset[Edge]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    _init: Mapping[Edge, Any] = field(init=False, repr=False, compare=False, default_factory=dict)
    _anchors: Mapping[int, np.ndarray] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    _hidden: dict[int, dict[Hashable, np.ndarray]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )  # seed -> hidden-node bases, drawn once
    _network: Callable[[], Reduction] | None = field(
        init=False, repr=False, compare=False, default=None
    )
    # (the problem as loaded, b0) of a reduction derived on the symmetry quotient

    def __repr__(self) -> str:
        return f"Reduction({self.problem.name!r}, lump={self.lump!r}, systems={list(self.systems)})"

    def _repr_latex_(self) -> str:
        """Every system as display math, for Jupyter (``reduction._latex.reduction_latex``)."""
        from ._latex import reduction_latex

        return reduction_latex(self)

    @property
    def n_modes(self) -> int:
        """The number of modes that have a reduced system."""
        return sum(len(s.modes) for s in self.systems)

    def numeric_flow(self, *, gd_map: bool = False) -> NumericFlow:
        r"""The reduced dynamics in numbers, as :func:`gdln.solve` integrates them.

        Every system stacked into one flat state, the equations compiled once (see
        :class:`~gdln.reduction.NumericFlow`); :class:`~gdln.ExpectedDynamics` gives the
        same protocol for the moment route.

        Parameters
        ----------
        gd_map
            For the gradient-descent map: the systems of ``lump="full"`` before the
            elimination of Eq. (15), which only gradient flow respects
            (:meth:`ReducedSystem.tied`; ``meta["system"]`` is then ``"tied"``, else
            ``"reduced"``).

        Returns
        -------
        NumericFlow
            What :func:`gdln.solve` steps: the state, the right-hand side, what to record.

        Raises
        ------
        GdlnError
            The data, initial values or equations still hold symbols (e.g. a reduction
            kept symbolic with ``reduce(symbolic=...)``).
        """
        return reduction_flow(self, gd_map=gd_map)

    def context_labels(self) -> tuple[str, ...]:
        """The labels of the task's contexts, in order.

        Returns
        -------
        tuple of str
            One label per context of ``problem`` (the representatives on the quotient).
        """
        task = self.problem.require_task()
        return tuple(c.label for c in task.contexts)

    def statistic_values(
        self, component: int, row: Hashable, col: Hashable, statistic: Any, *, exact: bool = True
    ) -> list[Any]:
        r"""Per mode of ``component``, the diagonal value of a statistic (Eqs. 7-8).

        ``statistic`` runs from data node ``col`` to data node ``row`` (a
        $\Sigma^{yx}(p)$ from $s(p)$ to $t(p)$, or a $\Sigma^x(j,p)$ between two inputs);
        the values are $r^{\alpha\top}_{\rm row}\Sigma\, r^\alpha_{\rm col}$, the
        diagonal of $S(p)$ or $D(j,p)$, exact where the statistic and the bases are.

        Parameters
        ----------
        component
            Which component of coupled paths (an index of :attr:`modes`).
        row, col
            The data nodes the statistic runs to and from.
        statistic
            The matrix, ``(|row|, |col|)``.
        exact
            Exact values where possible, else floats.

        Returns
        -------
        list
            One value per mode of the component.
        """
        space = self._space
        return mode_values(
            self.modes[component],
            space[(component, row)],
            space[(component, col)],
            statistic,
            exact=exact,
        )

    @property
    def route_name(self) -> str:
        """The declared name of the route the systems were derived by.

        Returns
        -------
        str
            ``"quotient"`` (one context per orbit of the symmetry quotient) or
            ``"contexts"`` (every context), as :data:`gdln.settings.ROUTES` names them;
            :attr:`route` says more.
        """
        return "quotient" if self.route.startswith(QUOTIENT_ROUTE) else "contexts"

    # -- bases and decoupled weights (Eq. 9) -----------------------------------------
    @functools.cached_property
    def whole(self) -> Reduction:
        """The reduction that holds every edge's bases: this one, or for one derived on the
        symmetry quotient, the whole network's (every context, one variable per edge, the
        same $b(0)$), derived on first use; the decoupled weights of Eq. (9) need it."""
        if not self.route.startswith(QUOTIENT_ROUTE):
            return self
        if self.symbolic or self._network is None:
            raise GdlnError(
                f"{self.problem.source}: this reduction keeps {', '.join(self.symbolic)} as "
                "symbols and has no bases for every edge; substitute numbers for decoupled "
                "weights of the whole network"
            )
        return self._network()

    def edge_bases(self, edge: Edge, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Mode vectors at the two ends of ``edge``: ``(left, right, modes)``.

        ``left[:, k]`` (at the target) and ``right[:, k]`` (at the source) belong to mode
        ``modes[k]``; the reduced variable is ``left[:, k] @ W @ right[:, k]``. An edge
        on no active path carries no mode (no columns).

        Parameters
        ----------
        edge
            ``(source, target)``.
        seed
            Seed of the random orthogonal bases of hidden nodes (drawn once per seed).

        Returns
        -------
        tuple
            ``(left, right, modes)``: ``(|target|, k)``, ``(|source|, k)`` and the ``k``
            mode indices.

        Raises
        ------
        GdlnError
            The reduction was derived on the symmetry quotient, which has no bases for
            every edge.
        """
        if self.whole is not self:
            return self.whole.edge_bases(edge, seed=seed)
        if edge not in self._edge_component:
            size = self.problem.graph.nodes
            return np.zeros((size[edge[1]]["size"], 0)), np.zeros((size[edge[0]]["size"], 0)), []
        slots = sorted(a for a, edges in self._slot_edges.items() if edge in edges)
        left, right = self._mode_vectors(edge, slots, seed)
        return left, right, slots

    def decoupled_bases(self, *, seed: int = 0) -> dict[Edge, tuple[np.ndarray, np.ndarray]]:
        """Edge -> ``(left, right)`` mode vectors for every edge that carries a mode.

        The reduced variable of the ``k``-th mode of an edge is
        ``left[:, k] @ W @ right[:, k]`` (Eq. 9), as :func:`gdln.simulate` records it when
        given these as ``bases``; the modes are those of :meth:`edge_bases`.

        Parameters
        ----------
        seed
            Seed of the random orthogonal bases of hidden nodes.

        Returns
        -------
        dict
            Edge -> ``(left, right)``.

        Raises
        ------
        GdlnError
            The reduction was derived on the symmetry quotient.
        """
        if self.whole is not self:
            return self.whole.decoupled_bases(seed=seed)
        out = {}
        for edge in self.problem.graph.edges:
            left, right, slots = self.edge_bases(edge, seed=seed)
            if slots:
                out[edge] = (left, right)
        return out

    def decoupled_weights(self, init: Any = None, *, seed: int = 0) -> dict[Edge, np.ndarray]:
        """Weights $W_e = R_{t(e)}B_eR_{s(e)}^\\top$ (Eq. 9) with $B_e$ at its initial value.

        Hidden-node bases $R_v$ are random orthogonal matrices drawn from ``seed``,
        shared by nodes joined by fixed edges; a fixed edge holds $W_e = c\\,I$.

        Parameters
        ----------
        init
            One initial value $B_e$ for every edge and mode instead of the reduction's.
        seed
            Seed of the random orthogonal bases of hidden nodes.

        Returns
        -------
        dict
            Edge -> ``(|target|, |source|)`` weights, for :func:`gdln.simulate`
            (``init_scheme="given"``).

        Raises
        ------
        GdlnError
            The reduction was derived on the symmetry quotient.
        """
        if self.whole is not self:
            return self.whole.decoupled_weights(init, seed=seed)
        graph = self.problem.graph
        weights = {}
        for edge in graph.edges:
            shape = (graph.nodes[edge[1]]["size"], graph.nodes[edge[0]]["size"])
            W = np.zeros(shape)
            if "fixed" in graph.edges[edge]:
                W = float(graph.edges[edge]["fixed"]) * np.eye(shape[0])
            elif edge in self._edge_component:
                left, right, slots = self.edge_bases(edge, seed=seed)
                value = float(init if init is not None else self._init.get(edge, 0))
                W = value * left @ right.T if slots else W
            weights[edge] = W
        return weights
