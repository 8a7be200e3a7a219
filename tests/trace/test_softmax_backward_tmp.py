"""CUDA's softmax-backward product in the fake-tensor trace (``FastTracker``'s ``softmax_backward_tmp``).

``softmax_backward_cuda_out`` (aten/src/ATen/native/cuda/SoftMax.cu) makes ``tmp = grad * output`` in the
gradient's dtype after the input gradient and frees it when the call returns; fake tensors run no kernel,
so the tracker emulates it. Eager attention's fp32 softmax makes it 4 B per score; SDPA never calls it."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from trainfit.memory import attention as attn  # noqa: E402
from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402
from trainfit.trace.tracker import SOFTMAX_BACKWARD_NOTE, FastTracker  # noqa: E402

SHAPE = (2, 4, 64, 64)
N = 2 * 4 * 64 * 64


def _softmax_step(dtype, softmax_dtype):
    """Peak bytes of forward and backward of ``softmax(x, dtype=softmax_dtype)`` on a fake ``dtype`` x, and
    the tracker."""
    with FakeTensorMode():
        x = torch.empty(SHAPE, dtype=dtype, requires_grad=True)
        g = torch.empty(SHAPE, dtype=softmax_dtype)
        tr = FastTracker()
        tr.add_existing(x, g)
        with tr:
            with tr.phase("forward"):
                y = torch.softmax(x, dim=-1, dtype=softmax_dtype)
            with tr.phase("backward"):
                y.backward(g)
        return tr.phases["forward"].peak_bytes, tr.phases["backward"].peak_bytes, tr


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_fp32_softmax_backward_holds_the_fp32_product_on_top_of_its_input_gradient(dtype):
    """Transformers' eager attention: ``softmax(scores, dtype=float32)`` of bf16 / fp16 / fp32 scores. The
    backward's peak holds x, g, the saved fp32 output, the fp32 input gradient and the fp32 product (the
    product in the gradient's dtype, fp32 whatever the scores' dtype), then x's gradient in its dtype."""
    _, bwd, tr = _softmax_step(dtype, torch.float32)
    isz = torch.empty((), dtype=dtype).element_size()
    live_before = N * isz + N * 4 + N * 4  # x, g, the saved fp32 softmax output (x's fp32 copy is gone)
    assert bwd == live_before + N * 4 + N * 4
    assert tr.emulated == {"softmax_backward_tmp": 1}
    assert tr.notes == (SOFTMAX_BACKWARD_NOTE,)


def test_bf16_softmax_backward_product_is_bf16():
    """gpt-oss takes its softmax in bf16: the product is bf16 too."""
    _, bwd, tr = _softmax_step(torch.bfloat16, torch.bfloat16)
    assert bwd == N * 2 + N * 2 + N * 2 + N * 2 + N * 2  # x, g, saved output, input gradient, product
    assert tr.emulated == {"softmax_backward_tmp": 1}


def test_product_is_made_and_freed_back_to_back(monkeypatch):
    """In the log the product is one untagged allocation freed by the next entry; without the emulation the
    backward's peak is lower, by the product at most (the cast of the input gradient to bf16 peaks then)."""
    _, bwd, tr = _softmax_step(torch.bfloat16, torch.float32)
    pairs = [(a, b) for a, b in zip(tr._log, tr._log[1:]) if a[0] > 0 and b[0] < 0 and a[1] is b[1]]
    assert [(a[2], a[1].tag, a[1].phase) for a, _ in pairs] == [(N * 4, "", "backward")]
    monkeypatch.setattr(FastTracker, "_transient", lambda self, nbytes, name: None)
    _, bwd_without, tr_without = _softmax_step(torch.bfloat16, torch.float32)
    assert bwd - N * 4 <= bwd_without < bwd
    assert tr_without.notes == ()


def _tiny(model_type: str) -> dict:
    cfg = dict(model_type=model_type, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
               num_attention_heads=8, num_key_value_heads=4, head_dim=16, vocab_size=256, tie_word_embeddings=True,
               max_position_embeddings=4096)
    return cfg


@pytest.mark.trace
def test_only_eager_attention_gets_the_product_and_the_planner_counts_it():
    """A 3-layer llama at hidden 64 (the s^2 terms dominate), with checkpointing: eager attention's traced
    backward peak rises by its saved scores and the planner's 10 B per score between s = 512 and 1024 (6
    without the product);
    SDPA's trace makes no softmax backward and names no emulation."""
    peaks, notes = {}, {}
    for attention in ("eager", "sdpa"):
        for s in (512, 1024):
            t = trace_step(TraceRequest(hf_config=_tiny("llama"), micro_batch_size=1, seq_len=s, attention=attention,
                                        gradient_checkpointing=True, layers=3))
            peaks[attention, s] = t.phase("backward").peak_bytes
            notes[attention, s] = t.notes
    assert all(SOFTMAX_BACKWARD_NOTE in notes["eager", s] for s in (512, 1024))
    assert not any(SOFTMAX_BACKWARD_NOTE in notes["sdpa", s] for s in (512, 1024))
    d_scores = 8 * (1024**2 - 512**2)
    slope = (peaks["eager", 1024] - peaks["eager", 512]) / d_scores
    planned = attn.backward_transient_bytes(scores=1.0, dtype_bytes=2)
    assert planned == 10
    # the recomputed layer also saves its fp32 softmax output and bf16 probabilities (6 B per score, counted
    # with the activations); SDPA's slope takes out what grows with s but not with the scores
    extra = slope - (peaks["sdpa", 1024] - peaks["sdpa", 512]) / d_scores - 6
    assert abs(extra - planned) < 0.25, extra
