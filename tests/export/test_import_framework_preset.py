"""A card imported from a verl, OpenRLHF or NeMo RL file carries that framework's preset: without it the run was
planned as TRL (weight sync, padding to the maxima, no single controller), and none of the import's notes said so.
Where the preset's default would override what the file states (verl's use_remove_padding, NeMo RL's
sequence_packing.enabled), the file's value is written and wins."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainfit.cli.main import main
from trainfit.export.importers import import_text
from trainfit.plan.rl_batches import passes_pack
from trainfit.cli.common import load_card

DATA = Path(__file__).parent / "data"
# verl-project/verl examples/grpo_trainer/run_qwen3-8b.sh @a31a8f251faacb38404fa0af7603c00f64a667bb, micro-batch 16
VERL = DATA / "verl_run_qwen3-8b_a31a8f25.sh"


def _import(tmp_path, src: Path, target: str, *sets: str):
    out = tmp_path / "card.yaml"
    args = ["import", str(src), "--from", target, "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 0
    return out, out.read_text()


def test_verl_script_imports_with_the_verl_preset(tmp_path, capsys):
    out, text = _import(tmp_path, VERL, "verl", "hardware.gpu=h100-sxm")
    data = yaml.safe_load(text)
    assert data["preset"] == "verl"
    assert data["rollout"]["packed_sequences"] is True  # use_remove_padding=True, l.17: written, not left to the preset
    assert "# note: preset: verl: the file is verl's launch" in text
    card = load_card(out, {}, [])
    same = load_card(out, {}, ["preset=verl"])
    from trainfit.plan import make_plan

    a, b = make_plan(card), make_plan(same)
    assert (a.peak.device, a.step_seconds) == (b.peak.device, b.step_seconds)
    capsys.readouterr()
    main(["plan", str(out)])
    printed = capsys.readouterr().out
    assert "no preset names the RL framework" not in printed
    assert "(packed: mean prompt + mean response)" in printed


def test_a_stated_remove_padding_false_beats_the_presets_packing(tmp_path):
    src = tmp_path / "run.sh"
    src.write_text(VERL.read_text().replace("use_remove_padding=True", "use_remove_padding=False"))
    out, _ = _import(tmp_path, src, "verl", "hardware.gpu=h100-sxm")
    card = load_card(out, {}, [])
    assert card.preset == "verl" and card.rollout.packed_sequences is False and not passes_pack(card)


NEMO_GRPO = """\
defaults: grpo_math_1B.yaml
policy:
  model_name: Qwen/Qwen3-0.6B
  train_micro_batch_size: 4
  train_global_batch_size: 64
  max_total_sequence_length: 1024
  sequence_packing: {enabled: %s}
  generation: {max_new_tokens: 512, vllm_cfg: {tensor_parallel_size: 1, gpu_memory_utilization: 0.6}}
grpo: {num_prompts_per_step: 8, num_generations_per_prompt: 8}
cluster: {gpus_per_node: 8, num_nodes: 1}
"""


@pytest.mark.parametrize("enabled", [True, False])
def test_nemo_rl_carries_its_preset_and_the_files_packing(enabled):
    imp = import_text(NEMO_GRPO % str(enabled).lower(), "nemo-rl")
    assert imp.card["preset"] == "nemo-rl"
    assert imp.card["rollout"]["packed_sequences"] is enabled


def test_openrlhf_carries_its_preset():
    text = ("python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path Qwen/Qwen3-0.6B --vllm.num_engines 2"
            " --vllm.tensor_parallel_size 1 --train.colocate_all --vllm.enable_sleep --actor.num_nodes 1"
            " --actor.num_gpus_per_node 8 --rollout.batch_size 64 --rollout.n_samples_per_prompt 4")
    assert import_text(text, "openrlhf").card["preset"] == "openrlhf"


@pytest.mark.parametrize("target, text", [
    ("deepspeed", '{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}'),
])
def test_launch_only_files_set_no_preset(target, text):
    """An accelerate or DeepSpeed file does not say which script it launches: no framework to name, and the import
    says so with the presets the user can add."""
    imp = import_text(text, target)
    assert "preset" not in imp.card
    assert any(n.startswith(f"preset: none set: a {target} file does not say which training script") and
               "--set preset=trl" in n for n in imp.notes), imp.notes


def test_verl_preset_fills_no_fsdp_version_on_the_megatron_backend():
    """FSDP1 is verl's FSDP actor's wrapper; a Megatron-backend card read back with the verl preset was listed as
    losing parallel.fsdp_version (fsdp2 -> fsdp1), a setting that run does not have."""
    from trainfit.methods.presets import apply_preset

    mega = {"model": "Qwen/Qwen3-8B", "method": "grpo", "parallel": {"tensor_parallel_impl": "megatron"}}
    assert "fsdp_version" not in apply_preset(mega, "verl")["parallel"]
    assert apply_preset({"model": "Qwen/Qwen3-8B", "method": "grpo"}, "verl")["parallel"]["fsdp_version"] == "fsdp1"


def test_export_of_a_presetless_card_says_the_file_names_its_framework(tmp_path, capfd):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\nmethod: grpo\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n")
    assert main(["export", str(card), "--to", "verl", "--out", str(tmp_path / "run.sh")]) == 0
    out, err = capfd.readouterr()
    err += out
    assert "preset: the card has None; the verl file reads back as 'verl'" in err
    assert "--set preset=null" in err
