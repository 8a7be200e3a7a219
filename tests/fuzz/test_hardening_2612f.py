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


# ------------------------------------------------------------------------------------------------
# 6. Path arguments: check/record --audit echoed an over-long path twice (714 characters, "an `trainfit audit`"),
# diagnose --log and calibrate FILE echoed it whole, audit added a second error for an unusable checkpoint path,
# accept recorded a missing card and ended a missing --model in a traceback.
LONG = "a" * 300


@pytest.mark.parametrize("argv, what", [
    (["check", "--audit", "{long}"], "--audit:"),
    (["record", "--audit", "{long}", "--out", "{tmp}/r.yaml"], "--audit:"),
    (["diagnose", "--log", "{long}"], "--log:"),
    (["calibrate", "{long}", "--dry-run"], "calibrate:"),
    (["accept", "{long}"], "card:"),
    (["accept", "--model", "{long}"], "--model:"),
])
def test_an_over_long_path_is_refused_shortly(tmp_path, argv, what):
    long = str(tmp_path / LONG)
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-8B\n")
    argv = [a.replace("{long}", long).replace("{tmp}", str(tmp_path)) for a in argv]
    if argv[0] in ("check", "record"):
        argv.insert(1, str(card))
    run = run_cli(argv)
    check_run(run, codes=(2,))
    assert what in run.stderr and "file name too long" in run.stderr, run.stderr
    assert len(run.stderr) < 300 and run.stderr.count("characters)") == 1, run.stderr


@pytest.mark.parametrize("argv, fragment", [(["accept", "{tmp}/nope.yaml"], "card: no such file"),
                                            (["accept", "--model", "{tmp}/nope"], "--model: no such checkpoint folder")])
def test_accept_refuses_a_missing_path(tmp_path, argv, fragment):
    run = run_cli([a.replace("{tmp}", str(tmp_path)) for a in argv])
    check_run(run, codes=(2,))
    assert fragment in run.stderr, run.stderr


def test_check_audit_that_is_not_a_report_names_it_once(tmp_path):
    card, audit = tmp_path / "card.yaml", tmp_path / "audit.json"
    card.write_text("model: Qwen/Qwen3-8B\n")
    audit.write_text("[1, 2]")
    run = run_cli(["check", str(card), "--audit", str(audit)])
    check_run(run, codes=(2,))
    assert "is not a `trainfit audit --json` report" in run.stderr, run.stderr


def test_audit_says_an_unusable_checkpoint_path_once(tmp_path):
    from trainfit.preflight.audit import run_audit

    report = run_audit(checkpoint_path=str(tmp_path / LONG), timeout_s=5)
    disk = [e for e in report.errors if e.startswith("disk: checkpoint path")]
    assert len(disk) == 1 and "file name too long" in disk[0] and len(disk[0]) < 300, disk


def test_a_model_folder_that_cannot_be_searched_is_said_so(tmp_path, monkeypatch):
    import trainfit.fsio
    from trainfit.catalog.models import resolve_model
    from trainfit.errors import TrainfitError

    folder = tmp_path / "my-model"
    folder.mkdir()
    real = trainfit.fsio.lookup_error
    monkeypatch.setattr(trainfit.fsio, "lookup_error",  # as for a user without search permission (tests run as root)
                        lambda p: "permission denied" if str(p).startswith(str(folder)) else real(p))
    with pytest.raises(TrainfitError, match=r"model: cannot read '.*my-model.*' \(permission denied\)"):
        resolve_model(str(folder))


# ------------------------------------------------------------------------------------------------
# 7. $TRAINFIT_CALIBRATION naming a folder or a path through a file planned silently while --calibration refuses
# both. A file not there yet is still no calibration: `trainfit calibrate` writes it there, and the help says "when
# it exists".
@pytest.mark.parametrize("where, fragment", [("folder", "is a directory"), ("file/cal.json", "passes through the file")])
def test_the_calibration_variable_is_checked_as_the_option_is(tmp_path, monkeypatch, where, fragment):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("TRAINFIT_CALIBRATION", str(tmp_path / where))
    run = run_cli(["plan"])
    check_run(run, codes=(2,))
    assert run.stderr.startswith("trainfit: error: $TRAINFIT_CALIBRATION:") and fragment in run.stderr, run.stderr


def test_a_calibration_variable_naming_a_file_not_written_yet_plans(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINFIT_CALIBRATION", str(tmp_path / "later.json"))
    check_run(run_cli(["plan"]), codes=(0,))


# ------------------------------------------------------------------------------------------------
# 9. A JSON key given twice was called "not valid JSON"; calibrate read records without the duplicate-key check.
def test_a_duplicate_json_key_is_not_called_invalid(tmp_path):
    path = tmp_path / "card.json"
    path.write_text('{"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100", "gpu": "a100-80gb"}}')
    run = run_cli(["plan", str(path)])
    check_run(run, codes=(2,))
    assert "key 'gpu' is given twice in one object" in run.stderr and "not valid JSON" not in run.stderr, run.stderr


@pytest.mark.parametrize("name, text", [("rec.json", '{"gpu": "h100", "gpu": "a100"}'),
                                        ("rec.yaml", "gpu: h100\ngpu: a100\n")])
def test_calibrate_refuses_a_duplicate_key(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    run = run_cli(["calibrate", str(path), "--dry-run"])
    check_run(run, codes=(2,))
    assert "key 'gpu' is given twice" in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# 10. /api/fit named the card's gpu field (with a gpu_memory_gib hint) for an unknown price key, and 'price' for bad
# price text: the prices[...] key is named.
@pytest.mark.parametrize("prices, fragment", [({"nope": "1USD"}, "prices['nope']: not a GPU catalog id"),
                                              ({"rtx4090": "abc"}, "prices['rtx4090']: price 'abc'")])
def test_serve_fit_names_the_price_key(prices, fragment):
    from trainfit.serve.worker import call

    status, payload = call("fit", {"card": {}, "gpus": ["rtx4090"], "prices": prices})
    assert status == 400 and payload["error"].startswith(fragment), payload
    assert "gpu_memory_gib" not in payload["error"]


def test_trace_says_a_model_folder_that_cannot_be_searched(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import trainfit.fsio
    from trainfit.cli.trace_cmd import hf_config_for
    from trainfit.errors import TrainfitError

    folder = tmp_path / "my-model"
    folder.mkdir()
    real = trainfit.fsio.lookup_error
    monkeypatch.setattr(trainfit.fsio, "lookup_error",
                        lambda p: "permission denied" if str(p).startswith(str(folder / "config")) else real(p))
    with pytest.raises(TrainfitError, match=r"model: cannot read '.*my-model/config.json' \(permission denied\)"):
        hf_config_for(SimpleNamespace(model=str(folder)))
