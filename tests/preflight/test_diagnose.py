"""`diagnose`: the seed's symptom table; the OOM corpus parsed field by field; failed allocations
matched against the plan; fixes confirmed by re-planning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import invoke, write_card
from trainfit.errors import TrainfitError
from trainfit.preflight.diagnose import ONE_VARIABLE_ADVICE, SYMPTOMS, diagnose_log, diagnose_symptom
from trainfit.preflight.oom import parse_oom, size_bytes
from trainfit.spec.card import load_card_dict

CORPUS = json.loads((Path(__file__).parent / "data" / "oom_messages.json").read_text())["messages"]
FIELDS = {
    "requested": "requested_bytes", "total": "total_bytes", "free": "free_bytes",
    "already_allocated": "already_allocated_bytes", "reserved": "reserved_bytes", "this_process": "this_process_bytes",
    "allocated_by_pytorch": "allocated_by_pytorch_bytes", "reserved_unallocated": "reserved_unallocated_bytes",
}


def printed(size: str) -> int:
    number, unit = size.split()
    return size_bytes(number, unit)


def test_corpus_has_sources_and_covers_every_format():
    assert all(e["source"].startswith("https://github.com/") and e["torch"] for e in CORPUS)
    assert {e["expect"]["format"] for e in CORPUS} == {"old-cached", "old", "new"}
    assert {e["expect"]["backend"] for e in CORPUS} == {"CUDA", "HIP"}
    assert {e["expect"]["exception"] for e in CORPUS} == {
        "RuntimeError", "torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError", None}


@pytest.mark.parametrize("entry", CORPUS, ids=[e["id"] for e in CORPUS])
def test_corpus_message_parses(entry):
    (m,) = parse_oom(entry["message"])
    want = entry["expect"]
    assert (m.backend, m.format, m.exception, m.gpu_index) == (want["backend"], want["format"], want["exception"], want["gpu_index"])
    for key, attr in FIELDS.items():
        expected = printed(want[key]) if key in want else None
        assert getattr(m, attr) == expected, key
    others = want.get("other_processes")
    assert m.other_processes_bytes == (sum(printed(x) for x in others) if others else None)


@pytest.mark.parametrize("entry", [e for e in CORPUS if "plan_match" in e], ids=lambda e: e["id"])
def test_corpus_allocation_matches_the_plan(entry):
    card = load_card_dict(entry["plan_match"]["card"])
    d = diagnose_log(entry["message"], card)
    best = d.matches[0]
    assert best.matches and best.label.startswith(entry["plan_match"]["label"])
    assert best.relative_error < 0.005


def test_issue_example_fp32_logits_in_backward():
    """Synthetic message in torch >= 2.5 wording: Qwen3-8B, b=1, s=4096, V=151936 -> 4·b·s·V = 2.32 GiB."""
    card = load_card_dict({"model": "Qwen/Qwen3-8B", "batch": {"seq_len": 4096},
                           "hardware": {"gpu": "rtx4090", "gpus_per_node": 2}})
    log = (
        'Traceback (most recent call last):\n  File "train.py", line 40, in <module>\n    loss.backward()\n'
        '  File "/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 347, in backward\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of 23.55 GiB "
        "of which 1.10 GiB is free. Including non-PyTorch memory, this process has 22.44 GiB memory in use. Of the allocated "
        "memory 21.80 GiB is allocated by PyTorch, and 180.00 MiB is reserved by PyTorch but unallocated.\n"
    )
    d = diagnose_log(log, card)
    assert d.phase_hint == "backward" and d.symptom.key == "oom-backward"
    assert d.matches[0].matches and d.matches[0].label.startswith("fp32 logits of one micro-batch")
    assert d.matches[0].phase == "backward"
    assert d.fixes and all(f.peak_after_bytes <= f.capacity_bytes for f in d.fixes)
    from trainfit.plan import make_plan
    from trainfit.preflight.diagnose import confirmed_fixes

    assert not make_plan(card).fits
    assert [f.change for f in confirmed_fixes(card, make_plan(card))] == [f.change for f in d.fixes]
    assert d.advice == ONE_VARIABLE_ADVICE


def test_last_message_of_a_log_wins_and_notes():
    log = "\n".join(e["message"] for e in CORPUS if e["id"] in ("torch1.2-cached", "torch2.8-other-processes"))
    d = diagnose_log(log)
    assert d.oom.requested_bytes == printed("2.11 GiB") and d.extra["messages_found"] == 2
    assert any("other processes hold" in n for n in d.notes)
    assert any("fragmentation" in n for n in d.notes)  # 2.14 GiB reserved-unallocated >= 2.11 GiB asked


def test_no_oom_is_one_line():
    with pytest.raises(TrainfitError, match=r"^diagnose: no CUDA/HIP out-of-memory message in the log$"):
        diagnose_log("loss 1.23\nstep 10\n")


@pytest.mark.parametrize("key", list(SYMPTOMS))
def test_every_symptom_of_the_seed(key):
    d = diagnose_symptom(key)
    assert d.symptom.check_first and d.symptom.direction and d.symptom.seed
    assert d.advice == ONE_VARIABLE_ADVICE


def test_symptoms_with_a_card():
    card = load_card_dict({"scope": "lora", "checkpoint": {"resume": "adapter_only"}})
    d = diagnose_symptom("wrong-after-resume", card)
    assert "cannot resume training exactly" in d.notes[0]
    big = load_card_dict({"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "rtx4090", "gpus_per_node": 2},
                          "batch": {"micro_batch_size": 4}})
    d = diagnose_symptom("oom-backward", big)
    assert any("does not fit" in n for n in d.notes)
    assert all(f.peak_after_bytes <= f.capacity_bytes for f in d.fixes)
    with pytest.raises(TrainfitError, match="unknown symptom 'oom'"):
        diagnose_symptom("oom")


def test_cli(tmp_path):
    res = invoke("diagnose", "identical-rewards")
    assert res.exit_code == 0
    assert res.output.splitlines() == [
        "symptom: identical rewards within a group (同组奖励全相同)",
        "check first: task difficulty, the test runner, the reward function",
        "direction: check whether the relative learning signal is missing: identical rewards give zero advantage",
        f"advice: {ONE_VARIABLE_ADVICE}",
    ]
    entry = next(e for e in CORPUS if e["id"] == "liger-logits-llama3-vocab")
    card = write_card(tmp_path / "card.yaml", json.dumps(entry["plan_match"]["card"]))
    log = tmp_path / "train.log"
    log.write_text("step 1\n" + entry["message"] + "\n")
    res = invoke("diagnose", "--log", log, "--card", card, "--json")
    data = json.loads(res.output)
    assert data["matches"][0]["matches"] and data["oom"]["requested_bytes"] == printed("3.91 GiB")
    res = invoke("diagnose", "--log", "-", input=entry["message"])
    assert res.exit_code == 0 and res.output.startswith("CUDA OOM (new format): tried to allocate 3.91 GiB on GPU 0")


def test_cli_bad_inputs(tmp_path):
    quiet = tmp_path / "quiet.log"
    quiet.write_text("all good\n")
    res = invoke("diagnose", "--log", quiet)
    assert res.exit_code == 2 and res.error == f"diagnose: no CUDA/HIP out-of-memory message in '{quiet}'"
    res = invoke("diagnose", "--log", tmp_path / "missing.log")
    assert res.exit_code == 2 and res.error.startswith("--log: cannot read")
    assert invoke("diagnose").exit_code == 2
