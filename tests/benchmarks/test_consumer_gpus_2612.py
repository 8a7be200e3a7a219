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


def test_dual_3090_fsdp_rows_state_their_pcie_link():
    """The page's two RTX 3090 have no NVLink bridge: the entries state interconnect pcie, which the card's
    hardware.interconnect carries (the catalog's rtx3090 link is the bridge); the unpublished PCIe lanes are an
    assumption in each note, not a refusal, and each note records the row's first contact with the link stated."""
    rows = [i for i in ENTRIES if i.startswith("fsdpqlora-2x3090-")]
    assert len(rows) == 11
    for i in rows:
        e = ENTRIES[i]
        assert e["interconnect"] == "pcie" and "card_cannot_state" not in e, i
        card, notes = st.map_train(e)
        assert card["hardware"]["interconnect"] == "pcie", i
        assert "node link: pcie, as the source states (hardware.interconnect)" in notes, i
        assert "PCIe lanes unpublished" in e["note"] and "First contact with the link stated" in e["note"], i
        assert "not read by the time model" not in e["note"], i


def test_the_entry_link_reaches_the_plan():
    """The stated pcie link, not the catalog's bridge, times the FSDP gathers: the plan names it and is slower."""
    from trainfit.plan import make_plan

    card, _ = st.map_train(ENTRIES["fsdpqlora-2x3090-llama2-7b-qlora-fsdp-bs1-512"])
    bridged_card = {**card, "hardware": {k: v for k, v in card["hardware"].items() if k != "interconnect"}}
    stated, bridged = make_plan(st.validate(card)), make_plan(st.validate(bridged_card))
    assert any("node link: pcie (PCIe peer-to-peer), stated" in a for a in stated.assumptions)
    assert stated.step_seconds > bridged.step_seconds


def test_torchtune_multi_gpu_rows_are_per_gpu_rates():
    for i, gpus in (("tune-2x4090-llama2-7b-lora-fsdp", 2), ("tune-4x4090-llama2-7b-full-fsdp", 4)):
        e = ENTRIES[i]
        card, _ = st.map_train(e)
        assert card["hardware"]["gpus_per_node"] * card["hardware"]["nodes"] == gpus
        assert e["measured"]["metric"] == "tokens_per_s_per_gpu"
        tokens = e["batch"]["micro_batch_size"] * e["batch"]["seq_len"] * (e["batch"]["grad_accum"] or 1) * gpus
        assert st.published_train_seconds(e, tokens) == tokens / (e["measured"]["value"] * gpus)
