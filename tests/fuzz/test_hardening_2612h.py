"""Findings of the sixth review of the December 2026 hardening pass, as explicit cases (each fails without its fix).
As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line, exit code 2,
no traceback and no output file; the Python API raises trainfit's own error class with the CLI's one line.

Checked in the same review and found clean (no case kept, nothing to fix): ``plan`` / ``plan --json`` on ~15,000
cards with one to four fields of any section set to their bounds, midpoints, enum members or booleans (GRPO verl LoRA
with layered_summon, verl with a clip ratio, DPO under megatron TP x EP x PP and under CP x TP, PPO, QLoRA with
attention_kernel fa2), with exports to trl / verl / deepspeed / openrlhf / accelerate of a third of the planned ones;
rollout.response_clip_ratio x response_len_batch_max x response_len_mean x response_len 1-3; attention_kernel values
under sdpa and eager; DPO / RM / GRPO / PPO / SFT x full / LoRA / QLoRA x TP, EP, PP, CP and mixed layouts on three
models, each exported to five targets; ``--set`` on the newest rollout fields; verl import of layered_summon /
load_format / lora_rank / rollout.name edits; every DeviceRates field and the file's top-level keys of a calibration
file set to hostile values (plan and fit); watch records mutated at random for ``compare``, ``calibrate --dry-run``,
``calibrate --out`` (no file left on a refusal) and ``record --measured``; ``diagnose`` with binary, UTF-16, 5 MB,
CR-only, NaN / 1e400 / negative sizes and special-file logs; ``check --audit`` with mutated audit reports; ``size``
with odd models and flags; the web API's plan and fit entry points (worker.call) on odd cards, GPU lists, counts and
prices; strings with newlines, quotes, $(...), backticks and ${...} in lora.modules_to_save,
rollout.quantization_bf16_modules, software pins, recipe fields, model.id / revision / path and ia3 targets, exported
to every target (scripts run under stub launchers, the TRL module executed with stand-ins: no code ran)."""

from __future__ import annotations

import pytest

import trainfit
from trainfit.errors import CardError

_FIT = dict(gpus=["rtx4090"], max_gpus=1, steps=10)


# ------------------------------------------------------------------------------------------------
# 1. trainfit.fit(fx=...): anything but None, a mapping or an iterable escaped as Python's own TypeError
#    ("'float' object is not iterable"), and one "USD:CNY=7.2" string was read character by character
#    ("fx: expected FROM:TO=RATE ..., got 'U'").
@pytest.mark.parametrize("fx", [7.2, 1, object(), b"USD:CNY=7.2", (x for x in ["USD:CNY=7.2"])])
def test_fit_refuses_an_fx_that_is_no_mapping_or_list_in_its_own_error(fx):
    with pytest.raises(CardError) as exc:
        trainfit.fit(None, fx=fx, **_FIT)
    assert str(exc.value).startswith("fx: a mapping {('USD', 'CNY'): 7.2}, a list of 'FROM:TO=RATE' strings or None, got")
    assert "\n" not in str(exc.value)


def test_fit_reads_one_fx_string_as_one_rate():
    one = trainfit.fit(None, fx="USD:CNY=7.2", **_FIT)
    listed = trainfit.fit(None, fx=["USD:CNY=7.2"], **_FIT)
    assert one.goal.fx == listed.goal.fx and ("USD", "CNY") in one.goal.fx


# ------------------------------------------------------------------------------------------------
# 2. trainfit.watch(card, ...): a card or record that is no path, mapping or RunCard (5, b"card.yaml") and a
#    calibration that is no path escaped as pathlib's TypeError ("expected str, bytes or os.PathLike object, not
#    int"); a device other than cuda / cuda:N / cpu ('tpu', 'mps', 5) was measured on the CPU silently, and a memory
#    flag that is no boolean ('no') was read by its truth. Each is now refused in one line naming the argument.
SFT = {"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}, "parallel": {"strategy": "single"}}


@pytest.mark.parametrize("kw, line", [
    (dict(card=5), "watch: card: a RunCard, a card file path or a card mapping, got int '5'"),
    (dict(card=b"card.yaml"), "watch: card: a RunCard, a card file path or a card mapping, got bytes"),
    (dict(card=None), "watch: card: a RunCard, a card file path or a card mapping, got NoneType"),
    (dict(record=5), "watch: record: a file path or None, got int '5'"),
    (dict(calibration=5), "calibration: a path, a Calibration (trainfit.calibration.load_calibration) or None, got int '5'"),
    (dict(device="tpu"), "watch: device: 'cuda', 'cuda:N', 'cpu' or None (CUDA when available), got 'tpu'"),
    (dict(device="mps"), "watch: device: 'cuda', 'cuda:N', 'cpu' or None (CUDA when available), got 'mps'"),
    (dict(device=5), "watch: device: 'cuda', 'cuda:N', 'cpu' or None (CUDA when available), got 5"),
    (dict(memory="no"), "watch: memory: true or false, got str 'no'"),
    (dict(log_fn=5), "watch: log_fn: a callable log_fn(metrics, step) or None, got int '5'"),
])
def test_watch_refuses_arguments_of_the_wrong_type_in_its_own_error(kw, line):
    from trainfit.watch.core import Watch

    kw = {"card": SFT} | kw
    with pytest.raises(CardError) as exc:
        Watch(kw.pop("card"), **kw)
    assert str(exc.value).startswith(line), str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:1", None])
def test_watch_takes_the_devices_it_measures(device):
    from trainfit.watch.core import Watch

    assert Watch(SFT, device=device).device == device


def test_watch_replan_refuses_a_card_of_the_wrong_type():
    from trainfit.watch.core import Watch

    with pytest.raises(CardError) as exc:
        Watch(SFT).replan([1])
    assert str(exc.value) == "watch: card: a RunCard, a card file path or a card mapping, got list '[1]'"


# ------------------------------------------------------------------------------------------------
# 3. trainfit import --from verl: the override values were read with Python's spellings, not Hydra's. Hydra's override
#    lexer takes true / false / null in any case (BOOL, NULL: facebookresearch/hydra hydra/grammar/OverrideLexer.g4
#    l.53-57 @048399369016cbeb9466300bebbc2249e1c8b945) and 'None' as a plain string (an ID). So
#    'actor_rollout_ref.rollout.layered_summon=None' (a string, true to verl's `if` test) was read as null, the switch
#    off, silently; and '...layered_summon=TRUE' (Hydra's true) was refused as text.
def _verl_script(tmp_path, old: str, new: str):
    from test_hardening_2612 import _exported

    card = ("model: Qwen/Qwen3-8B\nmethod: grpo\npreset: verl\nscope: lora\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n"
            "rollout: {tensor_parallel: 2, response_len: 2048, layered_summon: true}\n")
    text = _exported(tmp_path, card, "verl")
    assert old in text, text
    path = tmp_path / "edited.sh"
    path.write_text(text.replace(old, new, 1))
    return path


def test_verl_import_refuses_python_none_as_a_switch(tmp_path):
    from fuzzlib import check_run, run_cli

    path = _verl_script(tmp_path, "rollout.layered_summon=True", "rollout.layered_summon=None")
    out = tmp_path / "imported.yaml"
    run = run_cli(["import", str(path), "--from", "verl", "--out", str(out)])
    check_run(run, codes=(2,), outputs=(out,))
    assert ("actor_rollout_ref.rollout.layered_summon: expected true or false, got 'None'; verl loads the YAML untyped"
            in run.stderr), run.stderr


@pytest.mark.parametrize("spelled, value", [("TRUE", True), ("tRuE", True), ("FALSE", None), ("NULL", None)])
def test_verl_import_reads_hydras_booleans_and_null_in_any_case(tmp_path, spelled, value):
    import yaml

    from fuzzlib import check_run, run_cli

    path = _verl_script(tmp_path, "rollout.layered_summon=True", f"rollout.layered_summon={spelled}")
    out = tmp_path / "imported.yaml"
    run = run_cli(["import", str(path), "--from", "verl", "--out", str(out)])
    check_run(run, codes=(0,), outputs=(out,))
    assert yaml.safe_load(out.read_text())["rollout"].get("layered_summon") is value


# ------------------------------------------------------------------------------------------------
# Bounded generated cases for the three findings (a few dozen examples each, derandomized; fast).
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzzlib import case  # noqa: E402

_SMALL = settings(max_examples=40, deadline=None, derandomize=True, database=None)
_HYDRA_WORDS = st.sampled_from(["True", "true", "TRUE", "False", "FALSE", "null", "NULL", "Null", "None", "none", "0", "1",
                                "2", "-1", "1.0", "yes", "no", "on", "off", "''", "[true]", "nan", "inf"]) \
    | st.text(alphabet="TtRrUuEeFfAaLlSsNnOo01", min_size=1, max_size=6)


def _hydra_truth(word: str):
    """What verl's `if` test sees for an unquoted override word (Hydra's lexer l.53-57), or 'refused' where the
    importer must refuse it (any value that is no boolean, no null and no 0 / 1)."""
    low = word.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return False  # absent: verl's default
    if word in ("0", "1"):
        return word == "1"
    return "refused"


@_SMALL
@given(word=_HYDRA_WORDS)
@case
def test_verl_import_reads_a_switch_as_hydra_and_verl_do(tmp_path_factory, word):
    import yaml

    from fuzzlib import check_run, run_cli

    tmp_path = tmp_path_factory.mktemp("hydra")
    path = _verl_script(tmp_path, "rollout.layered_summon=True", f"rollout.layered_summon={word}")
    out = tmp_path / "imported.yaml"
    run = run_cli(["import", str(path), "--from", "verl", "--out", str(out)])
    want = _hydra_truth(word)
    if want == "refused":
        check_run(run, codes=(2,), outputs=(out,))
    else:
        check_run(run, codes=(0,), outputs=(out,))
        assert bool(yaml.safe_load(out.read_text())["rollout"].get("layered_summon")) is want, (word, run.stdout)


@_SMALL
@given(value=st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=8),
                       st.binary(max_size=4), st.lists(st.integers(), max_size=2), st.sampled_from(["cpu", "cuda", "cuda:0"])),
       arg=st.sampled_from(["card", "record", "device", "memory", "log_fn", "calibration"]))
@case
def test_watch_arguments_end_in_trainfit_errors(value, arg):
    """Any value of any argument: a Watch, or trainfit's own error in one line (never Python's TypeError)."""
    from trainfit.errors import TrainfitError
    from trainfit.watch.core import Watch

    kw = {"card": SFT, arg: value}
    if arg in ("record", "calibration") and isinstance(value, str):
        kw[arg] = None  # a text path is a real file name: not this test's concern
    try:
        Watch(kw.pop("card"), **kw)
    except TrainfitError as exc:
        assert "\n" not in str(exc), str(exc)


# ------------------------------------------------------------------------------------------------
# 4. trainfit.fit: the messages named the command line's flags, not the function's arguments, and a global_batch of 0
#    was told it splits into too many accumulation steps: max_gpus=0 ('fit: --max-gpus 0 leaves no card count to
#    try'), global_batch=0 ('global_batch: 0 sequences per step split into more accumulation steps than
#    batch.grad_accum allows'), price_table='/missing' ('--price-table: no such file').
@pytest.mark.parametrize("kw, line", [
    (dict(max_gpus=0), "max_gpus: a whole number of cards >= 1, got 0"),
    (dict(max_gpus=-3), "max_gpus: a whole number of cards >= 1, got -3"),
    (dict(global_batch=0), "global_batch: a whole number of sequences per optimizer step >= 1, got 0"),
    (dict(global_batch=-1), "global_batch: a whole number of sequences per optimizer step >= 1, got -1"),
    (dict(price_table="/nonexistent/prices.yaml"), "price_table: no such file '/nonexistent/prices.yaml'"),
])
def test_fit_names_its_own_arguments(kw, line):
    with pytest.raises(CardError) as exc:
        trainfit.fit(None, **(_FIT | kw))
    assert str(exc.value).startswith(line), str(exc.value)
