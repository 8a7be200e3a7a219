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
