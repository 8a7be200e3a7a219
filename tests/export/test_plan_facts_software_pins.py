"""A ``software`` pin the planner reads is a plan fact, so an export that cannot carry it lists it as lost."""

from trainfit.export.common import plan_facts
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

MPT = {"model_type": "mpt", "d_model": 1024, "n_heads": 16, "n_layers": 8, "expansion_ratio": 4, "max_seq_len": 2048,
       "vocab_size": 50368, "no_bias": True, "attn_config": {"alibi": False, "attn_impl": "flash"}}


def _card(pin: str | None):
    d = {"model": {"config": MPT}, "method": "sft", "scope": "full", "attention": "flash",
         "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "batch": {"micro_batch_size": 4, "seq_len": 2048}}
    if pin is not None:
        d["software"] = {"llm-foundry": pin}
    return load_card_dict(d)


def test_llm_foundry_pin_changes_the_plan_and_the_facts():
    old, new = _card("0.4.0"), _card(None)
    assert make_plan(old).step_seconds > make_plan(new).step_seconds  # per-call unpad syncs before v0.5.0
    assert plan_facts(old) != plan_facts(new)
    assert plan_facts(old)["software.llm-foundry"] == "0.4.0"
    assert "software.llm-foundry" not in plan_facts(new)


def test_attention_kernel_and_kept_output_are_plan_facts_every_export_names():
    """attention_kernel prices the fused attention (compute.attention_time) and loop.keeps_output_through_backward /
    kept_output_dtype hold the logits through backward: plan facts, so no export drops them without a note."""
    from trainfit.export import TARGETS, export

    base = {"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "full", "attention": "flash",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "parallel": {"strategy": "fsdp"}}
    stated = load_card_dict({**base, "attention_kernel": "fa3",
                             "loop": {"keeps_output_through_backward": True, "kept_output_dtype": "fp32"}})
    plain = load_card_dict(base)
    assert make_plan(stated).step_seconds != make_plan(plain).step_seconds
    facts = plan_facts(stated)
    assert facts["attention_kernel"] == "fa3" and facts["loop.kept_output_dtype"] == "fp32"
    assert facts["loop.keeps_output_through_backward"] is True
    for target in TARGETS:
        e = export(stated, target)
        for key in ("attention_kernel", "loop.keeps_output_through_backward", "loop.kept_output_dtype"):
            assert key in e.lost, (target, key)
        assert any(n.startswith("attention_kernel:") for n in e.notes), target
        assert any(n.startswith("loop.*") for n in e.notes), target


def _facts_round_trip(card) -> dict:
    from trainfit.export.common import card_from_facts

    facts = plan_facts(card)
    again = load_card_dict(card_from_facts(facts))
    assert plan_facts(again) == facts
    return facts


def test_verl_pin_is_a_plan_fact():
    """``software.verl`` from 0.9 sends an fp32 trainer's weights uncast (plan.rl_sync): a plan fact that survives
    the facts' round trip."""
    def card(pin):
        d = {"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": "verl",
             "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2, "nic_gbps_per_gpu": 200},
             "parallel": {"strategy": "fsdp"}, "precision": {"weights": "fp32", "compute": "bf16"},
             "batch": {"micro_batch_size": 1, "seq_len": 2048},
             "rollout": {"placement": "split", "nodes": 1, "tensor_parallel": 2, "prompt_len": 512,
                         "response_len": 1024, "sleep_level": 0}}
        if pin is not None:
            d["software"] = {"verl": pin}
        return load_card_dict(d)

    new, old = card("0.9.0"), card(None)
    assert make_plan(new).step_seconds != make_plan(old).step_seconds
    assert _facts_round_trip(new)["software.verl"] == "0.9.0"
    assert "software.verl" not in _facts_round_trip(old)


def test_loss_upcast_and_compiled_are_plan_facts():
    """``loss.upcast: false`` changes the logits' memory and ``loss.compiled`` the loss's memory and time: both are
    plan facts and survive the facts' round trip."""
    base = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}, "batch": {"micro_batch_size": 2, "seq_len": 2048}}
    plain, low, comp = (load_card_dict({**base, **x}) for x in ({}, {"loss": {"upcast": False}},
                                                                 {"loss": {"compiled": True}}))
    assert make_plan(low).phases != make_plan(plain).phases
    assert make_plan(comp).phases != make_plan(plain).phases
    assert _facts_round_trip(low)["loss.upcast"] is False
    assert _facts_round_trip(comp)["loss.compiled"] is True
    assert plan_facts(plain)["loss.upcast"] is True and plan_facts(plain)["loss.compiled"] is False


def test_packed_rope_loop_and_its_megatron_core_pin_are_plan_facts_every_export_names():
    """``batch.packed_rope_loop`` adds the per-sample RoPE loop's kernels and host syncs to every attention layer
    (compute.inventory.thd_rope_loop), and ``software.megatron-core`` picks which loop (spec.card.thd_rope_loop_of):
    both change the step time, so no export drops them without listing them as lost. Before, neither was a plan fact
    and every target wrote a file that plans 17-18% faster without a word."""
    from trainfit.export import TARGETS, export

    base = {"model": "Qwen/Qwen3-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"tensor_parallel_impl": "megatron", "strategy": "ddp"},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "packed_sample_tokens": 512}}
    plain = load_card_dict(base)
    loop = {**base, "batch": {**base["batch"], "packed_rope_loop": True}}
    cat, copy = (load_card_dict({**loop, "software": {"megatron-core": pin}}) for pin in ("0.13.0", "0.19.0"))
    assert make_plan(plain).step_seconds < make_plan(cat).step_seconds < make_plan(copy).step_seconds
    assert plan_facts(cat)["batch.packed_rope_loop"] is True and "batch.packed_rope_loop" not in plan_facts(plain)
    assert plan_facts(cat)["software.megatron-core"] == "0.13.0" and plan_facts(cat) != plan_facts(copy)
    _facts_round_trip(cat)
    for target in TARGETS:
        lost = export(cat, target).lost
        assert "batch.packed_rope_loop" in lost and "software.megatron-core" in lost, (target, lost)
