"""A catalog folder: one JSON file per entry, named after the entry's id (``tests/catalog/test_catalog_files.py``
holds every file to it). The GPU and model catalogs read their folders through these functions: the whole
folder's load, and a lookup by id that reads the one file named after the id. A card names one model and one
GPU: parsing every file of both catalogs for them cost a cold ``trainfit plan`` about 1 % of its CPU.

Pure Python: no torch import."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from trainfit.errors import CatalogError

T = TypeVar("T")


def read_json(package: str, file_name: str) -> Any:
    """The parsed JSON of ``file_name`` in the data package ``package``."""
    return json.loads(resources.files(package).joinpath(file_name).read_text())


def load_folder(package: str, load: Callable[[str], T], id_of: Callable[[T], str], what: str) -> dict[str, T]:
    """Every ``.json`` file of ``package`` through ``load`` (the catalog's cached parse of one file), by id, in
    file-name order; CatalogError naming ``what`` on a duplicate id."""
    out: dict[str, T] = {}
    for name in sorted(f.name for f in resources.files(package).iterdir() if f.name.endswith(".json")):
        entry = load(name)
        if id_of(entry) in out:
            raise CatalogError(f"{what}: duplicate id '{id_of(entry)}'")
        out[id_of(entry)] = entry
    return out


def load_own_file(load: Callable[[str], T], file_name: str, is_it: Callable[[T], bool]) -> T | None:
    """The entry ``load`` reads from ``file_name`` when that is a plain file name of the folder and ``is_it``
    holds for the entry (its id is the one asked for), else None: not a file of the folder (``../``, a dot
    file), no such file, an unreadable one (the whole folder's load says why), or an entry with another id."""
    if Path(file_name).name != file_name or file_name.startswith("."):
        return None
    try:
        entry = load(file_name)
    except (OSError, ValueError):
        return None
    return entry if is_it(entry) else None
