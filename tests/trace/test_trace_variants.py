"""What each knob does to the traced bytes, on small models (exact relations where they hold)."""

import pytest

pytest.importorskip("torch")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

SMALL = dict(model_type="qwen3", hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32, vocab_size=2048, tie_word_embeddings=False)
L, H, I, QD, KVD, V = 2, 128, 384, 128, 64, 2048
PARAMS = 2 * V * H + H + L * (H * QD + 2 * H * KVD + QD * H + 3 * H * I + 2 * H + 2 * 32)


def _t(**kw):
    kw.setdefault("seq_len", 128)
    return trace_step(TraceRequest(hf_config=SMALL, **kw))


@pytest.fixture(scope="module")
def base():
    return _t()


def test_counts_and_model_states(base):
    assert base.params_total == base.params_trainable == PARAMS
    opt = base.phase("optimizer_step").breakdown
    assert opt["weights"] >= 2 * PARAMS and opt["weights"] - 2 * PARAMS < 1024  # + rotary inv_freq
    assert opt["gradients"] == 2 * PARAMS
    n_tensors = 3 + L * 11  # embed, lm_head, norm; 7 linears, 2 norms, q/k norms
    assert 4 * PARAMS <= opt["optimizer_states"] <= 4 * PARAMS + 4 * n_tensors  # bf16 states + fp32 steps


def test_optimizer_impl_temporaries(base):
    fused = base.phase("optimizer_step").breakdown["temporaries"]
    loop = _t(optimizer_impl="for_loop").phase("optimizer_step").breakdown["temporaries"]
    each = _t(optimizer_impl="foreach").phase("optimizer_step").breakdown["temporaries"]
    assert fused == 0
    largest = 2 * V * H
    assert 2 * largest <= loop <= 2 * largest + 1024  # ~two temporaries the size of the largest parameter
    assert each == 2 * PARAMS  # one foreach temporary per parameter


def test_checkpointing_and_attention(base):
    ck = _t(gradient_checkpointing=True)
    eager = _t(attention="eager")
    act = base.phase("forward").breakdown["activations"]
    assert ck.phase("forward").breakdown["activations"] < act < eager.phase("forward").breakdown["activations"]
    assert ck.phase("forward").peak_bytes < base.phase("forward").peak_bytes


def test_fp32_master_doubles_model_states(base):
    fp = _t(precision="fp32_autocast")
    b, f = base.phase("optimizer_step").breakdown, fp.phase("optimizer_step").breakdown
    assert f["gradients"] == 2 * b["gradients"] == 4 * PARAMS
    assert 8 * PARAMS <= f["optimizer_states"] <= 8 * PARAMS + 4 * (3 + L * 11)


def test_lora_counts_and_frozen_base():
    r = _t(scope="lora", lora_rank=8)
    per_layer = (H + QD) + 2 * (H + KVD) + (QD + H) + 2 * (H + I) + (I + H)
    assert r.params_trainable == L * 8 * per_layer
    opt = r.phase("optimizer_step").breakdown
    assert opt["gradients"] == 4 * r.params_trainable  # PEFT keeps adapters in fp32
    assert opt["optimizer_states"] >= 8 * r.params_trainable


@pytest.mark.parametrize("kw", [dict(), dict(gradient_checkpointing=True), dict(scope="lora"),
                                dict(optimizer_impl="for_loop", precision="fp32_autocast")])
def test_memtracker_mode_agrees_with_fast(kw):
    fast = _t(layers=2, **kw)
    mt = _t(layers=2, mode="memtracker", **kw)
    assert [p.peak_bytes for p in mt.phases] == [p.peak_bytes for p in fast.phases]
    for p in mt.phases:
        assert sum(p.breakdown.values()) == p.peak_bytes


def test_packed_sequence_patch_is_restored():
    import transformers.masking_utils as mu

    before = mu.find_packed_sequence_indices
    _t(seq_len=32)
    assert mu.find_packed_sequence_indices is before
