"""The Python API: trainfit.plan / fit / size / trace give the CLI's numbers; `import trainfit` stays cheap."""

import contextlib
import io
import json
import subprocess
import sys

import pytest

import trainfit
from trainfit.cli.main import main
from trainfit.errors import CardError


def _cli_json(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


def test_import_trainfit_loads_no_planner_and_no_torch():
    code = (
        "import sys, trainfit\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('trainfit.'))\n"
        "assert loaded == [], loaded\n"
        "assert 'torch' not in sys.modules and 'pydantic' not in sys.modules and 'typer' not in sys.modules\n"
        "p = trainfit.plan({'method': 'grpo', 'scope': 'lora'})\n"
        "assert 'torch' not in sys.modules, 'the planning path imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_plan_trace_size_are_callable_whatever_was_imported_first():
    code = (
        "import importlib, sys\n"
        "for first in ('trainfit.plan.result', 'trainfit.plan', 'trainfit.size', 'trainfit.trace.types', 'trainfit'):\n"
        "    for k in [k for k in sys.modules if k == 'trainfit' or k.startswith('trainfit.')]:\n"
        "        del sys.modules[k]\n"
        "    importlib.import_module(first)\n"
        "    import trainfit\n"
        "    from trainfit.plan import make_plan\n"
        "    from trainfit import plan\n"
        "    assert callable(trainfit.plan) and callable(trainfit.trace) and callable(trainfit.size), first\n"
        "    assert plan is trainfit.plan and trainfit.plan().fits, first\n"
        "    assert make_plan is trainfit.plan.make_plan, first\n"
        "    assert trainfit.size('Qwen/Qwen3-0.6B').params_total == 596049920, first\n"
        "    assert trainfit.trace.TraceRequest.__name__ == 'TraceRequest', first\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_plan_with_overrides_is_the_cli_plan_with_set():
    sets = {"method": "grpo", "scope": "lora", "hardware.gpu": "rtx4090", "hardware.gpus_per_node": 4,
            "rollout.response_len": 2048, "loss.chunked": True}
    p = trainfit.plan(None, overrides=sets)  # None: the embedded default card, as the CLI without a card
    assert p.card.rollout.response_len == 2048
    cli = _cli_json(["plan", *(a for k, v in sets.items() for a in ("--set", f"{k}={json.dumps(v)}")), "--json"])
    cli.pop("suggestions")
    assert json.loads(json.dumps(p.to_dict())) == cli


def test_a_dict_card_is_not_edited():
    card = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "rtx4090", "gpus_per_node": 4}}
    assert trainfit.plan(card, overrides={"hardware.gpus_per_node": 8}).card.world_size == 8
    assert card == {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "rtx4090", "gpus_per_node": 4}}


def test_a_runcard_with_overrides_and_presets():
    base = trainfit.load_card({"method": "ppo", "preset": "verl"})
    assert base.rollout.sleep_level == trainfit.plan({"method": "ppo", "preset": "verl"}).card.rollout.sleep_level
    p = trainfit.plan(base, overrides={"hardware.gpus_per_node": 2})
    assert p.card.world_size == 2 and p.card.method.value == "ppo"


@pytest.mark.parametrize("card, match", [
    (42, "card: expected None, a dict, a path or a RunCard, got int"),
    ({"hardware": {"gpus": 3}}, "hardware.gpus: unknown key"),
    ("/nonexistent/card.yaml", "card"),
])
def test_bad_cards_raise_the_cli_line(card, match):
    with pytest.raises(trainfit.errors.TrainfitError, match=match):
        trainfit.plan(card)


def test_notebook_repr_is_the_reports_svg():
    from trainfit.report.html import chart_model, plan_svg

    p = trainfit.plan({"model": "Qwen/Qwen3.5-27B", "scope": "qlora", "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
                       "parallel": {"strategy": "single"}, "batch": {"seq_len": 8192}})
    html = p._repr_html_()
    assert plan_svg(chart_model(p)) in html
    assert ("DOES NOT FIT" in html) == (not p.fits) and "<script" not in html and "http://" not in html.replace("http://www.w3.org", "")


def test_fit_wrapper_is_the_cli_search():
    card = {"model": "Qwen/Qwen3-0.6B", "scope": "lora", "loss": {"chunked": True}, "precision": {"optimizer": "adamw"},
            "parallel": {"gradient_checkpointing": True, "offload": "none"}}
    r = trainfit.fit(card, gpus=["rtx4090", "a100-80gb"], max_gpus=2, prices={"rtx4090": "1.98CNY", "a100-80gb": "9CNY"},
                     steps=100)
    set_args = ["--set", "scope=lora", "--set", "loss.chunked=true", "--set", "precision.optimizer=adamw",
                "--set", "parallel.gradient_checkpointing=true", "--set", "parallel.offload=none"]
    cli = _cli_json(
                    ["fit", *set_args, "--set", "model=Qwen/Qwen3-0.6B", "--gpu", "rtx4090,a100-80gb", "--max-gpus", "2",
                     "--price", "rtx4090=1.98CNY", "--price", "a100-80gb=9CNY", "--steps", "100", "--json"])
    assert [(x.gpu, x.gpus, x.fits) for x in r.rows] == [(x["gpu"], x["gpus"], x["fits"]) for x in cli["rows"]]
    assert [x.cost_per_run for x in r.rows] == pytest.approx([x["cost_per_run"] for x in cli["rows"]])
    with pytest.raises(CardError, match="objective: 'speed' is not one of cost, time, cards"):
        trainfit.fit(card, gpus=["rtx4090"], objective="speed")
    with pytest.raises(CardError, match="is for rtx4090, not a100-80gb"):
        trainfit.fit(card, gpus=["a100-80gb"], prices={"a100-80gb": "rtx4090-pro"})


@pytest.mark.slow
@pytest.mark.trace
def test_trace_wrapper_traces_the_card():
    pytest.importorskip("torch")
    card = {"model": "Qwen/Qwen3-0.6B", "hardware": {"gpus_per_node": 1}, "parallel": {"strategy": "single"},
            "batch": {"seq_len": 256}}
    t = trainfit.trace(card, layers=2)
    assert {"forward", "backward", "optimizer_step"} <= {p.name for p in t.phases}
    assert t.params_total < trainfit.plan(card).params_total and any("truncated to 2 of 28 layers" in n for n in t.notes)


def test_fit_prices_from_the_catalog_market_as_the_cli():
    card = {"model": "Qwen/Qwen3-0.6B", "scope": "lora", "loss": {"chunked": True}, "precision": {"optimizer": "adamw"},
            "parallel": {"gradient_checkpointing": True, "offload": "none"}}
    r = trainfit.fit(card, gpus=["rtx4090"], max_gpus=1, market="cn-rental", steps=100)
    cli = _cli_json(["fit", "--set", "model=Qwen/Qwen3-0.6B", "--set", "scope=lora", "--set", "loss.chunked=true",
                     "--set", "precision.optimizer=adamw", "--set", "parallel.gradient_checkpointing=true",
                     "--set", "parallel.offload=none", "--gpu", "rtx4090", "--max-gpus", "1", "--market", "cn-rental",
                     "--steps", "100", "--json"])
    assert [(x.price_id, x.currency) for x in r.rows] == [(x["price_id"], x["currency"]) for x in cli["rows"]]
    assert r.rows[0].currency == "CNY"
    with pytest.raises(CardError, match="market: 'moon' is not in the price table"):
        trainfit.fit(card, gpus=["rtx4090"], market="moon")
