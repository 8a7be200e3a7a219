"""Non-gated GELU decoders (MPT, GPT-2, GPTBigCode, GPT-NeoX, Falcon): parameter layouts parsed exactly
(against transformers 5.24 on the meta device, and MPT against llm-foundry's published NumParams), each
bad field refused in one line, and every plan refused naming the missing activation model (the layer
models in trainfit.memory know OPT's ReLU MLP only). Phi and BLOOM are refused at parse time."""

import json

import pytest

from trainfit.catalog.hf_config import COUNTED_FAMILIES, REFUSED_FAMILIES, spec_from_hf_config
from trainfit.errors import CardError, ConfigError
from trainfit.memory.params import param_breakdown
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

SMALL = {
    "mpt_alibi": dict(model_type="mpt", d_model=256, n_heads=8, n_layers=3, expansion_ratio=4, max_seq_len=512,
                      vocab_size=1000, no_bias=True, attn_config={"alibi": True}),
    "gpt2": dict(model_type="gpt2", n_embd=256, n_head=8, n_layer=3, n_positions=512, vocab_size=1000),
    "gpt2_untied": dict(model_type="gpt2", n_embd=256, n_head=8, n_layer=3, n_positions=512, vocab_size=1000,
                        n_inner=640, tie_word_embeddings=False),
    "gpt_bigcode": dict(model_type="gpt_bigcode", n_embd=256, n_head=8, n_layer=3, n_positions=512, vocab_size=1000),
    "gpt_bigcode_mha": dict(model_type="gpt_bigcode", n_embd=256, n_head=8, n_layer=3, n_positions=512,
                            vocab_size=1000, multi_query=False, n_inner=512),
    "gpt_neox": dict(model_type="gpt_neox", hidden_size=256, num_attention_heads=8, num_hidden_layers=3,
                     intermediate_size=1024, vocab_size=1000),
    "gpt_neox_sequential": dict(model_type="gpt_neox", hidden_size=256, num_attention_heads=8, num_hidden_layers=3,
                                intermediate_size=768, vocab_size=1000, attention_bias=False,
                                tie_word_embeddings=True, use_parallel_residual=False),
    "falcon_mqa": dict(model_type="falcon", hidden_size=256, num_attention_heads=8, num_hidden_layers=3,
                       vocab_size=1000),
    "falcon_new_arch": dict(model_type="falcon", hidden_size=256, num_attention_heads=8, num_kv_heads=2,
                            new_decoder_architecture=True, num_hidden_layers=3, vocab_size=1000),
    "falcon_new_arch_one_ln": dict(model_type="falcon", hidden_size=256, num_attention_heads=8, num_kv_heads=4,
                                   new_decoder_architecture=True, num_ln_in_parallel_attn=1, num_hidden_layers=3,
                                   vocab_size=1000, ffn_hidden_size=640, tie_word_embeddings=False),
    "falcon_rw_sequential": dict(model_type="falcon", hidden_size=256, num_attention_heads=8, num_hidden_layers=3,
                                 vocab_size=1000, multi_query=False, parallel_attn=False, bias=True, alibi=True),
}

# transformers 5.24 *ForCausalLM(config) on meta, tied weights once (built in test_small_configs_match_transformers
# for the small ones); the released configs' fields as on their model cards
RELEASED = [
    ("gpt2", dict(model_type="gpt2", n_embd=768, n_head=12, n_layer=12, n_positions=1024, vocab_size=50257),
     124_439_808),
    ("pythia-160m", dict(model_type="gpt_neox", hidden_size=768, num_attention_heads=12, num_hidden_layers=12,
                         intermediate_size=3072, vocab_size=50304, max_position_embeddings=2048,
                         tie_word_embeddings=False), 162_322_944),
    ("falcon-7b", dict(model_type="falcon", hidden_size=4544, num_attention_heads=71, num_hidden_layers=32,
                       vocab_size=65024, multi_query=True, parallel_attn=True, bias=False), 6_921_720_704),
    ("mpt-7b", dict(model_type="mpt", d_model=4096, n_heads=32, n_layers=32, expansion_ratio=4, max_seq_len=2048,
                    vocab_size=50432, no_bias=True, learned_pos_emb=True, attn_config={"alibi": True}), 6_649_286_656),
    ("starcoderbase-1b", dict(model_type="gpt_bigcode", n_embd=2048, n_head=16, n_layer=24, n_positions=8192,
                              n_inner=8192, vocab_size=49152, multi_query=True), 1_137_207_296),
]


def _spec(cfg, name="x"):
    return spec_from_hf_config(cfg, name=name, source="test")


@pytest.mark.parametrize(("name", "cfg", "total"), RELEASED, ids=[r[0] for r in RELEASED])
def test_released_counts(name, cfg, total):
    assert param_breakdown(_spec(cfg, name)).total == total


@pytest.mark.parametrize(("size", "d", "heads", "layers", "seq", "published"), [
    # llm-foundry scripts/train/benchmarking/README.md@c90b9b312c644dbde5c9e6eef75c6f1c117d8782, NumParams column;
    # shapes from scripts/train/yamls/pretrain/mpt-<size>.yaml (MPTConfig defaults: biases, learned positions of
    # max_seq_len rows, LayerNorm with bias, tied head)
    ("125m", 768, 12, 12, 2048, 125_311_488),
    ("760m", 1536, 12, 24, 8192, 769_907_712),
    ("1b", 2048, 16, 24, 32768, 1_378_865_152),
    ("3b", 2560, 20, 32, 2048, 2_651_837_440),
    ("7b", 4096, 32, 32, 2048, 6_658_859_008),
    ("7b", 4096, 32, 32, 4096, 6_667_247_616),
    ("13b", 5120, 40, 40, 4096, 12_864_440_320),
    ("30b", 7168, 56, 48, 8192, 30_019_254_272),
    ("70b", 8192, 64, 80, 2048, 64_862_437_376),
])
def test_llm_foundry_table_num_params(size, d, heads, layers, seq, published):
    cfg = dict(model_type="mpt", d_model=d, n_heads=heads, n_layers=layers, expansion_ratio=4, max_seq_len=seq,
               vocab_size=50368, no_bias=False, learned_pos_emb=True, attn_config={"alibi": False})
    pb = param_breakdown(_spec(cfg, size))
    assert pb.total == published
    assert pb.positions == seq * d  # the table's count grows with the sequence length


def test_mpt_layout_is_closed_form():
    h, L, V, S = 768, 12, 50368, 2048
    cfg = dict(model_type="mpt", d_model=h, n_heads=12, n_layers=L, expansion_ratio=4, max_seq_len=S,
               vocab_size=V, no_bias=False, attn_config={"alibi": False})
    layer = (3 * h * h + 3 * h) + (h * h + h) + (4 * h * h + 4 * h) + (4 * h * h + h) + 2 * 2 * h
    assert param_breakdown(_spec(cfg)).total == V * h + S * h + L * layer + 2 * h
    no_bias = dict(cfg, no_bias=True)  # no_bias drops the norms' biases too
    assert param_breakdown(_spec(cfg)).total - param_breakdown(_spec(no_bias)).total == L * (11 * h) + h
    gqa = dict(no_bias, attn_config={"alibi": True, "attn_type": "grouped_query_attention", "kv_n_heads": 4})
    assert param_breakdown(_spec(no_bias)).total - param_breakdown(_spec(gqa)).total == L * 2 * (h - 4 * 64) * h + S * h


def test_small_configs_match_transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    for label, cfg in SMALL.items():
        kw = {k: v for k, v in cfg.items() if k != "model_type"}
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(
                transformers.AutoConfig.for_model(cfg["model_type"], **kw))
        total = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
        assert param_breakdown(_spec(cfg, label)).total == total, label


@pytest.mark.parametrize(("cfg", "message"), [
    ({k: v for k, v in SMALL["mpt_alibi"].items() if k != "no_bias"}, r"missing required field 'no_bias'"),
    (dict(SMALL["mpt_alibi"], attn_config={}), r"missing required field 'attn_config.alibi'"),
    (dict(SMALL["mpt_alibi"], no_bias="yes"), r"field 'no_bias' must be true or false"),
    (dict(SMALL["mpt_alibi"], attn_config={"alibi": True, "attn_type": "grouped_query_attention", "kv_n_heads": 3}),
     r"'attn_config.kv_n_heads' = 3 does not divide n_heads = 8"),
    (dict(SMALL["mpt_alibi"], attn_config={"alibi": True, "attn_type": "sparse"}),
     r"'attn_config.attn_type' = 'sparse'; allowed: multihead_attention"),
    (dict(SMALL["mpt_alibi"], attn_config={"alibi": True, "qk_ln": True}), r"'attn_config.qk_ln' .* not modelled"),
    (dict(SMALL["mpt_alibi"], ffn_config={"ffn_type": "mptglu"}), r"'ffn_config.ffn_type' = 'mptglu' is not modelled"),
    (dict(SMALL["mpt_alibi"], expansion_ratio=1.3), r"'expansion_ratio' = 1.3 times d_model = 256 is not a whole"),
    (dict(SMALL["mpt_alibi"], n_heads=7), r"'n_heads' = 7 does not divide d_model = 256"),
    (dict(SMALL["mpt_alibi"], norm_type="groupnorm"), r"'norm_type' = 'groupnorm'; allowed: low_precision_layernorm"),
    ({k: v for k, v in SMALL["gpt2"].items() if k != "n_embd"}, r"missing required field 'n_embd'"),
    (dict(SMALL["gpt2"], add_cross_attention=True), r"'add_cross_attention' is not modelled"),
    (dict(SMALL["gpt2"], resid_pdrop=1.0), r"'resid_pdrop' must be a probability"),
    (dict(SMALL["falcon_new_arch"], num_kv_heads=3), r"'num_kv_heads' = 3 does not divide"),
    (dict(SMALL["falcon_mqa"], num_ln_in_parallel_attn=3), r"'num_ln_in_parallel_attn' = 3 is outside 1..2"),
    ({k: v for k, v in SMALL["gpt_neox"].items() if k != "intermediate_size"},
     r"missing required field 'intermediate_size'"),
])
def test_bad_fields_are_named(cfg, message):
    with pytest.raises(ConfigError, match=message) as err:
        _spec(cfg)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("family", sorted(REFUSED_FAMILIES))
def test_phi_and_bloom_are_refused_with_the_reason(family):
    with pytest.raises(ConfigError, match=rf"model_type '{family}' is not supported: .*ModelSpec") as err:
        _spec({"model_type": family, "hidden_size": 64})
    assert "mpt" in str(err.value) and "\n" not in str(err.value)


def test_unknown_family_lists_the_counted_ones():
    with pytest.raises(ConfigError, match=r"model_type 'rwkv' is not supported; supported: .*opt.*mpt, gpt2"):
        _spec({"model_type": "rwkv"})


@pytest.mark.parametrize("label", ["gpt_bigcode", "falcon_mqa"])
def test_plans_are_refused_naming_the_layer(label):
    cfg = SMALL[label]
    assert cfg["model_type"] in COUNTED_FAMILIES
    card = {"model": {"id": label, "config": cfg}, "scope": "full",
            "hardware": {"gpu": "h100", "gpus_per_node": 1, "nodes": 1},
            "batch": {"micro_batch_size": 1, "seq_len": 256, "grad_accum": 1}}
    with pytest.raises(CardError, match=rf"^model: {label} cannot be planned: .* has no activation model in"
                                        r" trainfit.memory yet .*parameter counts are exact$"):
        make_plan(load_card_dict(card))


def test_cli_refuses_in_one_line(tmp_path, capsys):
    from trainfit.cli.main import main

    (tmp_path / "config.json").write_text(json.dumps(SMALL["gpt2"]))
    card = tmp_path / "card.yaml"
    card.write_text(f"model: {tmp_path / 'config.json'}\nscope: full\n")
    rc = main(["plan", str(card), "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and json.loads(out) == {"error": err[len("trainfit: error: "):].rstrip("\n")}  # under --json
    assert err.count("\n") == 1 and "cannot be planned: GPT-2 with attention dropout (attn_pdrop 0.1)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("extra", "why"), [
    ({}, "GPT-2 with attention dropout (attn_pdrop 0.1) is not modelled"),
    ({"attn_pdrop": 0.0, "embd_pdrop": 0.0}, "GPT-2 with embd_pdrop 0.0 != resid_pdrop 0.1 is not modelled"),
    ({"attn_pdrop": 0.0, "activation_function": "relu"}, "GPT-2 activation_function 'relu' is not modelled"),
    ({"attn_pdrop": 0.0}, ""),
    ({"attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "activation_function": "gelu"}, ""),
])
def test_gpt2_is_planned_without_attention_dropout(extra, why):
    spec = spec_from_hf_config(dict(SMALL["gpt2"], **extra), name="gpt2", source="test")
    assert spec.unplanned.startswith(why) and bool(spec.unplanned) == bool(why)


@pytest.mark.parametrize("label", ["mpt_alibi", "gpt_neox", "gpt_neox_sequential"])
def test_modelled_families_plan(label):
    """MPT's and GPT-NeoX's layers have an activation model (``memory.arch_activations``): their plans are no
    longer refused (tests/memory/test_gpt_family_activations.py holds the figures)."""
    card = {"model": {"id": label, "config": SMALL[label]}, "scope": "full",
            "hardware": {"gpu": "h100", "gpus_per_node": 1, "nodes": 1},
            "batch": {"micro_batch_size": 1, "seq_len": 256, "grad_accum": 1}}
    assert make_plan(load_card_dict(card)).peak.allocated > 0
