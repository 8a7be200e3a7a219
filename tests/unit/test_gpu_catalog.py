"""The GPU catalog: every file parses, names a source, and the figures are self-consistent."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from trainfit.catalog.gpus import GpuSpec, custom_gpu, gpu_ids, resolve_gpu
from trainfit.errors import CatalogError

MiB = 2**20
EXPECTED_IDS = {
    "rtx3090", "rtx4090", "rtx5090", "a10", "l40s", "a100-40gb", "a100-80gb",
    "h100-sxm", "h100-pcie", "h20", "h200", "b200",
    "a800-80gb", "h800", "l20", "rtx4090d", "rtx-a6000", "v100-sxm2-32gb", "gb200", "mi300x", "l40",
    "h100-nvl", "rtx4090-48gb", "gh200",
    # (tests/unit/test_catalog_gpus_added.py)
    "a100-pcie-40gb", "a100-pcie-80gb", "l4", "t4", "a40", "rtx-6000-ada", "h200-nvl", "b300", "mi325x", "mi355x",
    "v100-sxm2-16gb", "v100-pcie-32gb", "v100-pcie-16gb", "rtx-pro-6000", "gb300",
    "h100-sxm-hbm2e-96gb",  # Meta's Grand Teton H100 (torchtitan's and torchao's benchmark hosts)
    "a10g",  # AWS g5's A10 variant (tests/unit/test_catalog_gpu_a10g.py)
}
NO_BF16 = {"v100-sxm2-32gb", "v100-sxm2-16gb", "v100-pcie-32gb", "v100-pcie-16gb", "t4"}  # Volta, Turing: no bf16


def _raw() -> list[dict]:
    files = [f for f in resources.files("trainfit.catalog.data.gpus").iterdir() if f.name.endswith(".json")]
    return [json.loads(f.read_text()) for f in files]


def test_every_file_parses_and_names_a_source():
    raw = _raw()
    assert len(raw) == len(EXPECTED_IDS)
    for entry in raw:
        assert entry["source"].strip(), entry["id"]
        assert entry["memory_label"].strip(), entry["id"]
        assert entry["memory_bytes"] % MiB == 0, entry["id"]  # nvidia-smi reports whole MiB


def test_ids_unique_and_complete():
    raw = _raw()
    ids = [e["id"] for e in raw]
    assert len(ids) == len(set(ids))
    assert set(gpu_ids()) == EXPECTED_IDS


def test_aliases_do_not_collide_across_cards():
    seen: dict[str, str] = {}
    for e in _raw():
        for name in [e["id"], *e["aliases"]]:
            key = name.lower()
            assert seen.get(key, e["id"]) == e["id"], f"{name} is used by {seen[key]} and {e['id']}"
            seen[key] = e["id"]


@pytest.mark.parametrize(
    ("gid", "mib"),
    [
        ("rtx3090", 24576), ("rtx4090", 24564), ("rtx5090", 32607), ("a10", 23028), ("a10g", 22731), ("l40s", 46068),
        ("a100-40gb", 40960), ("a100-80gb", 81920), ("h100-sxm", 81559), ("h100-pcie", 81559),
        ("h20", 97871), ("h200", 143771), ("b200", 183359),
        ("a800-80gb", 81920), ("h800", 81559), ("l20", 46068), ("rtx4090d", 24564), ("rtx-a6000", 49140),
        ("v100-sxm2-32gb", 32768), ("gb200", 189471), ("l40", 46068),
        ("mi300x", 196592),  # rocm-smi's VRAM total, the AMD counterpart of nvidia-smi's
        ("h100-nvl", 95830), ("rtx4090-48gb", 46068),  # the 48 GB 4090 with ECC on, as dumped
        ("gh200", 97871),  # the 96 GB HBM3 part
        ("a100-pcie-40gb", 40960), ("a100-pcie-80gb", 81920), ("l4", 23034), ("t4", 15360), ("a40", 46068),
        ("rtx-6000-ada", 49140), ("h200-nvl", 143771), ("b300", 275040), ("v100-sxm2-16gb", 16384),
        ("v100-pcie-32gb", 32768), ("v100-pcie-16gb", 16384), ("rtx-pro-6000", 97887), ("gb300", 284208),
        ("mi325x", 262144), ("mi355x", 294912),  # the ROCm specification table's GiB (no rocm-smi total published)
        ("h100-sxm-hbm2e-96gb", 97871),  # as the other 96 GB Hopper parts (h20, gh200)
    ],
)
def test_memory_as_nvidia_smi_reports(gid, mib):
    assert resolve_gpu(gid).memory_bytes == mib * MiB


def test_rtx4090_is_24gb_class():
    g = resolve_gpu("rtx4090")
    assert 24e9 < g.memory_bytes < 26e9          # 24 GB marketing, 23.99 GiB reported
    assert g.memory_gib == pytest.approx(23.988, abs=1e-3)
    assert g.nvlink is False


def test_a100_40gb():
    g = resolve_gpu("a100-40gb")
    assert g.memory_bytes == 42949672960
    assert g.bf16_dense_flops_per_s == 312e12
    assert g.hbm_bytes_per_s == 1.555e12
    assert g.nvlink and g.nvlink_bytes_per_s == 600e9


def test_torch_total_is_below_nvidia_smi_total():
    for gid in gpu_ids():
        g = resolve_gpu(gid)
        if g.torch_total_memory_bytes is not None:
            assert 0.95 * g.memory_bytes < g.torch_total_memory_bytes < g.memory_bytes, gid


def test_rates_are_plausible_dense_figures():
    for gid in gpu_ids():
        g = resolve_gpu(gid)
        if gid in NO_BF16:
            assert g.bf16_dense_flops_per_s is None and g.fp8_dense_flops_per_s is None, gid
            assert "bf16" in g.notes.lower(), gid
        else:
            assert 50e12 <= g.bf16_dense_flops_per_s <= 3e15, gid
        assert 250e9 <= g.hbm_bytes_per_s <= 10e12, gid  # the L4's GDDR6 is 300 GB/s, the T4's 320
        if g.fp8_dense_flops_per_s is not None:
            assert g.fp8_dense_flops_per_s == pytest.approx(2 * g.bf16_dense_flops_per_s, rel=0.02), gid
        assert g.nvlink == (g.nvlink_bytes_per_s is not None), gid
        if g.pcie_gen is None:  # GB200, GH200: host link is NVLink-C2C, not PCIe (notes say so)
            assert g.pcie_bytes_per_s is None and "C2C" in g.notes, gid
        else:
            assert g.pcie_bytes_per_s == {3: 16e9, 4: 32e9, 5: 64e9}[g.pcie_gen], gid
    assert resolve_gpu("h100-sxm").bf16_dense_flops_per_s > resolve_gpu("a100-80gb").bf16_dense_flops_per_s


def test_sm_count_and_fp32_rate_on_every_card():
    for gid in gpu_ids():
        g = resolve_gpu(gid)
        assert isinstance(g.sm_count, int) and 40 <= g.sm_count <= 400, gid
        assert 5e12 <= g.fp32_flops_per_s <= 200e12, gid  # the T4: 8.1 TFLOPS
        if g.bf16_dense_flops_per_s is not None:  # tensor/matrix cores beat the CUDA cores
            assert g.fp32_flops_per_s < g.bf16_dense_flops_per_s, gid
        # every entry cites both figures (the number appears in its source or notes)
        cited = g.source + " " + g.notes
        assert str(g.sm_count) in cited, gid
        assert f"{g.fp32_flops_per_s / 1e12:g}" in cited and "FP32" in cited, gid
    assert resolve_gpu("h100-sxm").sm_count == 132 and resolve_gpu("h100-sxm").fp32_flops_per_s == 66.9e12
    assert resolve_gpu("rtx4090").sm_count == 128 and resolve_gpu("rtx4090").fp32_flops_per_s == 82.6e12
    assert resolve_gpu("a100-80gb").sm_count == 108 and resolve_gpu("a100-80gb").fp32_flops_per_s == 19.5e12
    # the 4090 D is the 4090 with 114 of 128 SMs at the same clock
    d, full = resolve_gpu("rtx4090d"), resolve_gpu("rtx4090")
    assert d.fp32_flops_per_s == pytest.approx(full.fp32_flops_per_s * 114 / 128, rel=0.01)
    assert d.bf16_dense_flops_per_s == pytest.approx(full.bf16_dense_flops_per_s * 114 / 128, rel=0.01)


def test_export_variants_differ_from_their_parents_only_in_nvlink():
    for variant, parent, nvlink in (("a800-80gb", "a100-80gb", 400e9), ("h800", "h100-sxm", 400e9)):
        v, p = resolve_gpu(variant), resolve_gpu(parent)
        assert v.nvlink and v.nvlink_bytes_per_s == nvlink < p.nvlink_bytes_per_s
        for f in ("memory_bytes", "hbm_bytes_per_s", "bf16_dense_flops_per_s", "fp8_dense_flops_per_s",
                  "sm_count", "fp32_flops_per_s", "compute_capability"):
            assert getattr(v, f) == getattr(p, f), (variant, f)


def test_mi300x_fabric_is_documented_as_infinity_fabric():
    g = resolve_gpu("AMD Instinct MI300X")
    assert g.id == "mi300x"
    # nvlink=True makes the planner time collectives on the fabric; the notes say it is not NVLink
    assert g.nvlink and g.nvlink_bytes_per_s == 896e9
    assert "Infinity Fabric" in g.notes
    assert g.compute_capability is None and g.compute_capability_source  # not a CUDA device
    assert g.sm_count == 304 and g.fp32_flops_per_s == 163.4e12


def test_new_card_aliases_match_nvidia_smi_names():
    for name, gid in (("NVIDIA A800-SXM4-80GB", "a800-80gb"), ("NVIDIA H800", "h800"), ("NVIDIA L20", "l20"),
                      ("NVIDIA GeForce RTX 4090 D", "rtx4090d"), ("NVIDIA RTX A6000", "rtx-a6000"),
                      ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"), ("NVIDIA GB200", "gb200"),
                      ("NVIDIA L40", "l40")):
        assert resolve_gpu(name).id == gid
    assert resolve_gpu("NVIDIA GeForce RTX 4090").id == "rtx4090"  # the D's aliases do not shadow the 4090


def test_gh200_is_the_96gb_hbm3_hopper_with_its_own_c2c_host_link():
    g = resolve_gpu("NVIDIA GH200 120GB")
    assert g.id == "gh200" and resolve_gpu("NVIDIA GH200 480GB").id == "gh200"
    assert g.memory_label == "96 GB HBM3" and g.hbm_bytes_per_s == 4.0e12
    # the datasheet's dense rates (half its sparsity figures): the H100 SXM's Hopper GPU
    assert g.bf16_dense_flops_per_s == 990e12 and g.fp8_dense_flops_per_s == 1979e12
    h100 = resolve_gpu("h100-sxm")
    assert g.sm_count == h100.sm_count == 132 and g.compute_capability == h100.compute_capability == "9.0"
    assert g.nvlink and g.nvlink_bytes_per_s == h100.nvlink_bytes_per_s == 900e9
    # one GPU per superchip: all of NVLink-C2C's 900 GB/s (bidirectional) is its own, 450 GB/s each way; GB200 shares it
    assert g.pcie_gen is None and g.host_link_bytes_per_s == 450e9 == 2 * resolve_gpu("gb200").host_link_bytes_per_s
    assert "nvdam.widen.net" in g.source and "96GB HBM3" in g.source


def test_grand_teton_h100_is_the_h100_sxm_die_with_96gb_hbm2e():
    """torchtitan's and torchao's H100 benchmark hosts: 96GB HBM2e at 2.4 TB/s, 700 W TDP (run at a 500 W limit),
    torch total 95 GiB; everything else the H100 SXM's, so a card moved onto it keeps its step time."""
    g, h100 = resolve_gpu("Grand Teton H100"), resolve_gpu("h100-sxm")
    assert g.id == "h100-sxm-hbm2e-96gb" and g.memory_label == "96 GB HBM2e"
    assert g.hbm_bytes_per_s == 2.4e12 and g.tdp_w == 700
    assert abs(g.torch_total_memory_bytes / 2**30 - 95.0) < 0.01  # torchtitan's 48.87 GiB = 51.44 % of capacity
    assert g.memory_bytes == resolve_gpu("h20").memory_bytes == resolve_gpu("gh200").memory_bytes
    assert g.memory_bytes - h100.memory_bytes > 15 * 2**30
    for f in ("bf16_dense_flops_per_s", "fp8_dense_flops_per_s", "nvlink", "nvlink_bytes_per_s", "pcie_bytes_per_s",
              "sm_count", "fp32_flops_per_s", "compute_capability", "l2_bytes", "l2_resident_bytes",
              "l2_read_bytes_per_s"):
        assert getattr(g, f) == getattr(h100, f), f
    assert "96GB HBM2e" in g.source and "pull/800" in g.source


def test_loader_refuses_unknown_keys():
    from trainfit.catalog.gpus import _spec

    entry = {"id": "x", "name": "x", "memory_bytes": 2**30, "memory_label": "1 GiB", "sm_cnt": 1}
    with pytest.raises(CatalogError, match="unknown keys"):
        _spec(entry)
    del entry["sm_cnt"]
    g = _spec(entry)
    assert g.sm_count is None and g.fp32_flops_per_s is None


def test_alias_lookup_case_insensitive():
    assert resolve_gpu("A100-SXM4-40GB").id == "a100-40gb"
    assert resolve_gpu("nvidia geforce rtx 4090").id == "rtx4090"
    assert resolve_gpu("H100").id == "h100-sxm"
    assert isinstance(resolve_gpu("h200"), GpuSpec)


def test_unknown_name_suggests_near_matches():
    with pytest.raises(CatalogError) as e:
        resolve_gpu("h100-sxn")
    msg = str(e.value)
    assert "\n" not in msg
    assert "h100-sxm" in msg and "did you mean" in msg


def test_unknown_name_without_near_match_lists_catalog():
    with pytest.raises(CatalogError) as e:
        resolve_gpu("zzzz")
    assert "rtx4090" in str(e.value)


def test_custom_gpu():
    g = custom_gpu(24)
    assert g.id == "custom-24gib"
    assert g.memory_bytes == 24 * 2**30
    assert g.bf16_dense_flops_per_s is None and g.hbm_bytes_per_s is None and g.tdp_w is None
    assert g.sm_count is None and g.fp32_flops_per_s is None
    assert custom_gpu(12.5).id == "custom-12.5gib"
    with pytest.raises(CatalogError):
        custom_gpu(0)


def test_spec_is_frozen():
    g = resolve_gpu("a10")
    with pytest.raises(AttributeError):
        g.memory_bytes = 1  # type: ignore[misc]


def test_hf_config_of_returns_a_copy_callers_may_edit():
    from trainfit.catalog.models import hf_config_of

    cfg = hf_config_of("Qwen/Qwen2.5-7B")
    cfg["num_hidden_layers"] = 2
    assert hf_config_of("Qwen/Qwen2.5-7B")["num_hidden_layers"] == 28


CUDA_TOTALS_DEVICEQUERY = {
    # thamada/nvidia-smi gls/<file>_deviceQuery.py @b09ef139265ffc7e3c78006346981de8e4d70499, the device's
    # "Total amount of global memory: ... (N bytes)" line (cudaDeviceProp.totalGlobalMem, torch's total_memory)
    "a100-80gb": 85_100_068_864,  # A100SXMx4 l.13
    "a40": 47_608_692_736,  # A40x10 l.13
    "h100-nvl": 99_861_594_112,  # H100NVLx2 l.14
    "l4": 23_570_219_008,  # L4 l.13
    "rtx-6000-ada": 51_002_867_712,  # RTX6000Ada_x8 l.13
}


def test_cuda_totals_quoted_from_device_query():
    for gid, total in CUDA_TOTALS_DEVICEQUERY.items():
        g = resolve_gpu(gid)
        assert g.torch_total_memory_bytes == total == g.usable_memory_bytes, gid
        assert f"{total} bytes" in g.notes and "b09ef139265ffc7e3c78006346981de8e4d70499" in g.notes, gid


def test_entries_without_a_cuda_total_say_so():
    """Where no published CUDA total is cited the entry keeps nvidia-smi's total for the fit and its notes say so
    (MI300X: torch reports the rocm-smi total, its notes say why the field is null)."""
    for gid in gpu_ids():
        g = resolve_gpu(gid)
        if g.torch_total_memory_bytes is None:
            assert g.usable_memory_bytes == g.memory_bytes, gid
            basis = {"nvidia_smi": "fits are judged against the nvidia-smi total",
                     "spec": "fits are judged against this vendor-spec total",
                     "rocm_smi": "torch_total_memory_bytes is left null"}[g.memory_total_basis.value]
            assert basis in g.notes, gid
            assert ("nvidia-smi total" in g.notes) == (g.memory_total_basis.value == "nvidia_smi"), gid


def test_memory_total_basis_is_validated():
    """A catalog entry's memory_total_basis outside the enum is refused, naming the field and the allowed values."""
    import pytest

    from trainfit.catalog.gpus import _spec
    from trainfit.errors import CatalogError

    entry = {"id": "x", "name": "x", "memory_bytes": 1, "memory_label": "1 B", "memory_total_basis": "rocm"}
    with pytest.raises(CatalogError, match=r"memory_total_basis: 'rocm' is not one of nvidia_smi, rocm_smi, spec"):
        _spec(entry)


CUDA_TOTALS_DEVICEQUERY_GLS = {
    # thamada/gls gls/<file>_deviceQuery.py @e20f22d0eec076b6eeed628fdb1312d84a6fb663 l.13, the device's
    # "Total amount of global memory: ... (N bytes)" line, beside the same host's nvidia-smi dump (<file>_smi.py)
    "a10": 23_595_909_120,  # A10: 22503 MBytes
    "gh200": 101_468_602_368,  # GH200: 96768 MBytes, 'NVIDIA GH200 480GB'
    "rtx5090": 33_680_457_728,  # RTX5090: 32120 MBytes
    "v100-sxm2-16gb": 16_928_342_016,  # V100_x8: 16144 MBytes
}


def test_cuda_totals_quoted_from_gls_device_query():
    for gid, total in CUDA_TOTALS_DEVICEQUERY_GLS.items():
        g = resolve_gpu(gid)
        assert g.torch_total_memory_bytes == total == g.usable_memory_bytes, gid
        assert f"({total} bytes)" in g.notes and "e20f22d0eec076b6eeed628fdb1312d84a6fb663 l.13" in g.notes, gid


def test_h20_cuda_total_is_the_published_device_properties_mib():
    """_CudaDeviceProperties(name='NVIDIA H20', ..., total_memory=97285MB) (alipay/PainlessInferenceAcceleration
    flood/flood/ops/seg_attn.py@78c9b002 l.624): torch's repr is whole MiB; the H20-derived 96 GB Grand Teton entry
    takes the same figure."""
    g = resolve_gpu("h20")
    assert g.torch_total_memory_bytes == 97285 * 2**20 == resolve_gpu("h100-sxm-hbm2e-96gb").torch_total_memory_bytes
    assert "total_memory=97285MB" in g.notes and "78c9b002749f86a2dc601af3d02c5eaf6cc91507 l.624" in g.notes


def test_t4_published_totals_disagree_so_none_is_stored():
    """'total capacity of 14.56 GiB' (GCP T4s, 2025) and '14.75 GiB' (a Colab T4, 2024) are ~190 MiB apart with no
    nvidia-smi total from the same hosts: the entry keeps nvidia-smi's total and quotes both."""
    g = resolve_gpu("t4")
    assert g.torch_total_memory_bytes is None and g.usable_memory_bytes == g.memory_bytes == 15360 * 2**20
    assert "total capacity of 14.56 GiB" in g.notes and "'14.75 GiB'" in g.notes and "neither is stored" in g.notes


def test_a6000_ecc_on_device_query_is_not_taken_for_the_ecc_off_entry():
    """The one published RTX A6000 deviceQuery (45619 MBytes) ran with ECC on (nvidia-smi 46068 MiB); the entry is the
    ECC-off card (49140 MiB), so the figure is quoted but not stored."""
    g = resolve_gpu("rtx-a6000")
    assert g.torch_total_memory_bytes is None and g.memory_bytes == 49140 * 2**20
    assert "47834660864 bytes" in g.notes and "not stored" in g.notes
