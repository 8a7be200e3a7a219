"""GPUs without bf16 (V100): bf16 cards are refused in one line and the fp16 tensor-core rate times fp16; the fp16
rate equals bf16 elsewhere; the H100 NVL and RTX 4090 48GB entries. CLI side: tests/cli/test_cli_no_bf16_gpu.py."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import GpuSpec, gpu_ids, resolve_gpu
from trainfit.compute.rates import NVLINK_BUS_FRACTION, default_rates
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict

V100 = "v100-sxm2-32gb"


def _card(gpu: str, **precision) -> dict:
    return {"model": {"params": 1e9}, "hardware": {"gpu": gpu, "gpus_per_node": 8}, "precision": precision}


def test_fp16_rate_equals_bf16_where_the_entry_omits_it():
    for gid in gpu_ids():
        g = resolve_gpu(gid)
        if g.bf16_dense_flops_per_s:
            assert g.fp16_dense_flops_per_s == g.bf16_dense_flops_per_s, gid
            assert g.supports_bf16, gid
    v = resolve_gpu(V100)
    assert v.bf16_dense_flops_per_s is None and v.fp16_dense_flops_per_s == 125e12
    assert not v.supports_bf16 and v.half_dense_flops_per_s == 125e12


def test_custom_card_without_capability_is_not_refused():
    g = GpuSpec(id="x", name="x", memory_bytes=2**30, memory_label="1 GiB")
    assert g.supports_bf16 and g.half_dense_flops_per_s is None
    load_card_dict({"model": {"params": 1e9}, "hardware": {"gpu": "custom", "gpu_memory_gib": 32}})


@pytest.mark.parametrize(("precision", "field", "default"), [
    ({}, "compute", True),
    ({"compute": "bf16", "weights": "fp16"}, "compute", False),
    ({"compute": "fp16"}, "weights", True),
    ({"compute": "fp32", "weights": "bf16"}, "weights", False),
])
def test_bf16_on_v100_is_refused_naming_the_field_and_allowed_values(precision, field, default):
    with pytest.raises(CardError) as exc:
        load_card_dict(_card(V100, **precision))
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"precision.{field}: bf16")
    assert ("(the default)" in msg) == default
    assert f"{V100} (7.0) supports fp16 | fp32" in msg and "8.0+" in msg


@pytest.mark.parametrize("precision", [{"compute": "fp16", "weights": "fp16"}, {"compute": "fp32", "weights": "fp32"},
                                       {"compute": "fp16", "weights": "fp32"}])
def test_fp16_and_fp32_on_v100_validate(precision):
    assert load_card_dict(_card(V100, **precision)).hardware.gpu == V100


def test_bf16_elsewhere_unchanged():
    for gid in ("a100-40gb", "rtx3090", "mi300x", "h100-nvl", "rtx4090-48gb"):
        load_card_dict(_card(gid))


def test_h100_nvl_entry():
    g = resolve_gpu("H100 NVL/96GB")
    assert g.id == "h100-nvl" and resolve_gpu("NVIDIA H100 NVL").id == "h100-nvl"
    assert g.memory_bytes == 95830 * 2**20 and "94 GB" in g.memory_label
    assert g.bf16_dense_flops_per_s == 835.5e12 and g.fp8_dense_flops_per_s == 1670.5e12
    assert g.hbm_bytes_per_s == 3.9e12 and g.nvlink_bytes_per_s == 600e9 and g.pcie_gen == 5
    assert g.sm_count == 132 and g.compute_capability == "9.0"
    # same GH100 as the SXM at 400 W instead of 700 W: a lower rated bf16 peak, more memory
    sxm = resolve_gpu("h100-sxm")
    assert g.bf16_dense_flops_per_s < sxm.bf16_dense_flops_per_s and g.memory_bytes > sxm.memory_bytes
    assert "nvidia.com" in g.source and "bridge" in g.notes


def test_rtx4090_48gb_entry():
    g, base = resolve_gpu("RTX 4090 48GB"), resolve_gpu("rtx4090")
    assert g.id == "rtx4090-48gb" and resolve_gpu("4090 48G").id == "rtx4090-48gb"
    assert resolve_gpu("NVIDIA GeForce RTX 4090").id == "rtx4090"  # nvidia-smi's name stays the 24 GB card's
    assert 44 < g.memory_gib < 48 and g.memory_bytes > 1.8 * base.memory_bytes
    for f in ("bf16_dense_flops_per_s", "fp8_dense_flops_per_s", "hbm_bytes_per_s", "sm_count", "fp32_flops_per_s",
              "compute_capability", "pcie_bytes_per_s", "nvlink"):
        assert getattr(g, f) == getattr(base, f), f
    assert "2025-03-27" in g.source and "Less certain" in g.notes
    r = default_rates(g)
    assert not r.p2p  # GeForce driver: no PCIe peer-to-peer, as the 24 GB card
    assert r.intra_node_bus_bytes_per_s == default_rates(base).intra_node_bus_bytes_per_s


def test_fabric_assumptions_are_said_for_mi300x_and_h100_nvl():
    mi = default_rates(resolve_gpu("mi300x"))
    assert any("Infinity Fabric" in s and "RCCL" in s for s in mi.sources)
    assert mi.intra_node_bus_bytes_per_s == pytest.approx(896e9 / 2 * NVLINK_BUS_FRACTION)
    for gid in ("h100-nvl", "h100-pcie", "rtx-a6000", "rtx3090"):  # NVLink bridges join pairs only
        assert any("pairs" in s for s in default_rates(resolve_gpu(gid)).sources), gid
    assert not any("fabric" in s.lower() for s in default_rates(resolve_gpu("h100-sxm")).sources)


def test_h100_nvl_prices_are_dated_and_sourced():
    from trainfit.catalog.prices import catalog_price_table

    table = catalog_price_table()
    rows = [p for p in table.entries if p.gpu == "h100-nvl"]
    assert {p.id for p in rows} == {"runpod-secure-h100-nvl", "runpod-community-h100-nvl"}
    assert all(p.currency == "USD" and p.as_of == "2026-11-09" and p.source.startswith("https://") for p in rows)
    assert table.for_gpu("h100-nvl").per_gpu_hour == 2.59  # the cheapest
