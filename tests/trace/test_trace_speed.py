"""What keeps `trainfit trace` fast (issue #15) leaves its bytes unchanged.

Timings are not asserted (the CI machine is shared); the work that was removed is: LoRA adapters
initialised on the CPU, a full-depth model built only to count parameters, the two shallow traces
next to the full-depth one that ``--reserved`` needs, the cyclic collector walking torch's and
transformers' modules (paused from before they are imported, and frozen once per process), and the
shallower of the two extrapolation depths (cut out of the deeper trace; its byte equality is checked in
test_trace_extrapolation.py).
"""

import gc
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from trainfit.trace import api, build, collector, extrapolate, step  # noqa: E402
from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

MID = dict(model_type="qwen3", hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=4,
           num_key_value_heads=2, head_dim=64, vocab_size=4096, tie_word_embeddings=False)


def _signature(model):
    return ([(n, tuple(p.shape), p.dtype, p.requires_grad, p.device.type) for n, p in model.named_parameters()]
            + [(n, tuple(b.shape), b.dtype, b.device.type) for n, b in model.named_buffers()])


def test_lora_adapters_are_built_on_meta_as_peft_builds_them_on_the_cpu():
    """Same names, shapes, dtypes and trainability as PEFT's own CPU-initialised adapters, all on meta."""
    import torch
    from peft import LoraConfig, get_peft_model

    req = TraceRequest(hf_config=MID, scope="lora", lora_targets=("all-linear",))
    fast = build.build_meta(req, 3)
    base = build.build_meta(TraceRequest(hf_config=MID), 3)
    cfg = LoraConfig(r=req.lora_rank, lora_alpha=req.lora_alpha, lora_dropout=req.lora_dropout,
                     target_modules="all-linear", task_type="CAUSAL_LM")
    slow = get_peft_model(base, cfg)  # adapters made on the CPU, then moved to the base layers' meta device
    assert _signature(fast) == _signature(slow)
    assert {p.device for p in fast.parameters()} == {torch.device("meta")}
    assert any(p.requires_grad for p in fast.parameters())


@pytest.mark.parametrize("kw", [dict(scope="lora", gradient_checkpointing=True),
                                dict(world_size=4, scope="lora", tie_word_embeddings=True)],
                         ids=["lora-ckpt", "fsdp4-lora-tied"])
def test_parameter_counts_come_from_the_traced_depths(monkeypatch, kw):
    """No full-depth build for the counts, and only the deeper extrapolation depth is built (the shallower
    step is cut out of its trace): the counts are the line through the two depths' own counts (the deeper
    model's, and its count without one middle period) and equal the full-depth model's (tied weights once,
    global shapes under FSDP2)."""
    kw = dict(kw)
    cfg = MID | {"tie_word_embeddings": kw.pop("tie_word_embeddings", False)}
    req = TraceRequest(hf_config=cfg, seq_len=32, **kw)
    built = []
    orig = build.build_meta
    monkeypatch.setattr(build, "build_meta", lambda r, n, **k: built.append(n) or orig(r, n, **k))
    res = trace_step(req)
    assert res.extrapolated and 8 not in built and set(built) == set(res.layers_traced)
    monkeypatch.undo()
    assert (res.params_total, res.params_trainable) == build.count_params(build.build_meta(req, 8))


def test_param_counts_fall_back_to_a_build_without_run_counts():
    req = TraceRequest(hf_config=MID)
    plan = extrapolate.plan_depths(MID, None)
    assert extrapolate.param_counts(req, plan) == build.count_params(build.build_meta(req, 8))


def test_reserved_traces_the_full_depth_once(monkeypatch):
    """``--reserved`` replays the full-depth step's allocation order: that one trace gives the exact peaks
    too (equal to the extrapolated ones), so the two shallow traces are not run beside it."""
    kw = dict(hf_config=MID, seq_len=64, gradient_checkpointing=True)
    ext = trace_step(TraceRequest(**kw))
    depths = []
    orig = step.run_depth
    monkeypatch.setattr(step, "run_depth", lambda r, d, **k: depths.append(d) or orig(r, d, **k))
    rep = trace_step(TraceRequest(**kw, replay_allocator=True))
    assert depths == [8]
    assert rep.layers_traced == (8,) and not rep.extrapolated and ext.extrapolated
    assert [(p.name, p.peak_bytes, p.breakdown) for p in rep.phases] == [
        (p.name, p.peak_bytes, p.breakdown) for p in ext.phases]
    assert (rep.params_total, rep.params_trainable) == (ext.params_total, ext.params_trainable)
    assert rep.reserved_bytes is not None and rep.reserved_bytes >= rep.peak_bytes
    assert any("8-layer step replayed" in n for n in rep.notes)


def test_traced_bytes_do_not_depend_on_the_cyclic_collector():
    """``trace_step`` pauses the collector (and freezes what was imported before, once); the same trace with
    the collector running, as before, is byte-equal, and the collector is running again afterwards."""
    req = TraceRequest(hf_config=MID, seq_len=32, scope="lora", gradient_checkpointing=True)
    paused = trace_step(req)
    assert collector._FROZEN and gc.isenabled()
    collections = []
    gc.callbacks.append(cb := lambda phase, info: collections.append(phase))
    try:
        running = api._trace_step(req, None, 1, "ring", 1)
    finally:
        gc.callbacks.remove(cb)
    assert collections  # it did run during that trace
    assert [(p.name, p.peak_bytes, p.breakdown) for p in paused.phases] == [
        (p.name, p.peak_bytes, p.breakdown) for p in running.phases]


def test_torch_and_transformers_are_imported_with_the_collector_off_and_frozen():
    """In a fresh process the first trace imports torch, transformers and the modules every decoder's modeling
    module needs with the collector off (its full collections during those imports cost ~1.5 s of CPU), with
    only the one explicit collection of what was made before (torch not yet imported), then freezes them; the
    collector is running again afterwards."""
    code = (
        "import gc, sys\n"
        "from trainfit.trace.collector import collector_paused\n"
        "assert 'torch' not in sys.modules\n"
        "runs = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and runs.append(info['generation']))\n"
        "with collector_paused():\n"
        "    assert not gc.isenabled()\n"
        "    mods = {m for m in ('torch', 'transformers', 'transformers.modeling_layers', 'transformers.masking_utils')\n"
        "            if m in sys.modules}\n"
        "    frozen = gc.get_freeze_count()\n"
        "assert gc.isenabled()\n"
        "print(json.dumps([runs, sorted(mods), frozen]))\n"
    )
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], check=True, capture_output=True, text=True)
    runs, mods, frozen = json.loads(out.stdout)
    assert runs == [2]  # one collection: the explicit one before the imports
    assert mods == ["torch", "transformers", "transformers.masking_utils", "transformers.modeling_layers"]
    assert frozen > 200_000  # the imported modules' objects
