"""Further Megatron-Core card fields through every exporter and importer: ``parallel.overlap_param_gather`` (Megatron-Core's
distributed optimizer), ``parallel.moe_dispatcher: allgather``, ``precision.grads`` as Megatron's
``grad_reduce_in_fp32`` and ``rollout.prompt_len_mean`` (the data's mean prompt). Written where the framework has
the key and read back (also from hand-written framework files), said in one note naming the field where it has not."""

from __future__ import annotations

import tomllib

import pytest
import yaml
from export_cards import CARDS, assert_lost_fields_named

from trainfit.errors import TrainfitError
from trainfit.export import TARGETS, export, read_back
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict

NEW_FIELDS = ("parallel.overlap_param_gather", "parallel.moe_dispatcher", "precision.grads", "rollout.prompt_len_mean")
NEW_CARDS = ("grpo-moe-allgather-overlap-gather", "sft-8b-overlap-gather-bf16-grads", "grpo-lora-prompt-mean",
             "sft-moe-allgather")


def _sft_moe_allgather():
    return load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
                           "parallel": {"strategy": "zero1", "expert_parallel": 8, "moe_dispatcher": "allgather",
                                        "tensor_parallel_impl": "megatron"},
                           "batch": {"micro_batch_size": 1, "grad_accum": 4, "seq_len": 4096}, "attention": "flash"})


def _card(name):
    return _sft_moe_allgather() if name == "sft-moe-allgather" else CARDS[name]()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", NEW_CARDS)
def test_every_new_setting_is_carried_or_named(name, target):
    card = _card(name)
    assert_lost_fields_named(card, target, NEW_FIELDS)


def test_verl_writes_the_ddp_keys_and_the_allgather_dispatcher():
    card = CARDS["grpo-moe-allgather-overlap-gather"]()
    o = export(card, "verl").data["overrides"]
    m = "actor_rollout_ref.actor.megatron"
    assert f"+{m}.override_transformer_config.moe_token_dispatcher_type=allgather" in o
    assert f"+{m}.override_ddp_config.overlap_param_gather=True" in o
    assert f"+{m}.override_ddp_config.overlap_grad_reduce=True" in o  # Megatron-LM requires it beside
    # grads fp32 is verl's / mbridge's default grad_reduce_in_fp32 True: nothing written
    assert not any("grad_reduce_in_fp32" in x for x in o)
    back = read_back(card, export(card, "verl"))
    assert back.parallel.overlap_param_gather and back.parallel.moe_dispatcher.value == "allgather"
    assert back.precision.grads.value == "fp32"
    # an unset or bf16 gradient dtype is written as false and reads back unset
    bf16 = CARDS["sft-8b-overlap-gather-bf16-grads"]()
    e = export(bf16, "verl")
    assert "+engine.override_ddp_config.grad_reduce_in_fp32=False" in e.data["overrides"]
    assert e.lost["precision.grads"] == {"card": "bf16", "file": None}
    assert read_back(bf16, e).precision.grads is None
    unset = load_card_dict({**_bf16_dict(), "precision": {"master_weights": "fp32", "optimizer_states": "fp32"}})
    u = export(unset, "verl")
    assert "precision.grads" not in u.lost and "parallel.overlap_param_gather" not in u.lost


def _bf16_dict():
    return {"model": "Qwen/Qwen3-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True,
                         "tensor_parallel_impl": "megatron", "overlap_param_gather": True},
            "batch": {"micro_batch_size": 1, "grad_accum": 8, "seq_len": 4096}, "attention": "flash"}


def test_nemo_rl_writes_the_ddp_keys_and_the_allgather_dispatcher():
    card = CARDS["grpo-moe-allgather-overlap-gather"]()
    e = export(card, "nemo-rl")
    m = yaml.safe_load(e.text)["policy"]["megatron_cfg"]
    assert m["moe_token_dispatcher_type"] == "allgather" and "moe_enable_deepep" not in m
    assert m["distributed_data_parallel_config"] == {"use_custom_fsdp": False, "grad_reduce_in_fp32": True,
                                                     "overlap_param_gather": True}
    back = read_back(card, e)
    assert back.parallel.overlap_param_gather and back.parallel.moe_dispatcher.value == "allgather"
    assert back.precision.grads.value == "fp32"
    assert not [k for k in e.lost if k in NEW_FIELDS[:3]]
    # the card's default (no overlap) is written against the example's overlap_param_gather: true
    off = export(load_card_dict({**_bf16_dict(), "parallel": {**_bf16_dict()["parallel"], "overlap_param_gather": False}}),
                 "nemo-rl")
    ddp = yaml.safe_load(off.text)["policy"]["megatron_cfg"]["distributed_data_parallel_config"]
    assert ddp["overlap_param_gather"] is False and ddp["grad_reduce_in_fp32"] is False
    assert "parallel.overlap_param_gather" not in off.lost and "precision.grads" not in off.lost


NEMO_RECIPE = """defaults: grpo_math_1B.yaml
policy:
  model_name: Qwen/Qwen3-30B-A3B
  megatron_cfg:
    enabled: true
    expert_model_parallel_size: 8
    moe_token_dispatcher_type: allgather
cluster: {gpus_per_node: 8, num_nodes: 2}
"""


def test_nemo_rl_recipe_takes_the_example_defaults():
    """A hand-written recipe without distributed_data_parallel_config runs grpo_math_1B.yaml's: overlap_param_gather
    true (the distributed optimizer's, also the example's default), grad_reduce_in_fp32 false."""
    card = import_text(NEMO_RECIPE, "nemo-rl").card
    assert card["parallel"]["moe_dispatcher"] == "allgather" and card["parallel"]["strategy"] == "zero1"
    assert card["parallel"]["overlap_param_gather"] is True
    assert "grads" not in card["precision"]
    ddp = NEMO_RECIPE.replace("    moe_token", "    distributed_data_parallel_config:\n      grad_reduce_in_fp32: true\n"
                              "      overlap_param_gather: false\n    moe_token")
    card = import_text(ddp, "nemo-rl").card
    assert card["precision"]["grads"] == "fp32" and "overlap_param_gather" not in card["parallel"]
    with pytest.raises(TrainfitError, match="grad_reduce_in_fp32: 'yes'; allowed: true, false"):
        import_text(ddp.replace("grad_reduce_in_fp32: true", "grad_reduce_in_fp32: 'yes'"), "nemo-rl")
    with pytest.raises(TrainfitError, match="allowed: alltoall, allgather, flex"):
        import_text(NEMO_RECIPE.replace("allgather", "alltoall_seq"), "nemo-rl")


VERL_RECIPE = """python3 -m verl.trainer.main_ppo model_engine=megatron algorithm.adv_estimator=grpo \\
    actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B actor_rollout_ref.actor.strategy=megatron \\
    actor_rollout_ref.actor.megatron.expert_model_parallel_size=8 \\
    +actor_rollout_ref.actor.megatron.override_transformer_config.moe_token_dispatcher_type=allgather \\
    trainer.n_gpus_per_node=8 trainer.nnodes=2
"""


def test_verl_recipe_gradient_dtype_follows_the_bridge():
    """No override_ddp_config: verl's and mbridge's default grad_reduce_in_fp32 True (fp32); Megatron-Bridge
    (vanilla_mbridge=False) defaults it False; the overrides win."""
    m = "actor_rollout_ref.actor.megatron"
    card = import_text(VERL_RECIPE, "verl").card
    assert card["precision"]["grads"] == "fp32" and card["parallel"]["moe_dispatcher"] == "allgather"
    assert "overlap_param_gather" not in card["parallel"]
    bridge = VERL_RECIPE.replace("trainer.n", f"{m}.vanilla_mbridge=False trainer.n", 1)
    assert "grads" not in import_text(bridge, "verl").card["precision"]
    on = bridge.replace("trainer.n", f"+{m}.override_ddp_config.grad_reduce_in_fp32=True"
                        f" +{m}.override_ddp_config.overlap_param_gather=True trainer.n", 1)
    card = import_text(on, "verl").card
    assert card["precision"]["grads"] == "fp32" and card["parallel"]["overlap_param_gather"] is True
    fsdp = import_text(on.replace("trainer.n", f"{m}.use_megatron_fsdp=True trainer.n", 1), "verl")
    assert "overlap_param_gather" not in fsdp.card["parallel"]
    assert any("overlap_param_gather: Megatron FSDP's parameter prefetch" in n for n in fsdp.notes)
    with pytest.raises(TrainfitError, match="override_ddp_config.overlap_param_gather: 'sometimes'"):
        import_text(on.replace("overlap_param_gather=True", "overlap_param_gather=sometimes"), "verl")


def test_torchtitan_has_no_allgather_dispatcher():
    card = _sft_moe_allgather()
    e = export(card, "torchtitan")
    assert "expert_parallel_comm_backend" not in tomllib.loads(e.text)["parallelism"]
    assert e.lost["parallel.moe_dispatcher"] == {"card": "allgather", "file": "alltoall"}
    assert any(n.startswith("parallel.moe_dispatcher allgather: torchtitan has no all-gather") for n in e.notes)


@pytest.mark.parametrize("target", ["trl", "verl", "openrlhf", "nemo-rl"])
def test_prompt_len_mean_is_the_datas_lost_said_and_asked_back(target):
    card = CARDS["grpo-lora-prompt-mean"]()
    e = export(card, target)
    assert e.lost["rollout.prompt_len_mean"] == {"card": 120, "file": None}
    assert any(n.startswith("rollout.prompt_len_mean 120: the mean prompt length is a property of the data")
               for n in e.notes)
    assert "120" not in e.text.replace("1200", "")  # not written anywhere
    companion = ("accelerate", export(card, "accelerate").text) if target == "trl" else None
    back = import_text(e.text, target, companion=companion)
    assert any("--set rollout.prompt_len_mean=N" in n and "(512 tokens)" in n for n in back.notes), back.notes
    assert read_back(card, e).rollout.prompt_len_mean is None


def test_cli_export_prints_the_set_line_for_the_mean_prompt(tmp_path, capsys):
    from trainfit.cli.main import main

    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-8B\nmethod: grpo\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n"
                    "rollout: {prompt_len: 1024, prompt_len_mean: 173}\n")
    assert main(["export", str(card), "--to", "verl"]) == 0
    err = capsys.readouterr().err
    assert "rollout.prompt_len_mean 173: the mean prompt length is a property of the data" in err
    assert "--set rollout.prompt_len_mean=173" in err
