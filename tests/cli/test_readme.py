"""The README stays true: its setup commands, .ci/run, and the default plan output it shows."""

from pathlib import Path

from trainfit.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _blocks():
    parts = README.split("```")
    return [parts[i].split("\n", 1)[1] for i in range(1, len(parts), 2)]


def test_two_setup_commands_and_ci_runs_the_second():
    setup, tests = _blocks()[0].strip(), _blocks()[1].strip()
    assert setup.endswith("trainfit plan") and "pip install" in setup
    assert tests.endswith("pytest -q") and "'.[test]'" in tests
    assert tests in (ROOT / ".ci" / "run").read_text()


def test_readme_shows_the_current_default_plan(capsys):
    marker = "Output of `trainfit plan` on the default card:\n\n```\n"
    shown = README.split(marker, 1)[1].split("```", 1)[0]
    assert main(["plan"]) == 0
    assert capsys.readouterr().out == shown, "regenerate the README block: tools/update_readme.py"


def _use_commands():
    """(command, comment) of every command in the README's Use block; continuations joined, and a
    comment-only line belongs to the command above it."""
    block = next(b for b in _blocks() if b.lstrip().startswith("trainfit plan"))
    out, cur, note = [], "", ""
    for line in block.splitlines():
        code, _, comment = line.partition("  #") if not line.lstrip().startswith("#") else ("", "", line.lstrip("# "))
        if not line.strip():
            continue
        if not code.strip():
            if line[:1].isspace() and out and not cur:  # an indented comment line continues the command's comment
                out[-1] = (out[-1][0], out[-1][1] + " " + comment.strip())
            continue
        cur += " " + code.strip().rstrip("\\").strip()
        note += " " + comment.strip()
        if not code.rstrip().endswith("\\"):
            if cur.strip():
                out.append((cur.strip(), note.strip()))
            cur, note = "", ""
    return out


def test_every_plan_example_says_whether_it_fits_and_is_right(capsys):
    import json
    import shlex

    plans = [(c, n) for c, n in _use_commands() if c.startswith("trainfit plan") and ".yaml" not in c and ".json" not in c]
    assert len(plans) >= 8
    for cmd, note in plans:
        assert "fits" in note or "does not fit" in note, f"say whether it fits: {cmd}"
        assert main(shlex.split(cmd)[1:] + ["--json"]) == 0, cmd
        fits = json.loads(capsys.readouterr().out)["fits"]
        assert fits == ("does not fit" not in note), f"the README says '{note}' but the plan {'fits' if fits else 'does not fit'}: {cmd}"


def test_the_readme_card_shows_the_defaults_it_does_not_mean_to_change():
    import yaml

    from trainfit.spec.card import RunCard, load_card_dict

    text = README.split("so a card gives only what differs:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    shown = load_card_dict(yaml.safe_load(text))
    default = RunCard()
    assert shown.weights_dtype == default.weights_dtype
    for section in ("precision", "parallel", "batch", "loss", "lora", "rollout"):
        for key in yaml.safe_load(text).get(section, {}):
            if key in ("weights", "grads"):  # None by default: resolved from the scope / trained dtype
                continue
            assert getattr(getattr(shown, section), key) == getattr(getattr(default, section), key), f"{section}.{key}"
    assert shown.attention == default.attention


def test_card_reference_names_the_software_pins_that_change_the_plan():
    """Each ``software`` pin the planner reads (plan.resolve.transformers_v4_modules / transformers_v4_experts,
    plan.rl_offload.VERL_FSDP2_MODEL_CPU_SINCE, VERL_MEGATRON_PINNED_REUSE_SINCE, VERL_MEGATRON_PARAM_OFFLOAD_SINCE) has
    its line in the allowed-values paragraph."""
    from trainfit.plan.resolve import TRANSFORMERS_EXPERT_HIT_TEST_SINCE
    from trainfit.plan.rl_offload import (VERL_FSDP2_MODEL_CPU_SINCE, VERL_MEGATRON_PARAM_OFFLOAD_SINCE,
                                          VERL_MEGATRON_PINNED_REUSE_SINCE)

    text = " ".join(README.split("Allowed values:", 1)[1].split("## How the numbers are made", 1)[0].split())
    assert "`software.transformers` < 5 (or `moe_experts` loop / loop_all) makes LoRA on MoE wrap each expert" in text
    assert "loop_all before {}.{}".format(*TRANSFORMERS_EXPERT_HIT_TEST_SINCE) in text
    assert "`software.verl` < {}.{} offloads FSDP2 weights pinned".format(*VERL_FSDP2_MODEL_CPU_SINCE) in text
    assert "`software.verl` < {}.{} offloads Megatron weights".format(*VERL_MEGATRON_PINNED_REUSE_SINCE) in text
    assert ("before {}.{} a Megatron card's `rollout.trainer_offload` is refused".format(
        *VERL_MEGATRON_PARAM_OFFLOAD_SINCE) in text)


def test_card_reference_names_loss_triton_trl_logits_and_the_unsloth_bitsandbytes_pin():
    """The card fields and gates the planner reads have their prose: ``loss.triton`` (methods.roles.
    TRL_FUSED_HEAD_COMPACT), TRL's completion-only logits (methods.roles.TRL_LOGITS_TO_KEEP_SINCE, every no-preset or
    trl GRPO card), the bitsandbytes pin before plan.rl_generation.BNB_GEMM_4BIT_FUSED_SINCE that changes the Unsloth
    engine's decode, and the fp8-over-qlora refusal (methods.unsloth.UNSLOTH_FP8_QLORA_REFUSAL)."""
    from trainfit.methods.roles import TRL_FUSED_HEAD_COMPACT, TRL_LOGITS_TO_KEEP_SINCE
    from trainfit.plan.rl_generation import BNB_GEMM_4BIT_FUSED_SINCE

    text = " ".join(README.split("Allowed values:", 1)[1].split("## How the numbers are made", 1)[0].split())
    assert f"`{TRL_FUSED_HEAD_COMPACT}` true or false" in text
    assert ("a GRPO card with no preset or `preset: trl` plans its policy and reference logits over the completion's"
            in text and "(TRL's `logits_to_keep`, from {}.{})".format(*TRL_LOGITS_TO_KEEP_SINCE) in text)
    unsloth = " ".join(README.split("`preset: unsloth` plans", 1)[1].split("\n\n", 1)[0].split())
    assert "a `software.bitsandbytes` pin before {}.{} changes the engine's decode".format(
        *BNB_GEMM_4BIT_FUSED_SINCE) in unsloth
    assert "`rollout.quantization: fp8` over a qlora base" in unsloth
