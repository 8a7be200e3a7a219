"""``POST /api/fit`` for a PPO / GRPO card says what a row's step is, as ``trainfit fit --json`` does
(cli/fit_cmd.py: ``run_step_unit``, ``optimizer_steps_per_run_step``), and the page's table heads the step column
"RL step s" as ``report.html.fit_html`` does; before, the served fragment said "step s" and the JSON had neither."""

from trainfit.serve.worker import call

GRPO = {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "lora",
        "rollout": {"response_len": 256, "prompt_len": 128, "num_generations": 4, "prompts_per_step": 4,
                    "mini_batches": 2}}


def test_served_rl_fit_says_rl_step():
    status, data = call("fit", {"card": GRPO, "gpus": ["h100-sxm"], "max_gpus": 1})
    assert status == 200, data
    assert data["run_step_unit"] == "rl_step"
    assert data["optimizer_steps_per_run_step"] == 2
    assert "<th>RL step s</th>" in data["html"] and "<th>step s</th>" not in data["html"]


def test_served_sft_fit_says_optimizer_step():
    status, data = call("fit", {"card": {"model": "Qwen/Qwen3-0.6B", "scope": "lora"}, "gpus": ["h100-sxm"],
                                "max_gpus": 1})
    assert status == 200, data
    assert data["run_step_unit"] == "optimizer_step" and data["optimizer_steps_per_run_step"] == 1
    assert "<th>step s</th>" in data["html"]
