"""Eager attention's backward transient (``memory.attention``): CUDA's softmax-backward product is fp32
(4 B per score) whatever the model's dtype; the rest of the term scales with it."""

from hypothesis import given
from hypothesis import strategies as st

from trainfit.memory import attention as attn

SCORES = st.integers(min_value=0, max_value=2**40)
DTYPES = st.sampled_from([1, 2, 4])


@given(SCORES, DTYPES)
def test_the_product_is_fp32_and_the_rest_scales_with_the_dtype(scores, dtype_bytes):
    total = attn.backward_transient_bytes(scores=scores, dtype_bytes=dtype_bytes)
    tmp = attn.softmax_backward_tmp_bytes(scores=scores, dtype_bytes=dtype_bytes)
    assert tmp == 4 * scores
    assert total - tmp == attn.BACKWARD_BYTES_PER_SCORE * scores * dtype_bytes / 2


def test_bf16_eager_backward_is_ten_bytes_per_score():
    """6 B of bf16 / fp32 buffers (the probabilities' gradient, its fp32 copy) and the 4 B fp32 product."""
    assert attn.backward_transient_bytes(scores=1, dtype_bytes=2) == 10
    assert attn.backward_transient_bytes(scores=1, dtype_bytes=4) == 16


@given(SCORES, DTYPES)
def test_gpt_oss_product_is_in_the_model_dtype(scores, dtype_bytes):
    """gpt-oss takes its softmax in the model's dtype: its product too, one of the three score-sized tensors of its
    6 B (the sink-extended probabilities' gradient, the softmax's input gradient, the product)."""
    total = attn.backward_transient_bytes(scores=scores, dtype_bytes=dtype_bytes, family="gpt_oss")
    assert attn.softmax_backward_tmp_bytes(scores=scores, dtype_bytes=dtype_bytes, family="gpt_oss") == scores * dtype_bytes
    assert total == scores * 3 * dtype_bytes
    assert total >= scores * dtype_bytes


def test_no_scores_no_transient():
    assert attn.score_elements(micro_batch_size=2, seq_len=4096, heads=32, eager=False) == 0
    assert attn.backward_transient_bytes(scores=0.0) == 0
