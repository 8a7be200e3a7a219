"""DeepSpeed ZeRO-3's reuse-distance walk: a once-per-run host cost, not a per-step one.

When a module's parameters are released with a complete module trace, DeepSpeed's coordinator decides which of them
to keep gathered by walking the rest of the trace: ``__params_to_release`` slices the recorded module order from the
current step (``self.__submodule_order[step_id:]``, a tuple, so the rest of the trace is copied) and visits it module
by module (``iter_params`` of each) until ``stage3_max_reuse_distance`` parameter elements have been traversed
(deepspeedai/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py l.526-557
@2ce55057999bdf1c9bf26cb5f000a8a9fb97e2d9, v0.17.1; the same code at v0.12.0 l.470, v0.14.0 l.485 and v0.16.9 l.523,
and in the deepspeed 0.19.8 wheel l.632-662). ``release_sub_module`` calls it (l.425-430 at v0.17.1) from the
post-forward and post-backward hook of every hooked module the forward, the recompute and the backward run
(deepspeed/runtime/zero/parameter_offload.py l.484 and l.506, same commit), and every pre-forward and pre-backward
hook records one trace entry and advances the step id, modules without parameters included (l.470-473 and
l.494-497 there; partitioned_param_coordinator.py ``fetch_sub_module`` l.421).

The method is wrapped in ``functools.lru_cache(maxsize=None)`` keyed on (coordinator, module, step id) at all those
versions, and a valid trace is the same every step, so the walk runs once: in the first step with a complete trace.
The coordinator starts with an invalid trace (l.98), and ``reset_step``, run at the start of every forward, turns it
to recording for the first step and to complete for the second (l.228-248); v0.16.9, the line ms-swift's
``deepspeed<0.17`` installs (modelscope/ms-swift requirements/install_all.sh l.10
@0f31a5a9ebe0de1240db56e128ed0251c9b9d223), has the same (l.98, l.524-548). Every later release is a cache hit.
So the walk is no part of the step time trainfit plans; it is one step's extra host time, ``reuse_walk_seconds``,
which a throughput averaged from the start of training carries divided by its step count (ms-swift's
``train_speed(iter/s)`` is ``global_step`` over the seconds since the trainer was built: swift/trainers/mixin.py
l.109 and l.457-458 @0f31a5a9ebe0de1240db56e128ed0251c9b9d223).

A model with fewer parameters than the distance (DeepSpeed's default, 1e9, which ms-swift's ZeRO-3 config sets too)
is walked to the end of its trace on every release: quadratic in the trace. A large dense model walks a few layers'
modules per release; a transformers < 5 MoE whose every expert MLP is five hooked modules walks about a thousand
(Qwen3-30B-A3B: 31,302 hooked modules a pass, about 975k elements each on average), over a trace three passes long
under activation checkpointing."""

from __future__ import annotations

ZERO3_REUSE_WALK_S_PER_MODULE = 4.6e-6
"""Host seconds per module the uncached reuse-distance walk visits (``iter_params`` of the module and the
``params_to_release.discard`` of each parameter): measured by ``benchmarks/measure_zero3_reuse_walk.py`` (deepspeed
0.19.8 wheel, torch 2.13.0+cpu, one thread of a shared VM core, 2026-12-04; a ZeRO-3 engine on a fake process group of
8 ranks, transformers Qwen2 of 8 layers, hidden 64: a forward + backward with the ``lru_cache`` cleared before it
against the same step cached, best of 40 interleaved rounds of 3 each: 154.1 ms against 48.6 ms, 105.5 ms over the
22,741 modules the step's 208 releases walk, 4.64 us each; runs of 15 rounds while the host was loaded gave 10.3 and
11.3 us, the 8-layer cached step then 121 ms: the best of many rounds is the unloaded figure). A CPU figure on the
same footing as ``rates.ZERO3_MODULE_FORWARD_HOST_S``. Measured, not fitted."""

ZERO3_TRACE_SLICE_S_PER_ENTRY = 1.6e-9
"""Host seconds per trace entry copied by ``self.__submodule_order[step_id:]`` (a tuple slice: a pointer copy and a
reference count each), measured by ``benchmarks/measure_zero3_reuse_walk.py`` on the recorded trace repeated to
100,000 entries (same run as ``ZERO3_REUSE_WALK_S_PER_MODULE``: 1.62 ns; 2.7-4.3 ns on the loaded host). Measured,
not fitted."""


def trace_entries(*, hooked_modules: int, recompute: bool) -> int:
    """Entries of a ZeRO-3 module trace for one forward + backward: one per hooked module (``fetch_sub_module``
    from every module's pre-forward and pre-backward hook), again for the recompute forward under activation
    checkpointing."""
    if hooked_modules < 0:
        raise ValueError("trace_entries: hooked_modules >= 0")
    return hooked_modules * (3 if recompute else 2)


def reuse_walk_modules(*, entries: int, modules_within_reuse: float) -> float:
    """Modules the releases of one trace of ``entries`` walk in all, one release per entry: the release at position
    ``s`` visits the rest of the trace, ``entries - s`` modules, or ``modules_within_reuse`` where the reuse distance
    stops it first (sum over s of min(entries - s, M))."""
    if entries < 0 or modules_within_reuse < 0:
        raise ValueError("reuse_walk_modules: entries >= 0, modules_within_reuse >= 0")
    m = min(float(entries), modules_within_reuse)
    return m * (m + 1) / 2 + m * (entries - m)


def reuse_walk_seconds(*, hooked_modules: int, recompute: bool, params: float,
                       max_reuse_distance_numel: float) -> float:
    """Host seconds of the one uncached reuse-distance walk (module docstring): each release walks the modules whose
    parameters add up to ``max_reuse_distance_numel`` elements, at the trace's mean of ``params / hooked_modules``
    elements per module, and copies the rest of the trace. An estimate, not a measurement: the per-module and
    per-entry rates measured on a tiny model (8-layer Qwen2, hidden 64) on a shared CPU, applied to this model of the
    walk (Qwen3-30B-A3B's 447 s is such an estimate)."""
    if hooked_modules < 1 or params < 0 or max_reuse_distance_numel < 0:
        raise ValueError("reuse_walk_seconds: hooked_modules >= 1, params >= 0, max_reuse_distance_numel >= 0")
    entries = trace_entries(hooked_modules=hooked_modules, recompute=recompute)
    per_module = params / hooked_modules
    within = max_reuse_distance_numel / per_module if per_module > 0 else float(entries)
    walked = reuse_walk_modules(entries=entries, modules_within_reuse=within)
    sliced = entries * (entries + 1) / 2
    return walked * ZERO3_REUSE_WALK_S_PER_MODULE + sliced * ZERO3_TRACE_SLICE_S_PER_ENTRY
