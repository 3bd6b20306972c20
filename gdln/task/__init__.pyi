from ._examples import ExampleSet as ExampleSet
from ._problem import Problem as Problem
from ._task import Context as Context
from ._task import Dataset as Dataset
from ._task import Task as Task
