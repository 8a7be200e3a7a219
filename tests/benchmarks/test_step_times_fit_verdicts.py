"""benchmarks/step_times.py: published runs that ran and that the plan once said do not fit (``fit_misses``), fixed
by a mechanism or a mapping: the last pipeline rank's head counted once (``plan.ranks.head_forwards_in_flight``),
Megatron-Bridge's deallocated pipeline outputs (``parallel.pipeline_outputs_deallocated``), Megatron
``recompute_modules`` read from the published setting, NeMo RL's dynamic batching as a token budget."""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

st = load_step_times("trainfit_bench_step_times_fit_verdicts")
TRAIN = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
RL = {e["id"]: e for e in st.load_entries(st.RL_DATA)}


@pytest.mark.parametrize(("value", "modules"), [
    ("selective_mlp", ["mlp"]), ("selective_mla_up_proj_mlp", ["mla_up_proj", "mlp"]),
    ("selective_moe_act", ["moe_act"]), ("selective_block_5_of_32", None), ("full", None)])
def test_recompute_modules_are_read_from_the_setting(value: str, modules: list[str] | None) -> None:
    assert st.megatron_recompute_modules_of(value) == modules


@pytest.mark.parametrize("row_id", ["mbridge-2602-gb200-deepseek-v3-pt-mxfp8-256g",
                                    "mbridge-2602-gb200-llama31-405b-pt-mxfp8-256g"])
def test_megatron_bridge_pipeline_rows_fit(row_id: str) -> None:
    card, _ = st.map_train(TRAIN[row_id])
    assert card["parallel"]["pipeline_outputs_deallocated"] is True
    assert st.plan_card(card).fits is True


def test_deepseek_v3_mlp_recompute_is_planned() -> None:
    card, _ = st.map_train(TRAIN["mbridge-260401-b200-deepseek-v3-pt-mxfp8-256g"])
    assert card["parallel"]["recompute_modules"] == ["mla_up_proj", "mlp"]


def test_nemo_rl_dynamic_batching_is_a_token_budget() -> None:
    card, _ = st.map_rl(RL["nemorl-v03blog-grpo-llama31-70b-dtensor-h100-64g"])
    assert card["rollout"]["max_tokens_per_micro_batch"] == 4096
    assert card["rollout"]["logprob_max_tokens_per_micro_batch"] == 8192  # logprob_mb_tokens 4096 x 2
    assert st.plan_card(card).fits is True


def test_megatron_lm_entry_states_deallocated_outputs() -> None:
    """A Megatron-LM run (Pai-Megatron-Patch, 2025) states parallel.pipeline_outputs_deallocated in its entry; the
    harness leaves the framework name 'megatron' alone (it also covers Megatron-DeepSpeed runs)."""
    card, _ = st.map_train(TRAIN["xtuner-h800-qwen3-235b-tp1-ep8-pp32-vpp3-mbs8-full"])
    assert card["parallel"]["pipeline_outputs_deallocated"] is True
    assert st.plan_card(card).fits is True
    assert "megatron" not in st.PIPELINE_OUTPUTS_DEALLOCATED


@pytest.mark.parametrize("row_id", ["titan-h100-8b-8gpu", "titan-h100-8b-8gpu-256k-cp8-float8"])
def test_grand_teton_h100_rows_plan_on_the_96gb_card(row_id: str) -> None:
    """torchtitan's H100 rows ran on Meta's Grand Teton H100s, 96GB HBM2e (docs/performance.md @eaea6f6a l.5):
    planned on that card (catalog h100-sxm-hbm2e-96gb) they fit, with the published peak (84.5 GiB reserved on the
    256k CP 8 row) above the 80 GB H100's total; on the 80 GB card they do not."""
    e = TRAIN[row_id]
    assert e["gpu"] == "h100-sxm-hbm2e-96gb"
    card, _ = st.map_train(e)
    assert st.plan_card(card).fits is True
    card["hardware"]["gpu"] = "h100-sxm"
    assert st.plan_card(card).fits is False


def test_megatron_bridge_deepseek_v3_recipe_moments_are_bf16() -> None:
    """Megatron-Bridge's DeepSeek-V3 recipe runs Megatron-Core's precision-aware optimizer with bf16 Adam moments
    (recipes/deepseek/deepseek_v3.py @c8101293 l.161-165, cited in the entry): mapped to precision.optimizer_states
    bf16, the B200 26.04.01 row (PP 16, EP 8) fits its card (179.8 -> 169.1 GiB planned of 179.1)."""
    e = TRAIN["mbridge-260401-b200-deepseek-v3-pt-mxfp8-256g"]
    assert e["precision"]["optimizer_states"] == "bf16" and "l.161-165" in e["precision"]["optimizer_states_source"]
    card, notes = st.map_train(e)
    assert card["precision"]["optimizer_states"] == "bf16" and any("AdamW moments bf16" in n for n in notes)
    assert st.plan_card(card).fits is True
    del card["precision"]["optimizer_states"]
    assert st.plan_card(card).fits is False


def test_miles_p2p_rows_take_the_launchers_engine_fraction_and_optimizer_offload() -> None:
    """miles' P2P weight-transfer table ran the repository's launcher (examples/infra_features/p2p_weight_transfer/
    run.py @748935dc, cited in each entry): SGLang mem_fraction_static 0.8 and Megatron's optimizer CPU offload for
    GLM-4.5-Air. With the share left unstated the SGLang engine takes SGLang's own ServerArgs rule
    (methods.sglang_memory; sglang 0.5.15.post1 server_args.py _handle_gpu_memory_settings l.3469-3690): an H100
    (nvidia-smi 81,559 MiB) at engine TP 8 picks chunked_prefill_size 8192 and decode max_bs 512 (l.3524-3533), so
    reserved = 512 + 8192 x 1.5 + 512 x 2 + 8 / 8 x 1024 + 58 prefill graph sizes x 8 = 15,312 MiB and the fraction
    round((81,559 - 15,312) / 81,559, 3) = 0.812 (l.3623-3690); the engine starts there too (it did not at the old
    flat 0.3). The weight-sync time does not depend on the fraction."""
    from trainfit.spec.card import load_card_dict

    e = RL["miles-p2p-weight-sync-glm45-air-h100-4p4n-nccl"]
    assert e["rollout"]["gpu_memory_utilization"] == 0.8 and e["train"]["offload"] == "optimizer"
    card, _ = st.map_rl(e)
    planned = st.plan_card(card)
    assert planned.engine_fits and planned.fits is True
    card["rollout"].pop("gpu_memory_utilization")
    assert card["rollout"]["engine"] == "sglang" and card["rollout"]["tensor_parallel"] == 8
    assert load_card_dict(card).rollout.gpu_memory_utilization == 0.812
    default = st.plan_card(card)
    assert default.engine_fits and default.parts["weight_sync"] == planned.parts["weight_sync"]
    card["rollout"]["gpu_memory_utilization"] = 0.3  # the old flat default: the engine cannot hold its shard
    assert not st.plan_card(card).engine_fits


@pytest.mark.parametrize("row_id", ["vectorlm-a100-llama3-8b-full-1g-2k-mbs8", "vectorlm-a100-llama3-8b-full-1g-4k-mbs4",
                                    "vectorlm-a100-llama3-8b-full-1g-8k-mbs2"])
def test_vectorlm_benchmark_never_steps_its_optimizer(row_id: str) -> None:
    """VectorLM's benchmark calls Trainer.train_step directly, so tr_step stays 0 and every call takes the no_sync
    branch: optimizer.step() never runs and AdamW's moments never exist (vectorlm/trainer.py l.75, l.273, l.291,
    profiling/benchmark.py l.433 @9045f08a). The card plans no optimizer state and keeps the output through backward
    (l.294-296); the one-GPU rows then fit on the 80 GB A100, and with AdamW's moments they do not."""
    e = TRAIN[row_id]
    card, _ = st.map_train(e)
    assert card["precision"]["optimizer"] == "sgd" and "optimizer_impl" not in card["precision"]
    assert card["loop"] == {"keeps_output_through_backward": True}
    assert st.plan_card(card).fits is True
    card["precision"]["optimizer"] = "adamw"
    assert st.plan_card(card).fits is False


@pytest.mark.parametrize(("row_id", "impl"), [("nemo-h100-nemotron-340b-pretrain-fp8-2407", "apex_distributed"),
                                              ("nemo-h100-llama2-70b-sft-fp8-2407", None)])
def test_nemo_distributed_fused_adam_bf16_state(row_id: str, impl: str | None) -> None:
    """NeMo 24.07's launcher sets optim.dtype bf16 for distributed_fused_adam (nemotron_340b.yaml l.162, peft/llama
    sft.yaml l.257 @8325688d): Apex keeps bf16 moments, and NeMo drops the parameter shard when the dtype is the model's
    (megatron_base_model.py l.805-807 @8e3d65dc) but keeps it under fp8_params. The entry that states no master copy
    maps to optimizer_impl apex_distributed, whose rule drops it; the cards fit, and with fp32 state (the card before)
    they do not."""
    card, _ = st.map_train(TRAIN[row_id])
    assert card["precision"]["optimizer_states"] == "bf16"
    assert card["precision"].get("optimizer_impl") == impl
    assert "master_weights" not in card["precision"]
    assert st.plan_card(card).fits is True
    card["precision"].pop("optimizer_states")
    card["precision"].pop("optimizer_impl", None)
    assert st.plan_card(card).fits is False
