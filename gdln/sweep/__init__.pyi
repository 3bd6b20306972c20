from ._sweep import SweepError as SweepError
from ._sweep import SweepPointError as SweepPointError
from ._sweep import SweepSpecError as SweepSpecError
from ._sweep import SweepTableError as SweepTableError
from ._sweep import UnfinishedPoint as UnfinishedPoint
from ._sweep import point_key as point_key
from ._sweep import read_table as read_table
from ._sweep import run_sweep as run_sweep
