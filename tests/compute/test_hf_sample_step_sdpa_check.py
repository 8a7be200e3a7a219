"""The sampled decode step of transformers' ``generate`` (static_generation.HF_SAMPLE_STEP_OPS) counts the SDPA mask
check every step runs before it builds the 4-D mask: transformers 4.47.1 (the wheel from PyPI, sha256
d2f5d19bb6283cd66c893ec7e6d931d6370bbf1cc93633326ff1f41a40046c9c, read 2026-12-05)
transformers/models/qwen2/modeling_qwen2.py l.960 calls ``AttentionMaskConverter._ignore_causal_mask_sdpa``, which
for a 2-D mask runs ``torch.all(attention_mask == 1)`` (transformers/modeling_attn_mask_utils.py l.284): an ``eq`` and
an ``all`` kernel, and the ``elif`` reads the result on the host."""

from __future__ import annotations

import inspect

from trainfit.compute import static_generation


def test_the_sdpa_mask_check_is_two_ops_of_the_sampled_step() -> None:
    ops = static_generation.HF_SAMPLE_STEP_OPS
    assert ops["sdpa_ignore_causal_mask_check"] == 2  # eq, all (modeling_attn_mask_utils.py l.284)
    assert ops["sdpa_causal_mask"] == 13  # the 4-D mask built after the check returns False
    assert static_generation.HF_SAMPLE_STEP_KERNELS == sum(ops.values()) == 64


def test_the_docstring_states_the_check_and_its_host_read() -> None:
    doc = " ".join(inspect.getsource(static_generation).split())
    assert "_ignore_causal_mask_sdpa" in doc and "l.284" in doc and "modeling_qwen2.py l.960" in doc
    assert "host read" in doc
