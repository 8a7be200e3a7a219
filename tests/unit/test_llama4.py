"""Llama-4 Scout (17B-16E) and Maverick (17B-128E), text decoder only: counts against transformers'
Llama4ForCausalLM on the meta device, the dense/MoE interleave with a shared expert, and a LoRA and a
full card refused in one line (the dense expert compute of transformers' Llama4TextMoe is not modelled)."""

import json

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import catalog_entry, from_catalog
from trainfit.errors import CardError, ConfigError
from trainfit.memory.lora import lora_trainable_params
from trainfit.memory.params import active_params, param_breakdown
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.training import LoraSpec

SCOUT = "meta-llama/Llama-4-Scout-17B-16E"
MAVERICK = "meta-llama/Llama-4-Maverick-17B-128E"


@pytest.mark.parametrize(("model_id", "total", "active"), [
    # transformers 5.24 Llama4ForCausalLM(Llama4TextConfig(**entry config)) on meta (built in a test below);
    # active = all but the (E - top_k) / E unused share of the routed experts
    (SCOUT, 107_769_861_120, 17_172_894_720),  # ~109B / 17B in the transformers docs (with the vision tower)
    (MAVERICK, 400_711_848_960, 17_184_691_200),  # ~400B / 17B
])
def test_counts(model_id, total, active):
    spec = from_catalog(model_id)
    assert param_breakdown(spec).total == total
    assert active_params(spec) == active


def test_layout_scout_every_layer_maverick_every_other():
    h, w, dense = 5120, 8192, 16384
    attn = h * 40 * 128 + 2 * h * 8 * 128 + 40 * 128 * h
    scout, mav = from_catalog(SCOUT), from_catalog(MAVERICK)
    assert scout.num_moe_layers == 48 and mav.num_moe_layers == 24
    assert [i for i in range(48) if mav.moe.is_moe_layer(i)] == list(range(1, 48, 2))
    for spec, experts in ((scout, 16), (mav, 128)):
        moe = spec.moe
        assert (moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size) == (experts, 1, w)
        assert moe.shared_expert_intermediate_size == w and not moe.shared_expert_gate
        assert not spec.qk_norm  # Llama-4's QK norm is a weightless L2 norm
        # MoE layer: attention, router, routed experts, shared expert, 2 norms
        assert param_breakdown(spec).per_layer[1] == attn + experts * h + experts * 3 * h * w + 3 * h * w + 2 * h
    assert mav.intermediate_size == dense  # intermediate_size_mlp: Maverick's dense layers
    assert param_breakdown(mav).per_layer[0] == attn + 3 * h * dense + 2 * h


def test_wrapper_config_unwraps_and_moe_layers_are_checked():
    text = dict(catalog_entry(SCOUT)["config"])
    wrapped = {"model_type": "llama4", "text_config": {k: v for k, v in text.items() if k != "model_type"},
               "vision_config": {"hidden_size": 1408}}
    assert param_breakdown(spec_from_hf_config(wrapped, name="x", source="t")).total == 107_769_861_120
    with pytest.raises(ConfigError, match="'moe_layers' must be every interleave_moe_layer_step-th layer"):
        spec_from_hf_config(dict(text, moe_layers=[0, 2]), name="x", source="t")
    assert from_catalog(SCOUT).family == "llama4_text"


def test_all_linear_lora_leaves_the_fused_experts_as_peft_does():
    # PEFT 0.21.2 on transformers 5.24's meta Llama4ForCausalLM (4 layers, r=16, all-linear): 4,981,760 (Scout),
    # 5,607,424 (Maverick) -- attention, shared expert, router and Maverick's dense MLPs; the 3-D experts never
    attn = 16 * (2 * (5120 + 5120) + 2 * (5120 + 1024))  # q, o; k, v (8 kv heads of 128)
    scout = attn + 3 * 16 * (5120 + 8192)  # + the shared expert's gate, up, down
    assert lora_trainable_params(from_catalog(SCOUT), LoraSpec(rank=16)) == 48 * (scout + 16 * (5120 + 16))
    assert 4 * (scout + 16 * (5120 + 16)) == 4_981_760
    mav_moe = scout + 16 * (5120 + 128)
    mav_dense = attn + 3 * 16 * (5120 + 16384)
    assert 2 * (mav_moe + mav_dense) == 5_607_424
    assert lora_trainable_params(from_catalog(MAVERICK), LoraSpec(rank=16)) == 24 * (mav_moe + mav_dense)


def test_counts_against_transformers_on_meta():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    for model_id in (SCOUT, MAVERICK):
        cfg = {k: v for k, v in catalog_entry(model_id)["config"].items() if k != "model_type"}
        with torch.device("meta"):
            model = transformers.Llama4ForCausalLM(transformers.Llama4TextConfig(**cfg))
        total = sum(p.numel() for p in model.parameters())
        routed = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
        spec = from_catalog(model_id)
        assert param_breakdown(spec).total == total
        assert active_params(spec) == total - routed + routed * cfg["num_experts_per_tok"] // cfg["num_local_experts"]


def _card(model: str, scope: str, nodes: int = 1) -> dict:
    card = {"model": model, "scope": scope,
            "hardware": {"gpu": "h100", "gpus_per_node": 8, "nodes": nodes, "interconnect": "nvlink"},
            # the link in a node; InfiniBand between nodes is the NIC default (hardware.nic_gbps_per_gpu)
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4}}
    if scope == "lora":
        card["lora"] = {"rank": 16}
    return card


@pytest.mark.parametrize(("model_id", "experts"), [(SCOUT, 16), (MAVERICK, 128)])
@pytest.mark.parametrize("scope", ["lora", "full"])
def test_plans_are_refused_naming_the_dense_expert_compute(model_id, experts, scope):
    # transformers 5.24 Llama4TextMoe: hidden_states.repeat(E, 1) * sigmoid scores, then one bmm over all E
    # experts -- activations and FLOPs scale with E, not top-k; the Qwen3 grouped_mm model would be wrong
    with pytest.raises(CardError, match=rf"^model: {model_id} cannot be planned: transformers' Llama4TextMoe"
                                        rf" runs every token through all {experts} experts"):
        make_plan(load_card_dict(_card(model_id, scope)))


def test_cli_refuses_in_one_line(tmp_path, capsys):
    from trainfit.cli.main import main

    card = tmp_path / "card.yaml"
    card.write_text(f"model: {SCOUT}\nscope: lora\nlora: {{rank: 16}}\n")
    rc = main(["plan", str(card), "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and json.loads(out) == {"error": err[len("trainfit: error: "):].rstrip("\n")}  # under --json
    assert err.count("\n") == 1 and "cannot be planned" in err and "Traceback" not in err
