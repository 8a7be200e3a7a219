"""DeepSpeed's offload ``device`` is none, cpu or nvme (ZeRO-Infinity). The importers read every value but none as
host-memory offload, so an NVMe config planned host RAM and PCIe transfers it does not use: refused in one line."""

from __future__ import annotations

import json

import pytest

from trainfit.errors import InputError
from trainfit.export.importers import read_accelerate, read_deepspeed


def _ds(device, key="offload_optimizer") -> str:
    return json.dumps({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True},
                       "zero_optimization": {"stage": 3, key: {"device": device}}})


@pytest.mark.parametrize(("device", "offload"), [("cpu", "optimizer"), ("none", "none")])
def test_cpu_and_none_import_as_before(device, offload):
    assert read_deepspeed(_ds(device)).card["parallel"]["offload"] == offload


def test_param_offload_to_cpu_is_params_and_optimizer():
    assert read_deepspeed(_ds("cpu", "offload_param")).card["parallel"]["offload"] == "params_and_optimizer"


@pytest.mark.parametrize("key", ["offload_optimizer", "offload_param"])
def test_nvme_is_refused_naming_the_key(key):
    with pytest.raises(InputError, match=rf"zero_optimization\.{key}\.device: nvme \(ZeRO-Infinity's NVMe offload\)"
                                         r" has no card field; allowed: none, cpu"):
        read_deepspeed(_ds("nvme", key))


def test_an_unknown_device_is_refused():
    with pytest.raises(InputError, match=r"offload_optimizer\.device: 'gpu'; allowed: none, cpu"):
        read_deepspeed(_ds("gpu"))


def test_accelerate_deepspeed_plugin_nvme_is_refused():
    text = ("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\n"
            "deepspeed_config:\n  zero_stage: 3\n  offload_optimizer_device: nvme\n  offload_param_device: none\n")
    with pytest.raises(InputError, match=r"deepspeed_config\.offload_optimizer_device: nvme"):
        read_accelerate(text)
    assert read_accelerate(text.replace("nvme", "cpu")).card["parallel"]["offload"] == "optimizer"


# DeepSpeed passes offload_param to the stage-3 optimizer only (deepspeed/runtime/engine.py @v0.19.5): below stage 3 it
# is ignored, so nvme there is no refusal and cpu there is no parameter offload; a note says so.
@pytest.mark.parametrize(("device", "stage"), [("nvme", 1), ("nvme", 2), ("cpu", 2)])
def test_offload_param_below_stage_3_is_a_note(device, stage):
    text = json.dumps({"zero_optimization": {"stage": stage, "offload_param": {"device": device}}})
    imported = read_deepspeed(text)
    assert imported.card["parallel"]["offload"] == "none"
    assert any("at ZeRO stage 3 only" in n for n in imported.notes), imported.notes


@pytest.mark.parametrize("stage", [1, 2])
def test_accelerate_offload_param_below_stage_3_is_a_note(stage):
    text = ("distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\ndeepspeed_config:\n"
            f"  zero_stage: {stage}\n  offload_optimizer_device: cpu\n  offload_param_device: nvme\n")
    imported = read_accelerate(text)
    assert imported.card["parallel"]["offload"] == "optimizer"
    assert any("at ZeRO stage 3 only" in n for n in imported.notes), imported.notes


@pytest.mark.parametrize(("zero", "offload"), [
    ({"stage": 2, "cpu_offload": True}, "optimizer"),
    ({"stage": 3, "cpu_offload": True, "cpu_offload_param": True}, "params_and_optimizer"),
    ({"stage": 3, "cpu_offload": False}, "none"),
])
def test_deprecated_cpu_offload_switches_are_read(zero, offload):
    assert read_deepspeed(json.dumps({"zero_optimization": zero})).card["parallel"]["offload"] == offload


def test_a_deprecated_switch_with_its_block_is_refused():
    with pytest.raises(InputError, match=r"cpu_offload and zero_optimization\.offload_optimizer: give one"):
        read_deepspeed(json.dumps({"zero_optimization": {"stage": 2, "cpu_offload": True,
                                                         "offload_optimizer": {"device": "cpu"}}}))


@pytest.mark.parametrize("device", ["CPU", "Cpu", "x" * 5000])
def test_a_device_deepspeed_refuses_is_refused_shortly(device):
    with pytest.raises(InputError, match=r"allowed: none, cpu") as exc:
        read_deepspeed(_ds(device))
    assert len(str(exc.value)) < 200


# ZeRO stage 0 (strategy ddp) builds no ZeRO optimizer, and offload_optimizer is "Valid with stage 1, 2, and 3"
# (deepspeedai/DeepSpeed deepspeed/runtime/zero/offload_config.py @1978617c691b2c992a17902975187ef8d61176fa l.52-53):
# the block is said in a note, not planned (the card refuses offload under ddp: spec.card.offload_strategy_refusal)
@pytest.mark.parametrize("key", ["offload_optimizer", "offload_param"])
def test_offload_at_stage_0_is_a_note(key):
    imported = read_deepspeed(json.dumps({"zero_optimization": {"stage": 0, key: {"device": "cpu"}}}))
    assert imported.card["parallel"] == {"strategy": "ddp", "offload": "none"} | {
        k: v for k, v in imported.card["parallel"].items() if k not in ("strategy", "offload")}
    assert any("stage 0" in n and "ignored and not planned" in n for n in imported.notes), imported.notes


def test_openrlhf_adam_offload_at_stage_0_is_a_note():
    from trainfit.export.importers import read_openrlhf

    script = ("deepspeed --module openrlhf.cli.train_sft --model.model_name_or_path Qwen/Qwen3-0.6B --ds.zero_stage 0"
              " --ds.adam_offload")
    imported = read_openrlhf(script)
    assert imported.card["parallel"]["strategy"] in ("ddp", "single")
    assert imported.card["parallel"]["offload"] == "none"
    assert any(n.startswith("--ds.adam_offload: ") and "ignored and not planned" in n for n in imported.notes)
