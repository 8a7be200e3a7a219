"""Gemma-2's eager attention caps every score, ``softcap · tanh(scores / softcap)``: three elementwise ops on the
score tensor forward and their three autograd nodes backward (``compute.inventory.SOFTCAP_*``)."""

from __future__ import annotations

import pytest

import trainfit.compute.inventory as inventory
from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import (
    SOFTCAP_BACKWARD_BYTES,
    Adapter,
    SOFTCAP_FORWARD_BYTES,
    SOFTCAP_KERNELS,
    step_inventory,
)

GEMMA2 = from_catalog("google/gemma-2-9b")
KW = dict(micro_batch_size=2, seq_len=2048)


def _scores(b: int = 2, s: int = 2048) -> float:
    return b * GEMMA2.num_attention_heads * s * s * GEMMA2.num_layers


@pytest.fixture()
def uncapped(monkeypatch):
    def run(**kw):
        monkeypatch.setattr(inventory, "SOFTCAP_FAMILIES", frozenset())
        inv = step_inventory(GEMMA2, **kw)
        monkeypatch.undo()
        return inv
    return run


def test_the_cap_moves_its_score_bytes_in_every_pass(uncapped):
    capped, plain = step_inventory(GEMMA2, eager_attention=True, **KW), uncapped(eager_attention=True, **KW)
    scores = _scores()
    assert capped.layers_forward.memory_bytes - plain.layers_forward.memory_bytes == pytest.approx(
        SOFTCAP_FORWARD_BYTES * scores)
    assert capped.layers_backward.memory_bytes - plain.layers_backward.memory_bytes == pytest.approx(
        SOFTCAP_BACKWARD_BYTES * scores)
    assert capped.layers_forward.kernels - plain.layers_forward.kernels == SOFTCAP_KERNELS * GEMMA2.num_layers
    assert capped.layers_backward.kernels - plain.layers_backward.kernels == SOFTCAP_KERNELS * GEMMA2.num_layers
    # a checkpointed layer re-runs the cap: the whole-layer recompute and the core-attention one
    assert capped.layers_recompute.memory_bytes - plain.layers_recompute.memory_bytes == pytest.approx(
        SOFTCAP_FORWARD_BYTES * scores)
    assert (capped.layers_recompute_core_attention.memory_bytes
            - plain.layers_recompute_core_attention.memory_bytes) == pytest.approx(SOFTCAP_FORWARD_BYTES * scores)


def test_no_cap_off_the_eager_path_or_for_other_families(uncapped):
    """Flash takes the cap inside its kernel, SDPA has none; Llama has no cap."""
    assert step_inventory(GEMMA2, **KW).layers_forward.memory_bytes == uncapped(**KW).layers_forward.memory_bytes
    llama = from_catalog("meta-llama/Llama-3.1-8B")
    assert llama.family not in inventory.SOFTCAP_FAMILIES
    assert GEMMA2.family in inventory.SOFTCAP_FAMILIES


def test_a_float32_model_moves_four_byte_scores(uncapped):
    fp32_qlora = Adapter(rank=8, targets=("q_proj", "v_proj"), nf4_base=True, base_dtype_bytes=4)
    kw = dict(eager_attention=True, adapter=fp32_qlora, **KW)
    capped, plain = step_inventory(GEMMA2, **kw), uncapped(**kw)
    assert capped.layers_forward.memory_bytes - plain.layers_forward.memory_bytes == pytest.approx(
        2 * SOFTCAP_FORWARD_BYTES * _scores())
