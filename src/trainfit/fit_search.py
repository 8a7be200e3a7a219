"""`fit`: every GPU kind and card count, every open knob; ranked by the goal (``trainfit.objective``).

The spaces (``SFT_FIT_SPACE``, ``RL_SPACE``) are also where ``trainfit.suggest`` draws its changes.
Pure and deterministic: large spaces run on forked workers; the result does not depend on the split.

Model parallelism (``parallel_layouts``): the sizes the card leaves open are laid out per (GPU kind,
count), and every layout is searched with every knob: a larger replica costs data parallelism but can
save more (tensor parallel 2 with DDP beat FSDP on 4 x H100 for Qwen3-8B, tests/cli/test_fit_ranking_tiers.py),
so stopping at the smallest replica that fits (the search before) missed faster and cheaper plans. A
count where the global batch does not split over its cards (16 cards, 8 sequences) has no layout with
that many data-parallel ranks.

Software stack (``layout_stacks``): the time model runs a tensor- or pipeline-parallel card on Megatron-Core's
Transformer Engine kernels (``plan.time.fused_kernels``) and a one-replica card eagerly unless it asks for
Megatron-Core or torch.compile, so a count's rows could rank a fused pipeline against an eager single GPU (the
python-api doc example: 2 x RTX 4090 at pipeline parallel 2, 0.91 s, against one card's eager 2.24 s; the same card on
Megatron-Core takes 1.35 s, tests/plan/test_pipeline_fused_stack.py). Where the card states no stack, every layout
is searched on Megatron-Core (``parallel.tensor_parallel_impl: megatron``) and the one-replica-wide ones on the eager
stack too; a stated stack is kept, and an eager one searches no tensor / pipeline-parallel layout beyond the card's
own. Each row shows its stack (``Row.stack``), so every row is a configuration that runs as it was timed.

Time first (``_time_first``, SFT-like methods): a fitting row's rank holds no memory figure, so every
job is timed without the memory walk (``screen_time_row``, the plan's own step time, about a third of a
plan's CPU time) and each (GPU kind, count) is then planned in full best first, stopping at the first
row that fits: the rows and their ranking are the exhaustive search's (tests/unit/test_fit_all_layouts.py).
A bound on the step time from the FLOPs at the card's peak rate could prune nothing here: it is the same
for every layout of a count (the FLOPs and the GPUs do not change with the layout), so it never exceeds
the best planned step of that count, and every count is a row of the result.

Allocator replay (issue 15): a plain SFT step takes its reserved bytes from replaying its allocation
sequence (``trainfit.memory.alloc_sequence``, ~10-50 ms each). The candidates are planned without it
(``overheads.replay_floor``: reserved at its lower bound, the step's highest allocated) and only those
that can rank first in their (GPU kind, count) are replanned with it (``_settle``): the rows, their
order and ties are those of replaying every candidate (``fit(screen=False)``, tests/unit/test_fit_screen.py).

Node link (``hardware.interconnect``): validated first (``stated_link``: one line on a bad value). A link the card
file states describes its own GPU kind's nodes, as its price does; the card's kind is planned on it and every other
kind on its catalog's link (``link_on_kind``), whether or not the card's own kind is searched. A link pinned with
``--set``, or stated by a card that leaves ``hardware.gpu`` unset, applies to every kind searched, and the kinds
whose catalog has no rate for it are skipped with the refusal line (``link_everywhere``). The result's warnings say which (``link_note``); each plan's assumptions name
its link.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.objective import StepUnit
from trainfit.search import DEFAULT_LIMIT, PARALLEL_MIN, REFUSALS_KEPT, SFT_SPACE, Row, SearchResult, _evaluate
from trainfit.spec.card import divisors, rl_group_sizes
from trainfit.spec.dotted import deep_copy
from trainfit.spec.enums import Stack, TensorParallelImpl

SFT_FIT_SPACE: dict[str, list[Any]] = SFT_SPACE | {
    "parallel.strategy": ["fsdp", "zero1", "zero2", "zero3", "ddp"],
    "parallel.offload": ["none", "optimizer", "params_and_optimizer"],
    "precision.optimizer": ["adamw", "adamw_8bit"],
}
"""What ``fit`` varies for SFT-like methods, plus (micro-batch, accumulation) pairs at the fixed global batch.
On several GPUs every DeepSpeed ZeRO stage is searched where the card's framework runs DeepSpeed
(``methods.presets.data_parallel_strategy_runs``): with fsdp, zero2 and ddp only, parameter offload on 2+ cards was
planned under torch FSDP alone (torch's AdamW on the CPU), and ``fit`` ranked two RTX 4090s for Qwen3.5-27B SFT at
49.6 s against its own one-card ZeRO-3 row's 32.9 s, where two cards under ZeRO-3 with DeepSpeed's CPU Adam plan
about 20 s (tests/unit/test_fit_multi_gpu_zero_stages.py). ZeRO-1 reduces the gradients once per optimizer step, not
once per micro-batch as ZeRO-2 (``compute.collectives.exposed_data_parallel``), so it is not dominated by zero2."""
RL_SPACE: dict[str, list[Any]] = {
    "scope": ["full", "lora", "qlora"],
    "parallel.offload": ["none", "params_and_optimizer"],
    "precision.optimizer": ["adamw", "adamw_8bit"],
    "loss.chunked": [False, True],
    "batch.micro_batch_size": [1, 2],
    "rollout.placement": ["colocate", "split"],
    "rollout.tensor_parallel": [1, 2, 4, 8],
    "rollout.gpu_memory_utilization": [0.3, 0.5, 0.7, 0.9],
    "rollout.sleep_level": [0, 1, 2],
    "rollout.cuda_graphs": [True, False],
    "rollout.weight_sync": ["per_parameter", "bucketed", "full_gather"],
}
"""PPO/GRPO knobs: every rollout knob the plan models. ``rollout.gpus`` (split) is half a node; the
engine's tensor parallel stays within its GPUs. Gradient checkpointing stays as the card has it (on
by default): pin it with --set to compare."""
ENGINE_SPACE: dict[str, list[Any]] = {
    "rollout.max_num_seqs": [64, 128, 256, 512, 1024],
    "rollout.max_num_batched_tokens": [2048, 4096, 8192, 16384, 32768],
    "rollout.logprob_micro_batch_size": [1, 2, 4, 8],
}
"""vLLM's scheduler limits and the log-prob pass's micro-batch: tried (where open) around each (GPU kind,
count)'s best plan of ``RL_SPACE``, not crossed with it (at most 100 plans a count): a refinement that can
only improve that count's row, not an exhaustive search of these three."""
MEMORY_ONLY = ("rollout.weight_sync",)
"""Knobs that change memory but not the step time (the time model syncs as the framework does, and
only the weight-sync phase holds the buffer): the value with the smallest buffer is the only one
planned, since a larger buffer can neither fit where it does not nor make the step faster."""
GPU_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64)
"""Card counts ``fit`` tries: every count on one 8-GPU node, then 2, 4 and 8 whole nodes."""
LAYOUT_KEYS = {"tp": "parallel.tensor_parallel", "pp": "parallel.pipeline_parallel", "cp": "parallel.context_parallel",
               "kind": "parallel.context_parallel_kind", "ep": "parallel.expert_parallel",
               "sp": "parallel.sequence_parallel"}
"""The model-parallel sizes ``fit`` lays out where the card leaves them open."""
STACK_KEY = "parallel.tensor_parallel_impl"
"""The knob that puts a layout on Megatron-Core's layers (``layout_stacks``)."""
MEGATRON_DROPPED = {"precision.optimizer": ("adamw_8bit", "paged_adamw", "paged_adamw_8bit", "adafactor")}
"""Knob values a layout ``fit`` puts on Megatron-Core (``Layout.megatron``) is not searched with, beside
``MP_DROPPED``: Megatron-Core builds Adam or SGD only ("optimizer (str): Optimizer to use (one of Adam or SGD)",
NVIDIA/Megatron-LM megatron/core/optimizer/optimizer_config.py @e914fb787a4664e5c43bb64cfe3b0c317c9db02f), not
bitsandbytes' 8-bit or paged optimizers or Adafactor."""
STACK_PINS = ("preset", "parallel.tensor_parallel_impl", "parallel.compile", "parallel.unsloth_layers")
"""Card keys that state the software stack (a framework preset, the layers' implementation, torch.compile): a card
pinning one keeps its stack; else ``fit`` searches the eager stack and Megatron-Core's (``layout_stacks``)."""
CP_KINDS = ("ring", "ulysses")
CP_MIN_SEQ = 8192
"""Context parallel is searched (when open) only for sequences of at least this many tokens: Megatron
Core's parallelism guide gives CP as the strategy for "Long sequences (8K+ tokens)"
(https://docs.nvidia.com/megatron-core/developer-guide/latest/user-guide/parallelism-guide.html,
read 2026-12-01); shorter ones fit and run better by the other splits."""
MP_STRATEGY = {"zero2": "zero1"}
"""With tensor or pipeline parallel, or on Megatron-Core's layers, the card allows single, ddp, zero1 and fsdp: the
space's zero2 becomes zero1 (Megatron's distributed optimizer), and its zero3 is not searched there
(``MP_REFUSED_STRATEGIES``)."""
MP_REFUSED_STRATEGIES = ("zero3",)
"""Space strategies a model-parallel (or Megatron-Core) layout leaves out: the card refuses DeepSpeed's ZeRO-3 with
tensor or pipeline parallel, and Megatron-Core has no ZeRO-3 of its own (its fsdp row stands for it)."""
MP_DROPPED = {"scope": ("qlora",), "parallel.offload": ("params_and_optimizer",)}
"""Knob values a model-parallel (or Megatron-Core) layout is not searched with: qlora (nf4 weights with model parallelism
are refused by the planner) and parameter offload (Megatron-LM offloads only the optimizer,
--optimizer-cpu-offload; parameter offload is the data-parallel way to fit, searched there)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """One model-parallel layout of ``count`` cards: its ``knobs`` (the open ``LAYOUT_KEYS`` only; empty
    for the card's own layout), the ranks one replica spans (``degree`` = tp x pp x cp) and its tier."""

    knobs: dict[str, Any]
    degree: int
    ep: int = 1
    tp: int = 1
    pp: int = 1
    own: bool = False
    """The card's own sizes (every open one at 1; sequence parallel may be switched on with a pinned TP)."""
    megatron: bool = False
    """Searched on Megatron-Core's layers (``STACK_KEY`` megatron in ``knobs``; ``layout_stacks``)."""

    @property
    def tier(self) -> tuple[int, int]:
        """Search order: the card's own layout first, then by the ranks a replica spans (expert
        parallel sizes, which split the data x context ranks, beside the other layouts of a degree)."""
        return (self.degree, 0 if self.own else 1)


WHAT_TO_TRAIN = ("model", "method", "scope")
"""The card fields that say what to train: held by ``fit`` with a card file or the default card alike
(``fit_pins``); ``scope`` is searched only on request (``search_scope``)."""
DERIVED_FROM_GLOBAL_BATCH = ("batch", "batch.grad_accum")
"""Card-file keys ``fit`` does not hold: each row chooses its accumulation (and its micro-batch where the card leaves
it out) so that micro-batch x accumulation x data-parallel ranks is the held global batch (``_pairs``). Pinned on the
command line (``--set batch.grad_accum``), the accumulation is held."""


class BatchBasis(StrEnum):
    """What every row of a ``fit`` holds fixed per step, so that its costs compare like with like."""

    GLOBAL_BATCH = "global_batch"
    """The sequences per optimizer step (``--global-batch``, else the card's micro-batch x accumulation x
    data-parallel ranks as written): every row trains the same samples a step; ranked per step or per run."""
    PER_TOKEN = "per_token"
    """Micro-batch and accumulation both pinned: each row's batch is micro x accumulation x its own data-parallel
    ranks, so rows are ranked per token (cost and time per token)."""
    ROLLOUT_BATCH = "rollout_batch"
    """PPO / GRPO: the card's rollout batch (prompts x generations per RL step) is every row's step."""


def fit_pins(data: dict[str, Any], *, card_file: bool, search_scope: bool = False) -> set[str]:
    """The card keys ``fit`` holds: ``WHAT_TO_TRAIN`` always (the embedded default card's full SFT is what
    ``trainfit fit`` with no card trains), and for a card file every field it writes except its hardware section
    (where the search starts) and ``DERIVED_FROM_GLOBAL_BATCH``. ``search_scope``: leave ``scope`` to the search."""
    held = set(WHAT_TO_TRAIN) - ({"scope"} if search_scope else set())
    if card_file:
        held |= {k for k in flat_keys(data) if not k.startswith("hardware") and k not in DERIVED_FROM_GLOBAL_BATCH}
        if search_scope:
            held.discard("scope")
    return held


def fit_start(data: dict[str, Any], *, card_file: bool, search_scope: bool = False,
              overrides: Any = None, sets: tuple[tuple[str, Any], ...] = (),
              pin_hardware: bool = False) -> tuple[dict[str, Any], frozenset[str]]:
    """The card a search starts from and the keys it holds, one rule for ``trainfit fit``, ``trainfit.fit`` and the
    web API (``serve.worker.fit_payload``).

    The pins come from the card as written (``fit_pins``; ``pin_hardware``: its hardware section too, as the web API
    holds it) plus every ``overrides`` key (``trainfit.fit(overrides=)``, a mapping) and ``sets`` key (``--set``
    pairs, in order); those are then set, and last the
    card's framework ``preset`` fills what is still open (``methods.presets.apply_preset``, as ``trainfit plan``
    merges it after ``--set``). What the preset fills is a starting value, not a pin: the search may vary it like any
    other field the card leaves open (a row's knobs say what it plans), and a row that keeps it plans what ``plan``
    plans for the same knobs. Before, only the web API applied the preset, so ``trainfit fit`` and ``trainfit.fit``
    planned a ``preset: verl`` card's rows with TRL's defaults (``rollout.gpu_memory_utilization`` 0.3)."""
    import copy
    from collections.abc import Mapping

    from trainfit.errors import CardError
    from trainfit.spec.card import check_sections
    from trainfit.spec.dotted import set_dotted, updated

    if overrides is not None and not isinstance(overrides, Mapping):
        raise CardError("overrides: expected a mapping of dotted card keys to values, e.g. {'hardware.gpus_per_node': 8}")
    pinned = fit_pins(data, card_file=card_file, search_scope=search_scope)
    if pin_hardware:
        pinned |= {k for k in flat_keys(data) if k.startswith("hardware")}
    data = copy.deepcopy(data)
    for key, value in (*(overrides or {}).items(), *sets):
        set_dotted(data, str(key), value)
        pinned.add(str(key))
        if isinstance(value, Mapping):  # a section given whole (--set 'batch={...}') pins each field it writes
            pinned |= flat_keys({str(key): value})
    check_sections(data)  # a preset merges sections: each must be a mapping first
    if data.get("preset"):
        from trainfit.methods.presets import apply_preset

        written = data
        data = apply_preset(written, str(written["preset"]))
        # one exception, held: a preset loss filled only where the card states neither loss.chunked nor loss.kernel
        # (apply_preset: Unsloth's GRPO loss, {chunked: true, kernel: unsloth}). A row stating loss.chunked would be
        # planned by `plan` without that loss (a stated key keeps the card's own), so no row could plan what both
        # the search and `plan` plan; that loss is the trainer's, not a choice the search can make. TRL's loss
        # merges under a stated loss.chunked (its kernel kept), so it stays a starting value the search varies
        filled = (data.get("loss") or {}).get("kernel")
        if "chunked" not in (written.get("loss") or {}) and filled is not None:
            probe = apply_preset(updated(written, {"loss.chunked": (data.get("loss") or {}).get("chunked", False)}),
                                 str(written["preset"]))
            if (probe.get("loss") or {}).get("kernel") != filled:
                pinned |= {"loss.chunked", "loss.kernel"}
    return data, frozenset(pinned)


def batch_basis(*, rl: bool, pinned: frozenset[str], global_batch: int | None) -> BatchBasis:
    """The ``BatchBasis`` of a search: per token where micro-batch and accumulation are both pinned and no
    ``--global-batch`` is given (the global batch then differs per data-parallel size)."""
    if rl:
        return BatchBasis.ROLLOUT_BATCH
    if global_batch is None and {"batch.micro_batch_size", "batch.grad_accum"} <= pinned:
        return BatchBasis.PER_TOKEN
    return BatchBasis.GLOBAL_BATCH


def flat_keys(data: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in data.items():
        key = f"{prefix}{k}"
        out.add(key)
        if isinstance(v, dict):
            out |= flat_keys(v, key + ".")
    return out


_PRICE_KEYS = ("price_per_gpu_hour", "currency", "price_preset", "price_gpus_per_instance")


def nodes_for_count(count: int) -> int:
    """The nodes a row of ``count`` cards is planned on (``_hardware``: up to 8 cards per node); a price for a whole
    instance bills each node apart (``compute.cost.billed_gpus``)."""
    return max(1, count // 8)


def _hardware(gpu: str, count: int, price: Any) -> dict[str, Any]:
    hw: dict[str, Any] = {"gpu": gpu, "gpus_per_node": min(count, 8), "nodes": nodes_for_count(count)}
    if price is not None:
        hw.update(price_per_gpu_hour=price.per_gpu_hour, currency=price.currency)
        if price.gpus_per_instance != 1:  # the plan bills whole instances (Plan.billed_gpus)
            hw["price_gpus_per_instance"] = price.gpus_per_instance
    return hw


def price_for_count(price: Any, *, gpus: int) -> Any:
    """The price a row of ``gpus`` cards pays: ``price`` itself, or where ``price`` is a tuple of a table's entries
    for one kind (``--market``, ``--price-table``) the one that rents that many cards cheapest, each entry billed by
    its rentable unit (``compute.cost.cheapest_billed``); None stays None."""
    if price is None or not isinstance(price, tuple):
        return price
    from trainfit.compute.cost import cheapest_billed

    return cheapest_billed(price, gpus=gpus, nodes=nodes_for_count(gpus))


def _own_gpu(hw: dict[str, Any]) -> str:
    """The card's own GPU kind as written (``hardware.gpu``, else the ``HardwareSection`` default)."""
    from trainfit.spec.card import HardwareSection

    return str(hw.get("gpu", HardwareSection.model_fields["gpu"].default))


def stated_link(data: dict[str, Any]) -> Any:
    """The card's ``hardware.interconnect`` through the card validator (``HardwareSection._link_name``): an
    ``Interconnect``, or None when unset. ``CardError`` (one line) on a bad value, before any kind is searched."""
    from trainfit.errors import CardError
    from trainfit.spec.card import HardwareSection
    from trainfit.spec.enums import Interconnect

    raw = (data.get("hardware") or {}).get("interconnect")
    if raw is None:
        return None
    try:
        return Interconnect(HardwareSection._link_name(raw))
    except ValueError as exc:
        raise CardError(str(exc).removeprefix("Value error, ")) from None


def link_everywhere(data: dict[str, Any], pinned: frozenset[str]) -> bool:
    """Whether a stated link applies to every searched kind: it was pinned (``--set hardware.interconnect``, which a
    card file's own hardware section is not), or the card leaves ``hardware.gpu`` unset (the default card: the link
    names no kind's nodes, so it can only describe the nodes searched). A card that names its own GPU kind states the
    link of that kind's nodes only (``link_on_kind``: kept there, dropped with a warning for every other kind), whether
    or not its kind is searched."""
    if "hardware.interconnect" in pinned:
        return True
    return (data.get("hardware") or {}).get("gpu") is None


def link_on_kind(data: dict[str, Any], gpu: str, *, everywhere: bool = False) -> dict[str, Any]:
    """``data`` to be planned on GPU kind ``gpu``: a stated ``hardware.interconnect`` describes the card's own GPU
    kind's nodes (an RTX 3090 pair without its bridge, an L40S box without peer-to-peer), not another kind's, so it is
    kept for that kind only and dropped for the others, which plan on their catalog's link (``fit`` says so in a
    warning; each plan's assumptions name the link). ``everywhere`` (``link_everywhere``): kept for every kind, and a
    kind whose catalog has no rate for it is refused by the card validator (its one line lists the kind as skipped).
    A copy when something is dropped."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.errors import CatalogError

    hw = data.get("hardware") or {}
    if hw.get("interconnect") is None or everywhere:
        return data
    try:
        own, kind = resolve_gpu(_own_gpu(hw)).id, resolve_gpu(gpu).id
    except CatalogError:
        return data
    if own == kind:
        return data
    out = deep_copy(data)
    out["hardware"].pop("interconnect")
    return out


def link_note(base: dict[str, Any], gpus: list[str], pinned: frozenset[str] = frozenset()) -> str | None:
    """``fit``'s warning when the card states ``hardware.interconnect`` and the search plans other GPU kinds
    (``link_on_kind``), or names the kinds that refuse a link applied everywhere (``link_everywhere``); None
    otherwise. The link is printed as the enum's value."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import link_refusal
    from trainfit.errors import CatalogError

    link = stated_link(base)
    if link is None:
        return None
    if link_everywhere(base, pinned):
        refused = []
        for g in gpus:
            try:
                if link_refusal(resolve_gpu(g), link=link) is not None:
                    refused.append(g)
            except CatalogError:
                continue
        why = ("stated with --set" if "hardware.interconnect" in pinned
               else "the card names no GPU kind of its own")
        tail = (f"; refused on {', '.join(refused)} (no rate for it in their catalog entries: skipped)" if refused
                else "")
        return f"hardware.interconnect {link.value} applies to every GPU kind searched ({why}){tail}"
    try:
        own = resolve_gpu(_own_gpu(base.get("hardware") or {})).id
    except CatalogError:
        return None
    others = [g for g in gpus if g != own]
    if not others:
        return None
    return (f"hardware.interconnect {link.value} describes the card's own {own} nodes and applies"
            f" to its rows only; {', '.join(others)} are planned on the GPU catalog's link (an assumption; each plan"
            " names its link)")


def card_price(base: dict[str, Any]) -> tuple[str, Any] | None:
    """(GPU kind, price) the card itself names, for its own GPU kind only; None without one."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.cost import Price, for_gpu, price_preset

    hw = base.get("hardware") or {}
    from trainfit.errors import CardError
    from trainfit.spec.card import empty_price_preset_refusal

    if (why := empty_price_preset_refusal(hw.get("price_preset"))) is not None:
        raise CardError(why)
    from trainfit.spec.card import price_unit_refusal

    unit = hw.get("price_gpus_per_instance")
    if (why := price_unit_refusal(unit, price_per_gpu_hour=hw.get("price_per_gpu_hour"),
                                  price_preset=hw.get("price_preset"))) is not None:
        raise CardError(why)  # as the card refuses it: fit takes the price off the card before validating it
    from trainfit.spec.card import price_pair_refusal

    if (why := price_pair_refusal(price_per_gpu_hour=hw.get("price_per_gpu_hour"),
                                  price_preset=hw.get("price_preset"))) is not None:
        raise CardError(why)  # as the card refuses it
    if not hw.get("price_preset") and hw.get("price_per_gpu_hour") is None:
        return None
    gpu = resolve_gpu(_own_gpu(hw)).id
    if hw.get("price_preset"):
        return gpu, for_gpu(price_preset(str(hw["price_preset"])), gpu)
    return gpu, Price(per_gpu_hour=float(hw["price_per_gpu_hour"]), currency=str(hw.get("currency") or ""), gpu=gpu,
                      gpus_per_instance=1 if unit is None else unit)


def _priced(row: Row, price: Any) -> Row:
    """``row`` naming the price it pays (id, GPUs billed and the note on idle GPUs of a whole instance): the card a
    row is planned on carries the amount and unit only (``_hardware``)."""
    from dataclasses import replace

    from trainfit.compute.cost import billing_note

    nodes = nodes_for_count(row.gpus)
    return replace(row, price_id=price.id, billed_gpus=price.billed_gpus(gpus=row.gpus, nodes=nodes),
                   billing_note=billing_note(price, gpus=row.gpus, nodes=nodes))


def fit_counts(base: dict[str, Any], *, max_gpus: int, pinned: frozenset[str]) -> list[int]:
    """The card counts to try: ``GPU_COUNTS`` up to ``max_gpus``, or the pinned
    ``hardware.gpus_per_node`` x ``hardware.nodes``."""
    hw = base.get("hardware") or {}
    if {"hardware.gpus_per_node", "hardware.nodes"} & pinned:
        per, nodes = _pinned_count(hw, "gpus_per_node", 8), _pinned_count(hw, "nodes", 1)
        if nodes > 1 and per != 8:
            raise TrainfitError(f"fit: {nodes} nodes of {per} GPUs; fit lays out whole nodes of 8 beyond one node")
        return [per * nodes]
    counts = [c for c in GPU_COUNTS if c <= max_gpus]
    if not counts:
        raise TrainfitError(f"fit: --max-gpus {max_gpus} leaves no card count to try (counts: {GPU_COUNTS})")
    return counts


def _pinned_count(hw: dict[str, Any], key: str, default: int) -> int:
    """A pinned ``hardware.gpus_per_node`` / ``hardware.nodes`` as the card allows it (``HardwareSection``'s bounds):
    a whole number, or its digits as text (as the card reads '4'); one line naming the field otherwise. Read before
    any card is built from it, so int() must not decide: it took 2.5 as 2, true as 1 and 1e9 as an error with no
    field, and the product of the two was reported under gpus_per_node."""
    from trainfit.errors import CardError
    from trainfit.spec.card import HardwareSection

    bounds = {type(m).__name__: m for m in HardwareSection.model_fields[key].metadata}
    least, most = bounds["Ge"].ge, bounds["Le"].le
    value = hw.get(key, default)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise CardError(f"hardware.{key}: a whole number from {least} to {most:,} (got {str(value)[:40]!r})")
    return value


def _product(space: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = sorted(space)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(space[k] for k in keys))]


def _free(space: dict[str, list[Any]], pinned: frozenset[str]) -> dict[str, list[Any]]:
    return {k: v for k, v in space.items() if k not in pinned}


def _combo_enum(c: dict[str, Any], base: dict[str, Any] | None, key: str, enum: Any, default: Any) -> Any:
    """The combination's value of the dotted ``key``, else the card's (``base``), else ``default``, as ``enum``
    (``ValueError`` on a value the card refuses): how the search's filters read a knob a combination leaves out."""
    if key in c:
        return enum(str(c[key]))
    data: Any = base or {}
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            return default
        data = data[part]
    return enum(str(data))


def _offload_allowed(combos: list[dict[str, Any]], base: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``combos`` less those whose strategy cannot offload what they offload (``spec.card.offload_strategy_refusal``),
    a knob the combination leaves out read from ``base`` (the card's value, else its default): never generated, so
    never ranked nor counted invalid."""
    from trainfit.spec.card import offload_strategy_refusal
    from trainfit.spec.enums import Offload, Strategy

    def allowed(c: dict[str, Any]) -> bool:
        try:
            strategy = _combo_enum(c, base, "parallel.strategy", Strategy, Strategy.FSDP)
            offload = _combo_enum(c, base, "parallel.offload", Offload, Offload.NONE)
        except ValueError:  # a value the card refuses: the plan says why (counted invalid)
            return True
        return offload_strategy_refusal(strategy=strategy, offload=offload) is None

    return [c for c in combos if allowed(c)]


def _one_gpu_strategy(combos: list[dict[str, Any]], base: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One GPU with the strategy open: each combination's strategy set by its offload as the card's framework runs
    it (``methods.presets.one_gpu_offload_strategy``: DeepSpeed's ZeRO-Offload, verl / NeMo RL / SkyRL under FSDP),
    a combination whose offload the framework does not run left out."""
    from trainfit.methods.presets import one_gpu_offload_strategy

    par = (base or {}).get("parallel") or {}
    preset = (base or {}).get("preset")
    out: list[dict[str, Any]] = []
    for c in combos:
        strategy = one_gpu_offload_strategy(preset=None if preset is None else str(preset),
                                            offload=str(c.get("parallel.offload", par.get("offload", "none"))))
        if strategy is not None:
            out.append(c | {"parallel.strategy": strategy.value})
    return out


def sft_combos(count: int, *, pinned: frozenset[str], batches: list[dict[str, int]],
               base: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every SFT-like knob setting for ``count`` cards (pins held, a pinned value read from ``base``), none
    offloading under a strategy that cannot (``_offload_allowed``); one GPU offloads as the card's framework does
    (``_one_gpu_strategy``)."""
    space = _free(SFT_FIT_SPACE, pinned)
    one_gpu = count == 1 and "parallel.strategy" not in pinned
    if one_gpu:
        space["parallel.strategy"] = ["single"]
    if batches:  # none: the batch is held as the card states it (per-token basis, ``batch_basis``)
        space["batch"] = batches
    combos = _product(space)
    if not one_gpu and "parallel.strategy" in space:
        combos = _framework_strategies(combos, base)
    return _offload_allowed(_one_gpu_strategy(combos, base) if one_gpu else combos, base)


def _framework_strategies(combos: list[dict[str, Any]], base: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``combos`` less those whose (searched) data-parallel strategy the card's framework does not run
    (``methods.presets.data_parallel_strategy_runs``: ZeRO-1 and ZeRO-3 only under DeepSpeed)."""
    from trainfit.methods.presets import data_parallel_strategy_runs

    preset = (base or {}).get("preset")
    preset = None if preset is None else str(preset)
    return [c for c in combos if data_parallel_strategy_runs(preset=preset, strategy=str(c["parallel.strategy"]))]


def rl_combos(count: int, *, pinned: frozenset[str], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Every PPO/GRPO knob setting for ``count`` cards (pins held), the memory-only knobs left out:
    the split placement's engine GPUs and the engine's tensor parallel follow the layout."""
    per_node = min(count, 8)
    space = _free({k: v for k, v in RL_SPACE.items() if k not in MEMORY_ONLY}, pinned)
    place = space.pop("rollout.placement", None)
    tps = space.pop("rollout.tensor_parallel", None)
    ro = base.get("rollout") or {}
    placements = place if place is not None else [ro.get("placement", "colocate")]
    out: list[dict[str, Any]] = []
    for placement in placements:
        if placement == "split":
            if per_node < 2:
                continue
            engine = [per_node // 2]
            if "rollout.gpus" in pinned:
                engine = [int(ro.get("gpus", 1))]
        else:
            engine = [None]
        for gpus in engine:
            layout: dict[str, list[Any]] = {}
            if place is not None:
                layout["rollout.placement"] = [placement]
            if gpus is not None and "rollout.gpus" not in pinned:
                layout["rollout.gpus"] = [gpus]
            if tps is not None:
                limit = gpus if gpus is not None else per_node
                # an engine's tensor parallel must divide its GPUs (spec.card refuses the rest, as TRL and verl do)
                layout["rollout.tensor_parallel"] = [t for t in tps if t <= limit and limit % t == 0] or [1]
            one_gpu = count == 1 and "parallel.strategy" not in pinned
            if one_gpu:
                layout["parallel.strategy"] = ["single"]
            combos = _framework_runs(_product(space | layout), base)
            out += _offload_allowed(_one_gpu_strategy(combos, base) if one_gpu else combos, base)
    return out


def _framework_runs(combos: list[dict[str, Any]], base: dict[str, Any]) -> list[dict[str, Any]]:
    """``combos`` less those whose ``rollout.sleep_level`` or ``rollout.cuda_graphs`` the card's framework has no
    option for at the combination's placement and scope (``methods.presets.sleep_level_allowed``: verl sleeps at
    level 2, or 1 with a LoRA adapter, or not at all; ``cuda_graphs_allowed``: TRL's colocated engine has no
    enforce_eager), a knob the combination leaves out read from ``base``; a level the card pins stands: never
    generated, so never recommended."""
    from trainfit.methods.presets import cuda_graphs_allowed, sleep_level_allowed
    from trainfit.spec.enums import Placement, Scope

    preset = base.get("preset")
    if not preset:
        return combos

    def allowed(c: dict[str, Any]) -> bool:
        try:
            placement = _combo_enum(c, base, "rollout.placement", Placement, Placement.COLOCATE)
            scope = _combo_enum(c, base, "scope", Scope, Scope.FULL)
        except ValueError:  # a value the card refuses: the plan says why (counted invalid)
            return True
        if "rollout.cuda_graphs" in c and not cuda_graphs_allowed(preset=str(preset), placement=placement,
                                                                  cuda_graphs=bool(c["rollout.cuda_graphs"])):
            return False
        if "rollout.sleep_level" not in c:  # pinned by the card: its level stands (the export notes the framework's)
            return True
        return sleep_level_allowed(preset=str(preset), placement=placement, scope=scope,
                                   sleep_level=int(c["rollout.sleep_level"]))

    return [c for c in combos if allowed(c)]


def parallel_layouts(base: dict[str, Any], count: int, *, pinned: frozenset[str]) -> list[Layout]:
    """Every model-parallel layout of ``count`` cards (one node of ``min(count, 8)`` GPUs, or whole
    nodes of 8) that the card validator and the planner accept, pinned sizes held, sorted by tier.

    Candidates: tensor parallel dividing a node's GPUs (TP stays within a node), pipeline parallel and
    context parallel (ring and Ulysses; sequences of ``CP_MIN_SEQ`` tokens or more) dividing what is left, expert parallel dividing the data x
    context ranks (MoE models only); sequence parallel on wherever tensor parallel is (unless pinned
    or the sequence does not split). Each is checked with the card's own rules (``load_card_dict``)
    and the planner's (``trainfit.plan.stages.prepare``: heads and KV heads for TP, layers for PP, the
    sequence for CP and the heads for Ulysses, the experts for EP), never with a copy of them."""
    from trainfit.plan import model_spec_of
    from trainfit.plan.stages import prepare
    from trainfit.plan.time import stack_of
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.dotted import updated

    raw = base.get("parallel") or {}
    own = {"tp": int(raw.get("tensor_parallel", 1)), "pp": int(raw.get("pipeline_parallel", 1)),
           "cp": int(raw.get("context_parallel", 1)), "kind": str(raw.get("context_parallel_kind", "ring")),
           "ep": int(raw.get("expert_parallel", 1)), "sp": bool(raw.get("sequence_parallel", False))}
    card0 = _card0(base)
    rl = card0.method.value in ("ppo", "grpo")
    per_node = min(count, 8)
    open_ = {k: key not in pinned for k, key in LAYOUT_KEYS.items()}

    def values(k: str, free: list[Any], own: Any) -> list[Any]:
        return free if open_[k] else [own]

    spec = model_spec_of(card0)
    stack_open, stated = stack_is_open(pinned), stack_of(card0)
    # a pinned knob value a Megatron-Core layout is not searched with (qlora, parameter offload, a bitsandbytes
    # optimizer) keeps the card off Megatron-Core, and so off the tensor and pipeline parallel timed on it
    megatron_ok = not any(k in pinned and str(_dotted(base, k)) in v
                          for k, v in (MP_DROPPED | MEGATRON_DROPPED).items())
    hw = _hardware(str(card0.hardware.gpu), count, None)
    probe_base = updated(base, {"hardware.gpus_per_node": hw["gpus_per_node"], "hardware.nodes": hw["nodes"]})
    probe_base.get("hardware", {}).pop("price_per_gpu_hour", None)
    probe_base.get("hardware", {}).pop("price_gpus_per_instance", None)  # the unit of the price just dropped
    fixed: dict[str, Any] = {}
    if "scope" not in pinned:
        fixed["scope"] = "full"  # scope-specific refusals (qlora, LoRA with EP) are the knob space's business
    if "parallel.strategy" not in pinned:
        fixed["parallel.strategy"] = "fsdp"
    if rl and "rollout.placement" not in pinned:
        fixed["rollout.placement"] = "colocate"
    seq = (card0.rollout.prompt_len + card0.rollout.response_len) if rl else card0.batch.seq_len
    cps = (lambda rest: divisors(rest)) if seq >= CP_MIN_SEQ else (lambda rest: [1])
    out: list[Layout] = []
    for tp in values("tp", [t for t in divisors(per_node) if count % t == 0], own["tp"]):
        for pp in values("pp", divisors(count // tp) if count % tp == 0 else [], own["pp"]):
            rest = count // (tp * pp) if count % (tp * pp) == 0 else 0
            for cp in values("cp", cps(rest) if rest else [], own["cp"]):
                if not rest or rest % cp:
                    continue
                dp_cp = rest // cp * cp
                kinds = values("kind", list(CP_KINDS) if cp > 1 else [own["kind"]], own["kind"])
                eps = values("ep", divisors(dp_cp) if spec.moe is not None else [1], own["ep"])
                sps = values("sp", [True, False] if tp > 1 else [False], own["sp"])
                for kind in kinds:
                    for ep in eps:
                        for sp in sps:
                            sizes = {"tp": tp, "pp": pp, "cp": cp, "kind": kind, "ep": ep, "sp": sp}
                            knobs = {LAYOUT_KEYS[k]: v for k, v in sizes.items() if open_[k]}
                            if cp == 1:
                                knobs.pop(LAYOUT_KEYS["kind"], None)
                            mine = not any(sizes[k] > 1 for k in ("tp", "pp", "cp", "ep") if open_[k])
                            if mine:  # the card's own layout: its rows carry no size knobs
                                knobs = {LAYOUT_KEYS["sp"]: True} if open_["sp"] and sp else {}
                            accepted = False
                            for megatron in layout_stacks(fused=tp * pp > 1, own=mine, open_=stack_open,
                                                          stated=stated, megatron_ok=megatron_ok):
                                mine_knobs = knobs | ({STACK_KEY: TensorParallelImpl.MEGATRON.value} if megatron else {})
                                if not mine_knobs:  # planned (or refused) as it stands
                                    out.append(Layout({}, tp * pp * cp, ep, tp, pp, own=True))
                                    continue
                                try:
                                    card = load_card_dict(updated(probe_base, mine_knobs | fixed))
                                    prepare(card, spec, count, seq)
                                except (TrainfitError, ValueError):
                                    continue
                                out.append(Layout(mine_knobs, tp * pp * cp, ep, tp, pp, own=mine and not megatron,
                                                  megatron=megatron))
                                accepted = True
                            if accepted and sp and open_["sp"]:
                                break  # sequence parallel where it splits; without it only where it cannot
    return sorted(out, key=lambda lay: (lay.tier, sorted(lay.knobs.items(), key=str)))


def _card0(base: dict[str, Any]) -> Any:
    """The model and method, from the card without its model-parallel sizes (pinned ones may not fit a count)."""
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.dotted import updated

    return load_card_dict(updated(base, {LAYOUT_KEYS[k]: v for k, v in
                                         {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "sp": False}.items()}))


def stated_stack(base: dict[str, Any], pinned: frozenset[str]) -> Stack | None:
    """The stack the card states (``STACK_PINS``), as its one-replica plan runs it; None when it leaves it open."""
    from trainfit.plan.time import stack_of

    return None if stack_is_open(pinned) else stack_of(_card0(base))


def stack_note(stated: Stack | None) -> str:
    """The line ``fit`` prints under its table on how the rows' stacks were chosen."""
    if stated is None:
        return ("stack: the software stack each row is timed on. The card states none (parallel.tensor_parallel_impl,"
                " parallel.compile, preset), so tensor / pipeline-parallel layouts are searched on Megatron-Core, whose"
                " fused Transformer Engine kernels their time stands for, and the others on both the eager stack and"
                " Megatron-Core; pin one (e.g. --set parallel.tensor_parallel_impl=dtensor) to keep to it.")
    if stated is Stack.EAGER:
        return ("stack: eager, as the card states it: tensor / pipeline-parallel layouts, which are timed on"
                " Megatron-Core's fused kernels, are not searched beyond the card's own sizes; set"
                " parallel.tensor_parallel_impl=megatron or parallel.compile=true to search them.")
    return f"stack: {stated.value}, as the card states it, on every layout."


def stack_is_open(pinned: frozenset[str]) -> bool:
    """Whether the card leaves its software stack to ``fit``: it pins none of ``STACK_PINS``."""
    return not any(k in pinned for k in STACK_PINS)


def _dotted(data: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def layout_stacks(*, fused: bool, own: bool, open_: bool, stated: Stack, megatron_ok: bool = True) -> list[bool]:
    """The stacks a layout is searched on, as "on Megatron-Core" flags (False: the card's own
    ``tensor_parallel_impl``, True: ``megatron``). A tensor / pipeline-parallel layout (``fused``) is timed on
    Megatron-Core's Transformer Engine kernels (``plan.time.fused_kernels``); so, with the stack open
    (``stack_is_open``), it is searched on Megatron-Core, where that time holds, and every other layout on both
    the card's eager stack and Megatron-Core, so that each count's rows compare like with like. With the stack
    stated, only the layouts the time model runs on that stack are searched: an eager card (``stated`` eager)
    gets no tensor / pipeline-parallel layout beyond its own (``own``: sizes the card pins). ``megatron_ok`` False
    (a pinned ``MP_DROPPED`` or ``MEGATRON_DROPPED`` value: qlora, parameter offload, a bitsandbytes optimizer)
    leaves Megatron-Core out."""
    if open_:
        return ([True] if fused else [False, True]) if megatron_ok else ([] if fused and not own else [False])
    if fused and not own and stated in (Stack.EAGER, Stack.UNSLOTH):
        # Unsloth's layers run on one GPU, eagerly: no tensor / pipeline-parallel layout of its own either
        return []
    return [False]


def layout_combos(layout: Layout, combos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The knob combinations ``combos`` with ``layout``: ``MP_DROPPED`` (and on Megatron-Core ``MEGATRON_DROPPED``)
    and LoRA with expert parallel (refused by the planner) left out, zero2 as zero1 with tensor or pipeline parallel
    or on Megatron-Core and zero3 left out there (``MP_REFUSED_STRATEGIES``)."""
    if not layout.knobs or layout.knobs.keys() == {LAYOUT_KEYS["sp"]}:
        return [c | layout.knobs for c in combos]
    megatron_strategies = layout.tp * layout.pp > 1 or layout.megatron
    out = []
    seen: set[str] = set()
    for c in combos:
        if any(c.get(k) in v for k, v in MP_DROPPED.items()) or (layout.ep > 1 and c.get("scope") == "lora"):
            continue
        if layout.megatron and any(c.get(k) in v for k, v in MEGATRON_DROPPED.items()):
            continue
        if megatron_strategies and c.get("parallel.strategy") in MP_REFUSED_STRATEGIES:
            continue
        c = dict(c)
        if megatron_strategies and "parallel.strategy" in c:
            c["parallel.strategy"] = MP_STRATEGY.get(c["parallel.strategy"], c["parallel.strategy"])
        key = repr(sorted(c.items(), key=str))
        if key in seen:
            continue
        seen.add(key)
        out.append(c | layout.knobs)
    return out


def fit(
    base: dict[str, Any],
    *,
    gpus: list[str],
    max_gpus: int,
    prices: dict[str, Any] | None = None,
    pinned: frozenset[str] = frozenset(),
    limit: int = DEFAULT_LIMIT,
    progress: Any = None,
    global_batch: int | None = None,
    calibration: Any = None,
    goal: Any = None,
    workers: int | None = None,
    screen: bool = True,
) -> FitResult:
    """Every GPU kind of ``gpus`` at every card count up to ``max_gpus`` (``GPU_COUNTS``), every
    knob the card leaves open (``pinned`` keys keep the card's value), each combination planned with
    ``calibration``. The result holds the best row of each (kind, count) by ``goal``
    (``trainfit.objective.Goal``; default: cost), ranked; the Pareto front (time against cost) is
    marked within each ranking currency.

    ``prices``: GPU catalog id -> ``Price``, or a tuple of a price table's entries for that kind, of which each
    (kind, count) pays the one that rents that many cards cheapest, each billed by its rentable unit
    (``price_for_count``); a price for another kind is refused. The card's own price applies to the card's own GPU
    kind only, unless ``prices`` names one for it. A row's cost bills every GPU of each whole instance it occupies
    (``compute.cost.billed_gpus``): ``Row.billed_gpus`` and ``Row.billing_note`` say so.

    Every open model-parallel layout is searched (module docstring); SFT-like cards are timed first and
    planned in full best first (``_time_first``); RL cards then try the open ``ENGINE_SPACE`` knobs
    around each count's best plan.

    ``screen``: plan the candidates without the allocator replay and replay only those that can rank
    first in their (kind, count) (``_settle``); False replays every candidate that has one (the same
    result, slower: the tests' reference).
    """
    from dataclasses import replace

    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.cost import for_gpu
    from trainfit.objective import Goal, annotate, rank_key

    goal = goal or Goal()
    rl = str(base.get("method", "sft")) in ("ppo", "grpo")
    if "hardware.gpu" in pinned:
        gpus = [resolve_gpu(str(base["hardware"]["gpu"])).id]
    own = card_price(base)
    table = dict(prices or {})
    if own is not None and own[0] not in table:
        table[own[0]] = own[1]
    table = {g: tuple(for_gpu(x, g) for x in p) if isinstance(p, tuple) else for_gpu(p, g) for g, p in table.items()}
    everywhere = stated_link(base) is not None and link_everywhere(base, pinned)
    clean = deep_copy(base)
    for key in _PRICE_KEYS:
        (clean.get("hardware") or {}).pop(key, None)
    counts = fit_counts(base, max_gpus=max_gpus, pinned=pinned)
    floor = screen
    basis = batch_basis(rl=rl, pinned=pinned, global_batch=global_batch)
    gb = _global_batch(base, global_batch) if basis is BatchBasis.GLOBAL_BATCH else None
    if basis is BatchBasis.PER_TOKEN:
        goal = per_token_goal(goal)
    t0 = time.perf_counter()
    fallback = {"rollout.weight_sync": smallest_sync(clean)} if rl and "rollout.weight_sync" not in pinned else {}
    # (gpu, count) -> its base card and its layouts, smallest replica first (the order the jobs are listed in)
    cells: dict[tuple[str, int], tuple[dict[str, Any], list[Layout]]] = {}
    refused_cells: dict[tuple[str, int], str] = {}  # a (kind, count) the card cannot run on: its one line
    one_rank_dropped = False
    for gpu in gpus:
        for count in counts:
            data = deep_copy(link_on_kind(clean, gpu, everywhere=everywhere))
            data.setdefault("hardware", {}).update(_hardware(gpu, count, price_for_count(table.get(gpu), gpus=count)))
            one_rank_dropped |= drop_one_rank_flag(data)
            try:
                layouts = parallel_layouts(data, count, pinned=pinned)
            except (TrainfitError, ValueError) as exc:  # e.g. fp8 compute on a kind without fp8 tensor cores
                refused_cells[(gpu, count)] = str(exc)
                continue
            cells[(gpu, count)] = (data, sorted(layouts, key=lambda lay: lay.tier))
    skipped = skipped_kinds(refused_cells, gpus=gpus, counts=counts)
    if refused_cells and not cells:
        _kinds_refused(skipped)  # raises: no kind (or count) can run the card
    base_combos: dict[int, list[dict[str, Any]]] = {}

    def combos_of(count: int, lay: Layout) -> list[dict[str, Any]]:
        if rl:
            if count not in base_combos:
                base_combos[count] = rl_combos(count, pinned=pinned, base=base)
            return layout_combos(lay, base_combos[count])
        dp = count // lay.degree
        if gb is None:
            batches = []
        else:
            batches = _pairs(base, gb, dp, pinned=pinned)
            if not batches:
                return []  # the global batch does not split over this many data-parallel ranks
        return layout_combos(lay, sft_combos(count, pinned=pinned, batches=batches, base=base))

    rows: list[Row] = []
    bases: list[dict[str, Any]] = []
    jobs: list[tuple[int, dict[str, Any]]] = []
    # every layout of every cell, in one run (one progress bar, one pool): stopping a cell at the first
    # tier that fits missed faster and cheaper plans in later tiers (tests/cli/test_fit_ranking_tiers.py)
    empty: dict[tuple[str, int], str] = {}  # a (kind, count) with nothing to plan: why (listed with the skipped)
    # preset unsloth's offload comes with checkpointing (a card that states activation_offload keeps its own); the
    # card arrives with its preset applied and its pins taken before it (fit_start, on every path)
    offload_follows = str(base.get("preset") or "") == "unsloth" and "parallel.activation_offload" not in pinned
    # and a preset's weights follow a searched scope (verl: fp32 but under qlora), as plan of the row's knobs has them
    weights_follow = bool(base.get("preset")) and not {"scope", "precision.weights"} & pinned
    for cell, (data, layouts) in cells.items():
        cell_jobs = [c for lay in layouts for c in combos_of(cell[1], lay)]
        if offload_follows:
            from trainfit.methods.presets import unsloth_offload_follows_checkpointing

            cell_jobs = [unsloth_offload_follows_checkpointing(c, parallel=data.get("parallel") or {})
                         for c in cell_jobs]
        if weights_follow:
            cell_jobs = [_preset_weights_of_scope(c, base=data) for c in cell_jobs]
        if cell_jobs:
            bases.append(data)
            jobs += [(len(bases) - 1, c) for c in cell_jobs]
        else:
            empty[cell] = empty_cell_reason(cell[1], layouts=bool(layouts), global_batch=gb,
                                            held_batch_keys=held_batch_keys(base, pinned))
    if len(jobs) > limit:
        raise TrainfitError(f"fit: the search space has over {limit:,} combinations; pin some knobs"
                            " (--set KEY=VALUE, parallel.tensor_parallel=8 included), name fewer GPU kinds or"
                            " lower --max-gpus")
    evaluated = invalid = 0
    refusals: set[str] = set()
    currencies = None  # the ranking currency's choice: every full row's currency (annotate's default)
    if jobs and floor and not rl:
        rows, evaluated, invalid, currencies = _time_first(bases, jobs, calibration, workers, progress, goal=goal,
                                                           cells=cells)
    elif jobs:
        got, evaluated, invalid, refusals = _run_jobs(bases, jobs, fallback, calibration, workers, progress,
                                                      floor=floor)
        got, _ = annotate(got, goal)
        if floor:
            got = _settle(got, cells, calibration, goal)
        rows += got
    if rl:
        got, e, i = _refine_engine(rows, cells, pinned=pinned, fallback=fallback, calibration=calibration,
                                   workers=workers, goal=goal)
        rows += got
        evaluated += e
        invalid += i
    if not rows and gb is not None and not evaluated:
        _batch_options(base, counts, pinned=pinned, global_batch=global_batch)  # raises: the batch never splits
    if not rows and evaluated and invalid == evaluated:
        if not refusals:  # the time-first screen counts refusals without their lines: plan one job a cell for them
            sample = list({idx: (idx, knobs) for idx, knobs in jobs}.values())
            refusals = _job_rows(bases, sample, fallback, calibration, True)[3]
        if global_batch is not None and len(refusals) == 1 and next(iter(refusals)).startswith("batch.grad_accum:"):
            # the accumulation steps came from --global-batch, not from the card: name what the user gave
            from trainfit.errors import CardError

            raise CardError(f"--global-batch: {global_batch:,} sequences per step split into more accumulation"
                                " steps than batch.grad_accum allows (1,000,000) on every layout searched; allowed: a"
                                " global batch of at most 1,000,000 x micro-batch x data-parallel ranks")
        _refused(evaluated, refusals)  # raises: an empty table would say nothing
    rows = [_priced(r, price_for_count(table[r.gpu], gpus=r.gpus)) if r.gpu in table else r for r in rows]
    best: dict[tuple[str, int], Row] = {}
    rows, warnings = annotate(rows, goal, currencies=currencies)
    if one_rank_dropped:
        warnings = [*warnings, ONE_RANK_NOTE]
    if (link := link_note(base, gpus, pinned)) is not None:
        warnings = [*warnings, link]
    if floor:
        rows = _settle(rows, cells, calibration, goal)
    for r in rows:
        k = (r.gpu, r.gpus)
        if k not in best or rank_key(r, goal) < rank_key(best[k], goal):
            best[k] = r
    ranked = sorted(best.values(), key=lambda r: rank_key(r, goal))
    for cell in cells:  # a count none of whose configurations was planned: listed, not dropped silently
        if cell not in best and cell not in empty:
            empty[cell] = "every configuration tried was refused (the card's rules or the planner)"
    skipped = skipped_kinds(refused_cells | empty, gpus=gpus, counts=counts)
    unit, per_step = run_step_unit(_card0(next(iter(cells.values()))[0]))
    return FitResult(tuple(_fit_pareto(ranked, per_token=basis is BatchBasis.PER_TOKEN)), evaluated, invalid, time.perf_counter() - t0,
                     goal=goal, warnings=tuple(warnings), skipped=skipped,
                     stack=stated_stack(next(iter(cells.values()))[0], pinned), step_unit=unit,
                     optimizer_steps_per_step=per_step, batch_basis=basis, global_batch=gb,
                     tokens_per_global_batch=_common_tokens_per_step(ranked) if gb is not None else None)


def basis_note(result: FitResult) -> str:
    """What every row of ``result`` trains per step (``BatchBasis``), as the fit table's title and the HTML report's
    notes say it."""
    if result.batch_basis is BatchBasis.PER_TOKEN:
        return ("batch.micro_batch_size and batch.grad_accum are pinned, so each row's step carries its own global"
                " batch (x its data-parallel ranks): ranked per token")
    if result.batch_basis is BatchBasis.ROLLOUT_BATCH:
        return "every row trains the card's rollout batch per RL step"
    tokens = "" if result.tokens_per_global_batch is None else f" ({result.tokens_per_global_batch:,.0f} tokens)"
    return f"every row trains {result.global_batch:,} sequences{tokens} per optimizer step (the global batch, held)"


def basis_dict(result: FitResult) -> dict[str, Any]:
    """What every row holds per step (``BatchBasis``), as ``fit --json`` and the web API's fit answer give it
    (``batch_basis``): the global batch in sequences and tokens, or neither (per token; PPO / GRPO: the card's
    rollout batch)."""
    return {"basis": result.batch_basis.value, "sequences_per_step": result.global_batch,
            "tokens_per_step": (None if result.tokens_per_global_batch is None
                                else round(result.tokens_per_global_batch))}


def per_token_goal(goal: Any) -> Any:
    """``goal`` ranked per token (``Goal.per_token``); a run length in steps is refused in one line: with the
    micro-batch and accumulation pinned, a step of one row is not a step of another (``BatchBasis.PER_TOKEN``)."""
    from dataclasses import replace

    from trainfit.errors import CardError

    if goal.steps is not None:
        raise CardError("--steps: batch.micro_batch_size and batch.grad_accum are pinned, so each row's step carries"
                        " its own global batch (x its data-parallel ranks) and steps are not the same work; give the"
                        " run as --tokens, or pin --global-batch instead of batch.grad_accum")
    return replace(goal, per_token=True)


def with_scope_note(result: FitResult, base: dict[str, Any]) -> FitResult:
    """``result`` with ``scope_note`` among its warnings (a search asked to leave scope open)."""
    from dataclasses import replace

    return replace(result, warnings=(*result.warnings, scope_note(base)))


def scope_note(base: dict[str, Any]) -> str:
    """``fit``'s warning when scope is searched (``fit_pins(search_scope=True)``): rows may train another scope."""
    from trainfit.spec.card import RunCard

    own = base.get("scope", RunCard.model_fields["scope"].default)
    own = getattr(own, "value", own)
    return (f"scope searched (--search-scope): the card trains scope {own}; each row's knobs name the scope it"
            " trains, which may differ from the card's")


def _common_tokens_per_step(rows: list[Row]) -> float | None:
    """The tokens one step of every timed row carries (the same for all at a held global batch); None if none
    is timed or they differ."""
    seen = {round(r.tokens_per_step, 6) for r in rows if r.tokens_per_step and r.step_seconds is not None}
    return next(iter(seen)) if len(seen) == 1 else None


ONE_RANK_NOTE = ("parallel.fsdp_one_rank applies to the 1-GPU rows only (on more training GPUs FSDP2 runs"
                 " fully_shard anyway)")
"""``fit``'s one note when it planned counts above one training GPU without the card's ``parallel.fsdp_one_rank``."""


def _training_gpus(data: dict[str, Any]) -> int:
    """The training GPUs of a card dict, as ``RunCard``'s validator counts them (a split RL card's rollout GPUs or
    nodes left out)."""
    hw, ro = data.get("hardware") or {}, data.get("rollout") or {}
    train, _ = rl_group_sizes(
        gpus_per_node=int(hw.get("gpus_per_node", 1)), nodes=int(hw.get("nodes", 1)),
        split=str(data.get("method", "sft")) in ("ppo", "grpo") and str(ro.get("placement", "")) == "split",
        rollout_nodes=None if ro.get("nodes") is None else int(ro["nodes"]),
        rollout_gpus=None if ro.get("gpus") is None else int(ro["gpus"]))
    return train


def drop_one_rank_flag(data: dict[str, Any]) -> bool:
    """Drop ``parallel.fsdp_one_rank`` from a fit candidate with more than one training GPU, where FSDP2 already
    runs ``fully_shard`` over a real mesh (the card validator refuses the flag there); True when it was dropped.
    One-GPU candidates keep it."""
    par = data.get("parallel") or {}
    if not par.get("fsdp_one_rank") or _training_gpus(data) <= 1:
        return False
    par["fsdp_one_rank"] = False
    return True


def card_on_a_kind(data: dict[str, Any], gpus: list[str], pinned: frozenset[str], *, load: Any) -> Any:
    """``load(card)`` on the first GPU kind of ``gpus`` that can run the card, for the one-line checks before a
    search (the card's own GPU when ``hardware.gpu`` is pinned: then its refusal is the answer); None when every
    kind refuses it (``fit`` then says why, per kind). The card file's own GPU is where the search starts, not a
    kind the card must run on: an fp8 card read onto the default A100 still searches an H100."""
    from trainfit.spec.dotted import updated

    if "hardware.gpu" in pinned:
        return load(data)
    everywhere = stated_link(data) is not None and link_everywhere(data, pinned)  # a bad link: one line
    for gpu in gpus:
        try:
            return load(updated(link_on_kind(data, gpu, everywhere=everywhere), {"hardware.gpu": gpu}))
        except (TrainfitError, ValueError):
            continue
    return None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A GPU kind (``gpus`` None: at every count tried) or one card count of it that the card cannot run on
    (the card validator or the planner refuses it before any knob is tried, no layout of the count holds the card,
    or every configuration of it is refused: ``empty_cell_reason``), with the one line that says why."""

    gpu: str
    gpus: int | None
    reason: str


def skipped_kinds(refused: dict[tuple[str, int], str], *, gpus: list[str], counts: list[int]) -> tuple[Skipped, ...]:
    """The refused (kind, count) cells of a search, folded per kind: one entry for a kind refused at every count
    with one reason (fp8 compute on an A100), else one per refused count; in ``gpus`` then count order."""
    out: list[Skipped] = []
    for gpu in gpus:
        mine = [(c, refused[(gpu, c)]) for c in counts if (gpu, c) in refused]
        if mine and len(mine) == len(counts) and len({why for _, why in mine}) == 1:
            out.append(Skipped(gpu, None, mine[0][1]))
        else:
            out += [Skipped(gpu, c, why) for c, why in mine]
    return tuple(out)


def empty_cell_reason(count: int, *, layouts: bool, global_batch: int | None,
                      held_batch_keys: tuple[str, ...] = ()) -> str:
    """Why a (GPU kind, count) has no configuration to plan: no model-parallel layout of ``count`` cards that the
    card's pinned sizes, its rules and the planner accept (``parallel_layouts``), or a global batch that no layout's
    data-parallel ranks split. ``held_batch_keys``: the batch keys held that could change the split
    (``batch_split_remedy``)."""
    cards = f"{count} card{'' if count == 1 else 's'}"
    if not layouts:
        return f"no model-parallel layout of {cards} that the card's pinned sizes, its rules and the planner accept"
    return (f"the global batch of {global_batch} sequences does not split over the data-parallel ranks of any layout"
            f" of {cards}; {batch_split_remedy(held_batch_keys, counts='a card count whose data-parallel ranks divide it')}")


def held_batch_keys(base: dict[str, Any], pinned: frozenset[str]) -> tuple[str, ...]:
    """The batch keys a search holds that decide whether a global batch splits: ``batch.micro_batch_size`` where
    pinned above 1 (a micro-batch of 1 splits whatever a larger one does), ``batch.grad_accum`` where pinned (on the
    command line: a card file's accumulation is chosen per row, ``DERIVED_FROM_GLOBAL_BATCH``)."""
    b = base.get("batch", {})
    out = []
    if "batch.micro_batch_size" in pinned and int(b.get("micro_batch_size", 1)) > 1:
        out.append("batch.micro_batch_size")
    if "batch.grad_accum" in pinned:
        out.append("batch.grad_accum")
    return tuple(out)


def batch_split_remedy(held: tuple[str, ...], *, counts: str) -> str:
    """What the user can change when a global batch does not split: ``--global-batch``, the card counts
    (``counts`` names them), and the batch keys held (``held_batch_keys``), never a key the search chooses itself."""
    return f"change --global-batch, or use {counts}" + (f", or the pinned {' and '.join(held)}" if held else "")


def _kinds_refused(skipped: tuple[Skipped, ...]) -> None:
    """CardError for a search where the card runs on no GPU kind at no count: the one reason they share,
    as ``plan`` gives it for the card; else each kind's (or count's) reason on one line."""
    from trainfit.errors import CardError

    reasons = sorted({s.reason for s in skipped})
    if len(reasons) == 1:
        raise CardError(reasons[0])
    each = "; ".join(f"{s.gpu}{'' if s.gpus is None else f' x{s.gpus}'}: {s.reason}" for s in skipped)
    raise CardError(f"fit: no GPU kind of --gpu can run the card: {each}")


def _refused(evaluated: int, refusals: set[str]) -> None:
    """CardError for a search whose every combination was refused: the one reason they share, as ``plan`` gives it
    for the card; else how many were refused and one of the reasons."""
    from trainfit.errors import CardError

    if len(refusals) == 1:
        raise CardError(next(iter(refusals)))
    shown = f"; one of them: {min(refusals)}" if refusals else ""
    raise CardError(f"fit: every one of the {evaluated:,} configurations tried was refused, for more than one"
                    f" reason{shown}")


def _preset_weights_of_scope(knobs: dict[str, Any], *, base: dict[str, Any]) -> dict[str, Any]:
    """A row's knobs with ``precision.weights`` set where its searched scope gets other weights from the card's preset
    than the card's own scope did (``methods.presets.preset_weights_for_scope``); unchanged otherwise."""
    from trainfit.methods.presets import preset_weights_for_scope

    if "scope" not in knobs:
        return knobs
    weights = preset_weights_for_scope(base, scope=str(knobs["scope"]))
    if weights == (base.get("precision") or {}).get("weights"):
        return knobs
    return {**knobs, "precision.weights": weights}


def screen_time_row(base: dict[str, Any], knobs: dict[str, Any], calibration: Any) -> Row | None:
    """The row ``_evaluate`` would give the SFT-like plan of ``base`` with ``knobs``, except its memory
    fields (``fits`` True, peak 0): its step time as ``make_plan`` times it, without the memory walk
    (about two thirds of a plan's CPU time). None where that is not sure to be the plan's step time:
    an RL method (the rollout walk feeds the time), a paged optimizer (its spill, a memory figure, adds
    a paging phase), or a time the model does not give. Times the experts ``make_plan`` runs (a transformers < 5
    pin's loop, ``plan.resolve.transformers_v4_experts``). Raises as ``load_card_dict``, ``plan_refusals`` and
    ``transformers_v4_experts`` do (what ``make_plan`` refuses before its memory walk), and as the walk does for
    parameter offload under ZeRO-1/2 (``plan.terms.zero_param_offload_refusal``), so that ``fit``'s invalid count is the
    exhaustive search's."""
    from trainfit.compute.cost import billing_note, cost_per_hour
    from trainfit.errors import CardError
    from trainfit.memory.optimizer import PAGED
    from trainfit.plan import model_spec_of, plan_refusals
    from trainfit.plan.resolve import gpu_of, price_of, transformers_v4_experts
    from trainfit.plan.terms import zero_param_offload_refusal
    from trainfit.plan.time import stack_of, step_time_of
    from trainfit.plan.walk import sft_like_sharding
    from trainfit.search import parallel_of
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.dotted import updated
    from trainfit.spec.enums import Method

    card = load_card_dict(updated(base, knobs))
    spec = model_spec_of(card)
    plan_refusals(card, spec)  # raises as make_plan does before its walk
    card, _ = transformers_v4_experts(card, spec)  # as make_plan: a transformers < 5 pin's experts (or its refusal)
    if card.method in (Method.PPO, Method.GRPO) or card.precision.optimizer in PAGED:
        return None
    try:
        gpu = gpu_of(card)
        sharding = sft_like_sharding(card, spec)[2]
    except (TrainfitError, ValueError):
        return None  # the full plan decides (and counts it invalid if it refuses)
    if (why := zero_param_offload_refusal(strategy=sharding.strategy, offload=card.parallel.offload)) is not None:
        raise CardError(why)  # the memory walk's refusal (plan.terms.step_terms): counted invalid, as the plan would
    try:
        rates = None
        if calibration is not None:
            from trainfit.calibration import rates_for

            rates = rates_for(gpu, calibration)
        timing = step_time_of(card, spec, gpu, sharding, None, rates=rates)
    except (TrainfitError, ValueError):
        return None  # the full plan decides (and counts it invalid if it refuses)
    if timing is None or timing.total_s != timing.total_s:
        return None
    price = price_of(card)
    return Row(knobs=knobs, fits=True, gpus=card.world_size, gpu=gpu.id, peak_device_bytes=0.0, headroom_bytes=0.0,
               peak_phase="", step_seconds=timing.total_s,
               cost_per_hour=None if price is None else cost_per_hour(price, gpus=card.world_size,
                                                                      nodes=card.hardware.nodes).amount,
               billed_gpus=None if price is None else price.billed_gpus(gpus=card.world_size, nodes=card.hardware.nodes),
               billing_note="" if price is None else billing_note(price, gpus=card.world_size, nodes=card.hardware.nodes),
               currency=price.currency if price is not None else None, tokens_per_step=timing.tokens_per_step,
               price_id=price.id if price is not None else "", parallel=parallel_of(card.parallel), stack=stack_of(card))


def _screen_rows(bases, jobs, calibration) -> tuple[list[tuple[int, Row | None]], int]:
    """(job index, ``screen_time_row``) for each job a card accepts; the count it refuses."""
    out: list[tuple[int, Row | None]] = []
    invalid = 0
    for n, (idx, knobs) in jobs:
        try:
            row = screen_time_row(bases[idx], knobs, calibration)
        except (TrainfitError, ValueError):
            invalid += 1
            continue
        if row is not None:
            hw = bases[idx]["hardware"]
            row = replace_knobs(row, gpu=hw["gpu"], count=hw["gpus_per_node"] * hw["nodes"])
        out.append((n, row))
    return out, invalid


def _time_first(bases, jobs, calibration, workers, progress, *, goal,
                cells) -> tuple[list[Row], int, int, list[str]]:
    """Each (GPU kind, count)'s rows as ``_run_jobs`` + ``_settle`` would rank them, planning few in full.

    A fitting row's rank key (``rank_key``) holds no memory figure: it is its step time, cost and
    limits, which ``screen_time_row`` gives exactly. So each job is first timed without the memory
    walk; per cell, the jobs are then planned in full (without the replay, then replayed as ``_settle``
    does) best key first, and a cell stops at the first row that fits after the replay: no job left
    has a smaller key, and a row that fits ranks above every row that does not. A cell where none
    fits is planned in full (its closest attempt is the smallest peak). Jobs the screen cannot time
    (``screen_time_row`` None) are planned in full first. The rows returned are those planned in
    full: the best row of each cell and its rank are the exhaustive search's
    (tests/unit/test_fit_all_layouts.py); refusals found only by the full plan are counted where
    it runs."""
    import heapq

    from trainfit.objective import rank_key

    numbered = list(enumerate(jobs))
    parts = _over_workers(lambda lo, hi: _screen_rows(bases, numbered[lo:hi], calibration), len(numbered),
                          workers, progress)
    screened = [s for part, _ in parts for s in part]
    invalid = sum(i for _, i in parts)
    timed = [(n, r) for n, r in screened if r is not None]
    untimed = [n for n, r in screened if r is None]

    def planned(numbers: list[int]) -> tuple[list[Row], int]:
        got, _, bad, _ = _job_rows(bases, [jobs[n] for n in numbers], {}, calibration, True)
        return got, bad

    rows, bad = planned(untimed)
    invalid += bad
    # the ranking currency is chosen from every planned job's currency, as annotating every full row does
    currencies = [r.currency for r in [r for _, r in timed] + rows if r.cost_per_hour is not None]
    by_cell: dict[tuple[str, int], list[tuple[tuple, int]]] = {}
    for (n, _), r in zip(timed, _annotated_with([r for _, r in timed], currencies, goal)):
        by_cell.setdefault((r.gpu, r.gpus), []).append((rank_key(r, goal), n))
    rows = _settle(_annotated_with(rows, currencies, goal), cells, calibration, goal)
    best: dict[tuple[str, int], tuple] = {}
    for r in rows:
        k = (r.gpu, r.gpus)
        if r.fits and not r.floor and (k not in best or rank_key(r, goal) < best[k]):
            best[k] = rank_key(r, goal)
    for cell, members in by_cell.items():
        heapq.heapify(members)
        while members:
            key, n = heapq.heappop(members)
            if cell in best and key >= best[cell]:
                break
            got, bad = planned([n])
            invalid += bad
            if not got:
                continue
            got = _annotated_with(got, currencies, goal)
            if got[0].fits:  # a floor row that does not fit cannot fit replayed: replayed, if ever, by ``_settle``
                got = _settle(got, cells, calibration, goal)
            rows += got
            r = got[0]
            if r.fits and rank_key(r, goal)[:-1] != key[:-1]:
                raise AssertionError(f"fit: the screened step time of {knob_text_of(r)} is not its plan's")
            if r.fits and (cell not in best or rank_key(r, goal) < best[cell]):
                best[cell] = rank_key(r, goal)
    return rows, len(jobs), invalid, currencies


def _annotated_with(rows: list[Row], currencies: list[str], goal: Any) -> list[Row]:
    """``rows`` annotated for ``goal``, the ranking currency chosen from ``currencies``."""
    from trainfit.objective import annotate

    return annotate(list(rows), goal, currencies=currencies)[0]


def knob_text_of(r: Row) -> str:
    from trainfit.search import knob_text

    return knob_text(r.knobs)


MEMORY_FIELDS = ("fits", "peak_device_bytes", "headroom_bytes", "peak_phase")
"""What the allocator replay can change in a row (it moves reserved bytes only)."""


def _settle(rows: list[Row], cells, calibration: Any, goal: Any) -> list[Row]:
    """``rows`` with each (GPU kind, count)'s best row by ``goal`` replanned with the allocator replay.

    A ``floor`` row's key (``rank_key``) is never above its replayed row's: where both fit the key has
    no memory in it, a floor row that does not fit cannot fit replayed, and its peak is a lower
    bound (a calibration's ``reserved_replay_scale`` multiplies the replay's overhead by a positive
    factor, which the calibration file requires, and its fragmentation share leaves replayed phases
    alone: the bound holds with one too). So, per cell, the rows are taken best key first; a floor row is replayed and put back with
    its own key, and the first replayed (or never replay-planned) row taken is the cell's best, with
    the same ties (the earlier row) as ranking every row replayed. Which rows are replayed depends on
    the keys only, so a fit verdict the replay could flip (a peak near the card's capacity) is always
    replayed before it is trusted, with no margin to tune."""
    import heapq

    from trainfit.objective import rank_key

    out = list(rows)
    by_cell: dict[tuple[str, int], list[int]] = {}
    for i, r in enumerate(out):
        by_cell.setdefault((r.gpu, r.gpus), []).append(i)
    for cell, members in by_cell.items():
        if not any(out[i].floor for i in members):
            continue
        heap = [(rank_key(out[i], goal), i) for i in members]
        heapq.heapify(heap)
        while heap:
            _, i = heapq.heappop(heap)
            if not out[i].floor:
                break
            out[i] = _replayed(out[i], cells[cell][0], calibration)
            heapq.heappush(heap, (rank_key(out[i], goal), i))
    return out


def _replayed(row: Row, base: dict[str, Any], calibration: Any) -> Row:
    """``row`` (a ``floor`` row of ``base``) with the memory fields of its plan made with the replay."""
    from dataclasses import replace

    knobs = {k: v for k, v in row.knobs.items() if k not in ("hardware.gpu", "gpus")}
    got, _ = _evaluate(base, list(knobs), [tuple(knobs.values())], calibration)
    return replace(row, floor=False, **{f: getattr(got[0], f) for f in MEMORY_FIELDS})


def _refine_engine(rows, cells, *, pinned, fallback, calibration, workers, goal) -> tuple[list[Row], int, int]:
    """Each (GPU kind, count)'s best row with every open ``ENGINE_SPACE`` setting (its other knobs held);
    the rows that beat it."""
    from trainfit.objective import annotate, rank_key

    space = _free(ENGINE_SPACE, pinned)
    if not space or not rows:
        return [], 0, 0
    best: dict[tuple[str, int], Row] = {}
    for r in rows:
        k = (r.gpu, r.gpus)
        if k not in best or rank_key(r, goal) < rank_key(best[k], goal):
            best[k] = r
    bases: list[dict[str, Any]] = []
    jobs: list[tuple[int, dict[str, Any]]] = []
    for cell, r in sorted(best.items()):
        bases.append(cells[cell][0])
        held = {k: v for k, v in r.knobs.items() if k not in ("hardware.gpu", "gpus") and k not in fallback}
        jobs += [(len(bases) - 1, held | c) for c in _product(space)]
    got, evaluated, invalid, _ = _run_jobs(bases, jobs, fallback, calibration, workers, None)
    got, _ = annotate(got, goal)
    # kept only where strictly better on the objective: a tie keeps the card's own engine settings
    better = [r for r in got if rank_key(r, goal)[:-1] < rank_key(best[(r.gpu, r.gpus)], goal)[:-1]]
    return better, evaluated, invalid


@dataclass(frozen=True, slots=True)
class FitResult(SearchResult):
    goal: Any = None
    warnings: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    """The GPU kinds (or counts of one) the card cannot run on, left out of the search, and the counts with no
    layout or no accepted configuration (``skipped_kinds``)."""
    stack: Stack | None = None
    """The software stack the card states (``stated_stack``); None: left open, each row shows its own."""
    step_unit: StepUnit = StepUnit.OPTIMIZER_STEP
    """What one of a row's steps is (``run_step_unit``): an optimizer step, or an RL step for PPO / GRPO."""
    optimizer_steps_per_step: int = 1
    """Optimizer steps in one such step (``rollout.optimizer_steps_per_rl_step`` for an RL step)."""
    batch_basis: BatchBasis = BatchBasis.GLOBAL_BATCH
    """What every row holds fixed per step (``batch_basis``)."""
    global_batch: int | None = None
    """The sequences per optimizer step every row trains (``BatchBasis.GLOBAL_BATCH``); else None."""
    tokens_per_global_batch: float | None = None
    """The tokens in that global batch, as the rows' plans count them (None where no row was timed)."""

    @property
    def best(self) -> Row | None:
        r = self.rows[0] if self.rows else None
        return r if r is not None and r.fits and r.within_limits else None


def run_step_unit(card: Any) -> tuple[StepUnit, int]:
    """(unit, optimizer steps per step) of the steps ``fit --steps`` counts and a row's ``step_seconds`` times:
    an RL step for PPO / GRPO (one rollout batch, its ``rollout.mini_batches x num_iterations`` optimizer steps),
    as verl counts ``trainer.total_training_steps`` (volcengine/verl verl/trainer/ppo/ray_trainer.py
    @b178a3cd56f58b2d502255daba591e92833930a7 l.378-383, one ``global_steps += 1`` per batch generated and
    trained, l.1346 / l.1700); else an optimizer step. TRL's GRPO ``max_steps`` counts optimizer steps (one
    generation every ``steps_per_generation * num_iterations`` micro-steps: huggingface/trl trl/trainer/grpo_trainer.py
    @f2cd57710ae345ea6428ae95363267fcf38a3dc8 l.1571-1579), the help says so."""
    if card.method.value in ("ppo", "grpo"):
        return StepUnit.RL_STEP, card.rollout.optimizer_steps_per_rl_step
    return StepUnit.OPTIMIZER_STEP, 1


def smallest_sync(base: dict[str, Any]) -> str:
    """The ``rollout.weight_sync`` value whose trainer-side buffer is smallest for the card's model."""
    from trainfit.methods.rl import _sync_spike
    from trainfit.plan import model_spec_of
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.enums import WeightSync

    spec = model_spec_of(load_card_dict(base))
    return min(RL_SPACE["rollout.weight_sync"], key=lambda v: (_sync_spike(WeightSync(v), spec), v))


def _job_rows(bases, jobs, fallback, calibration, floor: bool = False) -> tuple[list[Row], int, int, set[str]]:
    """Plan each job (with the memory-only knobs ``fallback`` set to their best value); consecutive
    jobs on one base with the same keys go through ``_evaluate`` together (``floor``: without the
    allocator replay, ``_settle``). Also the refused jobs' error lines (up to ``REFUSALS_KEPT`` distinct)."""
    rows: list[Row] = []
    invalid = 0
    refusals: set[str] = set()
    for (idx, keys), group in itertools.groupby(jobs, key=lambda j: (j[0], tuple(sorted(j[1] | fallback)))):
        combos = [tuple((knobs | fallback)[k] for k in keys) for _, knobs in group]
        got, bad = _evaluate(bases[idx], list(keys), combos, calibration, floor=floor, refusals=refusals)
        invalid += bad
        hw = bases[idx]["hardware"]
        rows += [replace_knobs(r, gpu=hw["gpu"], count=hw["gpus_per_node"] * hw["nodes"]) for r in got]
    return rows, len(jobs), invalid, refusals


_CHUNK_WORK: Any = None
"""``_over_workers``' ``run``, set before the workers fork (they inherit it; a closure does not pickle)."""


def _chunk_worker(bounds: tuple[int, int]) -> Any:
    assert _CHUNK_WORK is not None
    return _CHUNK_WORK(*bounds)


PROGRESS_CHUNK = 500
"""Most items in one chunk of a large space (``_over_workers``): a few seconds of RL plans on one core (about 5 ms
of CPU each), so the progress bar moves every few seconds. Four chunks a worker (the split before) made the open
GRPO search of Qwen3.5-27B on RTX 4090s (scope, strategy and placement open, 11 card counts: 150,912 plans, about
14 CPU-minutes, and wall-clock minutes more on busy cores) report progress eight times in all. A 60 s profile of
that search put its time in the plans themselves (``make_plan``: the RL memory walk, the RL step time, the step terms,
the card's validation), about 5 s in listing the jobs, and found no invariant recomputed per row: the size is the
cross product of the open knobs (pin some with --set; scope is held unless --search-scope)."""


def _over_workers(run: Any, n: int, workers: int | None, progress: Any) -> list[Any]:
    """``run(lo, hi)`` over the items ``[0, n)``, in order: the whole range in this process, or, for large
    spaces, the first 16 here (a warm-up) and the rest in chunks of at most ``PROGRESS_CHUNK`` over forked
    workers (or, with one worker and a ``progress`` to report to, in this process); the result does not
    depend on the split. ``progress(fraction)`` after each chunk."""
    global _CHUNK_WORK
    n_workers = workers if workers is not None else (os.cpu_count() or 1) if _unlimited_memory() else 1
    if n_workers == 1 and n >= PARALLEL_MIN and progress is not None:
        out = []
        for lo in range(0, n, PROGRESS_CHUNK):
            out.append(run(lo, min(lo + PROGRESS_CHUNK, n)))
            progress(min(lo + PROGRESS_CHUNK, n) / n)
        return out
    if n_workers > 1 and n >= PARALLEL_MIN and "fork" in multiprocessing.get_all_start_methods():
        head = min(16, n)
        out = [run(0, head)]
        _CHUNK_WORK = run
        step = min(-(-(n - head) // (4 * n_workers)), PROGRESS_CHUNK)
        bounds = [(i, min(i + step, n)) for i in range(head, n, step)]
        try:
            with multiprocessing.get_context("fork").Pool(n_workers) as pool:
                for done, part in enumerate(pool.imap(_chunk_worker, bounds), 1):
                    out.append(part)
                    if progress is not None:
                        progress(done / len(bounds))
        finally:
            _CHUNK_WORK = None
        return out
    out = [run(0, n)]
    if progress is not None:
        progress(1.0)
    return out


def _unlimited_memory() -> bool:
    """False under an address-space limit (the web API's planning child), where forked workers are
    not started: the search runs in the process itself."""
    try:
        import resource

        return resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY
    except (ImportError, OSError, ValueError):
        return True


def _run_jobs(bases, jobs, fallback, calibration, workers, progress, *,
              floor: bool = False) -> tuple[list[Row], int, int, set[str]]:
    """Every job planned, over the CPU cores for large spaces (forked after a warm-up); the result
    does not depend on the split (the refusal lines kept, ``_job_rows``, may: any ``REFUSALS_KEPT`` of them)."""
    parts = _over_workers(lambda lo, hi: _job_rows(bases, jobs[lo:hi], fallback, calibration, floor), len(jobs),
                          workers, progress)
    rows: list[Row] = []
    evaluated = invalid = 0
    refusals: set[str] = set()
    for r, e, i, why in parts:
        rows += r
        evaluated += e
        invalid += i
        refusals |= set(sorted(why - refusals)[:REFUSALS_KEPT - len(refusals)])
    return rows, evaluated, invalid, refusals


def _fit_pareto(rows: list[Row], *, per_token: bool = False) -> list[Row]:
    """Fitting rows within the limits that no other such row (same ranking currency) beats on both
    step time and cost per step; unpriced rows compare GPU-seconds per step. ``per_token``
    (``BatchBasis.PER_TOKEN``: the rows' steps carry different batches): time and cost per token."""
    from dataclasses import replace

    def per(r: Row) -> float:
        return r.tokens_per_step or 1.0 if per_token else 1.0

    def cost(r: Row) -> tuple[str, float]:
        if r.rank_cost_per_step is not None:
            return ("=" + (r.rank_currency or ""), r.rank_cost_per_step / per(r))
        if r.cost_per_step is not None:
            return (r.currency or "", r.cost_per_step / per(r))
        return ("gpu-s", r.gpus * (r.step_seconds or 0.0) / per(r))

    def secs(r: Row) -> float:
        return r.step_seconds / per(r)

    ok = [r for r in rows if r.fits and r.within_limits and r.step_seconds is not None]
    out = []
    for r in rows:
        if r not in ok:
            out.append(r)
            continue
        g, c = cost(r)
        beaten = any(
            o is not r and cost(o)[0] == g and secs(o) <= secs(r) and cost(o)[1] <= c
            and (secs(o) < secs(r) or cost(o)[1] < c)
            for o in ok
        )
        out.append(replace(r, pareto=not beaten))
    return out


def _global_batch(base: dict[str, Any], global_batch: int | None) -> int:
    """Sequences per optimizer step: ``global_batch``, else the card's micro-batch x accumulation x
    data-parallel ranks (its GPUs over the ranks one model replica spans)."""
    if global_batch is not None:
        return global_batch
    b = base.get("batch", {})
    hw = base.get("hardware", {})
    par = base.get("parallel", {})
    mbs, ga = int(b.get("micro_batch_size", 1)), int(b.get("grad_accum", 1))
    world = int(hw.get("gpus_per_node", 8)) * int(hw.get("nodes", 1))
    replica = int(par.get("tensor_parallel", 1)) * int(par.get("pipeline_parallel", 1)) * int(par.get("context_parallel", 1))
    return mbs * ga * (1 if par.get("strategy", "fsdp") == "single" else max(1, world // replica))


def _pairs(base: dict[str, Any], global_batch: int, dp: int, *, pinned: frozenset[str]) -> list[dict[str, int]]:
    """The (micro-batch, accumulation) pairs that keep ``global_batch`` over ``dp`` data-parallel ranks;
    with pipeline parallel the accumulation steps are its micro-batches per step."""
    b = base.get("batch", {})
    mbs, ga = int(b.get("micro_batch_size", 1)), int(b.get("grad_accum", 1))
    choices = [mbs] if "batch.micro_batch_size" in pinned else [1, 2, 4, 8]
    pairs = [{"micro_batch_size": m, "grad_accum": global_batch // (m * dp)}
             for m in choices if global_batch % (m * dp) == 0]
    if "batch.grad_accum" in pinned:
        pairs = [p for p in pairs if p["grad_accum"] == ga]
    return pairs


def _batch_options(
    base: dict[str, Any], counts: list[int], *, pinned: frozenset[str], global_batch: int | None = None
) -> dict[int, list]:
    """For each data-parallel size in ``counts``, the (micro-batch, gradient accumulation) pairs that
    keep the card's global batch (micro-batch x accumulation x data-parallel ranks) fixed.

    Raises TrainfitError when no count can keep it (an impossible global batch)."""
    gb = _global_batch(base, global_batch)
    out = {c: _pairs(base, gb, c, pinned=pinned) for c in counts}
    if not any(out.values()):
        b = base.get("batch", {})
        hw = base.get("hardware", {})
        world = int(hw.get("gpus_per_node", 8)) * int(hw.get("nodes", 1))
        raise TrainfitError(
            f"fit: a global batch of {gb} sequences (micro-batch {int(b.get('micro_batch_size', 1))} x accumulation"
            f" {int(b.get('grad_accum', 1))} x {world} GPUs) cannot be split over {', '.join(map(str, counts))} GPUs;"
            f" {batch_split_remedy(held_batch_keys(base, pinned), counts='--max-gpus for more card counts')}"
        )
    return out


def replace_knobs(row: Row, *, gpu: str, count: int) -> Row:
    from dataclasses import replace

    return replace(row, knobs={"hardware.gpu": gpu, "gpus": count, **row.knobs})
