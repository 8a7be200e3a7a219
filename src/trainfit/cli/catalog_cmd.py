"""`trainfit models` and `trainfit gpus`: list the catalogs."""

from __future__ import annotations

from typing import Annotated

import typer

from trainfit.cli.common import print_json


def models(json_: Annotated[bool, typer.Option("--json", help="JSON output.")] = False) -> None:
    """Models in the embedded catalog, with exact parameter counts and sources."""
    from trainfit.catalog.models import catalog_ids, from_catalog
    from trainfit.memory.params import param_breakdown

    rows = []
    for mid in catalog_ids():
        spec = from_catalog(mid)
        rows.append(
            {
                "id": mid,
                "family": spec.family,
                "params_total": param_breakdown(spec).total,
                "verified": spec.verified,
                "source": spec.source,
            }
        )
    if json_:
        print_json(rows)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Model catalog (exact parameter counts)")
    for c in ("id", "family", "parameters", "verified"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["id"], r["family"], f"{r['params_total']:,}", "yes" if r["verified"] else "NO (unverified)")
    Console(width=140).print(t)


def gpus(json_: Annotated[bool, typer.Option("--json", help="JSON output.")] = False) -> None:
    """GPUs in the embedded catalog, with sources."""
    from dataclasses import asdict

    from trainfit.catalog.gpus import gpu_ids, resolve_gpu

    rows = [asdict(resolve_gpu(g)) for g in gpu_ids()]
    if json_:
        print_json(rows)
        return
    from rich.console import Console
    from rich.table import Table

    from trainfit.report.fmt import gib

    t = Table(title="GPU catalog")
    for c in ("id", "name", "memory", "bf16 dense TFLOP/s", "HBM TB/s", "NVLink"):
        t.add_column(c)
    for r in rows:
        flops = r.get("bf16_dense_flops_per_s")
        bw = r.get("hbm_bytes_per_s")
        t.add_row(
            r["id"], r["name"], gib(r["memory_bytes"], 1),
            f"{flops / 1e12:.0f}" if flops else "?", f"{bw / 1e12:.2f}" if bw else "?",
            "yes" if r.get("nvlink") else "no",
        )
    Console(width=140).print(t)
