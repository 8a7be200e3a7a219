"""parallel.pipeline_outputs_deallocated and parallel.moe_launch are Megatron-Core settings: refused, one line and
exit 2, on a card they do not describe (a non-Megatron card, no pipeline, a dense model)."""

import pytest

from trainfit.cli.main import main


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (["parallel.pipeline_outputs_deallocated=true"],
         "parallel.pipeline_outputs_deallocated: true is Megatron-Core's deallocate_pipeline_outputs, read with"
         " tensor_parallel_impl: megatron and pipeline_parallel > 1 (got dtensor, pipeline_parallel 1)"),
        (["parallel.tensor_parallel_impl=megatron", "parallel.pipeline_outputs_deallocated=true"],
         "(got megatron, pipeline_parallel 1); allowed otherwise: false"),
        (["parallel.pipeline_parallel=2", "parallel.pipeline_outputs_deallocated=true"],
         "(got dtensor, pipeline_parallel 2)"),
        (["parallel.moe_launch=eager"],
         "parallel.moe_launch: 'eager' describes Megatron-Core's router and dispatcher, read with"
         " tensor_parallel_impl: megatron (got dtensor); allowed otherwise: null"),
        (["parallel.tensor_parallel_impl=megatron", "parallel.moe_launch=fused"],
         "parallel.moe_launch: 'fused' describes an MoE router and dispatcher; Qwen/Qwen3-8B is dense;"
         " allowed for it: null"),
        (["parallel.moe_expert_mlp=te_ops"],
         "parallel.moe_expert_mlp: 'te_ops' describes Megatron-Core's TEGroupedMLP, read with"
         " tensor_parallel_impl: megatron (got dtensor); allowed otherwise: null"),
        (["parallel.tensor_parallel_impl=megatron", "parallel.moe_expert_mlp=unfused"],
         "parallel.moe_expert_mlp: 'unfused' describes Megatron-Core's routed experts; Qwen/Qwen3-8B is dense;"
         " allowed for it: null"),
        (["parallel.moe_load_balancing=aux_loss"],
         "parallel.moe_load_balancing: 'aux_loss' describes Megatron-Core's router, read with"
         " tensor_parallel_impl: megatron (got dtensor); allowed otherwise: null"),
        (["parallel.tensor_parallel_impl=megatron", "parallel.moe_load_balancing=seq_aux_loss"],
         "parallel.moe_load_balancing: 'seq_aux_loss' describes an MoE router; Qwen/Qwen3-8B is dense;"
         " allowed for it: null"),
    ],
)
def test_megatron_only_fields_refused_one_line_exit_2(sets, expected, capsys):
    argv = ["plan", "--model", "Qwen/Qwen3-8B"]
    for s in sets:
        argv += ["--set", s]
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert expected in err


def test_megatron_moe_card_resolves_eager_unless_it_says_fused():
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.enums import MoeLaunch

    base = {"model": "Qwen/Qwen3-30B-A3B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"tensor_parallel_impl": "megatron", "pipeline_parallel": 2,
                         "pipeline_outputs_deallocated": True}}
    assert load_card_dict(base).parallel.resolved_moe_launch is MoeLaunch.EAGER
    fused = {**base, "parallel": {**base["parallel"], "moe_launch": "fused"}}
    assert load_card_dict(fused).parallel.resolved_moe_launch is MoeLaunch.FUSED
    assert load_card_dict({"model": "Qwen/Qwen3-30B-A3B"}).parallel.resolved_moe_launch is None
