"""`trace_ops`: the op inventory of a traced step, exact against hand-derived counts and against full depth."""

import functools
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import torch  # noqa: E402

from trainfit.trace.inventory import OpRecord, gemm_shapes, totals  # noqa: E402
from trainfit.trace.ops import trace_ops  # noqa: E402
from trainfit.trace.types import TraceRequest, TraceUnsupported  # noqa: E402

pytestmark = pytest.mark.trace

H, I, HEADS, KV, D, V, S = 64, 128, 4, 2, 16, 256, 32  # hidden, intermediate, heads, kv heads, head dim, vocab, seq
LLAMA = dict(model_type="llama", hidden_size=H, intermediate_size=I, num_hidden_layers=4, num_attention_heads=HEADS,
             num_key_value_heads=KV, head_dim=D, vocab_size=V, tie_word_embeddings=False)
QWEN3 = dict(LLAMA, model_type="qwen3")
LAYER_GEMMS = 7  # q, k, v, o, gate, up, down
LAYER_MATMUL_PARAMS = H * HEADS * D * 2 + H * KV * D * 2 + 3 * H * I  # q, o; k, v; gate, up, down


@functools.cache
def _inv(cfg: str = "llama", **kw):
    return trace_ops(TraceRequest(hf_config=QWEN3 if cfg == "qwen3" else LLAMA, seq_len=S, **kw))


def _gemms(inv, **match) -> int:
    return sum(r.calls for r in inv.select(category="gemm", **match))


def _trainable_params(**kw) -> list[int]:
    from trainfit.trace.build import build_meta

    req = TraceRequest(hf_config=LLAMA, seq_len=S, **kw)
    return [p.numel() for p in build_meta(req, LLAMA["num_hidden_layers"]).parameters() if p.requires_grad]


def test_ops_module_does_not_import_torch():
    code = "import sys, trainfit.trace.ops; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("cfg", ["llama", "qwen3"])
def test_forward_has_seven_gemms_per_layer_and_one_lm_head(cfg):
    inv = _inv(cfg)
    for j in range(4):
        assert _gemms(inv, phase="forward", place="layer", layer=j) == LAYER_GEMMS
    assert _gemms(inv, phase="forward", place="head") == 1
    assert _gemms(inv, phase="forward", place="embedding") == 0
    assert inv.phase("forward").totals.gemms == 4 * LAYER_GEMMS + 1
    shapes = sorted(r.shape for r in inv.select(phase="forward", place="layer", layer=1, category="gemm")
                    for _ in range(r.calls))  # k and v (gate and up) share a shape: one record, 2 calls
    assert shapes == sorted([(1, S, HEADS * D, H), (1, S, KV * D, H), (1, S, KV * D, H), (1, S, H, HEADS * D),
                             (1, S, I, H), (1, S, I, H), (1, S, H, I)])


def test_backward_has_dx_and_dw_per_trained_linear():
    inv = _inv()
    for j in range(4):
        assert _gemms(inv, phase="backward", place="layer", layer=j) == 2 * LAYER_GEMMS
    assert _gemms(inv, phase="backward", place="head") == 2
    assert inv.phase("backward").recompute.kernels == 0


def test_lora_frozen_base_has_only_dx():
    """Per adapted linear: forward base + A + B; backward base dX, then dW and dX of B and of A. Layer 0's q, k, v
    read the frozen embedding's output, which needs no gradient: no base dX, no A dX there (3 x 2 fewer)."""
    inv = _inv(scope="lora", lora_rank=8)
    for j in range(4):
        assert _gemms(inv, phase="forward", place="layer", layer=j) == 3 * LAYER_GEMMS
    assert [_gemms(inv, phase="backward", place="layer", layer=j) for j in range(4)] == [29, 35, 35, 35]
    assert _gemms(inv, phase="backward", place="head") == 1  # lm_head is frozen: dX only
    fp32 = {r.dtype for r in inv.select(category="gemm") if 8 in r.shape[1:]}
    assert fp32 == {"float32"}  # PEFT keeps the adapters in fp32 on a bf16 base


def test_checkpointing_recomputes_the_layer_forward():
    """Non-reentrant checkpointing recomputes each layer in backward. With torch's default early stop the
    recomputation ends at the last saved tensor, so down_proj (whose input is saved) is not recomputed."""
    import torch.utils.checkpoint as cp

    early = _inv(gradient_checkpointing=True)
    with cp.set_checkpoint_early_stop(False):
        full = trace_ops(TraceRequest(hf_config=LLAMA, seq_len=S, gradient_checkpointing=True))
    fwd = _inv().phase("forward").totals.gemms - 1
    assert full.phase("backward").recompute.gemms == fwd == 4 * LAYER_GEMMS
    assert full.phase("backward").totals.gemms == _inv().phase("backward").totals.gemms + fwd
    assert early.phase("backward").recompute.gemms == 4 * (LAYER_GEMMS - 1)
    down = (1, S, H, I)
    assert not any(r.shape == down for r in early.select(category="gemm", recompute=True))
    assert all(r.place == "layer" for r in full.select(recompute=True))


def test_gemm_flops_are_two_matmul_params_per_token():
    inv = _inv()
    tokens = S
    matmul_params = 4 * LAYER_MATMUL_PARAMS + V * H  # + lm_head
    assert inv.phase("forward").totals.gemm_flops == 2 * matmul_params * tokens
    assert inv.phase("backward").totals.gemm_flops == 4 * matmul_params * tokens
    for r in inv.select(category="gemm"):
        b, m, n, k = r.shape
        assert r.flops == r.flops_causal == 2 * b * m * n * k


def test_attention_flops_and_causal_share():
    inv = _inv()
    (fwd,) = inv.select(phase="forward", category="attention", layer=1)
    (bwd,) = inv.select(phase="backward", category="attention", layer=1)
    assert fwd.shape == (1, HEADS, KV, S, S, D, D) and fwd.causal
    assert fwd.flops == 4 * HEADS * S * S * D  # QK^T and PV, full square (flop_counter does not halve)
    assert bwd.flops == 10 * HEADS * S * S * D  # 5 matmuls
    assert fwd.flops_causal == fwd.flops * (S + 1) // (2 * S)


@pytest.mark.parametrize("impl", ["fused", "foreach", "for_loop"])
def test_optimizer_kernels_by_implementation(impl):
    inv = _inv(optimizer_impl=impl)
    sizes = _trainable_params()
    n, params = len(sizes), sum(sizes)
    opt = inv.phase("optimizer_step").totals
    kinds = {r.op: r.calls for r in inv.select(phase="optimizer_step") if r.category == "memory"}
    host = sum(r.calls for r in inv.select(phase="optimizer_step", category="host"))
    if impl == "fused":  # one fused kernel, and the step counters (on the GPU) in one foreach add
        assert kinds == {"aten._fused_adamw_.default": 1, "aten._foreach_add_.Scalar": 1} and host == 0
        # bf16 p, g, m, v read, p, m, v written; fp32 step counters: add (read + write), then read by the kernel
        assert opt.memory_bytes == 14 * params + 12 * n
        assert opt.launches == 2
    elif impl == "foreach":  # a fixed number of multi-tensor ops, whatever the parameter count
        assert opt.kernels == 8 and set(kinds) == {
            "aten._foreach_mul_.Scalar", "aten._foreach_lerp_.Scalar", "aten._foreach_addcmul_.Scalar",
            "aten._foreach_sqrt.default", "aten._foreach_div_.ScalarList", "aten._foreach_add_.Scalar",
            "aten._foreach_addcdiv_.ScalarList"}
        assert host == 1 + 1 + 2 * n  # step += 1 on CPU counters, its literal, 2 .item() per parameter
    else:  # per parameter: decay, lerp, mul, addcmul, sqrt, div, add eps, addcdiv
        assert opt.kernels == 8 * n
        assert host == 2 * n  # step += 1 and .item() on each CPU counter


def test_views_launch_nothing():
    inv = _inv()
    cats = {r.op: r.category for r in inv.records}
    for op in ("aten.t.default", "aten.view.default", "aten._unsafe_view.default", "aten.transpose.int",
               "aten.detach.default", "aten.expand.default", "aten.slice.Tensor"):
        assert cats[op] == "view", op
    assert all(r.launches == r.bytes_read == r.bytes_written == 0 for r in inv.records if r.category == "view")
    assert cats["aten.embedding.default"] == cats["aten._to_copy.default"] == "memory"


@pytest.mark.parametrize(
    "kw",
    [dict(), dict(gradient_checkpointing=True, optimizer_impl="for_loop"), dict(scope="lora", gradient_checkpointing=True),
     dict(attention="eager", optimizer_impl="foreach")],
    ids=["sdpa", "ckpt-forloop", "lora-ckpt", "eager-foreach"],
)
def test_extrapolation_equals_full_depth(kw):
    cfg = dict(LLAMA, num_hidden_layers=5)
    ext = trace_ops(TraceRequest(hf_config=cfg, seq_len=S, **kw))
    full = trace_ops(TraceRequest(hf_config=cfg, seq_len=S, layers=5, **kw))
    assert ext.extrapolated and ext.layers_traced == (2, 3) and not full.extrapolated
    assert sorted(map(repr, ext.records)) == sorted(map(repr, full.records))
    assert ext.phases == full.phases and ext.places == full.places and ext.by_op == full.by_op


def test_eager_attention_is_gemm_plus_softmax():
    inv = _inv(attention="eager")
    assert not inv.select(category="attention")
    assert _gemms(inv, phase="forward", place="layer", layer=1) == LAYER_GEMMS + 2  # QK^T, PV as bmm
    (sm,) = inv.select(phase="forward", layer=1, op="aten._softmax.default")
    assert sm.category == "memory" and sm.bytes_read == sm.bytes_written == HEADS * S * S * 4  # fp32 softmax


def test_gemm_shapes_table():
    rows = gemm_shapes(_inv().records)
    assert rows[0].flops == max(r.flops for r in rows)
    assert sum(r.forward for r in rows) == 4 * LAYER_GEMMS + 1


def test_unsupported_requests_say_why():
    with pytest.raises(TraceUnsupported, match="world_size 1"):
        trace_ops(TraceRequest(hf_config=LLAMA, world_size=2))
    with pytest.raises(TraceUnsupported, match="train_step"):
        trace_ops(TraceRequest(hf_config=LLAMA, pass_kind="logprob"))


def test_multi_tensor_apply_launches():
    from trainfit.trace.opcount import mta_launches

    chunk, blocks = 65536, 2240
    assert mta_launches([blocks * chunk], 770) == 1
    assert mta_launches([blocks * chunk + 1], 770) == 2
    assert mta_launches([1] * 252, 252) == 1 and mta_launches([1] * 253, 252) == 2
    assert mta_launches([0, 0], 252) == 0
    assert mta_launches([blocks * chunk // 2] * 3, 252) == 2  # blocks fill mid-tensor; the tensor carries over


class _Here:
    phase, region = "forward", ("pre",)


def _count(fn):
    from trainfit.trace.opcount import OpCounter

    c = OpCounter(_Here())
    with c:
        fn()
    return c.records()


def test_bytes_in_place_broadcast_and_gather():
    x, y, row = torch.zeros(64, 32), torch.zeros(64, 32), torch.zeros(32)
    (r,) = _count(lambda: x.add_(y))
    assert (r.bytes_read, r.bytes_written, r.launches) == (2 * x.nbytes, x.nbytes, 1)
    (r,) = _count(lambda: x + row)  # the broadcast row is read once
    assert (r.bytes_read, r.bytes_written) == (x.nbytes + row.nbytes, x.nbytes)
    (r,) = _count(lambda: x.mul_(x))  # one tensor: read once, written once
    assert (r.bytes_read, r.bytes_written) == (x.nbytes, x.nbytes)
    w, idx = torch.zeros(1000, 16), torch.zeros(8, dtype=torch.long)
    (r,) = _count(lambda: torch.nn.functional.embedding(idx, w))  # 8 rows of the table, not all of it
    assert (r.bytes_read, r.bytes_written) == (8 * 16 * 4 + idx.nbytes, 8 * 16 * 4)
    (r,) = _count(lambda: x.fill_(1.0))
    assert (r.bytes_read, r.bytes_written) == (0, x.nbytes)


def test_totals_multiply_per_call_numbers():
    rec = OpRecord(phase="forward", place="layer", layer=0, recompute=False, op="aten.mm.default", category="gemm",
                   dtype="bfloat16", shape=(1, 2, 3, 4), causal=False, flops=48, flops_causal=48, bytes_read=10,
                   bytes_written=5, launches=1, calls=3)
    t = totals([rec])
    assert (t.ops, t.kernels, t.gemms, t.gemm_flops, t.gemm_bytes, t.memory_bytes) == (3, 3, 3, 144, 45, 0)
