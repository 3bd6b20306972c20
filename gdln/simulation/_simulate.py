r"""Simulation of the full gated network of Sec. 2 of Saxe, Sodhani & Lewallen (2022).

The network is the architecture graph itself: one weight matrix $W_e$ per edge, input
nodes clamped to the data, and in topological order

$$h_v = g_v \sum_{q:\, t(q)=v} g_q W_q h_{s(q)},$$

with the node gates $g_v$ and edge gates $g_q$ of each example (1 where ungated). Fixed
edges (``fixed`` edge attribute $c$) hold $W_e = c\,I$ and are not trained. Independent
random gates (``examples.random_gates``, stochastic depth) multiply their item's gate by
$\delta\sim\mathrm{Bernoulli}(p)$, one draw per step per repetition shared by all
examples, from ``numpy.random.default_rng((seed, 2))``; the recorded loss is then that of
the step's draw. The loss is Eq. (1): the weighted average over examples of
$\tfrac12\sum_{v\in\mathrm{Out}}\lVert y_v-h_v\rVert^2$. Gradients are the chain rule on
this full network: for full-batch GD written out on the examples' distinct activations
(``_states.py``, ``_backprop.py``), for minibatch SGD by torch autograd; nothing here uses
the reduced equations.

Time convention
---------------
Full-batch gradient descent with learning rate ``lr`` is the Euler step $dt = \mathrm{lr}$
of the gradient flow $\tau\,dW/dt = -\partial\mathcal L/\partial W$ (Eq. 2) with
$\tau = 1$, so after ``step`` steps $t/\tau = \mathrm{lr}\cdot\mathrm{step}$. Heavy-ball
momentum $\mu$ sums past gradients with weights $\mu^j$, so once its buffer has filled
each step moves the weights as far as a flow step $dt = \mathrm{lr}/(1-\mu)$; the clock
is therefore $t/\tau = \mathrm{step}\cdot\mathrm{lr}/(1-\mu)$ (``meta["effective_lr"]``),
which is $\mathrm{lr}\cdot\mathrm{step}$ without momentum. Minibatch SGD keeps the same
clock.

Seeds
-----
All repetitions run batched along a leading tensor axis; each draws its initial weights,
minibatches and random gates from its own seed only (see ``_seeds.py``), so a batched
run equals the per-seed runs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
import torch

from .._edge import Edge, edge_name
from .._lazy import upstairs
from .._runtime._threads import auto_threads, record_thread
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ..solution._trajectory import Trajectory
from ..task._examples import EXAMPLES_KEY, ExampleSet
from ..task._scheduled import SCHEDULE_TAKES, schedule_refusal
from ._data import Data, tensorise
from ._device import TORCH_DTYPES, torch_device
from ._errors import SimulationSpecError
from ._init import DRAWS, start_weights
from ._optimizers import OPTIMIZER_CLASSES
from ._patterns import check_pattern_records
from ._plan import Plan, compile_plan, fixed_edges
from ._random_gates import RandomGates
from ._recording import Recorder, projection_bases, record_at
from ._sampling import Sampler
from ._settings import check_recording
from ._start import Start, start_of
from ._training import Divergence, train
from ._workload import warn_if_fixed_point

if TYPE_CHECKING:  # sympy and the graph-file reader stay out of a bare simulation's imports
    from ..task import Problem
    from ..task._schedule import Schedule

__all__ = ["TIME_CONVENTION", "simulate"]

TIME_CONVENTION = (
    "t/tau = step * lr / (1 - momentum): full-batch gradient descent with learning rate lr is "
    "the Euler step dt = lr of tau dW/dt = -dL/dW (Eq. 2 of Saxe et al. 2022) with tau = 1; "
    "heavy-ball momentum mu approximates the same flow with dt = lr / (1 - mu)"
)


@door(error=SimulationSpecError, own=("seeds",))
def simulate(
    source: Problem | nx.DiGraph,
    examples: ExampleSet | None = None,
    *,
    steps: int | None = None,
    t_max: float | None = None,
    lr: float | None = None,
    weight_decay: float | str | None = None,
    init_scheme: str | None = None,
    init_scale: float | None = None,
    b0: Any = None,
    weights: Mapping[Edge, Any] | None = None,
    seeds: int | Sequence[int] | None = None,
    seed: int | None = None,
    eval_examples: ExampleSet | None = None,
    eval_task: str | Path | None = None,
    bases: Mapping[Edge, tuple[np.ndarray, np.ndarray]] | None = None,
    project: bool = False,
    points: int | None = None,
    optimizer: str | None = None,
    batch_size: int | None = None,
    momentum: float | None = None,
    dtype: str | None = None,
    device: str | None = None,
    threads: int | str | None = None,
    progress: bool | str | None = None,
    record_patterns: bool | None = None,
    record_every: int | None = None,
    record_steps: Sequence[int] | str | None = None,
    rsm: bool = False,
    record_weights: bool = False,
    record_singular_values: bool = True,
    diverge_above: float = 1e8,
    schedule: Schedule | None = None,
    resolved: Settings = AT_THE_DOOR,
) -> Trajectory:
    r"""Train the full gated network by gradient descent and record its trajectory.

    Forward pass $h_v = g_v\sum_{q:t(q)=v} g_q W_q h_{s(q)}$ (Sec. 2), loss Eq. (1), and
    the Euler discretisation of the gradient flow Eq. (2) of Saxe et al. 2022,
    $W_e \leftarrow W_e - \mathrm{lr}\,\partial\mathcal L/\partial W_e$, with gradients
    of the full network (by hand on the examples' distinct activations for ``"gd"``, by
    torch autograd for ``"sgd"``). Time is $t/\tau = \mathrm{lr}\cdot\mathrm{step}$,
    and $\mathrm{step}\cdot\mathrm{lr}/(1-\mu)$ with momentum $\mu$ (module docstring).

    Parameters
    ----------
    source
        A :class:`~gdln.Problem` (its graph and task; every setting left ``None`` takes the
        problem's value, ``problem.settings``), or an architecture graph (node attribute
        ``size``; in-degree-0 nodes are inputs and out-degree-0 nodes outputs) with its
        ``examples`` (the settings then take their declared defaults).
    examples
        The training examples, gates and weights (default: the problem's task).
    steps
        Number of updates; default: the steps that reach ``t_max``,
        ``round(t_max (1 - mu) / lr)`` (:func:`~gdln.simulation.horizon_steps`). Give one
        of ``steps`` and ``t_max``.
    t_max
        The horizon in units of $\tau$ (default 10).
    lr
        Learning rate = Euler time step in units of $\tau$ (with momentum $\mu$ one step
        is $\mathrm{lr}/(1-\mu)$ of flow time; default 0.05).
    weight_decay
        The weight decay $\gamma$ (default: the problem's setting, 0): each step adds
        $\gamma W_e$ to the gradient of every trained weight, the gradient of
        $\tfrac\gamma2\lVert W_e\rVert_F^2$ (the theory's convention,
        :class:`gdln.settings.Settings`); the recorded loss stays Eq. (1).
    init_scheme
        Name in :data:`INITS`: ``"xavier"`` ($\sigma_0\times$ Xavier normal, the default),
        ``"singular"``/``"orthogonal"`` (all singular values $\sigma_0$), ``"decoupled"``
        (with a Problem: the weights of Eq. (9) at $b(0)$ = ``b0``, one run whose hidden
        bases are drawn from ``seed``) or ``"given"`` (``weights``; implied by them).
    init_scale
        The initial scale $\sigma_0$ of the random schemes (default 0.2).
    b0
        $b(0)$ of the decoupled scheme (default: the problem's ``b0`` setting).
    weights
        For ``init_scheme="given"``: edge -> ``(|t|, |s|)`` (all seeds) or
        ``(S, |t|, |s|)``, e.g. the decoupled weights of Eq. (9).
    seeds, seed
        A count ``S`` (repetitions use the seeds ``seed, ..., seed+S-1``; default 10 and 0)
        or an explicit list of seeds. All repetitions run batched along a leading tensor
        axis.
    eval_examples, eval_task
        A second ExampleSet, or (with a Problem) a task file read against its graph
        (:func:`gdln.graphfile.with_task`), e.g. untrained routes (Fig. 4h), evaluated at
        each record.
    bases, project
        Edge -> ``(left (|t|, k), right (|s|, k))``: the reduced variable of mode $a$,
        ``left[:, a] @ W @ right[:, a]``, is recorded as ``"proj/<edge>"`` (e.g.
        ``Reduction.decoupled_bases``); ``project=True`` (with a Problem) takes the bases
        of the problem's reduction (every context, one variable per edge).
    points
        About how many evenly spaced steps to record (default 201), unless
        ``record_every`` or ``record_steps`` is given.
    optimizer
        A key of :data:`~gdln.simulation.OPTIMIZERS`: ``"gd"`` (full batch, the default)
        or ``"sgd"`` (minibatches of ``batch_size`` examples drawn with probability equal
        to their weight, per seed).
    batch_size
        Minibatch size, for ``"sgd"`` only (a file's batch size is dropped when the call
        names an optimiser that takes none).
    momentum
        Heavy-ball momentum $\mu\in[0, 1)$: $b \leftarrow \mu b + \nabla$,
        $W \leftarrow W - \mathrm{lr}\, b$; the recorded time advances
        $\mathrm{lr}/(1-\mu)$ per step.
    dtype
        One of :data:`~gdln.simulation.DTYPES`: ``"float64"`` or ``"float32"``.
    device
        ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda[:k]"``.
    threads
        CPU threads for torch during the run (restored afterwards). ``"auto"`` (the
        default): chosen from the work of a training step, one thread unless its mean
        operation is large, and never more than the cores free at the start
        (:func:`auto_threads <gdln._runtime._threads.auto_threads>`); an int sets them.
        The trajectory's ``meta["threads"]`` says how many ran. With ``"auto"`` on two or
        more cores the recorded singular values are computed on one more thread beside
        the training (``meta["singular_values_thread"]``), with the same values.
    progress
        Show a tqdm progress bar: ``"auto"`` when standard error is a terminal.
    record_patterns
        Record, at every recorded step, each ReLU node's activation pattern
        $1[z_v > 0]$ on every training example as ``"pattern/<node>"``
        (:attr:`gdln.Trajectory.patterns`), with the weights and, in ``meta``, the
        training examples: what :func:`gdln.extract` reads the gated network from.
    record_every
        Record at steps ``0, record_every, 2 record_every, ...`` and at the last step;
        default: about ``points`` evenly spaced steps.
    record_steps
        Record at exactly these steps instead (ints in ``[0, steps]``, any order, e.g.
        :func:`~gdln.simulation.log_spaced_steps`), or ``"log:N"``: step 0 and N
        log-spaced steps from 1 to the last. ``record_every`` must then be left out (or 1).
    rsm
        Record $h_v h_v^\top$ at hidden nodes (Fig. 4g), on the evaluation examples if
        given, else on the training examples.
    record_weights
        Also record every weight matrix as ``"W/<edge>"`` ``(T, S, |t|, |s|)``.
    record_singular_values
        Record every weight matrix's singular values as ``"sv/<edge>"`` (the default).
        Each record takes an SVD of every edge: with 201 records at hidden width 1024
        they cost several times the training. ``False`` leaves them out.
    diverge_above
        The run stops with :class:`~gdln.simulation.SimulationDivergedError` once a loss
        is non-finite or above this value.
    schedule
        With a Problem: train through this :class:`gdln.task.Schedule` (or the file's,
        ``problem.schedule``) phase by phase, each phase from the previous one's end
        weights (every context's loss all along, ``meta["schedule"]`` the boundaries and
        phases; ``init_scheme="decoupled"`` is the weights of Eq. 9 at ``b0`` on the bases
        of every context the schedule sees, one run from ``seed``). It takes
        ``lr``, ``points``, the start (``init_scheme``, ``init_scale``, ``b0``,
        ``weights``), ``seeds``, ``seed`` and ``weight_decay``; the schedule gives the
        number of steps.

    Returns
    -------
    Trajectory
        ``t`` ``(T,)`` in units of $\tau$; ``loss`` ``(T, S)``; series ``"loss/<context>"``
        ``(T, S)`` (the average within a context); ``"sv/<edge>"`` ``(T, S, k)`` singular
        values, descending; ``"proj/<edge>"`` ``(T, S, k)``; ``"rsm/<node>"``
        ``(T, S, n, n)``; ``"eval/loss"``, ``"eval/loss/<context>"`` ``(T, S)``,
        ``"eval/example_loss"`` ``(T, S, n)``, ``"eval/output/<node>"`` ``(T, S, n, |v|)``.

    Raises
    ------
    SimulationSpecError
        An option is malformed, or (before anything is allocated) the steps, the
        records or the numbers held per step exceed :class:`gdln.graphfile.Limits`
        ``steps``, ``points`` or ``batch_elements``.
    TaskSpecError
        The examples do not fit the graph.
    SimulationDivergedError
        The loss became non-finite or exceeded ``diverge_above``.

    Warns
    -----
    DegenerateStartWarning
        Every trained weight starts at zero and every path crosses two or more trained
        edges: the gradient is zero and nothing changes.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2 (the gated forward pass), Eq. (1) (the loss)
    and Eq. (2) (gradient flow, here its Euler discretisation).

    Examples
    --------
    One linear layer $x \to y$ learning $y = \pm 1$ from the two unit inputs:

    >>> import networkx as nx, numpy as np
    >>> from gdln.task import ExampleSet
    >>> graph = nx.DiGraph([("x", "y")])
    >>> nx.set_node_attributes(graph, {"x": 2, "y": 1}, "size")
    >>> examples = ExampleSet(
    ...     inputs={"x": np.eye(2)}, targets={"y": np.array([[1.0], [-1.0]])}, gates={},
    ...     weights=np.full(2, 0.5), context=np.zeros(2, dtype=int))
    >>> run = simulate(graph, examples, steps=100, lr=0.5, seeds=3, record_every=50)
    >>> run.t.tolist(), run.loss.shape
    ([0.0, 25.0, 50.0], (3, 3))
    >>> bool((run.loss[-1] < 1e-10).all())
    True
    """
    if schedule is not None:
        asked = {
            "examples": examples, "steps": steps, "eval_examples": eval_examples,
            "eval_task": eval_task, "bases": bases, "project": project or None,
            "record_every": record_every, "record_steps": record_steps, "rsm": rsm or None,
            "record_weights": record_weights or None,
            "record_singular_values": None if record_singular_values else False,
        }  # fmt: skip
        asked |= {k: True for k in resolved.called - set(SCHEDULE_TAKES["simulate"])}
        refused = sorted(k for k, v in asked.items() if v is not None)
        if refused:
            raise SimulationSpecError(schedule_refusal("simulate", refused[0]))
        if isinstance(source, nx.DiGraph):
            raise SimulationSpecError("schedule and a graph: a schedule trains a Problem")
        simulated = upstairs("gdln.schedule._simulate:schedule_simulated")
        return simulated(source, schedule, resolved, weights=weights, seeds=seeds)
    recording = check_recording(
        record_every=record_every,
        record_steps=record_steps,
        rsm=rsm,
        record_weights=record_weights,
        record_singular_values=record_singular_values,
        diverge_above=diverge_above,
    )
    start = start_of(
        source,
        examples,
        resolved,
        steps=steps,
        weights=weights,
        seeds=seeds,
        eval_examples=eval_examples,
        eval_task=eval_task,
        bases=bases,
        project=project,
        recording=recording,
    )
    before = torch.get_num_threads()
    try:
        return _run(start)
    finally:
        torch.set_num_threads(before)


def _run(start: Start) -> Trajectory:
    """The body of :func:`simulate`: the run ``start_of`` resolved and checked, as it is;
    it sets torch's thread count (the caller restores it)."""
    net = compile_plan(start.graph)
    recorded = record_at(start.steps, start.recording)
    if start.patterns:
        check_pattern_records(
            net.relu,
            records=len(recorded),
            seeds=len(start.seeds),
            rows=len(start.examples.weights),
            sizes=net.sizes,
            edges=net.edges,
        )
    dtype, device = TORCH_DTYPES[start.dtype], torch_device(start.device)
    kind = OPTIMIZER_CLASSES[start.optimizer]
    data = tensorise(net, start.examples, "examples", dtype, device, states=not kind.minibatch)
    evaluation = (
        None
        if start.eval_examples is None
        else tensorise(net, start.eval_examples, "eval_examples", dtype, device)
    )
    beside = start.recording.singular_values and record_thread(device, start.threads)
    recorder = Recorder(
        net,
        data,
        evaluation,
        projection_bases(net, start.bases, dtype, device),
        start.recording.rsm,
        start.recording.weights or start.patterns,
        background=beside,
        singular_values=start.recording.singular_values,
        patterns=tuple(v for v in net.hidden if v in net.relu) if start.patterns else (),
    )
    fixed = fixed_edges(net)
    w0 = start_weights(
        net,
        init_scheme=start.init_scheme,
        init=start.init_scale,
        weights=start.weights,
        seeds=start.seeds,
        fixed=fixed,
    )
    trained = [i for i in range(len(net.edges)) if i not in fixed]
    zero = all(not np.any(w0[i]) for i in trained)
    warn_if_fixed_point(net.order, net.edges, trained, zero, net.outputs)
    W = [torch.tensor(np.array(a), dtype=dtype, device=device, requires_grad=True) for a in w0]
    gates = RandomGates(net, start.examples.random_gates, start.seeds, dtype, device)
    sampler = None
    if kind.minibatch:
        assert start.batch_size is not None  # a minibatch optimiser's size, checked
        sampler = Sampler(start.examples.weights, start.seeds, start.batch_size, device)
    optimizer = kind(
        net,
        data,
        W,
        lr=start.lr,
        momentum=start.momentum,
        fixed=fixed,
        sampler=sampler,
        decay=start.weight_decay,
    )
    threads = start.threads
    if threads == "auto":  # chosen from the work of a step (_runtime/_threads.py)
        threads = auto_threads(*optimizer.work()) if device.type == "cpu" else 1
    torch.set_num_threads(int(threads))
    dt = start.lr / (1.0 - start.momentum)  # flow time per step (module docstring)
    divergence = Divergence(
        start.seeds, dtype, device, limit=start.diverge_above, dt=dt, lr=start.lr
    )
    progress = sys.stderr.isatty() if start.progress == "auto" else bool(start.progress)
    with recorder:
        train(
            optimizer,
            steps=start.steps,
            gates=gates,
            recorder=recorder,
            record_at=recorded,
            divergence=divergence,
            progress=progress,
        )
        steps_rec, loss_rec, series = recorder.arrays()
    meta = {
        "method": "simulate",
        "graph": str(start.graph.graph.get("name", "")),
        "time": TIME_CONVENTION,
        "lr": float(start.lr),
        "effective_lr": float(dt),
        "weight_decay": float(start.weight_decay),
        "steps": int(start.steps),
        "step_at": steps_rec.tolist(),
        "init_scheme": start.init_scheme,
        "init": float(start.init_scale) if DRAWS[start.init_scheme] is not None else None,
        "seeds": start.seeds,
        **_settings_meta(start, device),
        "threads": int(threads),
        "singular_values_thread": beside,
        **_network_meta(net, data, evaluation, start.examples, fixed),
    }
    if start.patterns:  # what gdln.extract needs besides the series
        meta["relu"] = [v for v in net.hidden if v in net.relu]
        meta[EXAMPLES_KEY] = start.examples.as_json()
    t = dt * steps_rec.astype(float)
    return Trajectory(t=t, loss=loss_rec, series=series, meta=meta, recording=start.recording)


def _settings_meta(start: Start, device: torch.device) -> dict[str, Any]:
    """The trajectory's record of how it was trained."""
    return {
        "optimizer": start.optimizer,
        "batch_size": start.batch_size,
        "momentum": start.momentum,
        "dtype": start.dtype,
        "device": str(device),
        "record_patterns": start.patterns,
    }


def _network_meta(
    net: Plan,
    data: Data,
    evaluation: Data | None,
    examples: ExampleSet,
    fixed: Mapping[int, float],
) -> dict[str, Any]:
    """The trajectory's record of the network and the examples it was trained on."""
    return {
        "edges": [edge_name(e) for e in net.edges],
        "hidden": list(net.hidden),
        "outputs": list(net.outputs),
        "contexts": list(data.labels),
        "eval_contexts": [] if evaluation is None else list(evaluation.labels),
        "loss_axes": ["time", "seed"],
        "random_gates": {str(k): float(p) for k, p in examples.random_gates.items()},
        "fixed_edges": [edge_name(net.edges[i]) for i in fixed],
    }
