"""TRL's fused lm_head log-prob memory (memory/logits.trl_fused_logprob_bytes)."""


def test_trl_tile_is_the_full_chunk_even_for_a_small_vocabulary():
    """trl/kernels/chunked_logprob.py (TRL 1.16) allocates ``mm_buf = torch.empty((min(N, TOKEN_CHUNK_SIZE),
    chunk_size))`` and slices it per vocabulary chunk: a head narrower than the chunk still pays the whole tile
    (the acceptance run's 512-token policy measures it: GRPO forward ~138 MiB on the CPU tracker)."""
    from trainfit.memory.logits import TRL_TOKEN_CHUNK, TRL_VOCAB_CHUNK, trl_fused_logprob_bytes

    small = trl_fused_logprob_bytes(tokens=256, hidden_size=64, vocab_size=512)
    wide = trl_fused_logprob_bytes(tokens=256, hidden_size=64, vocab_size=TRL_VOCAB_CHUNK)
    assert small.forward_peak == wide.forward_peak
    assert small.forward_peak >= min(256, TRL_TOKEN_CHUNK) * TRL_VOCAB_CHUNK * 2
