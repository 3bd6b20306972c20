"""gdln: the path-based theory of gated networks.

A Gated Deep Linear Network (GDLN) is an architecture graph whose nodes and edges carry
gates (Saxe, Sodhani & Lewallen 2022). gdln reads such graphs and their tasks from files,
enumerates paths, derives the path statistics and the exact reduced learning dynamics
symbolically, solves them numerically, and checks them against simulations.

The data flow, one module per stage: graph file (:func:`load`) -> paths
(:func:`enumerate_paths`) -> path statistics (:func:`path_statistics`) -> reduction
(:func:`reduce`) -> numeric solution (:func:`solve`) | simulation of the full network
(:func:`simulate`) -> comparison (:func:`compare`).
"""

from importlib.metadata import PackageNotFoundError, version

from ._bases import Modes as Modes
from ._compare import CompareResult as CompareResult
from ._compare import compare as compare
from ._errors import GdlnError as GdlnError
from ._errors import GraphSpecError as GraphSpecError
from ._errors import NotDiagonalizableError as NotDiagonalizableError
from ._errors import TaskSpecError as TaskSpecError
from ._examples import ExampleSet as ExampleSet
from ._expr import evaluate as evaluate
from ._full import full_flow as full_flow
from ._full import solve_full as solve_full
from ._graphfile import Problem as Problem
from ._graphfile import load as load
from ._graphfile import parse_params as parse_params
from ._graphfile import read_graph as read_graph
from ._paths import Path as Path
from ._paths import enumerate_paths as enumerate_paths
from ._paths import input_nodes as input_nodes
from ._paths import output_nodes as output_nodes
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
from ._simulate import INITS as INITS
from ._simulate import SimulationDivergedError as SimulationDivergedError
from ._simulate import SimulationSpecError as SimulationSpecError
from ._simulate import initial_weights as initial_weights
from ._simulate import simulate as simulate
from ._solve import solve as solve
from ._statistics import PathStatistics as PathStatistics
from ._statistics import path_statistics as path_statistics
from ._task import Context as Context
from ._task import Dataset as Dataset
from ._task import Task as Task
from ._trajectory import Trajectory as Trajectory
from ._trajectory import format_trajectory as format_trajectory

try:
    __version__ = version("gdln")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
