"""benchmarks/data/published_train_times_consumer_gpus_2612.json: the consumer/workstation-GPU points added at first
contact map as their notes say: the dual-4090 Yi-34B rows plan with the inline Yi shape (the catalog's Yi-1.5-34B
shape, which the notes cite), the dual-3090 FSDP rows state the PCIe link the page names (no NVLink bridge; lanes
unpublished, an assumption), and the rank-local torchtune rows are per-GPU rates."""

from __future__ import annotations

from step_times_module import load_step_times

st = load_step_times("trainfit_bench_consumer_gpus_2612")
FILE = st.HERE / "data" / "published_train_times_consumer_gpus_2612.json"
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == FILE.name}


def test_every_entry_records_its_first_contact():
    assert len(ENTRIES) == 25
    for i, e in ENTRIES.items():
        assert e["note"].startswith("FIRST CONTACT (scored 2026-12-05"), i
        assert "trainfit not run yet" not in e["note"], i


def test_inline_yi_34b_shape_is_the_catalog_yi_15_shape():
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.catalog.models import resolve_model
    from trainfit.compute.flops import matmul_params

    inline = ENTRIES["fsdpqlora-2x4090-yi34b-qlora-fsdp-bs2"]["model_config"]
    yi = spec_from_hf_config(inline, name="01-ai/Yi-34B", source="entry")
    yi15 = resolve_model("01-ai/Yi-1.5-34B")
    assert matmul_params(yi) == matmul_params(yi15)
    assert 33.5e9 < matmul_params(yi) < 34.5e9  # Yi-34B: 34.4 B parameters, 0.46 B of them the input embedding


def test_dual_3090_fsdp_rows_state_their_link_without_peer_to_peer():
    """The page's two RTX 3090 have no NVLink bridge, and the stock driver refuses PCIe peer-to-peer between GeForce
    RTX 3090s (NVIDIA/nccl#1127; only patched open kernel modules enable it): the entries state pcie_no_p2p, which the
    card's hardware.interconnect carries (the catalog's rtx3090 link is the bridge), with the citation and each row's
    before / after in its note; the unpublished PCIe lanes are an assumption in each note, not a refusal, and each
    note keeps the row's first contact with the link stated."""
    rows = [i for i in ENTRIES if i.startswith("fsdpqlora-2x3090-")]
    assert len(rows) == 11
    for i in rows:
        e = ENTRIES[i]
        assert e["interconnect"] == "pcie_no_p2p" and "card_cannot_state" not in e, i
        card, notes = st.map_train(e)
        assert card["hardware"]["interconnect"] == "pcie_no_p2p", i
        assert "node link: pcie_no_p2p, as the source states (hardware.interconnect)" in notes, i
        assert "PCIe lanes unpublished" in e["note"] and "First contact with the link stated" in e["note"], i
        assert "LINK CORRECTION (2026-12-05)" in e["note"] and "NVIDIA/nccl/issues/1127" in e["note"], i
        assert "keeps PCIe peer-to-peer" not in e["note"], i
        assert "not read by the time model" not in e["note"], i


def test_the_entry_link_reaches_the_plan():
    """The stated link, not the catalog's bridge, times the FSDP gathers: the plan names it and is slower than on the
    bridge, and slower still than PCIe with peer-to-peer."""
    from trainfit.plan import make_plan

    card, _ = st.map_train(ENTRIES["fsdpqlora-2x3090-llama2-7b-qlora-fsdp-bs1-512"])
    bridged_card = {**card, "hardware": {k: v for k, v in card["hardware"].items() if k != "interconnect"}}
    p2p_card = {**card, "hardware": {**card["hardware"], "interconnect": "pcie"}}
    stated, bridged = make_plan(st.validate(card)), make_plan(st.validate(bridged_card))
    p2p = make_plan(st.validate(p2p_card))
    assert any("node link: pcie_no_p2p (PCIe without peer-to-peer, through host memory), stated" in a
               for a in stated.assumptions)
    assert stated.step_seconds > p2p.step_seconds > bridged.step_seconds


def test_torchtune_multi_gpu_rows_are_per_gpu_rates():
    for i, gpus in (("tune-2x4090-llama2-7b-lora-fsdp", 2), ("tune-4x4090-llama2-7b-full-fsdp", 4)):
        e = ENTRIES[i]
        card, _ = st.map_train(e)
        assert card["hardware"]["gpus_per_node"] * card["hardware"]["nodes"] == gpus
        assert e["measured"]["metric"] == "tokens_per_s_per_gpu"
        tokens = e["batch"]["micro_batch_size"] * e["batch"]["seq_len"] * (e["batch"]["grad_accum"] or 1) * gpus
        assert st.published_train_seconds(e, tokens) == tokens / (e["measured"]["value"] * gpus)
