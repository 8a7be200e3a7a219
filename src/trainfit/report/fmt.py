"""Number formatting for human output. Always labelled: GiB (2^30) or GB (10^9)."""

from trainfit.units import GB, GIB


def gib(x: float, digits: int = 2) -> str:
    return f"{x / GIB:.{digits}f} GiB"


def gib_num(x: float, digits: int = 2) -> str:
    return f"{x / GIB:.{digits}f}" if x else "-"


def gb(x: float, digits: int = 1) -> str:
    return f"{x / GB:.{digits}f} GB"


def seconds(x: float) -> str:
    """Seconds with three significant digits, never in exponent form (1045 s, not 1.05e+03 s)."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def count(n: float) -> str:
    return f"{n:,.0f} ({n / 1e9:.2f}B)"


COMPONENT_ORDER = (
    "weights",
    "adapter_weights",
    "master_weights",
    "optimizer_states",
    "paged_optimizer_states",
    "gradients",
    "activations",
    "activation_gradients",
    "logits",
    "optimizer_temporaries",
    "fsdp_buffers",
    "ddp_buckets",
    "reference_weights",
    "reward_model_weights",
    "critic_state",
    "actor_state",
    "logprob_pass",
    "reward_pass",
    "value_pass",
    "generation",
    "rollout_engine",
    "weight_sync_buffer",
)
"""Display order of plan components (text and HTML reports)."""
