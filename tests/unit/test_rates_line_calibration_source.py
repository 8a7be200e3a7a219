"""The ``time: rates:`` line (training.py: ``rates: <sources>``) names a calibration file only when the file replaces
a rate the line lists: a file that sets only rollout-engine host constants (``ENGINE_HOST_FIELDS``, named by the
calibration assumption instead) or memory constants (``DeviceCalibration.overrides`` leaves them out) adds nothing
to it (compute/rates.py ``DeviceRates.with_overrides``)."""

from __future__ import annotations

from trainfit.calibration import make_calibration, rates_for
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates


def test_engine_or_memory_fields_only_add_no_rate_source():
    h200 = resolve_gpu("h200")
    defaults = default_rates(h200).sources
    engine = make_calibration({"h200": {"engine_s_per_step": 0.004}})
    assert rates_for(h200, engine).sources == defaults
    assert default_rates(h200).with_overrides({}, source="calibration c.json").sources == defaults
    memory = make_calibration({"h200": {"fragmentation_share": 0.5}})
    assert rates_for(h200, memory).sources == defaults


def test_a_replaced_rate_is_still_named():
    h200 = resolve_gpu("h200")
    cal = make_calibration({"h200": {"engine_s_per_step": 0.004, "hbm_bytes_per_s": 4.0e12}})
    srcs = rates_for(h200, cal).sources
    assert srcs[-1].startswith("calibration (in memory, ") and srcs[-1].endswith(": hbm_bytes_per_s 4e+12")
