"""The saved-for-backward model of DeepSeek-V3, gpt-oss and OPT layers equals what autograd saves on tiny
real models (``saved_tensors_hooks``, storages deduplicated, parameters excluded), per decoder layer.

The hooks run on CPU, where two ops keep other tensors than on CUDA, which the model follows: LayerNorm's
mean and rstd are bf16 there (fp32 on CUDA: 8 B per row instead of 4) and dropout keeps a bf16 noise tensor
(CUDA's ``native_dropout`` a bool mask: 1 B per element instead of 2). The comparison adds those back."""

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.memory import arch_activations
from trainfit.memory.activations import activation_bytes
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainfit.trace.hf_build import build_hf_config  # noqa: E402

CFGS = {
    "deepseek_v3": dict(model_type="deepseek_v3", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, vocab_size=128, tie_word_embeddings=False,
                        max_position_embeddings=512, q_lora_rank=40, kv_lora_rank=24, qk_nope_head_dim=16,
                        qk_rope_head_dim=8, v_head_dim=24, n_routed_experts=8, n_shared_experts=1,
                        num_experts_per_tok=2, moe_intermediate_size=48, first_k_dense_replace=1, n_group=2,
                        topk_group=1),
    # DeepSeek-V2: no query compression, a 16-wide rotary part, the softmax router (greedy, then group-limited);
    # qk_nope + qk_rope = v_head_dim, as DeepSeek-V3's case: a wider query than value sends the CPU's SDPA to its
    # math path, which the plan (CUDA kernels) does not model
    "deepseek_v2": dict(model_type="deepseek_v2", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, vocab_size=128, tie_word_embeddings=False,
                        max_position_embeddings=512, q_lora_rank=None, kv_lora_rank=24, qk_nope_head_dim=8,
                        qk_rope_head_dim=16, v_head_dim=24, n_routed_experts=8, n_shared_experts=2,
                        num_experts_per_tok=2, moe_intermediate_size=48, first_k_dense_replace=1,
                        topk_method="greedy", n_group=1, topk_group=1, norm_topk_prob=False,
                        routed_scaling_factor=1.0),
    "deepseek_v2_grouped": dict(model_type="deepseek_v2", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=4, vocab_size=128,
                                tie_word_embeddings=False, max_position_embeddings=512, q_lora_rank=40,
                                kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=24,
                                n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=2,
                                moe_intermediate_size=48, first_k_dense_replace=1,
                                topk_method="group_limited_greedy", n_group=4, topk_group=2,
                                routed_scaling_factor=16.0),
    "gpt_oss": dict(model_type="gpt_oss", hidden_size=64, intermediate_size=48, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=128,
                    tie_word_embeddings=False, max_position_embeddings=512, num_local_experts=8,
                    num_experts_per_tok=2, sliding_window=16, layer_types=["sliding_attention", "full_attention"],
                    attention_bias=True),
    "opt": dict(model_type="opt", hidden_size=64, ffn_dim=160, num_hidden_layers=2, num_attention_heads=4,
                vocab_size=128, max_position_embeddings=512, word_embed_proj_dim=64, do_layer_norm_before=True,
                tie_word_embeddings=True, dropout=0.1),
    "opt_post_ln": dict(model_type="opt", hidden_size=64, ffn_dim=160, num_hidden_layers=2, num_attention_heads=4,
                        vocab_size=128, max_position_embeddings=512, word_embed_proj_dim=32,
                        do_layer_norm_before=False, tie_word_embeddings=True, dropout=0.1),
}
ATTN = {"gpt_oss": "eager"}


def _saved_per_region(cfg, attn, b, s, lora):
    import collections
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(build_hf_config(dict(cfg), attn_implementation=attn), dtype=torch.bfloat16)
    if lora:
        peft = pytest.importorskip("peft")
        model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                           lora_dropout=0.0))
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    layers = [m for n, m in model.named_modules() if n.rsplit(".", 2)[-2:-1] == ["layers"]]
    region = {"r": "embedding"}
    seen, out, keep = set(), collections.defaultdict(int), []
    hooks = [m.register_forward_pre_hook(lambda *_, i=i: region.__setitem__("r", i)) for i, m in enumerate(layers)]
    hooks += [m.register_forward_hook(lambda *_: region.__setitem__("r", "head")) for m in layers]
    head = model.get_output_embeddings()
    hooks.append(head.register_forward_hook(lambda *_: region.__setitem__("r", "logits")))
    rope = set()
    rotary = [m for n, m in model.named_modules() if n.endswith("rotary_emb")]
    rot = rotary[0].register_forward_hook if rotary else None
    if rot is not None:
        hooks.append(rot(lambda _m, _a, o: rope.update(t.untyped_storage().data_ptr() for t in o)))

    def pack(t):
        st = t.untyped_storage()
        p = st.data_ptr()
        keep.append(t)  # an address freed and reused would otherwise read as already seen
        if p not in params and p not in seen and st.nbytes():
            seen.add(p)
            out["embedding" if p in rope else region["r"]] += st.nbytes()
        return t

    ids = torch.randint(0, cfg["vocab_size"], (b, s), generator=torch.Generator().manual_seed(1))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    for h in hooks:
        h.remove()
    return out


@pytest.mark.parametrize("lora", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["full", "lora"])
@pytest.mark.parametrize("family", list(CFGS))
def test_layers_equal_the_hooks(family, lora):
    b, s = 2, 40
    cfg = CFGS[family]
    attn = ATTN.get(family, "sdpa")
    spec = spec_from_hf_config(cfg, name=family, source="test")
    trainable = (TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=4, targets=("all-linear",))) if lora
                 else TrainableSpec())
    act = activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=Attention(attn), trainable=trainable)
    measured = _saved_per_region(cfg, attn, b, s, lora)
    T = b * s
    cpu = [0] * spec.num_layers
    if spec.family == "opt":  # CPU: bf16 LayerNorm stats (4 B a row, not 8) and dropout noise (2 B, not 1)
        for i in range(spec.num_layers):
            norms = 1 if (lora and i == 0 and spec.pre_norm) else 2  # layer 0's input needs no grad under LoRA
            cpu[i] = norms * T * (4 - arch_activations.LAYERNORM_STATS_BYTES) + 2 * T * spec.hidden_size * (
                2 - arch_activations.DROPOUT_MASK_BYTES)
    assert [measured[i] for i in range(spec.num_layers)] == [n + c for n, c in zip(act.per_layer, cpu)]
    head_cpu = T * (4 - arch_activations.LAYERNORM_STATS_BYTES) if spec.family == "opt" and spec.final_norm else 0
    assert measured["head"] == act.head + head_cpu
    assert measured["embedding"] == act.embedding
