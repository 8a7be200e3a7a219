"""An engine that serves a LoRA adapter unmerged (vLLM ``enable_lora``) runs vLLM's punica path on every LoRA-wrapped
linear of a decode step: the buffer zero, ``lora_shrink`` and ``lora_expand`` (vllm-project/vllm
vllm/lora/punica_wrapper/punica_gpu.py ``add_lora_linear`` @010c9386c45da59ad29905c19c06e58affe0ab1e,
vllm/lora/ops/triton_ops/lora_shrink_op.py @00bd1493b3e82d6c13c68ee8a0e1c5a96707e190): three kernels on each of a
layer's four wrapped linears (QKV, O, gate/up, down), launched and gapped like the base layer's."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute.flops import matmul_params
from trainfit.compute.generation import generation_time
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN7 = from_catalog("Qwen/Qwen2.5-7B-Instruct")


def test_a_dense_layer_adds_three_kernels_on_each_of_four_wrapped_linears():
    assert ds.engine_lora_kernels(QWEN7) == 28 * 4 * 3
    assert ds.decode_kernels(QWEN7, tp=2, engine_lora=True) == 28 * (12 + 12)
    assert ds.decode_kernels(QWEN7, tp=2) == 28 * 12  # no adapter: the base layer alone


def test_routed_expert_layers_count_the_attention_linears_only():
    qwen = from_catalog("Qwen/Qwen3-30B-A3B")  # 48 layers, every one routed
    assert ds.engine_lora_kernels(qwen) == 48 * 2 * 3


def _gen(engine_lora: bool, cuda_graphs: bool = False):
    return generation_time(
        spec=QWEN7, matmul_params=matmul_params(QWEN7), rates=H100, tp=2, prompts=16, samples_per_prompt=5,
        prompt_len=512, prompt_len_mean=100, response_len_max=512, response_len_mean=300,
        weight_bytes=total_params(QWEN7) * 2.0, kv_bytes_per_token=57344.0, max_num_seqs=512,
        cuda_graphs=cuda_graphs, engine_generation="v0", engine_lora=engine_lora)


def test_an_eager_step_pays_the_adapters_launches():
    base, lora = _gen(False), _gen(True)
    per_kernel = ds.eager_s_per_kernel_of(H100, spec=QWEN7, engine_generation="v0")
    plain = ds._step_model(spec=QWEN7, matmul_params=matmul_params(QWEN7), rates=H100, tp=2,
                           weight_bytes=total_params(QWEN7) * 2.0, kv_bytes_per_token=0.0, cuda_graphs=False,
                           tp_all_reduce_latency_s=None, engine_generation="v0")
    adapted = ds._step_model(spec=QWEN7, matmul_params=matmul_params(QWEN7), rates=H100, tp=2,
                             weight_bytes=total_params(QWEN7) * 2.0, kv_bytes_per_token=0.0, cuda_graphs=False,
                             tp_all_reduce_latency_s=None, engine_generation="v0", engine_lora=True)
    assert adapted.launch - plain.launch == pytest.approx(28 * 4 * 3 * per_kernel)
    assert lora.decode_s > 1.5 * base.decode_s  # launch-bound: the launches nearly double
    assert any("punica" in a for a in lora.assumptions)


def test_under_cuda_graphs_only_the_gaps_grow():
    base, lora = _gen(False, cuda_graphs=True), _gen(True, cuda_graphs=True)
    assert base.decode_s < lora.decode_s < 1.2 * base.decode_s


def test_under_cuda_graphs_the_assumption_names_the_adapters_gaps():
    line = next(a for a in _gen(True, cuda_graphs=True).assumptions if a.startswith("CUDA graphs"))
    assert f"{28 * 4 * 3} punica" in line and "kernel gaps" in line
    assert next(a for a in _gen(False, cuda_graphs=True).assumptions
                if a.startswith("CUDA graphs")) == "CUDA graphs: one launch per step"
