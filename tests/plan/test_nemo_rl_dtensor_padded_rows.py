"""NeMo RL's DTensor policy pads every packed update row to ``train_mb_tokens`` (``pack_sequences(...,
min_seq_len=train_mb_tokens)``, dtensor_policy_worker.py l.600-614 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf;
``plan.rl_batches.nemo_rl_dtensor_padded_rows``); the Megatron policy pads rows only under pipeline parallel, to the
longest row."""

from __future__ import annotations

from trainfit.plan.rl_batches import nemo_rl_dtensor_padded_rows, pipeline_packing
from trainfit.spec.card import load_card_dict


def _card(parallel: dict, row_tokens: int = 4096) -> object:
    ro = {"placement": "colocate", "tensor_parallel": 1, "gpu_memory_utilization": 0.5, "prompts_per_step": 64,
          "num_generations": 32, "prompt_len": 132, "response_len": 3964, "response_len_mean": 777,
          "sleep_level": 1, "packed_row_tokens": row_tokens}
    return load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "grpo", "preset": "nemo-rl",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
                           "batch": {"micro_batch_size": 1}, "parallel": parallel, "rollout": ro})


def test_dtensor_rows_are_padded_to_the_capacity():
    card = _card({"strategy": "fsdp", "fsdp_version": "fsdp2"})
    assert nemo_rl_dtensor_padded_rows(card)
    rows, row_len = pipeline_packing(card, row_tokens=4096, sequences=512, prompt_tokens=132.0,
                                      response_mean_tokens=777.0, train_gpus=8, padded_rows=True)
    assert row_len == 4096
    # 512 sequences of 909 tokens on average: at least 465k / 4096 = 114 bins over 8 ranks
    assert rows >= 15 and rows * 8 * 4096 >= 512 * 909
    # without the padding (and without pipeline parallel) the update keeps its sequences
    assert pipeline_packing(card, row_tokens=4096, sequences=512, prompt_tokens=132.0,
                             response_mean_tokens=777.0, train_gpus=8) is None


def test_megatron_rows_are_not_padded_without_pipeline_parallel():
    card = _card({"strategy": "zero1"})
    assert not nemo_rl_dtensor_padded_rows(card)
