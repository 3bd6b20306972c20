r"""Forgetting in a two-layer linear network trained on tasks in sequence (issue 36).

Reference for tests (imports no gdln). The setting is that of the repository
``Nico31415/ExactLearningDynamics`` (``forgetting.py``, ``empiricalTest.py``, ``tools.py``;
a master's thesis building on Braun, Dominé, Fitzgerald & Saxe 2022; see FACTS.md for
files, commit and lines); the code here is written anew from its facts and equations:

- tasks: random regression, n = 10 examples, inputs of dimension 5 drawn N(0, 1) and
  whitened (centred, rotated onto principal axes, scaled so that $X^\top X/n = I$), targets
  of dimension 2 drawn N(0, 1) (not centred). :func:`regression_task`.
- network $x \to h \to y$ with hidden 10, started zero-balanced ($W_2^\top W_2 = W_1W_1^\top$)
  from the product of two N(0, 0.35^2) matrices, its singular values square-rooted and scaled
  by 1.15. :func:`zero_balanced_weights`.
- training: full-batch gradient descent on $\tfrac12\langle\lVert y - W_2W_1x\rVert^2\rangle$
  (Eq. 1), one task after another, each from the previous task's end weights.
- forgetting of task i while task k trains after task j:
  $F_i(T_j, T_k) = \mathcal L_i(\text{during/after } T_k) - \mathcal L_i(\text{end of } T_j)$.
  With $\Sigma^x = I$, $\mathcal L_i(W) = \tfrac12\lVert W - \Sigma^{yx}_i\rVert_F^2 -
  \tfrac12\lVert\Sigma^{yx}_i\rVert_F^2 + \tfrac12\operatorname{tr}\Sigma^y_i$, so
  $F_i = \tfrac12(\lVert W_k - \Sigma^{yx}_i\rVert_F^2 - \lVert W_j - \Sigma^{yx}_i\rVert_F^2)$:
  it depends on the network function only (their ``forgetting_analytical``).

Exact dynamics: the λ-balanced Riccati solution (:func:`reference.closed_forms.riccati_qqt`)
restarted at each task from the previous task's end $P = QQ^\top$ (Λ is conserved by the
flow under any data, so every task starts λ-balanced again). The GD map is run directly.

>>> import numpy as np
>>> X, Y = regression_task(np.random.default_rng(0))
>>> bool(np.allclose(X.T @ X / len(X), np.eye(5)))
True
"""

from __future__ import annotations

import numpy as np

from . import closed_forms as cf

N, D_IN, HIDDEN, D_OUT, SIGMA = 10, 5, 10, 2, 0.35


def regression_task(
    rng: np.random.Generator, n: int = N, d_in: int = D_IN, d_out: int = D_OUT
) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (n, d_in) whitened so that $X^\\top X/n = I$ (and centred), ``Y`` (n, d_out) ~ N(0, 1)."""
    X = rng.normal(size=(n, d_in))
    Y = rng.normal(size=(n, d_out))
    Xc = X - X.mean(axis=0)
    evals, evecs = np.linalg.eigh(Xc.T @ Xc / n)
    return Xc @ evecs / np.sqrt(evals), Y


def zero_balanced_weights(
    rng: np.random.Generator,
    d_in: int = D_IN,
    hidden: int = HIDDEN,
    d_out: int = D_OUT,
    sigma: float = SIGMA,
) -> tuple[np.ndarray, np.ndarray]:
    """$W_1 = R_r\\sqrt{S}V^\\top$, $W_2 = U\\sqrt{S}R_r^\\top$ from the SVD $USV^\\top$ of a product of
    two N(0, sigma^2) matrices, $\\sqrt S$ scaled by 1.15, $R$ a random orthogonal matrix."""
    R = np.linalg.svd(rng.normal(size=(hidden, hidden)))[0]
    A1 = rng.normal(0.0, sigma, (hidden, d_in))
    A2 = rng.normal(0.0, sigma, (d_out, hidden))
    U, s, Vt = np.linalg.svd(A2 @ A1, full_matrices=False)
    root = np.diag(np.sqrt(s) * 1.15)
    r = len(s)
    return R[:, :r] @ root @ Vt, U @ root @ R[:, :r].T


def task_loss(W: np.ndarray, X: np.ndarray, Y: np.ndarray) -> float:
    """Eq. (1) for the network function W: $\\tfrac12$ mean over examples of $\\lVert Wx - y\\rVert^2$."""
    return float(0.5 * ((X @ W.T - Y) ** 2).sum(axis=1).mean())


def forgetting_from_function(
    W_j: np.ndarray, W_k: np.ndarray, X_i: np.ndarray, Y_i: np.ndarray
) -> float:
    """$F_i = \\tfrac12(\\lVert W_k - \\Sigma^{yx}_i\\rVert^2 - \\lVert W_j - \\Sigma^{yx}_i\\rVert^2)$ (needs $\\Sigma^x_i = I$)."""
    S = Y_i.T @ X_i / len(X_i)
    return float(0.5 * (np.sum((W_k - S) ** 2) - np.sum((W_j - S) ** 2)))


def sequential_functions_flow(
    W1, W2, tasks, duration: float, *, tau: float = 1.0
) -> list[np.ndarray]:
    """Network functions $W_2W_1$ at the end of each task under gradient flow (Riccati, restarted)."""
    lam = cf.balance(W1, W2)
    lam0 = float(lam[0, 0])
    if not np.allclose(lam, lam0 * np.eye(len(lam)), atol=1e-10):
        raise ValueError("the start is not lambda-balanced (W2^T W2 - W1 W1^T != lambda I)")
    P, d_in, ends = cf.qqt(W1, W2), np.shape(W1)[1], []
    for X, Y in tasks:
        if not np.allclose(X.T @ X / len(X), np.eye(d_in), atol=1e-10):
            raise ValueError("the Riccati closed form needs whitened inputs")
        P = cf.riccati_qqt(P, Y.T @ X / len(X), lam0, duration, tau=tau)
        ends.append(P[d_in:, :d_in].copy())
    return ends


def sequential_functions_gd(W1, W2, tasks, steps: int, lr: float) -> list[np.ndarray]:
    """The same under gradient descent (lr, ``steps`` per task), their ``LinearNetwork`` update:
    $W_1 \\mathrel{-}= \\mathrm{lr}\\,W_2^\\top E X^\\top/n$, $W_2 \\mathrel{-}= \\mathrm{lr}\\,E X^\\top W_1^\\top/n$,
    $E = W_2W_1X - Y$ (columns are examples), both from the same old weights."""
    W1, W2, ends = np.array(W1, float), np.array(W2, float), []
    for X, Y in tasks:
        Xc, Yc, n = X.T, Y.T, len(X)
        for _ in range(steps):
            E = W2 @ W1 @ Xc - Yc
            W1, W2 = W1 - lr * W2.T @ E @ Xc.T / n, W2 - lr * E @ Xc.T @ W1.T / n
        ends.append(W2 @ W1)
    return ends


def forgetting_case(seed: int, duration: float, lr: float) -> dict:
    """Three tasks i, j, k learned in that order from a zero-balanced start (seed: numpy
    ``default_rng``; tasks drawn first, then the start); each task lasts ``duration`` (in tau),
    i.e. ``duration / lr`` GD steps. Returns inputs and, for the flow and for GD, every task's
    loss at the end of every task and $F_i(T_j, T_k)$ at the end of $T_k$."""
    rng = np.random.default_rng(seed)
    tasks = [regression_task(rng) for _ in range(3)]
    W1, W2 = zero_balanced_weights(rng)
    steps = round(duration / lr)
    case = {
        "seed": seed,
        "duration": duration,
        "lr": lr,
        "steps_per_task": steps,
        "X": [X.tolist() for X, _ in tasks],
        "Y": [Y.tolist() for _, Y in tasks],
        "W1": W1.tolist(),
        "W2": W2.tolist(),
    }
    for name, ends in (
        ("flow", sequential_functions_flow(W1, W2, tasks, duration)),
        ("gd", sequential_functions_gd(W1, W2, tasks, steps, lr)),
    ):
        X_i, Y_i = tasks[0]
        case[name] = {
            # loss[a][b]: loss of task a at the end of task b
            "loss": [[task_loss(W, X, Y) for W in ends] for X, Y in tasks],
            "F_i(T_j,T_k)": forgetting_from_function(ends[1], ends[2], X_i, Y_i),
        }
    return case


#: the recorded cases: (seed, duration per task in tau, GD learning rate). (0.4, 0.001) is
#: forgetting.py's own setting (400 steps of lr 0.001); (40, 0.1) is empiricalTest.py's
#: (400 steps of lr 0.1), long enough that every task is learned to its least-squares map.
CASES = [
    (seed, duration, lr)
    for seed in (0, 1, 2)
    for duration, lr in ((0.4, 0.001), (5.0, 0.01), (40.0, 0.1))
]


def write_cases(path) -> None:
    """Write :data:`CASES` with inputs and results as JSON (``tests/reference/data/forgetting_cases.json``)."""
    import json

    lines = [json.dumps(forgetting_case(*c)) for c in CASES]  # one case per line
    with open(path, "w") as f:
        f.write("[\n" + ",\n".join(lines) + "\n]\n")
