"""The fp8 rollout engine's weights (trainfit.rollout.quantization): vLLM block-quantized linears and experts,
the rest bf16, the KV cache unchanged."""

from __future__ import annotations

from trainfit.catalog.models import from_catalog
from trainfit.rollout import quantization as q
from trainfit.rollout.vllm import weights_per_gpu_bytes
from trainfit.spec.enums import RolloutQuantization

FP8, NONE = RolloutQuantization.FP8, RolloutQuantization.NONE
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
DSV3 = from_catalog("deepseek-ai/DeepSeek-V3")


def test_one_block_quantized_linear():
    # gate_proj 4096 -> 14336: e4m3 weights + (14336/128) x (4096/128) fp32 scales
    assert q.fp8_block_linear_bytes(in_features=4096, out_features=14336) == 4096 * 14336 + 4 * 112 * 32
    # a shape that is not a whole number of blocks rounds the block count up (DeepSeek's kv_a: 7168 -> 576)
    assert q.fp8_block_linear_bytes(in_features=7168, out_features=576) == 7168 * 576 + 4 * 5 * 56


def test_llama_8b_engine_bytes_by_hand():
    linear = 6_979_321_856  # 32 layers of q, k, v, o, gate, up, down
    blocks = 32 * (32 * 32 + 2 * 8 * 32 + 32 * 32 + 3 * 112 * 32)
    rest_bf16 = 2 * (2 * 525_336_576 + 266_240)  # embedding, lm_head (ParallelLMHead stays bf16), norms
    assert q.engine_weight_bytes(LLAMA8, quantization=FP8) == linear + 4 * blocks + rest_bf16 == 9_082_904_576
    assert q.engine_weight_bytes(LLAMA8, quantization=NONE) == weights_per_gpu_bytes(LLAMA8, tp=1)
    assert q.engine_rank_weight_bytes(LLAMA8, tp=1, quantization=FP8) == 9_082_904_576


def test_rank_bytes_keep_what_vllm_replicates_whole():
    bf16 = q.engine_rank_weight_bytes(DSV3, tp=16, quantization=NONE)
    assert bf16 == weights_per_gpu_bytes(DSV3, tp=16)
    fp8 = q.engine_rank_weight_bytes(DSV3, tp=16, quantization=FP8)
    kept = q.engine_rank_weight_bytes(DSV3, tp=16, quantization=FP8, bf16_modules=("a_proj", "b_proj"))
    assert fp8 < kept < bf16
    # keeping the latent projections in bf16 costs each rank the replicated q_a / kv_a whole (one byte more per
    # weight, less their scales) and a 16th of q_b / kv_b
    ml, h, layers = DSV3.mla, DSV3.hidden_size, DSV3.num_full_attention_layers
    a = layers * h * (ml.q_lora_rank + ml.latent_dim)
    assert kept - fp8 > a * 0.999
    assert kept - fp8 < a + layers * (ml.q_lora_rank * 24576 + 512 * 32768) / 16 + 1e6


def test_experts_are_read_at_one_byte_and_their_scales():
    assert q.routed_expert_bytes_per_param(DSV3, quantization=NONE) == 2.0
    assert q.routed_expert_bytes_per_param(DSV3, quantization=FP8) == 1.0 + 4 / 128**2
    assert q.routed_expert_bytes_per_param(LLAMA8, quantization=FP8) == 2.0  # dense: no experts to read


def test_refit_casts_the_whole_fp8_model_on_every_rank():
    assert q.refit_cast_params(LLAMA8, quantization=FP8) == 6_979_321_856
    assert q.refit_cast_params(LLAMA8, quantization=NONE) == 0.0


def test_the_plan_sizes_the_engine_with_fp8_weights_and_a_bf16_kv_cache():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    def plan(quant):
        return make_plan(load_card_dict({
            "model": "meta-llama/Llama-3.1-8B", "method": "grpo", "scope": "lora", "hardware": {"gpu": "h100-sxm"},
            "rollout": {"placement": "split", "gpus": 4, "gpu_memory_utilization": 0.5, "quantization": quant}}))

    bf16, fp8 = plan("none").rollout, plan("fp8").rollout
    assert bf16.engine_weights_bytes == weights_per_gpu_bytes(LLAMA8, tp=1)
    assert fp8.engine_weights_bytes == 9_082_904_576
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token  # kv_cache_dtype auto: bf16
    # the budget the weights free goes to the KV cache
    assert abs((fp8.kv_cache_bytes - bf16.kv_cache_bytes) - (bf16.engine_weights_bytes - 9_082_904_576)) < 2**21


def test_the_refit_cast_is_a_transient_on_the_engines_gpus():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.enums import Phase

    def sync_components(quant, placement):
        ro = {"placement": placement, "quantization": quant} | ({"gpus": 4} if placement == "split" else {})
        plan = make_plan(load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "grpo", "scope": "lora",
                                         "hardware": {"gpu": "h100-sxm"}, "rollout": ro}))
        group = plan.groups[-1]  # the engine's GPUs: the rollout group when split, the only one colocated
        return next(p.components for p in group.phases if p.phase is Phase.WEIGHT_SYNC)

    # gate_proj, 14336 x 4096, the largest fp8 tensor: three fp32 copies of it at once
    assert q.refit_cast_peak_bytes(LLAMA8, quantization=FP8) == 12 * 14336 * 4096
    for placement in ("split", "colocate"):
        assert sync_components("fp8", placement)["fp8_refit_cast"] == 12 * 14336 * 4096
        assert "fp8_refit_cast" not in sync_components("none", placement)
    # DeepSeek-V3 sends one expert's gate and up apart (2048 x 7168); its largest is a dense layer's gate_proj
    assert q.refit_cast_peak_bytes(DSV3, quantization=FP8) == 12 * 18432 * 7168
