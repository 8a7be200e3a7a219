"""``fit`` with a stated ``hardware.interconnect``: the link describes the card's own GPU kind's nodes, so its rows
plan on it and every other kind's on that kind's catalog link, which the result's warnings say."""

from __future__ import annotations

from trainfit.fit_search import fit, link_on_kind

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
