from ..settings._choices import LUMPINGS as LUMPINGS
from ._bases import Modes as Modes
from ._closed_form import ClosedForm as ClosedForm
from ._moments import ExpectedDynamics as ExpectedDynamics
from ._moments import expected_dynamics as expected_dynamics
from ._reduce import reduce as reduce
from ._system import ReducedSystem as ReducedSystem
from ._system import Reduction as Reduction
