"""Number fields of the run card refuse booleans (pydantic's lax mode read ``true`` as 1), and a node's network
has a floor: one line naming the field, exit 2."""

import pytest

from trainfit.cli.common import default_card_dict, set_path
from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.spec.card import NODE_NIC_FLOOR_GBPS, _NUMBER_FIELDS, HardwareSection, RunCard, load_card_dict


def _card(**sets):
    data = default_card_dict()
    for k, v in sets.items():
        set_path(data, k.replace("__", "."), v)
    return load_card_dict(data)


@pytest.mark.parametrize("key", ["hardware.nic_gbps_per_node", "hardware.nic_gbps_per_gpu", "hardware.nodes",
                                 "lora.alpha", "batch.micro_batch_size", "rollout.response_len",
                                 "deepspeed.reduce_bucket_size", "precision.bf16_first_layers"])
@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_in_a_number_field_is_refused_naming_it(key, value):
    with pytest.raises(CardError) as got:  # before: True read as 1 (1 Gb/s), False as 0 or a bound's message
        _card(**{key.replace(".", "__"): value})
    assert str(got.value) == f"{key}: got a boolean ({str(value).lower()}), not a number; allowed: a number"


def test_inside_a_model_mapping_and_a_list_of_numbers():
    with pytest.raises(CardError, match=r"^model\.params: got a boolean \(true\), not a number; allowed: a number$"):
        _card(model={"id": "Qwen/Qwen3-8B", "params": True})
    with pytest.raises(CardError, match=r"^parallel\.pipeline_layout: \[18, true\] holds a boolean; allowed: a list"
                                        r" of numbers$"):
        _card(parallel__pipeline_parallel=2, parallel__tensor_parallel_impl="megatron",
              parallel__pipeline_layout=[18, True])


def test_boolean_fields_and_numbers_still_load():
    card = _card(scope="lora", parallel__gradient_checkpointing=False, hardware__nic_gbps_per_node=100, lora__alpha=16)
    assert card.parallel.gradient_checkpointing is False and card.hardware.nic_gbps_per_node == 100.0


def test_number_fields_are_found_on_every_section():
    RunCard.model_validate({})
    assert {"nic_gbps_per_gpu", "nic_gbps_per_node", "nodes", "gpu_memory_gib"} <= _NUMBER_FIELDS[HardwareSection]
    assert "allocator" not in _NUMBER_FIELDS[HardwareSection]


def test_set_true_on_a_nic_exits_2(capsys):
    assert main(["plan", "--set", "hardware.nic_gbps_per_node=true"]) == 2  # before: exit 0, a 1 Gb/s node
    assert capsys.readouterr().err.strip().endswith(
        "hardware.nic_gbps_per_node: got a boolean (true), not a number; allowed: a number")


def test_a_node_network_below_gigabit_ethernet_is_refused():
    with pytest.raises(CardError, match=r"^hardware\.nic_gbps_per_node: 1e-30 Gb/s is below 1 Gb/s, gigabit Ethernet"
                                        r" \(1000BASE-T, IEEE 802\.3ab\).*; allowed: 1 to 1e7$"):
        _card(hardware__nic_gbps_per_node=1e-30)  # before: accepted
    with pytest.raises(CardError, match=r"^hardware\.nic_gbps_per_gpu: 0\.1 Gb/s x 8 GPUs a node is below 1 Gb/s a"
                                        r" node.*; allowed with gpus_per_node 8: 0\.125 to 1e6$"):
        _card(hardware__nic_gbps_per_gpu=0.1)
    assert _card(hardware__nic_gbps_per_node=NODE_NIC_FLOOR_GBPS).hardware.nic_gbps_per_node == 1.0
    assert _card(hardware__nic_gbps_per_gpu=0.125).hardware.nic_gbps_per_gpu == 0.125  # one 1 GbE port, 8 GPUs
