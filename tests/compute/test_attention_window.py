"""Sliding-window layers cost the key tiles the kernel runs (``compute.attention_time`` module docstring)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.attention_time import (
    mask_bias_read_bytes,
    window_mask_forward_bytes,
    windowed_attention_keys,
    windowed_attention_seq,
)
from trainfit.compute.inventory import step_inventory
from trainfit.plan.time import rank_spec

GPT_OSS = from_catalog("openai/gpt-oss-120b")
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")


def test_window_keys_count_whole_tiles():
    # 4,096 tokens in 32 tiles of 128: causal runs 32·33/2 = 528 tiles; a 128-token window runs the diagonal tile and
    # the one before it for every query block but the first: 1 + 31·2 = 63 (flash_fwd_kernel.h n_block_min)
    assert windowed_attention_keys(window_tokens=128, context_tokens=4096) == pytest.approx(2048 * 63 / 528)
    # a window covering the row is plain causal attention
    assert windowed_attention_keys(window_tokens=4096, context_tokens=2048) == 1024
    assert windowed_attention_keys(window_tokens=4096, context_tokens=4096) == 2048
    # long rows: two tiles per query block, 256 keys per query however long the row
    assert windowed_attention_keys(window_tokens=128, context_tokens=131072) == pytest.approx(256, rel=0.01)
    assert windowed_attention_seq(keys_per_query=244.0) == 488.0
    with pytest.raises(ValueError):
        windowed_attention_keys(window_tokens=0, context_tokens=4096)


def test_gpt_oss_windowed_layers_do_less_attention_work():
    assert GPT_OSS.sliding_window == 128 and len(GPT_OSS.sliding_layers) == 18
    full = replace(GPT_OSS, sliding_layers=())
    win = step_inventory(GPT_OSS, micro_batch_size=1, seq_len=4096).layers_forward
    ref = step_inventory(full, micro_batch_size=1, seq_len=4096).layers_forward
    per_layer = ref.attention_forward_flops / 36
    keys = windowed_attention_keys(window_tokens=128, context_tokens=4096)
    assert win.window_attention_forward_flops == pytest.approx(18 * per_layer * keys / 2048)
    assert win.attention_forward_flops == pytest.approx(18 * per_layer + win.window_attention_forward_flops)
    assert win.window_attention_seq == pytest.approx(2 * keys)
    assert ref.window_attention_forward_flops == 0.0
    # kernels that compute every key block (SDPA with an explicit mask) gain nothing from the window
    masked = step_inventory(GPT_OSS, micro_batch_size=1, seq_len=4096, causal_skip=False).layers_forward
    assert masked.window_attention_forward_flops == 0.0
    assert masked.attention_forward_flops == pytest.approx(2 * ref.attention_forward_flops)
    # a model without windows is untouched
    assert step_inventory(LLAMA8, micro_batch_size=1, seq_len=4096).layers_forward.window_attention_forward_flops == 0


def test_pipeline_stage_keeps_its_own_sliding_layers():
    stage = rank_spec(GPT_OSS, tp=1, pp=4, ep=1, etp=1)
    assert stage.num_layers == 9
    assert all(i < 9 for i in stage.sliding_layers) and len(stage.sliding_layers) in (4, 5)


PHI3 = from_catalog("microsoft/Phi-3-mini-4k-instruct")
MISTRAL = from_catalog("mistralai/Mistral-7B-v0.1")


@pytest.mark.parametrize("spec", [PHI3, MISTRAL], ids=lambda s: s.name)
def test_every_layer_windowed_flash_does_no_more_than_causal_and_masked_sdpa_every_block(spec):
    """Phi-3 and Mistral window every layer (``catalog.hf_config``). Past the window flash skips the tiles before it
    (no more work than the causal row); SDPA handed transformers' window mask runs every key block, the causal work
    twice, converts the bool mask once per layer (``attention_time.window_mask_forward_bytes``) and its kernel reads the
    mask once per head (``attention_time.mask_bias_read_bytes``)."""
    assert spec.sliding_layers == tuple(range(spec.num_layers))
    s = 4 * spec.sliding_window
    causal = step_inventory(replace(spec, sliding_layers=()), micro_batch_size=2, seq_len=s).layers_forward
    flash = step_inventory(spec, micro_batch_size=2, seq_len=s).layers_forward
    sdpa = step_inventory(spec, micro_batch_size=2, seq_len=s, window_mask=True,
                          mask_layers=spec.num_layers).layers_forward
    assert flash.attention_forward_flops < causal.attention_forward_flops
    assert sdpa.attention_forward_flops == pytest.approx(2 * causal.attention_forward_flops)
    assert sdpa.window_attention_forward_flops == 0.0
    # the bool mask converted once per layer, then read by the memory-efficient kernel once per head
    assert sdpa.memory_bytes - flash.memory_bytes == pytest.approx(
        (window_mask_forward_bytes(micro_batch_size=2, seq_len=s)
         + mask_bias_read_bytes(micro_batch_size=2, heads=spec.num_attention_heads, seq_len=s)) * spec.num_layers)
    # below the window both are the causal row
    short = spec.sliding_window - 1
    assert (step_inventory(spec, micro_batch_size=2, seq_len=short).layers_forward.attention_forward_flops
            == step_inventory(replace(spec, sliding_layers=()), micro_batch_size=2,
                              seq_len=short).layers_forward.attention_forward_flops)


def test_masked_sdpa_is_planned_from_the_window_on():
    from trainfit.plan.time import window_masked_sdpa
    from trainfit.spec.card import load_card_dict

    def card(seq_len, attention="sdpa"):
        return load_card_dict({"model": "microsoft/Phi-3-mini-4k-instruct", "attention": attention,
                               "batch": {"seq_len": seq_len}})

    assert not window_masked_sdpa(PHI3, card(2046), seq_len=2046)
    assert window_masked_sdpa(PHI3, card(2047), seq_len=2047)  # kv_length >= sliding_window: the mask is built
    assert not window_masked_sdpa(PHI3, card(4096, "flash"), seq_len=4096)
    assert not window_masked_sdpa(PHI3, card(4096, "eager"), seq_len=4096)
    assert not window_masked_sdpa(LLAMA8, card(4096), seq_len=4096)


def test_a_no_grad_pass_prices_the_window_mask_as_training_does():
    """forward_only_time threads window_mask into step_inventory: the masked SDPA's every key block and the mask's
    conversion, as the training forward."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute import rates as rt
    from trainfit.compute.training import forward_only_time

    r = rt.default_rates(resolve_gpu("h100-sxm"))
    kw = {"rates": r, "micro_batch_size": 2, "seq_len": 4096, "micro_steps": 1}
    skip = forward_only_time(PHI3, **kw)
    masked = forward_only_time(PHI3, window_mask=True, mask_layers=PHI3.num_layers, **kw)
    assert masked.attention_s > skip.attention_s
    assert masked.memory_s > skip.memory_s


def test_rl_logprob_passes_take_the_window_mask_past_the_window(monkeypatch):
    """An sdpa Phi-3 mini RL card past its 2047-token window: the log-prob passes get window_mask, as its update."""
    import trainfit.plan.rl_passes as rl_passes
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    seen = []
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        seen.append(kwargs["window_mask"])
        return real(*args, **kwargs)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)

    def card(response_len, attention="sdpa"):
        return load_card_dict({
            "model": "microsoft/Phi-3-mini-4k-instruct", "method": "grpo", "attention": attention,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 2},
            "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 512,
                        "response_len": response_len, "logprob_micro_batch_size": 2,
                        "recompute_old_logprobs": True},
        })

    make_plan(card(3584))
    assert seen and all(seen)
    seen.clear()
    make_plan(card(1024))  # 1536 tokens: under the window, SDPA runs is_causal
    assert seen and not any(seen)
    seen.clear()
    make_plan(card(3584, "flash"))
    assert seen and not any(seen)


def test_the_mask_conversion_writes_the_compute_dtype():
    """The bool mask read (1 B) and written in the query's dtype: 3 B per element in bf16, 5 in fp32, as the memory
    side saves it at the compute dtype; the kernel then reads that converted mask once per head, 2 B more per element
    and head in fp32 (``attention_time.mask_bias_read_bytes``)."""
    assert window_mask_forward_bytes(micro_batch_size=2, seq_len=4096) == 3 * 2 * 4096**2
    assert window_mask_forward_bytes(micro_batch_size=2, seq_len=4096, dtype_bytes=4) == 5 * 2 * 4096**2
    kw = {"micro_batch_size": 2, "seq_len": 4096, "window_mask": True, "mask_layers": len(PHI3.sliding_layers)}
    bf16 = step_inventory(PHI3, **kw).layers_forward.memory_bytes
    fp32 = step_inventory(PHI3, window_mask_dtype_bytes=4, **kw).layers_forward.memory_bytes
    assert fp32 - bf16 == pytest.approx(2 * 2 * 4096**2 * (1 + PHI3.num_attention_heads) * len(PHI3.sliding_layers))


def test_an_fp32_card_prices_its_mask_in_fp32(monkeypatch):
    import trainfit.plan.time as pt
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    seen = []
    real = pt.train_step_time

    def spy(*args, **kwargs):
        seen.append(kwargs["window_mask_dtype_bytes"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pt, "train_step_time", spy)
    for compute, want in (("fp32", 4), ("bf16", 2)):
        seen.clear()
        make_plan(load_card_dict({"model": "microsoft/Phi-3-mini-4k-instruct", "attention": "sdpa",
                                  "precision": {"compute": compute}, "batch": {"seq_len": 4096}}))
        assert seen and set(seen) == {want}


def test_a_padding_mask_converts_the_mask_in_every_sdpa_layer():
    """Under ``batch.padding`` mask every SDPA layer of a transformers model takes the bool mask (the memory side's
    ``sdpa_masked``), so each converts it, windowed or not: Llama-3.1-8B, 32 layers; flash and unpadded cards none."""
    from trainfit.plan.time import sdpa_mask_layers
    from trainfit.spec.card import load_card_dict

    def card(**kw):
        return load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft", "batch": {"seq_len": 2048},
                               **kw})

    padded = {"batch": {"seq_len": 2048, "padding": "mask"}}
    assert sdpa_mask_layers(LLAMA8, card(attention="sdpa", **padded), seq_len=2048) == 32
    assert sdpa_mask_layers(LLAMA8, card(attention="sdpa"), seq_len=2048) == 0
    assert sdpa_mask_layers(LLAMA8, card(attention="flash", **padded), seq_len=2048) == 0
    # 32 conversions of a (2, 1, 2048, 2048) bool mask: read 1 B, write 2 B per element (window_mask_forward_bytes)
    with_mask = step_inventory(LLAMA8, micro_batch_size=2, seq_len=2048, causal_skip=False, mask_layers=32)
    without = step_inventory(LLAMA8, micro_batch_size=2, seq_len=2048, causal_skip=False)
    assert (with_mask.layers_forward.memory_bytes - without.layers_forward.memory_bytes
            == pytest.approx(805_306_368.0))  # 32 layers x 3 B x 2 x 2048 x 2048
