from ._result import HOLDS_FOR as HOLDS_FOR
from ._result import Stage as Stage
from ._result import Timescales as Timescales
from ._result import format_timescales as format_timescales
from ._timescales import timescales as timescales
