"""`fit --steps` counts the steps users count: optimizer steps for SFT, RM and DPO, RL steps for PPO and GRPO
(one rollout batch and its rollout.mini_batches x num_iterations optimizer steps), as verl counts
``trainer.total_training_steps`` (volcengine/verl verl/trainer/ppo/ray_trainer.py
@b178a3cd56f58b2d502255daba591e92833930a7 l.378-383: ``len(self.train_dataloader) * total_epochs``, one
``global_steps += 1`` per batch after its generation and update, l.1346 / l.1700). TRL's GRPO ``max_steps`` counts
optimizer steps instead (huggingface/trl trl/trainer/grpo_trainer.py @f2cd57710ae345ea6428ae95363267fcf38a3dc8
l.1571-1579: one generation every ``steps_per_generation * num_iterations`` micro-steps, ``steps_per_generation``
defaulting to ``gradient_accumulation_steps``, grpo_config.py l.1077-1079), so the help says how to convert. The
run's time is RL steps x the RL step's time; the output names both counts."""

import json
import re

from trainfit.cli.main import main

GRPO = """\
model: Qwen/Qwen3-8B
method: grpo
preset: verl
scope: full
hardware: {gpu: h100-sxm, gpus_per_node: 8, nodes: 1}
rollout: {mini_batches: 4}
"""
PINS = ["--set", "hardware.gpus_per_node=8", "--set", "loss.chunked=true", "--set", "batch.micro_batch_size=1",
        "--set", "rollout.placement=colocate", "--set", "rollout.tensor_parallel=2",
        "--set", "rollout.gpu_memory_utilization=0.7", "--set", "rollout.sleep_level=1", "--set", "rollout.cuda_graphs=true",
        "--set", "rollout.weight_sync=bucketed", "--set", "parallel.offload=none", "--set", "precision.optimizer=adamw",
        "--set", "rollout.max_num_seqs=256", "--set", "rollout.max_num_batched_tokens=8192",
        "--set", "rollout.logprob_micro_batch_size=2"]


def _fit(tmp_path, capsys, *extra):
    card = tmp_path / "grpo.yaml"
    card.write_text(GRPO)
    rc = main(["fit", str(card), "--gpu", "h100-sxm", "--steps", "200", "--price", "h100-sxm=2USD", *PINS, *extra])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def test_grpo_steps_are_rl_steps_in_json(tmp_path, capsys):
    obj = json.loads(_fit(tmp_path, capsys, "--json"))
    assert obj["run_steps"] == 200 and obj["run_step_unit"] == "rl_step"
    assert obj["optimizer_steps_per_run_step"] == 4 and obj["run_optimizer_steps"] == 800
    row = obj["rows"][0]
    assert row["run_steps"] == 200 and row["run_optimizer_steps"] == 800
    assert row["run_seconds"] == 200 * row["step_seconds"]  # the RL step's time, once per RL step


def test_grpo_steps_unit_in_the_text_header(tmp_path, capsys):
    out = " ".join(_fit(tmp_path, capsys).split())
    assert "run of 200 RL steps (800 optimizer steps, 4 per RL step: rollout.mini_batches x num_iterations)" in out


def test_sft_steps_are_optimizer_steps(capsys):
    argv = ["fit", "--gpu", "h100-sxm", "--set", "model=Qwen/Qwen3-0.6B", "--set", "hardware.gpus_per_node=1",
            "--set", "scope=lora", "--set", "parallel.offload=none", "--set", "loss.chunked=true",
            "--set", "parallel.gradient_checkpointing=true", "--set", "precision.optimizer=adamw", "--steps", "1000"]
    assert main([*argv, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["run_step_unit"] == "optimizer_step" and obj["optimizer_steps_per_run_step"] == 1
    assert obj["run_optimizer_steps"] == 1000 and obj["rows"][0]["run_optimizer_steps"] == 1000
    assert main(argv) == 0
    assert "ranked by run time of 1,000 optimizer steps (no row has a price, so cost cannot rank);" in " ".join(
        capsys.readouterr().out.split())


def test_help_names_the_unit(capsys):
    try:
        main(["fit", "--help"])
    except SystemExit:
        pass
    text = re.sub(r"[\s│]+", " ", capsys.readouterr().out)
    assert "RL steps for PPO/GRPO" in text and "TRL's max_steps counts optimizer steps" in text


def test_html_names_the_rl_step(tmp_path, capsys):
    html = tmp_path / "fit.html"
    _fit(tmp_path, capsys, "--html", str(html))
    assert "<th>RL step s</th>" in html.read_text()
