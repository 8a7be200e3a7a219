"""Optional extra (torch, transformers, peft): measure what the planner estimates.

Nothing here is imported by the planning path. ``trainfit.trace.api`` and ``trainfit.trace.ops`` are
cheap to import (no torch); :func:`trace_step` (memory) and :func:`trace_ops` (the op inventory)
import torch and the tracing modules only when called.
"""

from trainfit.trace.api import trace_step
from trainfit.trace.inventory import OpInventory
from trainfit.trace.ops import trace_ops
from trainfit.trace.types import PhaseTrace, TraceRequest, TraceResult, TraceUnsupported

__all__ = ["OpInventory", "PhaseTrace", "TraceRequest", "TraceResult", "TraceUnsupported", "trace_ops", "trace_step"]
