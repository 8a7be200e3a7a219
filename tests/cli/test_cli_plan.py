"""`trainfit plan`: the whole human output against a golden file, and the JSON schema.

Regenerate the golden files after an intended change with TRAINFIT_UPDATE_GOLDEN=1.
"""

import json
import os
from pathlib import Path

import pytest

from trainfit.cli.main import main

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "plan_default": ["plan"],
    "plan_4090_qlora_27b": ["plan", "--model", "Qwen/Qwen3.5-27B", "--scope", "qlora", "--gpu", "rtx4090", "--gpus", "4",
                            "--strategy", "fsdp", "--seq", "4096"],
    "plan_bare_27b_lora": ["plan", "--set", "model={params: 27e9}", "--scope", "lora", "--gpu", "rtx4090", "--gpus", "8"],
    # GRPO plans rollout.prompt_len + response_len (methods/rl.py ``seq = ro.prompt_len + ro.response_len``;
    # plan/walk.py walk_rl's actor_card ``batch__seq_len=seq_len``): --seq is named in the warnings, not planned;
    # its "engine start-up" line is methods/rl.py rl_groups' note on ``trainer_bytes_at_engine_start`` (TRL colocate
    # builds the LLM after the model: the 1.91 GiB bf16 shard of 8 GPUs is on the GPU when vLLM starts)
    "plan_grpo_seq_unused": ["plan", "--method", "grpo", "--gpu", "a100-80gb", "--seq", "4096"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_full_text_output(name, capsys):
    assert main(CASES[name]) == 0
    out = capsys.readouterr().out
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("TRAINFIT_UPDATE_GOLDEN"):
        path.write_text(out)
    assert out == path.read_text()


def test_json_schema(capsys):
    assert main(["plan", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["model"]["params_total"] == 8_190_735_360
    assert obj["model"]["params_trainable"] == 8_190_735_360
    assert set(obj["peak_gpu_bytes"]) == {"allocated", "reserved", "device"}
    assert obj["peak_gpu_bytes"]["allocated"] <= obj["peak_gpu_bytes"]["reserved"] <= obj["peak_gpu_bytes"]["device"]
    assert obj["peak_phase"] in {p["name"] for p in obj["phases"]}
    assert [p["name"] for p in obj["phases"]] == ["load", "forward", "backward", "optimizer_step"]
    assert isinstance(obj["fits"], bool) and obj["fits"]
    # the CUDA total of the default a100-40gb: catalog/data/gpus/a100-40gb.json torch_total_memory_bytes (CUDA
    # deviceQuery's totalGlobalMem on an A100 40GB, quoted in that entry's notes), not nvidia-smi's 40960 MiB
    assert obj["gpu_capacity_bytes"] == 42_405_855_232
    assert obj["gpu_capacity_basis"] == "cuda_total"
    assert obj["host_ram_bytes"] > 0
    comps = set().union(*(p["components"] for p in obj["phases"]))
    assert {"weights", "gradients", "optimizer_states", "activations", "logits"} <= comps
    for p in obj["phases"]:
        inside = {k: v for k, v in p["components"].items() if k != "paged_optimizer_states"}
        assert sum(inside.values()) == pytest.approx(p["gpu_bytes"]["allocated"], abs=len(p["components"]))
    assert obj["assumptions"] and all(isinstance(a, str) for a in obj["assumptions"])


def test_unverified_model_says_so(capsys):
    assert main(["plan", "--model", "Qwen/Qwen3.8-27B", "--scope", "lora", "--gpu", "rtx4090", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["model"]["verified"] is False
    assert any("UNVERIFIED" in a for a in obj["assumptions"])


def test_bare_count_labels_assumed_shape(capsys):
    assert main(["plan", "--set", "model={params: 27e9}", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["model"]["params_total"] == 27_000_000_000
    assert obj["model"]["assumed_shape"] is True
    assert any(a.startswith("ASSUMED SHAPE") for a in obj["assumptions"])


def test_local_config_dir_with_text_config(tmp_path, capsys):
    from trainfit.catalog.models import hf_config_of

    (tmp_path / "config.json").write_text(json.dumps(hf_config_of("Qwen/Qwen3.5-27B")))
    assert main(["plan", "--model", str(tmp_path), "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["model"]["params_total"] == 26_895_998_464


def test_models_and_gpus_lists(capsys):
    assert main(["models", "--json"]) == 0
    ids = [m["id"] for m in json.loads(capsys.readouterr().out)]
    assert "Qwen/Qwen3-8B" in ids and len(ids) >= 26
    assert main(["gpus", "--json"]) == 0
    gids = [g["id"] for g in json.loads(capsys.readouterr().out)]
    assert {"rtx4090", "a100-40gb", "h100-sxm", "b200"} <= set(gids)


def test_json_time_per_phase(capsys):
    """phases[].seconds / .bound for the memory phases that are also timed, and the whole timed walk."""
    assert main(["plan", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    timed = {t["name"]: t for t in obj["time"]["phases"]}
    assert {"forward", "recompute", "backward", "optimizer_step"} <= set(timed)
    assert abs(sum(t["seconds"] for t in timed.values()) - obj["step_seconds"]) < 1e-9
    assert all(t["bound"] in {"compute", "memory", "launch", "communication", "offload"} for t in timed.values())
    by_name = {p["name"]: p for p in obj["phases"]}
    assert by_name["backward"]["seconds"] == timed["backward"]["seconds"]
    assert by_name["load"]["seconds"] is None


def test_json_rl_phases_are_timed(capsys):
    assert main(["plan", "--method", "grpo", "--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm", "--gpus", "8",
                 "--set", "rollout.num_iterations=2", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    names = [t["name"] for t in obj["time"]["phases"]]
    assert names[0] == "generation" and "old_logprob" in names and "actor_update" in names and "weight_sync" in names


SEQ_WARNING = ("batch.seq_len: 4096 is not read for method grpo; a sequence is rollout.prompt_len + rollout.response_len"
               " = 512 + 1024 = 1536 tokens (rollout.max_tokens_per_micro_batch packs the training rows when set);"
               " set those instead")


def test_rl_names_an_unread_seq_len_in_its_json_warnings(capsys):
    """The README: values a plan accepts but does not use are named in its warnings. A GRPO / PPO step's sequences
    are the rollout's prompt + response (plan.walk.walk_rl), so batch.seq_len is not read."""
    assert main(["plan", "--method", "grpo", "--gpu", "a100-80gb", "--seq", "4096", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["card"]["batch"]["seq_len"] == 4096
    assert SEQ_WARNING in obj["warnings"]


@pytest.mark.parametrize("argv", [
    ["--method", "grpo", "--seq", "1536"],  # the rollout's own length: nothing contradicts it
    ["--method", "sft", "--seq", "4096"],  # read
])
def test_no_seq_len_warning_where_it_is_read_or_agrees(argv, capsys):
    assert main(["plan", "--gpu", "a100-80gb", *argv, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert not [w for w in obj["warnings"] if w.startswith("batch.seq_len")]
