"""``fit`` with a stated ``hardware.interconnect``: the link describes the card's own GPU kind's nodes, so its rows
plan on it and every other kind's on that kind's catalog link, which the result's warnings say."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.fit_search import card_on_a_kind, fit, link_note, link_on_kind
from trainfit.spec.card import load_card_dict

PINNED = frozenset({"parallel.strategy", "precision.optimizer", "parallel.offload", "scope", "batch",
                    "parallel.tensor_parallel", "parallel.pipeline_parallel", "parallel.tensor_parallel_impl",
                    "parallel.gradient_checkpointing", "loss.chunked"})


def _base(link):
    hw = {"gpu": "rtx3090", "gpus_per_node": 2, **({"interconnect": link} if link else {})}
    return {"model": "Qwen/Qwen2.5-0.5B", "hardware": hw, "parallel": {"strategy": "ddp"},
            "batch": {"micro_batch_size": 1, "seq_len": 1024}}


def _steps(result):
    return {(r.gpu, r.gpus): r.step_seconds for r in result.rows}


def test_the_stated_link_applies_to_the_cards_own_kind_only():
    stated = fit(_base("pcie_no_p2p"), gpus=["rtx3090", "l40s"], max_gpus=2, pinned=PINNED)
    catalog = fit(_base(None), gpus=["rtx3090", "l40s"], max_gpus=2, pinned=PINNED)
    s, c = _steps(stated), _steps(catalog)
    assert s[("rtx3090", 2)] > c[("rtx3090", 2)]  # NCCL through host memory instead of the bridge
    assert s[("rtx3090", 1)] == c[("rtx3090", 1)]  # one GPU: no collective
    assert s[("l40s", 2)] == c[("l40s", 2)]  # the L40S on its catalog link (nvlink there would be refused)
    assert any("hardware.interconnect pcie_no_p2p describes the card's own rtx3090 nodes" in w and "l40s" in w
               for w in stated.warnings)
    assert not any("hardware.interconnect" in w for w in catalog.warnings)


def test_link_on_kind_drops_the_link_for_other_kinds_only():
    base = _base("nvlink")
    assert link_on_kind(base, "rtx3090") is base
    other = link_on_kind(base, "l40s")
    assert "interconnect" not in other["hardware"] and base["hardware"]["interconnect"] == "nvlink"


def _default_card(link=None):
    """The CLI's default card (no hardware.gpu: the HardwareSection default, an A100) with an SFT model."""
    return {"model": "Qwen/Qwen2.5-0.5B", "parallel": {"strategy": "ddp"},
            "batch": {"micro_batch_size": 1, "seq_len": 1024},
            **({"hardware": {"interconnect": link}} if link else {})}


def test_a_link_pinned_with_set_applies_to_every_kind_searched():
    """--set hardware.interconnect=pcie_no_p2p on the default card: the A100 is not searched, so the link reaches
    the RTX 3090 and the L40S rows, which plan slower than on their catalog links."""
    pinned = PINNED | {"hardware.interconnect"}
    stated = fit(_default_card("PCIe-No-P2P"), gpus=["rtx3090", "l40s"], max_gpus=2, pinned=pinned)
    catalog = fit(_default_card(), gpus=["rtx3090", "l40s"], max_gpus=2, pinned=PINNED)
    s, c = _steps(stated), _steps(catalog)
    assert s[("rtx3090", 2)] > c[("rtx3090", 2)] and s[("l40s", 2)] > c[("l40s", 2)]
    (note,) = [w for w in stated.warnings if "hardware.interconnect" in w]
    assert note == "hardware.interconnect pcie_no_p2p applies to every GPU kind searched (stated with --set)"


def test_a_card_whose_own_kind_is_not_searched_keeps_its_link_on_its_own_kind():
    """An A100-80GB card stating nvlink, searched on the L40S only: the L40S plans on its catalog link (not refused)
    and the warning says the link was dropped for it."""
    card = {**_base("nvlink"), "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2, "interconnect": "nvlink"}}
    result = fit(card, gpus=["l40s"], max_gpus=2, pinned=PINNED)
    catalog = fit({**card, "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2}}, gpus=["l40s"], max_gpus=2,
                  pinned=PINNED)
    assert {r.gpu for r in result.rows} == {"l40s"} and not result.skipped
    assert _steps(result) == _steps(catalog)
    (note,) = [w for w in result.warnings if "hardware.interconnect" in w]
    assert note.startswith("hardware.interconnect nvlink describes the card's own a100-80gb nodes") and "l40s" in note


def test_a_3090_cards_no_p2p_link_does_not_reach_an_h100():
    stated = fit(_base("pcie_no_p2p"), gpus=["h100-sxm"], max_gpus=2, pinned=PINNED)
    catalog = fit(_base(None), gpus=["h100-sxm"], max_gpus=2, pinned=PINNED)
    assert _steps(stated) == _steps(catalog)


def test_a_default_card_stating_a_link_applies_it_to_every_kind_and_lists_the_refusals():
    """No hardware.gpu in the card: its link names no kind's nodes, so it applies to every kind searched."""
    result = fit(_default_card("nvlink"), gpus=["rtx3090", "l40s"], max_gpus=2, pinned=PINNED)
    assert {r.gpu for r in result.rows} == {"rtx3090"}
    assert any(k.gpu == "l40s" and "'nvlink' on l40s" in k.reason for k in result.skipped)
    (note,) = [w for w in result.warnings if "hardware.interconnect" in w]
    assert note == ("hardware.interconnect nvlink applies to every GPU kind searched (the card names no GPU kind of"
                    " its own); refused on l40s (no rate for it in their catalog entries: skipped)")


def test_a_bad_link_is_refused_before_any_kind_is_searched():
    with pytest.raises(CardError, match="^hardware.interconnect: 'infiniband' is a network between nodes"):
        fit(_base("infiniband"), gpus=["rtx3090", "l40s"], max_gpus=2, pinned=PINNED)
    with pytest.raises(CardError, match="^hardware.interconnect: 'infiniband' is a network between nodes"):
        card_on_a_kind(_base("infiniband"), ["rtx3090", "l40s"], PINNED, load=load_card_dict)


def test_the_warning_prints_the_links_value():
    assert link_note(_base("PCIe-No-P2P"), ["rtx3090", "l40s"]).startswith(
        "hardware.interconnect pcie_no_p2p describes the card's own rtx3090 nodes")
