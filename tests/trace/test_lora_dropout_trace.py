"""LoRA dropout (``lora.dropout > 0``) against the fake-tensor trace of the same PEFT step.

PEFT 0.21.2 (``tuners/lora/layer.py`` l.255-258, l.1100-1102) runs ``lora_B(lora_A(dropout(x.to(fp32))))``
with one ``nn.Dropout`` per wrapped module. The plan (``trainfit.memory.activations._adapter_saved``) counts
each module's dropout output (replacing the fp32 input cast ``lora_A`` saved before: the same bytes) and a
CUDA bool mask, 1 B per element, where the module input needs a gradient. The CPU trace runs torch's
non-fused dropout, which saves an fp32 noise tensor (4 B per element) instead of the mask: the traced
increase is exactly 4x the planned one, and the plan with the mask re-priced at 4 B is within 2% of the trace.

Llama, hidden 256, intermediate 688, 4 layers, q/kv heads 8/4, seq 512, micro-batch 2 (T = 1024 tokens),
all-linear rank 16. Measured: without checkpointing the backward peak grows by 8,323,072 B in the plan
(T x 8,128 mask elements) and 33,292,288 B (4x) in the trace; plan with CPU noise vs trace -0.005%.
With checkpointing and a 4,096-token vocabulary the peak stays in the loss region (+0 in both).
With a 512-token vocabulary the checkpointed peak is a layer's recompute + backward: the plan adds one
layer's masks (T x 2,224 B), the trace 4x that plus 1,998,848 B (1,952 B per token) of dropout-input
gradients (fp32, live during the layer's backward) that the plan does not model.
"""

import json

import pytest

from trainfit.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("peft")
pytestmark = pytest.mark.trace

CFG = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
       "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 4096, "max_position_embeddings": 4096,
       "tie_word_embeddings": False}
T = 2 * 512
H, I = 256, 688
CPU_NOISE_BYTES = 4  # torch's CPU dropout keeps the fp32 noise (the input is PEFT's fp32 cast); CUDA: 1 B bool
MASK_BYTES = 1
PER_LAYER = 6 * H + I  # q, k, v, o, gate, up take width 256 inputs (o: q_dim 256), down_proj 688
LAYER0 = 3 * H + I  # without checkpointing layer 0's q/k/v input needs no gradient: no mask there


def _run(tmp_path, capsys, cfg, dropout, ckpt):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["trace", "--model", str(path), "--scope", "lora", "--seq", "512", "--mbs", "2", "--strategy", "single",
                 "--gpus", "1", "--attention", "sdpa", "--ckpt" if ckpt else "--no-ckpt",
                 "--set", f"lora.dropout={dropout}", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _phase(out, name):
    return next(p for p in out["phases"] if p["name"] == name)


def test_no_checkpointing_masks_and_outputs(tmp_path, capsys):
    base = _run(tmp_path, capsys, CFG, 0.0, False)
    drop = _run(tmp_path, capsys, CFG, 0.05, False)
    plan_d = drop["planned_peak_allocated_bytes"] - base["planned_peak_allocated_bytes"]
    assert plan_d == T * MASK_BYTES * (LAYER0 + 3 * PER_LAYER)
    # the dropout outputs replace the fp32 casts byte for byte: the traced growth is the noise alone
    traced_act_d = (_phase(drop, "backward")["breakdown"]["activations"]
                    - _phase(base, "backward")["breakdown"]["activations"])
    assert traced_act_d == plan_d * CPU_NOISE_BYTES // MASK_BYTES
    cpu_plan = drop["planned_peak_allocated_bytes"] + plan_d * (CPU_NOISE_BYTES - MASK_BYTES) // MASK_BYTES
    assert abs(cpu_plan / drop["traced_peak_bytes"] - 1) < 0.02


def test_checkpointing_loss_region_peak_unchanged(tmp_path, capsys):
    """Masks live only inside one layer's recompute: they must not reach a peak set by the logits."""
    base = _run(tmp_path, capsys, CFG, 0.0, True)
    drop = _run(tmp_path, capsys, CFG, 0.05, True)
    assert drop["traced_peak_bytes"] == base["traced_peak_bytes"]
    assert drop["planned_peak_allocated_bytes"] == base["planned_peak_allocated_bytes"]
    assert abs(drop["peak_error"]) < 0.02


def test_checkpointing_recompute_peak_holds_one_layer(tmp_path, capsys):
    cfg = dict(CFG, vocab_size=512)
    base = _run(tmp_path, capsys, cfg, 0.0, True)
    drop = _run(tmp_path, capsys, cfg, 0.05, True)
    assert drop["traced_peak_phase"] == drop["planned_peak_phase"] == "backward"
    plan_d = drop["planned_peak_allocated_bytes"] - base["planned_peak_allocated_bytes"]
    assert plan_d == T * MASK_BYTES * PER_LAYER  # one recomputed layer, not all four
    traced_d = drop["traced_peak_bytes"] - base["traced_peak_bytes"]
    rest = traced_d - plan_d * CPU_NOISE_BYTES // MASK_BYTES
    # unmodelled: the fp32 dropout-input gradients of the layer's backward, at most two of down_proj's width
    assert 0 < rest <= 2 * 4 * T * I
