"""Saved-for-backward model of the non-gated GELU decoders (``memory.arch_activations``): per decoder layer
equal to what autograd saves on tiny real transformers models (``saved_tensors_hooks``, storages deduplicated,
parameters excluded), and the planned allocated peak within a few percent of the fake-tensor trace. MPT and
GPT-NeoX, and GPT-2 without attention dropout (GPTBigCode and Falcon remain unplanned).

On CPU LayerNorm keeps bf16 mean/rstd (4 B a row; 8 B fp32 on CUDA, what the model says); the comparison adds
that back. MPT: transformers' ``MptAttention`` (eager, ALiBi, one bool causal mask shared by every layer)."""

import collections
import json

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.memory import arch_activations
from trainfit.memory.activations import activation_bytes
from trainfit.spec.enums import Attention
from trainfit.spec.training import TrainableSpec

MPT = dict(model_type="mpt", d_model=64, n_layers=2, n_heads=4, max_seq_len=512, vocab_size=128, no_bias=True,
           attn_config={"alibi": True})


def _spec(cfg):
    return spec_from_hf_config(cfg, name=cfg["model_type"], source="test")


def test_mpt_flash_layer_by_hand():
    """llm-foundry's flash path, full training, per token: LayerNorms 2h + 8 each, Wqkv's input 2h, the gathered
    q, k, v and the kernel's output 8h and fp32 logsumexp 4H, pad_input's output (out_proj's input) 2h, up_proj's
    input 2h, GELU's input and down_proj's input 2I each; the three int64 index tensors once."""
    cfg = dict(MPT, d_model=256, n_heads=8, n_layers=3, no_bias=False, learned_pos_emb=True,
               attn_config={"alibi": False})
    spec = _spec(cfg)
    assert not spec.unplanned
    b, s, h, w, H = 2, 128, 256, 1024, 8
    act = activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=Attention.FLASH, trainable=TrainableSpec())
    per_token = 2 * (2 * h + 8) + 2 * h + 8 * h + 4 * H + 2 * h + 2 * h + 2 * 2 * w
    assert act.per_layer == (per_token * b * s,) * 3
    assert act.embedding == 8 * b * s + 3 * 8 * b * s + 8 * s  # token ids, index tensors, wpe's position ids
    assert act.head == (2 * h + 8 + 2 * h) * b * s


def test_mpt_lora_is_refused_in_one_line(tmp_path):
    from trainfit.cli.main import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(MPT))
    rc = main(["plan", "--model", str(path), "--scope", "lora", "--seq", "128", "--mbs", "1", "--gpus", "1"])
    assert rc == 2


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _saved_per_layer(cfg, attn, b, s):
    from transformers import AutoModelForCausalLM

    from trainfit.trace.build import decoder_layers
    from trainfit.trace.hf_build import build_hf_config

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(build_hf_config(dict(cfg), attn_implementation=attn), dtype=torch.bfloat16)
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    region = {"r": "embedding"}
    seen, out, keep = set(), collections.defaultdict(int), []
    layers = list(decoder_layers(model))
    hooks = [m.register_forward_pre_hook(lambda *_, i=i: region.__setitem__("r", i)) for i, m in enumerate(layers)]
    hooks += [m.register_forward_hook(lambda *_: region.__setitem__("r", "head")) for m in layers]
    hooks.append(model.get_output_embeddings().register_forward_hook(lambda *_: region.__setitem__("r", "logits")))

    def pack(t):
        st = t.untyped_storage()
        keep.append(t)
        if st.data_ptr() not in params and st.data_ptr() not in seen and st.nbytes():
            seen.add(st.data_ptr())
            out[region["r"]] += st.nbytes()
        return t

    ids = torch.randint(0, cfg["vocab_size"], (b, s), generator=torch.Generator().manual_seed(1))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    for hk in hooks:
        hk.remove()
    return out


def test_mpt_eager_layers_equal_the_hooks():
    b, s = 2, 24
    spec = _spec(MPT)
    act = activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=Attention.EAGER, trainable=TrainableSpec())
    measured = _saved_per_layer(MPT, "eager", b, s)
    T, cpu_stats = b * s, 4 - arch_activations.LAYERNORM_STATS_BYTES
    mask = b * s * s  # the bool causal mask: first saved by layer 0's masked_fill, counted in the embedding
    assert measured[0] - mask == act.per_layer[0] + 2 * T * cpu_stats
    assert measured[1] == act.per_layer[1] + 2 * T * cpu_stats
    assert measured["embedding"] + mask == act.embedding
    assert measured["head"] == act.head + T * cpu_stats


NEOX = dict(model_type="gpt_neox", hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            vocab_size=128, max_position_embeddings=512, rotary_pct=0.25)


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "sequential"])
def test_gpt_neox_eager_layers_equal_the_hooks(parallel, dropout):
    """GPT-NeoX eager attention, full training. CPU: LayerNorm stats and dropout's bf16 noise (2 B an element, CUDA's
    mask 1 B) added back; the rotary cos/sin are first saved inside layer 0 (the model counts them once, in the
    embedding), and so is the embedding dropout's noise."""
    b, s, h = 2, 24, 64
    cfg = dict(NEOX, use_parallel_residual=parallel, hidden_dropout=dropout)
    spec = _spec(cfg)
    assert not spec.unplanned and spec.parallel_residual is parallel and spec.partial_rotary_factor == 0.25
    act = activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=Attention.EAGER, trainable=TrainableSpec())
    measured = _saved_per_layer(cfg, "eager", b, s)
    T = b * s
    cpu = 2 * T * (4 - arch_activations.LAYERNORM_STATS_BYTES) + (2 * T * h if dropout else 0)
    rope = 2 * 2 * s * 4  # cos and sin, (1, s, 0.25 x head_dim 16) bf16
    emb_noise = 2 * T * h if dropout else 0  # CPU noise of emb_dropout (CUDA: a T x h bool mask, in act.embedding)
    assert measured[0] - rope == act.per_layer[0] + cpu
    assert measured[1] == act.per_layer[1] + cpu
    assert measured["embedding"] - emb_noise + rope + (T * h if dropout else 0) == act.embedding
    assert measured["head"] == act.head + T * (4 - arch_activations.LAYERNORM_STATS_BYTES)


def test_gpt_neox_sdpa_v_keeps_the_fused_output():
    """SDPA's v is a view of query_key_value's output: the layer holds all of it (b, s, 3h) as v's storage."""
    spec = _spec(dict(NEOX, hidden_size=256, num_attention_heads=8, intermediate_size=1024))
    b, s, h, w, H = 2, 128, 256, 1024, 8
    per_token = (2 * h + 8) + 8 + 2 * h + (2 * h + 2 * h + 2 * 3 * h + 2 * h + 4 * H) + 2 * h + 2 * h + 2 * 2 * w
    act = activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=Attention.SDPA, trainable=TrainableSpec())
    assert act.per_layer == (per_token * b * s,) * 2


def test_gpt_neox_rotary_pct_is_checked():
    from trainfit.errors import ConfigError

    with pytest.raises(ConfigError, match="'rotary_pct' must be a number in"):
        _spec(dict(NEOX, rotary_pct=1.5))
    assert _spec(dict(NEOX, rotary_pct=None, rope_parameters={"partial_rotary_factor": 0.5})).partial_rotary_factor == 0.5


GPT2 = dict(model_type="gpt2", n_embd=256, n_layer=3, n_head=8, n_positions=512, vocab_size=1000, attn_pdrop=0.0)


@pytest.mark.parametrize(("act", "gelu_saved"), [("gelu", 1), ("gelu_pytorch_tanh", 1), ("gelu_new", 4)])
def test_gpt2_layer_by_hand(act, gelu_saved):
    """GPT-2 (SDPA), full training, resid/embd dropout 0.1, per token: ln_1 and ln_2 2h + 8 each, c_attn's input 2h,
    the fused c_attn output that q/k/v view 6h, SDPA's output (c_proj's input too) 2h and fp32 lse 4H, two dropout
    masks h each, c_fc's input 2h, the activation's saved set (gelu_new: x, 0.5x, tanh, 1 + tanh) and c_proj's
    input 2I."""
    spec = _spec(dict(GPT2, activation_function=act))
    assert not spec.unplanned
    b, s, h, w, H = 2, 64, 256, 1024, 8
    act_b = activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=Attention.SDPA, trainable=TrainableSpec())
    per_token = 2 * (2 * h + 8) + 2 * h + 6 * h + 2 * h + 4 * H + 2 * h + 2 * h + 2 * w * gelu_saved + 2 * w
    assert act_b.per_layer == (per_token * b * s,) * 3
    assert act_b.embedding == 8 * b * s + 8 * s + h * b * s  # ids, wpe's position ids, the embedding dropout mask


TRACE_CFGS = {
    "mpt": (dict(model_type="mpt", d_model=256, n_layers=4, n_heads=8, max_seq_len=4096, vocab_size=4096,
                 no_bias=True, attn_config={"alibi": True}), "eager", 0.02),
    "gpt_neox": (dict(model_type="gpt_neox", hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                      num_attention_heads=8, vocab_size=4096, max_position_embeddings=4096, rotary_pct=0.25,
                      tie_word_embeddings=False), "sdpa", 0.02),
    "gpt_neox_sequential_dropout": (dict(model_type="gpt_neox", hidden_size=256, intermediate_size=1024,
                                         num_hidden_layers=4, num_attention_heads=8, vocab_size=4096,
                                         max_position_embeddings=4096, rotary_pct=0.25, tie_word_embeddings=False,
                                         use_parallel_residual=False, hidden_dropout=0.1), "sdpa", 0.02),
    "gpt2": (dict(model_type="gpt2", n_embd=256, n_layer=4, n_head=8, n_positions=4096, vocab_size=4096,
                  attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0, activation_function="gelu"), "sdpa", 0.02),
    "gpt2_gelu_new_dropout": (dict(model_type="gpt2", n_embd=256, n_layer=4, n_head=8, n_positions=4096,
                                   vocab_size=4096, attn_pdrop=0.0), "sdpa", 0.02),
    "gpt_neox_eager": (dict(model_type="gpt_neox", hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                            num_attention_heads=8, vocab_size=4096, max_position_embeddings=4096, rotary_pct=0.25,
                            tie_word_embeddings=False), "eager", 0.02),
}


@pytest.mark.trace
@pytest.mark.parametrize("ckpt", ["--ckpt", "--no-ckpt"])
@pytest.mark.parametrize("family", list(TRACE_CFGS))
def test_plan_near_the_trace(family, ckpt, tmp_path, capsys):
    """Full training, one GPU, b 2 x s 512. MPT eager: +0.02% without checkpointing, -0.67% with it (its fitted
    per-score transients, ``memory.attention.EAGER_BYTES_PER_SCORE_BY_FAMILY``). GPT-NeoX eager: +0.02% / +0.34%
    (the MLP's saved bytes are released before the attention backward). GPT-NeoX SDPA: -0.02% / +0.03%
    (parallel residual), -0.33% / -1.82% (sequential, hidden_dropout 0.1: the trace's CPU dropout keeps bf16 noise
    where CUDA keeps a bool mask). GPT-2 SDPA: 0.00% / +0.03% (exact GELU, no dropout); -0.30% / -1.58% (gelu_new,
    resid/embd dropout 0.1)."""
    from trainfit.cli.main import main

    cfg, attn, tol = TRACE_CFGS[family]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["trace", "--model", str(path), "--scope", "full", "--seq", "512", "--mbs", "2", "--strategy",
                 "single", "--gpus", "1", "--attention", attn, ckpt, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert abs(out["peak_error"]) < tol, out["peak_error"]


def test_gelu_new_saves_four_tensors():
    """transformers' NewGELUActivation (GPT-2's gelu_new) in torch ops saves GELU_NEW_SAVED input-sized tensors."""
    from transformers.activations import ACT2FN

    x = torch.randn(4, 32, dtype=torch.bfloat16, requires_grad=True) * 1  # a non-leaf, as c_fc's output
    seen = set()

    def pack(t):
        seen.add(t.untyped_storage().data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        ACT2FN["gelu_new"](x)
    assert len(seen) == arch_activations.GELU_NEW_SAVED
