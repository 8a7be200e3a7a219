"""``memory.hf_prefill`` against PyTorch's MemTracker on a real transformers ``generate`` call (the acceptance
policy's shape: Qwen3, hidden 64, intermediate 128, 2 layers, fp32, one sequence per call)."""

from __future__ import annotations

import gc

import pytest

from trainfit.memory.hf_prefill import hf_generate_peak_bytes, hf_prefill_activation_bytes_per_token

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

HIDDEN, INTER, LAYERS, KV_HEADS, HEAD_DIM, VOCAB = 64, 128, 2, 2, 16, 512


def _model():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                      num_attention_heads=4, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
                      max_position_embeddings=2048, tie_word_embeddings=False, pad_token_id=0, eos_token_id=1)
    return Qwen3ForCausalLM(cfg).eval()


def _measured_generation_bytes(prompt_tokens: int, new_tokens: int) -> float:
    """The peak over the parameters while one batch-1 greedy generate call runs, under the watch's CPU probe."""
    from trainfit.watch.probe import CpuProbe

    model = _model()
    probe = CpuProbe()
    probe.open(model)
    try:
        ids = (torch.arange(prompt_tokens) % (VOCAB - 2) + 2)[None]
        with torch.no_grad():
            model(ids[:, :2])  # the tracker's module hook registers the parameters on the first call
        gc.collect()
        base = sum(s["Total"] for s in probe.mt._curr_mem_snap.values())
        t = probe.begin()
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                           do_sample=False)
        return probe.end(t).tensor_bytes - base
    finally:
        probe.close()


@pytest.mark.parametrize("prompt_tokens", [252, 96])
def test_prefill_term_matches_a_real_generate_call(prompt_tokens):
    kv = 2 * LAYERS * KV_HEADS * HEAD_DIM * 4.0  # fp32 keys and values of every layer, one token
    act = hf_prefill_activation_bytes_per_token(num_layers=LAYERS, hidden_size=HIDDEN, intermediate_size=INTER,
                                                head_dim=HEAD_DIM, dtype_bytes=4)
    planned = hf_generate_peak_bytes(sequences=1, prefill_tokens=prompt_tokens, total_tokens=prompt_tokens + 4,
                                     kv_bytes_per_token=kv, activation_bytes_per_token=act, vocab_size=VOCAB)
    measured = _measured_generation_bytes(prompt_tokens, 4)
    # the tracker rounds every storage up to 512 bytes and counts the step's small tensors (ids, masks, positions)
    assert measured == pytest.approx(planned, rel=0.05), (measured, planned)


def test_prefill_is_the_peak_until_the_decode_outgrows_it():
    common = dict(sequences=2, kv_bytes_per_token=512.0, activation_bytes_per_token=2688.0, vocab_size=VOCAB)
    assert hf_generate_peak_bytes(prefill_tokens=100, total_tokens=200, **common) == 2 * 100 * (512 + 2688)
    assert hf_generate_peak_bytes(prefill_tokens=100, total_tokens=1000, **common) == 2 * 1000 * 512 + 2 * VOCAB * 4
    assert hf_prefill_activation_bytes_per_token(num_layers=1, hidden_size=64, intermediate_size=128, head_dim=16,
                                                 dtype_bytes=2) == (3 * 64 + 3 * 128 + 32) * 2
