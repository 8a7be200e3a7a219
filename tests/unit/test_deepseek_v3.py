"""DeepSeek-V3 / R1: multi-head latent attention, shared + routed experts with dense first layers, the MTP
module as an option; counts against transformers' DeepseekV3ForCausalLM, the latent decode cache, and an
expert-parallel plan that names its worst rank."""

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import catalog_entry, from_catalog
from trainfit.errors import ConfigError
from trainfit.memory.attention import mla_kv_bytes_per_token
from trainfit.memory.params import active_params, param_breakdown, param_tensors
from trainfit.plan import make_plan
from trainfit.rollout.vllm import kv_bytes_per_token
from trainfit.spec.card import load_card_dict
from trainfit.spec.model import with_mtp

V3 = "deepseek-ai/DeepSeek-V3"


@pytest.mark.parametrize("model_id", [V3, "deepseek-ai/DeepSeek-R1"])
def test_total_and_active_counts(model_id):
    spec = from_catalog(model_id)
    # transformers 5.24 DeepseekV3ForCausalLM on meta: 671,026,404,352 (tests/unit/test_param_counts.py
    # builds it); the README's 671B total and 37B activated
    assert param_breakdown(spec).total == 671_026_404_352
    assert active_params(spec) == 37_552_282_624
    assert spec.mla is not None and spec.mla.latent_dim == 576 and spec.head_dim == 192
    assert spec.moe.mlp_only_layers == (0, 1, 2) and spec.num_moe_layers == 58
    assert spec.moe.shared_expert_intermediate_size == 2048 and not spec.moe.shared_expert_gate
    assert (spec.moe.n_group, spec.moe.topk_group) == (8, 4)


def test_mtp_is_off_by_default_and_adds_one_moe_layer_when_on():
    spec = from_catalog(V3)
    assert spec.mtp_layers == 0 and spec.mtp_layers_declared == 1
    mtp = with_mtp(spec)
    extra = param_breakdown(mtp).total - param_breakdown(spec).total
    # one MoE decoder layer + enorm, hnorm, eh_proj (2h x h) and the shared head's norm; the README counts
    # 11.5B unique MTP parameters
    assert extra == param_breakdown(spec).per_layer[3] + 2 * 7168 * 7168 + 3 * 7168 == 11_610_067_968
    assert sum(t.numel * t.count for t in param_tensors(mtp)) == param_breakdown(mtp).total
    with pytest.raises(ConfigError, match="num_nextn_predict_layers"):
        with_mtp(from_catalog("Qwen/Qwen3-8B"))


def test_latent_kv_cache_is_the_compressed_kv_and_rope_key_whole_on_every_tp_rank():
    spec = from_catalog(V3)
    assert mla_kv_bytes_per_token(spec, dtype_bytes=2) == 61 * (512 + 64) * 2 == 70_272
    assert kv_bytes_per_token(spec, tp=1, dtype_bytes=2) == kv_bytes_per_token(spec, tp=8, dtype_bytes=2) == 70_272
    # 2 x 61 x 128 heads x 192 would be 5,996,544 B: 85x more than the latent
    assert 2 * 61 * 128 * 192 * 2 / 70_272 > 85


def test_config_checks_are_one_line():
    cfg = dict(catalog_entry(V3)["config"], n_group=7)
    with pytest.raises(ConfigError, match="'n_group' = 7 does not divide n_routed_experts = 256"):
        spec_from_hf_config(cfg, name="x", source="t")
    cfg = dict(catalog_entry(V3)["config"])
    del cfg["kv_lora_rank"]
    with pytest.raises(ConfigError, match="missing required field 'kv_lora_rank'"):
        spec_from_hf_config(cfg, name="x", source="t")
    no_q_lora = spec_from_hf_config(dict(catalog_entry(V3)["config"], q_lora_rank=None), name="x", source="t")
    assert no_q_lora.mla.q_lora_rank == 0  # V2-Lite style: q_proj straight from hidden
    h, H = 7168, 128
    full = param_breakdown(from_catalog(V3)).total
    assert full - param_breakdown(no_q_lora).total == 61 * (h * 1536 + 1536 * H * 192 + 1536 - h * H * 192)


def _ep_card(ep: int, nodes: int) -> dict:
    return {"model": V3, "scope": "full",
            "hardware": {"gpu": "h800", "gpus_per_node": 8, "nodes": nodes, "interconnect": "nvlink"},
            # the link in a node; InfiniBand between nodes is the NIC default (hardware.nic_gbps_per_gpu)
            "parallel": {"strategy": "fsdp", "expert_parallel": ep, "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 8}}


@pytest.mark.parametrize(("ep", "nodes"), [(32, 4), (64, 8)])
def test_expert_parallel_plan_names_the_worst_rank_and_times_the_step(ep, nodes):
    plan = make_plan(load_card_dict(_ep_card(ep, nodes)))
    spec = plan.spec
    assert plan.worst_rank is not None and plan.worst_rank.ep == 0
    # weights of one rank: its ep-th of the routed experts (EP), a 1/(8 x nodes) FSDP shard of the rest
    routed = spec.num_moe_layers * 256 * 3 * 7168 * 2048
    dense = param_breakdown(spec).total - routed
    expected = 2 * (routed / ep + dense / (8 * nodes))
    weights = plan.phases[0].components["weights"]
    assert weights == pytest.approx(expected, rel=0.01)
    parts = plan.time.parts
    assert parts["expert_parallel"] > 0 and plan.step_seconds > parts["forward"] > 0
    assert any(f"expert parallel {ep}" in a for a in plan.assumptions)
    # full fine-tuning of 671B with AdamW needs more than 80 GB per GPU at this size; the plan says by how much
    assert not plan.fits


def test_lora_with_expert_parallel_is_refused_in_one_line():
    card = _ep_card(32, 4)
    card["scope"] = "lora"
    with pytest.raises(Exception, match="LoRA on expert-parallel experts is not modelled"):
        make_plan(load_card_dict(card))



def test_card_switches_the_mtp_module_on():
    card = _ep_card(64, 8)
    base = make_plan(load_card_dict(card))
    card["model"] = {"id": V3, "mtp": True}
    mtp = make_plan(load_card_dict(card))
    assert mtp.params_total - base.params_total == 11_610_067_968
    # the last stage's rank holds the module: its 4 of 256 routed experts and a 1/64 share of the rest
    moe_layer = 3 * 7168 * 2048 * 256
    rest = 11_610_067_968 - moe_layer
    extra = mtp.phases[0].components["weights"] - base.phases[0].components["weights"]
    assert extra == pytest.approx(2 * (moe_layer / 64 + rest / 64), rel=0.01)
    assert mtp.peak.components["activations"] > base.peak.components["activations"]
    with pytest.raises(Exception, match="model.mtp: .*no multi-token-prediction module"):
        make_plan(load_card_dict({"model": {"id": "Qwen/Qwen3-8B", "mtp": True}}))
