from ._expressions import ExpressionError as ExpressionError
from ._expressions import evaluate as evaluate
from ._limits import Limits as Limits
from ._reader import load as load
from ._reader import parse_params as parse_params
from ._reader import read_graph as read_graph
from ._reader import with_task as with_task
from ._schema import schema as schema
