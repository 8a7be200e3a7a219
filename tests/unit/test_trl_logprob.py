"""TRL's fused lm_head log-prob memory (memory/logits.trl_fused_logprob_bytes)."""

def test_trl_tile_is_a_slice_of_a_small_vocabulary():
    """A head narrower than TRL's vocabulary chunk is computed whole: the tile is tokens x vocab, not x chunk."""
    from trainfit.memory.logits import TRL_TOKEN_CHUNK, TRL_VOCAB_CHUNK, trl_fused_logprob_bytes

    small = trl_fused_logprob_bytes(tokens=256, hidden_size=64, vocab_size=512)
    wide = trl_fused_logprob_bytes(tokens=256, hidden_size=64, vocab_size=4 * TRL_VOCAB_CHUNK)
    tile_gap = min(256, TRL_TOKEN_CHUNK) * (TRL_VOCAB_CHUNK - 512) * 2
    assert wide.forward_peak - small.forward_peak == tile_gap
