"""``fit`` with ``parallel.fsdp_one_rank`` true: the 1-GPU candidates keep the flag, those above one training GPU
drop it (FSDP2 runs ``fully_shard`` over a real mesh there) with one summary note, never one refusal per count."""

from trainfit.cli.common import default_card_dict, set_path
from trainfit.fit_search import ONE_RANK_NOTE, _training_gpus, drop_one_rank_flag
from trainfit.search import fit


def _card() -> dict:
    data = default_card_dict()
    for k, v in {"model": "Qwen/Qwen3-0.6B", "hardware.gpu": "h100-sxm", "hardware.gpus_per_node": 1, "parallel.strategy": "fsdp",
                 "parallel.fsdp_version": "fsdp2", "parallel.fsdp_one_rank": True}.items():
        set_path(data, k, v)
    return data


def test_fit_over_one_and_two_gpus_keeps_both_counts_with_one_note() -> None:
    pinned = frozenset({"parallel.strategy", "parallel.fsdp_version", "parallel.fsdp_one_rank", "hardware.gpu"})
    result = fit(_card(), gpus=["h100-sxm"], max_gpus=2, workers=1, pinned=pinned)
    assert {r.gpus for r in result.rows} == {1, 2}
    assert not result.skipped
    assert result.warnings.count(ONE_RANK_NOTE) == 1


def test_the_flag_is_dropped_above_one_training_gpu_only() -> None:
    one, two = _card(), _card()
    set_path(two, "hardware.gpus_per_node", 2)
    assert not drop_one_rank_flag(one) and one["parallel"]["fsdp_one_rank"] is True
    assert drop_one_rank_flag(two) and two["parallel"]["fsdp_one_rank"] is False
    # a split RL card with one trainer GPU beside its rollout GPUs (prime-rl's layout) keeps it
    rl = {"method": "grpo", "hardware": {"gpus_per_node": 2, "nodes": 1}, "rollout": {"placement": "split", "gpus": 1},
          "parallel": {"fsdp_one_rank": True}}
    assert _training_gpus(rl) == 1 and not drop_one_rank_flag(rl)
