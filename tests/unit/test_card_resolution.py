"""Every command that reads a user's card plans the card ``trainfit plan`` plans (``spec.card.resolve_card``: the
framework ``preset`` filled once, under what the card states). Before, ``trainfit calibrate`` (run records, both the
step-time / engine path and the memory path), ``trainfit.watch`` (a card path or mapping) and ``trainfit compare``
(``preflight.record.load_record``) validated the card as written: a ``preset: verl`` record planned TRL's
``gpu_memory_utilization`` 0.3, no vLLM sleep, FSDP2 and a GPU reference, and so fitted its constants to another plan
than the one ``plan``, ``fit`` and ``watch`` make with the calibration file (docs/calibration.md's verl record: 9.974 s
of generation under calibrate, 10.12 s under plan, at twice the default engine constants)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainfit.calibration.apply import rates_for
from trainfit.calibration.build import RUN_RECORDS, split_records
from trainfit.calibration.engine import ENGINE_FIELDS, planned_generation_s
from trainfit.calibration.records import _with_device, records_from_data
from trainfit.catalog.gpus import resolve_gpu
from trainfit.cli.common import load_card
from trainfit.plan import make_plan

VERL_CARD = {
    "model": "Qwen/Qwen2.5-1.5B", "method": "grpo", "preset": "verl",
    "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
    "rollout": {"num_generations": 8, "prompts_per_step": 64, "prompt_len": 512, "response_len": 1024},
}
"""docs/calibration.md's verl record (its card part)."""

LORA_VERL_CARD = {**VERL_CARD, "scope": "lora"}
"""apply_preset's conditional fill too: verl sleeps at level 1 when it syncs an adapter."""

CARDS = [VERL_CARD, LORA_VERL_CARD]


def _plan_card(tmp_path: Path, card: dict):
    """The card ``trainfit plan card.yaml`` plans (``cli.common.load_card``)."""
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    return load_card(path, {}, [])


def _record(card: dict, **record) -> dict:
    return {**card, "record": record}


@pytest.mark.parametrize("card", CARDS, ids=["full", "lora"])
def test_calibrate_record_plans_the_step_plan_plans(tmp_path, card):
    planned = _plan_card(tmp_path, card)
    (rec,) = records_from_data(_record(card, step_s=30.0, phases_s={"generation": 10.0}), where="rl.yaml")
    assert rec.card == planned
    assert rec.card.rollout.gpu_memory_utilization == 0.5  # verl's, not TRL's 0.3
    assert make_plan(rec.card).step_seconds == make_plan(planned).step_seconds
    gpu = resolve_gpu("h100-sxm")
    start = rates_for(gpu, None)
    doubled = _with_device(None, gpu.id, {f: getattr(start, f) * 2 for f in ENGINE_FIELDS})
    assert planned_generation_s(rec.card, doubled) == planned_generation_s(planned, doubled)


def test_calibrate_memory_record_plans_the_card_plan_plans(tmp_path):
    planned = _plan_card(tmp_path, VERL_CARD)
    phases = [{"phase": "backward", "measured": {"reserved_bytes": 40 * 2**30}}]
    _, mems, _ = split_records([_record(VERL_CARD, phases=phases, watch={"device": "cuda"})], RUN_RECORDS, "rl.yaml")
    assert [m.card for m in mems] == [planned]


OLD_PCIE_CARD = {"model": "Qwen/Qwen2.5-0.5B", "method": "sft", "scope": "lora",
                 "hardware": {"gpu": "rtx4090", "gpus_per_node": 2, "interconnect": "pcie"}}
"""A record written before hardware.interconnect told peer-to-peer apart: pcie for a machine without NV# links."""


def test_an_old_pcie_record_plans_one_link_for_its_memory_and_step_time_fits():
    """``preflight.record.migrate_link`` re-derives an old record's pcie from its P2P matrix; the step-time path
    (``records_from_data``) ran it and the memory path (``split_records``' ``memory_record``) did not, so one
    record fitted its memory on pcie and its step time on pcie_no_p2p."""
    from trainfit.spec.enums import Interconnect

    phases = [{"phase": "backward", "measured": {"reserved_bytes": 10 * 2**30}}]
    old = _record(OLD_PCIE_CARD, step_s=2.0, phases=phases, watch={"device": "cuda"}, nvlink=False,
                  gpus=["NVIDIA GeForce RTX 4090"] * 2, p2p_matrix=[["X", "CNS"], ["CNS", "X"]])
    times, mems, _ = split_records([old], RUN_RECORDS, "old.yaml")
    assert [r.card.hardware.interconnect for r in times] == [Interconnect.PCIE_NO_P2P]
    assert [m.card.hardware.interconnect for m in mems] == [Interconnect.PCIE_NO_P2P]
    assert mems[0].card == times[0].card


def test_watch_plans_the_card_plan_plans(tmp_path):
    from trainfit.watch.core import _as_card

    planned = _plan_card(tmp_path, LORA_VERL_CARD)
    assert _as_card(tmp_path / "card.yaml") == planned
    assert _as_card(dict(LORA_VERL_CARD)) == planned


def test_compare_reads_the_record_card_plan_plans(tmp_path):
    from trainfit.preflight.record import load_record

    planned = _plan_card(tmp_path, LORA_VERL_CARD)
    path = tmp_path / "run.record.yaml"
    path.write_text(yaml.safe_dump(_record(LORA_VERL_CARD, step_s=30.0)))
    assert load_record(path)[0] == planned


def test_web_api_plans_the_card_plan_plans(tmp_path):
    from trainfit.serve.worker import card_of

    assert card_of(dict(VERL_CARD)) == _plan_card(tmp_path, VERL_CARD)


def test_a_record_written_from_the_planned_card_resolves_to_the_same_card(tmp_path):
    """A record ``trainfit record`` writes (every field of the planned card, preset kept) reads back, preset applied
    again, as the card it was written from: the preset fills nothing the card does not already state."""
    from trainfit.preflight.record import card_to_dict, load_record

    for card in CARDS:
        planned = _plan_card(tmp_path, card)
        path = tmp_path / "full.record.yaml"
        path.write_text(yaml.safe_dump(_record(card_to_dict(planned), step_s=30.0)))
        assert make_plan(load_record(path)[0]).step_seconds == make_plan(planned).step_seconds
