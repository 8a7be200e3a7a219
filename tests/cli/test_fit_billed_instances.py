"""`trainfit fit` bills whole instances: a price for an 8-GPU instance (AWS p5.48xlarge, Lambda's 8x offers) charges
every GPU of it to a row of fewer cards, so the cost ranking compares what is paid. A review found
`trainfit fit SMALLCARD --gpu h100-sxm --price h100-sxm=aws-p5-h100-sxm --steps 1000 --max-gpus 8` ranking 1 card
cheapest at 6.88 USD/h, a GPU's share of the 55.04 USD/h instance AWS bills whole (the entry's label:
"p5.48xlarge (8x H100 SXM 80GB) ... per GPU (55.04 USD/h / 8)")."""

import json

import pytest

from trainfit.cli.main import main

SMALL = ["--set", "parallel.strategy=ddp", "--set", "parallel.offload=none", "--set", "loss.chunked=false",
         "--set", "parallel.gradient_checkpointing=false", "--set", "precision.optimizer=adamw",
         "--set", "parallel.tensor_parallel_impl=dtensor"]


def fit(argv, capsys, *, as_json=True):
    rc = main([*argv, "--json"] if as_json else argv)
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out) if as_json else out


@pytest.fixture
def small_card(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text("model: Qwen/Qwen3-0.6B\nmethod: sft\n")
    return str(path)


def test_reproducer_the_whole_instance_is_cheapest(small_card, capsys, tmp_path):
    argv = ["fit", small_card, "--gpu", "h100-sxm", "--price", "h100-sxm=aws-p5-h100-sxm", "--steps", "1000",
            "--max-gpus", "8"]
    rows = {r["gpus"]: r for r in fit(argv, capsys)["rows"]}
    assert min(rows.values(), key=lambda r: r["cost_per_run"])["gpus"] == 8
    assert all(r["billed_gpus"] == 8 and r["cost_per_hour"] == pytest.approx(55.04) for r in rows.values())
    assert rows[1]["billing_note"] == "1 of 8 GPUs of p5.48xlarge used: billed for 8" and rows[8]["billing_note"] == ""
    # the run's cost is the step time at the whole instance's rate
    one = rows[1]
    assert one["cost_per_run"] == pytest.approx(1000 * one["step_seconds"] / 3600 * 55.04)
    html = tmp_path / "fit.html"
    text = fit([*argv, "--html", str(html)], capsys, as_json=False)
    assert "best by cost per run: 8 x h100-sxm" in text
    assert "billed 1 x h100-sxm (aws-p5-h100-sxm): 1 of 8 GPUs of p5.48xlarge used: billed for 8" in text
    assert "1 of 8 GPUs of p5.48xlarge used: billed for 8" in html.read_text()


def test_market_bills_the_8x_instance_to_two_and_four_cards(capsys):
    """cloud-on-demand prices the A100 40GB from Lambda's 8x instance (1.99 USD a GPU) and AWS p4d.24xlarge (2.7447):
    both rent 8 GPUs whole, so 2 and 4 cards pay for 8 at the cheaper instance, 15.92 USD/h."""
    rows = fit(["fit", "--gpu", "a100-40gb", "--market", "cloud-on-demand", "--set", "model=Qwen/Qwen3-0.6B",
                "--set", "scope=lora", "--max-gpus", "4", "--global-batch", "8", *SMALL], capsys)["rows"]
    by = {r["gpus"]: r for r in rows}
    assert set(by) == {1, 2, 4}
    for n in (2, 4):
        assert by[n]["price_id"] == "lambda-a100-40gb-8x" and by[n]["billed_gpus"] == 8
        assert by[n]["cost_per_hour"] == pytest.approx(8 * 1.99)
        assert by[n]["billing_note"] == f"{n} of 8 GPUs of 8x NVIDIA A100 SXM 40 GB used: billed for 8"


def test_price_table_gives_each_row_the_entry_that_rents_its_count_cheapest(tmp_path, capsys):
    """A single-GPU offer at 3.00 USD and an 8-GPU instance at 2.00 USD a GPU: 1, 2 and 4 cards rent singles
    (12 < 16 USD/h at 4), 8 cards the instance (16 < 24)."""
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"entries": [
        {"id": "single", "gpu": "h100-sxm", "per_gpu_hour": 3.0, "currency": "USD", "gpus_per_instance": 1},
        {"id": "node", "gpu": "h100-sxm", "per_gpu_hour": 2.0, "currency": "USD", "gpus_per_instance": 8,
         "instance": "8x H100 node"},
    ]}))
    rows = fit(["fit", "--gpu", "h100-sxm", "--price-table", str(table), "--set", "model=Qwen/Qwen3-0.6B",
                "--set", "scope=lora", "--max-gpus", "8", "--global-batch", "8", *SMALL], capsys)["rows"]
    by = {r["gpus"]: (r["price_id"], r["billed_gpus"], round(r["cost_per_hour"], 6)) for r in rows}
    assert by == {1: ("single", 1, 3.0), 2: ("single", 2, 6.0), 4: ("single", 4, 12.0), 8: ("node", 8, 16.0)}


def test_a_plain_price_stays_per_gpu(small_card, capsys):
    rows = fit(["fit", "--gpu", "h100-sxm", "--price", "h100-sxm=6.88USD", "--set", "model=Qwen/Qwen3-0.6B",
                "--set", "scope=lora", "--max-gpus", "2", "--global-batch", "8", *SMALL], capsys)["rows"]
    assert {r["gpus"]: (r["billed_gpus"], r["billing_note"]) for r in rows} == {1: (1, ""), 2: (2, "")}
    assert {r["gpus"]: round(r["cost_per_hour"], 6) for r in rows} == {1: 6.88, 2: 13.76}


def test_a_card_states_the_unit_of_its_own_price(tmp_path, capsys):
    """hardware.price_gpus_per_instance: the card's own price is for a whole 8-GPU instance (fit_search.card_price)."""
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\nmethod: sft\nscope: lora\nhardware:\n  gpu: h100-sxm\n"
                    "  price_per_gpu_hour: 6.88\n  currency: USD\n  price_gpus_per_instance: 8\n")
    rows = fit(["fit", str(card), "--gpu", "h100-sxm", "--max-gpus", "2", "--global-batch", "8", *SMALL], capsys)["rows"]
    assert {r["gpus"]: (r["billed_gpus"], round(r["cost_per_hour"], 6)) for r in rows} == {1: (8, 55.04), 2: (8, 55.04)}
    assert {r["billing_note"] for r in rows} == {"1 of 8 GPUs of one 8-GPU instance used: billed for 8",
                                                 "2 of 8 GPUs of one 8-GPU instance used: billed for 8"}


@pytest.mark.parametrize(("hardware", "expected"), [
    ("  price_per_gpu_hour: 1\n  currency: USD\n  price_gpus_per_instance: 8x\n",
     "trainfit: error: hardware.price_gpus_per_instance: '8x' is not allowed; allowed: a whole number of GPUs 1 to 1024"),
    ("  price_gpus_per_instance: 8\n",  # fit takes the price off the card before validating it: refused all the same
     "trainfit: error: hardware.price_gpus_per_instance: 8 is the rentable unit of hardware.price_per_gpu_hour, and the"
     " card gives none; allowed: null, or give price_per_gpu_hour"),
])
def test_fit_refuses_a_bad_unit_on_the_card_in_one_line(tmp_path, capsys, hardware, expected):
    card = tmp_path / "card.yaml"
    card.write_text(f"model: Qwen/Qwen3-0.6B\nhardware:\n  gpu: h100-sxm\n{hardware}")
    rc = main(["fit", str(card), "--gpu", "h100-sxm", "--max-gpus", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(expected) and err.count("\n") == 1 and "Traceback" not in err
