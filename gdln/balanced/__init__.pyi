from ._errors import BalancedSpecError as BalancedSpecError
from ._errors import NotBalancedError as NotBalancedError
from ._pathways import Pathway as Pathway
from ._pathways import balanced_pathways as balanced_pathways
from ._solve import solve_balanced as solve_balanced
from ._start import balanced_weights as balanced_weights
from ._weights import Balance as Balance
from ._weights import measure_balance as measure_balance
