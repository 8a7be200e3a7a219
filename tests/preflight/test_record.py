"""`record`: software/hardware filled from the audit, git commit, timestamp, round-trip, no overwrite."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import yaml

from helpers import invoke, write_card
from trainfit.plan import make_plan
from trainfit.preflight.audit import run_audit
from trainfit.preflight.record import RECORD_KEY, build_record, default_record_path, git_state, load_record
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Interconnect

REPO = Path(__file__).resolve().parents[2]
CARD = """\
name: grpo-lora-4090
model: {id: Qwen/Qwen3-8B, revision: 0123456789abcdef}
method: grpo
scope: lora
lora: {rank: 16}
hardware: {gpu: a100-40gb, gpus_per_node: 8}
software: {torch: "2.5.1"}
rollout: {num_generations: 8, response_len: 2048, max_num_seqs: 32}
checkpoint: {path: ./ckpt, every_steps: 200, keep: 3, resume: full}
task: {kind: multi_turn_agent}
"""


def audit_of(machine, tmp_path, kind="rtx4090x2_pcie"):
    machine(kind, ram_gib=256)
    return run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)


def test_record_round_trips_through_the_card_schema(machine, tmp_path):
    card = load_card_dict(yaml.safe_load(CARD))
    audit = replace(audit_of(machine, tmp_path), packages={"torch": "2.6.0", "trl": "0.17.0", "nemo-rl": "not installed"})
    data = build_record(card, audit, card_path=tmp_path / "run.yaml", git=git_state(REPO))
    out = tmp_path / "run.record.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    back, extra = load_record(out)
    # the audit filled software and hardware; the rest is the card, defaults spelled out
    assert back.software.torch == "2.6.0" and back.software.trl == "0.17.0" and back.software.python == audit.python_version
    # no NV# link and peer-to-peer "NS" between the two cards: PCIe through host memory, the link the plan times
    assert (back.hardware.gpu, back.hardware.gpus_per_node, back.hardware.interconnect) == ("rtx4090", 2, "pcie_no_p2p")
    assert back.hardware.interconnect is Interconnect.PCIE_NO_P2P
    assert back.hardware.host_ram_gib == 256
    same = ("method", "scope", "lora", "rollout", "checkpoint", "task", "batch", "parallel", "name")
    assert all(getattr(back, k) == getattr(card, k) for k in same)
    assert back.model.id == "Qwen/Qwen3-8B" and back.model.revision == "0123456789abcdef"
    assert back.precision.weights.value == "bf16"
    make_plan(back)  # a record is a plannable card
    # record-only data lives under the stripped `record:` key
    assert extra["git"]["commit"] == subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert back.recipe.commit == extra["git"]["commit"]
    assert extra["created_utc"].endswith("+00:00")
    assert extra["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090" and extra["nvlink"] is False
    assert "software.torch: card pinned 2.5.1, the machine has 2.6.0 (recorded)" in extra["notes"]
    assert set(yaml.safe_load(out.read_text())) - set(type(back).model_fields) == {RECORD_KEY}


def test_full_scope_card_with_string_model(machine, tmp_path):
    card = load_card_dict({"model": "Qwen/Qwen3-0.6B"})
    data = build_record(card, audit_of(machine, tmp_path, "none"), card_path=Path("c.yaml"), git={"commit": None, "error": "x"})
    back = load_card_dict({k: v for k, v in data.items() if k != RECORD_KEY})
    assert back.model.id == "Qwen/Qwen3-0.6B" and back.hardware == card.hardware  # no GPU: hardware kept
    notes = data[RECORD_KEY]["notes"]
    assert "no GPU found by the audit: hardware kept from the card" in notes
    assert "model.revision is not pinned: the record cannot name the exact weights" in notes
    assert "recipe.commit: not recorded (x)" in notes


def test_git_outside_a_repository(tmp_path):
    state = git_state(tmp_path)
    assert state["commit"] is None and "git rev-parse HEAD" in state["error"]


def test_cli_writes_beside_the_card_and_never_overwrites(machine, tmp_path, monkeypatch):
    machine("a100x8_nvlink")
    monkeypatch.chdir(REPO)  # recipe path unset: the commit comes from the working directory
    card = write_card(tmp_path / "run.yaml", CARD)
    res = invoke("record", card, "--timeout", "5")
    target = default_record_path(card)
    assert res.exit_code == 0 and res.output.startswith(f"wrote {target}")
    assert target == tmp_path / "run.record.yaml"
    first = target.read_text()
    again = invoke("record", card)
    assert again.exit_code == 2
    assert again.error == f"record: '{target}' already exists; pass --force to overwrite it"
    assert target.read_text() == first
    forced = invoke("record", card, "--force", "--json")
    assert forced.exit_code == 0
    data = json.loads(forced.output)
    assert data["path"] == str(target) and data["record"]["hardware"]["gpu"] == "a100-40gb"
    assert data["record"]["hardware"]["interconnect"] == "nvlink"
    out = tmp_path / "elsewhere.yaml"
    assert invoke("record", card, "--out", out).exit_code == 0 and load_record(out)[0].name == "grpo-lora-4090"


def test_cli_bad_card_is_one_line(tmp_path):
    res = invoke("record", write_card(tmp_path / "bad.yaml", "scope: everything\n"))
    assert res.exit_code == 2 and res.error.startswith("scope: 'everything' is not allowed")
    assert not (tmp_path / "bad.record.yaml").exists()


def test_cli_measured_puts_the_watch_phases_into_the_record(machine, tmp_path, monkeypatch):
    """`record --measured WATCH_RECORD`: the phases (planned vs measured), step time, versions and the
    watch's verdict travel into the audited record; `compare` reads them back; a file without phases
    is refused in one line and nothing is written."""
    from trainfit.preflight.record import PHASES_KEY, measured_record
    from trainfit.watch.plan_map import planned_phases

    machine("a100x8_nvlink")
    monkeypatch.chdir(REPO)
    card = write_card(tmp_path / "run.yaml", CARD)
    planned = planned_phases(make_plan(load_card_dict(yaml.safe_load(CARD))))
    rows = [{"phase": p, "plan_phases": list(planned[p].plan_phases),
             "planned": {"reserved_bytes": planned[p].reserved_bytes},
             "measured": {"reserved_bytes": planned[p].reserved_bytes * f, "seconds": 0.5, "steps": 4}}
            for p, f in (("forward", 1.02), ("backward", 1.25))]
    rows.append({"phase": "step", "plan_phases": [], "planned": {}, "measured": {"seconds": 2.5, "steps": 4}})
    watch_rec = measured_record(load_card_dict(yaml.safe_load(CARD)), rows=rows, versions={"torch": "2.13.0"},
                                watch={"device": "cuda", "memory_margin": 0.1, "time_margin": 0.3})
    src = tmp_path / "watch.record.yaml"
    src.write_text(yaml.safe_dump(watch_rec))
    out = tmp_path / "full.record.yaml"
    assert invoke("record", card, "--timeout", "5", "--measured", src, "--out", out).exit_code == 0
    _, rec = load_record(out)
    assert rec[PHASES_KEY] == rows and rec["step_s"] == 2.5 and rec["versions"] == {"torch": "2.13.0"}
    assert rec["gpus"] and rec["git"]["commit"]  # the audit's part is still there
    from trainfit.watch.compare import compare_record

    result = compare_record(out)  # what `trainfit compare` prints (exit 1 when off)
    text = "\n".join(result.lines())
    assert result.off and "verdict: plan off: backward" in text and "backward: memory +25.0% (beyond the 10% margin and one 20 MiB CUDA allocator segment)" in text
    bad = invoke("record", card, "--measured", card, "--out", tmp_path / "no.yaml")
    assert bad.exit_code == 2 and bad.error.startswith("record --measured: the file is not a watch record")
    assert not (tmp_path / "no.yaml").exists()


MOE = {"model": "Qwen/Qwen1.5-MoE-A2.7B", "scope": "lora", "hardware": {"gpu": "h200", "gpus_per_node": 1},
       "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 1, "seq_len": 2048}}


def test_a_record_of_a_pinned_moe_card_plans_the_same():
    """Every field is written, so a defaulted parallel.moe_experts would read back as given and a transformers < 5
    pin would refuse it: the record writes the experts the plan runs (the 4.x loop) instead."""
    from trainfit.preflight.record import card_to_dict

    card = load_card_dict({**MOE, "software": {"transformers": "4.57.6"}})
    data = card_to_dict(card)
    assert data["parallel"]["moe_experts"] == "loop"
    planned, again = make_plan(card), make_plan(load_card_dict(data))
    assert again.card.parallel.moe_experts is planned.card.parallel.moe_experts
    assert (again.step_seconds, again.peak.device) == (planned.step_seconds, planned.peak.device)
    unpinned = load_card_dict(MOE)  # transformers 5's grouped experts: written as they are
    assert card_to_dict(unpinned)["parallel"]["moe_experts"] == "grouped"


def test_a_moe_card_recorded_on_transformers_4_records_the_loop_that_ran(machine, tmp_path):
    """The audit's transformers goes into the record's software: a defaulted grouped is recorded as the 4.x loop
    the machine's transformers runs (with a note), so `trainfit plan x.record.yaml` plans rather than refuses."""
    audit = replace(audit_of(machine, tmp_path), packages={"transformers": "4.52.4"})
    data = build_record(load_card_dict(MOE), audit, card_path=tmp_path / "run.yaml", git={"commit": None, "error": "x"})
    back = load_card_dict({k: v for k, v in data.items() if k != RECORD_KEY})
    assert back.software.transformers == "4.52.4" and back.parallel.moe_experts.value == "loop_all"
    assert make_plan(back).card.parallel.moe_experts.value == "loop_all"
    assert any(n.startswith("parallel.moe_experts: loop_all (recorded): transformers 4.52.4") for n in
               data[RECORD_KEY]["notes"])


def test_audited_link_reads_nvlink_then_the_peer_to_peer_matrix(machine, tmp_path):
    """nvlink from topo -m's NV# links; without them pcie, or pcie_no_p2p when some pair refuses peer-to-peer;
    unknown topology, or no NV# link and no P2P matrix (peer-to-peer unknown): None (the card's own link is kept)."""
    from trainfit.preflight.record import audited_link

    pcie = audit_of(machine, tmp_path)
    assert audited_link(pcie) is Interconnect.PCIE_NO_P2P
    assert audited_link(replace(pcie, p2p_matrix=(("X", "OK"), ("OK", "X")))) is Interconnect.PCIE
    assert audited_link(replace(pcie, p2p_matrix=None)) is None
    assert audited_link(replace(pcie, nvlink=True)) is Interconnect.NVLINK
    assert audited_link(replace(pcie, nvlink=None)) is None


def test_p2p_link_reads_a_refused_pair_anywhere_and_a_partial_matrix_as_unknown():
    from trainfit.preflight.record import p2p_link

    assert p2p_link([["X", "OK", "NS"]], gpus=3) is Interconnect.PCIE_NO_P2P  # a refused pair in a short matrix
    assert p2p_link([["X"]], gpus=2) is None  # the pair (0, 1) is not listed
    assert p2p_link([["X", "OK"], ["OK", "X"]], gpus=3) is None
    assert p2p_link([["X", "OK", "OK"], ["OK", "X", "OK"], ["OK", "OK", "X"]], gpus=3) is Interconnect.PCIE
    assert p2p_link([["X", "OK", "NS"], ["OK", "X", "NS"], ["NS", "NS", "X"]], gpus=2) is Interconnect.PCIE
    assert p2p_link([["X", "OK"], ["OK", "X"]], gpus=None) is Interconnect.PCIE


def test_record_drops_a_link_the_recorded_gpu_has_no_rate_for(machine, tmp_path):
    """An audit that sees NV# links on a GPU kind whose catalog entry has no NVLink rate records the catalog's link
    (null) with a note, so the record still loads as a card."""
    card = load_card_dict(yaml.safe_load(CARD))
    audit = replace(audit_of(machine, tmp_path), nvlink=True)  # the rtx4090 has no NVLink in the catalog
    data = build_record(card, audit, card_path=tmp_path / "run.yaml", git=git_state(REPO))
    assert data["hardware"]["interconnect"] is None
    assert any("interconnect nvlink" in n and "rtx4090" in n for n in data[RECORD_KEY]["notes"])
    out = tmp_path / "run.record.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_record(out)[0].hardware.interconnect is None


def _record(card, audit, tmp_path):
    return build_record(card, audit, card_path=tmp_path / "run.yaml", git={"commit": None, "error": "x"})


def test_unknown_peer_to_peer_keeps_the_cards_link_or_null_with_a_note(machine, tmp_path):
    """No NV# link and no P2P matrix: pcie would claim peer-to-peer, so the card's link (or null) is kept."""
    audit = replace(audit_of(machine, tmp_path), p2p_matrix=None)
    card = load_card_dict({**yaml.safe_load(CARD), "hardware": {"gpu": "rtx4090", "gpus_per_node": 2}})
    data = _record(card, audit, tmp_path)
    assert data["hardware"]["interconnect"] is None
    assert any("peer-to-peer is unknown" in n and "(null)" in n for n in data[RECORD_KEY]["notes"])
    stated = load_card_dict({**yaml.safe_load(CARD),
                             "hardware": {"gpu": "rtx4090", "gpus_per_node": 2, "interconnect": "pcie_no_p2p"}})
    data = _record(stated, audit, tmp_path)
    assert data["hardware"]["interconnect"] == "pcie_no_p2p"
    assert any("kept from the card (pcie_no_p2p)" in n for n in data[RECORD_KEY]["notes"])


def test_an_audit_that_disagrees_with_the_cards_link_is_noted(machine, tmp_path):
    card = load_card_dict({**yaml.safe_load(CARD),
                           "hardware": {"gpu": "rtx4090", "gpus_per_node": 2, "interconnect": "pcie"}})
    data = _record(card, audit_of(machine, tmp_path), tmp_path)
    assert data["hardware"]["interconnect"] == "pcie_no_p2p"
    assert ("hardware.interconnect: card said pcie, the machine has pcie_no_p2p (recorded)"
            in data[RECORD_KEY]["notes"])
    same = _record(load_card_dict({**yaml.safe_load(CARD), "hardware": {
        "gpu": "rtx4090", "gpus_per_node": 2, "interconnect": "pcie_no_p2p"}}), audit_of(machine, tmp_path), tmp_path)
    assert not any("card said" in n for n in same[RECORD_KEY]["notes"])


def test_an_old_record_without_the_link_rule_is_read_from_its_own_p2p_matrix(machine, tmp_path):
    """Records written before the enum said pcie for every machine without NV# links: re-derived on load."""
    card = load_card_dict({**yaml.safe_load(CARD), "hardware": {"gpu": "rtx4090", "gpus_per_node": 2}})
    data = _record(card, audit_of(machine, tmp_path), tmp_path)
    old = {**data, "hardware": {**data["hardware"], "interconnect": "pcie"}}
    old[RECORD_KEY] = {k: v for k, v in data[RECORD_KEY].items() if k != "interconnect_rule"}
    out = tmp_path / "old.record.yaml"
    out.write_text(yaml.safe_dump(old, sort_keys=False))
    loaded, extra = load_record(out)
    assert loaded.hardware.interconnect is Interconnect.PCIE_NO_P2P
    assert any("predates the peer-to-peer distinction" in n for n in extra["notes"])
    no_matrix = {**old, RECORD_KEY: {**old[RECORD_KEY], "p2p_matrix": None}}
    out.write_text(yaml.safe_dump(no_matrix, sort_keys=False))
    assert load_record(out)[0].hardware.interconnect is None
    ok = {**old, RECORD_KEY: {**old[RECORD_KEY], "p2p_matrix": [["X", "OK"], ["OK", "X"]]}}
    out.write_text(yaml.safe_dump(ok, sort_keys=False))
    assert load_record(out)[0].hardware.interconnect is Interconnect.PCIE
    new = {**old, RECORD_KEY: data[RECORD_KEY]}  # a record with the rule keeps its pcie as written
    out.write_text(yaml.safe_dump(new, sort_keys=False))
    assert load_record(out)[0].hardware.interconnect is Interconnect.PCIE
