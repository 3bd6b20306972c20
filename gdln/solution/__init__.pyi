from ._batch import solve_batch as solve_batch
from ._bounds import check_solve_settings as check_solve_settings
from ._flow import full_flow as full_flow
from ._format import format_trajectory as format_trajectory
from ._full import solve_full as solve_full
from ._solve import solve as solve
from ._trajectory import Trajectory as Trajectory
from ._trajectory import time_to_half_loss as time_to_half_loss
