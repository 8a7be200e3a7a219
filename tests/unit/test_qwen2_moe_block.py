"""Qwen2-MoE's sparse block (transformers v5.24.0 models/qwen2_moe/modeling_qwen2_moe.py l.332-351): the routed
experts as Qwen3-MoE's, plus the shared expert and its sigmoid gate, and no top-k renormalisation unless
``norm_topk_prob`` (Qwen2MoeConfig default False). The byte counts were measured with
``torch.autograd.graph.saved_tensors_hooks`` around one bf16 block on CPU (grouped_mm experts, 1,024 tokens, input
requiring grad), summing distinct storages other than the parameters."""

from dataclasses import replace

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.memory.activations import activation_bytes, moe_block_bytes
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec

CFG = dict(model_type="qwen2_moe", hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
           vocab_size=4096, max_position_embeddings=4096, intermediate_size=512, moe_intermediate_size=128,
           shared_expert_intermediate_size=512, num_experts=8, num_experts_per_tok=2, decoder_sparse_step=1,
           tie_word_embeddings=False)


def _spec(**over):
    return spec_from_hf_config(dict(CFG, **over), name="qwen2_moe", source="test")


def test_full_block_saves_the_shared_expert_and_its_gate():
    spec = _spec()
    assert not spec.moe.norm_topk_prob  # Qwen2MoeConfig default
    # measured: 9,541,664 B (the block input 524,288 + 9,017,376); the shared expert is 4 x 512 + 256 + 1 bf16 values
    # per token of it
    assert moe_block_bytes(spec, tokens=1024) == 9_541_664
    no_shared = replace(spec, moe=replace(spec.moe, shared_expert_intermediate_size=0))
    assert moe_block_bytes(spec, tokens=1024) - moe_block_bytes(no_shared, tokens=1024) == 1024 * 2 * (4 * 512 + 256 + 1)


def test_norm_topk_prob_saves_the_sum_and_the_values():
    # measured with norm_topk_prob=True: +12,288 B (fp32 sum and top-2 values per token)
    assert moe_block_bytes(_spec(norm_topk_prob=True), tokens=1024) - moe_block_bytes(_spec(), tokens=1024) == 12_288


def _lora(targets):
    spec = _spec()
    t = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=16, targets=targets))
    return activation_bytes(spec, micro_batch_size=2, seq_len=512, attention=Attention.SDPA, trainable=t)


def test_mlp_targets_wrap_the_shared_expert_only():
    """PEFT never wraps Qwen2-MoE's 3-D experts (``trainfit.memory.lora``): gate/up/down_proj adapters are the
    shared expert's, each saving its fp32 input cast and rank-r output, and no merged expert weight."""
    base = _lora(("q_proj", "v_proj"))
    mlp = _lora(("q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"))
    T, h, sw, r = 1024, 256, 512, 16
    assert mlp.total(gradient_checkpointing=False) - base.total(gradient_checkpointing=False) == (
        4 * T * 4 * (2 * (h + r) + sw + r))
