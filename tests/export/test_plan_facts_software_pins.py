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
