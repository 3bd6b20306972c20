from ._report import format_derivation as format_derivation
from ._report import format_paths as format_paths
from ._report import format_statistics as format_statistics
