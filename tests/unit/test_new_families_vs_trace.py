"""Plan vs trace for small random configs of DeepSeek-V3, gpt-oss and OPT: the planned allocated peak is
within 2% of the fake-tensor trace's (one GPU, full and LoRA, with and without checkpointing).

Measured (hidden 256, 4 layers, 8 heads, seq 512, micro-batch 2): OPT -0.01/+0.03% (full, ckpt/no ckpt),
-0.79/+0.02% (LoRA); DeepSeek-V3 -0.06/+0.16%, -0.06/-1.21%; DeepSeek-V2 (no query compression, greedy softmax
router) -0.08/-0.03%, LoRA -0.08/-0.02%; gpt-oss (eager) -0.04/-0.00%, LoRA -0.06/-0.01%;
Qwen2-MoE (shared expert 512) -0.07/-0.00%, LoRA -0.11/-0.01% (without checkpointing -11.7% and LoRA -15.2% before
its shared expert, sigmoid gate and norm_topk_prob=False were planned). With OPT's
released dropout 0.1 the trace reads 1.83% higher without checkpointing: its CPU dropout keeps a bf16
noise tensor where CUDA's native_dropout keeps a bool mask (the plan models CUDA)."""

import json

import pytest

from trainfit.cli.main import main

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.trace]

BASE = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, vocab_size=4096, max_position_embeddings=4096)
CFGS = {
    "opt": (dict(BASE, model_type="opt", ffn_dim=1024, word_embed_proj_dim=256, do_layer_norm_before=True,
                 tie_word_embeddings=True, dropout=0.0), "sdpa"),
    "gpt_oss": (dict(BASE, model_type="gpt_oss", intermediate_size=192, num_key_value_heads=2, head_dim=32,
                     tie_word_embeddings=False, num_local_experts=8, num_experts_per_tok=2, sliding_window=64,
                     layer_types=["sliding_attention", "full_attention"] * 2, attention_bias=True,
                     rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                   "original_max_position_embeddings": 128, "truncate": False}), "eager"),
    "deepseek_v3": (dict(BASE, model_type="deepseek_v3", intermediate_size=512, num_key_value_heads=8,
                         tie_word_embeddings=False, q_lora_rank=96, kv_lora_rank=64, qk_nope_head_dim=24,
                         qk_rope_head_dim=8, v_head_dim=32, n_routed_experts=8, n_shared_experts=1,
                         num_experts_per_tok=2, moe_intermediate_size=128, first_k_dense_replace=1, n_group=4,
                         topk_group=2), "sdpa"),
    "deepseek_v2": (dict(BASE, model_type="deepseek_v2", intermediate_size=512, num_key_value_heads=8,
                         tie_word_embeddings=False, q_lora_rank=None, kv_lora_rank=64, qk_nope_head_dim=16,
                         qk_rope_head_dim=16, v_head_dim=32, n_routed_experts=8, n_shared_experts=2,
                         num_experts_per_tok=2, moe_intermediate_size=128, first_k_dense_replace=1,
                         topk_method="greedy", n_group=1, topk_group=1, norm_topk_prob=False), "sdpa"),
    "qwen2_moe": (dict(BASE, model_type="qwen2_moe", intermediate_size=512, num_key_value_heads=8,
                       tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=128,
                       shared_expert_intermediate_size=512, decoder_sparse_step=1), "sdpa"),
}


@pytest.mark.parametrize("ckpt", ["--ckpt", "--no-ckpt"])
@pytest.mark.parametrize("scope", ["full", "lora"])
@pytest.mark.parametrize("family", list(CFGS))
def test_plan_within_2_percent_of_trace(family, scope, ckpt, tmp_path, capsys):
    cfg, attn = CFGS[family]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["trace", "--model", str(path), "--scope", scope, "--seq", "512", "--mbs", "2", "--strategy", "single",
                 "--gpus", "1", "--attention", attn, ckpt, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert abs(out["peak_error"]) < 0.02, out["peak_error"]


@pytest.mark.parametrize("targets", ["[q_proj,k_proj,v_proj,o_proj,gate_up_proj,down_proj]",
                                     "[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"])
def test_gpt_oss_lora_naming_experts_plans_what_peft_wraps(targets, tmp_path, capsys):
    """PEFT never wraps gpt-oss's 3-D experts from target_modules (attention only, as all-linear): the plan
    was 11.5% over the trace (14.7% with checkpointing) while it counted expert adapters; measured -0.005%."""
    cfg, attn = CFGS["gpt_oss"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["trace", "--model", str(path), "--scope", "lora", "--seq", "512", "--mbs", "2", "--strategy",
                 "single", "--gpus", "1", "--attention", attn, "--no-ckpt", "--set", f"lora.targets={targets}",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params_trainable"] == 4 * 16 * ((256 + 256) + 2 * (256 + 64) + (256 + 256))
    assert abs(out["peak_error"]) < 0.002, out["peak_error"]
    assert all(abs(p["error"]) < 0.01 for p in out["phases"]), out["phases"]
