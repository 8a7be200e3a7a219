"""Failure classes left open by the first hardening pass (December 2026): a value the user gave that the plan read as
nothing, silently. Each is now refused in one line naming the field and the allowed values (exit 2), or named in the
plan (a warning or an assumption line), as the product rule asks.

(a) ``preset: ''`` / ``hardware.price_preset: ''``: read as no preset / no price; refused (null or omitted: none).
(b) ``hardware.currency`` with no price to be the unit of (or beside a price preset priced in another currency):
    ignored; named in the plan's warnings (a plan never converts; ``trainfit fit --fx`` does).
(c) ``deepspeed.*`` on a strategy DeepSpeed does not run (ddp, fsdp, single, Megatron-Core's zero1): ignored; named
    in the plan's warnings, as ``rollout`` on an SFT card is.
(d) an SFT-like ``batch.seq_len`` above the model's context (``max_position_embeddings``): planned with no note;
    named in the plan's assumptions (not refused: a context is extended with RoPE scaling).
(e) ``trainfit import --from openrlhf`` with ``--algo.advantage.estimator`` given as a list: planned as its first item
    or as ppo; refused naming the flag.
Besides: ``deepspeed.reduce_bucket_size: 5e8`` in a card file (YAML 1.1 reads it as text) was refused by a message
whose own example is 5e8; read as the count."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzlib import check_run, run_cli

PRESETS = "trl, verl, openrlhf, llamafactory-z2, llamafactory-z3, ms-swift-zero2, ms-swift-zero3, nemo-rl, miles, slime, skyrl, unsloth"
SMALL = ["--model", "Qwen/Qwen3-0.6B", "--gpu", "h100", "--gpus", "8"]


def _plan_json(*args: str) -> dict:
    run = run_cli(["plan", *SMALL, *args, "--json"])
    return check_run(run, codes=(0,), json_out=True)


# ------------------------------------------------------------------------------------------------
# (a) an empty preset name

@pytest.mark.parametrize("value", ["''", '""'])
def test_an_empty_preset_is_refused(value):
    run = run_cli(["plan", *SMALL, "--set", f"preset={value}"])
    check_run(run, codes=(2,))
    assert run.stderr.rstrip() == f"trainfit: error: preset: an empty name is not allowed; allowed: {PRESETS} or null (no preset)"


def test_an_empty_preset_in_a_card_file(tmp_path: Path):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\npreset: ''\nhardware: {gpu: h100}\n")
    run = run_cli(["plan", str(card), "--json"])
    check_run(run, codes=(2,), json_out=True)
    assert "preset: an empty name is not allowed; allowed: trl, verl," in run.stderr


def test_an_empty_price_preset_is_refused(tmp_path: Path):
    from trainfit.compute.cost import price_preset_ids

    allowed = ", ".join(price_preset_ids())
    assert "rtx4090-pro" in allowed
    run = run_cli(["plan", *SMALL, "--set", "hardware.price_preset=''"])
    check_run(run, codes=(2,))
    assert run.stderr.rstrip() == (f"trainfit: error: hardware.price_preset: an empty name is not allowed; allowed:"
                                   f" {allowed} or null (no price preset)")
    card = tmp_path / "card.yaml"
    card.write_text("hardware: {gpu: rtx4090, price_preset: '  '}\n")
    run = run_cli(["fit", str(card), "--gpu", "rtx4090", "--max-gpus", "1", "--steps", "10"])
    check_run(run, codes=(2,))
    assert "hardware.price_preset: an empty name is not allowed" in run.stderr


def test_empty_names_through_the_python_api():
    import trainfit
    from trainfit.errors import CardError

    with pytest.raises(CardError, match="preset: an empty name is not allowed"):
        trainfit.plan({"preset": ""})
    with pytest.raises(CardError, match="hardware.price_preset: an empty name is not allowed"):
        trainfit.plan({"hardware": {"price_preset": ""}})


def test_null_means_no_preset_and_no_price():
    obj = _plan_json("--set", "preset=null", "--set", "hardware.price_preset=null")
    assert obj["card"].get("preset") is None and obj["cost"] is None


# ------------------------------------------------------------------------------------------------
# (b) a currency with nothing to be the unit of

def test_a_currency_without_a_price_is_named():
    obj = _plan_json("--set", "hardware.currency=CNY")
    assert obj["cost"] is None
    assert ("hardware.currency: CNY is the unit of hardware.price_per_gpu_hour, and the card gives no price (no"
            " price_per_gpu_hour, no price_preset): no cost is planned and nothing is converted (trainfit fit --fx"
            " converts between currencies)") in obj["warnings"]
    text = run_cli(["plan", *SMALL, "--set", "hardware.currency=CNY"])
    check_run(text, codes=(0,))
    assert "hardware.currency: CNY is the unit of" in " ".join(text.stdout.split())


def test_a_currency_with_its_price_is_not_named():
    obj = _plan_json("--set", "hardware.currency=CNY", "--set", "hardware.price_per_gpu_hour=2")
    assert obj["cost"]["currency"] == "CNY"
    assert not [w for w in obj["warnings"] if w.startswith("hardware.currency")]


@pytest.mark.parametrize(("currency", "named"), [("USD", True), ("CNY", False), ("cny", False)])
def test_a_currency_beside_a_price_preset(currency, named):
    run = run_cli(["plan", "--model", "Qwen/Qwen3-0.6B", "--gpu", "rtx4090", "--gpus", "4", "--scope", "lora",
                   "--set", "hardware.price_preset=rtx4090-pro", "--set", f"hardware.currency={currency}", "--json"])
    obj = check_run(run, codes=(0,), json_out=True)
    assert obj["cost"]["currency"] == "CNY"
    lines = [w for w in obj["warnings"] if w.startswith("hardware.currency")]
    assert lines == ([f"hardware.currency: {currency} is not converted to: price preset rtx4090-pro is priced in CNY,"
                      " and the plan's cost is in CNY (trainfit fit --fx converts between currencies)"] if named else [])


# ------------------------------------------------------------------------------------------------
# (c) DeepSpeed settings on a strategy that is not DeepSpeed's ZeRO

@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "single"])
def test_deepspeed_settings_on_another_strategy_are_named(strategy):
    obj = _plan_json("--set", f"parallel.strategy={strategy}", "--set", "deepspeed.overlap_comm=true",
                     "--set", "deepspeed.reduce_bucket_size=200000000")
    assert (f"deepspeed: read for strategies zero1, zero2 and zero3 on DeepSpeed only; strategy {strategy} ignores it"
            " (deepspeed.overlap_comm, deepspeed.reduce_bucket_size)") in obj["warnings"]


def test_deepspeed_settings_on_megatron_zero1_are_named():
    obj = _plan_json("--set", "parallel.strategy=zero1", "--set", "parallel.tensor_parallel=2",
                     "--set", "deepspeed.stage3_prefetch_bucket_size=auto")
    assert ("deepspeed: read for strategies zero1, zero2 and zero3 on DeepSpeed only; strategy zero1 here (Megatron-Core's"
            " distributed optimizer, with tensor, pipeline, expert or ring context parallel) ignores it"
            " (deepspeed.stage3_prefetch_bucket_size)") in obj["warnings"]


@pytest.mark.parametrize("args", [
    ("--set", "parallel.strategy=zero2", "--set", "deepspeed.overlap_comm=true"),
    ("--set", "parallel.strategy=zero1", "--set", "deepspeed.reduce_bucket_size=auto"),
    ("--set", "parallel.strategy=zero3", "--set", "deepspeed.sub_group_size=100000000"),
    ("--set", "parallel.strategy=ddp"),
])
def test_deepspeed_settings_it_reads_or_none_are_not_named(args):
    obj = _plan_json(*args)
    assert not [w for w in obj["warnings"] if w.startswith("deepspeed:")]


def test_a_deepspeed_preset(tmp_path: Path):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\npreset: llamafactory-z2\nhardware: {gpu: h100}\n")
    obj = check_run(run_cli(["plan", str(card), "--json"]), codes=(0,), json_out=True)
    assert obj["strategy"] == "zero2" and not [w for w in obj["warnings"] if w.startswith("deepspeed:")]
    # the embedded default card states fsdp, which the preset's zero2 goes under: its DeepSpeed settings are unused
    obj = _plan_json("--set", "preset=llamafactory-z2")
    assert obj["strategy"] == "fsdp"
    assert ("deepspeed: read for strategies zero1, zero2 and zero3 on DeepSpeed only; strategy fsdp ignores it"
            " (deepspeed.allgather_bucket_size, deepspeed.contiguous_gradients, deepspeed.overlap_comm,"
            " deepspeed.reduce_bucket_size; preset llamafactory-z2 sets them, under the card's strategy)") in obj["warnings"]


# ------------------------------------------------------------------------------------------------
# (d) a sequence longer than the model's context on an SFT-like card

def _context_lines(obj: dict) -> list[str]:
    return [a for a in obj["assumptions"] if a.startswith("batch.seq_len")]


@pytest.mark.parametrize("method", ["sft", "dpo"])
def test_a_sequence_beyond_the_context_is_named(method):
    run = run_cli(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "h200", "--gpus", "8", "--method", method,
                   "--seq", "100000", "--set", "loss.chunked=true", "--json"])
    obj = check_run(run, codes=(0,), json_out=True)
    assert _context_lines(obj) == [
        "batch.seq_len 100,000 is longer than Qwen/Qwen3-8B's context of 40,960 tokens (max_position_embeddings):"
        " planned at the length given, assuming the run extends the context (RoPE scaling, e.g. YaRN), whose own cost"
        " is not planned"]


def test_a_sequence_beyond_the_context_in_the_text_output():
    run = run_cli(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "h200", "--gpus", "8", "--seq", "100000",
                   "--set", "loss.chunked=true"])
    check_run(run, codes=(0,))
    assert "batch.seq_len 100,000 is longer than Qwen/Qwen3-8B's context of 40,960 tokens" in " ".join(run.stdout.split())


@pytest.mark.parametrize("seq", ["40960", "2048"])
def test_a_sequence_within_the_context_is_not_named(seq):
    run = run_cli(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "h200", "--gpus", "8", "--seq", seq,
                   "--set", "loss.chunked=true", "--json"])
    assert _context_lines(check_run(run, codes=(0,), json_out=True)) == []


def test_rl_beyond_the_context_is_still_refused():
    run = run_cli(["plan", "--method", "grpo", "--model", "Qwen/Qwen3-8B", "--gpu", "h200", "--gpus", "8",
                   "--set", "rollout.response_len=50000"])
    check_run(run, codes=(2,))
    assert "exceeds Qwen/Qwen3-8B's context of 40960 tokens" in run.stderr


# ------------------------------------------------------------------------------------------------
# (e) OpenRLHF's advantage estimator given as a list

GRPO_CARD = ("model: Qwen/Qwen3-0.6B\nmethod: grpo\nscope: lora\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n"
             "rollout: {prompt_len: 512, response_len: 1024, num_generations: 8}\n")
ESTIMATORS = "gae, reinforce, rloo, reinforce_baseline, group_norm, dr_grpo"


@pytest.fixture(scope="module")
def openrlhf_script(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("orlhf")
    card = tmp / "card.yaml"
    card.write_text(GRPO_CARD)
    out = tmp / "exported.sh"
    run = run_cli(["export", str(card), "--to", "openrlhf", "--out", str(out)])
    assert run.rc == 0, run.stderr
    text = out.read_text()
    assert "--algo.advantage.estimator group_norm" in text, text
    return text


@pytest.mark.parametrize(("given", "shown"), [
    ("reinforce group_norm", "reinforce group_norm"),
    ("group_norm gae", "group_norm gae"),
    ("'[group_norm]'", "[group_norm]"),
    ("group_norm,rloo", "group_norm,rloo"),
])
def test_an_estimator_list_is_refused(tmp_path, openrlhf_script, given, shown):
    bad = tmp_path / "bad.sh"
    bad.write_text(openrlhf_script.replace("--algo.advantage.estimator group_norm", f"--algo.advantage.estimator {given}", 1))
    out = tmp_path / "imported.yaml"
    run = run_cli(["import", str(bad), "--from", "openrlhf", "--out", str(out)])
    check_run(run, codes=(2,), outputs=(out,))
    assert run.stderr.rstrip() == (f"trainfit: error: --from openrlhf: --algo.advantage.estimator: {shown!r} is a list;"
                                   f" allowed: one of {ESTIMATORS}")


@pytest.mark.parametrize(("given", "method"), [("group_norm", "grpo"), ("gae", "ppo"), ("reinforce", "grpo"),
                                              ("rloo", "grpo"), ("reinforce_baseline", "grpo"), ("dr_grpo", "grpo")])
def test_one_estimator_still_reads(tmp_path, openrlhf_script, given, method):
    """Only gae trains a critic (OpenRLHF drops critic_pretrain for every other estimator): the critic-free ones
    other than group_norm are planned as grpo, and say so."""
    ok = tmp_path / "ok.sh"
    ok.write_text(openrlhf_script.replace("--algo.advantage.estimator group_norm", f"--algo.advantage.estimator {given}", 1))
    obj = check_run(run_cli(["import", str(ok), "--from", "openrlhf", "--json"]), codes=(0,), json_out=True)
    assert obj["card"]["method"] == method
    noted = [n for n in obj.get("notes", []) if "--algo.advantage.estimator" in n]
    assert bool(noted) == (given not in ("group_norm", "gae")), obj.get("notes")


# ------------------------------------------------------------------------------------------------
# besides: a DeepSpeed count written as 5e8 in a card file (YAML 1.1 reads it as text)

def test_a_bucket_written_as_5e8_in_a_card_file(tmp_path: Path):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\nhardware: {gpu: h100}\nparallel: {strategy: zero2}\n"
                    "deepspeed: {reduce_bucket_size: 5e8, stage3_prefetch_bucket_size: 2.5e7}\n")
    obj = check_run(run_cli(["plan", str(card), "--json"]), codes=(0,), json_out=True)
    assert obj["card"]["deepspeed"]["reduce_bucket_size"] == 500_000_000
    assert obj["card"]["deepspeed"]["stage3_prefetch_bucket_size"] == 25_000_000
    run = run_cli(["plan", *SMALL, "--set", "deepspeed.reduce_bucket_size=lots"])
    check_run(run, codes=(2,))
    assert "deepspeed.reduce_bucket_size: 'lots' is not allowed; allowed: auto or an element count" in run.stderr
