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

The ``solve:`` and ``simulate:`` sections are made from the declarations of the settings
(:class:`gdln.settings.Settings`), so that their keys, choices, defaults and meanings are
those every command and function reads.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

from ..settings._declared import SECTIONS, declarations
from ..settings._spellings import DEPRECATED_KEYS

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
    document = copy.deepcopy(_read())
    document["properties"].update(_setting_sections())
    return document


def _setting_sections() -> dict[str, Any]:
    """The ``solve:`` and ``simulate:`` sections, from the declared settings."""
    sections: dict[str, Any] = {
        name: {
            "type": "object",
            "description": f"Settings of this file (see gdln.settings); {name}: section.",
            "additionalProperties": False,
            "properties": {},
        }
        for name in SECTIONS
    }
    for declaration in declarations().values():
        if declaration.file_key is None:
            continue
        section, key = declaration.file_key.split(".")
        entry: dict[str, Any] = {"description": declaration.meaning}
        if declaration.choices is not None:
            entry["enum"] = list(declaration.choices)
        elif declaration.expected == "true or false":
            entry["type"] = "boolean"
        else:
            entry["$ref"] = "#/$defs/expression"
        entry["default"] = declaration.shown
        sections[section]["properties"][key] = entry
    for old, new in DEPRECATED_KEYS.items():
        section, key = old.split(".")
        meaning = declarations()[new].meaning
        sections[section]["properties"][key] = {
            "$ref": "#/$defs/expression",
            "deprecated": True,
            "description": f"The key of an earlier release for {declarations()[new].file_key}: "
            f"{meaning}",
        }
    return sections
