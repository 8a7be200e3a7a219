"""The rack-scale NVLink domain (GB200 NVL72) is read from the resolved GPU id, so a GPU alias the catalog accepts
(``GB200``) plans exactly as its id (``gb200``)."""

from __future__ import annotations

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _plan(gpu: str):
    return make_plan(load_card_dict({
        "model": "Qwen/Qwen2.5-0.5B", "hardware": {"gpu": gpu, "gpus_per_node": 4, "nodes": 4},
        "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 1, "seq_len": 1024}}))


def test_an_alias_of_gb200_keeps_its_nvlink_domain():
    alias, gid = _plan("GB200"), _plan("gb200")
    assert alias.step_seconds == gid.step_seconds and alias.time_parts == gid.time_parts
