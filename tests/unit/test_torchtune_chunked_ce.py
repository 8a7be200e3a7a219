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


def test_the_plan_reads_the_card_loss_kernel_and_compile():
    """A card with ``loss.kernel: torchtune`` and ``parallel.compile`` plans the compiled per-chunk loss and
    the compiled decoder layers; the logits' gradient exists whole before the output projection's backward."""
    from trainfit.memory.activations import activation_bytes
    from trainfit.plan import make_plan
    from trainfit.plan.resolve import model_spec_of, trainable_spec
    from trainfit.plan.terms import step_terms
    from trainfit.memory.sharding import make_sharding
    from trainfit.spec.enums import Strategy
    from trainfit.spec.card import load_card_dict

    def card(compile_, kernel="torchtune"):
        return load_card_dict({"model": "meta-llama/Llama-3.2-3B", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
                               "parallel": {"strategy": "single", "compile": compile_},
                               "batch": {"micro_batch_size": 2, "seq_len": 4096},
                               "loss": {"chunked": True, "kernel": kernel}})

    c = card(True)
    spec = model_spec_of(c)
    single = make_sharding(strategy=Strategy.SINGLE, gpus_per_node=1, nodes=1)
    terms, _, _ = step_terms(c, spec, single)
    assert terms.logits == torchtune_chunked_ce_bytes(tokens=2 * 4096, vocab_size=spec.vocab_size, compiled=True)
    assert terms.logits_grad_bf16 == 2.0 * 2 * 4096 * spec.vocab_size
    assert terms.activations == activation_bytes(spec, micro_batch_size=2, seq_len=4096, attention=c.attention,
                                                 trainable=trainable_spec(c), compiled=True)
    liger = step_terms(card(True, "liger"), spec, single)[0]
    assert liger.logits_grad_bf16 == 0.0
    peak = {k: max(p.allocated for p in make_plan(card(k)).phases) for k in (False, True)}
    assert peak[True] < peak[False]  # compiled layers save less
