"""parallel.model_parallel_kernels: a tensor / pipeline-parallel card without torch.compile is timed on Transformer
Engine's fused kernels unless it states ``eager`` (torchtitan's DTensor plan over the model's own nn.RMSNorm, SwiGLU
and RoPE ops, pytorch/torchtitan torchtitan/experiments/qwen3/model/model.py l.140-145, 253, 299-300 and
infra/parallelize.py l.183-195 @d66b72a6ac57be4e7ff749dabe2908a4fcc58a1d); ``eager`` is refused, one line and exit 2,
with Megatron-Core's layers."""

from __future__ import annotations

import pytest

from trainfit.cli.main import main
from trainfit.plan import make_plan
from trainfit.plan.time import fused_kernels, stack_of
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import ModelParallelKernels, Stack

TP_CARD = {  # the shape of torchtitan #1690's FSDP 4 x TP 8 rows: Qwen3 32B, local batch 16 x 4096, full AC
    "model": "Qwen/Qwen3-32B",
    "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 4},
    "parallel": {"strategy": "fsdp", "tensor_parallel": 8, "sequence_parallel": True, "gradient_checkpointing": True},
    "batch": {"micro_batch_size": 16, "seq_len": 4096},
}


def _card(**parallel):
    return load_card_dict({**TP_CARD, "parallel": {**TP_CARD["parallel"], **parallel}})


def test_default_tp_card_keeps_the_fused_kernels():
    card = _card()
    assert card.parallel.model_parallel_kernels is ModelParallelKernels.FUSED
    assert fused_kernels(card) and stack_of(card) is Stack.MEGATRON


def test_eager_tp_card_is_timed_per_op_and_slower():
    fused, eager = _card(), _card(model_parallel_kernels="eager")
    assert not fused_kernels(eager) and stack_of(eager) is Stack.EAGER
    slow, fast = make_plan(eager).step_seconds, make_plan(fused).step_seconds
    # the eager elementwise chain (RMSNorm, SwiGLU, RoPE) and its launches are added to every layer's passes
    assert slow > 1.1 * fast


def test_eager_has_no_effect_with_compile_or_without_model_parallel():
    assert fused_kernels(_card(model_parallel_kernels="eager", compile=True))
    one = load_card_dict({**TP_CARD, "parallel": {"strategy": "fsdp", "model_parallel_kernels": "eager"}})
    base = load_card_dict({**TP_CARD, "parallel": {"strategy": "fsdp"}})
    assert make_plan(one).step_seconds == make_plan(base).step_seconds


@pytest.mark.parametrize("impl", ["megatron", "nanotron"])
def test_eager_refused_off_the_dtensor_plan_one_line_exit_2(impl, capsys):
    rc = main(["plan", "--model", "Qwen/Qwen3-8B", "--set", f"parallel.tensor_parallel_impl={impl}",
               "--set", "parallel.model_parallel_kernels=eager"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert (f"parallel.model_parallel_kernels: 'eager' is the model's own modules under torch's DTensor plan, read"
            f" with tensor_parallel_impl: dtensor (got {impl}); allowed otherwise: fused") in err


def test_unknown_value_refused_naming_the_field_and_values(capsys):
    rc = main(["plan", "--model", "Qwen/Qwen3-8B", "--set", "parallel.model_parallel_kernels=triton"])
    _, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1, err
    assert "model_parallel_kernels" in err and "fused" in err and "eager" in err
