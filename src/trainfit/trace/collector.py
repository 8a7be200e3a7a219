"""The cyclic garbage collector during a trace (no torch at import)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_FROZEN = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the trace (restored after), from before torch and transformers are
    imported. Importing them, a decoder's modeling module and FSDP makes ~6*10^5 objects, and the full
    collections that triggers cost ~2 s of CPU (user+sys, median of 3 on 2 cores: 6.4 s with the collector on,
    4.3 s off); a cold ``trainfit trace`` of the default card went from 8.0 to 7.3 CPU s, of Qwen3.5-27B from
    10.7 to 8.8. Once per process every object alive then (mostly those modules, imported for good, with
    ``transformers.modeling_layers``, which every decoder's modeling module imports, and through it
    ``masking_utils`` and ``activations``) is moved into the permanent generation, so later collections,
    including the one at interpreter exit, walk only what was made since. A trace makes ~10^6 objects: the
    collector's passes would cost ~1 s of CPU of an 8B trace. Garbage made before the first trace is collected
    before the imports (a few hundredths of a second while torch is not imported yet); garbage is collected as
    before once the trace returns. The traced bytes do not depend on when the collector runs:
    tests/trace/test_trace_speed.py traces with it on and off.
    """
    global _FROZEN
    was = gc.isenabled()
    gc.disable()
    try:
        if not _FROZEN:
            gc.collect()  # the garbage made so far (cheap while torch is not imported yet)
            try:
                import torch  # noqa: F401  (what the freeze is for; without it the trace reports the missing extra)
                import transformers
            except ImportError:
                pass
            else:
                with contextlib.suppress(ImportError):
                    import transformers.modeling_layers  # noqa: F401
                gc.freeze()
                _FROZEN = True
        yield
    finally:
        if was:
            gc.enable()
