"""``continuous_batching._Decode.charge``: a chunk with no running sequence takes no decode step. The phase's end may
still wait on a straggler's longest length after the fluid has run dry (a preempted sequence readmitted in a sliver);
those chunks were charged one whole-weight-read step each, so one more prompt could add half the generation."""

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import generation as gen
from trainfit.compute.continuous_batching import _Decode
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_no_running_sequence_costs_nothing():
    spec = from_catalog("Qwen/Qwen3-0.6B")
    step = gen._step_model(spec=spec, matmul_params=matmul_params(spec), rates=default_rates(resolve_gpu("h100-sxm")),
                           tp=1, weight_bytes=total_params(spec) * 2.0,
                           kv_bytes_per_token=4.0 * spec.num_layers * spec.kv_dim, cuda_graphs=True,
                           engine_s_per_step=gen.ENGINE_S_PER_STEP, tp_all_reduce_latency_s=None)
    out = _Decode()
    sec, comm, _ = out.charge(step, 32.0, 0.0, 0.0)
    assert sec == 0.0 and comm == 0.0 and out.seconds == 0.0
    assert out.charge(step, 32.0, 0.5, 100.0)[0] == 0.5 * 32.0 * step.seconds(1.0, 200.0)  # a straggler's chance


def _generation_s(prompts: int) -> float:
    card = {"model": "Qwen/Qwen3-8B", "method": "grpo", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "parallel": {"strategy": "fsdp"},
            "batch": {"micro_batch_size": 2},
            "rollout": {"prompt_len": 512, "response_len": 1024, "num_generations": 8, "prompts_per_step": prompts,
                        "placement": "split", "gpus": 4}}
    return make_plan(load_card_dict(card)).time.parts["generation"]


def test_one_more_prompt_under_preemption_adds_its_share_not_half_the_phase():
    # 52..58 sequences per engine against 50k KV tokens: a few preempted; before, 27 and 29 prompts took 20.8 s and
    # 20.1 s beside 13.8-14.8 s (a step-by-step simulation of the sequences: 13.1, 13.6, 14.2, 14.7 s)
    times = [_generation_s(n) for n in (26, 27, 28, 29)]
    assert all(b >= a for a, b in zip(times, times[1:])), times
    assert times[-1] < 1.15 * times[0], times
