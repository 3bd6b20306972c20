"""gdln: the path-based theory of gated networks.

A Gated Deep Linear Network (GDLN) is an architecture graph whose nodes and edges carry
gates (Saxe, Sodhani & Lewallen 2022). gdln reads such graphs and their tasks from files,
enumerates paths, derives the path statistics and the exact reduced learning dynamics
symbolically, solves them numerically, and checks them against simulations.

The data flow, one module per stage: graph file (:func:`load`) -> paths
(:func:`enumerate_paths`) -> path statistics (:func:`path_statistics`) -> reduction
(:func:`reduce`) -> numeric solution (:func:`solve`) | simulation of the full network
(:func:`simulate`) -> comparison (:func:`compare`). Tasks with independent random gates
(stochastic depth) and too many paths to list take the moment route
(:func:`expected_dynamics`), which :func:`solve` also accepts.

The same path view, applied further: deep gated networks and their path kernels
(:func:`make_dgn`, :func:`neural_path_kernel`, :func:`path_gram`), stochastic depth as
Bernoulli gating of residual blocks (:func:`expected_linear_resnet`), and sweeps
(:func:`run_sweep`).
"""

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from ._bases import Modes as Modes
from ._errors import GdlnError as GdlnError
from ._errors import GraphSpecError as GraphSpecError
from ._errors import NotDiagonalizableError as NotDiagonalizableError
from ._errors import TaskSpecError as TaskSpecError
from ._errors import TooManyPathsError as TooManyPathsError
from ._examples import ExampleSet as ExampleSet
from ._expr import ExpressionError as ExpressionError
from ._expr import evaluate as evaluate
from ._figures import save_figure as save_figure
from ._full import full_flow as full_flow
from ._full import solve_full as solve_full
from ._graphfile import Problem as Problem
from ._graphfile import load as load
from ._graphfile import parse_params as parse_params
from ._graphfile import read_graph as read_graph
from ._moments import ExpectedDynamics as ExpectedDynamics
from ._moments import expected_dynamics as expected_dynamics
from ._paths import Path as Path
from ._paths import PathCounts as PathCounts
from ._paths import enumerate_paths as enumerate_paths
from ._paths import input_nodes as input_nodes
from ._paths import output_nodes as output_nodes
from ._paths import path_counts as path_counts
from ._paths import paths_ending_at as paths_ending_at
from ._paths import paths_through as paths_through
from ._paths import source_subpath as source_subpath
from ._paths import target_subpath as target_subpath
from ._reduction import LUMPINGS as LUMPINGS
from ._reduction import ReducedSystem as ReducedSystem
from ._reduction import Reduction as Reduction
from ._reduction import reduce as reduce
from ._report import format_derivation as format_derivation
from ._report import format_paths as format_paths
from ._report import format_statistics as format_statistics
from ._sd_theory import DepthConcentration as DepthConcentration
from ._sd_theory import RegulariserComparison as RegulariserComparison
from ._sd_theory import bennett_u as bennett_u
from ._sd_theory import bennett_u_inverse as bennett_u_inverse
from ._sd_theory import chain_regulariser as chain_regulariser
from ._sd_theory import chain_sensitivities as chain_sensitivities
from ._sd_theory import depth_concentration as depth_concentration
from ._sd_theory import gradient_growth as gradient_growth
from ._sd_theory import growth_rate as growth_rate
from ._sd_theory import lindeberg_ratio as lindeberg_ratio
from ._sd_theory import max_regularisation_mode as max_regularisation_mode
from ._sd_theory import shapiro_pvalues as shapiro_pvalues
from ._solve import solve as solve
from ._statistics import GateProduct as GateProduct
from ._statistics import PathStatistics as PathStatistics
from ._statistics import path_statistics as path_statistics
from ._stochastic_depth import MASK_CONVENTIONS as MASK_CONVENTIONS
from ._stochastic_depth import SURVIVAL_MODES as SURVIVAL_MODES
from ._stochastic_depth import ChainExpectation as ChainExpectation
from ._stochastic_depth import LinearResNetExpectation as LinearResNetExpectation
from ._stochastic_depth import MaskConvention as MaskConvention
from ._stochastic_depth import StochasticDepthError as StochasticDepthError
from ._stochastic_depth import SymbolicChain as SymbolicChain
from ._stochastic_depth import brute_force_chain as brute_force_chain
from ._stochastic_depth import chain_scale as chain_scale
from ._stochastic_depth import expected_chain as expected_chain
from ._stochastic_depth import expected_chain_symbolic as expected_chain_symbolic
from ._stochastic_depth import expected_gate_product as expected_gate_product
from ._stochastic_depth import expected_linear_resnet as expected_linear_resnet
from ._stochastic_depth import expected_path_loss as expected_path_loss
from ._stochastic_depth import expected_sd_flow as expected_sd_flow
from ._stochastic_depth import expected_sd_gd as expected_sd_gd
from ._stochastic_depth import mode_for_budget as mode_for_budget
from ._stochastic_depth import simulate_sd_gd as simulate_sd_gd
from ._stochastic_depth import survival_probabilities as survival_probabilities
from ._sweep import SweepError as SweepError
from ._sweep import SweepPointError as SweepPointError
from ._sweep import SweepSpecError as SweepSpecError
from ._sweep import SweepTableError as SweepTableError
from ._sweep import point_key as point_key
from ._sweep import read_table as read_table
from ._sweep import run_sweep as run_sweep
from ._task import Context as Context
from ._task import Dataset as Dataset
from ._task import Task as Task
from ._trajectory import Trajectory as Trajectory
from ._trajectory import format_trajectory as format_trajectory
from ._trajectory import time_to_half_loss as time_to_half_loss

# Objects that need torch are imported on first use, so that ``import gdln`` and the
# symbolic commands (``gdln derive``) do not pay torch's import time.
_LAZY = {
    "ACTIVATIONS": "_gram_paths",
    "CompareResult": "_compare",
    "ConvDGN": "_dgn",
    "DATASETS": "_dgn",
    "DGN": "_dgn",
    "DGNSpecError": "_dgn",
    "Gate": "_dgn",
    "GradientGrowthEstimate": "_sd_resnet",
    "INITS": "_simulate",
    "MODES": "_dgn",
    "MomentumCosines": "_gram_paths",
    "MonteCarloMean": "_dgn_theory",
    "NPK": "_npk",
    "NTK": "_ntk",
    "PathGram": "_gram_paths",
    "SDResNet": "_sd_resnet",
    "SimulationDivergedError": "_simulate",
    "SimulationSpecError": "_simulate",
    "TrainResult": "_dgn",
    "VarianceByDepth": "_dgn_theory",
    "average_network_loss": "_sd_resnet",
    "bernoulli_gates": "_dgn",
    "compare": "_compare",
    "conv_feature_gates": "_dgn",
    "conv_forward": "_dgn",
    "conv_path_features": "_npk",
    "conv_path_kernel": "_npk",
    "conv_path_value": "_npk",
    "dag_ntk": "_gram_paths",
    "dgn_forward": "_dgn",
    "draw_value_weights": "_dgn_theory",
    "eq3_eigenvalues": "_dgn_theory",
    "eq3_eigenvalues_symbolic": "_dgn_theory",
    "example_5_2_graph": "_gram_paths",
    "example_5_3_graph": "_gram_paths",
    "expected_ntk": "_dgn_theory",
    "expected_ntk_factor_symbolic": "_dgn_theory",
    "expected_path_inner_symbolic": "_dgn_theory",
    "feature_gates": "_dgn",
    "frg_overlap_mc": "_dgn_theory",
    "frg_overlap_symbolic": "_dgn_theory",
    "gram_variance_by_depth": "_dgn_theory",
    "initial_mode_strengths": "_compare",
    "initial_weights": "_simulate",
    "layer_sensitivities": "_sd_resnet",
    "make_conv_dgn": "_dgn",
    "make_dataset": "_dgn",
    "make_dgn": "_dgn",
    "measure_gradient_growth": "_sd_resnet",
    "minibatch_indices": "_simulate",
    "mlp_graph": "_gram_paths",
    "mlp_term_counts": "_gram_paths",
    "momentum_cosines": "_gram_paths",
    "neural_path_features": "_npk",
    "neural_path_kernel": "_npk",
    "neural_path_value": "_npk",
    "neural_tangent_kernel": "_ntk",
    "normalised_nu": "_npk",
    "npk_from_gates": "_npk",
    "num_paths": "_npk",
    "overlap": "_npk",
    "path_gram": "_gram_paths",
    "path_norm_symbolic": "_dgn_theory",
    "pre_subnetwork": "_gram_paths",
    "sample_value_ntk": "_dgn_theory",
    "scalar_layer_gram": "_gram_paths",
    "sd_loss_monte_carlo": "_sd_resnet",
    "sd_penalty": "_sd_resnet",
    "simulate": "_simulate",
    "term_counts": "_gram_paths",
    "train_dgn": "_dgn",
    "train_sd": "_sd_resnet",
    "value_ntk_layerwise": "_ntk",
    "value_ntk_samples": "_dgn_theory",
    "value_tangent_kernel": "_ntk",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gdln' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"gdln.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:
    from ._compare import CompareResult as CompareResult
    from ._compare import compare as compare
    from ._dgn import DATASETS as DATASETS
    from ._dgn import DGN as DGN
    from ._dgn import MODES as MODES
    from ._dgn import DGNSpecError as DGNSpecError
    from ._dgn import Gate as Gate
    from ._dgn import TrainResult as TrainResult
    from ._dgn import bernoulli_gates as bernoulli_gates
    from ._dgn import dgn_forward as dgn_forward
    from ._dgn import feature_gates as feature_gates
    from ._dgn import make_dataset as make_dataset
    from ._dgn import make_dgn as make_dgn
    from ._dgn import train_dgn as train_dgn
    from ._dgn_theory import MonteCarloMean as MonteCarloMean
    from ._dgn_theory import VarianceByDepth as VarianceByDepth
    from ._dgn_theory import eq3_eigenvalues as eq3_eigenvalues
    from ._dgn_theory import eq3_eigenvalues_symbolic as eq3_eigenvalues_symbolic
    from ._dgn_theory import expected_ntk as expected_ntk
    from ._dgn_theory import expected_ntk_factor_symbolic as expected_ntk_factor_symbolic
    from ._dgn_theory import expected_path_inner_symbolic as expected_path_inner_symbolic
    from ._dgn_theory import frg_overlap_mc as frg_overlap_mc
    from ._dgn_theory import frg_overlap_symbolic as frg_overlap_symbolic
    from ._dgn_theory import gram_variance_by_depth as gram_variance_by_depth
    from ._dgn_theory import path_norm_symbolic as path_norm_symbolic
    from ._dgn_theory import sample_value_ntk as sample_value_ntk
    from ._gram_paths import ACTIVATIONS as ACTIVATIONS
    from ._gram_paths import PathGram as PathGram
    from ._gram_paths import dag_ntk as dag_ntk
    from ._gram_paths import example_5_2_graph as example_5_2_graph
    from ._gram_paths import example_5_3_graph as example_5_3_graph
    from ._gram_paths import mlp_graph as mlp_graph
    from ._gram_paths import mlp_term_counts as mlp_term_counts
    from ._gram_paths import path_gram as path_gram
    from ._gram_paths import pre_subnetwork as pre_subnetwork
    from ._gram_paths import term_counts as term_counts
    from ._npk import NPK as NPK
    from ._npk import neural_path_features as neural_path_features
    from ._npk import neural_path_kernel as neural_path_kernel
    from ._npk import neural_path_value as neural_path_value
    from ._npk import normalised_nu as normalised_nu
    from ._npk import npk_from_gates as npk_from_gates
    from ._npk import num_paths as num_paths
    from ._npk import overlap as overlap
    from ._ntk import NTK as NTK
    from ._ntk import neural_tangent_kernel as neural_tangent_kernel
    from ._ntk import value_ntk_layerwise as value_ntk_layerwise
    from ._ntk import value_tangent_kernel as value_tangent_kernel
    from ._sd_resnet import GradientGrowthEstimate as GradientGrowthEstimate
    from ._sd_resnet import SDResNet as SDResNet
    from ._sd_resnet import average_network_loss as average_network_loss
    from ._sd_resnet import layer_sensitivities as layer_sensitivities
    from ._sd_resnet import measure_gradient_growth as measure_gradient_growth
    from ._sd_resnet import sd_loss_monte_carlo as sd_loss_monte_carlo
    from ._sd_resnet import sd_penalty as sd_penalty
    from ._sd_resnet import train_sd as train_sd
    from ._simulate import INITS as INITS
    from ._simulate import SimulationDivergedError as SimulationDivergedError
    from ._simulate import SimulationSpecError as SimulationSpecError
    from ._simulate import initial_weights as initial_weights
    from ._simulate import simulate as simulate


try:
    __version__ = version("gdln")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
    from ._compare import initial_mode_strengths as initial_mode_strengths
    from ._dgn import ConvDGN as ConvDGN
    from ._dgn import conv_feature_gates as conv_feature_gates
    from ._dgn import conv_forward as conv_forward
    from ._dgn import make_conv_dgn as make_conv_dgn
    from ._dgn_theory import draw_value_weights as draw_value_weights
    from ._dgn_theory import value_ntk_samples as value_ntk_samples
    from ._gram_paths import MomentumCosines as MomentumCosines
    from ._gram_paths import momentum_cosines as momentum_cosines
    from ._gram_paths import scalar_layer_gram as scalar_layer_gram
    from ._npk import conv_path_features as conv_path_features
    from ._npk import conv_path_kernel as conv_path_kernel
    from ._npk import conv_path_value as conv_path_value
    from ._simulate import minibatch_indices as minibatch_indices
