"""Findings of a fourth review of the December 2026 hardening pass, as explicit cases (each fails without its fix).
As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line, exit code 2,
no traceback and no output file."""

from __future__ import annotations

import yaml
import pytest

from fuzzlib import check_run, run_cli

from trainfit.export.importers import ShellExpanded, _shell_argv, read_accelerate, read_openrlhf, read_verl

VERL = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=gae actor_rollout_ref.model.path={actor}"
        " critic.model.path={critic} trainer.n_gpus_per_node=8\n")
ORLHF = ("python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path {actor} --critic.model_name_or_path {critic}"
         " --actor.num_gpus_per_node 8 --ds.zero_stage 2 {tail}\n")


def _import(tmp_path, text: str, target: str, *extra: str):
    path = tmp_path / "run.sh"
    path.write_text(text)
    out = tmp_path / "card.yaml"
    run = run_cli(["import", str(path), "--from", target, "--out", str(out), *extra])
    return run, out


# ------------------------------------------------------------------------------------------------
# 1. A model path the shell fills in ($MODEL_PATH) was refused while reading, before --set could give it.
@pytest.mark.parametrize("target, text", [("verl", VERL.format(actor="$MODEL_PATH", critic="$MODEL_PATH")),
                                          ("openrlhf", ORLHF.format(actor="$MODEL_PATH", critic="$MODEL_PATH", tail=""))])
def test_set_supplies_a_model_path_the_shell_expands(tmp_path, target, text):
    run, out = _import(tmp_path, text, target)
    check_run(run, codes=(2,), outputs=(out,))
    assert "'$MODEL_PATH' is expanded by the shell" in run.stderr and "pass --set model=ID" in run.stderr, run.stderr
    run, out = _import(tmp_path, text, target, "--set", "model=Qwen/Qwen2.5-7B-Instruct")
    check_run(run, codes=(0,), outputs=(out,))
    card = yaml.safe_load(out.read_text())
    assert card["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert card["roles"]["critic"] == "same_as_actor", "the same expanded word as the actor's path"


def test_base_supplies_a_model_path_the_shell_expands(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("model: Qwen/Qwen2.5-7B-Instruct\n")
    run, out = _import(tmp_path, VERL.format(actor="$MODEL_PATH", critic="$MODEL_PATH"), "verl", "--base", str(base))
    check_run(run, codes=(0,), outputs=(out,))
    assert yaml.safe_load(out.read_text())["model"] == "Qwen/Qwen2.5-7B-Instruct"


def test_an_expanded_critic_of_another_word_is_required():
    imported = read_verl(VERL.format(actor="Qwen/Qwen2.5-7B", critic="$CRITIC"))
    assert "critic" not in imported.card.get("roles", {}) and "roles.critic" in imported.required
    imported = read_openrlhf(ORLHF.format(actor="Qwen/Qwen2.5-7B", critic="$CRITIC", tail=""))
    assert "critic" not in imported.card.get("roles", {}) and "roles.critic" in imported.required


# ------------------------------------------------------------------------------------------------
# 2. OpenRLHF: a trailing $EXTRA_ARGS was blamed on the flag before it (--ds.zero_stage 2 $EXTRA_ARGS refused).
def test_a_trailing_expansion_is_a_note_not_the_previous_flags_value():
    imported = read_openrlhf(ORLHF.format(actor="Qwen/Qwen2.5-7B", critic="Qwen/Qwen2.5-7B", tail="$EXTRA_ARGS"))
    assert imported.card["parallel"]["strategy"] == "zero2"
    assert any("'$EXTRA_ARGS': expanded by the shell" in n for n in imported.notes), imported.notes


def test_an_expanded_first_value_is_still_refused(tmp_path):
    run, out = _import(tmp_path, ORLHF.format(actor="Qwen/Qwen2.5-7B", critic="Qwen/Qwen2.5-7B", tail="")
                       .replace("--ds.zero_stage 2", "--ds.zero_stage $STAGE"), "openrlhf")
    check_run(run, codes=(2,), outputs=(out,))
    assert "--ds.zero_stage: '$STAGE' is expanded by the shell" in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# 3. accelerate's old keys fp16 and dynamo_backend were accepted and ignored (fp32, no compile).
@pytest.mark.parametrize("extra, compute, compile_", [
    ("fp16: true\ndynamo_backend: INDUCTOR\n", "fp16", True),
    ("fp16: false\ndynamo_backend: 'NO'\n", "fp32", None),
    ("fp16: true\nmixed_precision: bf16\n", "bf16", None),  # process_config keeps a given mixed_precision
])
def test_accelerate_old_fp16_and_dynamo_backend_keys_are_converted(extra, compute, compile_):
    card = read_accelerate("distributed_type: MULTI_GPU\nnum_processes: 8\n" + extra).card
    assert card["precision"]["compute"] == compute
    assert card["parallel"].get("compile") is compile_


# ------------------------------------------------------------------------------------------------
# 4. A $ before a closing double quote is literal in bash ("cost$", "$").
def test_a_dollar_before_a_closing_double_quote_is_literal():
    argv = _shell_argv('a="cost$" b="$" c="$X" d=$"x"\n', "verl")
    assert argv == ["a=cost$", "b=$", "c=$X", "d=$x"]
    assert [isinstance(w, ShellExpanded) for w in argv] == [False, False, True, True]


# ------------------------------------------------------------------------------------------------
# 15. accelerate keys this reader does not know blocked the import (a newer accelerate's field): a note now.
def test_an_unknown_accelerate_key_is_a_note_not_a_refusal(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("distributed_type: FSDP\nnum_processes: 8\nfsdp_config: {fsdp_version: 2}\nnew_field_2027: 1\n")
    out = tmp_path / "card.yaml"
    run = run_cli(["import", str(path), "--from", "accelerate", "--out", str(out)])
    check_run(run, codes=(0,), outputs=(out,))
    assert "new_field_2027: not an accelerate config key this reader knows; not read" in out.read_text()


# ------------------------------------------------------------------------------------------------
# 8. The 'auto' hint named the Hugging Face Trainer for every importer; a YAML null was echoed as 'None'.
def test_the_auto_hint_is_for_trainer_files_only():
    from trainfit.errors import InputError

    with pytest.raises(InputError) as exc:
        read_accelerate("distributed_type: MULTI_GPU\nnum_processes: auto\n")
    assert "Hugging Face Trainer" not in str(exc.value) and "got 'auto'" in str(exc.value)
    with pytest.raises(InputError) as exc:
        read_accelerate("distributed_type: MULTI_GPU\nnum_processes: null\n")
    assert "got null" in str(exc.value) and "'None'" not in str(exc.value)


# ------------------------------------------------------------------------------------------------
# 13. A key given explicitly next to a merge key (<<) wins over the merged one, as YAML 1.1's merge key defines.
def test_an_explicit_key_overrides_a_merged_one(tmp_path):
    path = tmp_path / "card.yaml"
    path.write_text("model: Qwen/Qwen3-8B\nhardware: {<<: {gpu: a100-80gb, gpus_per_node: 8}, gpus_per_node: 4}\n")
    check_run(run_cli(["plan", str(path)]), codes=(0,))
    from trainfit.spec.card import read_card_file

    assert read_card_file(path)["hardware"] == {"gpu": "a100-80gb", "gpus_per_node": 4}
