"""Failure classes a hardening pass over the CLI and the Python API found (December 2026), as explicit cases.

Each case runs the CLI in-process (``fuzzlib.run_cli``) and asserts what the product rule asks: one line naming the
field and the allowed values, exit code 2, no traceback, no output file; or, for the Python API, a ``TrainfitError``
instead of a ``TypeError`` / ``AttributeError`` from deep inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzlib import check_run, run_cli

LINKS = "allowed: nvlink, pcie, pcie_no_p2p or null (the GPU catalog's link)"


# ------------------------------------------------------------------------------------------------
# hardware.interconnect given a list or a section: TypeError (unhashable) in the field's validator, on every reader
# of a card (plan, fit, check, export, calibrate, compare) and in trainfit.plan(dict)

@pytest.mark.parametrize(("value", "shown"), [("[nvlink]", "a list"), ("{a: 1}", "a section"), ("[]", "a list")])
@pytest.mark.parametrize("command", [["plan"], ["fit", "--gpu", "h100", "--max-gpus", "1"], ["export", "--to", "trl"]])
def test_interconnect_that_is_not_text(command, value, shown):
    run = run_cli([*command, "--set", f"hardware.interconnect={value}"])
    check_run(run)
    assert run.rc == 2
    assert run.stderr.rstrip() == f"trainfit: error: hardware.interconnect: {shown} is not allowed; {LINKS}"


def test_interconnect_list_in_a_card_file(tmp_path: Path):
    card = tmp_path / "card.yaml"
    card.write_text("hardware:\n  gpu: h100\n  interconnect:\n    - pcie\n")
    run = run_cli(["plan", str(card), "--json"])
    check_run(run, json_out=True)
    assert run.rc == 2 and f"hardware.interconnect: a list is not allowed; {LINKS}" in run.stderr


def test_interconnect_list_through_the_python_api():
    import trainfit
    from trainfit.errors import CardError

    with pytest.raises(CardError, match="hardware.interconnect: a list is not allowed; allowed: nvlink"):
        trainfit.plan({"hardware": {"interconnect": ["pcie"]}})


# ------------------------------------------------------------------------------------------------
# trainfit compare on a record whose fields are of the wrong kind: AttributeError / TypeError tracebacks (a
# `record:` or `record.watch` that is not a mapping, `versions` a list, a phase's `planned` a string, a figure a
# string); NaN, negative or boolean figures and margins silently judged ('plan held' on a NaN measurement); no
# phase with both figures judged 'plan held'

GIB = 2**30


def _record(tmp_path: Path, change=None) -> Path:
    import yaml

    data = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
            "record": {"watch": {"device": "cuda", "memory_margin": 0.1, "time_margin": 0.3, "warnings": [],
                                 "forecasts": []},
                       "versions": {"torch": "2.13.0"},
                       "phases": [{"phase": "forward", "plan_phases": ["forward"],
                                   "planned": {"reserved_bytes": 10 * GIB, "seconds": 0.2},
                                   "measured": {"reserved_bytes": 10.5 * GIB, "seconds": 0.21}},
                                  {"phase": "backward", "plan_phases": ["backward"],
                                   "planned": {"reserved_bytes": 12 * GIB, "seconds": 0.4},
                                   "measured": {"reserved_bytes": 12 * GIB, "seconds": 0.4}}]}}
    if change is not None:
        change(data)
    path = tmp_path / "run.record.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _put(dotted: str, value):
    def change(data):
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[int(leaf) if isinstance(node, list) else leaf] = value
    return change


def test_compare_a_good_record_still_holds(tmp_path):
    run = run_cli(["compare", str(_record(tmp_path)), "--json"])
    obj = check_run(run, codes=(0,), json_out=True)
    assert obj["verdict"] == "plan held"


COMPARE_BAD = [
    ("record", [1], "record: must be a mapping (the run record"),
    ("record", None, "record: must be a mapping (the run record"),
    ("record.watch", 5, "compare: record.watch must be a mapping"),
    ("record.watch.memory_margin", [1], "compare: record.watch.memory_margin must be a finite fraction >= 0"),
    ("record.watch.memory_margin", "abc", "compare: record.watch.memory_margin must be a finite fraction >= 0"),
    ("record.watch.memory_margin", -1, "compare: record.watch.memory_margin must be a finite fraction >= 0"),
    ("record.watch.time_margin", float("nan"), "compare: record.watch.time_margin must be a finite fraction >= 0"),
    ("record.watch.overhead_fraction", "x", "compare: record.watch.overhead_fraction must be a finite fraction"),
    ("record.watch.warnings", 5, "compare: record.watch.warnings must be a list of text lines"),
    ("record.versions", [1, 2], "compare: record.versions must be a mapping of package names to versions"),
    ("record.versions", 7, "compare: record.versions must be a mapping of package names to versions"),
    ("record.phases", [], "has no measured phases (record.phases)"),
    ("record.phases.0.phase", None, "compare: record.phases[0].phase must be a phase name like forward"),
    ("record.phases.0.phase", [1], "compare: record.phases[0].phase must be a phase name like forward"),
    ("record.phases.0.planned", "x", "compare: record.phases[0].planned (forward) must be a mapping of"),
    ("record.phases.0.measured", [1], "compare: record.phases[0].measured (forward) must be a mapping of"),
    ("record.phases.0.measured.reserved_bytes", "x",
     "compare: record.phases[0].measured.reserved_bytes (forward) must be a finite number >= 0"),
    ("record.phases.0.measured.reserved_bytes", float("nan"),
     "compare: record.phases[0].measured.reserved_bytes (forward) must be a finite number >= 0"),
    ("record.phases.0.measured.reserved_bytes", -5 * GIB,
     "compare: record.phases[0].measured.reserved_bytes (forward) must be a finite number >= 0"),
    ("record.phases.0.planned.reserved_bytes", "x",
     "compare: record.phases[0].planned.reserved_bytes (forward) must be a finite number >= 0"),
    ("record.phases.0.measured.seconds", True,
     "compare: record.phases[0].measured.seconds (forward) must be a finite number >= 0"),
    ("record.phases", [{"phase": "forward"}], "holds both a planned and a measured figure on cuda (not measured);"
                                              " nothing to judge"),
]


@pytest.mark.parametrize(("dotted", "value", "fragment"), COMPARE_BAD,
                         ids=[f"{c[0]}={str(c[1])[:12]}" for c in COMPARE_BAD])
@pytest.mark.parametrize("as_json", [False, True])
def test_compare_bad_records(tmp_path, dotted, value, fragment, as_json):
    run = run_cli(["compare", str(_record(tmp_path, _put(dotted, value))), *(["--json"] if as_json else [])])
    check_run(run, codes=(2,))
    assert fragment in run.stderr, run.stderr


def test_compare_refuses_an_infinite_margin(tmp_path):
    run = run_cli(["compare", str(_record(tmp_path)), "--time-margin", "inf"])
    check_run(run, codes=(2,))
    assert "--time-margin: must be a finite fraction >= 0" in run.stderr


# ------------------------------------------------------------------------------------------------
# an old run record (no record.interconnect_rule, pcie, nvlink false) whose p2p_matrix is a number: TypeError in the
# link migration on calibrate and compare; a string or a mapping was read as 'no P2P matrix recorded'

@pytest.mark.parametrize("matrix", [5, 1.5, "OK", {"0": ["X", "OK"]}, [None, None]])
@pytest.mark.parametrize("command", ["calibrate", "compare"])
def test_old_record_with_a_p2p_matrix_that_is_not_rows(tmp_path, command, matrix):
    import yaml

    def old(data):
        data["hardware"]["interconnect"] = "pcie"
        data["hardware"]["gpu"] = "l40s"
        data["record"].update({"nvlink": False, "p2p_matrix": matrix, "step_s": 1.0})

    path = _record(tmp_path, old)
    if command == "calibrate":  # two records of one kind, the fit's minimum
        data = yaml.safe_load(path.read_text())
        path.write_text(yaml.safe_dump([data, {**data, "record": {**data["record"], "step_s": 1.2}}]))
        argv = ["calibrate", str(path), "--out", str(tmp_path / "cal.json")]
    else:
        argv = ["compare", str(path)]
    run = run_cli(argv)
    check_run(run, codes=(2,), outputs=(tmp_path / "cal.json",))
    assert "record.p2p_matrix: a list of rows of 'OK' / 'X' / ... as the audit writes it, or null" in run.stderr
    if command == "calibrate":
        assert run.stderr.startswith(f"trainfit: error: {path}[0]: ")


def test_old_record_with_rows_still_migrates(tmp_path):
    from trainfit.preflight.record import load_record

    def old(data):
        data["hardware"].update({"interconnect": "pcie", "gpu": "l40s"})
        data["record"].update({"nvlink": False, "p2p_matrix": [["X", "NS"], ["NS", "X"]],
                               "gpus": [{"name": "L40S"}, {"name": "L40S"}]})

    card, extra = load_record(_record(tmp_path, old))
    assert card.hardware.interconnect.value == "pcie_no_p2p"
    assert any("predates the peer-to-peer distinction" in n for n in extra["notes"])


# ------------------------------------------------------------------------------------------------
# checkpoint.resume was free text: a misspelt 'adaptor' (or any value) planned as a full-state resume, silently

@pytest.mark.parametrize("value", ["adaptor", "ADAPTER_ONLY", "weights", "[1]"])
@pytest.mark.parametrize("command", [["plan", "--json"], ["fit", "--gpu", "h100", "--max-gpus", "1"], ["export", "--to", "trl"]])
def test_checkpoint_resume_is_an_enum(command, value):
    run = run_cli([*command, "--scope", "lora", "--set", f"checkpoint.resume={value}"] if command[0] == "plan"
                  else [*command, "--set", f"checkpoint.resume={value}"])
    check_run(run, codes=(2,))
    assert "checkpoint.resume: " in run.stderr and run.stderr.rstrip().endswith("allowed: full or adapter_only")


def test_checkpoint_resume_adapter_only_still_sizes_the_adapter():
    import trainfit
    from trainfit.spec.enums import ResumeKind

    plan = trainfit.plan({"scope": "lora", "checkpoint": {"resume": "adapter_only"}})
    assert plan.card.checkpoint.resume is ResumeKind.ADAPTER_ONLY
    assert plan.to_dict()["card"]["checkpoint"]["resume"] == "adapter_only"


# ------------------------------------------------------------------------------------------------
# the Python API: arguments of the wrong kind reached the core (TypeError / AttributeError), or were read as
# something else than given (fit(gpus='rtx4090') searched the kinds 'r', 't', 'x'...; steps=2.5 was accepted)

API_BAD = [
    (dict(gpus=5), "gpus: a list of GPU catalog ids"),
    (dict(gpus=["rtx4090", 5]), "gpus: a list of GPU catalog ids"),
    (dict(gpus=["rtx4090"], max_gpus="2"), "max_gpus: a whole number of cards >= 1"),
    (dict(gpus=["rtx4090"], steps=2.5), "steps: a whole number of steps"),
    (dict(gpus=["rtx4090"], steps=float("nan")), "steps: a whole number of steps"),
    (dict(gpus=["rtx4090"], steps=10, deadline_s=float("nan")), "deadline_s: a finite duration > 0"),
    (dict(gpus=["rtx4090"], steps=10, deadline_s=-5), "deadline_s: a finite duration > 0"),
    (dict(gpus=["rtx4090"], prices={"rtx4090": 5}), "prices['rtx4090']: a price with a currency ('1.98CNY')"),
    (dict(gpus=["rtx4090"], prices=["rtx4090=1USD"]), "prices: a mapping of GPU id to a price"),
    (dict(gpus=["rtx4090"], fx={"USD:CNY": 7.2}), "fx: keys are (FROM, TO) pairs of 3-letter codes"),
    (dict(gpus=["rtx4090"], fx={("USD", "CNY"): float("nan")}), "fx[('USD', 'CNY')]: a finite rate > 0"),
    (dict(gpus=["rtx4090"], fx={("USD", "CNY"): -7.2}), "fx[('USD', 'CNY')]: a finite rate > 0"),
]


@pytest.mark.parametrize(("kwargs", "fragment"), API_BAD, ids=[f"{sorted(k)[-1]}={k[sorted(k)[-1]]!r}"[:30] for k, _ in API_BAD])
def test_fit_api_arguments(kwargs, fragment):
    import trainfit
    from trainfit.errors import TrainfitError

    with pytest.raises(TrainfitError) as exc:
        trainfit.fit(None, max_gpus=kwargs.pop("max_gpus", 1), **kwargs)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_fit_api_takes_one_string_as_the_comma_separated_list():
    import trainfit

    result = trainfit.fit(None, gpus="rtx4090, h100-sxm", max_gpus=1, steps=10)
    assert {r.gpu for r in result.rows} == {"rtx4090", "h100-sxm"}


@pytest.mark.parametrize("model", [None, 5, ["Qwen/Qwen3-8B"]])
def test_size_api_model_of_the_wrong_kind(model):
    import trainfit
    from trainfit.errors import ConfigError

    with pytest.raises(ConfigError, match="model: a catalog id .* got "):
        trainfit.size(model)


def test_size_weights_of_an_unknown_dtype_names_the_allowed():
    import trainfit
    from trainfit.errors import TrainfitError

    with pytest.raises(TrainfitError) as exc:
        trainfit.size("Qwen/Qwen3-0.6B").weights_of("int3")
    assert isinstance(exc.value, KeyError)  # a lookup miss, as before
    assert str(exc.value) == "dtype: 'int3' is not sized; allowed: fp32, bf16, fp16, fp8, int8, int4, nf4, mxfp4"


# ------------------------------------------------------------------------------------------------
# trainfit calibrate on a `gpu_calibrate.py time` output whose sections are of the wrong shape: AttributeError /
# TypeError / KeyError tracebacks in the reader (a section that is a number, a point whose m is a list, a note's
# figure that is a mapping, an error entry that is text)

GPU_TIME = Path(__file__).resolve().parents[1] / "data" / "gpu_time_dry_run.json"

GPU_TIME_BAD = [
    (("versions",), -1, "versions must be a mapping"),
    (("hbm",), 1e308, "hbm must be a mapping"),
    (("launch",), "x", "launch must be a mapping"),
    (("launch", "backward"), [1], "launch.backward must be a mapping"),
    (("pcie", "h2d"), [], "pcie.h2d must be a mapping"),
    (("gemm", "points"), 5, "gemm.points must be a list"),
    (("gemm", "fp32_points"), True, "gemm.fp32_points must be a list"),
    (("decode",), [1], "decode must be a mapping"),
    (("decode", "points"), float("inf"), "decode.points must be a list"),
    (("decode", "model"), True, "decode.model must be a mapping"),
    (("optimizer",), {"a": 1}, "optimizer must be a list"),
    (("errors",), ["x"], "errors[0] must be a mapping with section and error"),
]


def _gpu_time(tmp_path: Path, where: tuple, value) -> Path:
    import json

    data = json.loads(GPU_TIME.read_text())
    node = data
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    path = tmp_path / "time.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("where", "value", "fragment"), GPU_TIME_BAD, ids=[".".join(c[0]) for c in GPU_TIME_BAD])
def test_calibrate_gpu_output_sections_of_the_wrong_shape(tmp_path, where, value, fragment):
    out = tmp_path / "cal.json"
    path = _gpu_time(tmp_path, where, value)
    run = run_cli(["calibrate", str(path), "--gpu", "h100-sxm", "--allow-dry-run", "--out", str(out), "--json"])
    check_run(run, codes=(2,), outputs=(out,))
    assert f"{path}: {fragment}" in run.stderr, run.stderr


@pytest.mark.parametrize(("where", "value"), [
    (("gemm", "fp32_points", 0, "m"), []),            # a point of the wrong shape is skipped, as a failed one
    (("launch", "forward_module", "seconds"), {}),    # not read
    (("decode", "points", 1, "bytes_per_s"), {"a": 1}),  # a note's figure: shown as written
    (("decode", "model", "params"), "x"),
    (("optimizer", 0, "params"), [1]),
])
def test_calibrate_gpu_output_odd_figures_still_calibrate(tmp_path, where, value):
    import json

    out = tmp_path / "cal.json"
    run = run_cli(["calibrate", str(_gpu_time(tmp_path, where, value)), "--gpu", "h100-sxm", "--allow-dry-run", "--out", str(out), "--json"])
    check_run(run, codes=(0,), outputs=(out,), json_out=True)
    assert "h100-sxm" in json.loads(out.read_text())["devices"]


# ------------------------------------------------------------------------------------------------
# a role's model id that does not resolve was refused as "model: 'abc' is not in the catalog": the card's model field,
# not the role's

@pytest.mark.parametrize(("method", "field"), [("ppo", "roles.critic"), ("ppo", "roles.reward_model"),
                                               ("grpo", "roles.reward_model")])
def test_a_role_model_that_does_not_resolve_names_the_role(method, field):
    run = run_cli(["plan", "--method", method, "--model", "Qwen/Qwen3-0.6B", "--gpu", "h100", "--set",
                   f"{field}=no-such/model-xyz"])
    check_run(run, codes=(2,))
    assert run.stderr.startswith(f"trainfit: error: {field}: 'no-such/model-xyz' is not in the catalog"), run.stderr


# ------------------------------------------------------------------------------------------------
# a critic on a method without one (grpo, sft, dpo, rm) and a reward model id on a method that loads none (sft, dpo,
# rm) were accepted and planned without them, silently

@pytest.mark.parametrize(("method", "item", "fragment"), [
    ("grpo", "roles.critic=Qwen/Qwen3-8B", "roles.critic: read by method ppo only (a critic model); method grpo has none"),
    ("dpo", "roles.critic=same_as_actor", "roles.critic: read by method ppo only (a critic model); method dpo has none"),
    ("sft", "roles.reward_model=Qwen/Qwen3-8B", "roles.reward_model: a reward model is read by methods ppo and grpo only;"
                                               " method sft has none, allowed: rule or none"),
    ("rm", "roles.reward_model=Qwen/Qwen3-8B", "roles.reward_model: a reward model is read by methods ppo and grpo only"),
])
def test_a_role_the_method_does_not_read_is_refused(method, item, fragment):
    run = run_cli(["plan", "--method", method, "--model", "Qwen/Qwen3-0.6B", "--gpu", "h100", "--set", item])
    check_run(run, codes=(2,))
    assert fragment in run.stderr, run.stderr


@pytest.mark.parametrize(("method", "item"), [("ppo", "roles.critic=same_as_actor"), ("sft", "roles.reward_model=rule"),
                                              ("grpo", "roles.reward_model=Qwen/Qwen3-0.6B"), ("dpo", "roles.reward_model=none")])
def test_a_role_the_method_reads_or_its_default_still_plans(method, item):
    run = run_cli(["plan", "--method", method, "--model", "Qwen/Qwen3-0.6B", "--gpu", "h100", "--set", item, "--json"])
    check_run(run, codes=(0,), json_out=True)


# ------------------------------------------------------------------------------------------------
# trainfit import: a switch of the file read by its truthiness ('abc', 2.5, [1] read as true; 0 as false), an
# OpenRLHF flag with no value read as absent (a TypeError traceback for --train.batch_size, the default model for
# --actor.model_name_or_path), a verl strategy or estimator that is not text planned as FSDP1 / ppo, silently

def _exported(tmp_path: Path, card: str, target: str) -> str:
    card_path = tmp_path / "card.yaml"
    card_path.write_text(card)
    out = tmp_path / f"exported.{target}"
    run = run_cli(["export", str(card_path), "--to", target, "--out", str(out)])
    assert run.rc == 0, run.stderr
    return out.read_text()


GRPO_CARD = ("model: Qwen/Qwen3-0.6B\nmethod: grpo\nscope: lora\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n"
             "rollout: {prompt_len: 512, response_len: 1024, num_generations: 8}\n")
SFT_CARD = "model: Qwen/Qwen3-0.6B\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n"

IMPORT_BAD = [
    ("accelerate", SFT_CARD, "fsdp_activation_checkpointing: true", "fsdp_activation_checkpointing: abc",
     "--from accelerate: fsdp_activation_checkpointing: expected true or false, got 'abc'"),
    ("accelerate", SFT_CARD, "fsdp_offload_params: false", "fsdp_offload_params: 2.5",
     "--from accelerate: fsdp_offload_params: expected true or false, got '2.5'"),
    ("verl", GRPO_CARD, "actor_rollout_ref.model.enable_gradient_checkpointing=True",
     "actor_rollout_ref.model.enable_gradient_checkpointing=[1,2]",
     "--from verl: actor_rollout_ref.model.enable_gradient_checkpointing: expected true or false, got '[1, 2]'"),
    ("verl", GRPO_CARD, "actor_rollout_ref.actor.fsdp_config.param_offload=False",
     "actor_rollout_ref.actor.fsdp_config.param_offload=nan",
     "--from verl: actor_rollout_ref.actor.fsdp_config.param_offload: expected true or false, got 'nan'"),
    ("verl", GRPO_CARD, "actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.actor.strategy=[1,2]",
     "--from verl: actor_rollout_ref.actor.strategy: '[1, 2]'; allowed: fsdp, fsdp2, megatron"),
    ("verl", GRPO_CARD, "algorithm.adv_estimator=grpo", "algorithm.adv_estimator=2.5",
     "--from verl: algorithm.adv_estimator: '2.5'; allowed: one of gae, grpo, "),
    ("nemo-rl", GRPO_CARD, "activation_checkpointing: true", "activation_checkpointing: abc",
     "--from nemo-rl: policy.dtensor_cfg.activation_checkpointing: expected true or false, got 'abc'"),
    # the rollout's 16 x 8 samples in rollout.mini_batches 1 optimizer step (export/openrlhf.py _rl_train_batch)
    ("openrlhf", GRPO_CARD, "--train.batch_size 128", "--train.batch_size",
     "--from openrlhf: --train.batch_size: the flag has no value"),
]


@pytest.mark.parametrize(("target", "card", "old", "new", "fragment"), IMPORT_BAD, ids=[f"{c[0]}:{c[3][:40]}" for c in IMPORT_BAD])
def test_import_reads_switches_and_names_strictly(tmp_path, target, card, old, new, fragment):
    text = _exported(tmp_path, card, target)
    assert old in text, text
    bad = tmp_path / f"bad.{target}"
    bad.write_text(text.replace(old, new, 1))
    out = tmp_path / "imported.yaml"
    run = run_cli(["import", str(bad), "--from", target, "--out", str(out)])
    check_run(run, codes=(2,), outputs=(out,))
    assert fragment in run.stderr, run.stderr


@pytest.mark.parametrize(("target", "card"), [("accelerate", SFT_CARD), ("verl", GRPO_CARD), ("nemo-rl", GRPO_CARD),
                                              ("openrlhf", GRPO_CARD)])
def test_import_of_an_export_still_reads(tmp_path, target, card):
    path = tmp_path / f"ok.{target}"
    path.write_text(_exported(tmp_path, card, target))
    run = run_cli(["import", str(path), "--from", target, "--json"])
    check_run(run, codes=(0,), json_out=True)


# ------------------------------------------------------------------------------------------------
# trainfit record --measured copied a watch record's phases, watch, versions and step_s into the new record unread: a
# step_s of 'fast' or NaN, a versions list or a watch that is a number were written (exit 0) for compare and
# calibrate to trip on later

@pytest.mark.parametrize(("dotted", "value", "fragment"), [
    ("record.step_s", "fast", "record --measured: record.step_s must be the measured seconds per optimizer step"),
    ("record.step_s", float("nan"), "record --measured: record.step_s must be the measured seconds per optimizer step"),
    ("record.versions", [1], "record --measured: record.versions must be a mapping"),
    ("record.watch", 5, "record --measured: record.watch must be a mapping"),
    ("record.phases", [1, "x"], "record --measured: the file is not a watch record"),
    ("record.phases.0.measured.seconds", "x", "record --measured: record.phases[0].measured.seconds (forward) must be"),
])
def test_record_measured_is_checked_before_it_is_written(tmp_path, dotted, value, fragment):
    import json

    from test_cli_fuzz import _audit_dict

    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(_audit_dict(8)))
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-8B\nhardware: {gpu: a100-80gb, gpus_per_node: 8}\n")
    measured = _record(tmp_path, _put(dotted, value))
    out = tmp_path / "out.record.yaml"
    run = run_cli(["record", str(card), "--audit", str(audit), "--measured", str(measured), "--out", str(out)])
    check_run(run, codes=(2,), outputs=(out,))
    assert fragment in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# trainfit trace --layers above the model's depth built and traced a model of that many layers (over 25 s for
# --layers 100000 on Qwen3-0.6B's 28, growing with N): refused before building anything

def test_trace_layers_above_the_models_depth():
    run = run_cli(["trace", "--model", "Qwen/Qwen3-0.6B", "--gpus", "1", "--strategy", "single", "--layers", "100000"])
    check_run(run, codes=(2,))
    assert "trace: --layers 100000 is more than the model's 28 decoder layers; allowed: 1 to 28" in run.stderr
    # the subprocess imports torch before it refuses (3-6 s on a loaded 2-core machine); building the model took > 25 s
    assert run.seconds < 15


# ------------------------------------------------------------------------------------------------
# trainfit fit: a --price for a GPU kind the search does not try priced nothing, silently; --fx USD:USD=2 (a
# currency to itself) and an infinite rate (inf, 1e400: the way back 0) were accepted

@pytest.mark.parametrize(("extra", "fragment"), [
    (["--price", "h100=1USD"], "--price h100=1USD: h100-sxm is not among the GPU kinds searched (rtx4090); add it to --gpu"),
    (["--fx", "USD:USD=2"], "--fx: FROM and TO are both USD in 'USD:USD=2'; give two currencies"),
    (["--fx", "USD:CNY=inf"], "--fx: expected FROM:TO=RATE with 3-letter codes, e.g. USD:CNY=7.2, got 'USD:CNY=inf'"),
    (["--fx", "USD:CNY=1e400"], "--fx: expected FROM:TO=RATE"),
])
def test_fit_prices_and_rates_that_would_be_unused_or_infinite(extra, fragment):
    run = run_cli(["fit", "--gpu", "rtx4090", "--max-gpus", "1", "--steps", "10", *extra])
    check_run(run, codes=(2,))
    assert fragment in run.stderr, run.stderr


def test_fit_api_price_for_a_kind_not_searched():
    import trainfit
    from trainfit.errors import CardError

    with pytest.raises(CardError, match=r"prices\['h100'\]: h100-sxm is not among the GPU kinds searched \(rtx4090\)"):
        trainfit.fit(None, gpus=["rtx4090"], max_gpus=1, steps=10, prices={"h100": "1USD"})
    with pytest.raises(CardError, match="FROM and TO are the same currency"):
        trainfit.fit(None, gpus=["rtx4090"], max_gpus=1, steps=10, fx={("USD", "usd"): 2.0})
