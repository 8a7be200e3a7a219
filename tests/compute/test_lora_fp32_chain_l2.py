"""L2 residency of PEFT's fp32-adapter elementwise chains (``inventory.FP32_LORA_CHAINED_*``): the reads of what the
kernel just before wrote are priced at the card's L2 rate where one module's chain fits (``training.l2_chained_bytes``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.inventory import (
    FP32_LORA_BACKWARD_CHAINED_SHARE,
    FP32_LORA_CHAINED_INPUT_BYTES,
    FP32_LORA_CHAINED_OUTPUT_BYTES,
    FP32_LORA_INPUT_BYTES,
    FP32_LORA_OUTPUT_BYTES,
    LORA_BACKWARD_BYTES_FACTOR,
    Adapter,
    step_inventory,
)
from trainfit.compute.rates import default_rates
from trainfit.compute.training import l2_chained_bytes, pass_seconds

SPEC = resolve_model("meta-llama/Llama-3.2-3B")
MLP = ("gate_proj", "up_proj", "down_proj")


def _inv(tokens: int, dtype_bytes: int = 4):
    return step_inventory(SPEC, micro_batch_size=1, seq_len=tokens,
                          adapter=Adapter(rank=10, targets=MLP, adapter_dtype_bytes=dtype_bytes))


def test_fp32_adapter_chains_count_their_reads():
    t = 840
    base = step_inventory(SPEC, micro_batch_size=1, seq_len=t)
    inv = _inv(t)
    extra_f = inv.layers_forward.chained_reads[len(base.layers_forward.chained_reads):]
    extra_b = inv.layers_backward.chained_reads[len(base.layers_backward.chained_reads):]
    layers, h, i = SPEC.num_layers, SPEC.hidden_size, SPEC.intermediate_size
    widths_in, widths_out = h + h + i, i + i + h  # gate, up: hidden -> intermediate; down: intermediate -> hidden
    assert sum(c.contiguous_bytes for c in extra_f) == pytest.approx(
        t * layers * (FP32_LORA_CHAINED_INPUT_BYTES * widths_in + FP32_LORA_CHAINED_OUTPUT_BYTES * widths_out))
    assert sum(c.contiguous_bytes for c in extra_b) == pytest.approx(
        t * layers * FP32_LORA_BACKWARD_CHAINED_SHARE * LORA_BACKWARD_BYTES_FACTOR
        * (FP32_LORA_INPUT_BYTES * widths_in + FP32_LORA_OUTPUT_BYTES * widths_out))
    # bf16 adapters run no fp32 chain
    assert len(_inv(t, dtype_bytes=2).layers_forward.chained_reads) == len(base.layers_forward.chained_reads)


def test_chains_hit_l2_only_where_a_module_fits():
    l40s = default_rates(resolve_gpu("l40s"))
    small = _inv(840).layers_forward.chained_reads
    big = _inv(8192).layers_forward.chained_reads
    # 840 tokens: the 8192-wide output chain (12 B x 840 x 8192 = 82.6 MB) fits the L40S's 93.8 MB; 8192 tokens do not
    assert l2_chained_bytes(small, rates=l40s)[0] > 0.5 * sum(c.contiguous_bytes for c in small)
    assert l2_chained_bytes(big, rates=l40s)[0] < 0.1 * sum(c.contiguous_bytes for c in big)


def test_pass_time_falls_on_an_l2_card_only():
    inv = _inv(840)
    no_l2 = replace_l2(default_rates(resolve_gpu("l40s")))
    with_l2 = default_rates(resolve_gpu("l40s"))
    kw = dict(seq_len=840, backward=True)
    assert pass_seconds(inv.layers_backward, rates=with_l2, **kw).memory_s < \
        pass_seconds(inv.layers_backward, rates=no_l2, **kw).memory_s


def replace_l2(rates):
    from dataclasses import replace
    return replace(rates, l2_read_bytes_per_s=None, l2_resident_bytes=0.0)
