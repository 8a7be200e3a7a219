"""L2 residency of PEFT's fp32-adapter elementwise chains (``inventory.FP32_LORA_CHAINED_*``): the reads of what the
kernel just before wrote are priced at the card's L2 rate where one module's chain fits (``training.l2_chained_bytes``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.inventory import Adapter, step_inventory
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
    # forward, per element: the input's cast reads x (2); the scale, cast and add read what lora_B, the scale and the
    # cast wrote (4 + 4 + 2), and the add the base output (2)
    assert sum(c.contiguous_bytes for c in extra_f) == pytest.approx(
        t * layers * (2.0 * widths_in + (4 + 4 + 2 + 2) * widths_out))
    # backward, per element: the cast of lora_A's fp32 dX (4); the two reads of the fp32 output gradient (4 + 4)
    assert sum(c.contiguous_bytes for c in extra_b) == pytest.approx(t * layers * (4.0 * widths_in + 8.0 * widths_out))
    # bf16 adapters run no fp32 chain
    assert len(_inv(t, dtype_bytes=2).layers_forward.chained_reads) == len(base.layers_forward.chained_reads)


def test_base_output_read_needs_the_input_side_resident_too():
    """The add's 2-byte read of the base output comes after the input's cast and lora_A: its working set is the output
    chain's 12 B x out plus the input side's 6 B x in (bf16 x and its fp32 copy), not the output chain's alone."""
    t = 840
    base = step_inventory(SPEC, micro_batch_size=1, seq_len=t)
    extra_f = _inv(t).layers_forward.chained_reads[len(base.layers_forward.chained_reads):]
    h, i = SPEC.hidden_size, SPEC.intermediate_size
    base_reads = [c for c in extra_f if c.contiguous_bytes == pytest.approx(2.0 * t * i * SPEC.num_layers)
                  and c.working_set_bytes > 12.0 * t * i]
    assert len(base_reads) == 2  # gate and up (hidden -> intermediate)
    assert all(c.working_set_bytes == pytest.approx(t * (12.0 * i + 6.0 * h)) for c in base_reads)
    # on the L40S (93.8 MB L2) gate / up's base-output read (840 x (12 x 8192 + 6 x 3072) B = 98.1 MB) misses,
    # down's (840 x (12 x 3072 + 6 x 8192) B = 72.3 MB) hits
    l40s = default_rates(resolve_gpu("l40s"))
    assert l2_chained_bytes(tuple(base_reads), rates=l40s)[0] == 0.0
    down = [c for c in extra_f if c.working_set_bytes == pytest.approx(t * (12.0 * h + 6.0 * i))]
    assert len(down) == 1 and l2_chained_bytes(tuple(down), rates=l40s)[0] > 0.0


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
