"""The trace API surface: validation, lazy imports, progress, QLoRA refusal."""

import subprocess
import sys

import pytest

from trainfit.trace.api import TraceRequest, TraceUnsupported

pytestmark = pytest.mark.trace

TINY = dict(model_type="qwen3", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=32, vocab_size=256, tie_word_embeddings=False)


def test_api_module_does_not_import_torch():
    code = "import sys, trainfit.trace.api; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("field,value", [("attention", "flash"), ("scope", "loha"), ("precision", "fp16"),
                                         ("optimizer_impl", "apex"), ("mode", "slow")])
def test_bad_choice_names_field_and_choices(field, value):
    with pytest.raises(TraceUnsupported, match=field):
        TraceRequest(hf_config=TINY, **{field: value})


def test_bad_sizes():
    with pytest.raises(TraceUnsupported, match="seq_len"):
        TraceRequest(hf_config=TINY, seq_len=0)
    with pytest.raises(TraceUnsupported, match="layers"):
        TraceRequest(hf_config=TINY, layers=0)


def test_progress_is_monotone_and_ends_at_one():
    pytest.importorskip("torch")
    from trainfit.trace.api import trace_step

    seen = []
    r = trace_step(TraceRequest(hf_config=TINY, seq_len=32), progress=lambda label, f: seen.append((label, f)))
    fracs = [f for _, f in seen]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and 0.0 <= fracs[0]
    assert any("forward" in lbl or "trace" in lbl for lbl, _ in seen)
    assert r.peak_bytes == max(p.peak_bytes for p in r.phases)
    assert r.peak_phase in ("forward", "backward", "optimizer_step")
    assert [p.name for p in r.phases] == ["forward", "backward", "optimizer_step"]


def test_qlora_without_bitsandbytes_says_why(monkeypatch):
    pytest.importorskip("torch")
    import importlib.util

    from trainfit.trace.api import trace_step

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else real(name, *a))
    with pytest.raises(TraceUnsupported, match="bitsandbytes is not installed"):
        trace_step(TraceRequest(hf_config=TINY, seq_len=32, scope="qlora"))


def test_gemma2_sdpa_is_unsupported_by_transformers():
    pytest.importorskip("torch")
    from trainfit.trace.api import trace_step

    cfg = dict(TINY, model_type="gemma2", query_pre_attn_scalar=32, attn_logit_softcapping=50.0,
               final_logit_softcapping=30.0, sliding_window=16, hidden_activation="gelu_pytorch_tanh")
    with pytest.raises(TraceUnsupported, match="gemma2"):
        trace_step(TraceRequest(hf_config=cfg, seq_len=32, attention="sdpa"))


def test_padding_mask_refused_on_prime_rl_sft_loop():
    # prime_rl_sft_loss calls model(input_ids=ids) without a mask: the request would silently drop it
    with pytest.raises(TraceUnsupported, match="padding_mask"):
        TraceRequest(hf_config=TINY, padding_mask=True, keep_outputs=True, kept_output_dtype="fp32")
    TraceRequest(hf_config=TINY, padding_mask=True, keep_outputs=True)  # the compute-dtype kept output takes it


_BNB_AFTER_TRACE = (
    "import sys\n"
    "from trainfit.trace.api import TraceRequest, trace_step\n"
    "trace_step(TraceRequest(hf_config={tiny!r}, seq_len=16, scope={scope!r}))\n"
    "print('bitsandbytes' in sys.modules)\n"
)


@pytest.mark.parametrize("scope,imported", [("full", False),
                                            pytest.param("lora", True, marks=pytest.mark.slow)])
def test_bitsandbytes_is_imported_only_for_adapter_scopes(scope, imported):
    """A full-scope build never needs bitsandbytes (its import added 1.0-1.3 s to a cold full-scope tiny trace, 5.5 s -> 4.3 s
    measured on this CPU); an adapter scope imports
    it quietly before PEFT does (PEFT imports it for any LoRA model once it is installed)."""
    pytest.importorskip("torch")
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        pytest.skip("bitsandbytes not installed: nothing to import")
    code = _BNB_AFTER_TRACE.format(tiny=TINY, scope=scope)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip().splitlines()[-1] == str(imported)
