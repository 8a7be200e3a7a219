"""Sliding-window layers cost the key tiles the kernel runs (``compute.attention_time`` module docstring)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.attention_time import windowed_attention_keys, windowed_attention_seq
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
