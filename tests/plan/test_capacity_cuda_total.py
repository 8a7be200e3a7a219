"""FITS is judged against what CUDA reports as the device's total memory (the catalog's
``torch_total_memory_bytes``: ``torch.cuda.get_device_properties().total_memory``), not nvidia-smi's nominal total:
the caching allocator can never reserve more than the CUDA total. The catalog's h100-sxm entry quotes 85,027,979,264
bytes (79.19 GiB) against nvidia-smi's 81,559 MiB (79.65 GiB); its rtx4090 entry quotes the OOM message "total
capacity of 23.65 GiB" against nvidia-smi's 24,564 MiB (23.99 GiB)."""

import json

from trainfit.catalog.gpus import resolve_gpu as gpu_by_id
from trainfit.cli.main import main

H100_TP2 = ["plan", "--gpu", "h100-sxm", "--gpus", "2", "--mbs", "8", "--grad-accum", "1", "--no-ckpt",
            "--set", "parallel.tensor_parallel=2", "--set", "parallel.sequence_parallel=true",
            "--set", "parallel.tensor_parallel_impl=megatron", "--strategy", "fsdp"]
RTX4090_LORA = ["plan", "--gpu", "rtx4090", "--gpus", "2", "--scope", "lora", "--strategy", "ddp", "--mbs", "4",
                "--set", "loss.chunked=true", "--set", "parallel.tensor_parallel_impl=megatron"]


def _json(argv, capsys):
    main(argv + ["--json"])
    return json.loads(capsys.readouterr().out)


def test_h100_capacity_is_the_cuda_total(capsys):
    obj = _json(H100_TP2, capsys)
    assert obj["gpu_capacity_bytes"] == gpu_by_id("h100-sxm").torch_total_memory_bytes == 85_027_979_264
    assert obj["gpu_capacity_basis"] == "cuda_total"
    peak = obj["peak_gpu_bytes"]["device"]
    assert 85_027_979_264 < peak <= gpu_by_id("h100-sxm").memory_bytes  # fit the nominal, not the CUDA total
    assert obj["fits"] is False
    assert obj["headroom_bytes"] == 85_027_979_264 - peak


def test_rtx4090_capacity_is_the_cuda_total(capsys):
    obj = _json(RTX4090_LORA, capsys)
    assert obj["gpu_capacity_bytes"] == gpu_by_id("rtx4090").torch_total_memory_bytes
    assert obj["peak_gpu_bytes"]["device"] > obj["gpu_capacity_bytes"]
    assert obj["fits"] is False


def test_verdict_line_names_the_figure(capsys):
    main(H100_TP2)
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out and "of 79.19 GiB per GPU (CUDA total)" in out


def test_without_a_cuda_total_the_line_says_nominal(capsys):
    gpu = gpu_by_id("rtx-a6000")
    assert gpu.torch_total_memory_bytes is None
    main(["plan", "--gpu", "rtx-a6000", "--scope", "qlora", "--model", "Qwen/Qwen3-0.6B"])
    out = capsys.readouterr().out
    assert "GiB per GPU (nvidia-smi total; no published CUDA total)" in out


def test_fit_search_judges_the_same_capacity():
    """``trainfit fit`` ranks on the plan's own capacity: the reproducer's layout is a non-fitting row."""
    from trainfit.cli.common import default_card_dict
    from trainfit.search import search

    space = {"hardware.gpu": ["h100-sxm"], "hardware.gpus_per_node": [2], "batch.micro_batch_size": [8],
             "batch.grad_accum": [1], "parallel.gradient_checkpointing": [False], "parallel.strategy": ["fsdp"],
             "parallel.tensor_parallel": [2], "parallel.sequence_parallel": [True],
             "parallel.tensor_parallel_impl": ["megatron"]}
    (row,) = search(default_card_dict(), space, workers=1).rows
    assert 85_027_979_264 < row.peak_device_bytes <= resolve_gpu_nominal("h100-sxm")
    assert row.fits is False
    assert row.headroom_bytes == 85_027_979_264 - row.peak_device_bytes


def resolve_gpu_nominal(gpu_id: str) -> int:
    return gpu_by_id(gpu_id).memory_bytes


def test_paged_states_stay_resident_up_to_the_cuda_total():
    """Managed (paged) optimizer states stay resident only in memory CUDA can hand out: the plan's room ends at the
    same CUDA total that FITS is judged against, so a plan whose states page to host fits (it filled the card to
    nvidia-smi's total before, and then read over the CUDA total)."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    card = {"model": "Qwen/Qwen3-4B", "scope": "full", "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True},
            "precision": {"optimizer": "paged_adamw"}, "batch": {"micro_batch_size": 1, "seq_len": 2048}}
    plan = make_plan(load_card_dict(card))
    assert plan.peak.paged_resident > 0
    assert plan.peak.device == plan.capacity_bytes == gpu_by_id("rtx4090").torch_total_memory_bytes
    assert plan.fits


def test_size_reports_the_capacity_its_fits_are_judged_against():
    """``trainfit size`` prints 'training on 1 x <GPU> (X GiB)' beside each scope's fits verdict (``plan.fits``):
    X is the same CUDA total."""
    from trainfit.size import model_size

    s = model_size("Qwen/Qwen3-0.6B", tokens=512, gpu="h100-sxm")
    assert s.gpu_capacity_bytes == 85_027_979_264


def test_amd_spec_total_is_labelled_as_the_vendor_spec(capsys):
    """MI325X and MI355X hold the ROCm specification table's 256 / 288 GiB (their catalog notes: no published
    rocm-smi total was found), not an nvidia-smi reading: the verdict line and --json say so (``spec_total``)."""
    for gid in ("mi325x", "mi355x"):
        assert gpu_by_id(gid).memory_total_basis.value == "spec"
        main(["plan", "--gpu", gid, "--model", "Qwen/Qwen3-0.6B"])
        out = capsys.readouterr().out
        assert "GiB per GPU (vendor spec total; no published rocm-smi or torch total)" in out and "nvidia-smi total" not in out
        assert _json(["plan", "--gpu", gid, "--model", "Qwen/Qwen3-0.6B"], capsys)["gpu_capacity_basis"] == "spec_total"


def test_mi300x_total_is_rocm_smis(capsys):
    """MI300X holds 196,592 MiB, the VRAM total rocm-smi prints and torch reports as total_memory (ROCm/ROCm issue
    #4203, cited in its catalog entry), not the 192 GiB spec: ``rocm_smi_total``."""
    assert gpu_by_id("mi300x").memory_bytes == 196_592 * 2**20
    main(["plan", "--gpu", "mi300x", "--model", "Qwen/Qwen3-0.6B"])
    out = capsys.readouterr().out
    assert "GiB per GPU (rocm-smi total, torch's total_memory on ROCm)" in out and "nvidia-smi total" not in out
    assert _json(["plan", "--gpu", "mi300x", "--model", "Qwen/Qwen3-0.6B"], capsys)["gpu_capacity_basis"] == "rocm_smi_total"


def test_plan_json_doc_names_every_capacity_basis():
    """docs/plan-json.md lists every value ``gpu_capacity_basis`` can take (plan.result.CAPACITY_BASES)."""
    from pathlib import Path

    from trainfit.plan.result import CAPACITY_BASES

    doc = (Path(__file__).resolve().parents[2] / "docs" / "plan-json.md").read_text()
    line = next(ln for ln in doc.splitlines() if ln.startswith("| `gpu_capacity_basis`"))
    for basis, _ in [("cuda_total", ""), *CAPACITY_BASES.values()]:
        assert f"`{basis}`" in line, basis
