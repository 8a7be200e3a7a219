"""Human output of a plan with rich. No arithmetic beyond presentation."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainfit.plan.result import Plan
from trainfit.report.fmt import COMPONENT_ORDER, count, gib, gib_num, seconds



def _phase_table(plan: Plan) -> Table:
    """Components as rows, phases as columns (few phases)."""
    table = Table(title="Worst GPU, per phase, GiB (2^30 B)")
    table.add_column("component")
    for p in plan.phases:
        table.add_column(p.phase.value + (" *" if p is plan.peak else ""), justify="right")
    names = [c for c in COMPONENT_ORDER if any(c in p.components for p in plan.phases)]
    names += sorted({c for p in plan.phases for c in p.components} - set(names))
    for name in names:
        table.add_row(name, *[gib_num(p.components.get(name, 0.0)) for p in plan.phases])
    table.add_section()
    table.add_row("[bold]allocated[/bold]", *[gib_num(p.allocated) for p in plan.phases])
    table.add_row("reserved", *[gib_num(p.reserved) for p in plan.phases])
    table.add_row("[bold]device (nvidia-smi)[/bold]", *[gib_num(p.device) for p in plan.phases])
    return table


def _time_table(plan: Plan) -> Table:
    """Seconds per phase of the step with the term that bounds it."""
    table = Table(title="Step time per phase, seconds (slowest GPU)")
    for c in ("phase", "seconds", "bound", "largest terms"):
        table.add_column(c, justify="right" if c == "seconds" else "left")
    for t in plan.time_phases:
        terms = sorted(((k, v) for k, v in t.terms.items() if k not in ("bytes_moved", "kernels", "total") and v),
                       key=lambda kv: -kv[1])[:3]
        table.add_row(t.name, f"{t.seconds:.3g}", t.bound, ", ".join(f"{k} {v:.3g}" for k, v in terms))
    return table


def _phase_rows(plan: Plan) -> Table:
    """Phases as rows with their largest components (many phases: RL)."""
    table = Table(title=f"Worst GPU ({plan.worst_group} group), per phase, GiB (2^30 B)")
    for c in ("phase", "allocated", "reserved", "device", "largest components"):
        table.add_column(c, justify="left" if c in ("phase", "largest components") else "right")
    for p in plan.phases:
        top = sorted(p.components.items(), key=lambda kv: -kv[1])[:5]
        table.add_row(
            p.phase.value + (" *" if p is plan.peak else ""),
            gib_num(p.allocated), gib_num(p.reserved), gib_num(p.device),
            ", ".join(f"{k} {gib_num(v)}" for k, v in top),
        )
    return table


def render_plan(plan: Plan, console: Console) -> None:
    card, spec, gpu = plan.card, plan.spec, plan.gpu
    peak = plan.peak
    console.print(
        f"[bold]{spec.name}[/bold]  {card.method.value.upper()} / {card.scope.value}"
        f"  on {card.world_size} x {gpu.name} ({gib(gpu.memory_bytes, 1)} each)"
        f"  strategy {plan.sharding.strategy.value}, offload {card.parallel.offload.value},"
        f" checkpointing {_checkpointing_text(card.parallel)}"
        + (f" (every {card.parallel.checkpoint_every_n_layers} layers)"
           if card.parallel.gradient_checkpointing and card.parallel.checkpoint_every_n_layers else "")
        + (f", compute {card.precision.compute.value} ({card.precision.gemm_recipe.value} scaling)"
           if card.precision.gemm_recipe else "")
    )
    console.print(
        f"parameters: total {count(plan.params_total)}, trainable {count(plan.params_trainable)},"
        f" non-embedding {count(plan.params_without_embedding)}"
    )
    rl = plan.rollout is not None
    seq = card.rollout.prompt_len + card.rollout.response_len if rl else card.batch.seq_len
    console.print(
        f"batch: micro-batch {card.batch.micro_batch_size} x seq {seq}"
        + (f" (prompt {card.rollout.prompt_len} + response {card.rollout.response_len})" if rl else "")
        + f", grad accum {card.batch.grad_accum}; attention {card.attention.value};"
        f" weights {card.weights_dtype.value}, optimizer {card.precision.optimizer.value}"
    )
    if plan.roles:
        roles = "; ".join(f"{r.name} ({'trained' if r.trained else 'frozen'}, {r.placement}, {r.gpus} GPUs)" for r in plan.roles)
        console.print(f"roles: {roles}", markup=False)
    if len(plan.groups) > 1:
        groups = ", ".join(f"{g.name}: {g.gpus} GPUs, peak {gib(max(p.device for p in g.phases))}" for g in plan.groups)
        console.print(f"GPU groups: {groups}; the table shows the worst group, '{plan.worst_group}'")

    console.print(_phase_table(plan) if len(plan.phases) <= 4 else _phase_rows(plan))

    rank = f" on rank {plan.worst_rank}" if plan.worst_rank is not None else ""
    console.print(f"peak phase: [bold]{peak.phase.value}[/bold] at {peak.at}{rank}", markup=True)
    if len(plan.stage_peaks) > 1:
        console.print("per pipeline stage (device peak of its rank's training step): "
                      + ", ".join(f"pp {i} {gib(v)}" for i, v in enumerate(plan.stage_peaks)))
    if plan.fits:
        console.print(
            f"[green bold]FITS[/green bold]: peak {gib(peak.device)} (device) of {gib(plan.capacity_bytes)}"
            f" per GPU ({plan.capacity_label}), headroom {gib(plan.headroom_bytes)}"
            f" (allocated {gib(peak.allocated)}, reserved {gib(peak.reserved)})"
        )
    elif not plan.host_ram_fits and peak.device <= plan.capacity_bytes:
        console.print(
            f"[red bold]DOES NOT FIT[/red bold]: the GPUs hold it, but the node needs {gib(plan.host_ram_bytes, 1)} of host RAM"
            f" and has {plan.card.hardware.host_ram_gib:g} GiB (hardware.host_ram_gib)"
        )
    elif plan.rollout is not None and not plan.rollout.engine_fits and peak.device <= plan.capacity_bytes:
        console.print(f"[red bold]DOES NOT FIT[/red bold]: the rollout engine cannot start: {plan.rollout.reason}")
    else:
        console.print(
            f"[red bold]DOES NOT FIT[/red bold]: peak {gib(peak.device)} (device) of {gib(plan.capacity_bytes)}"
            f" per GPU ({plan.capacity_label}), over by {gib(-plan.headroom_bytes)}"
            f" (allocated {gib(peak.allocated)}, reserved {gib(peak.reserved)})"
        )
    if rl:
        r = plan.rollout
        console.print(
            f"rollout ({r.engine}): KV {r.kv_bytes_per_token:,.0f} B/token per GPU, capacity {r.kv_capacity_tokens:,} tokens"
            f" per engine; needs {r.demand_tokens:,} tokens for {r.needed_concurrency} sequences, at most"
            f" {r.max_concurrency} in flight; {'PREEMPTS' if r.preempts else 'no preemption'}"
        )
        train = {p.phase.value: p for p in plan.groups[0].phases}
        console.print(
            "two-part budget (seed 000 section 3): training side peak "
            + gib(max(p.allocated for n, p in train.items() if n.startswith(("actor", "critic")))) + " allocated;"
            f" generation side {gib(r.engine_device_bytes)} per engine GPU"
            f" (vLLM budget {gib(r.budget_bytes)}, KV cache {gib(r.kv_cache_bytes)})"
        )
    if plan.step_seconds is not None:
        console.print(_time_table(plan))
        tps = f", {plan.tokens_per_s:,.0f} tokens/s" if plan.tokens_per_s else ""
        console.print(f"step time: {seconds(plan.step_seconds)} s on the slowest GPU{tps}")
    elif plan.step_unavailable:
        console.print(f"step time: not available: {plan.step_unavailable}")
    else:
        console.print("step time: not estimated (see the assumptions)")
    if plan.price is not None:
        from trainfit.compute.cost import EXCLUDES

        pr = plan.price
        where = ", ".join(x for x in (pr.id, pr.provider, f"as of {pr.as_of}" if pr.as_of else "") if x)
        billed = f" ({plan.billing_note})" if plan.billing_note else ""
        console.print(
            f"cost: {plan.cost_per_hour:.2f} {pr.currency}/h for {plan.card.world_size} GPUs{billed}"
            f" at {pr.per_gpu_hour:g} {pr.currency} per GPU-hour{f' ({where})' if where else ''}. {EXCLUDES}",
            markup=False,
        )
    from trainfit.preflight.checkpoint import checkpoint_sizes

    ck = checkpoint_sizes(card, plan)
    console.print(
        f"checkpoint: full state {gib(ck.full_state_bytes, 1)}, weights only {gib(ck.weights_only_bytes, 1)}"
        + (f", adapter only {gib(ck.adapter_only_bytes, 2)}" if ck.adapter_only_bytes else "")
        + f"; x{card.checkpoint.keep} kept. {ck.note}",
        markup=False,
    )
    host = ", ".join(f"{k} {gib(v, 1)}" for k, v in plan.host_ram.items())
    console.print(f"host RAM per node: {gib(plan.host_ram_bytes, 1)} ({host})")
    for w in plan.warnings:
        console.print(f"[yellow]warning[/yellow]: {w}")
    console.print("assumptions:")
    for a in plan.assumptions:
        console.print(f"  - {a}", markup=False)


def render_suggestions(fixes, console: Console) -> None:
    singles, pairs = fixes
    if not singles and not pairs:
        console.print(
            "no change from `trainfit fit`'s space makes this plan fit on these cards (single changes, pairs, and"
            " every combination on this GPU kind and count were planned); try more cards: `trainfit fit`"
        )
        return
    console.print("changes that make it fit (each re-planned; ranked by the step time they cost):")
    # a single change may set two keys (offload with its one-GPU strategy, a split placement with its engine GPUs)
    for label, items in (("single", singles), ("pair", pairs)):
        for s in items:
            what = ", ".join(f"{s.names[k]}={v}" for k, v in s.changes.items())
            cost = f", step {s.delta_seconds:+.2f} s" if s.delta_seconds is not None else ""
            console.print(f"  {label}: {what}: saves {gib(s.saving_bytes)}, peak {gib(s.peak_device_bytes)}{cost}", markup=False)


def _checkpointing_text(par) -> str:  # noqa: ANN001
    """on | off | selective <policy>; Megatron-Core's module recompute as its list (``recompute_modules``)."""
    if par.gradient_checkpointing:
        return "on"
    sel = par.selective_checkpointing.value
    if sel == "modules":
        return "selective recompute_modules " + " ".join(m.value for m in par.recompute_modules or ())
    return "off" if sel == "none" else "selective " + sel
