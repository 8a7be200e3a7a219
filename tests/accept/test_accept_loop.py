"""The full default loop, and one test per check proving it fails when what it checks is broken."""

import json

import pytest

pytest.importorskip("trl")

from trainfit.accept.checks import check_calibration  # noqa: E402
from trainfit.accept.run import run_accept  # noqa: E402
from trainfit.accept.sandbox import sandbox_status  # noqa: E402

# the reward grader fails closed where candidate code cannot be jailed (no mount/PID namespaces):
# there `trainfit accept` exits 2 with one line (tests/accept/test_sandbox.py checks that refusal)
needs_jail = pytest.mark.skipif(sandbox_status() is not None, reason=str(sandbox_status()))


def _status(record, name):
    return next(c for c in record["checks"] if c["name"] == name)["status"]


@needs_jail
def test_full_default_loop_cli():
    import typer
    from typer.testing import CliRunner

    from trainfit.cli.accept_cmd import accept

    app = typer.Typer()
    app.command()(accept)
    res = CliRunner().invoke(app, ["--json"])
    record = json.loads(res.stdout)
    assert res.exit_code == (0 if record["ok"] else 1), res.output
    statuses = {c["name"]: c["status"] for c in record["checks"]}
    # plan_vs_measured judges the CPU tracker's exact bytes with no 20 MiB floor (the floor is one CUDA allocator
    # segment: it does not apply to a CPU record). The checks' own copies are not counted (Watch.exclude), the
    # tracker keeps no no-grad embedding outputs alive, the harness's log-prob pass is not TRL's 'logprob' phase
    # (TRL runs none at beta 0), and the card plans the fused AdamW the Trainer builds: reward, forward, backward and
    # optimizer step hold. The rollout is the open miss: the card cannot state the harness's one-sequence,
    # multi-turn generate calls, so the plan prefills 4 sequences at once (docs/watch.md, 'The acceptance run's
    # rollout').
    plan_check = next(c for c in record["checks"] if c["name"] == "plan_vs_measured")
    assert statuses == {"baseline": "pass", "trajectories": "pass", "reward_calibration": "pass", "update": "pass",
                        "generation_sync": "pass", "resume": "pass", "multi_process": "skipped",
                        "plan_vs_measured": plan_check["status"]}
    # ... so the rollout is measured and shown but named 'not judged' with that reason; every other phase must hold
    assert plan_check["status"] == "pass" and record["ok"], plan_check["evidence"]
    assert plan_check["evidence"].startswith("plan held"), plan_check["evidence"]
    rows = {r["phase"] for r in record["phases"]}
    assert "logprob" not in rows and {"rollout", "reward", "forward", "backward", "optimizer_step"} <= rows
    assert " forward " in plan_check["evidence"] and record["wall_s"] < 120


def test_calibration_fails_for_reward_ignoring_tests():
    def ignores_tests(task, ops):  # rewards any patch that writes something
        return 1.0 if ops else 0.0

    r = check_calibration(grade=ignores_tests)
    assert r.status == "fail", r.evidence


@needs_jail
def test_update_fails_with_zero_learning_rate():
    rec = run_accept(learning_rate=0.0, only=("update",))
    assert _status(rec, "update") == "fail" and not rec["ok"]


@needs_jail
def test_sync_fails_when_generation_keeps_old_weights():
    rec = run_accept(live_generation=False, only=("generation_sync",))
    assert _status(rec, "generation_sync") == "fail"


@needs_jail
def test_mask_checks_fail_when_tool_tokens_are_trained_on():
    rec = run_accept(mask_tool_tokens=False, only=("trajectories", "update"))
    assert _status(rec, "trajectories") == "fail"
    assert _status(rec, "update") == "fail"  # non-zero gradient at tool-output positions


@needs_jail
def test_resume_fails_without_optimizer_state():
    rec = run_accept(drop_optimizer=True, only=("resume",))
    assert _status(rec, "resume") == "fail"


@needs_jail
def test_a_users_local_checkpoint_via_model(tmp_path):
    """--model: a checkpoint directory saved by transformers (here a different Qwen3 shape and seed)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trainfit.accept.tiny import build_tokenizer

    tok = build_tokenizer()
    torch.manual_seed(7)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=96, intermediate_size=192, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=24, max_position_embeddings=2048,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    model = Qwen3ForCausalLM(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(tmp_path / "ckpt")
    tok.save_pretrained(tmp_path / "ckpt")
    record = run_accept(tmp_path / "ckpt", only=("update", "generation_sync", "resume"))
    assert record["model"] == str(tmp_path / "ckpt")
    assert {c["name"]: c["status"] for c in record["checks"]} == {
        "update": "pass", "generation_sync": "pass", "resume": "pass"}
