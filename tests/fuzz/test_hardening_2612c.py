"""Findings of a review of the December 2026 hardening pass, as explicit cases (each fails without its fix).

As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line naming the
field and the allowed values, exit code 2, no traceback and no output file; the Python API raises a
``TrainfitError`` naming its own argument (never a command-line flag)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzzlib import check_run, run_cli
from test_hardening_2612 import GRPO_CARD, _exported, _put, _record


# ------------------------------------------------------------------------------------------------
# trainfit record --measured wrote what compare refuses: record.watch.device 5 and record.phases [] (exit 0)

def _record_measured(tmp_path: Path, measured: Path):
    from test_cli_fuzz import _audit_dict

    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(_audit_dict(8)))
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-8B\nhardware: {gpu: a100-80gb, gpus_per_node: 8}\n")
    out = tmp_path / "out.record.yaml"
    return run_cli(["record", str(card), "--audit", str(audit), "--measured", str(measured), "--out", str(out)]), out


@pytest.mark.parametrize(("dotted", "value", "fragment"), [
    ("record.watch.device", 5, "record --measured: record.watch.device must be 'cuda' or 'cpu', got 5"),
    ("record.watch.device", "tpu", "record --measured: record.watch.device must be 'cuda' or 'cpu', got 'tpu'"),
    ("record.phases", [], "record --measured: the file is not a watch record (no record.phases list)"),
])
def test_record_measured_refuses_what_compare_refuses(tmp_path, dotted, value, fragment):
    run, out = _record_measured(tmp_path, _record(tmp_path, _put(dotted, value)))
    check_run(run, codes=(2,), outputs=(out,))
    assert fragment in run.stderr, run.stderr
    compared = run_cli(["compare", str(_record(tmp_path, _put(dotted, value)))])
    check_run(compared, codes=(2,))


def test_record_measured_of_a_cpu_record_still_writes(tmp_path):
    run, out = _record_measured(tmp_path, _record(tmp_path, _put("record.watch.device", "cpu")))
    check_run(run, codes=(0,))
    assert out.exists()


# ------------------------------------------------------------------------------------------------
# trainfit fit --fx / --price: a rate whose way back is infinite (1e-320), a second rate for one pair, a reverse pair
# that contradicts it, and a second price for one GPU kind were accepted (the last one given silently won)

@pytest.mark.parametrize(("extra", "fragment"), [
    (["--fx", "USD:CNY=1e-320"], "got 'USD:CNY=1e-320'; the rate and its reverse (1/rate) must be finite and > 0"),
    (["--fx", "USD:CNY=7.2", "--fx", "USD:CNY=7.3"], "--fx: 'USD:CNY=7.3': a second rate for USD:CNY (already USD:CNY=7.2)"),
    (["--fx", "USD:CNY=7.2", "--fx", "usd:cny=7.2"], "--fx: 'usd:cny=7.2': a second rate for USD:CNY"),
    (["--fx", "USD:CNY=7.2", "--fx", "CNY:USD=0.2"], "--fx: 'CNY:USD=0.2': contradicts USD:CNY=7.2 (its reverse is"),
    (["--gpu", "h100", "--price", "h100=2USD", "--price", "h100=3USD"], "--price h100=3USD: a second price for h100-sxm"),
    (["--gpu", "h100", "--price", "h100=2USD", "--price", "h100-sxm=2USD"],
     "--price h100-sxm=2USD: a second price for h100-sxm"),
])
def test_fit_refuses_a_rate_or_price_given_twice_or_without_a_way_back(extra, fragment):
    gpu = [] if "--gpu" in extra else ["--gpu", "rtx4090"]
    run = run_cli(["fit", *gpu, "--max-gpus", "1", "--steps", "10", *extra])
    check_run(run, codes=(2,))
    assert fragment in run.stderr, run.stderr


def test_fit_takes_a_reverse_pair_that_agrees():
    run = run_cli(["fit", "--gpu", "rtx4090", "--max-gpus", "1", "--steps", "10", "--fx", "USD:CNY=8",
                   "--fx", "CNY:USD=0.125", "--json"])
    check_run(run, codes=(0,), json_out=True)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    (dict(fx={("USD", "CNY"): 1e-320}), "fx[('USD', 'CNY')]: a finite rate > 0 whose reverse (1/rate) is finite"),
    (dict(fx=["USD:CNY=1e-320"]), "fx: expected FROM:TO=RATE"),
    (dict(fx={("USD", "CNY"): 7.2, ("usd", "cny"): 7.3}), "fx[('usd', 'cny')]: a second rate for USD:CNY"),
    (dict(fx={("USD", "CNY"): 7.2, ("CNY", "USD"): 0.2}), "fx[('CNY', 'USD')]: contradicts USD:CNY=7.2"),
    (dict(fx=["USD:CNY=7.2", "USD:CNY=7.3"]), "fx: 'USD:CNY=7.3': a second rate for USD:CNY"),
    (dict(gpus=["h100"], prices={"h100": "2USD", "h100-sxm": "3USD"}), "prices['h100-sxm']: a second price for h100-sxm"),
])
def test_fit_api_rates_and_prices(kwargs, fragment):
    import trainfit
    from trainfit.errors import TrainfitError

    kwargs.setdefault("gpus", ["rtx4090"])
    with pytest.raises(TrainfitError) as exc:
        trainfit.fit(None, max_gpus=1, steps=10, **kwargs)
    assert fragment in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


# ------------------------------------------------------------------------------------------------
# trainfit.fit refused NumPy integers (max_gpus=np.int64(1) worked before the argument checks) and named the CLI's
# flags (--steps, --deadline) in its messages

def test_fit_api_takes_numpy_integers():
    np = pytest.importorskip("numpy")
    import trainfit

    a = trainfit.fit(None, gpus=["rtx4090"], max_gpus=np.int64(1), steps=np.int64(100))
    b = trainfit.fit(None, gpus=["rtx4090"], max_gpus=1, steps=100)
    assert [r.step_seconds for r in a.rows] == [r.step_seconds for r in b.rows]


@pytest.mark.parametrize(("kwargs", "fragment"), [
    (dict(max_gpus=True), "max_gpus: a whole number of cards >= 1, got True"),
    (dict(steps=True), "steps: a whole number of steps, got 'True'"),
    (dict(steps=2.5), "steps: a whole number of steps, got '2.5'"),
    (dict(steps=0), "steps: must be in 1..1,000,000,000,000, got 0"),
    (dict(steps=10, deadline_s=-5), "deadline_s: a finite duration > 0"),
    (dict(steps=10, tokens=1e6), "steps and tokens: give one, not both"),
    (dict(deadline_s=60), "deadline_s: needs the run's length, steps or tokens"),
])
def test_fit_api_messages_name_the_argument(kwargs, fragment):
    import trainfit
    from trainfit.errors import TrainfitError

    with pytest.raises(TrainfitError) as exc:
        trainfit.fit(None, gpus=["rtx4090"], **{"max_gpus": 1, **kwargs})
    assert fragment in str(exc.value), str(exc.value)
    assert "--" not in str(exc.value)


def test_goal_takes_a_numpy_integer_as_an_int():
    np = pytest.importorskip("numpy")
    from trainfit.objective import Goal

    g = Goal(steps=np.int64(100))
    assert g.steps == 100 and type(g.steps) is int


# ------------------------------------------------------------------------------------------------
# trainfit import: each framework's switches read as that framework reads them: verl and NeMo RL load their YAML
# untyped, TRL's SFTConfig(...) stores the value as given; each tests the value's truth, so a boolean or 0/1 is read
# and text (where 'no' or '0' would be true at run time) refused

def _import(tmp_path: Path, target: str, old: str, new: str):
    text = _exported(tmp_path, GRPO_CARD, target)
    assert old in text, text
    path = tmp_path / f"edited.{target}"
    path.write_text(text.replace(old, new, 1))
    out = tmp_path / "imported.yaml"
    return run_cli(["import", str(path), "--from", target, "--out", str(out)]), out


VERL_GC = "actor_rollout_ref.model.enable_gradient_checkpointing=True"
NEMO_GC = "activation_checkpointing: true"


@pytest.mark.parametrize(("target", "old", "new", "want"), [
    ("verl", VERL_GC, "actor_rollout_ref.model.enable_gradient_checkpointing=0", False),
    ("verl", VERL_GC, "actor_rollout_ref.model.enable_gradient_checkpointing=1", True),
    ("nemo-rl", NEMO_GC, "activation_checkpointing: 0", False),
    ("trl", "gradient_checkpointing=False", "gradient_checkpointing=True", True),
    ("trl", "gradient_checkpointing=False", "gradient_checkpointing=1", True),
])
def test_import_reads_each_frameworks_booleans(tmp_path, target, old, new, want):
    import yaml

    run, out = _import(tmp_path, target, old, new)
    check_run(run, codes=(0,))
    card = yaml.safe_load(out.read_text())
    assert card["parallel"]["gradient_checkpointing"] is want, card["parallel"]


@pytest.mark.parametrize(("target", "old", "new", "fragment"), [
    ("verl", VERL_GC, "actor_rollout_ref.model.enable_gradient_checkpointing=maybe",
     "--from verl: actor_rollout_ref.model.enable_gradient_checkpointing: expected true or false, got 'maybe'; verl loads the YAML untyped and"
     " tests the value's truth"),
    ("verl", VERL_GC, "actor_rollout_ref.model.enable_gradient_checkpointing=t", "got 't'; verl loads the YAML untyped"),
    ("nemo-rl", NEMO_GC, "activation_checkpointing: 1.5", "got '1.5'; NeMo RL loads the YAML untyped"),
    ("trl", "gradient_checkpointing=False", "gradient_checkpointing='on'",
     "--from trl: gradient_checkpointing: expected True or False, got 'on'; the config class (SFTConfig(...), GRPOConfig(...)) stores the value"
     " as given and tests its truth; write True or False"),
    ("trl", "gradient_checkpointing=False", "gradient_checkpointing='1'", "got '1'; the config class"),
])
def test_import_refuses_what_the_frameworks_parser_refuses(tmp_path, target, old, new, fragment):
    run, out = _import(tmp_path, target, old, new)
    check_run(run, codes=(2,), outputs=(out,))
    assert fragment in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# docs: a time-only record on the CPU (trainfit.watch(card, memory=False)) has nothing compare can judge: exit 2

def test_compare_a_cpu_time_only_record_exits_2_as_documented(tmp_path):
    def time_only_on_cpu(data):
        data["record"]["watch"]["device"] = "cpu"
        for row in data["record"]["phases"]:
            row["planned"] = {"seconds": row["planned"]["seconds"]}
            row["measured"] = {"seconds": row["measured"]["seconds"]}

    run = run_cli(["compare", str(_record(tmp_path, time_only_on_cpu))])
    check_run(run, codes=(2,))
    assert "time only, and time is not judged on the CPU" in run.stderr and "nothing to judge" in run.stderr
    doc = (Path(__file__).parents[2] / "docs" / "watch.md").read_text()
    assert "exit 2" in doc and "memory=False" in doc and "nothing to judge" in doc


# ------------------------------------------------------------------------------------------------
# README's card reference: the fields the hardening pass made strict, with the values the card allows

def test_readme_names_the_strict_fields_and_their_values():
    import re

    from trainfit.spec.enums import ResumeKind

    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    m = re.search(r"`checkpoint\.resume` (\w+) \([^)]*\) or (\w+);", readme)
    assert m is not None and {m.group(1), m.group(2)} == {k.value for k in ResumeKind}
    assert "`roles.critic` only with method ppo" in readme
    assert "`roles.reward_model` other than rule or none only with method ppo or grpo" in readme
    assert ("refused with transformers 5's fused MoE expert stacks, any `parallel.moe_experts` but the per-expert loops"
            " of transformers < 5 (loop, loop_all), which the recipe casts to fp32") in readme
    assert ("QLoRA with `parallel.moe_experts` loop_v5 (no `lora.prepare_kbit`) plans the expert stacks in bf16, without"
            " per-expert NF4 dequantisation") in readme


# ------------------------------------------------------------------------------------------------
# catalog a10g / a10: figures cite what was read, facts rather than the search's history, one memory-total statement

def test_a10g_entry_cites_what_was_read_and_agrees_with_the_a10s():
    import re

    from trainfit.catalog.gpus import resolve_gpu

    g, a10 = resolve_gpu("a10g"), resolve_gpu("a10")
    text = " ".join((g.source, g.notes, g.compute_capability_source or ""))
    assert "595.91.07" not in text  # a driver's total quoted without a reference
    assert not re.search(r"was found|was not established|no g5 price page was read|was read\b", text)
    assert "no NVIDIA boost-clock figure in the sources cited" in g.notes and "not stated by AWS" in g.notes
    assert "Price: not stored" in g.notes
    assert "https://docs.pytorch.org/torchcodec/" in g.compute_capability_source
    assert re.search(r"meta-pytorch/torchcodec \S+@[0-9a-f]{40}", g.compute_capability_source)
    assert re.search(r"https://\S+ \(updated 2022-08-05, read 2026-12-05", g.source)  # the datasheet's transcription
    assert "shows the same total" not in a10.notes and "22731 MiB" in a10.notes
    assert g.memory_bytes == 22731 * 2**20 and a10.memory_bytes == 23028 * 2**20
