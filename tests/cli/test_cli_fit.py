"""`trainfit fit`: every card count searched, ranked by the objective, prices per GPU kind, pins
honoured, limits kept, one-line refusals."""

import json

import pytest

from trainfit.cli.main import main


def run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def fit_json(argv, capsys):
    rc, out, err = run([*argv, "--json"], capsys)
    assert rc == 0, err
    return json.loads(out)


SMALL = ["--set", "model=Qwen/Qwen3-0.6B", "--set", "parallel.strategy=fsdp", "--set", "parallel.offload=none",
         "--set", "parallel.gradient_checkpointing=true", "--set", "precision.optimizer=adamw"]


def test_default_objective_is_cost_per_step_and_prices_stay_with_their_gpu(capsys):
    obj = fit_json(["fit", "--gpu", "a100-40gb,rtx4090", "--set", "scope=full", "--max-gpus", "4", "--global-batch", "12",
                    "--price", "rtx4090=rtx4090-pro", *SMALL], capsys)
    assert obj["objective"] == "cost" and obj["evaluated"] > 0
    rows = obj["rows"]
    assert all("scope" not in r["knobs"] for r in rows)  # pinned: not searched
    assert {r["gpus"] for r in rows if r["gpu"] == "rtx4090"} == {1, 2, 3, 4}  # every count, not the fewest only
    for r in rows:
        if r["gpu"] == "rtx4090":
            assert r["currency"] == "CNY" and r["cost_per_hour"] == pytest.approx(1.98 * r["gpus"])
        else:
            assert r["cost_per_hour"] is None  # the 4090's price never prices the A100
    fitting = [r for r in rows if r["fits"]]
    priced = [r for r in fitting if r["cost_per_hour"] is not None]
    assert fitting[: len(priced)] == priced  # priced rows rank first on cost
    keys = [(r["cost_per_step"], r["step_seconds"]) for r in priced]
    assert keys == sorted(keys)  # cost per step (no --steps: objective.annotate), then step time


def test_card_price_applies_to_its_own_gpu_only(tmp_path, capsys):
    card = tmp_path / "c.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\nhardware: {gpu: rtx4090, gpus_per_node: 2, price_preset: rtx4090-pro}\n")
    rows = fit_json(["fit", str(card), "--gpu", "rtx4090,a100-40gb", "--max-gpus", "2",
                     "--set", "scope=lora", "--set", "parallel.strategy=fsdp"], capsys)["rows"]
    assert {r["gpu"]: r["currency"] for r in rows if r["gpu"] == "a100-40gb"} == {"a100-40gb": None}
    assert all(r["price_id"] == "rtx4090-pro" for r in rows if r["gpu"] == "rtx4090")
    assert rows[0]["gpu"] == "rtx4090"


def test_objective_cards_gives_the_fewest_cards(capsys):
    rows = fit_json(["fit", "--gpu", "a100-40gb", "--set", "scope=full", "--set", "parallel.offload=none",
                     "--objective", "cards", "--max-gpus", "8"], capsys)["rows"]
    fitting = [r for r in rows if r["fits"]]
    assert fitting[0] == rows[0] and rows[0]["gpus"] >= 2  # 64 GB of static state cannot live on one 40 GB card
    assert [r["gpus"] for r in fitting] == sorted(r["gpus"] for r in fitting)


def test_objective_time_ranks_by_step_time(capsys):
    rows = fit_json(["fit", "--gpu", "rtx4090", "--set", "scope=lora", "--objective", "time", "--max-gpus", "4", *SMALL],
                    capsys)["rows"]
    times = [r["step_seconds"] for r in rows if r["fits"]]
    assert times == sorted(times)


def test_pinned_card_count_is_honoured(capsys):
    rows = fit_json(["fit", "--gpu", "rtx4090", "--set", "hardware.gpus_per_node=8", "--set", "scope=lora", *SMALL],
                    capsys)["rows"]
    assert rows and {r["gpus"] for r in rows} == {8}


def test_currencies_are_ranked_apart_without_a_rate_and_together_with_one(capsys):
    argv = ["fit", "--gpu", "rtx4090,a100-40gb", "--set", "scope=lora", "--max-gpus", "2", "--steps", "100",
            "--price", "rtx4090=1.98CNY", "--price", "a100-40gb=lambda-a100-40gb-8x", *SMALL]
    apart = fit_json(argv, capsys)
    assert any("USD" in w and "--fx USD:CNY=RATE" in w for w in apart["warnings"])
    fitting = [r for r in apart["rows"] if r["fits"]]
    curs = [r["currency"] for r in fitting]
    assert curs == sorted(curs, key=lambda c: c != "CNY")  # one currency's rows, then the other's: never interleaved
    together = fit_json([*argv, "--fx", "USD:CNY=7.2"], capsys)
    assert together["warnings"] == []
    ranked = [r for r in together["rows"] if r["fits"]]
    assert {r["rank_currency"] for r in ranked} == {"CNY"}
    for r in ranked:
        rate = 7.2 if r["currency"] == "USD" else 1.0
        assert r["rank_cost"] == pytest.approx(r["cost_per_run"] * rate)
    assert [r["rank_cost"] for r in ranked] == sorted(r["rank_cost"] for r in ranked)


def test_budget_and_deadline_are_limits(capsys):
    base = ["fit", "--gpu", "rtx4090", "--set", "scope=lora", "--max-gpus", "2", "--steps", "1000",
            "--price", "rtx4090=rtx4090-pro", *SMALL]
    free = fit_json(base, capsys)["rows"]
    best = free[0]
    assert best["fits"] and best["within_limits"] and best["run_steps"] == 1000
    assert best["run_seconds"] == pytest.approx(1000 * best["step_seconds"])
    assert best["cost_per_run"] == pytest.approx(best["cost_per_hour"] * best["run_seconds"] / 3600)
    broke = fit_json([*base, "--budget", f"{best['cost_per_run'] * 0.5:.6f}CNY"], capsys)["rows"]
    assert not any(r["within_limits"] for r in broke)
    hurry = fit_json([*base, "--deadline", f"{best['run_seconds'] * 0.99:.3f}s", "--objective", "cost"], capsys)["rows"]
    assert all(r["run_seconds"] <= best["run_seconds"] * 0.99 for r in hurry if r["within_limits"])
    rc, out, _ = run([*base, "--budget", "0.0001CNY"], capsys)
    assert rc == 0 and "no plan fits within the limits" in out


def test_tokens_give_the_run_length_per_row(capsys):
    rows = fit_json(["fit", "--gpu", "rtx4090", "--set", "scope=lora", "--max-gpus", "2", "--tokens", "1e9",
                     "--price", "rtx4090=rtx4090-pro", *SMALL], capsys)["rows"]
    r = rows[0]
    tokens_per_step = r["tokens_per_s"] * r["step_seconds"]
    assert r["run_steps"] == pytest.approx(1e9 / tokens_per_step, abs=1)


def test_price_table_file(tmp_path, capsys):
    table = tmp_path / "prices.yaml"
    table.write_text("entries:\n  - {id: mine, gpu: '4090', per_gpu_hour: 0.5, currency: usd, source: quote, as_of: '2026-11-30'}\n")
    rows = fit_json(["fit", "--gpu", "rtx4090", "--set", "scope=lora", "--max-gpus", "2", "--price-table", str(table),
                     *SMALL], capsys)["rows"]
    assert all(r["price_id"] == "mine" and r["currency"] == "USD" for r in rows)
    assert rows[0]["cost_per_hour"] == pytest.approx(0.5 * rows[0]["gpus"])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["fit", "--gpu", ","], "--gpu: no card type left after the filters"),
        (["fit", "--price", "rtx4090=1.98"], "no currency"),
        (["fit", "--price", "a100-40gb=rtx4090-pro"], "is for rtx4090, not a100-40gb"),
        (["fit", "--gpu", "nvidia-9000"], "nvidia-9000"),
        (["fit", "--max-gpus", "0"], "--max-gpus: must be at least 1"),
        (["fit", "--objective", "fast"], "--objective: 'fast' is not one of cost, time, cards"),
        (["fit", "--deadline", "10h"], "--deadline: needs the run's length"),
        (["fit", "--steps", "10", "--deadline", "soon"], "--deadline: expected a duration"),
        (["fit", "--budget", "300"], "no currency"),
        (["fit", "--fx", "USD=7"], "--fx: expected FROM:TO=RATE"),
        (["fit", "--market", "moon"], "--market: 'moon' is not in the price table"),
        (["fit", "--global-batch", "3", "--set", "batch.micro_batch_size=2"], "fit: a global batch of 3 sequences"),
    ],
)
def test_fit_bad_input(argv, expected, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and expected in err


def test_fit_keeps_the_global_batch(capsys):
    rows = fit_json(["fit", "--gpu", "a100-40gb", "--set", "scope=full", "--global-batch", "32", "--max-gpus", "8",
                     "--set", "parallel.offload=none", "--set", "precision.optimizer=adamw"], capsys)["rows"]
    assert any(r["parallel"]["pipeline_parallel"] > 1 for r in rows)  # 6 cards: 32 sequences need pp 3 (dp 2)
    for r in rows:
        b, p = r["knobs"]["batch"], r["parallel"]
        data_parallel = r["gpus"] // (p["tensor_parallel"] * p["pipeline_parallel"] * p["context_parallel"])
        assert b["micro_batch_size"] * b["grad_accum"] * data_parallel == 32


def test_pinned_gpu_kind_and_knob_are_honoured(capsys):
    rows = fit_json(["fit", "--set", "hardware.gpu=a100-80gb", "--set", "scope=lora", "--set", "loss.chunked=true",
                     "--max-gpus", "2", *SMALL], capsys)["rows"]
    assert rows and {r["gpu"] for r in rows} == {"a100-80gb"}
    assert all("loss.chunked" not in r["knobs"] for r in rows)


def test_market_prices_each_kind_from_the_catalog_table(capsys):
    rows = fit_json(["fit", "--gpu", "rtx4090,rtx4090d,h100-sxm", "--market", "cn-rental", "--set", "scope=lora",
                     "--max-gpus", "1", "--steps", "10", *SMALL], capsys)["rows"]
    ids = {r["gpu"]: r["price_id"] for r in rows}
    assert ids == {"rtx4090": "rtx4090-youth", "rtx4090d": "suanjiayun-rtx4090d", "h100-sxm": ""}
    assert rows[-1]["gpu"] == "h100-sxm"  # unpriced in that market: ranked after the priced rows


def test_header_says_cost_per_step_without_a_run_length_and_cost_per_run_with_one(capsys):
    """The table's title names what it ranks by (fit_cmd: cost per step without --steps/--tokens)."""
    argv = ["fit", "--gpu", "rtx4090", "--set", "scope=lora", "--max-gpus", "2", "--global-batch", "4",
            "--price", "rtx4090=rtx4090-pro", *SMALL]
    rc, out, err = run(argv, capsys)
    assert rc == 0, err
    assert "ranked by cost per step (then step time)" in " ".join(out.split())
    assert "best by cost per step (then step time):" in " ".join(out.split()) and "/step" in out
    rc, out, err = run([*argv, "--steps", "100"], capsys)
    assert rc == 0, err
    assert "ranked by cost per run" in " ".join(out.split())


def test_header_says_step_time_when_no_row_has_a_price(capsys):
    """Without a price, objective.rank_key ranks by step time: the title says so (as report.html's caption does),
    not 'cost per step'."""
    argv = ["fit", "--gpu", "rtx4090", "--set", "scope=lora", "--max-gpus", "2", "--global-batch", "4", *SMALL]
    rc, out, err = run(argv, capsys)
    assert rc == 0, err
    text = " ".join(out.split())
    assert "ranked by cost per step" not in text and "best by cost per step" not in text
    assert "ranked by step time (no row has a price, so cost cannot rank)" in text
    assert "-/step" not in text and " s/step" in text
