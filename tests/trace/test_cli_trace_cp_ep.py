"""`trainfit trace` on context- and expert-parallel cards: rank 0 through the CP/EP tracers (emulations on the
fake process group), the JSON of any other trace, the plan within 2%, and one line + exit 2 per layout refused."""

from __future__ import annotations

import json

import pytest

from trainfit.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.trace

LLAMA = ("model={config: {model_type: llama, hidden_size: 128, intermediate_size: 344, num_hidden_layers: 2,"
         " num_attention_heads: 4, num_key_value_heads: 2, head_dim: 32, vocab_size: 4096,"
         " tie_word_embeddings: false}}")
MOE = ("model={config: {model_type: qwen3_moe, hidden_size: 128, intermediate_size: 384, num_hidden_layers: 2,"
       " num_attention_heads: 4, num_key_value_heads: 2, head_dim: 32, vocab_size: 4096, tie_word_embeddings: false,"
       " num_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 64, decoder_sparse_step: 1,"
       " mlp_only_layers: [], norm_topk_prob: true}}")
GPT2 = "model={config: {model_type: gpt2, n_embd: 128, n_layer: 2, n_head: 4, vocab_size: 4096, n_positions: 1024}}"


def _cp(kind: str = "ring", *extra: str) -> list[str]:
    return ["trace", "--set", LLAMA, "--gpus", "2", "--strategy", "single", "--seq", "1024",
            "--set", "parallel.context_parallel=2", "--set", f"parallel.context_parallel_kind={kind}", *extra]


def _ep(*extra: str) -> list[str]:
    return ["trace", "--set", MOE, "--gpus", "2", "--strategy", "single", "--seq", "512",
            "--set", "parallel.expert_parallel=2", *extra]


def _plan_peak(args: list[str], capsys) -> int:
    """`trainfit plan` of the same card: its largest allocated bytes over the traced phases, less the cuBLAS
    workspaces (the trace holds live tensors only)."""
    assert main(["plan", *args[1:], "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    return max(p["gpu_bytes"]["allocated"] - p["overhead"]["cublas_workspace"] for p in obj["phases"]
               if p["name"] in ("forward", "backward", "optimizer_step"))


@pytest.mark.parametrize(("args", "method"), [
    (_cp("ring", "--ckpt"), "an emulation of torch's ring attention"),
    (_cp("ulysses", "--no-ckpt"), "an emulation of verl's Ulysses all-to-all"),
    (_ep("--ckpt"), "an emulation of a balanced, dropless expert-parallel all-to-all token dispatch"),
])
def test_cp_ep_trace_json_matches_plan(args: list[str], method: str, capsys) -> None:
    assert main([*args, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in obj["phases"]] == ["forward", "backward", "optimizer_step"]
    assert set(obj) >= {"model", "traced_peak_bytes", "traced_peak_phase", "planned_peak_allocated_bytes",
                        "peak_error", "params_total", "layers_traced", "extrapolated", "phases", "notes"}
    assert obj["layers_traced"] == [2] and obj["extrapolated"] is False
    assert obj["notes"][0].startswith("method: " + method)
    assert "per-rank bytes of rank 0 of 2" in obj["notes"][1]
    assert abs(obj["peak_error"]) < 0.02
    assert abs(_plan_peak(args, capsys) - obj["traced_peak_bytes"]) / obj["traced_peak_bytes"] < 0.02


@pytest.mark.parametrize(("args", "field"), [
    (_cp("ring", "--set", "parallel.tensor_parallel=2", "--gpus", "4"), "parallel.context_parallel: traced alone"),
    (_cp("ring", "--set", "parallel.pipeline_parallel=2", "--gpus", "4"), "parallel.context_parallel: traced alone"),
    (_cp("ring", "--scope", "lora"), "scope: context and expert parallel are traced for scope 'full' only"),
    (_cp("ring", "--attention", "eager"), "attention: context parallel is traced with 'sdpa'"),
    (_cp("ring", "--seq", "1026"), "batch.seq_len: must be a multiple of 4"),
    (_cp("ring", "--gpus", "4"), "parallel.strategy: 'single' with context parallel"),
    (_cp("ring", "--strategy", "fsdp"), "parallel.strategy: 'fsdp' with context parallel"),
    (_cp("ring", "--strategy", "zero3"), "parallel.strategy: context parallel is traced with single"),
    (_cp("ring", "--strategy", "fsdp", "--gpus", "4", "--set", "parallel.fsdp_shard_embeddings=true"),
     "parallel.fsdp_shard_embeddings: context parallel is traced with"),
    (_cp("ring", "--no-ckpt", "--set", "parallel.selective_checkpointing=core_attention"),
     "parallel.selective_checkpointing: context and expert parallel are traced with 'none'"),
    (_cp("ring", "--set", "loop.keeps_output_through_backward=true"),
     "loop.keeps_output_through_backward: context and expert parallel"),
    (_cp("ring", "--time"), "--time: context parallel is traced at full depth"),
    (_cp("ring", "--layers", "1"), "--layers: context parallel is traced at full depth"),
    (["trace", "--set", GPT2, *_cp()[3:]], "model: context parallel is traced for llama, mistral, qwen2, qwen3,"),
    (_ep("--gpus", "4"), "parallel.expert_parallel: traced with world_size = expert_parallel"),
    (_ep("--strategy", "fsdp"), "parallel.strategy: expert parallel is traced with the dense weights replicated"),
    (_ep("--scope", "lora"), "scope: context and expert parallel are traced for scope 'full' only"),
    (["trace", "--set", LLAMA, *_ep()[3:]], "model: expert parallel is traced for mixtral, qwen3_moe, not 'llama'"),
    (_ep("--set", "parallel.context_parallel=2", "--gpus", "4"), "parallel: context and expert parallel are traced one"),
])
def test_unsupported_layout_is_one_line_exit_2(args: list[str], field: str, capsys) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"trainfit: error: {field}"), err


def test_python_api_traces_an_expert_parallel_card_like_the_cli():
    """``trainfit.trace`` (the Python API) routes a CP/EP card to the same tracers as the CLI."""
    import trainfit

    card = {"model": {"config": {"model_type": "qwen3_moe", "hidden_size": 128, "intermediate_size": 384,
                                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                 "head_dim": 32, "vocab_size": 4096, "tie_word_embeddings": False, "num_experts": 8,
                                 "num_experts_per_tok": 2, "moe_intermediate_size": 64, "decoder_sparse_step": 1,
                                 "mlp_only_layers": [], "norm_topk_prob": True}},
            "hardware": {"gpus_per_node": 2}, "parallel": {"strategy": "single", "expert_parallel": 2},
            "batch": {"seq_len": 512}}
    result = trainfit.trace(card)
    assert any("expert-parallel" in n for n in result.notes[:1])
    with pytest.raises(trainfit.errors.TrainfitError, match="expert parallel is traced at full depth"):
        trainfit.trace(card, layers=1)
