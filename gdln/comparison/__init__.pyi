from ._compare import CompareResult as CompareResult
from ._compare import compare as compare
from ._compare import initial_mode_strengths as initial_mode_strengths
from ._figures import save_figure as save_figure
