"""`trainfit fit`: ranked rows, pinned knobs respected, one-line refusals."""

import json

import pytest

from trainfit.cli.main import main


def run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_fit_json_rows_ranked_and_pinned_scope(capsys):
    rc, out, _ = run(["fit", "--gpu", "a100-40gb,rtx4090", "--set", "scope=full", "--max-gpus", "8",
                      "--price", "rtx4090=rtx4090-pro", "--json"], capsys)
    assert rc == 0
    obj = json.loads(out)
    assert obj["evaluated"] > 0 and obj["seconds"] >= 0
    rows = obj["rows"]
    assert rows and all(set(r) >= {"gpu", "gpus", "fits", "peak_gpu_bytes", "step_seconds", "cost_per_hour",
                                   "currency", "knobs"} for r in rows)
    assert all("scope" not in r["knobs"] for r in rows)  # pinned: not searched
    fitting = [r for r in rows if r["fits"]]
    assert fitting and fitting[0] == rows[0]
    assert [r["gpus"] for r in fitting] == sorted(r["gpus"] for r in fitting)
    r4090 = [r for r in rows if r["gpu"] == "rtx4090" and r["fits"]]
    if r4090:
        assert r4090[0]["currency"] == "CNY"
        assert r4090[0]["cost_per_hour"] == pytest.approx(1.98 * r4090[0]["gpus"])
    assert any(r["pareto"] for r in fitting)


def test_fit_fewest_cards_for_full_sft_of_qwen3_8b_on_a100_40gb(capsys):
    rc, out, _ = run(["fit", "--gpu", "a100-40gb", "--set", "scope=full", "--set", "parallel.offload=none", "--json"], capsys)
    rows = json.loads(out)["rows"]
    best = rows[0]
    assert best["fits"] and best["gpus"] >= 2  # 64 GB of static state cannot live on one 40 GB card


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["fit", "--gpu", ","], "--gpu: no card type left after the filters"),
        (["fit", "--price", "rtx4090=1.98"], "no currency"),
        (["fit", "--gpu", "nvidia-9000"], "nvidia-9000"),
        (["fit", "--max-gpus", "0"], "--max-gpus: must be at least 1"),
        (["fit", "--global-batch", "3", "--set", "batch.micro_batch_size=2"], "fit: a global batch of 3 sequences"),
    ],
)
def test_fit_bad_input(argv, expected, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and expected in err


def test_fit_keeps_the_global_batch(capsys):
    rc, out, _ = run(["fit", "--gpu", "a100-40gb", "--set", "scope=full", "--global-batch", "32", "--json"], capsys)
    assert rc == 0
    for r in json.loads(out)["rows"]:
        b = r["knobs"]["batch"]
        assert b["micro_batch_size"] * b["grad_accum"] * r["gpus"] == 32
