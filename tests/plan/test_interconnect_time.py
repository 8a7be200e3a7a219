"""``hardware.interconnect`` end to end: a stated link moves the step time through the intra-node collectives and
nothing else (memory reads no link), its own catalog link plans the same as leaving it unset, and the plan's
assumptions say which link was used and why."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import gpu_ids, resolve_gpu
from trainfit.plan import make_plan
from trainfit.compute.rates import catalog_link
from trainfit.spec.card import load_card_dict


def _plan(gpu: str, link: str | None, *, gpus: int = 2, strategy: str = "fsdp", model="Qwen/Qwen2.5-0.5B"):
    hw = {"gpu": gpu, "gpus_per_node": gpus}
    if link is not None:
        hw["interconnect"] = link
    card = {"model": model, "hardware": hw, "parallel": {"strategy": strategy},
            "batch": {"micro_batch_size": 1, "seq_len": 1024}}
    if not resolve_gpu(gpu).bf16_dense_flops_per_s:  # T4, V100: no bf16 tensor cores
        card["precision"] = {"weights": "fp16", "compute": "fp16"}
    return make_plan(load_card_dict(card))


def _peaks(plan):
    return [(p.phase, p.components, p.allocated, p.reserved, p.device) for p in plan.phases] + [plan.host_ram]


def _link_lines(plan):
    return [a for a in plan.assumptions if "node link:" in a]


@pytest.mark.parametrize("gpu", gpu_ids())
def test_the_catalogs_own_link_stated_plans_the_same(gpu):
    link = catalog_link(resolve_gpu(gpu)).value
    unset, stated = _plan(gpu, None), _plan(gpu, link)
    assert stated.step_seconds == unset.step_seconds and stated.time_parts == unset.time_parts
    assert _peaks(stated) == _peaks(unset)
    assert [a for a in stated.assumptions if "node link:" not in a] == [
        a for a in unset.assumptions if "node link:" not in a]
    (why_unset,), (why_stated,) = _link_lines(unset), _link_lines(stated)
    assert why_unset.startswith(f"time: node link: {link} (") and f"the GPU catalog's link for {gpu}" in why_unset
    assert why_stated.startswith(f"time: node link: {link} (") and "stated (hardware.interconnect)" in why_stated


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_an_rtx3090_pair_without_p2p_is_slower_than_its_bridged_default(strategy):
    """Two RTX 3090s: the catalog's NVLink bridge (46 GB/s bus) against NCCL through host memory (8 GB/s); the
    gradient reduction (DDP) or the gathers and reduce-scatters (FSDP) take longer, memory does not move."""
    bridged, shm = _plan("rtx3090", None, strategy=strategy), _plan("rtx3090", "pcie_no_p2p", strategy=strategy)
    assert shm.step_seconds > bridged.step_seconds * 1.05
    assert _peaks(shm) == _peaks(bridged)
    assert any("pcie_no_p2p (PCIe without peer-to-peer, through host memory), stated" in a
               for a in shm.assumptions)


def test_pcie_on_an_eight_gpu_h100_sxm_node_is_slower_than_nvlink():
    nvlink, pcie = _plan("h100-sxm", None, gpus=8), _plan("h100-sxm", "pcie", gpus=8)
    slower_still = _plan("h100-sxm", "pcie_no_p2p", gpus=8)
    assert nvlink.step_seconds < pcie.step_seconds < slower_still.step_seconds
    assert _peaks(pcie) == _peaks(nvlink)
    assert any("node link: pcie (PCIe peer-to-peer), stated (hardware.interconnect); NCCL bus bandwidth in a node"
               " 52 GB/s" in a for a in pcie.assumptions)


def test_one_gpu_states_no_link():
    assert not _link_lines(_plan("rtx3090", "pcie", gpus=1, strategy="single"))


def test_an_rl_plan_on_pcie_names_its_link_and_takes_longer():
    """GRPO on 8 H100 SXM: the training collectives and the weight sync run on the stated link."""
    def grpo(link):
        hw = {"gpu": "h100-sxm", "gpus_per_node": 8, **({"interconnect": link} if link else {})}
        return make_plan(load_card_dict({"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "hardware": hw,
                                         "rollout": {"prompt_len": 256, "response_len": 512, "num_generations": 4}}))

    nvlink, pcie = grpo(None), grpo("pcie_no_p2p")
    assert pcie.step_seconds > nvlink.step_seconds
    assert any("node link: pcie_no_p2p" in a for a in pcie.assumptions)
    assert any("node link: nvlink (NVLink), the GPU catalog's link for h100-sxm" in a for a in nvlink.assumptions)


def test_an_amd_node_link_is_labelled_xgmi():
    (line,) = _link_lines(_plan("mi300x", None))
    assert line.startswith("time: node link: nvlink (xGMI (Infinity Fabric)), the GPU catalog's link for mi300x")
    (h100,) = _link_lines(_plan("h100-sxm", None))
    assert h100.startswith("time: node link: nvlink (NVLink), ")


def test_pcie_stated_on_a_geforce_pair_says_it_assumes_a_patched_driver():
    """The stock driver refuses PCIe peer-to-peer on GeForce cards (an RTX 3090 pair off its bridge, an RTX 4090 pair):
    pcie is planned as stated and its link line says so; pcie_no_p2p and a data-centre card's pcie carry no caveat."""
    for gpu in ("rtx3090", "rtx4090"):
        (line,) = _link_lines(_plan(gpu, "pcie"))
        assert line.startswith("time: node link: pcie (PCIe peer-to-peer), stated") and line.endswith(
            "; PCIe peer-to-peer on this GeForce card needs a patched open kernel module (the stock driver refuses"
            " it: state pcie_no_p2p otherwise)")
    assert not any("patched" in a for a in _link_lines(_plan("rtx3090", "pcie_no_p2p")))
    assert not any("patched" in a for a in _link_lines(_plan("rtx3090", None)))
    assert not any("patched" in a for a in _link_lines(_plan("l40s", "pcie")))
