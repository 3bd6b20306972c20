from ._engine import ROUTES as ROUTES
from ._engine import run_schedule as run_schedule
from ._engine import solve_schedule as solve_schedule
from ._measures import ScheduleMeasures as ScheduleMeasures
from ._result import PhaseRun as PhaseRun
from ._result import ScheduleResult as ScheduleResult
from ._simulate import simulate_schedule as simulate_schedule
