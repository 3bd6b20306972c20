from ._result import Stage as Stage
from ._result import Timescales as Timescales
from ._result import format_timescales as format_timescales
from ._routes import ROUTES as ROUTES
from ._timescales import timescales as timescales
