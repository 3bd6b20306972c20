r"""A fully connected ResNet with stochastic depth in torch (Eq. 1 / Eq. 3 of Hayou & Ayed).

$$y_0 = W_0x,\qquad y_l = y_{l-1} + \kappa\,\tilde\delta_l\,W_l\,\phi(y_{l-1}),\qquad
y_{\rm out}=W_{\rm out}y_L,$$

with $\phi$ = ReLU or identity, $\kappa = 1$ (plain) or $1/\sqrt L$ (Stable ResNet), and
$\tilde\delta_l$ the gate of block $l$ under the unscaled or inverted mask convention of
:data:`gdln.sd.MASK_CONVENTIONS`. One mask is drawn per forward pass in
training mode and shared by the batch (a mask per step, as in SD training); evaluation
mode uses the mean gate. Losses follow Eq. (1) of Saxe et al. 2022:
$\mathcal L=\frac1{2n}\sum_i\|y_i-\hat y_i\|^2$, whose Hessian in the output is $H=I/n$
per sample (the paper's $\|z-z'\|^2$ has $H=2I$).

Weights are He-initialised, $W_{ij}\sim\mathcal N(0,2/N)$ for ReLU and $\mathcal N(0,1/N)$
for the linear network, times ``init_gain``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._bounded._limits import beyond, current_limits
from .._device import resolve_device
from ._chain import chain_scale
from ._checks import StochasticDepthError, check_count, check_held, check_probabilities
from ._masks import mask_convention

__all__ = [
    "GradientGrowthEstimate",
    "SDResNet",
    "average_network_loss",
    "layer_sensitivities",
    "measure_gradient_growth",
    "sd_loss_monte_carlo",
    "sd_penalty",
    "train_sd",
]


class SDResNet(torch.nn.Module):
    r"""Fully connected ResNet whose residual blocks carry stochastic-depth gates.

    Parameters
    ----------
    d_in, width, d_out
        Input, hidden and output sizes.
    L
        Number of residual blocks.
    p
        ``(L,)`` survival probabilities (e.g. from
        :func:`gdln.sd.survival_probabilities`).
    activation
        ``"relu"`` or ``"linear"``.
    scaling
        ``"plain"`` (Eq. 1) or ``"stable"`` ($1/\sqrt L$, Eq. 3) or a number.
    mask
        ``"unscaled"`` or ``"inverted"``.
    io_layers
        With ``False`` there is no $W_0$ / $W_{\rm out}$ ($y_0=x$, $y_{\rm out}=y_L$; needs
        ``d_in == width == d_out``): the linear network is then the product of
        $(I+\kappa\tilde\delta_lW_l)$ whose decoupled modes are the scalar chains of
        :func:`gdln.sd.expected_chain`.
    init_gain
        Multiplies the initial standard deviation.
    generator
        Seeds the initial weights (drawn on the generator's device).
    device
        Where parameters and buffers live: ``None``/``"auto"`` (CUDA when present, else
        the CPU; the rule of :func:`gdln.simulate`), ``"cpu"`` or ``"cuda[:k]"``. Give
        ``"cpu"`` to keep the model beside CPU tensors on a machine with CUDA. The same
        as ``.to(device)`` afterwards: the weights are drawn on the generator's device.
    dtype
        The parameters' floating-point type.

    Raises
    ------
    StochasticDepthError
        ``p``, ``activation``, ``scaling`` or ``mask`` is malformed, or ``io_layers`` is
        false with unequal sizes.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth",
    Eq. (1) (the stochastic-depth ResNet) and Eq. (3) (the Stable scaling).
    """

    p: torch.Tensor  # survival probabilities, a buffer (moves with .to(device))

    def __init__(
        self,
        d_in: int,
        width: int,
        d_out: int,
        L: int,
        p: Sequence[float] | np.ndarray,
        *,
        activation: str = "relu",
        scaling: str | float = "plain",
        mask: str = "unscaled",
        io_layers: bool = True,
        init_gain: float = 1.0,
        dtype: torch.dtype = torch.float32,
        generator: torch.Generator | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        super().__init__()
        sizes = {
            k: check_count(k, v)
            for k, v in (("d_in", d_in), ("width", width), ("d_out", d_out), ("L", L))
        }
        check_held(
            f"an SDResNet of width {width} and {L} blocks",
            sizes["L"] * sizes["width"] ** 2 + sizes["width"] * (sizes["d_in"] + sizes["d_out"]),
            "width",
        )
        dev = resolve_device(device, lambda m: StochasticDepthError(m, key="device"))
        if activation not in ("relu", "linear"):
            raise StochasticDepthError(
                f"activation = {activation!r}; expected 'relu' or 'linear'", key="activation"
            )
        conv = mask_convention(mask)
        p_arr = check_probabilities(p, positive=conv.inverted)
        if p_arr.shape != (L,):
            raise StochasticDepthError(
                f"p has shape {p_arr.shape}; expected ({L},), one survival probability per block",
                key="p",
            )
        if not io_layers and not d_in == width == d_out:
            raise StochasticDepthError(
                f"io_layers=False needs d_in == width == d_out, got {d_in}, {width}, {d_out}",
                key="io_layers",
            )
        self.L, self.width, self.activation, self.mask = L, width, activation, conv.name
        self.kappa = chain_scale(scaling, L)
        self.io_layers = io_layers
        # weights are drawn on the generator's device (the same numbers on every device)
        # and moved to ``device``
        draw = generator.device if generator is not None else torch.device("cpu")
        target = dev
        self.register_buffer("p", torch.tensor(p_arr, dtype=dtype, device=target))
        var = (2.0 if activation == "relu" else 1.0) / width
        std = init_gain * float(np.sqrt(var))

        def normal(*shape: int, scale: float) -> torch.nn.Parameter:
            w = torch.randn(*shape, generator=generator, dtype=dtype, device=draw) * scale
            return torch.nn.Parameter(w.to(target))

        self.blocks = normal(L, width, width, scale=std)  # blocks[l] is W_{l+1}
        if io_layers:
            self.w_in = normal(width, d_in, scale=init_gain * float(np.sqrt(1.0 / d_in)))
            self.w_out = normal(d_out, width, scale=init_gain * float(np.sqrt(1.0 / width)))

    # -- gates ---------------------------------------------------------------------------
    def sample_gates(
        self, n: int | None = None, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        r"""Draw gate multipliers $\tilde\delta$ (one mask, or ``n``).

        Parameters
        ----------
        n
            The number of masks; ``None`` for one.
        generator
            Random generator (default: torch's global one); the draws are made on its
            device and moved to the model's.

        Returns
        -------
        torch.Tensor
            ``(L,)`` or ``(n, L)``.
        """
        shape = (self.L,) if n is None else (n, self.L)
        draw = generator.device if generator is not None else self.p.device
        u = torch.rand(shape, generator=generator, dtype=self.p.dtype, device=draw)
        u = u.to(self.p.device)
        delta = (u < self.p).to(self.p.dtype)
        return delta if self.mask == "unscaled" else delta / self.p

    def mean_gates(self) -> torch.Tensor:
        r"""$\mathbb E\tilde\delta$: $p$ (unscaled) or $\mathbf 1$ (inverted): the test network.

        Returns
        -------
        torch.Tensor
            ``(L,)``.
        """
        return self.p.clone() if self.mask == "unscaled" else torch.ones_like(self.p)

    def gate_variance(self) -> torch.Tensor:
        r"""$\mathrm{Var}\,\tilde\delta$: $p(1-p)$ (unscaled) or $(1-p)/p$ (inverted).

        Returns
        -------
        torch.Tensor
            ``(L,)``.
        """
        p = self.p
        return p * (1 - p) if self.mask == "unscaled" else (1 - p) / p

    # -- forward -------------------------------------------------------------------------
    def forward(
        self,
        x: torch.Tensor,
        gates: torch.Tensor | None = None,
        *,
        return_hidden: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        r"""The network's output (Eq. 1 of Hayou & Ayed).

        Parameters
        ----------
        x
            ``(batch, d_in)`` inputs, on the model's device.
        gates
            ``(L,)`` multipliers shared by the batch, ``(batch, L)`` one mask per row, or
            ``None``: a fresh mask in training mode, the mean gates in eval mode.
        return_hidden
            Also return the hidden states.

        Returns
        -------
        torch.Tensor or tuple
            ``(batch, d_out)``; with ``return_hidden``, ``(output, [y_0, ..., y_L])``.
        """
        if gates is None:
            gates = self.sample_gates() if self.training else self.mean_gates()
        gates = gates.to(x.dtype)
        y = x @ self.w_in.T if self.io_layers else x
        hidden = [y]
        for ell in range(self.L):
            w = self.blocks[ell]
            g = gates[..., ell : ell + 1] if gates.ndim == 2 else gates[ell]
            z = torch.relu(y) if self.activation == "relu" else y
            y = y + self.kappa * g * (z @ w.T)
            hidden.append(y)
        out = y @ self.w_out.T if self.io_layers else y
        return (out, hidden) if return_hidden else out


def _mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((out - y) ** 2).sum(dim=-1).mean()


def average_network_loss(model: SDResNet, x: torch.Tensor, y: torch.Tensor) -> float:
    r"""$\bar{\mathcal L}$: the loss of the average network (gates at their mean), Eq. (4).

    Parameters
    ----------
    model
        The network.
    x, y
        Inputs ``(n, d_in)`` and targets ``(n, d_out)``.

    Returns
    -------
    float
        $\frac1{2n}\sum_i\lVert y_{\rm out}(x_i)-y_i\rVert^2$ with every gate at its mean.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eq. (4).
    """
    with torch.no_grad():
        return float(_mse(model(x, model.mean_gates()), y))


def sd_loss_monte_carlo(
    model: SDResNet,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    masks: int,
    generator: torch.Generator | None = None,
) -> tuple[float, float]:
    r"""$\mathbb E_\delta[\mathcal L]$ by Monte Carlo over ``masks`` masks.

    Parameters
    ----------
    model
        The network.
    x, y
        Inputs ``(n, d_in)`` and targets ``(n, d_out)``.
    masks
        Number of masks drawn.
    generator
        Random generator of the masks.

    Returns
    -------
    (float, float)
        The mean of the masked loss $\frac1{2n}\sum\lVert\cdot\rVert^2$ and its
        standard error.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eq. (1).
    """
    masks = check_count("masks", masks)
    if masks > current_limits().steps:
        raise StochasticDepthError(beyond("steps", f"masks={masks} forward passes"), key="masks")
    vals = []
    with torch.no_grad():
        for _ in range(masks):
            vals.append(float(_mse(model(x, model.sample_gates(generator=generator)), y)))
    v = np.asarray(vals)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0


def _output_gate_jacobian(model: SDResNet, x: torch.Tensor) -> torch.Tensor:
    """d y_out / d gate_l at gates = 1, shape (L, batch, d_out), by forward-mode AD."""
    ones = torch.ones(model.L, dtype=x.dtype, device=x.device)

    def f(g: torch.Tensor) -> torch.Tensor:
        return model(x, g)

    eye = torch.eye(model.L, dtype=x.dtype, device=x.device)
    return torch.func.vmap(lambda v: torch.func.jvp(f, (ones,), (v,))[1])(eye)


def sd_penalty(model: SDResNet, x: torch.Tensor) -> tuple[float, np.ndarray]:
    r"""The regulariser of Eq. (4)/(6) of Hayou & Ayed for the loss $\frac1{2n}\sum\|\cdot\|^2$.

    $\mathrm{pen}=\frac12\sum_l\mathrm{Var}[\tilde\delta_l]\,g_l$ with
    $g_l = \frac1n\sum_i\|\partial y_{\rm out}(x_i)/
    \partial\tilde\delta_l|_{\tilde\delta=\mathbf 1}\|^2$
    (Gauss–Newton part $J^THJ$ only, as in Eq. 5; $H=I$). For the unscaled mask and
    Stable scaling this is the paper's $\frac1{2L}\sum_lp_l(1-p_l)g_l^{\rm paper}$ with
    $g^{\rm paper}_l = 2L\,g_l$ (their loss $\|\cdot\|^2$ and their $\zeta_l$ without
    $1/\sqrt L$).

    Parameters
    ----------
    model
        The network.
    x
        Inputs ``(n, d_in)``.

    Returns
    -------
    (float, numpy.ndarray)
        The penalty and ``(L,)`` $g_l$.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eqs. (4)-(6).
    """
    with torch.no_grad():
        jac = _output_gate_jacobian(model, x)
    g = (jac**2).sum(dim=-1).mean(dim=-1)
    pen = 0.5 * float((model.gate_variance() * g).sum())
    return pen, g.cpu().numpy().astype(float)


def layer_sensitivities(model: SDResNet, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    r"""SenseMode step 1 (Sec. 5 of Hayou & Ayed).

    $S_l=\partial\mathcal L/\partial\delta_l|_{\delta=\mathbf 1}$, the first-order drop of
    the loss when block $l$ is removed.

    Parameters
    ----------
    model
        The network.
    x, y
        Inputs ``(n, d_in)`` and targets ``(n, d_out)``.

    Returns
    -------
    numpy.ndarray
        ``(L,)`` $S_l$.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Sec. 5 (SenseMode).
    """
    gates = torch.ones(model.L, dtype=x.dtype, device=x.device, requires_grad=True)
    loss = _mse(model(x, gates), y)
    (grad,) = torch.autograd.grad(loss, gates)
    return grad.detach().cpu().numpy().astype(float)


@dataclass(frozen=True)
class GradientGrowthEstimate:
    r"""Monte Carlo estimate of $\tilde q_l$ (Prop. 1) with standard errors.

    Parameters
    ----------
    q
        ``(L+1,)`` mean of $\|\nabla_{y_l}\mathcal L\|^2/\|\nabla_{y_L}\mathcal L\|^2$.
    stderr
        ``(L+1,)`` standard error of each mean.
    samples
        Number of Monte Carlo samples (fresh weights, mask and data each).

    Raises
    ------
    ValueError
        ``q`` and ``stderr`` differ in shape, or ``samples < 2``.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Proposition 1.
    """

    q: np.ndarray
    stderr: np.ndarray
    samples: int

    def __post_init__(self) -> None:
        if self.q.shape != self.stderr.shape or self.samples < 2:
            raise ValueError("q and stderr must match and samples must be >= 2")


def measure_gradient_growth(
    p: Sequence[float] | np.ndarray | None,
    *,
    L: int,
    width: int,
    samples: int,
    scaling: str = "plain",
    d_out: int = 1,
    seed: int = 0,
) -> GradientGrowthEstimate:
    r"""Estimate $\tilde q_l$ of Prop. 1 of Hayou & Ayed at initialisation by Monte Carlo.

    Each sample draws He-initialised weights, a mask (all ones when ``p`` is None), an
    input $x\sim\mathcal N(0,I)$ and a target $z\sim\mathcal N(0,I)$, and back-propagates
    $\frac12\|y_{\rm out}-z\|^2$ with a ``d_out``-dimensional output. The output should be
    narrow ($d_{\rm out}\ll N$): the infinite-width derivation assumes the backward pass
    independent of the forward weights, and a wide read-out $W_{\rm out}^TW_{\rm out}y_L$
    correlates $\nabla_{y_L}$ with the last blocks (with $d_{\rm out}=N$ we measured about
    2.9 per layer instead of 2).

    Parameters
    ----------
    p
        ``(L,)`` survival probabilities, or ``None`` for the network without gates.
    L
        Number of residual blocks.
    width
        Hidden width $N$.
    samples
        Number of Monte Carlo samples.
    scaling
        ``"plain"`` or ``"stable"`` (Eq. 3).
    d_out
        Output size (keep it small, see above).
    seed
        Seed of the weights, masks and data.

    Returns
    -------
    GradientGrowthEstimate
        ``(L+1,)`` means of $\tilde q_l$ and their standard errors.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Proposition 1.
    """
    samples, L = check_count("samples", samples, least=2), check_count("L", L)
    check_held(f"{samples} samples of {L} blocks", samples * (L + 1), "samples")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise StochasticDepthError(
            f"seed = {seed!r}; expected an integer in [0, 2**63)", key="seed"
        )
    p_arr = np.ones(L) if p is None else np.asarray(p, dtype=float)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ratios = np.empty((samples, L + 1))
    for i in range(samples):
        model = SDResNet(
            width, width, d_out, L, p_arr, scaling=scaling, generator=gen, device="cpu"
        )
        x = torch.randn(1, width, generator=gen, device=gen.device)
        z = torch.randn(1, d_out, generator=gen, device=gen.device)
        out, hidden = model(x, model.sample_gates(generator=gen), return_hidden=True)
        grads = torch.autograd.grad(_mse(out, z), hidden)
        norms = np.array([float((g**2).sum()) for g in grads])
        ratios[i] = norms / norms[-1]
    return GradientGrowthEstimate(
        q=ratios.mean(axis=0),
        stderr=ratios.std(axis=0, ddof=1) / np.sqrt(samples),
        samples=int(samples),
    )


def train_sd(
    model: SDResNet,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    lr: float,
    batch_size: int | None = None,
    momentum: float = 0.0,
    clip: float | None = None,
    generator: torch.Generator | None = None,
    record_every: int = 0,
    x_test: torch.Tensor | None = None,
    y_test: torch.Tensor | None = None,
) -> dict[str, list[float]]:
    r"""Train with SGD and a fresh SD mask every step; the loss is $\frac1{2n}\sum\|\cdot\|^2$.

    Full batch when ``batch_size`` is None (then plain GD is the Euler step
    $\mathrm dt=\mathrm{lr}$ of gradient flow on the expected loss, averaged over masks).
    ``clip`` rescales each step's gradient to Euclidean norm at most ``clip`` (over all
    parameters together). Every ``record_every`` steps records the masked training loss,
    the average-network training loss and (if given) the average-network test loss.

    Parameters
    ----------
    model
        The network.
    x, y
        Inputs ``(n, d_in)`` and targets ``(n, d_out)``.
    steps
        Number of updates.
    lr
        Learning rate.
    batch_size
        Minibatch size, or ``None`` for the full batch.
    momentum
        Heavy-ball momentum of SGD.
    clip
        Largest gradient norm per step, or ``None``.
    generator
        Random generator of the masks and minibatches.
    record_every
        Record every this many steps; 0 records nothing.
    x_test, y_test
        Test data for the ``"test"`` record.

    Returns
    -------
    dict
        ``"step"``, ``"train_loss"`` (masked), ``"average_loss"`` (average network) and
        ``"test"`` (average network on the test data; empty without it): lists of
        floats, one entry per record.

    Raises
    ------
    StochasticDepthError
        ``steps``, ``lr`` or ``clip`` is not positive.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eqs. (1) and (4).
    """
    if steps < 1 or lr <= 0:
        raise StochasticDepthError(
            f"steps = {steps!r}, lr = {lr!r}; expected a positive step count and learning rate",
            key="steps",
        )
    if clip is not None and not clip > 0:
        raise StochasticDepthError(
            f"clip = {clip!r}; expected a positive maximum gradient norm or None", key="clip"
        )
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    n = x.shape[0]
    hist: dict[str, list[float]] = {"step": [], "train_loss": [], "average_loss": [], "test": []}
    for k in range(1, steps + 1):
        if batch_size is None or batch_size >= n:
            xb, yb = x, y
        else:
            draw = generator.device if generator is not None else x.device
            idx = torch.randint(0, n, (batch_size,), generator=generator, device=draw)
            idx = idx.to(x.device)
            xb, yb = x[idx], y[idx]
        loss = _mse(model(xb, model.sample_gates(generator=generator)), yb)
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if record_every and (k % record_every == 0 or k == steps):
            hist["step"].append(k)
            hist["train_loss"].append(float(loss.detach()))
            hist["average_loss"].append(average_network_loss(model, x, y))
            if x_test is not None and y_test is not None:
                hist["test"].append(average_network_loss(model, x_test, y_test))
    return hist
