"""`trainfit calibrate` on RL run records with generation times: the whole text output, the JSON object, bad input.

The records' generation times are the planner's at the engine host constants x2 (``tests/unit/test_engine_calibration``),
so the fit recovers x2 and the error before the fit is the planner's own."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from tests.unit.test_engine_calibration import GPU, TWO, record
from trainfit.calibration import load_calibration, records_from_data
from trainfit.calibration.engine import planned_generation_s
from trainfit.cli.main import main


def _before_error() -> float:
    """Median |planned / measured - 1| of the two records at the default constants (log space, as the fit)."""
    recs = records_from_data([record(c, 2.0) for c in TWO], where="rl.yaml")
    return math.expm1(statistics.median(abs(math.log(planned_generation_s(r.card, None) / r.generation_s))
                                        for r in recs))


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rl.yaml").write_text(json.dumps([record(c, 2.0) for c in TWO]))
    return tmp_path


def test_whole_text_output(here, capsys):
    assert main(["calibrate", "rl.yaml", "--out", "cal.json"]) == 0
    before = f"{_before_error():.1%}"
    table = ("          h100-sxm: rates a plan divides by           \n"
             "┏━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━┓\n"
             "┃ rate                  ┃  before ┃   after ┃ change ┃\n"
             "┡━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━┩\n"
             "│ engine_s_per_sequence │   80 us │  160 us │     x2 │\n"
             "│ frontend_s_per_step   │ 2000 us │ 4000 us │     x2 │\n"
             "└───────────────────────┴─────────┴─────────┴────────┘")
    assert capsys.readouterr().out == (
        "wrote cal.json\n"
        "  input rl.yaml: run records\n"
        f"{table}\n"
        f"engine fit {GPU}: 2 RL records; engine host constants x2.000; median generation error {before} -> 0.0%\n"
        "  scaled: engine_s_per_sequence, frontend_s_per_step\n"
        "notes in the file:\n"
        f"  - {GPU} engine fit: 2 RL records, x2.000 on engine_s_per_sequence, frontend_s_per_step; median generation "
        f"error {before} -> 0.0%\n"
    )
    cal = load_calibration(here / "cal.json")
    assert cal.device(GPU).values() == {"engine_s_per_sequence": pytest.approx(160e-6), "frontend_s_per_step": pytest.approx(4e-3)}
    assert cal.sources == ("RL run records (generation): rl.yaml",)


def test_json_holds_the_engine_fit(here, capsys):
    assert main(["calibrate", "rl.yaml", "--out", "cal.json", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    (fit,) = obj["engine_fits"]
    assert fit["gpu"] == GPU and fit["records"] == 2 and fit["engine_scale"] == pytest.approx(2.0, rel=0.01)
    assert fit["fitted"] == ["engine_s_per_sequence", "frontend_s_per_step"]
    assert fit["median_generation_error_before"] == pytest.approx(_before_error())
    assert fit["median_generation_error_after"] < 1e-3
    assert obj["changes"][GPU]["frontend_s_per_step"] == {"old": 2e-3, "new": pytest.approx(4e-3)}
    assert obj["calibration"]["devices"][GPU]["engine_s_per_sequence"] == pytest.approx(160e-6)
    assert obj["fits"] == [] and obj["engine_held_out"] == []


def test_a_held_out_set_the_factor_makes_worse_refuses_it(here, capsys):
    (here / "held.yaml").write_text(json.dumps([record(c, 1.0) for c in TWO]))
    assert main(["calibrate", "rl.yaml", "--held-out", "held.yaml", "--out", "cal.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "engine host factor" in err and "held-out generation times got worse" in err
    assert not (here / "cal.json").exists()


@pytest.mark.parametrize(("rec", "message"), [
    ({"phases_s": {"generation": 0}}, ("rl.yaml[0]: record.phases_s.generation must be the measured seconds of the "
                                       "generation phase per step (a positive number), got 0")),
    ({"phases_s": {"generation": -1.0}}, "rl.yaml[0]: record.phases_s.generation must be"),
    ({"phases_s": {"generation": "fast"}}, "rl.yaml[0]: record.phases_s.generation must be"),
    ({"phases_s": {"generation": 3.0}, "sft": True}, "rl.yaml[0]: record.phases_s.generation is for RL records"),
])
def test_bad_input_is_one_line_and_exit_2(here, capsys, rec, message):
    card = dict(TWO[0])
    if rec.pop("sft", False):
        card = {k: v for k, v in card.items() if k not in ("method", "rollout", "preset")}
    (here / "rl.yaml").write_text(json.dumps([{**card, "record": rec}, record(TWO[1], 2.0)]))
    assert main(["calibrate", "rl.yaml", "--out", "cal.json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("trainfit: error: ") and message in err
    assert not (here / "cal.json").exists()
