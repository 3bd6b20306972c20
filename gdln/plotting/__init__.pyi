from ._figures import PLOT_FORMATS as PLOT_FORMATS
from ._figures import PlotError as PlotError
from ._figures import plot_result as plot_result
from ._figures import plot_spectrum as plot_spectrum
from ._figures import plot_table as plot_table
from ._figures import save_plot as save_plot
from ._relu import plot_relu_theory as plot_relu_theory
