"""gpt-oss's eager attention concatenates a learned sink column to the scores, takes the row max, subtracts it,
softmaxes the ``s + 1`` columns and slices the sink off (``attention_time.sink_eager_score_work``): its score-sized
ops replace the plain eager path's scale / mask / fp32-softmax / cast bytes, with their own backward."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.attention_time import sink_eager_score_work
from trainfit.compute.inventory import (
    BACKWARD_BYTES_FACTOR,
    EAGER_SCORE_BACKWARD_BYTES,
    EAGER_SCORE_FORWARD_BYTES,
    step_inventory,
)

GPT_OSS = from_catalog("openai/gpt-oss-20b")
KW = dict(micro_batch_size=1, seq_len=2048, eager_attention=True)


def _scores(s: int = 2048) -> float:
    return GPT_OSS.num_attention_heads * s * s * GPT_OSS.num_full_attention_layers


def test_per_element_work_from_the_op_list():
    w = sink_eager_score_work(seq_len=1e12)  # r -> 1
    assert (w.forward_bytes, w.forward_strided_bytes, w.forward_kernels) == pytest.approx((22.0, 12.0, 6.0))
    assert (w.backward_bytes, w.backward_strided_bytes, w.backward_kernels) == pytest.approx((34.0, 8.0, 9.0))
    # the sink column widens every op on the extended logits by (s + 1) / s
    short = sink_eager_score_work(seq_len=1.0)
    assert short.forward_bytes == pytest.approx(4 + 4 + 2 + 2 * 2 + 2 * 2 + 4 * 2 + 4 * 2)
    # a float32 model's scores: twice the bytes, the same kernels
    w4 = sink_eager_score_work(seq_len=1e12, dtype_bytes=4.0)
    assert w4.forward_bytes == pytest.approx(44.0) and w4.backward_kernels == 9.0


def test_sinks_replace_the_plain_eager_score_bytes():
    assert GPT_OSS.attention_sinks
    sinks, plain = step_inventory(GPT_OSS, **KW), step_inventory(replace(GPT_OSS, attention_sinks=False), **KW)
    scores = _scores()
    w = sink_eager_score_work(seq_len=2048)
    assert sinks.layers_forward.memory_bytes - plain.layers_forward.memory_bytes == pytest.approx(
        (w.forward_bytes - EAGER_SCORE_FORWARD_BYTES) * scores)
    assert sinks.layers_backward.memory_bytes - plain.layers_backward.memory_bytes == pytest.approx(
        (w.backward_bytes - EAGER_SCORE_BACKWARD_BYTES - BACKWARD_BYTES_FACTOR * EAGER_SCORE_FORWARD_BYTES) * scores)
    # the cat's generic kernel and the two broadcasts run on the non-vectorised loops
    assert sinks.layers_forward.strided_bytes - plain.layers_forward.strided_bytes == pytest.approx(
        w.forward_strided_bytes * scores)
    assert sinks.layers_backward.strided_bytes - plain.layers_backward.strided_bytes == pytest.approx(
        w.backward_strided_bytes * scores)
    # a checkpointed layer re-runs them: the whole-layer and the core-attention recomputes
    for rec in ("layers_recompute", "layers_recompute_core_attention", "layers_recompute_whole"):
        got = getattr(sinks, rec).memory_bytes - getattr(plain, rec).memory_bytes
        assert got == pytest.approx((w.forward_bytes - EAGER_SCORE_FORWARD_BYTES) * scores), rec


def test_kernels_per_layer():
    sinks, plain = step_inventory(GPT_OSS, **KW), step_inventory(replace(GPT_OSS, attention_sinks=False), **KW)
    n = GPT_OSS.num_full_attention_layers
    # forward: scale, mask, cat, max, sub, softmax (6) against scale, mask, softmax, cast (4)
    assert sinks.layers_forward.kernels - plain.layers_forward.kernels == pytest.approx(2 * n)


def test_sdpa_and_sinkless_models_unchanged():
    assert (step_inventory(GPT_OSS, micro_batch_size=1, seq_len=2048).layers_forward.memory_bytes
            == step_inventory(replace(GPT_OSS, attention_sinks=False), micro_batch_size=1,
                              seq_len=2048).layers_forward.memory_bytes)
