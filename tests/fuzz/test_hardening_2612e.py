"""Findings of a third review of the December 2026 hardening pass, as explicit cases (each fails without its fix).
As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line, exit code 2,
no traceback and no output file.

A path the OS cannot look up at all (a name over the file system's 255 bytes: ENAMETOOLONG) made ``Path.exists``,
``is_dir`` and ``is_file`` raise instead of answering False, so every path argument, a model name, the calibration
variable and the checkpoint path of ``check`` ended in a traceback (exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzlib import check_run, run_cli

LONG_NAME = "a" * 300
"""One path component longer than any Linux file system takes (NAME_MAX is 255 bytes)."""


def _long(tmp_path: Path) -> str:
    return str(tmp_path / LONG_NAME)


@pytest.mark.parametrize("argv, what", [
    (["plan", "{long}"], "card:"),
    (["plan", "--json", "--html", "{long}"], "--html:"),
    (["plan", "--calibration", "{long}"], "--calibration:"),
    (["export", "--out", "{long}"], "--out:"),
    (["import", "{long}", "--from", "verl"], "FILE:"),
    (["fit", "--price-table", "{long}"], "--price-table:"),
    (["compare", "{long}"], "card:"),
])
def test_a_path_the_os_cannot_look_up_is_refused_in_one_line(tmp_path, argv, what):
    long = _long(tmp_path)
    run = run_cli([a.replace("{long}", long) for a in argv])
    check_run(run, codes=(2,))
    assert run.stderr.startswith(f"trainfit: error: {what}") and "file name too long" in run.stderr, run.stderr
    assert len(run.stderr) < 400, "the path is echoed shortened"


@pytest.mark.parametrize("argv", [["plan", "--set", "model={long}"], ["size", "{long}"]])
def test_a_model_name_the_os_cannot_look_up_is_an_unknown_model(monkeypatch, argv):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = run_cli([a.replace("{long}", "a" * 5000) for a in argv])
    check_run(run, codes=(2,))
    assert run.stderr.startswith("trainfit: error: model:"), run.stderr[:300]


def test_the_calibration_variable_naming_such_a_path_is_refused_not_passed_over(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINFIT_CALIBRATION", _long(tmp_path))
    run = run_cli(["plan"])
    check_run(run, codes=(2,))
    assert run.stderr.startswith("trainfit: error: $TRAINFIT_CALIBRATION:") and "file name too long" in run.stderr


@pytest.mark.slow  # check audits the machine (about 5 s); run_audit below covers the same fix fast
def test_check_reports_a_checkpoint_path_no_run_can_write(tmp_path):
    card = tmp_path / "card.yaml"
    card.write_text(f"checkpoint: {{path: {_long(tmp_path)}}}\n")
    run = run_cli(["check", str(card), "--json", "--timeout", "1"])
    check_run(run, codes=(0, 1), json_out=True)
    assert "cannot be used (file name too long)" in run.stdout


def test_audit_lists_the_unusable_checkpoint_path_as_an_error(tmp_path):
    from trainfit.preflight.audit import run_audit

    audit = run_audit(checkpoint_path=_long(tmp_path), timeout_s=1.0)
    assert not audit.checkpoint_path_exists and not audit.checkpoint_writable
    assert any("file name too long" in e for e in audit.errors), audit.errors


def test_python_api_raises_its_own_error_for_such_paths(monkeypatch, tmp_path):
    import trainfit
    from trainfit.errors import TrainfitError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TrainfitError, match="file name too long"):
        trainfit.plan(_long(tmp_path))
    with pytest.raises(TrainfitError, match="model"):
        trainfit.plan(overrides={"model": "a" * 5000})
    with pytest.raises(TrainfitError, match="model"):
        trainfit.size("a" * 5000)


# ------------------------------------------------------------------------------------------------
# The Python API: a NumPy boolean is no ``bool`` (pydantic read it as 1 for a number field: one GPU planned for
# ``gpus_per_node=np.bool_(True)``), and ``size`` passed its arguments unchecked (a numeric string or a Fraction
# raised TypeError, ``gpu=None`` AttributeError; ``batch=True`` and ``batch=np.float32(8.5)`` were planned).
@pytest.mark.parametrize("key", ["hardware.gpus_per_node", "batch.seq_len", "rollout.gpu_memory_utilization"])
def test_a_numpy_boolean_for_a_number_field_is_refused_as_a_boolean(key):
    np = pytest.importorskip("numpy")
    import trainfit
    from trainfit.errors import TrainfitError

    with pytest.raises(TrainfitError, match=rf"^{key}: got a boolean \(true\), not a number; allowed: a number$"):
        trainfit.plan(overrides={"method": "grpo", key: np.bool_(True)})


def test_numpy_booleans_count_as_booleans_and_numpy_integers_do_not():
    np = pytest.importorskip("numpy")
    from trainfit.spec.card import _is_boolean

    assert _is_boolean(np.bool_(False)) and _is_boolean(True) and not _is_boolean(np.int64(1)) and not _is_boolean(1)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"tokens": "8"}, "tokens: a whole number from 1 to 10,000,000, got '8'"),
    ({"tokens": 4096.5}, "tokens: a whole number from 1 to 10,000,000"),
    ({"batch": True}, "batch: a whole number from 1 to 1,000,000, got True"),
    ({"gpu": None}, "gpu: a string, got NoneType"),
    ({"kv_dtype": 1}, "kv_dtype: a string, got int"),
    ({"tokens": 0}, "tokens: must be 1 to 10,000,000, got 0"),
    ({"kv_dtype": "int4"}, "kv_dtype: 'int4' is not allowed; allowed: bf16, fp16, fp8, fp32"),
])
def test_size_api_checks_its_arguments_and_names_them(kwargs, fragment):
    import trainfit
    from trainfit.errors import TrainfitError

    with pytest.raises(TrainfitError) as info:
        trainfit.size("Qwen/Qwen3-8B", **kwargs)
    assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_size_api_takes_numpy_integers():
    np = pytest.importorskip("numpy")
    import trainfit

    assert trainfit.size("Qwen/Qwen3-8B", tokens=np.int64(1024), batch=np.int32(2)) is not None
    with pytest.raises(Exception, match="batch: a whole number"):
        trainfit.size("Qwen/Qwen3-8B", batch=np.float32(8.5))


# ------------------------------------------------------------------------------------------------
# ``trainfit import`` of a launch script: a value the shell expands when the script runs ($(...), backticks, $VAR)
# was read as its literal text (model '$(touch' and the rest of the substitution dropped; model '`touch'), a card that
# is not the run. It is refused in one line where it is read; quoted literals and expansions in keys the importer
# does not read (data files, experiment names, a trailing $@) still import.
VERL_SCRIPT = """set -x
export VLLM_ATTENTION_BACKEND=XFORMERS
# a comment with $(date) in it
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$HOME/data/gsm8k/train.parquet \\
    data.train_batch_size=1024 \\
    actor_rollout_ref.model.path={model} \\
    trainer.experiment_name="qwen_$(date +%m%d)" \\
    trainer.n_gpus_per_node=8 $@
"""
ORLHF_SCRIPT = "python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path {model} --actor.num_gpus_per_node 8\n"


@pytest.mark.parametrize("target, script", [("verl", VERL_SCRIPT), ("openrlhf", ORLHF_SCRIPT)])
@pytest.mark.parametrize("model", ["$(cat /tmp/model_name)", "`cat /tmp/model_name`", "$MODEL", "${MODEL}",
                                   '"$HOME/models/qwen"', "Qwen/$MODEL_NAME"])
def test_import_refuses_a_read_value_the_shell_expands(tmp_path, target, script, model):
    path = tmp_path / "run.sh"
    path.write_text(script.format(model=model))
    out = tmp_path / "card.yaml"
    run = run_cli(["import", str(path), "--from", target, "--out", str(out)])
    check_run(run, codes=(2,), outputs=(out,))
    assert "is expanded by the shell when the script runs" in run.stderr and "model" in run.stderr, run.stderr
    assert "pass --set model=ID or write the value" in run.stderr, run.stderr
    run = run_cli(["import", str(path), "--from", target, "--out", str(out), "--set", "model=Qwen/Qwen2.5-7B-Instruct"])
    check_run(run, codes=(0,))
    assert "model: Qwen/Qwen2.5-7B-Instruct" in out.read_text()


@pytest.mark.parametrize("target, script", [("verl", VERL_SCRIPT), ("openrlhf", ORLHF_SCRIPT)])
@pytest.mark.parametrize("model, want", [("'x$(touch P)'", "x$(touch P)"), ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),
                                         ("\\$HOME", "$HOME"), ("'a`b`'", "a`b`")])
def test_import_reads_quoted_or_escaped_dollars_as_written(tmp_path, target, script, model, want):
    import yaml

    path = tmp_path / "run.sh"
    path.write_text(script.format(model=model))
    out = tmp_path / "card.yaml"
    run = run_cli(["import", str(path), "--from", target, "--out", str(out)])
    check_run(run, codes=(0,), outputs=(out,))
    assert yaml.safe_load(out.read_text())["model"] == want


def test_shell_words_mark_only_expanding_words():
    from trainfit.export.importers import ShellExpanded, _shell_argv

    argv = _shell_argv("a=$X b='$X' c=\"$X\" d=\\$X e=$ f=cost$ g=`x` # h=$Y\n", "verl")
    assert argv == ["a=$X", "b=$X", "c=$X", "d=$X", "e=$", "f=cost$", "g=`x`"]
    assert [isinstance(w, ShellExpanded) for w in argv] == [True, False, True, False, False, False, True]


# ------------------------------------------------------------------------------------------------
# ``trainfit import --from accelerate`` of a file that is no accelerate config (a DeepSpeed JSON, a NeMo RL YAML) read
# none of its keys and planned a card of defaults (fp32, one GPU, strategy single) without a word. accelerate's own
# loader refuses a file without distributed_type; so does the importer now, naming the keys it does not know. A key
# unknown to this reader in a file that has distributed_type (a newer accelerate's field, a typo) is a note.
@pytest.mark.parametrize("text, fragment", [
    ('{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1}',
     "distributed_type: missing"),
    ("defaults: grpo_math_1B.yaml\npolicy: {model_name: Qwen/Qwen3-8B}\n", "keys defaults, policy: is this an"),
    ("num_processes: 8\nmixed_precision: bf16\n", "distributed_type: missing"),
])
def test_accelerate_import_refuses_what_accelerate_refuses(tmp_path, text, fragment):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    out = tmp_path / "card.yaml"
    run = run_cli(["import", str(path), "--from", "accelerate", "--out", str(out)])
    check_run(run, codes=(2,), outputs=(out,))
    assert fragment in run.stderr, run.stderr


def test_accelerate_import_takes_every_exported_key(tmp_path):
    from trainfit.export import export
    from trainfit.export.importers import import_text
    from trainfit.spec.card import load_card_dict

    for extra in ({}, {"parallel": {"strategy": "hsdp", "fsdp_version": "fsdp2"}, "hardware": {"nodes": 2}},
                  {"parallel": {"strategy": "zero3"}}):
        card = load_card_dict({"model": "Qwen/Qwen3-8B", **extra})
        assert import_text(export(card, "accelerate").text, "accelerate").card


# ------------------------------------------------------------------------------------------------
# An importer's number refusal echoed None in place of the value the file has ("expected a number, got None" for
# train_micro_batch_size_per_gpu: "auto"); it now shows the value. "auto" itself is no longer refused there: the
# Trainer fills it, so the key is left open (tests/export/test_import_deepspeed_open_batch.py).
@pytest.mark.parametrize("value, fragment", [
    ('"four"', "train_micro_batch_size_per_gpu: expected a number, got 'four'"),
    ("[2]", "train_micro_batch_size_per_gpu: expected a number, got '[2]'"),
])
def test_importer_number_refusal_echoes_the_files_value(tmp_path, value, fragment):
    path = tmp_path / "ds.json"
    path.write_text('{"train_micro_batch_size_per_gpu": %s, "zero_optimization": {"stage": 2}}' % value)
    run = run_cli(["import", str(path), "--from", "deepspeed"])
    check_run(run, codes=(2,))
    assert fragment in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# The web API's /api/fit took a price for a GPU kind it did not search (it priced nothing, the answer came back 200
# after a full search) and a second price for one kind (the last won), which `trainfit fit --price` and
# trainfit.fit(prices=...) refuse (catalog.prices.add_priced_kind); it shares the check now, before searching.
@pytest.mark.parametrize("body, fragment", [
    ({"card": {}, "gpus": ["rtx4090"], "prices": {"a100-80gb": "1CNY"}},
     "prices['a100-80gb']: a100-80gb is not among the GPU kinds searched (rtx4090); add it to gpus or drop this price"),
    ({"card": {}, "gpus": ["h100-sxm"], "prices": {"h100": "1CNY", "h100-sxm": "2CNY"}},
     "prices['h100-sxm']: a second price for h100-sxm (already prices['h100']); give one per GPU kind"),
    ({"card": {}, "prices": {"h200": "3USD"}}, "h200 is not among the GPU kinds searched"),
])
def test_serve_fit_refuses_a_price_the_cli_refuses(body, fragment):
    from trainfit.serve.worker import call

    status, payload = call("fit", body)
    assert status == 400 and fragment in payload["error"], payload


# ------------------------------------------------------------------------------------------------
# A card (YAML or JSON), a --set value, a price table or a --measured record that gives one key twice kept the
# last value and dropped the other without a word (PyYAML and json both do); YAML requires unique keys. Refused now.
@pytest.mark.parametrize("name, text, fragment", [
    ("card.yaml", "model: Qwen/Qwen3-8B\nbatch: {seq_len: 1024, seq_len: 2048}\n",
     "key 'seq_len' is given twice in one mapping (on line 2); give it once"),
    ("card.yaml", "model: Qwen/Qwen3-8B\nmethod: sft\nmethod: grpo\n",
     "key 'method' is given twice in one mapping (on lines 2 and 3)"),
    ("card.json", '{"model": "Qwen/Qwen3-8B", "batch": {"seq_len": 1024, "seq_len": 4096}}',
     "key 'seq_len' is given twice in one object"),
])
def test_a_card_giving_a_key_twice_is_refused(tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    run = run_cli(["plan", str(path)])
    check_run(run, codes=(2,))
    assert fragment in run.stderr, run.stderr


def test_a_set_value_giving_a_key_twice_is_refused():
    run = run_cli(["plan", "--set", "batch={seq_len: 1024, seq_len: 2048}"])
    check_run(run, codes=(2,))
    assert "--set batch: key 'seq_len' is given twice" in run.stderr


def test_merge_keys_and_anchors_still_read(tmp_path):
    path = tmp_path / "card.yaml"
    path.write_text("model: Qwen/Qwen3-8B\nbatch: &b {seq_len: 1024}\n<<: {method: sft}\n")
    check_run(run_cli(["plan", str(path)]), codes=(0,))


# ------------------------------------------------------------------------------------------------
# A card's roles section (reference, reward model, critic, KL coefficient) on an sft or rm card was dropped without a
# word (roles_of reads it for dpo, ppo and grpo only), unlike a rollout section, which is warned about.
@pytest.mark.parametrize("method, warned", [("sft", True), ("rm", True), ("dpo", False), ("grpo", False)])
def test_a_roles_section_a_method_ignores_is_warned_about(method, warned):
    import trainfit

    plan = trainfit.plan(overrides={"method": method, "roles.kl_coef": 0.1})
    line = f"roles: read for methods dpo, ppo and grpo only; method {method} ignores it"
    assert (line in plan.warnings) is warned, plan.warnings
