"""A multi-node plan states the inter-node network its cross-node collectives were timed on: the NIC Gb/s per GPU and
per node, whether the card stated it (hardware.nic_gbps_per_gpu / nic_gbps_per_node) or the catalog default gave it
(with that default's source, or 'uncited default'), and the fields to change it. The seed's GRPO 27B card on RTX 4090s
(scenarios.grpo_27b) over 2 nodes: its step moves from 313 s to 610 s between the default and a 10 Gb/s node, so the
figure the plan assumed must be visible."""

import json

from trainfit.cli.main import main
from trainfit.plan import make_plan
from trainfit.scenarios import grpo_27b
from trainfit.spec.card import load_card_dict


def _nic_lines(plan):
    return [a for a in plan.assumptions if "inter-node network" in a]


def _plan(**hardware):
    return make_plan(load_card_dict(grpo_27b(gpus=8, scope="qlora", placement="colocate", hardware=hardware)))


def test_multi_node_default_nic_is_stated_and_labelled_uncited():
    (line,) = _nic_lines(_plan(nodes=2))
    assert "100 Gb/s per GPU" in line and "800 Gb/s per node of 8 GPUs" in line
    assert "catalog default for rtx4090" in line and "uncited default" in line
    assert "hardware.nic_gbps_per_gpu" in line and "hardware.nic_gbps_per_node" in line


def test_stated_node_nic_is_named_with_its_per_gpu_share():
    (line,) = _nic_lines(_plan(nodes=2, nic_gbps_per_node=10))
    assert "10 Gb/s per node" in line and "stated (hardware.nic_gbps_per_node)" in line
    assert "1.25 Gb/s per GPU" in line


def test_stated_gpu_nic():
    (line,) = _nic_lines(_plan(nodes=2, nic_gbps_per_gpu=200))
    assert "200 Gb/s per GPU" in line and "stated (hardware.nic_gbps_per_gpu)" in line


def test_cited_catalog_default():
    card = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "b300", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"strategy": "fsdp"}}
    (line,) = _nic_lines(make_plan(load_card_dict(card)))
    assert "800 Gb/s per GPU" in line and "dgx-b300-datasheet" in line and "uncited" not in line


def test_one_node_states_no_nic():
    assert _nic_lines(_plan()) == []


def test_json_assumptions_carry_it(capsys):
    main(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm", "--gpus", "8", "--nodes", "2", "--json"])
    obj = json.loads(capsys.readouterr().out)
    assert [a for a in obj["assumptions"] if "inter-node network" in a and "400 Gb/s per GPU" in a]


def test_hopper_default_cites_the_dgx_reference_architecture():
    card = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 4},
            "parallel": {"strategy": "fsdp"}}
    (line,) = _nic_lines(make_plan(load_card_dict(card)))
    assert "4 nodes, 400 Gb/s per GPU (3200 Gb/s per node of 8 GPUs)" in line
    assert "dgx-basepod" in line and "uncited" not in line


def _default_line(gpu):
    card = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": gpu, "gpus_per_node": 4 if gpu == "gb200" else 8,
                                                   "nodes": 2}, "parallel": {"strategy": "fsdp"}}
    (line,) = _nic_lines(make_plan(load_card_dict(card)))
    return line


def test_a100_h800_gb200_defaults_cite_their_reference_hosts():
    """DGX A100: 'Compute: 8x ConnectX-6 IB HDR 200Gb/Sec' (NVIDIA's MLPerf Training system descriptions, v0.7 for the
    40 GB part, v1.0 for the 80 GB); H800: 'each connected to a CX7 InfiniBand 400 Gb/s RDMA network card' (DeepEP
    README l.88); GB200: '4x NVIDIA ConnectX-7 single port 400G OSFP NIC' per tray of 4 GPUs (DGX GB200 user guide)."""
    for gpu, gbps, where in (("a100-40gb", 200, "training_results_v0.7"), ("a100-80gb", 200, "training_results_v1.0"),
                             ("h800", 400, "DeepEP README.md@0aaa6744c890c5af051f622252975c4393795000 l.88"),
                             ("gb200", 400, "dgxgb200-user-guide/hardware.html")):
        line = _default_line(gpu)
        assert f"{gbps} Gb/s per GPU" in line and where in line and "uncited" not in line, gpu


def test_a800_and_h20_defaults_stay_uncited_and_say_why():
    for gpu, gbps in (("a800-80gb", 200), ("h20", 400)):
        line = _default_line(gpu)
        assert f"{gbps} Gb/s per GPU" in line and "uncited default" in line and "sold in OEM servers" in line, gpu
