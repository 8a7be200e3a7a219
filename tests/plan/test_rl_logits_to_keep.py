"""TRL's GRPO computes the policy's and the reference's logits over the completion only: ``_get_per_token_logps``
calls the model with ``logits_to_keep=logits_to_keep + 1`` where ``logits_to_keep = completion_ids.size(1)``
(huggingface/trl v0.15.0 @00e58893809af89d07c2ff9c582ac5060888363c trl/trainer/grpo_trainer.py l.478-487; first as
``num_logits_to_keep`` in v0.14.0 @49711efab9e0cc3762d3228c9fd5a8064d489503 l.430-443), and transformers slices the
hidden states before ``lm_head`` (5.24.0 models/llama/modeling_llama.py ``hidden_states[:, slice_indices, :]``).
``methods.roles.logit_positions``; a ``software.trl`` pin before 0.14 and verl keep the whole sequence."""

import pytest

from trainfit.cli.common import default_card_dict
from trainfit.methods.rl import forward_only_transient
from trainfit.methods.roles import logit_positions
from trainfit.catalog.models import resolve_model
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

PROMPT, RESPONSE = 1024, 256


def _card(preset=None, trl=None, method="grpo", kl=0.04, packed=None):
    d = default_card_dict()
    d.update(method=method, model="Qwen/Qwen3-0.6B")
    if preset:
        d["preset"] = preset
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": PROMPT, "response_len": RESPONSE}
    d["roles"] = {"kl_coef": kl}
    if packed is not None:
        d["rollout"]["packed_sequences"] = packed
    if trl:
        d["software"] = {**(d.get("software") or {}), "trl": trl}
    return load_card_dict(d)


def test_positions_by_framework_and_pin():
    seq = PROMPT + RESPONSE
    assert logit_positions(_card(), seq_len=seq) == RESPONSE + 1  # no preset: TRL planned, newest TRL
    assert logit_positions(_card(trl="0.15.2"), seq_len=seq) == RESPONSE + 1
    assert logit_positions(_card(trl="0.13.0"), seq_len=seq) == seq  # before the release: the whole sequence
    assert logit_positions(_card(preset="verl"), seq_len=seq) == seq  # verl slices the log-probs after the logits
    assert logit_positions(_card(method="ppo"), seq_len=seq) == seq  # TRL's PPO: logits over query + response
    assert logit_positions(_card(), seq_len=128) == 128  # never more than the sequence
    assert logit_positions(_card(packed=True), seq_len=seq) == seq  # a packed row's logits over every packed token


def test_frozen_pass_head_over_kept_positions():
    """TRL's eager log-prob pass: the bf16 logits (2·b·k·V) beside the temperature-divided copy (2·b·(k-1)·V), k the
    kept positions, while the layers still run over the whole sequence."""
    spec = resolve_model("Qwen/Qwen3-0.6B")
    b, s, k, v = 4, PROMPT + RESPONSE, RESPONSE + 1, spec.vocab_size
    kept = forward_only_transient(spec, sequences=b, seq_len=s, chunked=False, gathered_units=0.0,
                                  kernel="none", logit_positions=k)
    assert kept == pytest.approx(2.0 * b * k * v + 2.0 * b * (k - 1) * v)
    full = forward_only_transient(spec, sequences=b, seq_len=s, chunked=False, gathered_units=0.0, kernel="none")
    assert full == pytest.approx(2.0 * b * s * v + 2.0 * b * (s - 1) * v)


def test_plan_memory_moves_for_trl_only():
    new, old = make_plan(_card()), make_plan(_card(trl="0.13.0"))
    by_new = {p.phase.value: p for p in new.phases}
    by_old = {p.phase.value: p for p in old.phases}
    for name in ("ref_logprob", "actor_forward"):
        assert by_new[name].allocated < by_old[name].allocated, name
    assert by_new["load"].allocated == by_old["load"].allocated
    assert any("logits_to_keep" in n for n in new.assumptions)
    v_new, v_old = make_plan(_card(preset="verl")), make_plan(_card(preset="verl", trl="0.13.0"))
    assert [p.allocated for p in v_new.phases] == [p.allocated for p in v_old.phases]


def test_time_head_over_kept_positions():
    """The lm_head GEMMs (forward, dX, dW) and the loss's bytes over ``b x head_positions`` rows; the final norm and
    the layers over every token."""
    from trainfit.compute.inventory import step_inventory

    spec = resolve_model("Qwen/Qwen3-0.6B")
    b, s, k = 2, PROMPT + RESPONSE, RESPONSE + 1
    full = step_inventory(spec, micro_batch_size=b, seq_len=s)
    kept = step_inventory(spec, micro_batch_size=b, seq_len=s, head_positions=k)
    assert [g.m for g in kept.head_forward.gemms] == [b * k]
    assert [(g.name, g.m * g.n * g.k) for g in kept.head_backward.gemms] == [
        (g.name, g.m * g.n * g.k * k / s) for g in full.head_backward.gemms]
    assert kept.layers_forward == full.layers_forward
    assert kept.head_forward.memory_bytes < full.head_forward.memory_bytes


def test_trl_grpo_passes_time_less():
    new, old = make_plan(_card()), make_plan(_card(trl="0.13.0"))
    t_new = {p.name: p.seconds for p in new.time.phases}
    t_old = {p.name: p.seconds for p in old.time.phases}
    for name in ("ref_logprob", "actor_update"):
        assert t_new[name] < t_old[name], name
    assert t_new["generation"] == t_old["generation"]


def test_trace_request_refuses_logits_to_keep_outside_the_logprob_pass():
    from trainfit.trace.types import TraceRequest, TraceUnsupported

    assert TraceRequest(hf_config={}, pass_kind="logprob", seq_len=64, logits_to_keep=48).logits_to_keep == 48
    for kind, keep in (("train_step", 48), ("logprob", 64), ("logprob", -1)):
        with pytest.raises(TraceUnsupported, match="logits_to_keep"):
            TraceRequest(hf_config={}, pass_kind=kind, seq_len=64, logits_to_keep=keep)


def _fused(triton=None, preset="trl"):
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B", preset=preset)
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": PROMPT, "response_len": RESPONSE}
    d["loss"] = {"chunked": True, "kernel": "trl", **({} if triton is None else {"triton": triton})}
    return load_card_dict(d)


def test_fused_head_keeps_the_completion_on_a_triton_device_only():
    """TRL 1.16's fused lm_head scores ``hidden_states[mask]`` (the completion's rows) only where ``_use_triton`` holds
    (trl/trainer/utils.py l.1640-1648; ``methods.roles.TRL_FUSED_HEAD_COMPACT``); on a CPU every position. The CPU
    acceptance run (loss.triton false) is the case the first rule over-applied: 76.6 MiB planned, 136.4 measured."""
    seq = PROMPT + RESPONSE
    assert logit_positions(_fused(), seq_len=seq) == RESPONSE + 1  # a GPU card: Triton runs
    assert logit_positions(_fused(triton=True), seq_len=seq) == RESPONSE + 1
    assert logit_positions(_fused(triton=False), seq_len=seq) == seq  # no Triton: every position scored
    gpu, cpu = make_plan(_fused()), make_plan(_fused(triton=False))

    def logits(plan, phase):
        return next(p for g in plan.groups for p in g.phases if p.phase.value == phase).components["logits"]

    # the fp32 tile (min(N, 4096) x 32768) and the scored rows' copy over b*(k) rows instead of b*s
    assert logits(gpu, "actor_forward") < logits(cpu, "actor_forward")
    from trainfit.export.common import plan_facts

    assert plan_facts(_fused(triton=False))["loss.triton"] is False and "loss.triton" not in plan_facts(_fused())


def test_triton_field_refused_off_the_fused_head():
    from trainfit.errors import CardError

    with pytest.raises(CardError, match="loss.triton: only read with loss.chunked true and loss.kernel trl"):
        d = default_card_dict()
        d.update(method="grpo", model="Qwen/Qwen3-0.6B", loss={"chunked": True, "kernel": "liger", "triton": False})
        load_card_dict(d)


def test_accept_card_states_the_device():
    """The acceptance harness's card plans what its device runs: on the CPU every position (its forward measured 136.4
    MiB, within 3 % of this plan), on CUDA the completion's."""
    pytest.importorskip("trl")
    from trainfit.accept.train import accept_card

    cfg = {"model_type": "qwen3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "max_position_embeddings": 2048, "tie_word_embeddings": False}
    cpu = load_card_dict(accept_card(cfg, micro_batch=4, seq_len=256))
    cuda = load_card_dict(accept_card(cfg, micro_batch=4, seq_len=256, device="cuda"))
    assert cpu.loss.triton is False and cuda.loss.triton is True
    assert logit_positions(cpu, seq_len=256) == 256
    assert logit_positions(cuda, seq_len=256) == 129
