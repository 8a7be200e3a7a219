"""trainfit's closed-form parameter counts equal transformers' models built on the meta device."""

import dataclasses

import pytest

from trainfit.catalog.models import catalog_ids, from_catalog, hf_config_of
from trainfit.memory.lora import lora_trainable_params
from trainfit.memory.params import param_breakdown, param_tensors
from trainfit.spec.training import LoraSpec

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from trainfit.trace.hf_build import build_meta_model  # noqa: E402

ALL7 = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@pytest.mark.parametrize("model_id", catalog_ids())
def test_closed_form_total_equals_meta_model(model_id):
    model = build_meta_model(hf_config_of(model_id))
    assert param_breakdown(from_catalog(model_id)).total == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("model_id", catalog_ids())
def test_param_tensors_sum_to_total(model_id):
    spec = from_catalog(model_id)
    assert sum(t.numel * t.count for t in param_tensors(spec)) == param_breakdown(spec).total


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("Qwen/Qwen3-8B", 8_190_735_360),
        ("Qwen/Qwen3-30B-A3B", 30_532_122_624),
        ("Qwen/Qwen3.5-27B", 26_895_998_464),
    ],
)
def test_ground_truth_counts(model_id, expected):
    # GROUND_TRUTH.md §1
    assert param_breakdown(from_catalog(model_id)).total == expected


def test_moe_active_params():
    from trainfit.memory.params import active_params

    assert active_params(from_catalog("Qwen/Qwen3-30B-A3B")) == 3_353_032_704


def test_lora_counts_ground_truth():
    # GROUND_TRUTH.md §1: dense 43,646,976; fused MoE experts 994,836,480 at r=16
    assert lora_trainable_params(from_catalog("Qwen/Qwen3-8B"), LoraSpec(rank=16, targets=ALL7)) == 43_646_976
    assert lora_trainable_params(from_catalog("Qwen/Qwen3-30B-A3B"), LoraSpec(rank=16, targets=ALL7)) == 994_836_480


def _truncate(spec, layers):
    return dataclasses.replace(spec, num_layers=layers, layer_types=spec.layer_types[:layers])


@pytest.mark.parametrize(
    ("model_id", "targets", "rank"),
    [
        ("Qwen/Qwen3-8B", ALL7, 16),
        ("Qwen/Qwen3-8B", ("all-linear",), 8),
        ("Qwen/Qwen3-30B-A3B", ALL7, 16),
        ("Qwen/Qwen3-30B-A3B", ("all-linear",), 16),
        ("Qwen/Qwen3.5-27B", ("all-linear",), 16),
        ("Qwen/Qwen2.5-7B", ("q_proj", "v_proj"), 64),
        ("google/gemma-2-9b", ("all-linear",), 16),
        ("meta-llama/Llama-3.1-8B", ("q_proj", "k_proj", "v_proj"), 16),
    ],
)
def test_lora_trainable_equals_peft(model_id, targets, rank):
    layers = 4
    model = build_meta_model(hf_config_of(model_id), num_layers=layers)
    tm = "all-linear" if targets == ("all-linear",) else list(targets)
    pm = peft.get_peft_model(model, peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=tm))
    measured = sum(p.numel() for p in pm.parameters() if p.requires_grad)
    spec = _truncate(from_catalog(model_id), layers)
    assert lora_trainable_params(spec, LoraSpec(rank=rank, targets=targets)) == measured
