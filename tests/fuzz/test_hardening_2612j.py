"""Findings of the eighth review of the December 2026 hardening pass, as explicit cases (each fails without its fix).
As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line, exit code 2,
no traceback and no output file; ``--json`` prints ``{"error": line}`` on a refusal. The same review's findings
elsewhere: the grader's memory as a whole (tests/accept/test_sandbox_2612j.py), the web server's slow clients and
connection cap (tests/serve/test_serve_slow_clients.py), packed_rope_loop and its pin as plan facts
(tests/export/test_plan_facts_software_pins.py).

Checked in the same review and found clean (no case kept, nothing to fix):
- the reward grader: a candidate that spins threads (RLIMIT_CPU counts every thread, the call's wall clock ends it),
  floods its stdout / stderr (both /dev/null in the worker) or its reply pipe (one line of at most 1 MiB, else the
  candidate is ended), writes a reply ahead of the request (read as the next call's reply: the candidate writes
  every reply anyway, and two lines in one read end it), signals the namespace's init (ignored from inside; killing it ends the candidate, scored 0),
  replies with NaN, deep nesting or a huge number (plain JSON values compared with ==; a RecursionError there is
  a CandidateError). A candidate shipping ``shutil.py`` or ``subprocess.py`` runs before the worker's tripwire is
  set (the worker imports them after putting /ws on sys.path): the tripwire is documented as no barrier and the
  candidate's own code runs in the same process anyway, so nothing is gained; left.
- every subcommand with a file argument (plan, fit and its --price-table, export, import from the six readers and
  --with / --base, calibrate, compare, record --audit / --measured, check --audit, diagnose --log / --card, size,
  trace, --calibration) given an empty file, random bytes, a YAML alias bomb, 5,000-deep JSON, 300-deep YAML, a
  folder, a FIFO with no writer, a symlink to /etc/passwd, a UTF-32 BOM, NaN, a 1.1 GB sparse file, /dev/zero,
  /dev/null, /dev/stdin and a missing path, with and without --json: one line each, except the findings below.
  OpenRLHF's undotted options with 1e999 or 5,000 digits are listed as not read (the documented pre-0.11 note).
- ``--set`` with sections, dotted keys, empty parts, 300-character and non-ASCII keys, and odd values of the newest
  fields (batch.packed_rope_loop, precision.fp8_activation_input_store, precision.fp8_param_transpose_cache,
  parallel.activation_offload / activation_offload_layers, software.megatron-core) on plan and fit; fit's --fx,
  --budget, --deadline, --steps, --tokens, --price, --objective, --global-batch and --max-gpus with NaN, inf,
  negative, huge and misspelled values.
- plan facts: every boolean and enum field of every card section flipped on an SFT Megatron, an SFT FSDP, a GRPO
  verl and a LoRA card (296 valid cards, 126 with another plan): each changed plan has changed facts."""

from __future__ import annotations

import json

import pytest

from fuzzlib import check_run, run_cli


def _plan(tmp_path, text, *extra):
    card = tmp_path / "card.yaml"
    card.write_text(text)
    run = run_cli(["plan", str(card), "--json", *extra])
    check_run(run, codes=(0, 2), json_out=True)
    return run


# ------------------------------------------------------------------------------------------------
# 1. A package pin under software written as a YAML number: the named fields (torch, vllm, ...) refuse it, but any
#    other package (software.megatron-core, software.verl, ...) took str() of the number. YAML reads 0.20 as the
#    float 0.2, so `megatron-core: 0.20` (core_v0.20, the two-sync copy loop) was planned as 0.2 (the cat loop of
#    core_v0.10-0.14) without a word; NaN, .inf and -1 read as no release and the preset's pin was planned instead.
_ROPE = "batch: {packed_rope_loop: true, packed_sample_tokens: 512}\n"


@pytest.mark.parametrize("package", ["megatron-core", "verl", "deepspeed"])
@pytest.mark.parametrize("value", ["0.20", "0.2", "1", "-1", ".nan", ".inf", "1.0e+308"])
def test_software_pin_as_a_yaml_number_is_refused_naming_the_package(tmp_path, package, value):
    run = _plan(tmp_path, f"software: {{{package}: {value}}}\n" + _ROPE)
    assert run.rc == 2, run.stdout[-400:]
    line = json.loads(run.stdout)["error"]
    assert line.startswith(f"software.{package}: a package version written as text"), line
    assert "quote it" in line, line


def test_software_pin_as_a_yaml_number_is_refused_by_set_too(tmp_path):
    run = _plan(tmp_path, _ROPE, "--set", "software.megatron-core=0.20")
    assert run.rc == 2 and "software.megatron-core: a package version written as text" in run.stdout, run.stdout


def test_software_pin_as_quoted_text_still_plans_its_loop(tmp_path):
    run = _plan(tmp_path, "software: {megatron-core: '0.20'}\n" + _ROPE)
    assert run.rc == 0, run.stderr
    said = " ".join(json.loads(run.stdout)["assumptions"])
    assert "two host syncs per call" in said and "software.megatron-core 0.20" in said, said


# ------------------------------------------------------------------------------------------------
# 2. --calibration FILE was parsed with a bare json.loads: a file of 5,000 nested brackets (10 KB) escaped as a
#    RecursionError traceback (and under --json printed no JSON at all). (NaN and Infinity there were already refused
#    by the value checks: "devices.h100.matmul_flops_per_s must be a positive number, got nan".)
@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000,
                                  '{"trainfit_calibration": 1, "notes": ' + "[" * 5000 + "]" * 5000 + "}"])
@pytest.mark.parametrize("as_json", [False, True])
def test_calibration_file_nested_past_the_json_limits_is_one_line(tmp_path, text, as_json):
    cal = tmp_path / "cal.json"
    cal.write_text(text)
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    run = run_cli(["plan", str(card), "--calibration", str(cal), *(["--json"] if as_json else [])])
    check_run(run, codes=(2,), json_out=as_json)
    line = json.loads(run.stdout)["error"] if as_json else run.stderr.strip()
    assert f"calibration '{cal}': nested too deeply to read" in line, line


# ------------------------------------------------------------------------------------------------
# 3. --audit FILE (record and check) was parsed with a bare json.loads: 5,000 nested brackets escaped as a
#    RecursionError traceback.
@pytest.mark.parametrize("command", ["record", "check"])
@pytest.mark.parametrize("as_json", [False, True])
def test_audit_file_nested_past_the_json_limits_is_one_line(tmp_path, command, as_json):
    audit = tmp_path / "audit.json"
    audit.write_text("[" * 5000 + "]" * 5000)
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    out = tmp_path / "record.yaml"
    argv = [command, str(card), "--audit", str(audit), *(["--out", str(out)] if command == "record" else []),
            *(["--json"] if as_json else [])]
    run = run_cli(argv)
    check_run(run, codes=(2,), json_out=as_json, outputs=(out,))
    line = json.loads(run.stdout)["error"] if as_json else run.stderr.strip()
    assert "--audit: " in line and "nested too deeply to read" in line, line


# ------------------------------------------------------------------------------------------------
# 4. fit with a pinned card count (--set hardware.gpus_per_node / hardware.nodes, or the card's own) read the two
#    values with int() before the card checked them: 2.5 planned 2 GPUs, true planned 1, nodes 1.5 planned 8,
#    100000 GPUs per node (the card allows 1,024) was ranked, 1e9 printed "invalid literal for int() with base 10"
#    (no field), and nodes 0 or -2 were reported as "hardware.gpus_per_node: ... (got 0 / -16)": the wrong field.
@pytest.mark.parametrize("pin, field", [
    ("hardware.gpus_per_node=2.5", "hardware.gpus_per_node"), ("hardware.gpus_per_node=true", "hardware.gpus_per_node"),
    ("hardware.gpus_per_node=100000", "hardware.gpus_per_node"), ("hardware.gpus_per_node=1e9", "hardware.gpus_per_node"),
    ("hardware={gpus_per_node: 2.5}", "hardware.gpus_per_node"), ("hardware.nodes=1.5", "hardware.nodes"),
    ("hardware.nodes=0", "hardware.nodes"), ("hardware.nodes=-2", "hardware.nodes"),
])
@pytest.mark.parametrize("as_json", [False, True])
def test_fit_pinned_card_count_is_checked_naming_its_field(tmp_path, pin, field, as_json):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    run = run_cli(["fit", str(card), "--gpu", "h100", "--max-gpus", "2", "--set", pin, *(["--json"] if as_json else [])])
    check_run(run, codes=(2,), json_out=as_json)
    line = json.loads(run.stdout)["error"] if as_json else run.stderr.strip().removeprefix("trainfit: error: ")
    assert line.startswith(f"{field}: a whole number from 1 to "), line


@pytest.mark.parametrize("pin, gpus", [("hardware.gpus_per_node=4", 4), ("hardware.gpus_per_node='4'", 4)])
def test_fit_pinned_card_count_that_the_card_allows_still_fits(tmp_path, pin, gpus):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    run = run_cli(["fit", str(card), "--gpu", "h100", "--max-gpus", "2", "--set", pin, "--json"])
    d = check_run(run, codes=(0,), json_out=True)
    assert {r["gpus"] for r in d["rows"]} == {gpus}, d["rows"][:3]


# ------------------------------------------------------------------------------------------------
# 5. import: a torchtitan TOML nested 5,000 deep (10 KB) escaped tomllib as a RecursionError traceback; a TRL
#    train_config.py of 100,000 unary minus signs (100 KB) escaped ast.parse as a MemoryError traceback (2,000 of
#    them parse and are refused as "not a literal value": checked, one line).
@pytest.mark.parametrize("source, text", [
    ("torchtitan", "a = " + "[" * 5000 + "]" * 5000 + "\n"),
    ("torchtitan", "a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n"),
    ("trl", "from trl import SFTConfig\nargs = SFTConfig(output_dir=" + "-" * 100_000 + "1)\n"),
])
@pytest.mark.parametrize("as_json", [False, True])
def test_import_of_a_file_nested_past_the_parser_is_one_line(tmp_path, source, text, as_json):
    f = tmp_path / "config.in"
    f.write_text(text)
    out = tmp_path / "card.yaml"
    run = run_cli(["import", str(f), "--from", source, "--out", str(out), *(["--json"] if as_json else [])])
    check_run(run, codes=(2,), json_out=as_json, outputs=(out,))
    line = json.loads(run.stdout)["error"] if as_json else run.stderr.strip()
    assert f"--from {source}: " in line and "nested too deeply to read" in line, line


# ------------------------------------------------------------------------------------------------
# 6. import --from verl: an override value of 3,000 nested brackets escaped the Hydra list reader as a RecursionError;
#    import --from torchtitan: a 5,000-digit integer escaped tomllib as int()'s ValueError, printed without naming
#    the source ("Exceeds the limit (4300 digits) for integer string conversion...").
@pytest.mark.parametrize("source, text, fragment", [
    ("verl", "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen3-0.6B"
             " data.train_batch_size=" + "[" * 3000 + "]" * 3000 + "\n",
     "data.train_batch_size: a list nested deeper than 64 levels"),
    ("torchtitan", "[model]\nname='llama3'\nflavor='8B'\n[training]\nlocal_batch_size=" + "9" * 5000 + "\n",
     "not TOML (Exceeds the limit (4300 digits)"),
])
@pytest.mark.parametrize("as_json", [False, True])
def test_import_refuses_values_past_the_readers_limits_naming_the_source(tmp_path, source, text, fragment, as_json):
    f = tmp_path / "config.in"
    f.write_text(text)
    run = run_cli(["import", str(f), "--from", source, *(["--json"] if as_json else [])])
    check_run(run, codes=(2,), json_out=as_json)
    line = json.loads(run.stdout)["error"] if as_json else run.stderr.strip()
    assert f"--from {source}: {fragment}" in line, line


def test_import_verl_list_within_the_depth_is_still_read(tmp_path):
    f = tmp_path / "run.sh"
    f.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen3-0.6B"
                 " trainer.logger=[console,wandb]\n")
    run = run_cli(["import", str(f), "--from", "verl", "--json"])
    check_run(run, codes=(0,), json_out=True)


@pytest.mark.parametrize("hardware, field", [({"gpus_per_node": 2.5}, "gpus_per_node"),
                                             ({"gpus_per_node": True}, "gpus_per_node"), ({"nodes": 1.5}, "nodes")])
def test_web_api_fit_checks_the_cards_count_as_the_cli_does(hardware, field):
    """The web API pins the card's hardware section (``fit_start(pin_hardware=True)``): the same check, a 400."""
    from trainfit.serve.worker import call

    status, data = call("fit", {"card": {"model": "Qwen/Qwen3-0.6B", "hardware": hardware}, "gpus": ["h100"],
                                "max_gpus": 2})
    assert status == 400 and data["error"].startswith(f"hardware.{field}: a whole number from 1 to "), data
