"""FLOPs per token: 6N, the recompute forward, LoRA, attention, MoE active parameters."""

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.flops import (
    attention_forward_flops_per_token,
    matmul_params,
    model_flops_utilization,
    training_flops_per_token,
)
from trainfit.memory.lora import lora_trainable_params
from trainfit.memory.params import active_params, param_breakdown
from trainfit.spec.training import LoraSpec

QWEN3_8B_TOTAL = 8_190_735_360
QWEN3_8B_EMBEDDING = 151_936 * 4096


@pytest.fixture(scope="module")
def qwen3_8b():
    return from_catalog("Qwen/Qwen3-8B")


def test_six_n_per_token_qwen3_8b(qwen3_8b):
    n = QWEN3_8B_TOTAL - QWEN3_8B_EMBEDDING  # untied: the input embedding is a lookup, lm_head a matmul
    assert matmul_params(qwen3_8b) == n
    f = training_flops_per_token(qwen3_8b, seq_len=None)
    assert f.forward == 2 * n
    assert f.backward == 4 * n
    assert f.total == f.model == 6 * n
    assert f.total == pytest.approx(45.4e9, rel=1e-3)


def test_recompute_adds_one_forward(qwen3_8b):
    plain = training_flops_per_token(qwen3_8b, seq_len=4096)
    ckpt = training_flops_per_token(qwen3_8b, seq_len=4096, recompute=True)
    assert ckpt.recompute == plain.forward
    assert ckpt.total == pytest.approx(plain.total * 4 / 3)
    assert ckpt.model == plain.model  # MFU never counts the recompute (PaLM appendix B)


def test_lora_is_4n_plus_6n_lora_and_cheaper_than_full(qwen3_8b):
    n_lora = lora_trainable_params(qwen3_8b, LoraSpec(rank=16))
    lora = training_flops_per_token(qwen3_8b, seq_len=None, adapter=True, lora_params=n_lora)
    full = training_flops_per_token(qwen3_8b, seq_len=None)
    assert lora.total == pytest.approx(4 * matmul_params(qwen3_8b) + 6 * n_lora)
    assert lora.total < full.total
    assert lora.total / full.total == pytest.approx(2 / 3, abs=0.01)


def test_attention_flops_causal_halves_and_matches_palm(qwen3_8b):
    s = 8192
    causal = attention_forward_flops_per_token(qwen3_8b, context_len=s)
    full = attention_forward_flops_per_token(qwen3_8b, context_len=s, causal=False)
    assert full == 2 * causal
    # PaLM appendix B / torchtitan: 12·L·H·Q·T per trained token, non-causal (forward + 2x backward)
    layers, q_dim = 36, 32 * 128
    assert 3 * full == 12 * layers * q_dim * s
    with_attn = training_flops_per_token(qwen3_8b, seq_len=s)
    assert with_attn.total - training_flops_per_token(qwen3_8b, seq_len=None).total == pytest.approx(3 * causal)


def test_tied_embedding_counts_as_the_head_matmul():
    spec = from_catalog("Qwen/Qwen3-0.6B")
    assert spec.tie_word_embeddings
    assert matmul_params(spec) == param_breakdown(spec).total


def test_moe_uses_active_parameters():
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    pb = param_breakdown(spec)
    assert matmul_params(spec) == active_params(spec) - pb.embedding
    assert matmul_params(spec) < 0.15 * pb.total  # about 3.3B active of 30.5B
    assert training_flops_per_token(spec, seq_len=None).total == pytest.approx(6 * matmul_params(spec))


def test_mfu_definition():
    # torchtitan's A100 table (docs/performance.md @0413364): Llama 3 8B, 2973 tokens/s/GPU, 58.2 % MFU.
    # Its counter then took 6 x all parameters (embedding included) + 12·L·H·Q·T (non-causal attention).
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    per_token = 6 * param_breakdown(spec).total + 3 * attention_forward_flops_per_token(
        spec, context_len=8192, causal=False
    )
    mfu = model_flops_utilization(tokens_per_s=2973, model_flops_per_token=per_token, peak_flops_per_s=312e12)
    assert mfu == pytest.approx(0.582, abs=0.002)


def test_windowed_keys_per_token():
    from trainfit.compute.flops import windowed_keys_per_token

    assert windowed_keys_per_token(window=4096, context_len=4096) == 2048  # the window covers the row: causal s/2
    assert windowed_keys_per_token(window=8192, context_len=4096) == 2048
    # token t sees min(t, W) keys: mean W - W^2 / (2T) for W < T, continuous with T/2 at W = T
    assert windowed_keys_per_token(window=128, context_len=4096) == pytest.approx(128 - 128 * 128 / 8192)
    assert windowed_keys_per_token(window=128, context_len=4096, causal=False) == 128
    assert windowed_keys_per_token(window=128, context_len=64, causal=False) == 64
    with pytest.raises(ValueError):
        windowed_keys_per_token(window=0, context_len=10)


def test_gpt_oss_window_layers_attend_within_their_window():
    """gpt-oss windows every other layer to 128 keys: at 4,096 tokens only the 18 full layers of the 120B pay the
    row's causal attention, as Megatron-Bridge's FLOP count takes it (flop_utils.py window_attn_skip_freq)."""
    spec = from_catalog("openai/gpt-oss-120b")
    s = 4096
    per_key = 2 * (spec.q_dim + spec.attn_out_dim)
    got = attention_forward_flops_per_token(spec, context_len=s)
    assert got == pytest.approx(per_key * (18 * s / 2 + 18 * (128 - 128 * 128 / (2 * s))))
    # Megatron-Bridge's windowed mean is W - W(W - 1)/(2T) with W = 128 + 0 + 1 (window_size (128, 0)): within 0.2 %
    bridge = per_key * (18 * s / 2 + 18 * (129 - 129 * 128 / (2 * s)))
    assert got == pytest.approx(bridge, rel=2e-3)
    assert got < 0.54 * per_key * 36 * s / 2  # about half of all-full attention
    # a window longer than the row changes nothing
    assert attention_forward_flops_per_token(spec, context_len=100) == pytest.approx(per_key * 36 * 50)
    # a model without windowed layers is unchanged
    q8 = from_catalog("Qwen/Qwen3-8B")
    assert attention_forward_flops_per_token(q8, context_len=s) == 2 * s * q8.q_dim * 36
