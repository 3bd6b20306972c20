from ._simulate import INITS as INITS
from ._simulate import SimulationDivergedError as SimulationDivergedError
from ._simulate import SimulationSpecError as SimulationSpecError
from ._simulate import initial_weights as initial_weights
from ._simulate import minibatch_indices as minibatch_indices
from ._simulate import simulate as simulate
from ._steps import log_spaced_steps as log_spaced_steps
