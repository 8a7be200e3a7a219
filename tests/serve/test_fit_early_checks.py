"""`POST /api/fit` checks a card as `trainfit fit` does: on the first GPU kind of the request that can run it
(``serve.worker.early_checks``), so an fp8 card whose own GPU (the default A100) has no fp8 tensor cores still
searches the H100 and lists the A100 under ``skipped`` (JSON and HTML). Before, the card was loaded on its own GPU
and the request refused with the A100's line."""

from trainfit.serve.worker import call

FP8 = {"model": "Qwen/Qwen3-0.6B", "precision": {"compute": "fp8", "fp8_recipe": "delayed", "optimizer": "adamw"},
       "parallel": {"strategy": "fsdp", "offload": "none", "gradient_checkpointing": True},
       "loss": {"chunked": True}, "scope": "full"}
NO_FP8 = "precision.compute: fp8 needs fp8 tensor cores, which a100-80gb does not have"


def test_fit_searches_the_kind_that_runs_the_card_and_lists_the_skipped_one():
    status, data = call("fit", {"card": FP8, "gpus": ["h100-sxm", "a100-80gb"], "max_gpus": 1})
    assert status == 200, data
    assert {r["gpu"] for r in data["rows"]} == {"h100-sxm"}
    [skip] = data["skipped"]
    assert skip["gpu"] == "a100-80gb" and skip["gpus"] is None and skip["reason"].startswith(NO_FP8)
    assert f"skipped a100-80gb: {NO_FP8}" in data["html"]
    assert all(r["stack"] in ("eager", "megatron") for r in data["rows"])


def test_the_model_check_runs_before_the_search():
    status, data = call("fit", {"card": FP8 | {"model": "nobody/unknown-model"}, "gpus": ["h100-sxm"], "max_gpus": 1})
    assert status == 400 and "not in the catalog" in data["error"]
