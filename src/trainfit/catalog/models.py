"""Model catalog: one JSON file per model under data/models/, each naming its source.

Resolution order for a card's ``model`` field:
1. an exact catalog id or alias;
2. a local ``config.json`` file or a model directory in Hugging Face layout;
3. the Hugging Face cache (offline), then the hub, through huggingface_hub when installed;
4. ``{params: N}``: a bare count, with the architecture assumed from a named reference shape.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from trainfit.catalog.files import load_folder, load_own_file, read_json
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.errors import CatalogError, ConfigError
from trainfit.spec.model import ModelSpec

_DATA = "trainfit.catalog.data.models"


@lru_cache(maxsize=None)
def _load(file_name: str) -> dict[str, Any]:
    """One catalog file, parsed once per process (the whole catalog's load and a lookup by id share it)."""
    return read_json(_DATA, file_name)


@lru_cache(maxsize=1)
def _entries() -> dict[str, dict[str, Any]]:
    return load_folder(_DATA, _load, lambda entry: entry["id"], "model catalog")


def entry_file_name(model_id: str) -> str:
    """The name of the catalog file that holds the entry whose id is ``model_id``: the id with ``/`` as ``_``
    (``tests/catalog/test_catalog_files.py`` holds every file to it)."""
    return model_id.replace("/", "_") + ".json"


@lru_cache(maxsize=256)
def _entry_by_id(model_id: str) -> dict[str, Any] | None:
    """The entry whose id is exactly ``model_id``, read from its own file alone, or None (an alias, a path, a
    repo the catalog does not hold). A card names one model: parsing every file of the catalog for it cost a
    cold ``trainfit plan`` about 1% of its CPU. Ids are unique and win over aliases (``_index``), so this is
    the entry (the same object) the index gives (``catalog.files``)."""
    return load_own_file(_load, entry_file_name(model_id),
                         lambda entry: isinstance(entry, dict) and entry.get("id") == model_id)


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    idx: dict[str, str] = {}
    for mid, entry in _entries().items():
        idx[mid] = mid
        for alias in entry.get("aliases", ()):
            idx.setdefault(alias, mid)
    return idx


def catalog_ids() -> list[str]:
    return sorted(_entries())


def catalog_entry(model_id: str) -> dict[str, Any]:
    """The raw catalog entry (id, aliases, source, verified, note, HF config), a deep copy: the parsed entry is
    cached and shared by every lookup (``_load``, ``_entries``, ``_entry_by_id``), so a caller that edits what it
    gets must not edit the catalog."""
    return copy.deepcopy(_shared_entry(model_id))


def _shared_entry(model_id: str) -> dict[str, Any]:
    """The cached entry itself (the same object every lookup gives): for this module's readers, which never edit
    it."""
    entry = _entry_by_id(model_id)
    if entry is not None:
        return entry
    idx = _index()
    if model_id not in idx:
        raise CatalogError(unknown_model_message(model_id))
    return _entries()[idx[model_id]]


def near_model_hint(name: str) -> str:
    """'; did you mean: A, B, C?' (the catalog's closest ids), else where to look."""
    names = list(_index())
    import difflib  # an unknown model's suggestions only: not imported by a plan

    near = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    if not near:
        low = name.lower()
        near = [n for n in names if low and low in n.lower()][:3]
    return f"; did you mean: {', '.join(near)}?" if near else "; see `trainfit models` for the catalog"


def unknown_model_message(name: str) -> str:
    return (
        f"model: '{name}' is not in the catalog, not a local path, and not in the Hugging Face cache"
        f" or reachable hub{near_model_hint(name)}"
    )


@lru_cache(maxsize=256)
def from_catalog(model_id: str) -> ModelSpec:
    entry = _shared_entry(model_id)
    return spec_from_hf_config(
        entry["config"],
        name=entry["id"],
        source=entry["source"],
        verified=entry.get("verified", True),
        note=entry.get("note", ""),
        aliases=tuple(entry.get("aliases", ())),
    )


def hf_config_of(model_id: str) -> dict[str, Any]:
    """The HF config dict of a catalog model (for building it with transformers in tests/trace).

    A deep copy: the catalog entry is cached, and callers (the GPU calibration's dry run) edit it. A Qwen (1.0) config
    (remote code: transformers has no class for it) comes back as the Qwen2 config it is planned on
    (``hf_config.qwen1_as_qwen2``)."""
    from trainfit.catalog.hf_config import QWEN1_MODEL_TYPE, qwen1_as_qwen2

    cfg = copy.deepcopy(catalog_entry(model_id)["config"])
    return qwen1_as_qwen2(cfg, model_id) if cfg.get("model_type") == QWEN1_MODEL_TYPE else cfg


def from_config_path(path: Path) -> ModelSpec:
    from trainfit.fsio import _short, lookup_error

    cfg_path = path / "config.json" if path.is_dir() else path
    reason = lookup_error(cfg_path)
    if reason is not None:  # a model folder the user cannot search (EACCES)
        raise ConfigError(f"model: cannot read '{_short(str(cfg_path))}' ({reason})")
    if not cfg_path.is_file():
        raise ConfigError(f"model: no config.json at '{path}'")
    from trainfit.errors import InputError
    from trainfit.spec.safe_yaml import load_json_limited, read_text_limited

    try:  # bounded: at most 1 MiB of UTF-8, strict JSON, nesting limits; one line naming the file
        cfg = load_json_limited(read_text_limited(cfg_path, what="model"), what=f"model: '{cfg_path}'")
    except InputError as exc:
        raise ConfigError(str(exc).replace("this is not a card", "this is not a config.json")) from None
    return spec_from_hf_config(cfg, name=str(path), source=f"local file {cfg_path}")


def _from_hf_hub(repo_id: str, revision: str | None) -> ModelSpec | None:
    """Try the local HF cache, then the hub. None when huggingface_hub is missing or neither has it."""
    if "/" not in repo_id or repo_id.count("/") > 1:
        return None
    try:
        from huggingface_hub import hf_hub_download  # optional: only on this path
    except ImportError:
        return None
    import logging
    import os

    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    online = os.environ.get("HF_HUB_OFFLINE", "0") in ("0", "") and _hub_reachable()
    for local_only in (True, False) if online else (True,):
        try:
            file = hf_hub_download(repo_id, "config.json", revision=revision, local_files_only=local_only)
        except Exception:  # noqa: BLE001 - unreachable hub, unknown repo, gated repo: all mean "not here"
            continue
        spec = from_config_path(Path(file))
        return replace(spec, name=repo_id, source=f"huggingface.co/{repo_id} config.json (via {file})")
    return None


@lru_cache(maxsize=1)
def _hub_reachable(timeout_s: float = 2.0) -> bool:
    """One quick TCP connect, so an offline machine answers at once instead of retrying."""
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def resolve_model(model: str | dict[str, Any], *, revision: str | None = None) -> ModelSpec:
    """Resolve a card's ``model`` field to a ModelSpec (see module docstring for the order)."""
    if isinstance(model, dict):
        from trainfit.catalog.bare import spec_from_param_count

        if set(model) - {"params", "reference"}:
            bad = sorted(set(model) - {"params", "reference"})
            raise ConfigError(f"model: unknown key(s) {bad}; a bare model takes 'params' and optional 'reference'")
        return spec_from_param_count(model.get("params"), reference=model.get("reference"))
    if not isinstance(model, str):
        raise ConfigError(f"model: a catalog id (e.g. Qwen/Qwen3-8B), a local path, or a mapping such as {{params: 27e9}};"
                          f" got {type(model).__name__} {str(model)[:40]!r}")
    if not model.strip():  # Path("") is the current folder: say what is missing instead
        raise ConfigError("model: empty; allowed: a catalog id (e.g. Qwen/Qwen3-8B, see `trainfit models`), a local"
                          " config.json or model folder, or a Hugging Face repo id")
    if _entry_by_id(model) is not None or model in _index():
        return from_catalog(model)
    from trainfit.fsio import _short, lookup_error

    path = Path(model).expanduser()
    reason = lookup_error(path)
    if reason == "permission denied":  # a folder on the way the user cannot search: a local path, unreadable
        raise ConfigError(f"model: cannot read '{_short(str(path))}' (permission denied)")
    if reason is None and path.exists():  # a name the OS cannot look up is no local path
        return from_config_path(path)
    hub = _from_hf_hub(model, revision)
    if hub is not None:
        return hub
    raise CatalogError(unknown_model_message(model))
