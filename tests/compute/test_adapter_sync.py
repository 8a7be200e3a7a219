"""compute.adapter_sync: verl hands vLLM only the LoRA adapter (add_lora of a TensorLoRARequest). The FSDP units are
still gathered whole; what travels to the host and into the engine's slots is the adapter's bytes."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.adapter_sync import adapter_sync_seconds
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError


def _t(**over):
    kw = {"summoned_bytes": 120e9, "summon_units": 960, "adapter_bytes": 1e9, "engine_rank_adapter_bytes": 0.2e9,
          "train_shards": 8, "rates": default_rates(resolve_gpu("h100-sxm")), "gpus_per_node": 8,
          "nic_bytes_per_s": 50e9, "d2h_bytes_per_s": 10e9, "h2d_bytes_per_s": 20e9}
    return adapter_sync_seconds(**(kw | over))


def test_transfer_is_the_adapter_to_host_and_each_rank_slot() -> None:
    t = _t()
    assert t.transfer_s == pytest.approx(1e9 / 10e9 + 0.2e9 / 20e9)
    assert t.total_s == pytest.approx(t.gather_s + t.transfer_s) and t.per_tensor_s == 0.0
    assert _t(adapter_bytes=2e9).transfer_s == pytest.approx(2e9 / 10e9 + 0.2e9 / 20e9)


def test_gather_moves_the_summoned_units_not_the_adapter() -> None:
    t = _t()
    assert t.gather_s > 0.2  # ~7/8 of 120 GB over NVLink
    assert _t(adapter_bytes=2e9).gather_s == pytest.approx(t.gather_s)
    assert _t(train_shards=1).gather_s == 0.0


def test_refuses_empty_sizes() -> None:
    with pytest.raises(CardError, match="adapter sync"):
        _t(adapter_bytes=0.0)
    with pytest.raises(CardError, match="adapter sync"):
        _t(summon_units=0)
