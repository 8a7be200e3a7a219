"""lora.quantize_moe_experts: axolotl's loading-time NF4 quantization of transformers 5's 3-D expert stacks.

axolotl's ``patch_moe_quantization_on_load`` wraps transformers' ``set_param_for_module`` and calls bitsandbytes'
``replace_parameter_4bit`` on every 3-D CUDA parameter named *expert* (axolotl-ai-cloud/axolotl
src/axolotl/monkeypatch/moe_quant.py l.121-131 @753906cfc7a669e9b1788193174304bbd9059a8e), with the base's quant type
and double quant (l.94-100); bitsandbytes' own loader only swaps ``nn.Linear`` modules, so without it the stacks stay
bf16 (memory.weights). The published point is GLM-4.5-Air QLoRA (axolotl examples/glm45/README.md at the same
commit: '1x80GB @ ~63.4GiB/GPU'; id 2705 in benchmarks/data/published_memory_points_firstcontact_2612c.json).
"""

from __future__ import annotations

from trainfit.catalog.models import resolve_model
from trainfit.memory.weights import base_weight_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import ComputeDtype, Dtype

from trainfit.cli.main import main

GIB = 2**30
_CARD = {
    "model": "Qwen/Qwen3-30B-A3B", "scope": "qlora",
    "lora": {"rank": 16, "alpha": 32, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]},
    "precision": {"weights": "nf4", "compute": "bf16", "optimizer": "adamw_8bit"},
    "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
    "parallel": {"strategy": "single", "gradient_checkpointing": True},
    "batch": {"micro_batch_size": 1, "seq_len": 2048},
}


def _card(**lora):
    return load_card_dict({**_CARD, "lora": {**_CARD["lora"], **lora}})


def test_default_keeps_the_stacks_in_bf16():
    assert _card().lora.quantize_moe_experts is False


def test_quantized_stacks_plan_nf4_bytes_for_the_experts():
    """The step's allocated peak drops by the stacks' bf16 bytes less their NF4 bytes (the figure memory.weights
    gives for per-expert Linear4bit experts), within 1 %."""
    spec = resolve_model("Qwen/Qwen3-30B-A3B")
    bf16 = base_weight_bytes(spec, weights=Dtype.NF4, compute=ComputeDtype.BF16)
    nf4 = base_weight_bytes(spec, weights=Dtype.NF4, compute=ComputeDtype.BF16, quantized_experts=True)
    assert (bf16 - nf4) / GIB > 40  # ~29e9 expert weights: 2 B each against about half a byte
    off, on = make_plan(_card()), make_plan(_card(quantize_moe_experts=True))
    drop = off.peak.allocated - on.peak.allocated
    assert abs(drop - (bf16 - nf4)) / (bf16 - nf4) < 0.01


def test_dense_model_unchanged():
    """A dense model has no expert stacks: the flag changes nothing."""
    dense = {**_CARD, "model": "Qwen/Qwen3-8B"}
    a = make_plan(load_card_dict(dense))
    b = make_plan(load_card_dict({**dense, "lora": {**dense["lora"], "quantize_moe_experts": True}}))
    assert a.peak.allocated == b.peak.allocated and a.peak.reserved == b.peak.reserved


def test_refused_without_a_4bit_base(capsys):
    rc = main(["plan", "--model", "Qwen/Qwen3-30B-A3B", "--scope", "lora", "--gpus", "1", "--strategy", "single",
               "--set", "lora.quantize_moe_experts=true"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "lora.quantize_moe_experts: read for scope qlora" in err and "allowed with it: false" in err


def test_bad_value_one_line(capsys):
    rc = main(["plan", "--model", "Qwen/Qwen3-30B-A3B", "--scope", "qlora", "--gpus", "1", "--strategy", "single",
               "--set", "lora.quantize_moe_experts=maybe"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "lora.quantize_moe_experts" in err
