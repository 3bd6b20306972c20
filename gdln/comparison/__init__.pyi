from ._compare import CompareResult as CompareResult
from ._compare import compare as compare
from ._figures import save_figure as save_figure
from ._metrics import max_relative_gap as max_relative_gap
from ._modes import initial_mode_strengths as initial_mode_strengths
from ._modes import theory_edge_values as theory_edge_values
from ._summary import SeedSummary as SeedSummary
from ._summary import summarize_seeds as summarize_seeds
