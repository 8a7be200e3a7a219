"""Bad input found by exploratory QA: each case is one line naming the field, exit 2, no traceback, and
nothing written; plus `python -m trainfit` running the CLI."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainfit.cli.main import main


def run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_error(rc, out, err, expected):
    assert rc == 2, (rc, out, err)
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("trainfit: error: "), err
    assert "Traceback" not in err
    assert expected in err, err


@pytest.mark.parametrize("argv", [["plan", "--model", ""], ["plan", "--model", "  "], ["size", ""]])
def test_empty_model_names_the_field(argv, capsys):
    # Path("") is the current folder: the message used to be "no config.json at '.'"
    _one_line_error(*run(argv, capsys), "model: empty; allowed: a catalog id")


def _non_utf8(path: Path) -> Path:
    path.write_bytes(b'{"a": 1}\n\xff\xfe\n')
    return path


def test_calibration_flag_non_utf8_file(tmp_path, capsys):
    bad = _non_utf8(tmp_path / "cal.json")
    _one_line_error(*run(["plan", "--calibration", str(bad)], capsys), f"calibration '{bad}': not UTF-8 text (byte 9)")


def test_calibration_flag_directory(tmp_path, capsys):
    _one_line_error(*run(["plan", "--calibration", str(tmp_path)], capsys), f"--calibration: '{tmp_path}' is a directory")


def test_calibrate_non_utf8_input_writes_nothing(tmp_path, capsys):
    bad = _non_utf8(tmp_path / "time.json")
    out = tmp_path / "cal.json"
    _one_line_error(*run(["calibrate", str(bad), "--out", str(out)], capsys), f"calibrate: '{bad}' is not UTF-8 text")
    assert not out.exists()


@pytest.mark.parametrize("budget", ["-5USD", "nanUSD", "100", "CNY"])
def test_budget_parse_errors_name_budget(budget, capsys):
    _one_line_error(*run(["fit", "--gpu", "h100-sxm", "--max-gpus", "1", "--budget", budget], capsys),
                    f"--budget: an amount with a currency, e.g. 300CNY, got '{budget}'")


def test_zero_budget_is_refused(capsys):
    # a budget no plan can keep used to search and print "no plan fits within the limits"
    _one_line_error(*run(["fit", "--gpu", "h100-sxm", "--max-gpus", "1", "--budget", "0USD"], capsys),
                    "--budget: must be a finite amount > 0")


def test_python_dash_m_trainfit():
    src = Path(__file__).resolve().parents[2] / "src"
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "trainfit", "size", "nope"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("trainfit: error: model: 'nope'")


GPU_TIME = Path(__file__).resolve().parents[1] / "data" / "gpu_time_dry_run.json"


@pytest.mark.parametrize("kind", ["folder", "missing_folder", "input"])
def test_calibrate_out_refused_before_work(tmp_path, kind, capsys):
    src = tmp_path / "time.json"
    src.write_bytes(GPU_TIME.read_bytes())
    out = {"folder": tmp_path, "missing_folder": tmp_path / "nope" / "cal.json", "input": src}[kind]
    expected = {"folder": "is a directory", "missing_folder": "does not exist", "input": "is one of the inputs"}[kind]
    _one_line_error(*run(["calibrate", str(src), "--gpu", "h100-sxm", "--out", str(out)], capsys), f"--out: '{out}'"
                    if kind != "missing_folder" else "--out: folder")
    assert expected
    assert src.read_bytes() == GPU_TIME.read_bytes()
    assert not (tmp_path / "nope").exists()


def test_calibrate_never_renames_over_a_special_file(tmp_path, capsys):
    """calibrate --out /dev/full used to rename its temporary file over the device node (as root: /dev/full
    became a regular file); a socket stands in for the device here."""
    import socket
    import stat

    sock_path = tmp_path / "s"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    try:
        rc, _, err = run(["calibrate", str(GPU_TIME), "--gpu", "h100-sxm", "--allow-dry-run", "--out", str(sock_path)], capsys)
        assert stat.S_ISSOCK(sock_path.stat().st_mode), "the output path was replaced by a regular file"
        assert rc == 2 and err.startswith("trainfit: error: calibration: cannot write"), err
    finally:
        s.close()


def test_trace_unknown_model_suggests_near_ids(capsys):
    _one_line_error(*run(["trace", "--model", "Qwen/Qwen3-8b"], capsys), "did you mean: Qwen/Qwen3-8B")


@pytest.mark.parametrize("content", [b"a: 1\n\xff\n", b"- 1\n- 2\n"])
def test_record_measured_errors_name_the_flag(tmp_path, content, capsys):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    from trainfit.preflight.audit import AuditReport

    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(AuditReport(
        created_utc="2026-01-01T00:00:00+00:00", python_version="3.11.9", python_executable="/usr/bin/python3",
        platform="Linux", packages={}, gpus=(), driver_version=None, cuda_runtime=None, torch_cuda_available=False,
        nccl_version=None, p2p_matrix=None, p2p_source=None, topology_text=None, nvlink=False, cpu_cores=2,
        cpu_cores_usable=2, host_ram_total_bytes=2**34, host_ram_available_bytes=2**33, checkpoint_path="/tmp",
        checkpoint_path_exists=True, checkpoint_writable=True, disk_free_bytes=2**36, disk_total_bytes=2**37,
    ).to_dict()))
    measured = tmp_path / "watch.yaml"
    measured.write_bytes(content)
    out = tmp_path / "r.yaml"
    rc, o, err = run(["record", str(card), "--audit", str(audit), "--measured", str(measured), "--out", str(out)], capsys)
    _one_line_error(rc, o, err, f"--measured: '{measured}'")
    assert not out.exists()


@pytest.mark.parametrize(("method", "warned"), [("sft", True), ("dpo", True), ("grpo", False)])
def test_rollout_on_a_non_rl_card_is_named(method, warned, capsys):
    """rollout.* on sft/rm/dpo used to be accepted silently (the plan never reads it); lora on scope full and
    prompt_tuning on another scope are refused, but presets fill rollout for every method, so it is a warning."""
    rc, out, _ = run(["plan", "--method", method, "--set", "rollout.tensor_parallel=2", "--json"], capsys)
    assert rc == 0
    warnings = json.loads(out)["warnings"]
    assert (f"rollout: read for methods ppo and grpo only; method {method} ignores it" in warnings) is warned


@pytest.mark.parametrize(("rollout", "expected"), [
    ({"response_len_mean": 1000, "response_clip_ratio": 0.9999999999999999},
     "rollout.response_clip_ratio: 0.9999999999999999 is more than the truncated exponential of mean 1000"),
    ({"response_len_mean": 300, "response_clip_ratio": 0.0},
     "rollout.response_clip_ratio: 0 (none cut) beside response_len_mean 300 needs rollout.response_len_batch_max"),
    ({"response_len_mean": 1024, "response_clip_ratio": 0.5}, "response_len_mean 1024 is response_len"),
])
def test_plan_refuses_contradicting_published_lengths_in_one_line(rollout, expected, tmp_path, capsys):
    # a share just under 1 used to end in a ZeroDivisionError traceback at card load
    card = {"model": "Qwen/Qwen2.5-7B-Instruct", "method": "grpo", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "rollout": {"tensor_parallel": 2, "prompts_per_step": 64, "num_generations": 5, "prompt_len": 512,
                        "response_len": 1024, **rollout}}
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    _one_line_error(*run(["plan", str(path)], capsys), expected)
