"""GPU catalog entries added together: each loads under its nvidia-smi / torch name, its figures agree with
the sparse figure its source quotes and with its memory label, its time-model keys are the ones its docstrings cite,
and the default card plans on it with a step time."""

from __future__ import annotations

import re

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import _BRIDGED_PAIRS, _FABRIC_NOTES, _FP8_MATMUL_FRACTION, _MAMF_FRACTION, default_rates

MiB = 2**20
NEW = ("a100-pcie-40gb", "a100-pcie-80gb", "l4", "t4", "a40", "rtx-6000-ada", "h200-nvl", "b300", "mi325x", "mi355x",
       "v100-sxm2-16gb", "v100-pcie-32gb", "v100-pcie-16gb", "rtx-pro-6000", "gb300")
NO_BF16 = ("t4", "v100-sxm2-16gb", "v100-pcie-32gb", "v100-pcie-16gb")

# (id, name as nvidia-smi / torch print it)
NAMES = [
    ("a100-pcie-40gb", "NVIDIA A100-PCIE-40GB"), ("a100-pcie-80gb", "NVIDIA A100 80GB PCIe"), ("l4", "NVIDIA L4"),
    ("t4", "Tesla T4"), ("a40", "NVIDIA A40"), ("rtx-6000-ada", "NVIDIA RTX 6000 Ada Generation"),
    ("h200-nvl", "NVIDIA H200 NVL"), ("b300", "NVIDIA B300 SXM6 AC"), ("mi325x", "AMD Instinct MI325X"),
    ("mi355x", "AMD Instinct MI355X"), ("v100-sxm2-16gb", "Tesla V100-SXM2-16GB"),
    ("v100-pcie-32gb", "Tesla V100-PCIE-32GB"), ("v100-pcie-16gb", "Tesla V100-PCIE-16GB"),
    ("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
    ("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition"), ("gb300", "NVIDIA GB300"),
]

# (id, field, the sparse figure the source quotes in TFLOPS): the stored dense rate is half of it
SPARSE = [
    ("l4", "bf16_dense_flops_per_s", "242*"), ("l4", "fp8_dense_flops_per_s", "485*"),
    ("a40", "bf16_dense_flops_per_s", "299.4*"), ("rtx-6000-ada", "fp8_dense_flops_per_s", "1,457.0"),
    ("h200-nvl", "bf16_dense_flops_per_s", "1,671"), ("h200-nvl", "fp8_dense_flops_per_s", "3,341"),
    ("a100-pcie-40gb", "bf16_dense_flops_per_s", "624*"), ("a100-pcie-80gb", "bf16_dense_flops_per_s", "624*"),
    ("rtx-pro-6000", "bf16_dense_flops_per_s", "1.01 PFLOPS sparse"),
]


@pytest.mark.parametrize(("gid", "name"), NAMES)
def test_each_new_entry_loads_under_its_device_name(gid, name):
    g = resolve_gpu(name)
    assert g.id == gid and resolve_gpu(gid) is g
    assert g.source.strip() and g.notes.strip() and "read 2026-12-03" in g.source


@pytest.mark.parametrize(("gid", "field", "sparse"), SPARSE)
def test_dense_rate_is_half_the_quoted_sparse_figure(gid, field, sparse):
    g = resolve_gpu(gid)
    assert sparse in g.source
    quoted = (float(sparse.split()[0]) * 1e15 if "PFLOPS" in sparse
              else float(sparse.rstrip("*").replace(",", "")) * 1e12)
    dense = getattr(g, field)
    assert dense < quoted and dense == pytest.approx(quoted / 2, rel=1e-2)


@pytest.mark.parametrize("gid", NEW)
def test_figures_are_consistent(gid):
    g = resolve_gpu(gid)
    # memory: nvidia-smi's (rocm-smi's) total lies between the label's decimal GB and a few % above it, never above
    # the label in GiB
    label_gb = float(re.match(r"(\d+) GB", g.memory_label).group(1))
    assert g.memory_bytes % MiB == 0
    assert 0.93 * label_gb * 1e9 <= g.memory_bytes <= min(1.08 * label_gb * 1e9, label_gb * 2**30), gid
    # tensor rates beat the CUDA cores; fp8 (where present) is twice the 16-bit rate
    assert g.fp32_flops_per_s < g.half_dense_flops_per_s, gid
    if g.fp8_dense_flops_per_s:
        assert g.fp8_dense_flops_per_s == pytest.approx(2 * g.bf16_dense_flops_per_s, rel=0.01), gid
    assert (gid in NO_BF16) == (not g.supports_bf16) == (g.bf16_dense_flops_per_s is None), gid
    assert g.nvlink == (g.nvlink_bytes_per_s is not None), gid
    if g.l2_read_bytes_per_s:
        assert g.l2_resident_bytes <= g.l2_bytes and g.l2_read_bytes_per_s > g.hbm_bytes_per_s


def test_variants_share_their_die_with_the_existing_entries():
    for pcie, sxm in (("a100-pcie-40gb", "a100-40gb"), ("a100-pcie-80gb", "a100-80gb")):
        p, s = resolve_gpu(pcie), resolve_gpu(sxm)
        for f in ("bf16_dense_flops_per_s", "sm_count", "fp32_flops_per_s", "compute_capability", "l2_bytes"):
            assert getattr(p, f) == getattr(s, f), (pcie, f)
        assert p.tdp_w < s.tdp_w and p.memory_bytes == s.memory_bytes
    assert resolve_gpu("a100-pcie-80gb").hbm_bytes_per_s == 1935e9 < resolve_gpu("a100-80gb").hbm_bytes_per_s
    nvl, h200 = resolve_gpu("h200-nvl"), resolve_gpu("h200")
    assert nvl.memory_bytes == h200.memory_bytes and nvl.hbm_bytes_per_s == h200.hbm_bytes_per_s
    assert nvl.bf16_dense_flops_per_s < h200.bf16_dense_flops_per_s and nvl.tdp_w < h200.tdp_w
    b300, b200 = resolve_gpu("b300"), resolve_gpu("b200")
    assert b300.bf16_dense_flops_per_s == b200.bf16_dense_flops_per_s and b300.memory_bytes > b200.memory_bytes
    assert b300.compute_capability == "10.3"
    gb300, gb200 = resolve_gpu("gb300"), resolve_gpu("gb200")
    for f in ("bf16_dense_flops_per_s", "fp8_dense_flops_per_s", "hbm_bytes_per_s", "nvlink_bytes_per_s",
              "host_link_bytes_per_s", "sm_count", "fp32_flops_per_s", "pcie_gen"):
        assert getattr(gb300, f) == getattr(gb200, f), f
    assert gb300.memory_bytes > gb200.memory_bytes and gb300.compute_capability == "10.3"
    mi325, mi300 = resolve_gpu("mi325x"), resolve_gpu("mi300x")
    for f in ("bf16_dense_flops_per_s", "fp8_dense_flops_per_s", "sm_count", "fp32_flops_per_s", "nvlink_bytes_per_s"):
        assert getattr(mi325, f) == getattr(mi300, f), f
    for v in ("v100-sxm2-16gb", "v100-pcie-32gb", "v100-pcie-16gb"):
        assert resolve_gpu(v).sm_count == resolve_gpu("v100-sxm2-32gb").sm_count == 80
    assert resolve_gpu("v100-pcie-32gb").fp16_dense_flops_per_s == 112e12 and not resolve_gpu("v100-pcie-32gb").nvlink


def test_time_model_keys():
    # matmul fractions from the MAMF table's own rows (measured MAMF / catalog peak)
    assert _MAMF_FRACTION["a100-pcie-40gb"] == _MAMF_FRACTION["a100-pcie-80gb"] == 0.811
    assert _MAMF_FRACTION["b300"] == 0.786 and _FP8_MATMUL_FRACTION["b300"][0] == 0.745
    assert _MAMF_FRACTION["mi325x"] * 1307.4 == pytest.approx(784.9, rel=2e-3)
    assert _MAMF_FRACTION["mi355x"] * 2500 == pytest.approx(1565.0, rel=2e-3)
    # published torch.mm measurements of the low-power cards and the V100 SXM2 16 GB
    l4, t4, v100 = (default_rates(resolve_gpu(g)) for g in ("l4", "t4", "v100-sxm2-16gb"))
    assert l4.matmul_flops_per_s == pytest.approx(70.89e12, rel=2e-3) and "70.89" in l4.sources[0]
    assert t4.matmul_flops_per_s == pytest.approx(41.93e12, rel=2e-3) and "fp16" in t4.sources[0]
    assert v100.matmul_flops_per_s == pytest.approx(94.84e12, rel=2e-3)
    pro = default_rates(resolve_gpu("rtx-pro-6000"))
    assert pro.matmul_flops_per_s == pytest.approx((417.98e12 + 409.42e12) / 2, rel=2e-3) and pro.p2p
    # the Ada / Ampere-professional / NVL / Volta PCIe cards without a measurement take the default, stated
    for gid in ("rtx-6000-ada", "a40", "h200-nvl", "v100-pcie-32gb"):
        assert gid not in _MAMF_FRACTION
        assert "default" in default_rates(resolve_gpu(gid)).sources[0]
    # bridged NVLink: not every pair on NVLink; AMD fabric noted
    for gid in ("a100-pcie-40gb", "a100-pcie-80gb", "a40", "h200-nvl"):
        assert gid in _BRIDGED_PAIRS and not default_rates(resolve_gpu(gid)).nvlink
    assert default_rates(resolve_gpu("b300")).nvlink
    assert {"mi325x", "mi355x"} <= set(_FABRIC_NOTES)
    # GB300 NVL72: the GB200's keys (matmul fraction, 72-GPU NVLink domain, Grace host, one 800 Gb/s NIC per GPU)
    from trainfit.compute.rates import NVLINK_DOMAIN_GPUS
    from trainfit.compute.te_host import GRACE_HOST_GPUS
    from trainfit.plan.time import NIC_GBPS_BY_GPU

    assert _MAMF_FRACTION["gb300"] == _MAMF_FRACTION["gb200"] and NVLINK_DOMAIN_GPUS["gb300"] == 72
    assert "gb300" in GRACE_HOST_GPUS and NIC_GBPS_BY_GPU["gb300"] == NIC_GBPS_BY_GPU["b300"] == 800
    # the RTX 6000 Ada takes the L40S's L2 rate (the same AD102 configuration)
    assert default_rates(resolve_gpu("rtx-6000-ada")).l2_read_bytes_per_s == resolve_gpu("l40s").l2_read_bytes_per_s
    # no fp8 rate where there are no fp8 tensor cores
    for gid in ("a100-pcie-40gb", "a40", "t4", "v100-sxm2-16gb"):
        assert default_rates(resolve_gpu(gid)).fp8_matmul_flops_per_s is None


@pytest.mark.parametrize("gid", NEW)
def test_default_plan_runs_and_times_a_step(gid):
    import trainfit

    overrides = {"hardware.gpu": gid}
    if gid in NO_BF16:  # Volta / Turing: bf16 is refused, fp16 allowed
        overrides |= {"precision.compute": "fp16", "precision.weights": "fp16"}
    p = trainfit.plan(None, overrides=overrides, calibration=None)
    assert p.card.hardware.gpu == gid
    assert p.step_seconds > 0 and p.step_seconds < 3600


@pytest.mark.parametrize("gpu", ["b300", "gb300"])
def test_blackwell_ultra_notes_do_not_call_the_fp4_figure_half_the_sparse_one(gpu):
    """The stored dense FP4 (13,125 / 15,000 TFLOPS) is the published dense figure, not half the sparse one (18,000 /
    20,000): the notes say so, and say only BF16 / FP8 are the halved figures."""
    g = resolve_gpu(gpu)
    assert g.fp4_dense_flops_per_s in (13.125e15, 15e15)
    assert "Dense values stored (half the sparsity figures)" not in g.notes
    assert "not half the" in g.notes and "not used here" not in g.notes
