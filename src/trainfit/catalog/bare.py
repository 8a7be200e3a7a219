"""A model given only by its parameter count (``model: {params: 27e9}``).

Weights, gradients and optimizer states need only the count, so they are exact. Every
other term (activations, logits, the largest FSDP unit) needs an architecture: it is taken
from a named reference shape in the catalog, the dense model nearest in size, and every
plan labels it as assumed.
"""

from __future__ import annotations

import math
from dataclasses import replace

from trainfit.errors import ConfigError
from trainfit.spec.model import ModelSpec

REFERENCE_SHAPES = (
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B",
    "Qwen/Qwen3-32B",
    "meta-llama/Llama-3.1-70B",
)
"""Dense reference shapes a bare count may borrow, smallest first."""

MAX_PARAMS = 1e14
"""Largest bare count accepted (100 trillion parameters)."""


def nearest_reference(params: float) -> str:
    from trainfit.catalog.models import from_catalog
    from trainfit.memory.params import param_breakdown

    return min(REFERENCE_SHAPES, key=lambda mid: abs(param_breakdown(from_catalog(mid)).total - params))


def _catalog_reference(reference: object) -> str:
    """``model.reference`` as a catalog id: the shape is looked up in the catalog only (no local path, no hub), so an
    unknown one is refused naming the field, not as an unknown ``model``."""
    from trainfit.catalog.models import catalog_entry, near_model_hint
    from trainfit.errors import CatalogError

    name = str(reference).strip()
    if not name:
        raise ConfigError("model.reference: empty; allowed: a catalog id (e.g. Qwen/Qwen3-32B, see `trainfit models`),"
                          " or omit it for the nearest reference shape")
    try:
        catalog_entry(name)
    except CatalogError:
        raise ConfigError(f"model.reference: '{name[:120]}' is not in the catalog (the reference shape is a catalog"
                          f" model){near_model_hint(name)}") from None
    return name


def spec_from_param_count(params: object, *, reference: object = None) -> ModelSpec:
    from trainfit.catalog.models import from_catalog

    if params is None:
        raise ConfigError("model.params: required for a bare model, e.g. model: {params: 27e9}")
    if isinstance(params, bool):
        raise ConfigError(f"model.params: '{params}' is not a number")
    try:
        value = float(params)  # YAML reads 27e9 as a string
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigError(f"model.params: '{str(params)[:40]}' is not a number") from exc
    if not math.isfinite(value) or not 1 <= value <= MAX_PARAMS:
        raise ConfigError(f"model.params: must be between 1 and {MAX_PARAMS:.0e}, got {str(params)[:40]}")
    count = int(value)
    ref_id = _catalog_reference(reference) if reference is not None else nearest_reference(count)
    ref = from_catalog(ref_id)
    return replace(
        ref,
        name=f"{count / 1e9:g}B parameters",
        source=f"bare parameter count; architecture assumed from reference shape {ref.name}",
        params_override=count,
        assumed_shape=True,
        note=f"only the parameter count is known; activations, logits and gather units assume {ref.name}'s shape",
        aliases=(),
    )
