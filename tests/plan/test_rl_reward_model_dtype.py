"""roles.reward_model_dtype and precision.autocast: a reward model loaded in float32 (``from_pretrained`` without
``torch_dtype`` under transformers 4.x) holds 4 B a weight, and when nothing autocasts its forward (accelerate wraps a
prepared model's forward in autocast only under native mixed precision: huggingface/accelerate
src/accelerate/accelerator.py l.1402-1413 @v1.3.0 bdd70d5d93c3a66e859d966b6482871971ae7510) its GEMMs run in fp32 at
the card's non-tensor-core fp32 rate (torch leaves TF32 off for matmuls by default since 1.12). Only the reward-model
phase moves; under autocast its GEMMs stay 16-bit and only memory moves."""

from __future__ import annotations

import subprocess
import sys
from functools import lru_cache

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(dtype: str | None = None, autocast: bool = True, reward_model: str = "google/gemma-2b",
          tf32: bool = False, gpu: str = "a100-40gb") -> dict:
    roles = {"reward_model": reward_model, **({"reward_model_dtype": dtype} if dtype else {})}
    return {"model": "Qwen/Qwen2-0.5B", "method": "grpo", "scope": "lora", "preset": "trl",
            "hardware": {"gpu": gpu, "gpus_per_node": 1, "nodes": 1},
            "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 8},
            "precision": {"autocast": autocast, **({"tf32": True} if tf32 else {})}, "roles": roles,
            "rollout": {"placement": "colocate", "prompts_per_step": 16, "num_generations": 2, "prompt_len": 512,
                        "response_len": 16}}


@lru_cache(maxsize=8)
def _plan(dtype: str | None, autocast: bool, tf32: bool = False):
    return make_plan(load_card_dict(_card(dtype, autocast, tf32=tf32)))


def _phases(dtype: str | None, autocast: bool, tf32: bool = False) -> dict[str, object]:
    return {ph.name: ph for ph in _plan(dtype, autocast, tf32).time.phases}


def _reward_weights(dtype: str | None, autocast: bool) -> float:
    (group,) = _plan(dtype, autocast).groups
    return max(p.components.get("reward_model_weights", 0.0) for p in group.phases)


def test_fp32_reward_model_without_autocast_runs_its_gemms_at_the_fp32_rate():
    base, fp32 = _phases(None, True), _phases("fp32", False)
    # the A100's fp32 CUDA-core rate is 1/16 of its bf16 tensor rate (19.5 vs 312 TFLOP/s, the catalog's datasheet)
    gpu = resolve_gpu("a100-40gb")
    assert gpu.bf16_dense_flops_per_s / gpu.fp32_flops_per_s == 16
    assert fp32["reward_model"].terms["gemm"] > 8 * base["reward_model"].terms["gemm"]
    assert fp32["reward_model"].seconds > 3 * base["reward_model"].seconds
    for name in set(base) - {"reward_model"}:
        assert fp32[name].seconds == pytest.approx(base[name].seconds), name


def test_under_autocast_an_fp32_reward_model_keeps_16_bit_gemms_and_only_its_memory_doubles():
    base, cast = _phases(None, True), _phases("fp32", True)
    for name in base:
        assert cast[name].seconds == pytest.approx(base[name].seconds), name
    assert _reward_weights("fp32", True) == pytest.approx(2 * _reward_weights(None, True), rel=1e-12)
    assert _reward_weights("bf16", True) == pytest.approx(_reward_weights(None, True), rel=1e-12)


def test_a_16_bit_reward_model_without_autocast_does_not_move():
    base, bf16 = _phases(None, True), _phases("bf16", False)
    for name in base:
        assert bf16[name].seconds == pytest.approx(base[name].seconds), name


def test_reward_model_dtype_without_a_reward_model_is_refused():
    with pytest.raises(CardError, match=r"roles\.reward_model_dtype: 'fp32' .* allowed with it: null"):
        load_card_dict(_card("fp32", reward_model="rule"))


def test_an_unknown_reward_model_dtype_names_the_allowed_values():
    with pytest.raises(CardError, match=r"roles\.reward_model_dtype.*bf16.*fp16.*fp32"):
        load_card_dict(_card("fp64"))


def test_autocast_off_with_fp32_weights_under_bf16_compute_is_refused():
    card = _card()
    card["scope"] = "full"
    card["precision"] = {"autocast": False, "weights": "fp32", "compute": "bf16"}
    with pytest.raises(CardError, match=r"precision\.autocast: false .* allowed with weights fp32"):
        load_card_dict(card)


def test_the_cli_refuses_it_in_one_line_with_exit_2(tmp_path):
    import yaml

    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(_card("fp32", reward_model="rule")))
    p = subprocess.run([sys.executable, "-m", "trainfit.cli.main", "plan", str(path)], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1 and "roles.reward_model_dtype" in p.stderr


def test_tf32_allowed_puts_the_fp32_gemms_on_the_tensor_cores():
    """precision.tf32 (torch.backends.cuda.matmul.allow_tf32): the A100's dense TF32 rate is 156 TFLOP/s, 8x its
    CUDA-core fp32 rate and half its bf16 rate (the A100 datasheet): the fp32 reward model's GEMMs land between."""
    gpu = resolve_gpu("a100-40gb")
    assert (gpu.tf32_dense_flops_per_s, gpu.fp32_flops_per_s) == (156e12, 19.5e12)
    bf16, simt, tf32 = (_phases(None, True)["reward_model"].terms["gemm"], _phases("fp32", False)["reward_model"].terms["gemm"],
                        _phases("fp32", False, True)["reward_model"].terms["gemm"])
    assert bf16 < tf32 < simt
    assert tf32 == pytest.approx(2 * bf16, rel=0.05)  # the same tensor-core tiles at half the peak
    assert _phases(None, True, True)["reward_model"].seconds == pytest.approx(_phases(None, True)["reward_model"].seconds)


def test_tf32_on_a_gpu_without_a_tf32_figure_is_refused():
    with pytest.raises(CardError, match=r"precision\.tf32: true needs the GPU's TF32 tensor-core rate; l4 has none.*"
                                        r"allowed: false, or GPUs .*a100-40gb"):
        load_card_dict(_card("fp32", False, tf32=True, gpu="l4"))
