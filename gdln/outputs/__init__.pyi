from ._atomic import atomic_file as atomic_file
from ._atomic import atomic_folder as atomic_folder
from ._atomic import check_file as check_file
from ._atomic import check_folder as check_folder
from ._errors import OutputError as OutputError
from ._errors import OutputExistsError as OutputExistsError
from ._temporary import remove_stale as remove_stale
