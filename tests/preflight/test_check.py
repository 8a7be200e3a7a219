"""`check` verdicts on faked audited machines: a card that fits and cards that do not."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from helpers import invoke, write_card
from trainfit.plan import make_plan
from trainfit.preflight.audit import run_audit
from trainfit.preflight.check import run_check, version_matches
from trainfit.spec.card import load_card_dict

GIB = 2**30
FITS = """\
model: Qwen/Qwen3-8B
method: sft
scope: full
hardware: {gpu: a100-40gb, gpus_per_node: 8, interconnect: nvlink}
parallel: {strategy: fsdp, gradient_checkpointing: true}
batch: {micro_batch_size: 1, seq_len: 2048}
checkpoint: {path: ./checkpoints, keep: 2}
"""
DOES_NOT_FIT = """\
model: Qwen/Qwen3-8B
scope: full
hardware: {gpu: rtx4090, gpus_per_node: 2}
parallel: {strategy: fsdp}
batch: {micro_batch_size: 4, seq_len: 4096}
"""


def audited(machine, tmp_path, kind, *, disk_gib=2000, **ram):
    machine(kind, **ram)
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    return replace(r, disk_free_bytes=int(disk_gib * GIB))


def verdicts(lines):
    return {(ln.topic, ln.verdict) for ln in lines}


def test_card_that_fits_passes(machine, tmp_path):
    card = load_card_dict(__import__("yaml").safe_load(FITS))
    lines = run_check(card, make_plan(card), audited(machine, tmp_path, "a100x8_nvlink"))
    assert not [ln for ln in lines if ln.verdict == "fail"], lines
    assert {("plan", "pass"), ("gpu_type", "pass"), ("gpu_count", "pass"), ("gpu_memory", "pass"),
            ("topology", "pass"), ("host_ram", "pass"), ("disk", "pass"), ("packages", "warn")} == verdicts(lines)


def test_card_that_does_not_fit_fails(machine, tmp_path):
    card = load_card_dict(__import__("yaml").safe_load(DOES_NOT_FIT))
    lines = run_check(card, make_plan(card), audited(machine, tmp_path, "rtx4090x2_pcie"))
    assert ("plan", "fail") in verdicts(lines) and ("gpu_memory", "fail") in verdicts(lines)
    assert ("gpu_type", "pass") in verdicts(lines) and ("gpu_count", "pass") in verdicts(lines)


def test_wrong_gpu_type_and_count(machine, tmp_path):
    card = load_card_dict(__import__("yaml").safe_load(FITS))
    lines = run_check(card, make_plan(card), audited(machine, tmp_path, "rtx4090x2_pcie"))
    got = verdicts(lines)
    assert ("gpu_type", "fail") in got and ("gpu_count", "fail") in got and ("gpu_memory", "warn") in got
    assert ("topology", "warn") in got  # card says nvlink, topo -m shows none; P2P NS


def test_fsdp_over_eight_pcie_cards_warns(machine, tmp_path):
    card = load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "rtx4090", "gpus_per_node": 8}})
    lines = run_check(card, make_plan(card), audited(machine, tmp_path, "rtx4090x8_pcie"))
    topo = [ln for ln in lines if ln.topic == "topology"]
    assert topo[0].verdict == "warn" and "PCIe-only" in topo[0].message
    assert any("P2P not available" in ln.message for ln in topo)


def test_no_gpu_machine_fails_gpu_lines(machine, tmp_path):
    card = load_card_dict(__import__("yaml").safe_load(FITS))
    lines = run_check(card, make_plan(card), audited(machine, tmp_path, "none"))
    gpu = [ln for ln in lines if ln.topic == "gpu_count"]
    assert gpu[0].verdict == "fail" and "not found: nvidia-smi" in gpu[0].message


def test_host_ram_disk_and_writability(machine, tmp_path):
    card = load_card_dict({**__import__("yaml").safe_load(FITS), "parallel": {"strategy": "zero3", "offload": "optimizer"}})
    plan = make_plan(card)
    need = plan.host_ram_bytes
    small = audited(machine, tmp_path, "a100x8_nvlink", ram_gib=need / GIB - 1, disk_gib=10)
    got = verdicts(run_check(card, plan, small))
    assert ("host_ram", "fail") in got and ("disk", "fail") in got
    tight = replace(small, host_ram_total_bytes=int(need * 2), host_ram_available_bytes=int(need / 2))
    assert ("host_ram", "warn") in verdicts(run_check(card, plan, tight))
    locked = replace(small, checkpoint_writable=False)
    line = next(ln for ln in run_check(card, plan, locked) if ln.topic == "disk")
    assert line.verdict == "fail" and "is not writable" in line.message


def test_disk_uses_adapter_size_only_for_adapter_resume(machine, tmp_path):
    base = {"model": "Qwen/Qwen3-8B", "scope": "lora", "hardware": {"gpu": "a100-40gb", "gpus_per_node": 8}}
    audit = audited(machine, tmp_path, "a100x8_nvlink", disk_gib=0.5)
    full = load_card_dict({**base, "checkpoint": {"keep": 3}})
    line = next(ln for ln in run_check(full, make_plan(full), audit) if ln.topic == "disk")
    assert "full-state" in line.message
    adapter = load_card_dict({**base, "checkpoint": {"keep": 2, "resume": "adapter_only"}})
    line = next(ln for ln in run_check(adapter, make_plan(adapter), audit) if ln.topic == "disk")
    assert "adapter-only" in line.message and "cannot resume training exactly" in line.message


def test_package_pins(machine, tmp_path):
    audit = replace(audited(machine, tmp_path, "a100x8_nvlink"), packages={"torch": "2.5.1+cu124", "trl": "0.12.0", "vllm": "not installed"})
    card = load_card_dict({"software": {"torch": "2.5.1", "trl": "0.13", "vllm": "0.6.3"}})
    lines = {ln.message.split(":")[0]: ln.verdict for ln in run_check(card, make_plan(card), audit) if ln.topic == "packages"}
    assert lines == {"torch": "pass", "trl": "fail", "vllm": "fail"}


@pytest.mark.parametrize(("have", "pin", "ok"), [
    ("2.5.1", "2.5.1", True), ("2.5.1+cu124", "2.5.1", True), ("2.5.1", "2.5", True), ("2.50.0", "2.5", False),
    ("4.46.0", ">=4.45,<5", True), ("5.0.0", ">=4.45,<5", False), ("1.0", "not a pin!", False),
])
def test_version_matches(have, pin, ok):
    assert version_matches(have, pin) is ok


def test_cli_exit_codes(machine, tmp_path):
    audit = audited(machine, tmp_path, "a100x8_nvlink")
    audit_file = tmp_path / "audit.json"
    audit_file.write_text(json.dumps(audit.to_dict()))
    ok = invoke("check", write_card(tmp_path / "fits.yaml", FITS), "--audit", audit_file)
    assert ok.exit_code == 0, ok.output
    assert ok.output.splitlines()[-1] == "7 pass, 1 warn, 0 fail"
    assert ok.output.startswith("PASS  plan        peak ")
    bad = invoke("check", write_card(tmp_path / "big.yaml", DOES_NOT_FIT), "--audit", audit_file, "--json")
    assert bad.exit_code == 1
    data = json.loads(bad.output)
    assert data["ok"] is False and data["checkpoint"]["adapter_only_bytes"] == 0
    assert data["checkpoint"]["full_state_bytes"] > data["checkpoint"]["weights_only_bytes"]


def test_cli_live_audit_on_fake_machine(machine, tmp_path, monkeypatch):
    machine("rtx4090x2_pcie")
    monkeypatch.chdir(tmp_path)
    res = invoke("check", write_card(tmp_path / "big.yaml", DOES_NOT_FIT), "--timeout", "5")
    assert res.exit_code == 1 and "FAIL  gpu_memory" in res.output


def test_cli_bad_inputs_are_one_line(tmp_path):
    broken = write_card(tmp_path / "broken.yaml", "model: [unclosed\n")
    res = invoke("check", broken)
    assert res.exit_code == 2 and res.error.startswith("card: ") and "\n" not in res.error
    res = invoke("check", write_card(tmp_path / "c.yaml", FITS), "--audit", tmp_path / "missing.json")
    assert res.exit_code == 2 and res.error == f"--audit: no such file '{tmp_path / 'missing.json'}'"
    (tmp_path / "junk.json").write_text("[1, 2]")
    res = invoke("check", tmp_path / "c.yaml", "--audit", tmp_path / "junk.json")
    assert res.exit_code == 2 and res.error.startswith("--audit: ")


def _disk(lines):
    return next(ln for ln in lines if ln.topic == "disk")


def test_disk_counts_the_model_download(machine, tmp_path):
    """Issue 14: the disk test ignored the model download (Qwen3-8B: 8.19e9 parameters x 2 B = 15.26 GiB)."""
    from trainfit.preflight.check import CHECKPOINT_BYTES_PER_PARAM, model_downloads
    from trainfit.preflight.checkpoint import checkpoint_sizes

    card = load_card_dict(__import__("yaml").safe_load(FITS))
    plan = make_plan(card)
    (dl,) = model_downloads(card, plan)
    assert dl.model == "Qwen/Qwen3-8B" and dl.role == "actor"
    assert dl.bytes == plan.params_total * CHECKPOINT_BYTES_PER_PARAM == 8_190_735_360 * 2
    ckpts = checkpoint_sizes(card, plan).per_checkpoint_bytes(card) * card.checkpoint.keep
    # room for the checkpoints and half the download: fails now (it warned before: checkpoints fit)
    audit = audited(machine, tmp_path, "a100x8_nvlink", disk_gib=(ckpts + dl.bytes / 2) / GIB)
    line = _disk(run_check(card, plan, audit))
    assert line.verdict == "fail" and "model download 15.26 GiB (Qwen/Qwen3-8B 15.26 GiB; bf16 safetensors)" in line.message
    roomy = audited(machine, tmp_path, "a100x8_nvlink", disk_gib=(ckpts * 3 + dl.bytes) / GIB)
    assert _disk(run_check(card, plan, roomy)).verdict == "pass"


def test_local_model_and_extra_models(machine, tmp_path):
    from trainfit.preflight.check import model_downloads

    local = load_card_dict({"model": {"path": "./ckpt", "config": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 1000}},
        "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}, "parallel": {"strategy": "single"}})
    assert model_downloads(local, make_plan(local)) == []
    grpo = load_card_dict({"model": "Qwen/Qwen3-0.6B", "method": "grpo", "roles": {"reward_model": "Qwen/Qwen3-1.7B"},
                           "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1}, "parallel": {"strategy": "single"}})
    got = model_downloads(grpo, make_plan(grpo))
    assert [(d.model, d.role) for d in got] == [("Qwen/Qwen3-0.6B", "actor"), ("Qwen/Qwen3-1.7B", "reward_model")]
    assert got[1].bytes > got[0].bytes > 0


def test_cached_model_is_not_counted(machine, tmp_path, monkeypatch):
    from trainfit.preflight.check import hf_cache_dir, mark_cached, model_downloads

    cache = tmp_path / "hub"
    (cache / "models--Qwen--Qwen3-8B" / "snapshots" / "abc123").mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert hf_cache_dir() == cache
    card = load_card_dict(__import__("yaml").safe_load(FITS))
    plan = make_plan(card)
    (dl,) = mark_cached(model_downloads(card, plan))
    assert dl.cached
    line = _disk(run_check(card, plan, audited(machine, tmp_path, "a100x8_nvlink"), [dl]))
    assert "model download 0.00 GiB (Qwen/Qwen3-8B 15.26 GiB already in the Hugging Face cache, not counted" in line.message
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    assert not mark_cached(model_downloads(card, plan))[0].cached


def test_cli_json_lists_downloads(machine, tmp_path):
    audit = audited(machine, tmp_path, "a100x8_nvlink")
    audit_file = tmp_path / "audit.json"
    audit_file.write_text(json.dumps(audit.to_dict()))
    res = invoke("check", write_card(tmp_path / "fits.yaml", FITS), "--audit", audit_file, "--json")
    data = json.loads(res.output)
    assert data["downloads"] == [{"model": "Qwen/Qwen3-8B", "role": "actor", "bytes": 8_190_735_360 * 2.0, "cached": False}]
    disk = next(ln for ln in data["lines"] if ln["topic"] == "disk")
    assert "model download" in disk["message"]


def _topology(card_link, audit):
    card = load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "rtx3090", "gpus_per_node": 2,
                                                                     "interconnect": card_link}})
    return [ln.message for ln in run_check(card, make_plan(card), audit) if ln.topic == "topology"]


def test_a_stated_link_the_audit_contradicts_warns(machine, tmp_path):
    """hardware.interconnect against topo -m and the peer-to-peer matrix: pcie where NV# links show, pcie (with
    peer-to-peer) where some pair refuses it, pcie_no_p2p where every pair has it."""
    no_p2p = audited(machine, tmp_path, "rtx4090x2_pcie")  # no NV# link, P2P "NS"
    assert any("interconnect: nvlink but topo -m shows no NV# link" in t for t in _topology("nvlink", no_p2p))
    assert any("interconnect: pcie (with peer-to-peer) but P2P is not available" in t
               for t in _topology("pcie", no_p2p))
    assert not any("interconnect:" in t for t in _topology("pcie_no_p2p", no_p2p))
    p2p = replace(no_p2p, p2p_matrix=(("X", "OK"), ("OK", "X")))
    assert any("interconnect: pcie_no_p2p but P2P is available" in t for t in _topology("pcie_no_p2p", p2p))
    assert not any("interconnect:" in t for t in _topology("pcie", p2p))
    bridged = replace(p2p, nvlink=True)
    assert any("interconnect: pcie but topo -m shows NV# links" in t for t in _topology("pcie", bridged))
    assert not any("interconnect:" in t for t in _topology("nvlink", bridged))


def _unset_link_topology(gpu, audit):
    card = load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": gpu, "gpus_per_node": 2}})
    return [ln.message for ln in run_check(card, make_plan(card), audit) if ln.topic == "topology"]


def test_an_unset_link_is_checked_against_the_catalogs(machine, tmp_path):
    """interconnect null plans the catalog's link: an RTX 3090 pair without NV# links (catalog: the NVLink bridge)
    and an RTX 4090 pair with peer-to-peer everywhere (catalog: pcie_no_p2p) each get a line naming the link."""
    no_p2p = audited(machine, tmp_path, "rtx4090x2_pcie")  # no NV# link, P2P "NS"
    p2p = replace(no_p2p, p2p_matrix=(("X", "OK"), ("OK", "X")))
    assert any("state hardware.interconnect: pcie_no_p2p" in t for t in _unset_link_topology("rtx3090", no_p2p))
    assert any("state hardware.interconnect: pcie" in t and "(nvlink)" in t
               for t in _unset_link_topology("rtx3090", p2p))
    assert any("rtx4090 (pcie_no_p2p) but the machine has pcie; state hardware.interconnect: pcie" in t
               for t in _unset_link_topology("rtx4090", p2p))
    assert not any("state hardware.interconnect" in t for t in _unset_link_topology("rtx4090", no_p2p))
    assert not any("state hardware.interconnect" in t
                   for t in _unset_link_topology("rtx3090", replace(p2p, nvlink=True)))
    assert not any("state hardware.interconnect" in t  # peer-to-peer unknown: nothing to compare
                   for t in _unset_link_topology("rtx4090", replace(p2p, p2p_matrix=None)))


PPO_SAME_REWARD = """\
model: Qwen/Qwen3-8B
method: ppo
scope: full
roles: {reward_model: Qwen/Qwen3-8B}
hardware: {gpu: h100-sxm, gpus_per_node: 8}
parallel: {strategy: fsdp, gradient_checkpointing: true}
"""


def test_a_repo_two_roles_share_is_downloaded_once():
    """A reward model that repeats the actor's repo is one download (the critic that repeats it already was): the
    disk line counted Qwen/Qwen3-8B twice (30.51 GiB for one 15.26 GiB snapshot)."""
    from trainfit.preflight.check import model_downloads

    card = load_card_dict(__import__("yaml").safe_load(PPO_SAME_REWARD))
    got = model_downloads(card, make_plan(card))
    assert [d.model for d in got] == ["Qwen/Qwen3-8B"]
    assert got[0].role == "actor, reward_model"


def test_host_ram_line_names_every_component_it_sums(machine, tmp_path):
    """The host_ram line's label is the plan's host_ram parts, each with its size: 'processes + model load' left
    out a colocated engine's sleeping weights (rollout_weights_asleep), most of a GRPO run's host RAM."""
    card = load_card_dict({"model": "Qwen/Qwen3-8B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
                           "rollout": {"engine": "vllm", "placement": "colocate", "sleep_level": 1}})
    plan = make_plan(card)
    parts = {k: v for k, v in plan.host_ram.items() if v}
    assert parts["rollout_weights_asleep"] > parts["model_load"] > 0
    line = next(ln for ln in run_check(card, plan, audited(machine, tmp_path, "a100x8_nvlink")) if ln.topic == "host_ram")
    for k, v in parts.items():
        assert f"{k.replace('_', ' ')} {v / GIB:.2f} GiB" in line.message, (k, line.message)
