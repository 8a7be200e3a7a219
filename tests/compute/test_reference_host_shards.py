"""A verl FSDP reference kept in pinned host memory (FSDP's ``CPUOffload(offload_params=True)``): each unit's local
shard is copied to the GPU before its all-gather in every micro-batch of the reference log-prob pass, the root unit's
once a pass (``compute.training.forward_only_time`` ``host_shard_bytes_per_s``, ``plan.rl_passes``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.rates import default_rates
from trainfit.compute.training import Parallel, forward_only_time, root_unit_share
from trainfit.memory.weights import total_params
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN7 = from_catalog("Qwen/Qwen2.5-7B")
FSDP8 = Parallel(strategy="fsdp", ranks=8, gpus_per_node=8)
WEIGHTS = 2.0 * total_params(QWEN7)


def _pass(micro_steps: int, rate: float, tokens: int = 1024):
    return forward_only_time(QWEN7, rates=H100, micro_batch_size=1, seq_len=tokens, micro_steps=micro_steps,
                             parallel=FSDP8, gathered_weight_bytes=WEIGHTS, host_shard_bytes_per_s=rate)


def test_root_share_is_what_the_decoder_layers_leave():
    # Qwen2.5-7B, 7,615,616,512 parameters: a 152,064 x 3,584 embedding (544,997,376), an untied head of the same
    # size and a 3,584 final norm stay in the root under FSDP1 (1,089,998,336); FSDP2 as verl applies it gives the
    # untied embedding its own unit (545,000,960)
    assert root_unit_share(QWEN7) == pytest.approx(1_089_998_336 / 7_615_616_512, rel=1e-9)
    assert root_unit_share(QWEN7, embedding_unit=True) == pytest.approx(545_000_960 / 7_615_616_512, rel=1e-9)
    # the tied Qwen2.5-0.5B (494,032,768): one 151,936 x 896 embedding (136,134,656) and the 896 final norm
    tied = from_catalog("Qwen/Qwen2.5-0.5B")
    assert tied.tie_word_embeddings
    for unit in (False, True):
        assert root_unit_share(tied, embedding_unit=unit) == pytest.approx(136_135_552 / 494_032_768, rel=1e-9)


def test_a_copy_slower_than_a_layers_compute_is_exposed_every_micro_batch():
    # a slow host link (1 GB/s): the layer's shard copy (~83 MB) outlasts the layer's compute at 1k tokens
    rate = 1e9
    on_gpu1, on_gpu4 = _pass(1, 0.0), _pass(4, 0.0)
    host1, host4 = _pass(1, rate), _pass(4, rate)
    # bf16: the layers' 2 x 6,525,618,176 B over 8 ranks at 1 GB/s, the root's 2 x 1,089,998,336 B likewise
    per_micro = 1.631404544
    root_once = 0.272499584
    # three more micro-batches copy the layers three more times; the root is copied once either way
    extra1, extra4 = host1.seconds - on_gpu1.seconds, host4.seconds - on_gpu4.seconds
    assert extra4 - extra1 == pytest.approx(3 * per_micro, rel=0.05)
    assert extra1 > root_once
    assert extra1 <= (root_once + per_micro) * (1 + 1e-9)


def test_a_fast_copy_hides_behind_the_previous_layers_compute():
    # 25 GB/s at 16k tokens a micro-batch: each layer's copy and gather fit behind the layer before, only the first
    # layer's and the root's show
    on_gpu, host = _pass(2, 0.0, tokens=16384), _pass(2, 25e9, tokens=16384)
    # two micro-batches of the first layer's shard (13,051,236,352 B / 28 layers / 8 ranks) and the root's once, at
    # 25 GB/s
    first = 2 * 466_115_584 / 8 / 25e9
    root = 2_179_996_672 / 8 / 25e9
    assert host.seconds - on_gpu.seconds == pytest.approx(first + root, rel=0.05)


def _verl(reference: str) -> dict:
    rollout = {"placement": "colocate", "prompts_per_step": 64, "num_generations": 8, "prompt_len": 93,
               "response_len": 1024, "response_len_mean": 188, "mini_batches": 4}
    return {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "scope": "full", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True}, "batch": {"micro_batch_size": 4},
            "rollout": rollout, "roles": {"reference": reference, "kl_coef": 0.001}}


def test_only_the_host_resident_verl_reference_pays_the_copies():
    def phases(reference):
        return {p.name: p.seconds for p in make_plan(load_card_dict(_verl(reference))).time.phases}

    cpu, gpu = phases("cpu"), phases("gpu")
    assert cpu["ref_logprob"] > gpu["ref_logprob"]
    # the old policy's pass (the actor: no CPU offload in verl) is the same either way
    assert cpu["old_logprob"] == pytest.approx(gpu["old_logprob"])


def test_one_gpu_copies_the_whole_reference_in_every_pass():
    # one rank: FSDP's CPU offload still copies each unit's weights in before it runs; at 1 GB/s the copies dwarf the
    # compute: all 15,231,233,024 bf16 bytes of Qwen2.5-7B, less at most the compute they hide behind
    one = Parallel(strategy="fsdp", ranks=1, gpus_per_node=1)
    on_gpu, host = (forward_only_time(QWEN7, rates=H100, micro_batch_size=1, seq_len=1024, micro_steps=1, parallel=one,
                                      gathered_weight_bytes=WEIGHTS, host_shard_bytes_per_s=rate) for rate in (0.0, 1e9))
    extra = host.seconds - on_gpu.seconds
    assert 15.231233024 - on_gpu.seconds <= extra <= 15.231233024 * (1 + 1e-9)


def _verl_default(**over) -> dict:
    d = _verl("gpu")
    del d["roles"]["reference"]
    for k, v in over.items():
        d[k] = {**d[k], **v} if isinstance(v, dict) else v
    return d


def test_verl_fsdp_reference_defaults_to_host_memory():
    """verl wraps every role but the actor in FSDP's CPU offload (fsdp_workers.py l.260-262 @e0d035cd, FSDP2 l.547-552
    @b178a3cd): a full-weight verl FSDP card's reference is on the host by default, in memory and in time; LoRA's
    reference is the actor with its adapters off, verl's Megatron workers keep theirs on the GPU."""
    from trainfit.methods.roles import reference_placement
    from trainfit.spec.enums import RefPlacement

    card = load_card_dict(_verl_default())
    assert reference_placement(card) is RefPlacement.CPU
    plan, gpu = make_plan(card), make_plan(load_card_dict(_verl("gpu")))
    assert plan.host_ram.get("reference_weights", 0.0) > 0.0
    ref = {p.name: p.seconds for p in plan.time.phases}["ref_logprob"]
    assert ref > {p.name: p.seconds for p in gpu.time.phases}["ref_logprob"]
    assert max(ph.components.get("reference_weights", 0.0) for ph in plan.phases) == 0.0
    lora = load_card_dict(_verl_default(scope="lora"))
    assert reference_placement(lora) is RefPlacement.LORA_DISABLED
    mega = load_card_dict(_verl_default(parallel={"strategy": "zero1", "tensor_parallel_impl": "megatron"}))
    assert reference_placement(mega) is RefPlacement.GPU
