"""`trainfit fit` over several GPU kinds: a kind the card cannot run on (fp8 compute on an A100) is skipped and
listed with its one-line reason (table notes and --json ``skipped``); only a card every kind refuses exits 2."""

import json

import pytest

from trainfit.cli.main import main
from trainfit.fit_search import Skipped, skipped_kinds

FP8 = ["--set", "model=Qwen/Qwen3-0.6B", "--set", "precision.compute=fp8", "--set", "precision.fp8_recipe=delayed",
       "--set", "parallel.strategy=fsdp", "--set", "parallel.offload=none", "--set", "precision.optimizer=adamw",
       "--set", "parallel.gradient_checkpointing=true", "--max-gpus", "2"]
NO_FP8 = "precision.compute: fp8 needs fp8 tensor cores, which a100-80gb does not have"


def test_fp8_card_ranks_the_h100_and_skips_the_a100(capsys):
    rc = main(["fit", "--gpu", "h100-sxm,a100-80gb", *FP8])  # before: exit 2 on the A100, no H100 row
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "h100-sxm" in out
    assert f"skipped a100-80gb: {NO_FP8}" in " ".join(out.split())  # the console folds long lines


def test_fp8_card_json_lists_the_skipped_kind(capsys):
    rc = main(["fit", "--gpu", "h100-sxm,a100-80gb", *FP8, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    obj = json.loads(out)
    assert {r["gpu"] for r in obj["rows"]} == {"h100-sxm"} and {r["gpus"] for r in obj["rows"]} == {1, 2}
    [skip] = obj["skipped"]
    assert skip["gpu"] == "a100-80gb" and skip["gpus"] is None and skip["reason"].startswith(NO_FP8)


def test_a_card_fit_for_every_kind_skips_none(capsys):
    rc = main(["fit", "--gpu", "h100-sxm", *FP8, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out)["skipped"] == []


@pytest.mark.parametrize("gpus, reason", [
    ("a100-80gb", f"trainfit: error: {NO_FP8}"),  # one kind: its reason as plan gives it
    ("a100-40gb,a100-80gb", "trainfit: error: fit: no GPU kind of --gpu can run the card: a100-40gb: precision.compute:"),
])
def test_a_card_every_kind_refuses_exits_2_with_one_line(gpus, reason, capsys):
    rc = main(["fit", "--gpu", gpus, *FP8])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.startswith(reason) and err.count("\n") == 1


def test_pinned_gpu_kind_is_not_replaced(capsys):
    rc = main(["fit", "--gpu", "h100-sxm", *FP8, "--set", "hardware.gpu=a100-80gb"])
    _, err = capsys.readouterr()
    assert rc == 2 and err.startswith(f"trainfit: error: {NO_FP8}")


def test_skipped_kinds_fold_a_kind_refused_at_every_count():
    refused = {("a", 1): "x", ("a", 2): "x", ("b", 2): "y", ("c", 1): "p", ("c", 2): "q"}
    got = skipped_kinds(refused, gpus=["a", "b", "c", "d"], counts=[1, 2])
    assert got == (Skipped("a", None, "x"), Skipped("b", 2, "y"), Skipped("c", 1, "p"), Skipped("c", 2, "q"))


def test_search_skips_a_kind_the_card_file_does_not_name():
    from trainfit.cli.common import default_card_dict, set_path
    from trainfit.search import fit

    data = default_card_dict()
    for k, v in {"hardware.gpu": "h100-sxm", "model": "Qwen/Qwen3-0.6B", "precision.compute": "fp8",
                 "precision.fp8_recipe": "delayed"}.items():
        set_path(data, k, v)
    got = fit(data, gpus=["a100-80gb", "h100-sxm"], max_gpus=1, pinned=frozenset({"model", "method", "precision"}),
              workers=1)  # before: CardError from the A100's layouts, no H100 row
    assert {r.gpu for r in got.rows} == {"h100-sxm"}
    assert [(s.gpu, s.gpus) for s in got.skipped] == [("a100-80gb", None)] and got.skipped[0].reason.startswith(NO_FP8)


def test_api_fit_skips_the_kind_too():
    import trainfit

    got = trainfit.fit(gpus=["h100-sxm", "a100-80gb"], max_gpus=1, overrides={
        "model": "Qwen/Qwen3-0.6B", "precision.compute": "fp8", "precision.fp8_recipe": "delayed",
        "parallel.strategy": "fsdp", "parallel.offload": "none", "precision.optimizer": "adamw"})
    assert {r.gpu for r in got.rows} == {"h100-sxm"} and [s.gpu for s in got.skipped] == ["a100-80gb"]


def test_html_report_lists_the_skipped_kind(tmp_path, capsys):
    out = tmp_path / "fit.html"
    rc = main(["fit", "--gpu", "h100-sxm,a100-80gb", *FP8, "--max-gpus", "1", "--html", str(out)])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert f"<p>skipped a100-80gb: {NO_FP8}" in out.read_text(encoding="utf-8")
