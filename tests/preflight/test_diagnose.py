"""`diagnose`: the seed's symptom table; the OOM corpus parsed field by field; failed allocations
matched against the plan; fixes confirmed by re-planning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import invoke, write_card
from trainfit.errors import TrainfitError
from trainfit.errors import InputError
from trainfit.preflight.diagnose import ONE_VARIABLE_ADVICE, SYMPTOMS, diagnose_log, diagnose_symptom, match_allocation
from trainfit.preflight.oom import parse_oom, size_bytes, traceback_before
from trainfit.spec.card import load_card_dict, resolve_card

DATA = Path(__file__).parent / "data"
CORPUS = json.loads((DATA / "oom_messages.json").read_text())["messages"]
TRACEBACKS = json.loads((DATA / "oom_tracebacks.json").read_text())["logs"]
FIELDS = {
    "requested": "requested_bytes", "total": "total_bytes", "free": "free_bytes",
    "already_allocated": "already_allocated_bytes", "reserved": "reserved_bytes", "this_process": "this_process_bytes",
    "allocated_by_pytorch": "allocated_by_pytorch_bytes", "reserved_unallocated": "reserved_unallocated_bytes",
    "private_pools": "private_pools_bytes",
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
    # no traceback: the size alone names the phase (the logits of the loss's forward)
    assert d.attribution.source == "size" and d.phase_hint == "forward"


@pytest.mark.parametrize("entry", [e for e in CORPUS if "plan_match" not in e], ids=lambda e: e["id"])
def test_corpus_message_without_traceback_or_card_has_no_phase(entry):
    """A bare message says nothing about the phase: diagnose says 'unknown' instead of guessing."""
    d = diagnose_log(entry["message"])
    assert d.phase_hint is None and d.attribution.source == "unknown" and d.symptom is None


def test_traceback_corpus_covers_frameworks_and_phases():
    assert {e["framework"] for e in TRACEBACKS} >= {"trl", "transformers", "verl", "openrlhf", "deepspeed", "vllm", "torch"}
    assert {e["expect"]["phase"] for e in TRACEBACKS} >= {
        "load", "rollout", "ref_logprob", "old_logprob", "actor_forward", "actor_backward", "backward", "optimizer_step", "weight_sync"}
    assert all(e["kind"] in ("excerpt", "synthetic") for e in TRACEBACKS)
    assert all(e["source"].startswith("https://github.com/") for e in TRACEBACKS if e["kind"] == "excerpt")


@pytest.mark.parametrize("entry", TRACEBACKS, ids=[e["id"] for e in TRACEBACKS])
def test_traceback_corpus_phase_from_the_frames(entry):
    """Every corpus log: the phase from the frames nearest the message, whatever words the rest of the log holds."""
    d = diagnose_log(entry["log"])
    assert d.phase_hint == entry["expect"]["phase"], d.attribution.why
    assert d.attribution.source == "traceback" and d.attribution.frame.function == entry["expect"]["frame"]
    if d.phase_hint is None:  # the visible frames leave a choice: it is named, not guessed
        assert [p.value for p in d.attribution.candidates] == entry["expect"]["candidates"]


@pytest.mark.parametrize("entry", [e for e in TRACEBACKS if "card" in e], ids=lambda e: e["id"])
def test_traceback_corpus_with_the_card(entry):
    card = load_card_dict(entry["card"])
    d = diagnose_log(entry["log"], card)
    want = entry["expect_with_card"]
    assert d.phase_hint == want["phase"]
    best = d.matches[0]
    assert best.matches and best.phase == want["phase"] and best.label.startswith(want["match"])


def test_issue_grpo_logprob_oom_is_not_generation():
    """Issue 14: one 'vLLM engine started' line labelled a _get_per_token_logps OOM as generation, its fixes
    saved 0.1 GiB and its notes quoted 1024/2048 tokens. Now: ref_logprob, the 2·1·5120·V bf16 logits, the
    card's 1024 + 4096 = 5120 tokens, and each fix's saving in ref_logprob from a re-plan."""
    entry = next(e for e in TRACEBACKS if e["id"] == "trl-grpo-ref-logprob-vllm-noise")
    card = load_card_dict(entry["card"])
    d = diagnose_log(entry["log"], card)
    assert "vLLM engine started" in entry["log"] and d.phase_hint == "ref_logprob"
    assert d.symptom is None or d.symptom.key != "oom-generation"
    assert d.matches[0].bytes == 2 * 1 * 5120 * 248320
    text = " ".join(d.notes)
    assert "1024 + 4096 = 5120 tokens" in text and "2048" not in text
    assert d.fixes and all(f.phase == "ref_logprob" for f in d.fixes)
    from trainfit.plan import make_plan
    from trainfit.preflight.diagnose import _plan_phases

    for f in d.fixes[:3]:  # each saving is a real re-plan of the changed card
        assert f.saved_bytes == pytest.approx(f.phase_before_bytes - f.phase_after_bytes)
        assert f.phase_before_bytes == pytest.approx(_plan_phases(make_plan(card))["ref_logprob"])
    chunked = next(f for f in d.fixes if f.change.startswith("loss.chunked"))
    assert chunked.saved_bytes > 2 * 2**30  # the 2.37 GiB logits (and their copy) go away
    assert max(f.saved_bytes for f in d.fixes) > 10 * 2**30  # not the 0.1 GiB of before
    assert [f.fits for f in d.fixes] == sorted((f.fits for f in d.fixes), reverse=True)


def test_multi_phase_words_never_decide():
    """The same message under tracebacks of different phases, in a log whose other lines name every phase."""
    noise = ("vLLM engine started; generate() and sampling; rollout done; loss.backward(); optimizer.step();"
             " from_pretrained; forward(; _multi_tensor_adamw; weight sync\n")
    msg = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.99 GiB of which 0 bytes is free.\n"
    for entry in TRACEBACKS:
        log = noise * 50 + entry["log"]  # also when the words repeat just above the traceback
        assert diagnose_log(log).phase_hint == entry["expect"]["phase"], entry["id"]
    assert diagnose_log(noise * 50 + msg).phase_hint is None  # words alone give no phase


def test_interleaved_ranks_read_only_the_message_rank():
    r0 = ('[rank0]: Traceback (most recent call last):\n[rank0]:   File "/x/site-packages/torch/optim/adamw.py", line 606, in _multi_tensor_adamw\n'
          '[rank0]:     exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)\n')
    r1 = ('[rank1]: Traceback (most recent call last):\n[rank1]:   File "/x/site-packages/torch/autograd/graph.py", line 823, in _engine_run_backward\n'
          '[rank1]:     return Variable._execution_engine.run_backward(\n')
    lines = [ln for pair in zip(r0.splitlines(), r1.splitlines()) for ln in pair]
    log = "\n".join(lines) + "\n[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1 has a total capacity of 23.99 GiB of which 0 bytes is free.\n"
    frames = traceback_before(log, log.index("CUDA out of memory"))
    assert [f.function for f in frames] == ["_engine_run_backward"]
    assert diagnose_log(log).phase_hint == "backward"


def test_ipython_and_chained_tracebacks():
    ipy = ("File ~/venv/lib/python3.12/site-packages/transformers/trainer.py:2555, in Trainer._inner_training_loop(self, batch_size)\n"
           "   2554 with context():\n-> 2555     tr_loss_step = self.training_step(model, inputs, num_items_in_batch)\n\n"
           "File ~/venv/lib/python3.12/site-packages/torch/optim/adamw.py:606, in _multi_tensor_adamw(params)\n"
           "--> 606 exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)\n\n"
           "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 23.99 GiB of which 0 bytes is free.\n")
    frames = traceback_before(ipy, ipy.index("CUDA out"))
    assert [f.function for f in frames] == ["_inner_training_loop", "_multi_tensor_adamw"]
    assert frames[0].code.startswith("tr_loss_step = self.training_step")
    chained = ('Traceback (most recent call last):\n  File "/x/site-packages/torch/autograd/graph.py", line 823, in _engine_run_backward\n'
               "    return Variable._execution_engine.run_backward(\nValueError: boom\n\n"
               "During handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n"
               '  File "/x/site-packages/transformers/modeling_utils.py", line 5106, in from_pretrained\n    ) = cls._load_pretrained_model(\n'
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.99 GiB of which 0 bytes is free.\n")
    assert diagnose_log(chained).phase_hint == "load"


def test_card_without_the_traceback_phase_says_so():
    entry = next(e for e in TRACEBACKS if e["id"] == "trl-grpo-vllm-generate")
    sft = load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}, "parallel": {"strategy": "single"}})
    d = diagnose_log(entry["log"], sft)
    assert d.phase_hint == "rollout"
    assert any("which the card's plan does not have" in n for n in d.notes)


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
    assert d.fixes and all(f.phase == "backward" for f in d.fixes)
    assert all(f.peak_after_bytes <= f.capacity_bytes for f in d.fixes if f.fits)
    from trainfit.plan import make_plan
    from trainfit.preflight.diagnose import confirmed_fixes

    assert not make_plan(card).fits
    assert [f.change for f in confirmed_fixes(card, make_plan(card))] == [f.change for f in d.fixes if f.fits]
    assert any(f.fits for f in d.fixes)
    assert d.advice == ONE_VARIABLE_ADVICE


def test_last_message_of_a_log_wins_and_notes():
    log = "\n".join(e["message"] for e in CORPUS if e["id"] in ("torch1.2-cached", "torch2.8-other-processes"))
    d = diagnose_log(log)
    assert d.oom.requested_bytes == printed("2.11 GiB") and d.extra["messages_found"] == 2
    assert any("other processes hold" in n for n in d.notes)
    assert any("fragmentation" in n for n in d.notes)  # 2.14 GiB reserved-unallocated >= 2.11 GiB asked


@pytest.mark.parametrize("head", [
    "torch.OutOfMemoryError: CUDA out of memory.\n  Tried to allocate 2.32 GiB.",  # wrapped paste (docs/preflight.md example)
    "torch.OutOfMemoryError: CUDA out of memory.  Tried to allocate 2.32 GiB.",  # double space
    "torch.OutOfMemoryError: CUDA out  of\tmemory.\r\n\tTried  to\n allocate\n 2.32 GiB.",  # every gap
])
def test_wrapped_or_double_spaced_head_parses(head):
    log = head + " GPU 0 has a total capacity of 39.39 GiB of which 1.10 GiB is free. ..."
    d = diagnose_log(log)
    assert d.oom.backend == "CUDA" and d.oom.requested_bytes == printed("2.32 GiB")
    assert d.oom.total_bytes == printed("39.39 GiB") and d.oom.free_bytes == printed("1.10 GiB")


def test_no_oom_is_one_line():
    with pytest.raises(TrainfitError, match=r"^diagnose: no CUDA/HIP out-of-memory message, NCCL watchdog timeout, vLLM KV-cache error or extension build error in the log$"):
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
    assert all(f.peak_after_bytes <= f.capacity_bytes for f in d.fixes if f.fits)
    grpo = load_card_dict({"method": "grpo", "model": "Qwen/Qwen3-0.6B", "rollout": {"prompt_len": 1024, "response_len": 4096}})
    gen = diagnose_symptom("oom-generation", grpo).notes[0]
    assert "prompt 1024 + response 4096 tokens" in gen
    assert "1024 + 4096 = 5120 tokens" in diagnose_symptom("oom-backward", grpo).notes[0]
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
    assert res.exit_code == 2 and res.error == ("diagnose: no CUDA/HIP out-of-memory message, NCCL watchdog timeout, vLLM KV-cache error or extension"
                                            f" build error in '{quiet}'")
    res = invoke("diagnose", "--log", tmp_path / "missing.log")
    assert res.exit_code == 2 and res.error.startswith("--log: cannot read")
    assert invoke("diagnose").exit_code == 2


def test_sizes_past_the_bound_are_one_line_errors(tmp_path):
    """Issue 17: a size that parses to infinity raised OverflowError."""
    huge = "CUDA out of memory. Tried to allocate " + "9" * 400 + " GiB. GPU 0 has a total capacity of 1.00 GiB of which 0 bytes is free."
    with pytest.raises(InputError, match=r"^OOM message: size '.*' is past the bound of 1024 TiB$"):
        diagnose_log(huge)
    with pytest.raises(InputError):
        size_bytes("9" * 400, "GiB")
    log = tmp_path / "huge.log"
    log.write_text(huge)
    res = invoke("diagnose", "--log", log)
    assert res.exit_code == 2 and res.error.startswith("OOM message: size") and "\n" not in res.error


def test_zero_byte_request_does_not_divide_by_zero():
    """Issue 17: match_allocation divided by the requested size."""
    card = load_card_dict({"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}, "parallel": {"strategy": "single"}})
    from trainfit.plan import make_plan

    assert match_allocation(0, card, make_plan(card)) == []
    d = diagnose_log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 0 bytes. GPU 0 has a total capacity of 23.99 GiB of which 0 bytes is free.", card)
    assert d.matches == () and any("0 bytes" in n for n in d.notes)
    json.loads(invoke("diagnose", "--message", d.oom.text, "--json").output)


def test_dpo_reference_pass_at_chosen_plus_rejected():
    """DPO's passes see chosen + rejected: 2·(2b)·s·V bf16 logits, matched in the reference pass when the
    traceback says so (TRL compute_ref_log_probs)."""
    card = load_card_dict({"model": "Qwen/Qwen3-0.6B", "method": "dpo", "batch": {"micro_batch_size": 2, "seq_len": 1024},
                           "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}, "parallel": {"strategy": "single"}})
    size = 2 * (2 * 2) * 1024 * 151936
    log = ('Traceback (most recent call last):\n  File "/x/site-packages/trl/trainer/dpo_trainer.py", line 900, in compute_ref_log_probs\n'
           "    ref_model_output = self.concatenated_forward(self.ref_model, batch)\n"
           '  File "/x/site-packages/trl/trainer/dpo_trainer.py", line 1300, in concatenated_forward\n    logits = outputs.logits\n'
           f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {size / 2**30:.2f} GiB. GPU 0 has a total capacity of 23.55 GiB of which 0 bytes is free.\n")
    d = diagnose_log(log, card)
    assert d.phase_hint == "ref_logprob" and d.attribution.refined_by.function == "compute_ref_log_probs"
    assert d.matches[0].matches and d.matches[0].phase == "ref_logprob" and "chosen + rejected" in d.matches[0].label


FORWARD_LOG = DATA / "logs" / "forward_logits_float_oom.log"
"""An SFT rank that runs out of memory in the forward: HF Trainer.compute_loss -> Qwen3ForCausalLM.forward ->
``self.loss_function`` -> transformers' ``ForCausalLMLoss`` upcasting the logits (``logits = logits.float()``) for the
loss; torch >= 2.5 message wording, [rankN]: prefixes as torchrun prints them. 4.64 GiB = 4·b·s·V = 4·2·4096·151936."""


def test_a_forward_oom_gets_the_forward_row_not_backward():
    card = load_card_dict({"model": "Qwen/Qwen3-8B", "batch": {"micro_batch_size": 2, "seq_len": 4096},
                           "parallel": {"strategy": "fsdp"}, "hardware": {"gpu": "a100-40gb", "gpus_per_node": 8}})
    d = diagnose_log(FORWARD_LOG.read_text(), card)
    assert d.phase_hint == "forward"
    assert d.symptom.key == "oom-forward" and d.symptom.name == "OOM in forward" and d.symptom.seed == "前向阶段 OOM"
    assert "loss.chunked" in d.symptom.direction and any("logits" in c for c in d.symptom.check_first)
    assert d.matches[0].matches and d.matches[0].label.startswith("fp32 logits of one micro-batch")
    assert d.fixes and all(f.phase == "forward" for f in d.fixes)
    assert any(n.startswith("micro_batch_size 2, ") and "loss.chunked false" in n for n in d.notes)
    res = invoke("diagnose", "--log", str(FORWARD_LOG))
    assert res.exit_code == 0
    assert "phase: forward" in res.output and "symptom: OOM in forward (前向阶段 OOM)" in res.output
    assert "OOM in backward" not in res.output


def test_the_forward_symptom_with_a_card_replans_in_forward():
    rl = load_card_dict({"method": "grpo", "model": "Qwen/Qwen3-0.6B"})
    d = diagnose_symptom("oom-forward", rl)
    assert d.fixes_computed and d.fixes and all(f.phase == "actor_forward" for f in d.fixes)
    sft = load_card_dict({"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "rtx4090", "gpus_per_node": 2}})
    fixes = diagnose_symptom("oom-forward", sft).fixes
    assert fixes and all(f.phase == "forward" for f in fixes)


REF_PASS_LOG = DATA / "logs" / "verl_ref_logprob_oom.log"
"""A verl GRPO run (Qwen2.5-7B, 8x A100-80GB, ref.log_prob_micro_batch_size_per_gpu 32) out of memory in the
reference's log-prob pass, as the driver prints the Ray task error: ``compute_ref_log_prob`` ->
``DataParallelPPOActor.compute_log_prob`` -> ``_forward_micro_batch`` -> the model's ``lm_head`` (volcengine/verl
verl/workers/fsdp_workers.py l.640, verl/workers/actor/dp_actor.py l.105 and l.222,
@e0d035cd4a6a5c29835516a58d78710a28e73b18). 27.84 GiB = 2·m·s·V bf16 logits = 2·32·3072·152064."""

REF_PASS_CARD = """model: Qwen/Qwen2.5-7B
method: grpo
preset: verl
roles: {kl_coef: 0.001}
hardware: {gpu: a100-80gb, gpus_per_node: 8}
rollout: {num_generations: 8, prompts_per_step: 64, prompt_len: 1024, response_len: 2048, logprob_micro_batch_size: 32}
"""


def test_a_reference_pass_oom_gets_the_no_grad_row_and_its_fixes_in_that_pass(tmp_path):
    """Before, an OOM in a no-grad pass (ref_logprob, old_logprob, reward, critic_value) had no symptom row at all."""
    card = write_card(tmp_path / "card.yaml", REF_PASS_CARD)
    data = json.loads(invoke("diagnose", "--log", REF_PASS_LOG, "--card", card, "--json").output)
    assert data["phase_hint"] == "ref_logprob" and data["phase"]["refined_by"]["function"] == "compute_ref_log_prob"
    assert data["symptom"]["key"] == "oom-no-grad" and data["symptom"]["seed"] == "无梯度前向阶段 OOM"
    changes = [f["change"] for f in data["fixes"]]
    assert data["fixes"] and all(f["phase"] == "ref_logprob" for f in data["fixes"])
    assert "rollout.logprob_micro_batch_size 32 -> 16" in changes and any(c.startswith("loss.chunked -> true") for c in changes)
    res = invoke("diagnose", "--log", REF_PASS_LOG, "--card", card)
    assert res.exit_code == 0
    assert "symptom: OOM in a no-grad pass (无梯度前向阶段 OOM)" in res.output and "OOM in forward" not in res.output
    assert "log-prob micro-batch size" in res.output and "reference cpu" in res.output


@pytest.mark.parametrize("phase", ["ref_logprob", "old_logprob", "reward", "critic_value"])
def test_every_no_grad_phase_maps_to_the_no_grad_row(phase):
    from trainfit.preflight.diagnose import _symptom_of_phase
    from trainfit.spec.enums import Phase

    assert _symptom_of_phase(Phase(phase)).key == "oom-no-grad"


def test_the_no_grad_symptom_replans_the_reference_placement_in_its_pass():
    grpo = {"method": "grpo", "model": "Qwen/Qwen3-0.6B", "roles": {"kl_coef": 0.04}}
    d = diagnose_symptom("oom-no-grad", load_card_dict(grpo))
    assert d.fixes_computed and d.fixes and all(f.phase == "ref_logprob" for f in d.fixes)
    assert any("gpu_memory_utilization 0.3, sleep level 0" in n for n in d.notes)
    # no preset (TRL) plans no pass for a cpu reference: offered only where its pass is planned (verl's FSDP workers)
    assert not any(f.change.startswith("roles.reference gpu -> cpu") for f in d.fixes)
    verl = resolve_card({**grpo, "preset": "verl", "roles": {"kl_coef": 0.04, "reference": "gpu"}})
    fix = next(f for f in diagnose_symptom("oom-no-grad", verl).fixes if f.change.startswith("roles.reference gpu -> cpu"))
    assert fix.phase == "ref_logprob" and 0 < fix.phase_after_bytes < fix.phase_before_bytes
    dpo = load_card_dict({"method": "dpo", "model": "Qwen/Qwen3-8B", "scope": "lora", "roles": {"reference": "gpu"},
                          "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}, "parallel": {"strategy": "single"}})
    fixes = diagnose_symptom("oom-no-grad", dpo).fixes
    assert any(f.change.startswith("roles.reference gpu -> lora_disabled") for f in fixes)
    assert not any(f.change.startswith("roles.reference gpu -> cpu") for f in fixes)  # refused for DPO
