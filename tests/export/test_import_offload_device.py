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


@pytest.mark.parametrize(("device", "offload"), [("cpu", "optimizer"), ("none", "none"), ("CPU", "optimizer")])
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
