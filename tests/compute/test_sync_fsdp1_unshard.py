"""verl's FSDP1 export gathers the model twice (``compute.sync.fsdp1_state_dict_units``): ``module.state_dict()`` under
``SHARDED_STATE_DICT`` all-gathers every FSDP unit whole (pytorch/pytorch torch/distributed/fsdp/_state_dict_utils.py
``_sharded_pre_state_dict_hook`` @22eccc02f3a5a7818f93bc8ff2aaf98eb8d64742), then the export's ``full_tensor()``
gathers each parameter again (verl-project/verl verl/workers/engine/fsdp/transformer_impl.py lines 462-473 and
``get_per_tensor_param`` @bf48903d93e4618531d3bbae96551a889007dd8b). FSDP2's ``state_dict()`` only references the
shards."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute import sync
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.methods.presets import apply_preset
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
GB = 1e9
KW = dict(mechanism="colocated_cuda_ipc", weight_bytes=15 * GB, gather_bytes=30 * GB, num_tensors=339,
          train_shards=8, tp=1, rates=H100, gpus_per_node=8)


def test_unshard_adds_one_more_gather_of_the_same_bytes_one_collective_per_unit():
    plain, twice = sync.weight_sync_seconds(**KW), sync.weight_sync_seconds(**KW, unshard_units=29)
    per_unit = sync.weight_sync_seconds(**{**KW, "num_tensors": 29})
    # the same bytes over the same ranks; only the collective count differs (29 units, not 339 tensors)
    assert twice.gather_s == pytest.approx(plain.gather_s + per_unit.gather_s)
    assert twice.total_s == pytest.approx(plain.total_s + per_unit.gather_s)
    assert (twice.transfer_s, twice.per_tensor_s, twice.staging_s) == (plain.transfer_s, plain.per_tensor_s,
                                                                       plain.staging_s)
    assert any("FSDP1 units" in a for a in twice.assumptions)
    assert not any("FSDP1 units" in a for a in plain.assumptions)


def test_no_unshard_without_shards_and_no_negative_count():
    one = {**KW, "train_shards": 1}
    assert sync.weight_sync_seconds(**one, unshard_units=29).total_s == sync.weight_sync_seconds(**one).total_s
    with pytest.raises(CardError):
        sync.weight_sync_seconds(**KW, unshard_units=-1)


def test_units_are_the_decoder_layers_and_the_root():
    spec = resolve_model("Qwen/Qwen2.5-7B")
    spec = spec[0] if isinstance(spec, tuple) else spec
    assert sync.fsdp1_state_dict_units(spec) == spec.num_layers + 1 == 29


@pytest.mark.parametrize(("framework", "placement", "choice", "unshards"), [
    ("verl", "colocate", None, True),
    ("verl", "split", None, True),  # the checkpoint engine exports through the same get_per_tensor_param
    ("verl", "split", "per_parameter", False),  # the fully-async trainer's own paths (Megatron rows): not read
    ("verl", "split", "bucketed", False),
    ("nemo-rl", "split", None, False),
    ("openrlhf", "colocate", None, False),
    ("trl", "colocate", None, False),
])
def test_which_exports_call_state_dict_first(framework, placement, choice, unshards):
    assert sync.framework_sync_mechanism(framework, placement, choice).unshards_fsdp1_state_dict is unshards


def _card(fsdp_version: str):
    ro = {"placement": "colocate", "prompt_len": 256, "response_len": 1024, "prompts_per_step": 32,
          "num_generations": 8, "tensor_parallel": 1, "gpu_memory_utilization": 0.7}
    card = {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp", "fsdp_version": fsdp_version}, "rollout": ro}
    return load_card_dict(apply_preset(card, "verl"))


def _sync_terms(card) -> dict[str, float]:
    return next(p for p in make_plan(card).time.phases if p.name == "weight_sync").terms


def test_a_verl_fsdp1_card_gathers_twice_an_fsdp2_card_once():
    """Qwen2.5-7B on 8 H100s under the verl preset: the FSDP1 card's gather is the FSDP2 card's plus one more
    all-gather of the same fp32 bytes in 29 collectives; nothing else in the sync moves."""
    one, two = _sync_terms(_card("fsdp1")), _sync_terms(_card("fsdp2"))
    extra = sync.weight_sync_seconds(mechanism="colocated_cuda_ipc", weight_bytes=1.0, gather_bytes=30.46 * GB,
                                     num_tensors=29, train_shards=8, tp=1, rates=H100, gpus_per_node=8).gather_s
    assert one["gather"] == pytest.approx(two["gather"] + extra, rel=0.01)
    assert {k: v for k, v in one.items() if k != "gather"} == pytest.approx(
        {k: v for k, v in two.items() if k != "gather"})
