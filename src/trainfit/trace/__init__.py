"""Optional extra (torch, transformers, peft): measure what the planner estimates.

Nothing here is imported by the planning path. ``trainfit.trace.api`` is cheap to import (no
torch); :func:`trace_step` imports torch and the tracing modules only when called.
"""

from trainfit.trace.api import trace_step
from trainfit.trace.types import PhaseTrace, TraceRequest, TraceResult, TraceUnsupported

__all__ = ["PhaseTrace", "TraceRequest", "TraceResult", "TraceUnsupported", "trace_step"]
