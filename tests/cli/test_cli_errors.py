"""Bad input: one clear line on stderr, exit code 2, no traceback; --debug shows the traceback."""

import json
import subprocess
import sys

import pytest

from trainfit.cli.main import main


def run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["plan", "--model", "Qwen/Qwen3-8b"], "model: 'Qwen/Qwen3-8b' is not in the catalog"),
        (["plan", "--model", "Qwen3-8"], "did you mean"),
        (["plan", "--gpus", "0"], "hardware.gpus_per_node: input should be greater than or equal to 1 (got 0)"),
        (["plan", "--seq", "-5"], "batch.seq_len: input should be greater than or equal to 1 (got -5)"),
        (["plan", "--set", "lora.rank=16"], "lora: LoRA settings were given but scope is 'full'"),
        (["plan", "--gpu", "a100-40"], "did you mean"),
        (["plan", "--strategy", "zero4"], "parallel.strategy: 'zero4' is not allowed; allowed: single, ddp, zero1, zero2, zero3, fsdp, fsdp_grad_op or hsdp"),
        (["plan", "--set", "precision.optimizer=adam"], "precision.optimizer: 'adam' is not allowed; allowed: adamw"),
        (["plan", "--method", "grpo", "--set", "rollout.response_len=50000"],
         "rollout.response_len: prompt_len + response_len = 50512 exceeds Qwen/Qwen3-8B's context of 40960 tokens"),
        (["plan", "--method", "grpo", "--gpus", "6", "--set", "rollout.tensor_parallel=3"],
         "rollout.tensor_parallel: 3 does not divide the 32 attention heads of Qwen/Qwen3-8B"),
        (["plan", "--method", "grpo", "--set", "rollout.tensor_parallel=3"],
         "rollout.tensor_parallel: 3 does not divide the 8 GPUs (rollout.placement colocate); allowed: a divisor of 8"),
        (["plan", "--method", "grpo", "--set", "rollout.gpu_memory_utilization=1.5"],
         "rollout.gpu_memory_utilization: input should be less than or equal to 1 (got 1.5)"),
        (["plan", "--method", "grpo", "--set", "rollout.gpu_memory_utilization=0"],
         "rollout.gpu_memory_utilization: input should be greater than 0 (got 0)"),
        (["plan", "--method", "grpo", "--set", "rollout.placement=split", "--set", "rollout.gpus=8"],
         "rollout.gpus: split placement gives 8 GPUs to rollout but a node has 8"),
        (["plan", "--method", "ppo", "--set", "roles.critic=none"], "roles.critic: ppo needs a critic"),
        (["plan", "--preset", "deepspeed-chat"], "preset: 'deepspeed-chat' is not known; allowed: trl, verl, openrlhf, "),
        (["plan", "--method", "grpo", "--preset", "unsloth"],  # trainfit.methods.unsloth UNSLOTH_MULTI_GPU_REFUSAL
         "preset: 'unsloth' plans one GPU"),  # the default card's 8 GPUs a node
        (["plan", "--method", "grpo", "--preset", "unsloth", "--set", "hardware.gpus_per_node=1"],
         "scope: 'full' with preset unsloth has no weight path to the engine"),  # spec.card._check_unsloth_one_gpu
        (["plan", "--method", "grpo", "--preset", "unsloth", "--set", "hardware.gpus_per_node=1", "--set",
          "hardware.gpu=l4", "--set", "scope=qlora", "--set", "precision.weights=nf4", "--set",
          "rollout.quantization=fp8"],  # trainfit.methods.unsloth UNSLOTH_FP8_QLORA_REFUSAL
         "rollout.quantization: fp8 with preset unsloth and scope qlora cannot run"),
        (["plan", "--set", "parallel.stratgy=fsdp"], "parallel.stratgy: unknown key; allowed keys here: strategy, offload, gradient_checkpointing"),
    ],
)
def test_bad_input_one_line_exit_2(argv, expected, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("trainfit: error: ")
    assert expected in err


def test_config_json_missing_field_names_it(tmp_path, capsys):
    cfg = {"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    rc, _, err = run(["plan", "--model", str(path)], capsys)
    assert rc == 2
    assert "missing required field 'intermediate_size'" in err


def test_unknown_gpu_suggests(capsys):
    rc, _, err = run(["plan", "--gpu", "rtx4080"], capsys)
    assert rc == 2 and "rtx4080" in err


def test_no_traceback_in_a_real_process_and_debug_shows_it():
    cmd = [sys.executable, "-m", "trainfit.cli.main", "plan", "--model", "nope/nope"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1
    p = subprocess.run(cmd + ["--debug"], capture_output=True, text=True)
    assert p.returncode != 0 and "Traceback" in p.stderr


def test_bad_card_file_writes_nothing(tmp_path, capsys):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-8B\nmethod: sftt\n")
    rc, out, err = run(["plan", str(card), "--json"], capsys)
    assert rc == 2 and json.loads(out) == {"error": err[len("trainfit: error: "):].rstrip("\n")}  # test_cli_json_errors
    assert "method: 'sftt' is not allowed; allowed: sft, rm, dpo, ppo or grpo" in err


def test_unknown_option_is_a_usage_error_not_a_traceback():
    p = subprocess.run([sys.executable, "-m", "trainfit.cli.main", "plan", "--bogus"], capture_output=True, text=True)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and "No such option: --bogus" in p.stderr


def test_error_with_a_newline_in_the_value_stays_one_line(tmp_path, capsys):
    """A value echoed into the message (here an unknown GPU name) cannot break the one-line rule."""
    rc, out, err = run(["plan", "--gpu", "a100\n--injected line\x1b[31m"], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("trainfit: error: ")
    assert "\x1b" not in err


def test_json_output_never_holds_nan_or_infinity(capsys):
    from trainfit.cli.common import finite_json, print_json

    print_json({"a": float("inf"), "b": [float("nan"), 1.5], "c": {"d": float("-inf")}, "e": 2})
    out, _ = capsys.readouterr()
    assert json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in JSON")) == {
        "a": None, "b": [None, 1.5], "c": {"d": None}, "e": 2}
    assert finite_json((1.0, float("nan"))) == [1.0, None]


@pytest.mark.parametrize("argv", [["plan", "--json"], ["plan", "--method", "grpo", "--json"]])
def test_plan_json_is_strict_and_consistent(argv, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 0, err
    d = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    assert d["headroom_bytes"] == d["gpu_capacity_bytes"] - d["peak_gpu_bytes"]["device"]
    assert d["fits"] == (d["peak_gpu_bytes"]["device"] <= d["gpu_capacity_bytes"]) or d["rollout"] is not None


@pytest.mark.parametrize(("value", "expected"), [
    ("infiniband", "hardware.interconnect: 'infiniband' is a network between nodes, and this field the link between a"
                   " node's GPUs, allowed: nvlink, pcie, pcie_no_p2p or null (the GPU catalog's link); state the network"
                   " as hardware.nic_gbps_per_gpu or nic_gbps_per_node"),
    ("nvswitch", "hardware.interconnect: 'nvswitch' is a fabric between a node's GPUs that this field states as"
                 " nvlink"),
    ("pci", "hardware.interconnect: 'pci' is not allowed; allowed: nvlink, pcie, pcie_no_p2p or null"),
])
def test_a_bad_interconnect_is_one_line_exit_2(value, expected, capsys):
    rc, out, err = run(["plan", "--set", f"hardware.interconnect={value}"], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"trainfit: error: {expected}")


def test_nvlink_on_a_card_without_it_is_one_line_exit_2(capsys):
    rc, out, err = run(["plan", "--gpu", "l40s", "--set", "hardware.interconnect=nvlink"], capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err == ("trainfit: error: hardware.interconnect: 'nvlink' on l40s, whose catalog entry has no NVLink rate;"
                   " allowed on l40s: pcie, pcie_no_p2p or null (the GPU catalog's link)\n")
