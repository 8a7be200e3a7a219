"""An imported OpenRLHF script without --vllm.gpu_memory_utilization runs with OpenRLHF's argparse default, 0.95
(OpenRLHF/OpenRLHF openrlhf/cli/train_ppo_ray.py l.250-254 @3c3be6234e0cb353e76bb8019947db9dfe99fca7), split or
--train.colocate_all (l.56-76 hand args.vllm.gpu_memory_utilization to create_vllm_engines unchanged either way).
The importer set the field only when the flag was present and sets no preset, so the card was planned with TRL's
vllm-serve budget (0.9)."""

from __future__ import annotations

from trainfit.export.importers import read_openrlhf
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

SPLIT = ("ray job submit -- python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path Qwen/Qwen3-1.7B"
         " --actor.num_nodes 1 --actor.num_gpus_per_node 4 --vllm.num_engines 4 --vllm.tensor_parallel_size 1"
         " --algo.advantage.estimator group_norm --rollout.n_samples_per_prompt 8 --data.prompt_max_len 512"
         " --rollout.max_new_tokens 1024\n")


def test_split_script_without_the_flag_takes_openrlhfs_default():
    imported = read_openrlhf(SPLIT)
    assert imported.card["rollout"]["gpu_memory_utilization"] == 0.95
    assert any("--vllm.gpu_memory_utilization not given" in n and "0.95" in n for n in imported.notes)
    plan = make_plan(load_card_dict(imported.card))
    assert not any("TRL" in a and "gpu_memory_utilization" in a for a in plan.assumptions)


def test_colocate_all_script_without_the_flag_takes_the_same_default():
    imported = read_openrlhf(SPLIT.replace("--vllm.tensor_parallel_size 1", "--vllm.tensor_parallel_size 1"
                                           " --train.colocate_all"))
    assert imported.card["rollout"]["placement"] == "colocate"
    assert imported.card["rollout"]["gpu_memory_utilization"] == 0.95


def test_a_stated_flag_is_kept_and_no_default_note():
    imported = read_openrlhf(SPLIT.replace("--vllm.num_engines 4", "--vllm.num_engines 4"
                                           " --vllm.gpu_memory_utilization 0.6"))
    assert imported.card["rollout"]["gpu_memory_utilization"] == 0.6
    assert not any("--vllm.gpu_memory_utilization not given" in n for n in imported.notes)
