from ._classes import GatedGroup as GatedGroup
from ._extract import THRESHOLD as THRESHOLD
from ._extract import Extraction as Extraction
from ._extract import extract as extract
