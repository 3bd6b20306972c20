"""The JSON Schema of graph, task and dataset files, shipped beside this module.

The schema (JSON Schema draft 2020-12) describes the same format that :func:`gdln.load`
reads: every key, its type, its default and its limits. Editors that speak the YAML
language server complete and check a graph file that starts with::

    # yaml-language-server: $schema=gdln.schema.json

after ``gdln schema > gdln.schema.json``. The loader checks more than a schema can say
(that a node named by an edge exists, that sizes match, that probabilities sum to 1); the
schema checks nothing that the loader lets through, except the unknown keys that the
loader ignores inside ``checks``, ``datasets`` and ``task`` entries and the empty (null)
sections that it reads as empty.

>>> schema()["$schema"]
'https://json-schema.org/draft/2020-12/schema'
>>> sorted(schema()["$defs"]["node"]["required"])
['id', 'size']
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

__all__ = ["schema"]


@functools.cache
def _read() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("schema.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of gdln graph, task and dataset files.

    Returns
    -------
    dict
        A fresh copy of the schema document, safe to modify; ``json.dumps`` writes it out.

    See Also
    --------
    gdln.load : reads the files this schema describes, with the checks a schema cannot make.

    Examples
    --------
    >>> sorted(schema()["properties"])[:4]
    ['checks', 'datasets', 'derived', 'description']
    """
    return copy.deepcopy(_read())
