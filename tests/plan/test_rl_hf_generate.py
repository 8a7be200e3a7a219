"""``rollout.engine: hf``: transformers' generate on the trained model is a static eager batch, not a vLLM engine
(compute.static_generation): no CUDA graphs, the batch decodes to the step's longest response with no refill, and
nothing is loaded into an engine at the sync (plan.rl_sync.hf_shared_weights). Reproducer: the seed's PPO tiers
(trainfit.scenarios.ppo_tier), whose two first tiers generate with HF generate."""

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.compute.static_generation import static_batch_generation_time
from trainfit.plan import make_plan
from trainfit.scenarios import ppo_tier
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import merge_under


def _phases(card_dict):
    p = make_plan(load_card_dict(card_dict))
    return {ph.name: ph for ph in p.time.phases}


def test_hf_generate_is_slower_than_vllm_on_the_same_card():
    hf = _phases(ppo_tier("fsdp_ckpt"))
    vllm = _phases(merge_under(ppo_tier("fsdp_ckpt"), {"rollout": {"engine": "vllm", "gpu_memory_utilization": 0.5, "sleep_level": 1}}))
    # eager launches of a batch of 8 sequences: launch-bound, not the graphed weight stream
    assert hf["generation"].bound == "launch"
    assert hf["generation"].seconds > 1.4 * vllm["generation"].seconds


def test_hf_weight_sync_is_the_gather_alone():
    ddp = _phases(ppo_tier("unoptimised"))["weight_sync"]
    assert ddp.seconds == 0.0  # DDP: every rank holds the model, generate runs on it
    # ZeRO-3 with ds3_gather_for_generation gathers the whole model once per call (trl 1.16.0 trl/models/utils.py
    # l.141-150); FSDP gathers per forward instead, in the generation phase (test_hf_generate_fsdp_gathers.py)
    zero3 = _phases(merge_under(ppo_tier("fsdp_ckpt"), {"parallel": {"strategy": "zero3"}}))["weight_sync"]
    assert zero3.terms["transfer"] == 0.0 and zero3.terms["per_tensor"] == 0.0
    assert zero3.seconds == pytest.approx(zero3.terms["gather"]) and zero3.seconds > 0.0


def test_static_batch_decodes_to_the_longest_for_every_row():
    spec = resolve_model("Qwen/Qwen3-8B")
    r = default_rates(resolve_gpu("a100-40gb"))
    kw = dict(spec=spec, matmul_params=matmul_params(spec), rates=r, calls=1, prompt_len_padded=512,
              weight_bytes=16e9, kv_bytes_per_token=147456.0)
    short = static_batch_generation_time(batch_sequences=8, response_len_longest=512, **kw)
    long_ = static_batch_generation_time(batch_sequences=8, response_len_longest=1024, **kw)
    # no refill and no early exit: the decode runs the longest's steps for the whole batch
    assert long_.decode_steps == 1024 and short.decode_steps == 512
    assert long_.decode_s > 1.9 * short.decode_s
    two = static_batch_generation_time(batch_sequences=8, response_len_longest=1024, **{**kw, "calls": 2})
    assert two.total_s == pytest.approx(2 * long_.total_s)


def test_hf_generate_memory_is_the_prefill_at_the_compute_dtype():
    """The rollout's 'generation' bytes are memory.hf_prefill's peak for the card's call: 4 sequences prefilling 128
    tokens each of the acceptance policy's shape in fp32, 4 * 128 * (KV 512 B + activations 2688 B) = 1.5625 MiB
    (the former term: a bf16 KV cache of 4 x 255 tokens and the logits, 0.26 MiB); in bf16 exactly half."""
    from trainfit.spec.enums import Phase

    cfg = {"model_type": "qwen3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 2048,
           "tie_word_embeddings": False}
    card = {"model": {"id": "tiny", "config": cfg}, "method": "grpo", "scope": "full",
            "precision": {"weights": "fp32", "compute": "fp32"}, "hardware": {"gpu": "h200", "gpus_per_node": 1},
            "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 4, "seq_len": 255},
            "roles": {"kl_coef": 0.0},
            "rollout": {"engine": "hf", "num_generations": 4, "prompts_per_step": 1, "prompt_len": 128,
                        "response_len": 127, "response_len_shape": "fixed"}}

    def generation(c):
        plan = make_plan(load_card_dict(c))
        return next(p for p in plan.phases if p.phase is Phase.ROLLOUT).components["generation"]

    assert generation(card) == 4 * 128 * (512 + 2688)
    bf16 = merge_under(card, {"precision": {"weights": "bf16", "compute": "bf16"}})
    assert generation(bf16) == 4 * 128 * (512 + 2688) / 2
