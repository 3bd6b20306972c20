from ._compare import SCHEDULE_FILES as SCHEDULE_FILES
from ._compare import ScheduleComparison as ScheduleComparison
from ._engine import ROUTES as ROUTES
from ._engine import run_schedule as run_schedule
from ._measures import ScheduleMeasures as ScheduleMeasures
from ._result import PhaseRun as PhaseRun
from ._result import ScheduleResult as ScheduleResult
