"""torchtune's CEWithChunkedOutputLoss (``loss.kernel: torchtune``): closed form and what torch saves."""

from __future__ import annotations

import pytest

from trainfit.memory.logits import (
    TORCHTUNE_OUTPUT_CHUNKS,
    TORCHTUNE_ROW_STATS_BYTES,
    logits_bytes,
    torchtune_chunked_ce_bytes,
)

T, V = 2 * 4096, 128_256
E = T * V


def test_compiled_keeps_every_bf16_chunk_and_row_stats():
    lg = logits_bytes(micro_batch_size=2, seq_len=4096, vocab_size=V, hidden_size=3072, chunked=True,
                      kernel="torchtune", compiled=True)
    assert lg.retained == 2 * E + TORCHTUNE_ROW_STATS_BYTES * T
    assert lg.forward_peak == lg.retained
    assert lg.backward_peak == lg.retained + 2 * E / TORCHTUNE_OUTPUT_CHUNKS


def test_eager_keeps_fp32_log_softmax_outputs():
    lg = torchtune_chunked_ce_bytes(tokens=T, vocab_size=V, compiled=False)
    assert lg.retained == 4 * E
    assert lg.forward_peak == 2 * E + 4 * E + 4 * E / 8
    assert lg.backward_peak == 4 * E + E


def test_between_fused_kernel_and_full_logits():
    kw = {"micro_batch_size": 2, "seq_len": 4096, "vocab_size": V, "hidden_size": 3072}
    full = logits_bytes(**kw)
    liger = logits_bytes(**kw, chunked=True)
    tt = logits_bytes(**kw, chunked=True, kernel="torchtune", compiled=True)
    assert liger.backward_peak < tt.backward_peak < full.backward_peak
    assert liger.retained < tt.retained < full.retained
    # the compile flag changes nothing for the fused kernels
    assert logits_bytes(**kw, chunked=True, compiled=True) == liger


def _saved_bytes(fn, n: int, v: int) -> tuple[int, int]:
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F  # noqa: F401

    x = torch.randn(n, v, dtype=torch.bfloat16, requires_grad=True)
    y = torch.randint(0, v, (n,))
    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn(x, y)
    loss.backward()
    return sum(seen.values()), x.untyped_storage().data_ptr() in seen


def _compute_cross_entropy(logits, labels):
    # torchtune/modules/loss/ce_chunked_output_loss.py @1814feb17 compute_cross_entropy
    import torch.nn.functional as F

    return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")


def test_eager_chunk_saves_its_fp32_log_softmax():
    n, v = 64, 1000
    nbytes, keeps_input = _saved_bytes(_compute_cross_entropy, n, v)
    assert not keeps_input
    # fp32 log-softmax output + int64 labels + fp32 total_weight scalar
    assert nbytes == 4 * n * v + 8 * n + 4


@pytest.mark.slow
def test_compiled_chunk_saves_its_bf16_input_and_row_stats():
    torch = pytest.importorskip("torch")
    n, v = 64, 1000
    nbytes, keeps_input = _saved_bytes(torch.compile(_compute_cross_entropy), n, v)
    assert keeps_input
    assert nbytes == 2 * n * v + TORCHTUNE_ROW_STATS_BYTES * n
