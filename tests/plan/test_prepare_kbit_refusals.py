"""``lora.prepare_kbit`` is refused where it does not run or does nothing: under a strategy that shards parameters
(TRL skips the recipe for QLoRA + FSDP / ZeRO-3, trl 0.13.0 wheel trl/trainer/sft_trainer.py l.183-185; FSDP1's flat
parameters need one dtype per unit), and with ``precision.nf4_compute_dtype`` fp32 (the model is already fp32)."""

from __future__ import annotations

import pytest

from trainfit.cli.main import main
from trainfit.spec.card import RunCard


def _card(**over) -> dict:
    card = {"scope": "qlora", "model": "mistralai/Mistral-7B-v0.1", "lora": {"prepare_kbit": "trl"},
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2}, "parallel": {"strategy": "fsdp"},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}}
    for k, v in over.items():
        card[k] = {**card.get(k, {}), **v}
    return card


@pytest.mark.parametrize("strategy", ["fsdp", "fsdp_grad_op", "hsdp", "zero3"])
@pytest.mark.parametrize("recipe", ["peft", "trl"])
def test_sharded_strategies_refuse_the_recipe(strategy: str, recipe: str) -> None:
    with pytest.raises(ValueError, match=f"lora.prepare_kbit: {recipe} is not run under parallel.strategy {strategy}"):
        RunCard.model_validate(_card(parallel={"strategy": strategy}, lora={"prepare_kbit": recipe}))


def test_unsharded_strategies_keep_it() -> None:
    for strategy in ("ddp", "zero2"):
        assert RunCard.model_validate(_card(parallel={"strategy": strategy})).lora.prepare_kbit.value == "trl"
    assert RunCard.model_validate(_card(parallel={"strategy": "fsdp"}, lora={"prepare_kbit": "none"}))


def test_fp32_compute_dtype_refuses_it() -> None:
    with pytest.raises(ValueError, match="nf4_compute_dtype fp32 the model is already fp32"):
        RunCard.model_validate(_card(parallel={"strategy": "single"}, hardware={"gpus_per_node": 1},
                                     precision={"nf4_compute_dtype": "fp32"}))


def test_cli_one_line_and_exit_2(tmp_path, capsys) -> None:
    path = tmp_path / "card.yaml"
    path.write_text("scope: qlora\nmodel: mistralai/Mistral-7B-v0.1\nlora: {prepare_kbit: peft}\n"
                    "hardware: {gpu: a100-80gb, gpus_per_node: 2}\nparallel: {strategy: fsdp}\n")
    rc = main(["plan", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "lora.prepare_kbit" in err and "allowed with it: none" in err


@pytest.mark.parametrize("experts", ["grouped", "grouped_streams", "grouped_padded", "loop_v5"])
@pytest.mark.parametrize("recipe", ["peft", "trl"])
def test_the_recipe_on_transformers_5_fused_experts_is_refused(experts: str, recipe: str) -> None:
    """The recipe casts the 3-D expert stacks to fp32 (benchmarks/qlora_moe_experts_cpu.py), which sends them to
    torch's per-expert fp32 grouped_mm fallback (or a bf16 cast per slice under loop_v5): not priced, so refused;
    transformers 4's loop (Linear4bit experts) and a card without the recipe still plan."""
    from trainfit.errors import CardError
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    def card(prepare: str, moe_experts: str, **software) -> dict:
        d = {"scope": "qlora", "model": "Qwen/Qwen3-30B-A3B", "lora": {"prepare_kbit": prepare},
             "hardware": {"gpu": "h200", "gpus_per_node": 1},
             "parallel": {"strategy": "single", "moe_experts": moe_experts},
             "batch": {"micro_batch_size": 1, "seq_len": 1024}}
        if software:
            d["software"] = software
        return load_card_dict(d)

    with pytest.raises(CardError) as exc:
        make_plan(card(recipe, experts))
    text = str(exc.value)
    assert text.startswith(f"lora.prepare_kbit: {recipe} casts") and "allowed with" in text and "\n" not in text
    assert make_plan(card("none", experts)).step_seconds > 0
    assert make_plan(card(recipe, "loop", transformers="4.57.6")).step_seconds > 0
    assert make_plan(card(recipe, "loop_all", transformers="4.52.4")).step_seconds > 0
