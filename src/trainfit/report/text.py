"""Human output of a plan with rich. No arithmetic beyond presentation."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainfit.plan import Plan
from trainfit.report.fmt import count, gib, gib_num

COMPONENT_ORDER = (
    "weights",
    "adapter_weights",
    "master_weights",
    "optimizer_states",
    "gradients",
    "activations",
    "activation_gradients",
    "logits",
    "optimizer_temporaries",
    "fsdp_buffers",
    "ddp_buckets",
)


def render_plan(plan: Plan, console: Console) -> None:
    card, spec, gpu = plan.card, plan.spec, plan.gpu
    peak = plan.peak
    console.print(
        f"[bold]{spec.name}[/bold]  {card.method.value.upper()} / {card.scope.value}"
        f"  on {plan.sharding.world_size} x {gpu.name} ({gib(gpu.memory_bytes, 1)} each)"
        f"  strategy {plan.sharding.strategy.value}, offload {card.parallel.offload.value},"
        f" checkpointing {'on' if card.parallel.gradient_checkpointing else 'off'}"
    )
    console.print(
        f"parameters: total {count(plan.params_total)}, trainable {count(plan.params_trainable)},"
        f" non-embedding {count(plan.params_without_embedding)}"
    )
    console.print(
        f"batch: micro-batch {card.batch.micro_batch_size} x seq {card.batch.seq_len},"
        f" grad accum {card.batch.grad_accum}; attention {card.attention.value};"
        f" weights {card.weights_dtype.value}, optimizer {card.precision.optimizer.value}"
    )

    table = Table(title="Worst GPU, per phase, GiB (2^30 B)")
    table.add_column("component")
    for p in plan.phases:
        mark = " *" if p is peak else ""
        table.add_column(p.phase.value + mark, justify="right")
    names = [c for c in COMPONENT_ORDER if any(c in p.components for p in plan.phases)]
    names += sorted({c for p in plan.phases for c in p.components} - set(names))
    for name in names:
        table.add_row(name, *[gib_num(p.components.get(name, 0.0)) for p in plan.phases])
    table.add_section()
    table.add_row("[bold]allocated[/bold]", *[gib_num(p.allocated) for p in plan.phases])
    table.add_row("reserved", *[gib_num(p.reserved) for p in plan.phases])
    table.add_row("[bold]device (nvidia-smi)[/bold]", *[gib_num(p.device) for p in plan.phases])
    console.print(table)

    console.print(f"peak phase: [bold]{peak.phase.value}[/bold] at {peak.at}")
    if plan.fits:
        console.print(
            f"[green bold]FITS[/green bold]: peak {gib(peak.device)} (device) of {gib(plan.capacity_bytes)}"
            f" per GPU, headroom {gib(plan.headroom_bytes)}"
            f" (allocated {gib(peak.allocated)}, reserved {gib(peak.reserved)})"
        )
    else:
        console.print(
            f"[red bold]DOES NOT FIT[/red bold]: peak {gib(peak.device)} (device) of {gib(plan.capacity_bytes)}"
            f" per GPU, over by {gib(-plan.headroom_bytes)}"
            f" (allocated {gib(peak.allocated)}, reserved {gib(peak.reserved)})"
        )
    host = ", ".join(f"{k} {gib(v, 1)}" for k, v in plan.host_ram.items())
    console.print(f"host RAM per node: {gib(plan.host_ram_bytes, 1)} ({host})")
    for w in plan.warnings:
        console.print(f"[yellow]warning[/yellow]: {w}")
    console.print("assumptions:")
    for a in plan.assumptions:
        console.print(f"  - {a}", markup=False)
