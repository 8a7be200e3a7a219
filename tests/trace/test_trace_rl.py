"""The trace API for the RL passes: pass_kind validation, phases, mechanism, extrapolation."""

import pytest

from trainfit.trace.api import TraceRequest, TraceUnsupported

pytestmark = pytest.mark.trace

TINY = dict(model_type="qwen3", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=32, vocab_size=256, tie_word_embeddings=False)
MID = dict(model_type="llama", hidden_size=128, intermediate_size=344, num_hidden_layers=6, num_attention_heads=4,
           num_key_value_heads=2, head_dim=32, vocab_size=4096, tie_word_embeddings=False)


def test_default_pass_kind_is_the_training_step():
    req = TraceRequest(hf_config=TINY)
    assert req.pass_kind == "train_step"
    assert req.phase_names == ("forward", "backward", "optimizer_step")


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(pass_kind="rollout"), "pass_kind"),
        (dict(pass_kind="logprob", world_size=2), "world_size"),
        (dict(pass_kind="value", mode="memtracker"), "fast"),
        (dict(pass_kind="logprob", gradient_checkpointing=True), "no-grad"),
        (dict(pass_kind="logprob", dpo_reference=True), "dpo_reference"),
        (dict(pass_kind="logprob", temperature=0.0), "temperature"),
        (dict(pass_kind="dpo_step", keep_outputs=True), "keep_outputs"),
    ],
)
def test_bad_rl_requests_say_why(kw, match):
    with pytest.raises(TraceUnsupported, match=match):
        TraceRequest(hf_config=TINY, **kw)


def test_phase_names_per_kind():
    assert TraceRequest(hf_config=TINY, pass_kind="logprob").phase_names == ("logprob",)
    assert TraceRequest(hf_config=TINY, pass_kind="value").phase_names == ("value",)
    assert TraceRequest(hf_config=TINY, pass_kind="dpo_step").phase_names == ("forward", "backward", "optimizer_step")
    assert TraceRequest(hf_config=TINY, pass_kind="dpo_step", dpo_reference=True).phase_names[:2] == ("forward",
                                                                                                    "ref_logprob")


def _trace(**kw):
    pytest.importorskip("torch")
    from trainfit.trace.api import trace_step

    return trace_step(TraceRequest(**kw))


def test_logprob_peak_is_the_logits_and_their_divided_copy():
    b, s, v = 4, 64, TINY["vocab_size"] * 16
    cfg = dict(TINY, vocab_size=v)
    r = _trace(hf_config=cfg, pass_kind="logprob", micro_batch_size=b, seq_len=s, temperature=0.7)
    assert [p.name for p in r.phases] == ["logprob"] and r.peak_phase == "logprob"
    bd = r.phase("logprob").breakdown
    # bf16 logits of every position + logits[:, :-1] / T (bf16), alive together; nothing is saved
    assert bd["temporaries"] == 2 * b * s * v + 2 * b * (s - 1) * v
    assert bd["gradients"] == bd["optimizer_states"] == 0
    assert any("selective_log_softmax" in n for n in r.notes)


def test_value_pass_has_a_scalar_head_and_no_vocabulary_logits():
    cfg = dict(TINY, vocab_size=4096)
    lm = _trace(hf_config=cfg, pass_kind="logprob", seq_len=64)
    val = _trace(hf_config=cfg, pass_kind="value", seq_len=64)
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    assert lm.params_total - val.params_total == v * h - h  # lm_head (V x h) replaced by score (1 x h)
    assert [p.name for p in val.phases] == ["value"]
    # the peak is inside a decoder layer: far below one bf16 row of vocabulary logits per token
    assert val.phase("value").breakdown["temporaries"] < 2 * 64 * v < lm.phase("logprob").breakdown["temporaries"]


def test_dpo_step_phases_and_reference_weights():
    kw = dict(hf_config=TINY, pass_kind="dpo_step", seq_len=32, micro_batch_size=2)
    pre = _trace(**kw)
    live = _trace(**kw, dpo_reference=True)
    lora = _trace(**kw, dpo_reference=True, scope="lora")
    assert [p.name for p in pre.phases] == ["forward", "backward", "optimizer_step"]
    assert [p.name for p in live.phases] == ["forward", "ref_logprob", "backward", "optimizer_step"]
    w = pre.phase("optimizer_step").breakdown["weights"]
    # scope full: a frozen copy is resident in every phase; LoRA: the adapter-disabled policy, no copy
    assert live.phase("forward").breakdown["weights"] == 2 * w
    assert lora.phase("ref_logprob").breakdown["weights"] == lora.phase("forward").breakdown["weights"] < 2 * w
    # the optimizer states exist (steady state) and the reference pass holds no gradients
    assert live.phase("ref_logprob").breakdown["optimizer_states"] > 0
    assert live.phase("ref_logprob").breakdown["gradients"] == 0
    # TRL's order: the reference pass runs after the policy's forward, whose saved activations are still alive
    # (up to the few bytes of the precomputed reference log-probs the other trace holds as inputs)
    assert live.phase("ref_logprob").breakdown["activations"] >= pre.phase("forward").breakdown["activations"] - 64 > 0
    assert live.phase("optimizer_step").breakdown["weights"] == 2 * w


@pytest.mark.parametrize(
    "kw",
    [dict(pass_kind="logprob", micro_batch_size=2), dict(pass_kind="value"),
     dict(pass_kind="dpo_step", dpo_reference=True), dict(pass_kind="dpo_step", scope="lora", dpo_reference=True)],
    ids=["logprob", "value", "dpo-ref", "dpo-lora-ref"],
)
def test_extrapolated_rl_passes_equal_full_depth(kw):
    ext = _trace(hf_config=MID, seq_len=64, **kw)
    full = _trace(hf_config=MID, seq_len=64, layers=MID["num_hidden_layers"], **kw)
    assert ext.extrapolated and not full.extrapolated
    assert [(p.name, p.peak_bytes) for p in ext.phases] == [(p.name, p.peak_bytes) for p in full.phases]
    assert (ext.params_total, ext.params_trainable) == (full.params_total, full.params_trainable)
