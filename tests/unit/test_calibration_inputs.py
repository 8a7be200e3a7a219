"""Calibration inputs: the GPU script's output (the committed CPU dry run) and run records."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from trainfit.calibration import fit_records, from_gpu_output, make_calibration, rates_for, records_from_data
from trainfit.calibration.build import merge
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "gpu_time_dry_run.json"


def _output() -> dict:
    return json.loads(FIXTURE.read_text())


def test_fixture_converts_field_by_field():
    data = _output()
    cal = from_gpu_output(data, where="dry.json", gpu="h200", allow_dry_run=True)
    rates = cal.device("h200").overrides()
    points = data["gemm"]["points"]
    assert len(rates["gemm_points"]) == len(points)
    # the dry run has no shape with m, n, k >= 2048: the best training shape stands in
    assert rates["matmul_flops_per_s"] == max(p["flops_per_s"] for p in points if p["kind"] == "train")
    assert rates["hbm_bytes_per_s"] == data["hbm"]["copy"]["bytes_per_s"]
    assert rates["host_s_per_forward_kernel"] == data["launch"]["forward_module"]["s_per_kernel"]
    assert rates["host_s_per_backward_kernel"] == data["launch"]["backward"]["s_per_kernel"]
    assert rates["device_s_per_kernel_min"] == data["launch"]["device_min_kernel"]["s_per_kernel"]
    assert rates["pcie_bytes_per_s"] == min(data["pcie"]["h2d"]["bytes_per_s"], data["pcie"]["d2h"]["bytes_per_s"])
    assert rates["fp32_matmul_flops_per_s"] == max(p["flops_per_s"] for p in data["gemm"]["fp32_points"] if p["kind"] == "train")
    assert "sm_count" not in rates and "compute_capability" not in rates  # a CPU run has no device properties
    assert cal.notes[0] == "h200 measured: dry.json is a --dry-run on cpu: not GPU figures"
    assert sum("AdamW step" in n for n in cal.notes) == len(data["optimizer"])
    assert sum("decode" in n for n in cal.notes) == len(data["decode"]["points"])
    assert cal.sources[0].startswith("dry.json: gpu_calibrate.py time on no GPU (dry run), torch ")


def test_large_shapes_set_the_matmul_rate():
    data = _output()
    data["gemm"]["points"] += [{"m": 8192, "n": 4096, "k": 4096, "kind": "train", "flops_per_s": 7e14},
                               {"m": 512, "n": 4096, "k": 4096, "kind": "train", "flops_per_s": 8e14},
                               {"m": 8192, "n": 16, "k": 4096, "kind": "lora", "flops_per_s": 9e14}]
    rates = from_gpu_output(data, where="x", gpu="h200", allow_dry_run=True).device("h200").overrides()
    assert rates["matmul_flops_per_s"] == 7e14  # m=512 is not large; LoRA shapes never set it


def test_gpu_named_by_the_measured_device():
    data = _output()
    data.update(dry_run=False, device="cuda")
    data["versions"].update(gpu="NVIDIA H200", sm_count=132, compute_capability="9.0")
    cal = from_gpu_output(data, where="x")
    assert cal.gpu_ids == ("h200",)
    assert cal.device("h200").overrides()["sm_count"] == 132 and cal.device("h200").overrides()["compute_capability"] == "9.0"
    data["versions"]["gpu"] = "NVIDIA H100 80GB HBM3 Super"
    with pytest.raises(CardError, match="x: measured GPU 'NVIDIA H100 80GB HBM3 Super' is not in the GPU catalog; did you mean"):
        from_gpu_output(data, where="x")
    with pytest.raises(CardError, match="no GPU name in the output .* --gpu h200"):
        from_gpu_output(_output(), where="x", allow_dry_run=True)


def test_a_cpu_dry_run_is_no_gpu_measurement():
    """docs/calibration.md: a CPU measurement calibrates no GPU constant; the dry run's 0.015 TFLOP/s filed as
    h200 rates would make every later plan ~2000x slow."""
    with pytest.raises(CardError, match="x: measured on cpu .a --dry-run., not on a GPU: .* --allow-dry-run"):
        from_gpu_output(_output(), where="x", gpu="h200")
    data = _output()
    data.update(dry_run=False, device="cpu")  # a CPU device without the dry-run flag is refused the same
    with pytest.raises(CardError, match="measured on cpu"):
        from_gpu_output(data, where="x", gpu="h200")


def test_gpu_flag_disagreeing_with_the_measured_device_is_refused():
    data = _output()
    data.update(dry_run=False, device="cuda")
    data["versions"]["gpu"] = "NVIDIA H200"
    with pytest.raises(CardError, match="--gpu 'a100-40gb' disagrees with the measured device 'NVIDIA H200' .h200."):
        from_gpu_output(data, where="x", gpu="a100-40gb")
    assert from_gpu_output(data, where="x", gpu="h200").gpu_ids == ("h200",)


def test_failed_sections_become_notes_and_an_empty_output_is_refused():
    data = _output()
    del data["decode"]
    data["errors"] = [{"section": "decode", "error": "OutOfMemoryError: ..."}]
    cal = from_gpu_output(data, where="x", gpu="h200", allow_dry_run=True)
    assert "h200 measured: section 'decode' failed: OutOfMemoryError: ..." in cal.notes
    empty = {k: v for k, v in _output().items() if k not in ("gemm", "hbm", "launch", "pcie")}
    with pytest.raises(CardError, match="x: no measurement in it"):
        from_gpu_output(empty, where="x", gpu="h200", allow_dry_run=True)


def test_merge_keeps_other_gpus_and_replaces_a_measurements_notes():
    first = from_gpu_output(_output(), where="a", gpu="h200", allow_dry_run=True)
    other = make_calibration({"a100-80gb": {"matmul_flops_per_s": 2.5e14}}, notes=["a100-80gb measured: x"])
    again = copy.deepcopy(_output())
    again["hbm"]["copy"]["bytes_per_s"] = 4e12
    merged = merge(merge(first, other), from_gpu_output(again, where="b", gpu="h200", allow_dry_run=True))
    assert merged.gpu_ids == ("a100-80gb", "h200")
    assert merged.device("h200").overrides()["hbm_bytes_per_s"] == 4e12
    assert "a100-80gb measured: x" in merged.notes
    assert not any(n.startswith("h200 measured: a is") for n in merged.notes)  # the old measurement's notes went
    assert merged.sources[-1].startswith("b: ")


# ---------------------------------------------------------------- run records

def _record(model: str, seq: int, step_s: float = 1.0, gpu: str = "h200") -> dict:
    return {"model": model, "scope": "full", "hardware": {"gpu": gpu, "gpus_per_node": 8},
            "batch": {"micro_batch_size": 1, "seq_len": seq}, "record": {"step_s": step_s}}


def _synthetic_predict(card, calibration):
    """A stand-in time model that reads the rates: FLOPs at the matmul rate + kernels at the host cost."""
    from trainfit.plan import gpu_of

    r = rates_for(gpu_of(card), calibration)
    params = {"Qwen/Qwen3-0.6B": 0.6e9, "Qwen/Qwen3-8B": 8e9}[card.model if isinstance(card.model, str) else card.model.id]
    tokens = card.batch.seq_len * card.batch.micro_batch_size
    kernels = 28 * 40
    return 6 * params * tokens / r.matmul_flops_per_s + kernels * (r.host_s_per_forward_kernel + 2 * r.host_s_per_backward_kernel)


def _synthetic_records(matmul_scale: float, host_scale: float):
    h200 = default_rates(resolve_gpu("h200"))
    truth = make_calibration({"h200": {"matmul_flops_per_s": h200.matmul_flops_per_s * matmul_scale,
                                       "host_s_per_forward_kernel": h200.host_s_per_forward_kernel * host_scale,
                                       "host_s_per_backward_kernel": h200.host_s_per_backward_kernel * host_scale}})
    records = []
    for model in ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B"):
        for seq in (256, 8192):
            (rec,) = records_from_data(_record(model, seq), where=f"{model}@{seq}")
            records.append(rec)
    return [type(r)(card=r.card, step_s=_synthetic_predict(r.card, truth), where=r.where) for r in records], h200


def test_fit_recovers_known_scales_with_a_time_model_that_reads_rates():
    records, h200 = _synthetic_records(0.7, 1.6)
    rates, (fit,) = fit_records(records, None, predict=_synthetic_predict)
    assert fit.gpu_id == "h200" and fit.records == 4
    assert fit.matmul_scale == pytest.approx(0.7, rel=0.01)
    assert fit.host_scale == pytest.approx(1.6, rel=0.01)
    assert rates["h200"]["matmul_flops_per_s"] == pytest.approx(h200.matmul_flops_per_s * 0.7, rel=0.01)
    assert rates["h200"]["host_s_per_backward_kernel"] == pytest.approx(h200.host_s_per_backward_kernel * 1.6, rel=0.01)
    assert fit.median_error_before > 0.1 and fit.median_error_after < 0.005
    assert fit.fitted == ("matmul_flops_per_s", "host_s_per_forward_kernel", "host_s_per_backward_kernel")


def test_a_rate_the_time_model_ignores_is_not_fitted():
    records, _ = _synthetic_records(0.7, 1.0)

    def compute_only(card, calibration):
        r = rates_for(resolve_gpu("h200"), calibration)
        return 6e9 * card.batch.seq_len / r.matmul_flops_per_s

    records = [type(r)(card=r.card, step_s=compute_only(r.card, None) / 0.7, where=r.where) for r in records]
    rates, (fit,) = fit_records(records, None, predict=compute_only)
    assert set(rates["h200"]) == {"matmul_flops_per_s"} and fit.host_scale == 1.0
    assert fit.matmul_scale == pytest.approx(0.7, rel=0.005)
    assert fit.notes == ("h200 fit: step time does not depend on host_s_per_forward_kernel, host_s_per_backward_kernel: not fitted",)


def test_fit_refuses_fewer_than_two_records_per_gpu():
    records = records_from_data([_record("Qwen/Qwen3-8B", 2048, 1.0), _record("Qwen/Qwen3-8B", 4096, 2.0),
                                 _record("Qwen/Qwen3-8B", 2048, 3.0, gpu="a100-80gb")], where="r.yaml")
    with pytest.raises(CardError, match="at least 2 records per GPU kind; a100-80gb has 1"):
        fit_records(records, None, predict=_synthetic_predict)


@pytest.mark.parametrize(("data", "message"), [
    ({**_record("Qwen/Qwen3-8B", 2048), "record": {"step_s": 0}}, "r.yaml: record.step_s must be the measured seconds"),
    ({**_record("Qwen/Qwen3-8B", 2048), "record": {}}, "record.step_s must be the measured seconds per optimizer step (a positive number), got None"),
    ({**_record("Qwen/Qwen3-8B", 2048), "scope": "fullest"}, "r.yaml: scope: 'fullest' is not allowed"),
])
def test_bad_records_name_the_file_and_field(data, message):
    with pytest.raises(CardError, match=message.replace("(", r"\(").replace(")", r"\)")):
        records_from_data(data, where="r.yaml")


def test_a_list_of_records_names_each_by_index():
    with pytest.raises(CardError, match=r"r.yaml\[1\]: record.step_s"):
        records_from_data([_record("Qwen/Qwen3-8B", 2048), {**_record("Qwen/Qwen3-8B", 2048), "record": {"step_s": -1}}],
                          where="r.yaml")
    assert math.isclose(records_from_data([_record("Qwen/Qwen3-8B", 2048, 2.5)], where="r")[0].step_s, 2.5)


def test_an_old_record_of_a_no_p2p_machine_is_calibrated_on_the_link_load_record_reads():
    """A record written before the peer-to-peer distinction (no record.interconnect_rule) says pcie for a machine
    whose own P2P matrix refuses a pair: calibrate reads it as pcie_no_p2p, as load_record does, and null without a
    matrix; the input is not changed."""
    from trainfit.spec.enums import Interconnect

    old = {**_record("Qwen/Qwen3-8B", 2048, 2.0, gpu="rtx4090")}
    old["hardware"] = {**old["hardware"], "gpus_per_node": 2, "interconnect": "pcie"}
    old["record"] = {**old["record"], "nvlink": False, "gpus": ["a", "b"], "p2p_matrix": [["X", "NS"], ["NS", "X"]]}
    before = copy.deepcopy(old)
    (rec,) = records_from_data(old, where="r")
    assert rec.card.hardware.interconnect is Interconnect.PCIE_NO_P2P and old == before
    unknown = {**old, "record": {**old["record"], "p2p_matrix": None}}
    assert records_from_data(unknown, where="r")[0].card.hardware.interconnect is None
    ruled = {**old, "record": {**old["record"], "interconnect_rule": "x"}}
    assert records_from_data(ruled, where="r")[0].card.hardware.interconnect is Interconnect.PCIE


@pytest.mark.parametrize("version", [True, 1.0])
def test_the_output_version_is_the_integer_1(version):
    """json's true and 1.0 compare equal to 1 in Python; the reader takes the integer only."""
    data = _output()
    data["trainfit_gpu_time"] = version
    with pytest.raises(CardError, match=f"x: trainfit_gpu_time must be 1, got {version!r}"):
        from_gpu_output(data, where="x", gpu="h200", allow_dry_run=True)


def test_split_records_skips_step_times_and_measure_cases_of_another_gpu():
    """record.versions.gpu (and a measure output's versions.gpu) naming another catalog GPU than the card's:
    skipped with the reason; an unknown name or the card's own is kept."""
    from trainfit.calibration.build import GPU_RAW, RUN_RECORDS, split_records

    def rec(name):
        r = _record("Qwen/Qwen3-8B", 2048, 2.0, gpu="h200")
        r["record"]["versions"] = {"gpu": name}
        return r

    times, _, notes = split_records([rec("NVIDIA H200"), rec("NVIDIA A100-SXM4-40GB"), rec("Some Future GPU")],
                                    RUN_RECORDS, "r.yaml")
    assert [t.where for t in times] == ["r.yaml[0]", "r.yaml[2]"]
    assert notes == ["r.yaml[1]: measured on 'NVIDIA A100-SXM4-40GB' (a100-40gb), not the card's h200: calibrates "
                     "no h200 constant (skipped)"]
    raw = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu_raw"
                      / "heldout2.json").read_text())
    _, mems, notes = split_records(raw, GPU_RAW, "raw.json")
    assert mems and not notes  # measured on NVIDIA H200, the cards' h200
    raw["versions"]["gpu"] = "NVIDIA A100-SXM4-80GB"
    times, mems, notes = split_records(raw, GPU_RAW, "raw.json")
    assert not times and not mems and notes and all("(a100-80gb), not the card's h200" in n for n in notes)
