"""The fake-tensor trace finds the decoder layers of the GPT-style families (``trace.build.decoder_layers``:
GPT-2 / GPTBigCode / Falcon ``transformer.h``, MPT ``transformer.blocks``, GPT-NeoX ``gpt_neox.layers``) and
their depth keys (MPT ``n_layers``, GPT-2 ``n_layer``): a trace of a few layers extrapolates exactly to the full
depth, with and without checkpointing (which hooks every layer)."""

import pytest

pytest.importorskip("torch")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

CFGS = {
    "gpt2": (dict(model_type="gpt2", n_embd=64, n_layer=5, n_head=2, n_positions=128, vocab_size=256,
                  activation_function="gelu", attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0), "sdpa"),
    "gpt_bigcode": (dict(model_type="gpt_bigcode", n_embd=64, n_layer=5, n_head=2, n_positions=128, vocab_size=256,
                         attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0), "sdpa"),
    "mpt": (dict(model_type="mpt", d_model=64, n_layers=5, n_heads=2, max_seq_len=128, vocab_size=256, no_bias=True,
                 attn_config={"alibi": True}), "eager"),
    "gpt_neox": (dict(model_type="gpt_neox", hidden_size=64, intermediate_size=256, num_hidden_layers=5,
                      num_attention_heads=2, vocab_size=256, max_position_embeddings=128), "sdpa"),
    "falcon": (dict(model_type="falcon", hidden_size=64, num_hidden_layers=5, num_attention_heads=2, vocab_size=256),
               "sdpa"),
}


@pytest.mark.parametrize("family", list(CFGS))
def test_gpt_family_traces_and_extrapolates(family):
    cfg, attn = CFGS[family]
    kw = dict(hf_config=cfg, seq_len=32, attention=attn, gradient_checkpointing=True, optimizer_impl="for_loop")
    ext = trace_step(TraceRequest(**kw))
    full = trace_step(TraceRequest(layers=5, **kw))
    assert ext.extrapolated and max(ext.layers_traced) < 5
    assert [p.peak_bytes for p in ext.phases] == [p.peak_bytes for p in full.phases]
    assert ext.params_total == full.params_total > 0
