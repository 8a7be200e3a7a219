"""`trainfit plan` on a GPU without bf16 (V100): a bf16 card is one line and exit 2, fp8 too (at validation);
fp16 plans and is timed on the fp16 tensor-core rate."""

import json
import math

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.cli.main import main
from trainfit.compute.rates import DEFAULT_MAMF_FRACTION, default_rates

V100 = "v100-sxm2-32gb"
FP16 = ["--set", "precision.compute=fp16", "--set", "precision.weights=fp16"]


def run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _lines(out: str, err: str) -> list[str]:
    return [ln for ln in (out + err).splitlines() if ln.strip()]


def test_v100_default_card_exits_2_with_one_line(capsys):
    rc, out, err = run(["plan", "--gpu", V100, "--gpus", "8"], capsys)
    assert rc == 2
    assert _lines(out, err) == [("trainfit: error: precision.compute: bf16 needs compute capability 8.0+;"
                                 " v100-sxm2-32gb (7.0) supports fp16 | fp32; set precision.weights too")]


def test_v100_fp16_compute_with_default_bf16_weights_names_the_weights(capsys):
    rc, out, err = run(["plan", "--gpu", V100, "--gpus", "8", "--set", "precision.compute=fp16"], capsys)
    assert rc == 2
    assert _lines(out, err) == [("trainfit: error: precision.weights: bf16 (the default) needs compute capability"
                                 " 8.0+; v100-sxm2-32gb (7.0) supports fp16 | fp32")]


def test_fp8_on_v100_exits_2_with_one_line_at_validation(capsys):
    rc, out, err = run(["plan", "--gpu", V100, "--gpus", "8", "--set", "precision.compute=fp8",
                        "--set", "precision.fp8_recipe=delayed", "--set", "precision.weights=fp16"], capsys)
    assert rc == 2
    lines = _lines(out, err)
    assert len(lines) == 1 and lines[0].startswith("trainfit: error: precision.compute: fp8 needs fp8 tensor cores")
    allowed = lines[0].split("GPUs with them:")[1]
    assert "h100-sxm" in allowed and V100 not in allowed and "a100" not in allowed


def _step_s(gpu: str, capsys) -> float:
    rc, out, err = run(["plan", "--gpu", gpu, "--gpus", "8", "--json", *FP16], capsys)
    assert rc == 0, err
    return json.loads(out)["time"]["step_seconds"]


def test_fp16_on_v100_plans_and_is_timed_on_the_fp16_rate(capsys):
    t = _step_s(V100, capsys)
    assert t is not None and math.isfinite(t) and t > 0
    rates = default_rates(resolve_gpu(V100))
    assert rates.matmul_flops_per_s == pytest.approx(125e12 * DEFAULT_MAMF_FRACTION)
    assert "fp16" in rates.sources[0]
    # the same card on an A100 40GB (312 TFLOPS fp16): faster, by less than the peak ratio (host and memory terms)
    a100 = _step_s("a100-40gb", capsys)
    assert a100 < t < a100 * 312 / 125 * 1.1
