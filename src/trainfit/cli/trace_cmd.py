"""`trainfit trace`: measure the card's step with fake tensors on the CPU, beside the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainfit.cli.common import load_card, print_json
from trainfit.errors import TrainfitError
from trainfit.spec.enums import LoraDropoutPosition, OptimizerImpl, Padding, QloraDequant, Scope


class TraceCardError(TrainfitError):
    """The card asks for something the fake-tensor trace cannot run."""


def trace_request_kwargs(card, spec_config: dict[str, Any], *, layouts: bool = False) -> dict[str, Any]:
    """Map a validated run card to ``TraceRequest`` keyword arguments, or say why it cannot be traced.

    With ``layouts=True`` a context- or expert-parallel card is accepted where its tracer covers it
    (``trainfit.trace.context_parallel`` / ``expert_parallel``) and the dict also carries
    ``context_parallel``, ``context_parallel_kind`` and ``expert_parallel`` for ``trace_step``
    (pop them before building the ``TraceRequest``); without it such a card is refused."""
    p = card.precision
    if card.method.value != "sft":
        raise TraceCardError(f"method: trace runs the SFT step only for now, got '{card.method.value}'")
    if card.attention.value == "flash":
        raise TraceCardError("attention: 'flash' needs the flash-attn CUDA kernel, which cannot run on the CPU; trace with sdpa (same saved tensors)")
    if p.optimizer.value != "adamw":
        raise TraceCardError(f"precision.optimizer: trace runs torch AdamW only, got '{p.optimizer.value}'")
    if p.optimizer_in_backward:
        raise TraceCardError("precision.optimizer_in_backward: not traceable yet")
    if card.parallel.offload.value != "none" or card.parallel.activation_offload:
        raise TraceCardError("parallel.offload: CPU offload moves tensors off the GPU; the CPU trace cannot separate them")
    strategy = card.parallel.strategy.value
    par = card.parallel
    cp, ep = par.context_parallel, par.expert_parallel
    if (cp > 1 or ep > 1) and not layouts:
        raise TraceCardError("parallel: context and expert parallel are traced by `trainfit trace` only; set"
                             " context_parallel and expert_parallel to 1 here")
    if par.expert_tensor_parallel > 1 or par.virtual_stages > 1:
        raise TraceCardError("parallel: expert tensor parallel and the interleaved schedule are not traced; the plan"
                             " gives them from cited formulas (see its assumptions)")
    if cp > 1 or ep > 1:
        layout = _cp_ep_layout(card, spec_config)
        kwargs = trace_request_kwargs(card.model_copy(update={"parallel": par.model_copy(update={
            "context_parallel": 1, "expert_parallel": 1, "strategy": type(par.strategy)("single")})}), spec_config)
        return kwargs | {"world_size": card.world_size} | layout
    if par.tensor_parallel > 1 and par.pipeline_parallel > 1:
        raise TraceCardError("parallel: tensor and pipeline parallel are traced one at a time; set one of them to 1")
    tp, pp = par.tensor_parallel, par.pipeline_parallel
    if strategy == "single":
        world = tp
    elif strategy == "fsdp":
        world = card.world_size // pp
    elif strategy in ("zero1", "zero2", "zero3"):
        raise TraceCardError(f"parallel.strategy: DeepSpeed '{strategy}' cannot run on the CPU trace (its engine and"
                             " buckets are planned from the deepspeed 0.19.8 source, checked against DeepSpeed on gloo in"
                             " tests/unit/test_deepspeed_zero.py); trace strategy fsdp for the FSDP2 equivalent")
    else:
        raise TraceCardError(f"parallel.strategy: trace supports single and fsdp (FSDP2), got '{strategy}'")
    if pp > 1 and world > 1:
        raise TraceCardError("parallel.pipeline_parallel: a pipeline stage is traced on one rank; use strategy single"
                             " or as many GPUs as stages")
    if card.loop.returns_kv_cache:
        raise TraceCardError("loop.returns_kv_cache: the trace builds the model with use_cache off, so its output"
                             " holds no cache; trace with false")
    if p.compute.value == "fp8":
        raise TraceCardError("precision.compute: fp8 is not traced (no fp8 GEMMs on the CPU trace); its fp8 weight"
                             " copies and scaling state rest on memory/fp8.py; trace compute bf16 for the rest")
    w = card.weights_dtype.value
    qlora: dict[str, Any] = {}
    if card.scope.value == "qlora":
        if card.lora.dequant is not QloraDequant.BITSANDBYTES:
            raise TraceCardError(f"lora.dequant: the qlora trace runs bitsandbytes' NF4 Linear4bit, got"
                                 f" '{card.lora.dequant.value}'")
        precision = "bf16"
        qlora = {"double_quant": card.lora.double_quant, "nf4_compute_dtype": p.nf4_compute_dtype.value}
    elif w == "bf16" and p.master_weights.value == "none":
        precision = "bf16"
    elif w == "fp32" and p.compute.value == "bf16":
        precision = "fp32_autocast"
    else:
        raise TraceCardError(
            f"precision: trace supports pure bf16 or fp32 weights with bf16 autocast, got weights '{w}',"
            f" master_weights '{p.master_weights.value}'"
        )
    return {
        "hf_config": spec_config,
        "micro_batch_size": card.batch.micro_batch_size,
        "seq_len": card.batch.seq_len,
        "attention": card.attention.value,
        "gradient_checkpointing": card.parallel.gradient_checkpointing,
        "checkpoint_every_n_layers": card.parallel.checkpoint_every_n_layers,
        "selective_checkpointing": card.parallel.selective_checkpointing.value,
        "scope": card.scope.value,
        "lora_rank": card.lora.rank,
        "lora_alpha": card.lora.alpha,
        "lora_dropout": card.lora.dropout,
        **({"lora_impl": "automodel", "lora_dropout_position": "post"}
           if card.scope is Scope.LORA and card.lora.dropout_position is LoraDropoutPosition.POST
           and card.lora.dropout > 0
           else {}),
        "lora_targets": card.lora_targets,
        "lora_modules_to_save": tuple(card.lora.modules_to_save),
        "ia3_targets": tuple(card.ia3.targets or ()),
        "ia3_feedforward": tuple(card.ia3.feedforward or ()),
        "num_virtual_tokens": card.prompt_tuning.num_virtual_tokens or 0,
        "keep_outputs": card.loop.keeps_output_through_backward,
        "kept_output_dtype": card.loop.kept_output_dtype.value,
        "fsdp_shard_embeddings": card.parallel.fsdp_shard_embeddings,
        "padding_mask": card.batch.padding is Padding.MASK,
        "precision": precision,
        **qlora,
        # Apex's DistributedFusedAdam is traced as torch's fused AdamW: one fused kernel, no step temporaries
        "optimizer_impl": "fused" if p.optimizer_impl is OptimizerImpl.APEX_DISTRIBUTED else p.optimizer_impl.value,
        "world_size": world,
        **({"tensor_parallel": tp, "sequence_parallel": par.sequence_parallel} if tp > 1 else {}),
        **({"pipeline_parallel": pp, "micro_batches": card.batch.grad_accum,
            # the card's split of the layers over the stages (uneven ends or a whole layout), as the plan reads it
            "pipeline_first_stage_layers": par.pipeline_first_stage_layers,
            "pipeline_last_stage_layers": par.pipeline_last_stage_layers,
            "pipeline_layout": par.pipeline_layout} if pp > 1 else {}),
    }


def _cp_ep_layout(card, spec_config: dict[str, Any]) -> dict[str, Any]:
    """The context/expert-parallel layouts the tracers cover (rank 0 of ``card.world_size``), else one line."""
    from trainfit.catalog.hf_config import decoder_config
    from trainfit.trace import context_parallel as cpt
    from trainfit.trace import expert_parallel as ept

    par = card.parallel
    cp, ep, world, strategy = par.context_parallel, par.expert_parallel, card.world_size, par.strategy.value
    family = decoder_config(spec_config).get("model_type")
    if cp > 1 and ep > 1:
        raise TraceCardError("parallel: context and expert parallel are traced one at a time; set context_parallel"
                             " or expert_parallel to 1")
    if par.tensor_parallel > 1 or par.pipeline_parallel > 1:
        field = "context_parallel" if cp > 1 else "expert_parallel"
        raise TraceCardError(f"parallel.{field}: traced alone; tensor_parallel and pipeline_parallel must be 1")
    if card.scope.value != "full":
        raise TraceCardError(f"scope: context and expert parallel are traced for scope 'full' only, got"
                             f" '{card.scope.value}'")
    if par.selective_checkpointing.value != "none":
        raise TraceCardError("parallel.selective_checkpointing: context and expert parallel are traced with 'none'"
                             " (full or no gradient checkpointing)")
    if card.loop.keeps_output_through_backward:
        raise TraceCardError("loop.keeps_output_through_backward: context and expert parallel are traced with the"
                             " output dropped before backward (false)")
    if cp > 1:
        kind = par.context_parallel_kind.value
        if family not in cpt.FAMILIES:
            raise TraceCardError(f"model: context parallel is traced for {', '.join(sorted(cpt.FAMILIES))}, not"
                                 f" '{family}'")
        if card.attention.value != "sdpa":
            raise TraceCardError(f"attention: context parallel is traced with 'sdpa', got '{card.attention.value}'")
        if strategy not in ("single", "fsdp"):
            raise TraceCardError(f"parallel.strategy: context parallel is traced with single (a replica per rank) or"
                                 f" fsdp (FSDP2 over the data x context ranks), got '{strategy}'")
        if par.fsdp_shard_embeddings:
            raise TraceCardError("parallel.fsdp_shard_embeddings: context parallel is traced with the embedding and"
                                 " lm_head in the root unit (false)")
        if strategy == "single" and world != cp:
            raise TraceCardError(f"parallel.strategy: 'single' with context parallel is traced on world_size ="
                                 f" context_parallel ({cp}), got world_size {world}; use 'fsdp' for more ranks")
        if strategy == "fsdp" and world == cp:
            raise TraceCardError(f"parallel.strategy: 'fsdp' with context parallel is traced on more ranks than"
                                 f" context_parallel ({cp}), got world_size {world}; use 'single' (a replica per rank)")
        chunks = 2 * cp if kind == "ring" else cp
        if card.batch.seq_len % chunks:
            raise TraceCardError(f"batch.seq_len: must be a multiple of {chunks} for context parallel {cp} ({kind}),"
                                 f" got {card.batch.seq_len}")
        return {"context_parallel": cp, "context_parallel_kind": kind, "expert_parallel": 1}
    if family not in ept.FAMILIES:
        raise TraceCardError(f"model: expert parallel is traced for {', '.join(sorted(ept.FAMILIES))}, not '{family}'")
    if world != ep:
        raise TraceCardError(f"parallel.expert_parallel: traced with world_size = expert_parallel, got"
                             f" expert_parallel {ep} and world_size {world}")
    if strategy != "single":
        raise TraceCardError(f"parallel.strategy: expert parallel is traced with the dense weights replicated"
                             f" ('single'), got '{strategy}'")
    return {"context_parallel": 1, "context_parallel_kind": "ring", "expert_parallel": ep}


def hf_config_for(card) -> dict[str, Any]:
    """The config transformers builds for the card's model: a Qwen (1.0) config (remote code, no transformers class)
    as the Qwen2 config it is planned on (``hf_config.qwen1_as_qwen2``), whether it comes from the catalog, inline or
    from a local config.json."""
    from trainfit.catalog.models import _index, hf_config_of

    m = card.model
    if not isinstance(m, str):
        if m.config is not None:
            return _buildable(m.config, m.id or "inline config")
        if m.params is not None:
            raise TraceCardError("model: a bare parameter count has no architecture to build; give a catalog id or config.json")
        m = m.id or m.path
    if m in _index():
        return hf_config_of(m)
    from trainfit.fsio import lookup_error

    path = Path(m).expanduser()
    local = lookup_error(path) is None  # a name the OS cannot look up is no local path
    cfg = path / "config.json" if local and path.is_dir() else path
    reason = lookup_error(path) or (lookup_error(cfg) if local else None)
    if reason == "permission denied":  # a model folder the user cannot search is a local path, unreadable
        from trainfit.fsio import _short

        raise TraceCardError(f"model: cannot read '{_short(str(cfg))}' (permission denied)")
    if local and lookup_error(cfg) is None and cfg.is_file():
        return _buildable(_read_config(cfg), str(cfg))
    from trainfit.catalog.models import near_model_hint

    raise TraceCardError(f"model: '{m}' is neither a catalog id nor a local config.json{near_model_hint(m)}")


def _buildable(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    from trainfit.catalog.hf_config import QWEN1_MODEL_TYPE, qwen1_as_qwen2

    return qwen1_as_qwen2(cfg, name) if cfg.get("model_type") == QWEN1_MODEL_TYPE else cfg


def _read_config(cfg: Path) -> dict[str, Any]:
    """A local config.json through the bounded loader (1 MiB of UTF-8 JSON, no NaN/Infinity): one line on a bad file."""
    from trainfit.errors import ConfigError, InputError
    from trainfit.spec.safe_yaml import load_json_limited, read_text_limited

    try:
        data = load_json_limited(read_text_limited(cfg, what="model"), what=f"model: '{cfg}'")
    except InputError as exc:
        raise ConfigError(str(exc).replace("this is not a card", "this is not a config.json")) from None
    if not isinstance(data, dict):
        raise ConfigError(f"model: '{cfg}' must hold a mapping of fields, got {type(data).__name__}")
    return data


def trace(
    card: Annotated[Optional[Path], typer.Argument(help="Run card. Default: the embedded default card.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Catalog id or local path.")] = None,
    scope: Annotated[Optional[str], typer.Option(help="full | lora | qlora | dora | ia3 | prompt_tuning")] = None,
    gpus: Annotated[Optional[int], typer.Option(help="GPUs per node (FSDP ranks).")] = None,
    strategy: Annotated[Optional[str], typer.Option(help="single | fsdp")] = None,
    mbs: Annotated[Optional[int], typer.Option(help="Micro-batch size.")] = None,
    seq: Annotated[Optional[int], typer.Option(help="Sequence length.")] = None,
    ckpt: Annotated[Optional[bool], typer.Option("--ckpt/--no-ckpt", help="Gradient checkpointing.")] = None,
    attention: Annotated[Optional[str], typer.Option(help="sdpa | eager")] = None,
    layers: Annotated[Optional[int], typer.Option(help="Trace exactly N decoder layers (default: full depth, extrapolated).")] = None,
    mode: Annotated[str, typer.Option(help="fast (byte tracker) | memtracker (torch MemTracker categories)")] = "fast",
    reserved: Annotated[bool, typer.Option(
        "--reserved", help="Also predict reserved memory: replay the step's allocations through a model of the CUDA "
                           "caching allocator (one GPU, train step; one full-depth pass in place of the two shallow ones).")] = False,
    time_: Annotated[bool, typer.Option(
        "--time", help="Instead of memory: the op inventory of the step (every aten op: GEMM FLOPs and shapes, "
                       "attention FLOPs, memory-bound bytes, kernels), per phase and per layer (one GPU).")] = False,
    set_: Annotated[list[str], typer.Option("--set", help="Any card field: KEY=VALUE. Repeatable.")] = [],
    calibration: Annotated[Optional[Path], typer.Option("--calibration", help="Calibration file of measured rates (`trainfit calibrate`) the plan column uses, as plan's. Default: $TRAINFIT_CALIBRATION, else $XDG_CONFIG_HOME/trainfit/calibration.json, when it exists.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """The real PyTorch peak of the card's step on fake CPU tensors, beside trainfit's estimate."""
    overrides = {
        "model": model, "scope": scope, "hardware.gpus_per_node": gpus, "parallel.strategy": strategy,
        "batch.micro_batch_size": mbs, "batch.seq_len": seq, "parallel.gradient_checkpointing": ckpt,
        "attention": attention,
    }
    run_card = load_card(card, overrides, set_)
    from trainfit.calibration import load_found_calibration

    cal = load_found_calibration(calibration)  # what `plan` uses: the plan column is plan's figure
    kwargs = trace_request_kwargs(run_card, hf_config_for(run_card), layouts=True)
    layout = {k: kwargs.pop(k) for k in ("context_parallel", "context_parallel_kind", "expert_parallel") if k in kwargs}
    if layout and (layout["context_parallel"] > 1 or layout["expert_parallel"] > 1):
        which = "context" if layout["context_parallel"] > 1 else "expert"
        for flag, bad in (("--time", time_), ("--layers", layers is not None), ("--mode", mode != "fast"),
                          ("--reserved", reserved)):
            if bad:
                raise TraceCardError(f"{flag}: {which} parallel is traced at full depth, memory only, mode 'fast';"
                                     f" drop {flag}")
    if layers is not None:  # a depth above the model's is refused before torch is imported or a layer built
        from trainfit.trace.extrapolate import plan_depths

        plan_depths(kwargs["hf_config"], layers)
    if time_:
        for flag, bad in (("--reserved", reserved), ("--mode", mode != "fast")):
            if bad:  # the op inventory counts ops: it replays no allocator and runs no MemTracker
                raise TraceCardError(f"{flag}: --time counts the step's ops, not its memory; drop {flag} or --time")
        _trace_time(run_card, kwargs, layers, json_, calibration=cal)
        return
    from trainfit.plan import make_plan

    plan = make_plan(run_card, calibration=cal)
    try:
        from trainfit.trace.api import TraceRequest, trace_step
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise TraceCardError(f"trace needs the trace extra: pip install -c constraints.txt 'trainfit[trace]' ({exc})") from exc
    if plan.worst_rank is not None and kwargs.get("pipeline_parallel", 1) > 1:
        kwargs["pipeline_stage"] = plan.worst_rank.pp  # the stage whose phases the plan shows
    req = TraceRequest(**kwargs, layers=layers, mode=mode, replay_allocator=reserved)
    from rich.console import Console as _Console
    from rich.progress import Progress

    import sys

    # the bar draws on an interactive stderr only, so pipes and error lines stay clean
    with Progress(transient=True, disable=json_ or not sys.stderr.isatty(), console=_Console(stderr=True)) as bar:
        task = bar.add_task("tracing", total=1.0)
        result = trace_step(req, progress=lambda label, frac: bar.update(task, completed=frac, description=label),
                            **layout)
    from trainfit.report.trace_report import render_trace, trace_to_dict

    note = bnb_kept_input_note(run_card)
    if json_:
        print_json(trace_to_dict(result, plan) | ({"notes": [note]} if note else {}))
        return
    from rich.console import Console

    console = Console(width=140)
    render_trace(result, plan, console)
    if note:
        console.print(f"note: {note}", highlight=False)


def bnb_kept_input_note(card) -> str | None:
    """The line a QLoRA trace prints for a ``software.bitsandbytes`` pin before 0.43.2: the trace runs the installed
    bitsandbytes, whose MatMul4Bit drops its input, so only the plan counts the inputs the pinned one keeps
    (``memory.bnb_saved_input``). None for any other card."""
    from trainfit.memory.bnb_saved_input import saves_input

    pin = (card.software.model_extra or {}).get("bitsandbytes")
    if card.scope is not Scope.QLORA or not saves_input(str(pin) if pin is not None else None):
        return None
    return (f"software.bitsandbytes {pin} keeps each frozen 4-bit linear's input (MatMul4Bit before 0.43.2); the"
            " installed bitsandbytes the trace runs keeps none, so the plan counts those inputs and the trace cannot"
            " show them")


def _model_name(card, hf_config: dict[str, Any]) -> str:
    m = card.model
    if isinstance(m, str):
        return m
    return m.id or m.path or str(hf_config.get("model_type", "model"))


def _trace_time(run_card, kwargs: dict[str, Any], layers: int | None, json_: bool, *, calibration=None) -> None:
    """``trace --time``: the op inventory of the step (``trainfit.trace.ops.trace_ops``)."""
    import sys

    from rich.console import Console
    from rich.progress import Progress

    from trainfit.report.trace_report import ops_to_dict, render_ops
    from trainfit.trace.ops import trace_ops
    from trainfit.trace.types import TraceRequest

    req = TraceRequest(**kwargs, layers=layers)
    with Progress(transient=True, disable=json_ or not sys.stderr.isatty(), console=Console(stderr=True)) as bar:
        task = bar.add_task("counting ops", total=1.0)
        inv = trace_ops(req, progress=lambda label, frac: bar.update(task, completed=frac, description=label))
    name = _model_name(run_card, kwargs["hf_config"])
    timed = _timed(run_card, inv, calibration=calibration)
    if json_:
        print_json(ops_to_dict(inv, name) | ({"seconds": timed} if timed else {}))
        return
    render_ops(inv, name, Console(width=140), timed=timed)


def _timed(run_card, inv, *, calibration=None) -> dict[str, Any] | None:
    """Seconds per phase on the card's GPU: the traced ops through the planner's kernel models at the
    rates ``plan`` uses (the default rates with the calibration's overrides for this GPU), beside the
    plan's own time (None when the GPU catalog has no rates)."""
    from trainfit.calibration import rates_for
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.traced import traced_phase_seconds
    from trainfit.errors import TrainfitError
    from trainfit.plan import make_plan

    try:
        gpu = resolve_gpu(run_card.hardware.gpu)
        rates = rates_for(gpu, calibration)
        plan = make_plan(run_card, calibration=calibration)
    except TrainfitError:
        return None
    planned = {t.name: t.seconds for t in plan.time_phases}
    planned_by_traced = {"forward": planned.get("forward"),
                         "backward": (planned.get("backward") or 0.0) + (planned.get("recompute") or 0.0),
                         "optimizer_step": planned.get("optimizer_step")}
    return {"gpu": gpu.id, "phases": [
        {"name": phase, "seconds": t.seconds, "bound": t.bound, "gemm_s": t.gemm_s, "attention_s": t.attention_s,
         "memory_s": t.memory_s, "host_s": t.host_s, "plan_seconds": planned_by_traced.get(phase)}
        for phase, t in traced_phase_seconds(inv.records, rates=rates, sliding_layers=plan.spec.sliding_layers,
                                             sliding_window=plan.spec.sliding_window).items()]}
