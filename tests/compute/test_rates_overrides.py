"""``DeviceRates.with_overrides`` checks every calibrated rate it replaces: the optional ones (fp32 / fp8 matmul, the L2
residency fields) may be null, else a positive number, like the others; the error names the field."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError

H200 = default_rates(resolve_gpu("h200"))


@pytest.mark.parametrize("name", ["l2_read_bytes_per_s", "l2_resident_bytes", "fp8_matmul_flops_per_s",
                                  "fp32_matmul_flops_per_s"])
@pytest.mark.parametrize("bad", [-1.0, 0, "fast", True, float("inf")])
def test_an_optional_rate_must_be_positive_or_null(name, bad):
    with pytest.raises(CardError) as exc:
        H200.with_overrides({name: bad}, source="test")
    assert f"calibration: {name} must be a positive number or null, got {bad!r}" == str(exc.value)


def test_null_and_positive_optional_rates_are_taken():
    r = H200.with_overrides({"l2_read_bytes_per_s": 8e12, "l2_resident_bytes": 30e6}, source="test")
    assert (r.l2_read_bytes_per_s, r.l2_resident_bytes) == (8e12, 30e6)
    off = H200.with_overrides({"l2_read_bytes_per_s": None, "l2_resident_bytes": None}, source="test")
    assert off.l2_read_bytes_per_s is None and off.l2_resident_bytes == 0.0  # no L2 residency priced
    assert H200.with_overrides({"fp8_matmul_flops_per_s": None}, source="test").fp8_matmul_flops_per_s is None
