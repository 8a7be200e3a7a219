"""Catalog kinds that report one device name (the 48 GB RTX 4090 reports 'NVIDIA GeForce RTX 4090', as the
24 GB card does: rtx4090-48gb.json's notes cite nvidia-smi dumps of it) are one alias group: calibration
tells them apart by the total memory an output or record carries (``versions.gpu_total_bytes``) and lets
--gpu choose within the group; the watch records the watched device's name and total."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainfit.calibration import from_gpu_output
from trainfit.calibration.build import GPU_RAW, RUN_RECORDS, split_records
from trainfit.calibration.records import measured_elsewhere
from trainfit.catalog.gpus import gpus_named, resolve_device
from trainfit.errors import CardError

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "gpu_time_dry_run.json"
NAME = "NVIDIA GeForce RTX 4090"
TOTAL_48_BYTES = 49140 * 2**20  # nvidia-smi's total of the 48 GB board, ECC off (rtx4090-48gb.json notes)
TOTAL_24_BYTES = 24564 * 2**20  # the 24 GB card's (rtx4090.json notes)


def _record(gpu: str, versions: dict) -> dict:
    return {"model": "Qwen/Qwen3-8B", "scope": "full", "hardware": {"gpu": gpu, "gpus_per_node": 8},
            "batch": {"micro_batch_size": 1, "seq_len": 2048}, "record": {"step_s": 2.0, "versions": versions}}


def test_the_group_comes_from_the_catalog_device_name():
    assert [g.id for g in gpus_named(NAME)] == ["rtx4090", "rtx4090-48gb"]
    assert [g.id for g in gpus_named("rtx4090")] == [g.id for g in gpus_named("rtx4090-48gb")] == ["rtx4090", "rtx4090-48gb"]
    assert [g.id for g in gpus_named("NVIDIA GeForce RTX 4090 D")] == ["rtx4090d"]  # its own name: no group
    assert [g.id for g in gpus_named("NVIDIA H200")] == ["h200"] and gpus_named("Some Future GPU") == ()
    assert [g.id for g in resolve_device(NAME, total_bytes=TOTAL_48_BYTES)] == ["rtx4090-48gb"]
    assert [g.id for g in resolve_device(NAME, total_bytes=23.65 * 2**30)] == ["rtx4090"]  # torch's total, 24 GB card
    assert [g.id for g in resolve_device(NAME, total_bytes=None)] == ["rtx4090", "rtx4090-48gb"]


def test_a_48gb_record_is_kept_and_a_24gb_one_skipped():
    times, _, notes = split_records([_record("rtx4090-48gb", {"gpu": NAME})], RUN_RECORDS, "r.yaml")
    assert len(times) == 1 and notes == []  # was skipped as measured on rtx4090
    times, _, notes = split_records([_record("rtx4090-48gb", {"gpu": NAME, "gpu_total_bytes": TOTAL_48_BYTES})],
                                    RUN_RECORDS, "r.yaml")
    assert len(times) == 1 and notes == []
    times, _, notes = split_records([_record("rtx4090-48gb", {"gpu": NAME, "gpu_total_bytes": TOTAL_24_BYTES})],
                                    RUN_RECORDS, "r.yaml")
    assert times == [] and notes == ["r.yaml[0]: measured on 'NVIDIA GeForce RTX 4090' (rtx4090, 24.0 GiB), not the "
                                     "card's rtx4090-48gb: calibrates no rtx4090-48gb constant (skipped)"]
    assert measured_elsewhere(NAME, gpu_id="rtx4090", total_bytes=TOTAL_48_BYTES).startswith(
        "measured on 'NVIDIA GeForce RTX 4090' (rtx4090-48gb, 48.0 GiB), not the card's rtx4090")


def test_a_measure_output_of_the_48gb_board_is_judged_by_its_total():
    raw = json.loads((ROOT / "benchmarks" / "results" / "gpu_raw" / "heldout2.json").read_text())
    raw["versions"].update(gpu=NAME, gpu_total_bytes=TOTAL_48_BYTES)
    _, mems, notes = split_records(raw, GPU_RAW, "raw.json")  # the cases' cards are h200
    assert not mems and notes and all("(rtx4090-48gb, 48.0 GiB), not the card's h200" in n for n in notes)


def _time_output(versions: dict) -> dict:
    data = json.loads(FIXTURE.read_text())
    data.update(dry_run=False, device="cuda")
    data["versions"].update(versions)
    return data


def test_gpu_output_of_the_48gb_board():
    assert from_gpu_output(_time_output({"gpu": NAME}), where="x", gpu="rtx4090-48gb").gpu_ids == ("rtx4090-48gb",)
    assert from_gpu_output(_time_output({"gpu": NAME}), where="x").gpu_ids == ("rtx4090",)  # no total, no --gpu
    out48 = _time_output({"gpu": NAME, "gpu_total_bytes": TOTAL_48_BYTES})
    assert from_gpu_output(out48, where="x").gpu_ids == ("rtx4090-48gb",)
    with pytest.raises(CardError, match=r"^x: --gpu 'rtx4090' disagrees with the measured device 'NVIDIA GeForce RTX "
                                        r"4090' \(rtx4090-48gb, 48.0 GiB\)"):
        from_gpu_output(out48, where="x", gpu="rtx4090")
    with pytest.raises(CardError, match=r"--gpu 'h200' disagrees with the measured device 'NVIDIA GeForce RTX 4090' "
                                        r"\(rtx4090/rtx4090-48gb\)"):
        from_gpu_output(_time_output({"gpu": NAME}), where="x", gpu="h200")


class _Props:
    def __init__(self, total: int) -> None:
        self.total_memory = total


def test_watch_versions_name_the_watched_device(monkeypatch):
    """A mixed box: device 0 a 24 GB 4090, device 1 the 48 GB board; the watch on cuda:1 records device 1."""
    import torch

    from trainfit.watch.probe import versions

    names = {0: "NVIDIA H200", 1: NAME}
    totals = {0: 150_000_000_000, 1: TOTAL_48_BYTES}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: names[torch.device(d).index])
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: _Props(totals[torch.device(d).index]))
    v = versions(torch.device("cuda", 1))
    assert (v["gpu"], v["gpu_total_bytes"]) == (NAME, TOTAL_48_BYTES)
    v = versions()
    assert (v["gpu"], v["gpu_total_bytes"]) == ("NVIDIA H200", 150_000_000_000)
