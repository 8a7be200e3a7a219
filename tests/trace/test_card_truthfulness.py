"""Card truthfulness (issue 15): LoRA targets that match nothing are refused with the model's linear
layer names; ``lora.modules_to_save`` and ``loop.keeps_output_through_backward`` are planned as the
fake-tensor trace measures them (allocated peak within 2%, same peak phase)."""

import re

import pytest

from trainfit.accuracy.grid import GridCase
from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

TOLERANCE = 0.02


def test_targets_matching_nothing_exit_2_naming_the_linear_layers(capsys):
    rc = main(["plan", "--set", "scope=lora", "--set", "lora.targets=[c_attn]"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip() == ("trainfit: error: lora.targets: c_attn match no linear layer of Qwen/Qwen3-8B; its linear layers: q_proj,"
                           " k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (or all-linear)")
    # one matching target is enough (PEFT ignores the others), as before
    plan = make_plan(load_card_dict({"scope": "lora", "lora": {"targets": ["q_proj", "c_attn"]}}))
    assert plan.params_trainable == 36 * 16 * (4096 + 4096)


def test_modules_to_save_names_are_checked():
    with pytest.raises(CardError, match="lora.modules_to_save: 'wte' is not allowed; allowed: embed_tokens, lm_head"):
        make_plan(load_card_dict({"scope": "lora", "lora": {"modules_to_save": ["wte"]}}))
    plain = make_plan(load_card_dict({"scope": "lora"}))
    saved = make_plan(load_card_dict({"scope": "lora", "lora": {"modules_to_save": ["embed_tokens", "lm_head"]}}))
    assert saved.params_trainable - plain.params_trainable == 2 * 151936 * 4096


def test_kept_output_adds_the_logits_through_backward():
    base = {"model": "Qwen/Qwen3-8B", "hardware": {"gpus_per_node": 1}, "parallel": {"strategy": "single"}}
    a = make_plan(load_card_dict(base))
    b = make_plan(load_card_dict(base | {"loop": {"keeps_output_through_backward": True}}))
    back = lambda p: {x.phase.value: x.allocated for x in p.phases}["backward"]  # noqa: E731
    assert back(b) - back(a) == pytest.approx(2 * 2048 * 151936, rel=0.01)  # bf16 logits



def test_kept_fp32_output_is_the_fp32_copy():
    """prime-rl's SFT loop (loop.kept_output_dtype fp32): the kept copy is 4 B per logit through backward, and at
    the loss the bf16 logits are already gone (8 B per logit there, not the Trainer's 10)."""
    base = {"model": "Qwen/Qwen3-8B", "hardware": {"gpus_per_node": 1}, "parallel": {"strategy": "single"}}
    a = make_plan(load_card_dict(base | {"loop": {"keeps_output_through_backward": True}}))
    b = make_plan(load_card_dict(base | {"loop": {"keeps_output_through_backward": True, "kept_output_dtype": "fp32"}}))
    e = 2048 * 151936
    def phase(p, k):
        return {x.phase.value: x.tensor_bytes for x in p.phases}[k]

    assert phase(b, "backward") - phase(a, "backward") == pytest.approx(2 * e, rel=1e-6)
    assert phase(b, "forward") - phase(a, "forward") == pytest.approx(-2 * e, rel=1e-6)


@pytest.mark.parametrize(("loop", "message"), [
    ({"kept_output_dtype": "fp32"}, ("loop.kept_output_dtype: only read with loop.keeps_output_through_backward true"
                                     " (got 'fp32'); allowed without it: compute")),
    ({"keeps_output_through_backward": True, "kept_output_dtype": "bf16"}, "loop.kept_output_dtype"),
])
def test_kept_output_dtype_is_validated(loop, message):
    with pytest.raises(CardError, match=re.escape(message)):
        load_card_dict({"loop": loop})


def test_kept_fp32_needs_the_eager_loss():
    with pytest.raises(CardError, match="loop.kept_output_dtype: fp32 is the eager loss's fp32 copy"):
        load_card_dict({"loop": {"keeps_output_through_backward": True, "kept_output_dtype": "fp32"},
                        "loss": {"chunked": True}})


pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402
from trainfit.trace.types import TraceUnsupported  # noqa: E402

CASES = [
    ("keeps-output", GridCase("llama", scope="lora", seq_len=512),
     {"loop": {"keeps_output_through_backward": True}}, {"keep_outputs": True}),
    ("keeps-output-full-ckpt", GridCase("llama", scope="full", ckpt=True, seq_len=512),
     {"loop": {"keeps_output_through_backward": True}}, {"keep_outputs": True}),
    ("keeps-fp32-output-full-ckpt", GridCase("llama", scope="full", ckpt=True, seq_len=512),
     {"loop": {"keeps_output_through_backward": True, "kept_output_dtype": "fp32"}},
     {"keep_outputs": True, "kept_output_dtype": "fp32"}),
    ("modules-to-save", GridCase("llama", scope="lora", ckpt=True, seq_len=512),
     {"lora": {"modules_to_save": ["embed_tokens", "lm_head"]}}, {"lora_modules_to_save": ("embed_tokens", "lm_head")}),
]


@pytest.mark.trace
@pytest.mark.parametrize(("name", "case", "card_extra", "req_extra"), CASES, ids=[c[0] for c in CASES])
def test_plan_matches_trace(name, case, card_extra, req_extra):
    card = case.card()
    for key, value in card_extra.items():
        card[key] = card.get(key, {}) | value
    plan = make_plan(load_card_dict(card))
    traced = trace_step(TraceRequest(**(case.trace_kwargs() | req_extra)))
    planned = {p.phase.value: p.tensor_bytes for p in plan.phases}
    measured = {p.name: p.peak_bytes for p in traced.phases}
    err = (max(planned[k] for k in measured) - traced.peak_bytes) / traced.peak_bytes
    assert abs(err) <= TOLERANCE, (err, planned, measured)
    assert max(measured, key=lambda k: planned[k]) == traced.peak_phase


@pytest.mark.trace
def test_trace_refuses_targets_matching_nothing():
    case = GridCase("llama", scope="lora", seq_len=64)
    with pytest.raises(TraceUnsupported, match="lora.targets: c_attn match no linear layer of the model; its linear"
                                               " layers: down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, v_proj"):
        trace_step(TraceRequest(**(case.trace_kwargs() | {"lora_targets": ("c_attn",)})))


@pytest.mark.trace
def test_separately_sharded_embeddings_match_the_trace():
    """parallel.fsdp_shard_embeddings (torchtune custom_sharded_layers): no root unit holds the embedding
    and the head; each is gathered around its own use."""
    case = GridCase("llama", scope="full", ckpt=True, world_size=8, seq_len=512)
    card = case.card()
    card["parallel"]["fsdp_shard_embeddings"] = True
    plan = make_plan(load_card_dict(card))
    traced = trace_step(TraceRequest(**(case.trace_kwargs() | {"fsdp_shard_embeddings": True})))
    planned = {p.phase.value: p.tensor_bytes for p in plan.phases}
    measured = {p.name: p.peak_bytes for p in traced.phases}
    err = (max(planned[k] for k in measured) - traced.peak_bytes) / traced.peak_bytes
    assert abs(err) <= TOLERANCE, (err, planned, measured)
    root = make_plan(load_card_dict(case.card()))
    assert plan.peak.allocated < root.peak.allocated  # the root unit no longer holds them from forward to backward


@pytest.mark.trace
@pytest.mark.parametrize("ckpt", [True, False], ids=["ckpt", "no-ckpt"])
def test_fp32_kept_output_moves_plan_and_trace_alike(ckpt):
    """prime-rl's SFT loop traced as it runs (``trainfit.trace.step.prime_rl_sft_loss``: the fp32 copy kept, the
    bf16 logits dropped before the loss): each phase's plan-minus-trace residual is the one of the bf16-kept loop,
    to a few KiB (the small pool), so the fp32 field adds exactly what the trace adds."""
    case = GridCase("llama", scope="full", ckpt=ckpt, seq_len=512)
    residual = {}
    for dt in ("compute", "fp32"):
        card = case.card()
        card["loop"] = {"keeps_output_through_backward": True, "kept_output_dtype": dt}
        plan = make_plan(load_card_dict(card))
        traced = trace_step(TraceRequest(**(case.trace_kwargs() | {"keep_outputs": True, "kept_output_dtype": dt})))
        planned = {p.phase.value: p.tensor_bytes for p in plan.phases}
        residual[dt] = {p.name: planned[p.name] - p.peak_bytes for p in traced.phases}
    # the traced step drops its output after backward (GROUND_TRUTH's loop); the flag's loops (Lit-GPT, torchtune
    # 2024, PEFT's MetaMathQA, prime-rl) keep it bound through the optimizer step, which the plan counts
    # (memory.phases.StepTerms.kept_output): there the fp32 copy adds its extra 2 B per logit over the bf16 one
    extra = {"optimizer_step": case.micro_batch_size * case.seq_len * case.hf_config()["vocab_size"] * 2}
    for k, r in residual["compute"].items():
        assert abs(residual["fp32"][k] - r - extra.get(k, 0)) <= 4096, (k, residual)
