"""Framework presets: the documented defaults of TRL, verl, OpenRLHF, NeMo RL and miles / slime, as card values.

A preset fills what the card leaves open; anything the card sets wins. Each preset names its
source and maps trainfit's card keys to the framework's own knob names, so suggestions can be
written in the user's vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainfit.errors import CardError
from trainfit.spec.dotted import merge_under
from trainfit.spec.enums import FSDP_STRATEGIES, Placement, RolloutEngine, Scope, Strategy


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    source: str
    card: dict[str, Any]
    knobs: dict[str, str] = field(default_factory=dict)
    """trainfit card key -> the framework's knob name, only where the framework takes the card's value as
    written (a suggestion prints ``knob=value``); keys whose value the framework spells another way (offload,
    reference placement, sleep level, scope) keep the card key. tests/export/test_presets_knobs.py checks each
    knob against the exporter's output."""


# The ZeRO-3 section LLaMA-Factory's and ms-swift's templates share (they differ in overlap_comm only):
# 'auto' where the HF Trainer fills the value from the model, 1e9 live parameters / reuse distance / sub-group
_ZERO3_AUTO_TEMPLATE = {
    "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
    "stage3_max_live_parameters": 1_000_000_000, "stage3_max_reuse_distance": 1_000_000_000,
    "sub_group_size": 1_000_000_000, "contiguous_gradients": True,
}
_DS_KNOBS = {
    "deepspeed.reduce_bucket_size": "zero_optimization.reduce_bucket_size",
    "deepspeed.allgather_bucket_size": "zero_optimization.allgather_bucket_size",
    "deepspeed.stage3_prefetch_bucket_size": "zero_optimization.stage3_prefetch_bucket_size",
    "deepspeed.stage3_max_live_parameters": "zero_optimization.stage3_max_live_parameters",
    "deepspeed.stage3_max_reuse_distance": "zero_optimization.stage3_max_reuse_distance",
    "deepspeed.stage3_param_persistence_threshold": "zero_optimization.stage3_param_persistence_threshold",
    "deepspeed.sub_group_size": "zero_optimization.sub_group_size",
    "deepspeed.contiguous_gradients": "zero_optimization.contiguous_gradients",
    "deepspeed.overlap_comm": "zero_optimization.overlap_comm",
    "parallel.offload": "zero_optimization.offload_optimizer.device / offload_param.device",
    "batch.micro_batch_size": "per_device_train_batch_size",
    "batch.grad_accum": "gradient_accumulation_steps",
}
"""trainfit card key -> the DeepSpeed JSON key (LLaMA-Factory and ms-swift pass the JSON to the HF Trainer)."""

PRESETS: dict[str, Preset] = {
    "trl": Preset(
        name="trl",
        source="TRL 1.16 GRPOConfig (trl/trainer/grpo_config.py): vllm_mode colocate uses "
        "vllm_gpu_memory_utilization=0.3 (trl vllm-serve for a split engine: 0.9; default_gpu_memory_utilization), beta=0.0 (no reference model), gradient_checkpointing=True; "
        "transformers Trainer default optim adamw_torch_fused; GRPO/DPO compute log-probs with a fused, tiled "
        "lm_head (add_fused_lm_head, trl/trainer/utils.py; kernels/chunked_logprob.py): no full logits",
        card={
            "loss": {"chunked": True, "kernel": "trl"},
            # no gpu_memory_utilization: TRL's default depends on the placement (default_gpu_memory_utilization)
            "rollout": {"engine": "vllm", "placement": "colocate", "sleep_level": 0},
            "roles": {"kl_coef": 0.0},
            # no parallel.fsdp_version: TRL's FSDP is accelerate's, and accelerate has no single default
            # (huggingface/accelerate @16cb6eb80dd9aa8b4df1a63ef57863e455d53b83 src/accelerate/utils/dataclasses.py
            # l.1591 / 1822-1823: FullyShardedDataParallelPlugin fsdp_version defaults to 1 (env FSDP_VERSION);
            # src/accelerate/commands/config/cluster.py l.400-405: ``accelerate config`` proposes 2), and TRL ships
            # both (huggingface/trl @f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/accelerate_configs/fsdp1.yaml
            # l.17 fsdp_version: 1, fsdp2.yaml l.14 fsdp_version: 2; docs/source/clis.md l.367-368): the card's
            # default (fsdp2) stands, set parallel.fsdp_version to the launch config's
            "parallel": {"gradient_checkpointing": True},
            "precision": {"optimizer_impl": "fused"},
        },
        knobs={
            "rollout.gpu_memory_utilization": "vllm_gpu_memory_utilization",
            "rollout.tensor_parallel": "vllm_tensor_parallel_size",
            "rollout.num_generations": "num_generations",
            "rollout.response_len": "max_completion_length",
            "roles.kl_coef": "beta",
            "batch.micro_batch_size": "per_device_train_batch_size",
            "batch.grad_accum": "gradient_accumulation_steps",
        },
    ),
    "verl": Preset(
        name="verl",
        source="verl trainer/config/ppo_trainer.yaml (actor_rollout_ref.rollout.gpu_memory_utilization: 0.5; "
        "ref.fsdp_config.param_offload: True for the reference under FSDP; FSDP actor keeps fp32 parameters "
        "with bf16 mixed precision); verl-project/verl v0.9.0 (483b8a009ba3a97563edee3a19887e4862b8094a) "
        "verl/trainer/config/rollout/rollout.yaml free_cache_engine: True, and "
        "verl/workers/rollout/vllm_rollout/vllm_async_server.py _sleep_hybrid: vLLM sleeps at level 2 between "
        "rollouts (level 1 when only a LoRA adapter is synced); verl/trainer/config/actor/dp_actor.yaml l.26 "
        "strategy: fsdp, which verl/workers/engine/fsdp/transformer_impl.py l.404-418 wraps in "
        "FullyShardedDataParallel (FSDP1; fsdp2 is fully_shard, l.431)",
        card={
            "rollout": {"engine": "vllm", "placement": "colocate", "gpu_memory_utilization": 0.5, "sleep_level": 2},
            "roles": {"reference": "cpu"},
            "precision": {"weights": "fp32", "compute": "bf16"},
            "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "gradient_checkpointing": True},
        },
        knobs={
            "rollout.gpu_memory_utilization": "actor_rollout_ref.rollout.gpu_memory_utilization",
            "rollout.tensor_parallel": "actor_rollout_ref.rollout.tensor_model_parallel_size",
            "rollout.num_generations": "actor_rollout_ref.rollout.n",
            "rollout.response_len": "data.max_response_length",
            "rollout.prompt_len": "data.max_prompt_length",
            "parallel.gradient_checkpointing": "actor_rollout_ref.model.enable_gradient_checkpointing",
            "batch.micro_batch_size": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
            "rollout.logprob_micro_batch_size": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        },
    ),
    "openrlhf": Preset(
        name="openrlhf",
        source="OpenRLHF 0.11 (OpenRLHF/OpenRLHF README.md at 3c3be6234e0cb353e76bb8019947db9dfe99fca7, "
        "version.txt 0.11.0; the flags trainfit exports, recorded from openrlhf 0.11.2 argparse): hybrid engine "
        "--train.colocate_all --vllm.enable_sleep --ds.enable_sleep (vLLM sleep level 1, "
        "openrlhf/trainer/ray/vllm_engine.py), --vllm.gpu_memory_utilization 0.5 in the 8x A100 quick start "
        "(hybrid engine; split engines: the argparse default 0.95, default_gpu_memory_utilization)",
        card={
            # no gpu_memory_utilization: the quick start's 0.5 is the hybrid engine's, a split engine keeps the
            # argparse default (default_gpu_memory_utilization)
            "rollout": {"engine": "vllm", "placement": "colocate", "sleep_level": 1},
            "parallel": {"strategy": "zero3", "gradient_checkpointing": True},
        },
        knobs={
            "rollout.gpu_memory_utilization": "--vllm.gpu_memory_utilization",
            "rollout.tensor_parallel": "--vllm.tensor_parallel_size",
            "rollout.num_generations": "--rollout.n_samples_per_prompt",
            "rollout.response_len": "--rollout.max_new_tokens",
            "rollout.prompts_per_step": "--rollout.batch_size",
            "batch.micro_batch_size": "--train.micro_batch_size",
        },
    ),
    "llamafactory-z2": Preset(
        name="llamafactory-z2",
        source="LLaMA-Factory examples/deepspeed/ds_z2_config.json (hiyouga/LLaMA-Factory at "
        "1d6e8b218240c154638f9bdcb76a1a089c27891b): stage 2, allgather_bucket_size 5e8, reduce_bucket_size 5e8, "
        "overlap_comm false, contiguous_gradients true; no optimizer section (the HF Trainer's optimizer)",
        card={
            "parallel": {"strategy": "zero2"},
            "deepspeed": {"reduce_bucket_size": 500_000_000, "allgather_bucket_size": 500_000_000,
                          "overlap_comm": False, "contiguous_gradients": True},
        },
        knobs=dict(_DS_KNOBS),
    ),
    "llamafactory-z3": Preset(
        name="llamafactory-z3",
        source="LLaMA-Factory examples/deepspeed/ds_z3_config.json (hiyouga/LLaMA-Factory at "
        "1d6e8b218240c154638f9bdcb76a1a089c27891b): stage 3, overlap_comm false, contiguous_gradients true, "
        "sub_group_size 1e9, reduce_bucket_size / stage3_prefetch_bucket_size / stage3_param_persistence_threshold "
        "auto (the HF Trainer fills hidden^2, 0.9 hidden^2, 10 hidden), stage3_max_live_parameters 1e9, "
        "stage3_max_reuse_distance 1e9",
        card={
            "parallel": {"strategy": "zero3"},
            "deepspeed": {**_ZERO3_AUTO_TEMPLATE, "overlap_comm": False},
        },
        knobs=dict(_DS_KNOBS),
    ),
    "ms-swift-zero2": Preset(
        name="ms-swift-zero2",
        source="ms-swift swift/llm/ds_config/zero2.json (modelscope/ms-swift at "
        "054575c68c54d7f34c40e04d62df20e7335b349a): stage 2, allgather_bucket_size 2e8, reduce_bucket_size 2e8, "
        "overlap_comm true, contiguous_gradients true; optimizer AdamW in the config (DeepSpeed's fused Adam)",
        card={
            "parallel": {"strategy": "zero2"},
            "precision": {"optimizer_impl": "fused"},
            "deepspeed": {"reduce_bucket_size": 200_000_000, "allgather_bucket_size": 200_000_000,
                          "overlap_comm": True, "contiguous_gradients": True},
        },
        knobs=dict(_DS_KNOBS),
    ),
    "ms-swift-zero3": Preset(
        name="ms-swift-zero3",
        source="ms-swift swift/llm/ds_config/zero3.json (modelscope/ms-swift at "
        "35992c1cc9092af233edbd75a2aefcd496d6fc19): stage 3, overlap_comm true, contiguous_gradients true, "
        "sub_group_size 1e9, reduce_bucket_size / stage3_prefetch_bucket_size / stage3_param_persistence_threshold "
        "auto, stage3_max_live_parameters 1e9, stage3_max_reuse_distance 1e9",
        card={
            "parallel": {"strategy": "zero3"},
            "deepspeed": {**_ZERO3_AUTO_TEMPLATE, "overlap_comm": True},
        },
        knobs=dict(_DS_KNOBS),
    ),
    "nemo-rl": Preset(
        name="nemo-rl",
        source="NeMo RL examples/configs/grpo_math_1B.yaml (policy.generation.colocated.enabled: true, "
        "vllm_cfg.gpu_memory_utilization: 0.6); nemo_rl/models/generation/vllm/vllm_worker.py line 112 "
        "(NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470): VLLM_ENABLE_V1_MULTIPROCESSING=0, vllm.LLM in-process; "
        "the reference, when the loss has a KL term, in pinned host memory swapped into the policy for its pass "
        "(roles.reference host_swap, set by methods.roles.reference_placement: use_reference_model, same commit); "
        "policy.dtensor_cfg enabled: true, _v2: true (grpo_math_1B.yaml l.85-87, same commit): the DTensor worker "
        "V2 (nemo_rl/models/policy/lm_policy.py l.112-115) shards through NeMo Automodel's FSDP2Manager "
        "(nemo_rl/models/automodel/setup.py l.262, 486), and V1 with fully_shard (nemo_rl/models/dtensor/"
        "parallelize.py l.458-464, 693-699): FSDP2, parallel.fsdp_version fsdp2",
        card={
            "rollout": {"engine": "vllm", "placement": "colocate", "gpu_memory_utilization": 0.6,
                        "engine_multiprocess": False},
            "parallel": {"fsdp_version": "fsdp2", "gradient_checkpointing": True},
        },
        knobs={
            "rollout.gpu_memory_utilization": "policy.generation.vllm_cfg.gpu_memory_utilization",
            "rollout.tensor_parallel": "policy.generation.vllm_cfg.tensor_parallel_size",
            "rollout.num_generations": "grpo.num_generations_per_prompt",
            "rollout.response_len": "policy.max_total_sequence_length",
            "parallel.gradient_checkpointing": "policy.dtensor_cfg.activation_checkpointing",
            "batch.micro_batch_size": "policy.train_micro_batch_size",
        },
    ),
}

for _name, _source in (
    ("miles", "radixark/miles (a derivative of THUDM/slime): Megatron-LM (or FSDP) training, SGLang rollout "
     "(miles/backends/sglang_utils; miles/utils/arguments.py l.144-146 --colocate off by default: the engines on "
     "their own GPUs unless the launch says so, set rollout.placement) @748935dc7155d4990d02d62f6061c50ef8054051; "
     "weight sync: compute.sync MILES_BROADCAST / MILES_COLOCATED"),
    ("slime", "THUDM/slime: Megatron-LM training, SGLang rollout (slime/utils/arguments.py --colocate off by "
     "default, set rollout.placement) @624b824a898ab0ec1fcb4d373004c7f3852bf515; weight sync as miles' "
     "(compute.sync SLIME_SAME)"),
):
    PRESETS[_name] = Preset(name=_name, source=_source, card={"rollout": {"engine": "sglang"}})

PRESETS["skyrl"] = Preset(
    name="skyrl",
    source="NovaSky-AI/SkyRL skyrl/train/config/config.py @2e9c89afceb3ef7963748224373ad88882322c99: "
    "PlacementConfig.colocate_all True (l.418: training and the vLLM engines share the GPUs), "
    "InferenceEngineConfig.gpu_memory_utilization 0.8 (l.764), gradient_checkpointing True (l.915); "
    "RemoteInferenceClient.sleep(level=2) after each rollout (skyrl/backends/skyrl_train/inference_servers/"
    "remote_inference_client.py l.1028, forced to 1 for a LoRA sync, l.1041-1048; skyrl/train/trainer.py l.376-379). "
    "Under colocate_all WorkerDispatch moves the trainer's state to the host around the engine "
    "(methods.rl TRAINER_OFFLOAD_PRESETS, plan.rl_offload ONE_WEIGHT_ROUND_TRIP_PRESETS), its reference is a "
    "separate model offloaded outside its own pass (methods.roles REFERENCE_OFFLOAD_PRESETS), the old log-prob pass "
    "runs by default (methods.roles OLD_LOGPROB_PRESETS), the passes pack (spec.card PACKING_PRESETS) and "
    "the weights cross by bucketed CUDA IPC (compute.sync SKYRL_COLOCATED)",
    card={
        "rollout": {"engine": "vllm", "placement": "colocate", "gpu_memory_utilization": 0.8, "sleep_level": 2},
        "parallel": {"gradient_checkpointing": True},
    },
    knobs={
        "rollout.gpu_memory_utilization": "generator.inference_engine.gpu_memory_utilization",
        "rollout.tensor_parallel": "generator.inference_engine.tensor_parallel_size",
        "rollout.num_generations": "generator.n_samples_per_prompt",
        "rollout.response_len": "generator.sampling_params.max_generate_length",
        "rollout.prompt_len": "trainer.max_prompt_length",
        "parallel.gradient_checkpointing": "trainer.gradient_checkpointing",
        "batch.micro_batch_size": "trainer.micro_train_batch_size_per_gpu",
        "rollout.logprob_micro_batch_size": "trainer.micro_forward_batch_size_per_gpu",
    },
)


from trainfit.methods.unsloth import UNSLOTH_PRESET_SOURCE  # noqa: E402  (pure constants, no cycle)

PRESETS["unsloth"] = Preset(
    name="unsloth",
    source=UNSLOTH_PRESET_SOURCE,
    # no gpu_memory_utilization: FastLanguageModel.from_pretrained's argument (default 0.5,
    # default_gpu_memory_utilization), set by every notebook read; the card's value (default or set) is the engine's
    # budget (approximate_vllm_memory_usage's lowering is not modelled)
    card={
        "rollout": {"engine": "vllm", "placement": "colocate", "sleep_level": 0},
        "parallel": {"strategy": "single", "gradient_checkpointing": True},
        "hardware": {"gpus_per_node": 1, "nodes": 1},
        # Unsloth's efficient GRPO loss from 2025.3.8 (methods.unsloth 6.; a 2025.2 release: loss.chunked false)
        "loss": {"chunked": True, "kernel": "unsloth"},
    },
    knobs={
        "rollout.gpu_memory_utilization": "gpu_memory_utilization",
        "rollout.num_generations": "num_generations",
        "rollout.response_len": "max_completion_length",
        "rollout.prompt_len": "max_prompt_length",
        "roles.kl_coef": "beta",
        "batch.micro_batch_size": "per_device_train_batch_size",
        "batch.grad_accum": "gradient_accumulation_steps",
    },
)

_TRL_COLOCATE_GPU_MEMORY_UTILIZATION = 0.3
"""GRPOConfig.vllm_gpu_memory_utilization ``default=0.3``, read only under vllm_mode colocate (huggingface/trl
trl/trainer/grpo_config.py l.646-647 @f2cd57710ae345ea6428ae95363267fcf38a3dc8)."""
_TRL_SERVER_GPU_MEMORY_UTILIZATION = 0.9
"""``trl vllm-serve``'s ScriptArguments.gpu_memory_utilization ``default=0.9``: the engine on its own GPUs
(huggingface/trl trl/scripts/vllm_serve.py l.248-249 @f2cd57710ae345ea6428ae95363267fcf38a3dc8)."""
_OPENRLHF_HYBRID_GPU_MEMORY_UTILIZATION = 0.5
"""``--vllm.gpu_memory_utilization 0.5`` with ``--train.colocate_all``: the hybrid-engine quick start (OpenRLHF/OpenRLHF
README.md l.459 and l.766 @3c3be6234e0cb353e76bb8019947db9dfe99fca7)."""
_OPENRLHF_SPLIT_GPU_MEMORY_UTILIZATION = 0.95
"""``--vllm.gpu_memory_utilization`` ``default=0.95``: vLLM engines on their own GPUs (OpenRLHF/OpenRLHF
openrlhf/cli/train_ppo_ray.py l.250-254 @3c3be6234e0cb353e76bb8019947db9dfe99fca7)."""
_UNSLOTH_GPU_MEMORY_UTILIZATION = 0.5
"""FastLanguageModel.from_pretrained(..., gpu_memory_utilization = 0.5) (unslothai/unsloth unsloth/models/loader.py
l.78 @027b5100c7492bce025fe2f03681f440843e4666, the preset's 2025.2.4; l.430 @015bdef0d94a241bcd94eec7a405b1700632180d)."""


ONE_GPU_FSDP_OFFLOADS: dict[str, frozenset[str]] = {
    "verl": frozenset({"optimizer", "params_and_optimizer"}),
    "nemo-rl": frozenset({"params_and_optimizer"}),
    "skyrl": frozenset({"params_and_optimizer"}),
}
"""The torch-FSDP frameworks (no DeepSpeed backend) and the ``parallel.offload`` values each runs on one GPU, under
strategy fsdp. verl's actor offloads the optimizer state alone or with the parameter shard (``fsdp_config.
optimizer_offload`` / ``param_offload``, moved between phases: volcengine/verl verl/workers/fsdp_workers.py
``update_actor`` l.893-898, l.928-932 @b178a3cd56f58b2d502255daba591e92833930a7; ``plan.rl_offload
.verl_fsdp_actor_offload``). NeMo RL and SkyRL offload through FSDP2's ``CPUOffloadPolicy`` (SkyRL
skyrl_train/distributed/fsdp_strategy.py l.343-344, ``compute.sync``), parameters with their gradients and
optimizer states, or nothing (``plan.time.fsdp_optimizer_offload_refusal``). The card does not refuse verl with a ZeRO
strategy: the plan reads any non-FSDP strategy under preset verl as verl's Megatron trainer (``plan.rl_offload
.verl_megatron_offload_refusal``, ``plan.time.verl_fsdp_workers``), zero1 standing for Megatron's distributed
optimizer (the verl Megatron benchmark rows), and ``export.verl`` writes zero2 / zero3 as Megatron's distributed
optimizer / Megatron-FSDP; only ``fit``'s one-GPU offload rows had put verl under DeepSpeed's ZeRO-Offload."""

NO_ONE_GPU_OFFLOAD_PRESETS = frozenset({"unsloth", "miles", "slime"})
"""Presets ``fit`` plans no one-GPU parameter or optimizer offload for: Unsloth offloads activations only
(``parallel.activation_offload``, ``methods.unsloth``) and runs no sharding wrapper; miles and slime train with
Megatron-LM (or FSDP), whose one-GPU offload was not read."""

_ZERO_OFFLOAD_STRATEGY = {"optimizer": Strategy.ZERO2, "params_and_optimizer": Strategy.ZERO3}
"""DeepSpeed's ZeRO-Offload on one GPU (https://www.deepspeed.ai/tutorials/zero-offload/, read 2026-12-05):
``offload_optimizer`` from stage 1, ``offload_param`` "Valid only with stage 3" (deepspeedai/DeepSpeed
deepspeed/runtime/zero/offload_config.py @1978617c691b2c992a17902975187ef8d61176fa l.21-22, l.52-53)."""


DEEPSPEED_ONLY_STAGES = frozenset({Strategy.ZERO1, Strategy.ZERO3})
"""The data-parallel strategies ``fit`` searches on several GPUs only where the card's framework runs DeepSpeed
(``data_parallel_strategy_runs``): ZeRO stage 1 (optimizer states sharded, the gradients reduced once per optimizer
step) and stage 3 (parameters sharded too, the only stage that offloads parameters). TRL launches both through
accelerate: trl/accelerate_configs/zero1.yaml l.7 ``zero_stage: 1`` (huggingface/trl
@6b012dc157b7aa880d41ab1c2714d31453072594), zero3.yaml l.9 ``zero_stage: 3``
(@11321994634037fda6240df21ac6c5711aa33a55); LLaMA-Factory's and ms-swift's presets carry DeepSpeed's ZeRO-3
JSON, OpenRLHF's strategy is zero3. The torch-FSDP frameworks (``ONE_GPU_FSDP_OFFLOADS``: verl, NeMo RL, SkyRL) and
``NO_ONE_GPU_OFFLOAD_PRESETS`` (Unsloth, one GPU without a sharding wrapper; miles and slime, Megatron-LM or FSDP)
run no DeepSpeed stage. (zero2 stays in the space for every preset as before: under verl the plan reads it as verl's
Megatron trainer, ``ONE_GPU_FSDP_OFFLOADS``.)"""


def data_parallel_strategy_runs(*, preset: str | None, strategy: str) -> bool:
    """Whether ``fit`` searches ``strategy`` on more than one GPU for a card with ``preset``: everything but
    ``DEEPSPEED_ONLY_STAGES``, which only where the framework runs DeepSpeed (no preset: the HF Trainer / accelerate
    path; trl, openrlhf, llamafactory-*, ms-swift-*)."""
    try:
        stage = Strategy(strategy)
    except ValueError:  # a value the card refuses: the plan says why
        return True
    if stage not in DEEPSPEED_ONLY_STAGES:
        return True
    return preset not in ONE_GPU_FSDP_OFFLOADS and preset not in NO_ONE_GPU_OFFLOAD_PRESETS


def one_gpu_offload_strategy(*, preset: str | None, offload: str) -> Strategy | None:
    """The strategy a one-GPU card with ``parallel.offload`` ``offload`` runs under in its framework, or None where
    the framework does not offload that way (``fit`` then generates no such row; suggestions propose none).

    No offload: ``single``. FSDP frameworks (``ONE_GPU_FSDP_OFFLOADS``): fsdp for the offloads they run. Unsloth,
    miles, slime (``NO_ONE_GPU_OFFLOAD_PRESETS``): None. TRL, OpenRLHF, LLaMA-Factory, ms-swift and no preset
    (the HF Trainer / DeepSpeed path): zero2 for the optimizer, zero3 for parameters and optimizer."""
    if offload == "none":
        return Strategy.SINGLE
    if preset in ONE_GPU_FSDP_OFFLOADS:
        return Strategy.FSDP if offload in ONE_GPU_FSDP_OFFLOADS[preset] else None
    if preset in NO_ONE_GPU_OFFLOAD_PRESETS:
        return None
    return _ZERO_OFFLOAD_STRATEGY.get(offload)


def offload_change(*, preset: str | None, world_size: int, strategy: Strategy, offload: str) -> dict[str, str] | None:
    """The card keys a suggestion sets to move ``parallel.offload`` to ``offload`` (``suggest``, ``preflight.diagnose``),
    or None where the card's framework does not offload that way on one GPU (``one_gpu_offload_strategy``, whatever
    the card's strategy). On one GPU under ``single`` or ``ddp`` (which offload nothing,
    ``spec.card.offload_strategy_refusal``) the offload comes with the strategy its framework runs it under, as
    ``fit`` searches it; elsewhere the offload alone."""
    if offload == "none" or world_size > 1:
        return {"parallel.offload": offload}
    to = one_gpu_offload_strategy(preset=preset, offload=offload)
    if to is None:
        return None
    if strategy in (Strategy.SINGLE, Strategy.DDP):
        return {"parallel.offload": offload, "parallel.strategy": to.value}
    return {"parallel.offload": offload}


def default_gpu_memory_utilization(*, preset: str | None, placement: Placement, engine: RolloutEngine | None = None,
                                   gpu_memory_mib: float | None = None, engine_tp: int = 1, mla: bool = False,
                                   lora: bool = False) -> tuple[float, str]:
    """``(fraction, where it comes from)``: the vLLM budget a card with no ``rollout.gpu_memory_utilization`` gets.

    The verl, nemo-rl and skyrl presets fill their framework's own value (one for either placement) before this is
    read. openrlhf: the hybrid-engine quick start's colocated, the argparse default split. unsloth: the loader's
    default. No preset (TRL assumed), trl, and presets that state none (the SFT presets; miles and slime plan SGLang):
    TRL's, by placement: colocate is GRPOConfig's, split is the ``trl vllm-serve`` server's.

    Step-time benchmark when this replaced the flat 0.3 (2026-12-05): no row moved, the published RL entries that
    leave the fraction unstated included (3 TRL and 8 OpenRLHF runs on split engines); the fraction sizes the
    engine's memory and KV capacity, and none of them was bound by it.

    An SGLang engine (``engine`` sglang: the miles and slime presets) takes SGLang's own default instead, whatever the
    preset: ``mem_fraction_static`` is None in ServerArgs and set by its rule on the GPU's nvidia-smi memory
    (``gpu_memory_mib``, None: unknown), the engine's TP size and whether the model is MLA or the engine serves LoRA
    (``methods.sglang_memory``); miles and slime pass ServerArgs' defaults through."""
    if engine is RolloutEngine.SGLANG:
        from trainfit.methods.sglang_memory import SGLANG_MEM_FRACTION_SOURCE, sglang_mem_fraction_static

        value = sglang_mem_fraction_static(gpu_memory_mib=gpu_memory_mib, tp_size=engine_tp, mla=mla, lora=lora)
        gpu = f"{gpu_memory_mib:.0f} MiB GPU" if gpu_memory_mib else "GPU memory unknown"
        return value, (f"{SGLANG_MEM_FRACTION_SOURCE}: {gpu}, engine TP {engine_tp}"
                       f"{', MLA model' if mla else ''}{', LoRA engine' if lora else ''}")
    if preset == "unsloth":
        return _UNSLOTH_GPU_MEMORY_UTILIZATION, "Unsloth FastLanguageModel.from_pretrained default"
    if preset == "openrlhf":
        if placement is Placement.SPLIT:
            return _OPENRLHF_SPLIT_GPU_MEMORY_UTILIZATION, "OpenRLHF --vllm.gpu_memory_utilization default, split engines"
        return _OPENRLHF_HYBRID_GPU_MEMORY_UTILIZATION, "OpenRLHF hybrid-engine quick start"
    whose = "TRL" if preset in (None, "trl") else f"TRL's (preset {preset} states none)"
    if placement is Placement.SPLIT:
        return _TRL_SERVER_GPU_MEMORY_UTILIZATION, f"{whose} trl vllm-serve default, split engine"
    return _TRL_COLOCATE_GPU_MEMORY_UTILIZATION, f"{whose} GRPOConfig.vllm_gpu_memory_utilization default, colocate"


def preset(name: str) -> Preset:
    from trainfit.methods.unsloth import REFUSED_PRESETS

    if name in REFUSED_PRESETS:
        raise CardError(refused_preset_line(name))
    if name not in PRESETS:
        raise CardError(f"preset: '{name}' is not known; allowed: {', '.join(PRESETS)}")
    return PRESETS[name]


def refused_preset_line(name: str) -> str:
    """The one line refusing a preset trainfit knows and does not plan (``methods.unsloth.REFUSED_PRESETS``)."""
    from trainfit.methods.unsloth import REFUSED_PRESETS

    return f"preset: '{name}' is refused: {REFUSED_PRESETS[name]}; allowed: {', '.join(PRESETS)}"


def preset_fill(name: str, key: str) -> Any:
    """The value preset ``name`` fills at the dotted card ``key`` where the card leaves it open (None: it fills
    none there, or the preset is not known). From the preset's own card section; ``apply_preset``'s conditional
    fills (sleep level, precision.weights, pipeline_outputs_deallocated) are not read here."""
    node: Any = PRESETS[name].card if name in PRESETS else {}
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


RL_ONLY_SECTIONS = ("rollout", "roles")
"""Preset sections filled only for method ppo / grpo (``apply_preset``): the engine and the RL roles of each preset are
its RL trainer's (verl's host-offloaded reference, ppo_trainer.yaml ``ref.fsdp_config.param_offload``; TRL's
GRPOConfig ``beta`` 0.0, which is not DPOConfig's ``beta``). A DPO, RM or SFT card keeps the card's own defaults there,
so a refusal of one of those values names a value the user set."""


def apply_preset(card_data: dict[str, Any], name: str) -> dict[str, Any]:
    """Card data with the preset's defaults filled in under what the card sets: the RL-only sections
    (``RL_ONLY_SECTIONS``) for ppo / grpo only; verl's fp32 parameters not under scope qlora (the nf4 base)."""
    defaults = preset(name).card
    if str(card_data.get("method", "sft")) not in ("ppo", "grpo"):
        defaults = {k: v for k, v in defaults.items() if k not in RL_ONLY_SECTIONS}
    if name == "trl" and str(card_data.get("method", "sft")) not in ("grpo", "dpo"):
        # only GRPOTrainer and DPOTrainer patch the fused lm_head in (add_fused_lm_head); SFT, the reward
        # trainer and PPO compute the full logits
        defaults = {k: v for k, v in defaults.items() if k != "loss"}
    stated_loss = {"chunked", "kernel"} & set(card_data.get("loss") or {})
    if name == "unsloth" and (str(card_data.get("method", "sft")) != "grpo" or stated_loss):
        # the efficient loss is the GRPO trainer's, and a card stating loss.chunked or loss.kernel keeps its own
        defaults = {k: v for k, v in defaults.items() if k != "loss"}
    merged = merge_under(defaults, card_data)
    if (name == "verl" and "rollout" in defaults and merged.get("scope", "full") != "full"
            and "sleep_level" not in (card_data.get("rollout") or {})):
        merged["rollout"] = {**merged["rollout"], "sleep_level": 1}  # verl sleeps at level 1 when it syncs an adapter
    if (name == "verl" and str(merged.get("scope", "full")) == "qlora"
            and "weights" not in (card_data.get("precision") or {})):
        # the fp32 parameters are the FSDP actor's full or LoRA model; a qlora base is stored in nf4
        # (spec.card: "qlora stores the base in nf4"), so the preset leaves precision.weights to the scope
        merged["precision"] = {k: v for k, v in merged["precision"].items() if k != "weights"}
    if (name == "verl" and str((merged.get("parallel") or {}).get("tensor_parallel_impl", "")) == "megatron"
            and "weights" not in (card_data.get("precision") or {})):
        # the fp32 parameters are the FSDP actor's: verl's Megatron backend wraps its model in Megatron-Core's
        # Float16Module (bf16 parameters) and keeps the fp32 copy in the distributed optimizer's main parameters
        # (get_model: ``Float16Module(config, model_module)``, volcengine/verl verl/utils/megatron_utils.py l.114-115
        # @04acd09d65900521e8019adefd10308220cb7ee2, l.135 @b178a3cd56f58b2d502255daba591e92833930a7;
        # ``init_megatron_optim_config``: ``bf16=True, params_dtype=torch.bfloat16``, l.199-208 @04acd09d)
        merged["precision"] = {k: v for k, v in merged["precision"].items() if k != "weights"}
    if (name == "verl" and str((merged.get("parallel") or {}).get("tensor_parallel_impl", "")) == "megatron"
            and "fsdp_version" not in (card_data.get("parallel") or {})):
        # FSDP1 is the FSDP actor's wrapper (strategy fsdp: FullyShardedDataParallel); the Megatron backend shards
        # with Megatron-Core's distributed optimizer and has no FSDP version: the fill is not the run's
        merged["parallel"] = {k: v for k, v in merged["parallel"].items() if k != "fsdp_version"}
    par = merged.get("parallel") or {}
    if (name == "nemo-rl" and str(par.get("tensor_parallel_impl", "")) == "megatron"
            and int(par.get("pipeline_parallel", 1) or 1) > 1
            and "pipeline_outputs_deallocated" not in (card_data.get("parallel") or {})):
        # NeMo RL builds its Megatron model with Megatron-Bridge's AutoBridge and overrides neither
        # deallocate_pipeline_outputs nor moe_router_fusion (NVIDIA-NeMo/RL nemo_rl/models/megatron/setup.py
        # l.608-609, l.662-670 @7ea279abfbeb698b092856d0dab61e7cf39bc909): the provider's deallocate True
        # (NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/models/gpt_provider.py l.162 @067f987d); the router
        # launches stay Megatron-Core's eager default (parallel.moe_launch null); verl keeps both Megatron-Core
        # defaults (false / eager), so its preset sets neither
        merged["parallel"] = {**par, "pipeline_outputs_deallocated": True}
    if (name == "skyrl" and "rollout" in defaults and merged.get("scope", "full") != "full"
            and str((merged.get("parallel") or {}).get("strategy", Strategy.FSDP)) in {s.value for s in FSDP_STRATEGIES}
            and "sleep_level" not in (card_data.get("rollout") or {})):
        # SkyRL forces sleep level 1 when it syncs LoRA adapters (RemoteInferenceClient.sleep l.1041-1048: level 2
        # would discard the base weights): FSDP whenever lora.rank > 0; Megatron merges the adapter into the base
        # weights by default (MegatronLoraConfig.merge_lora True, skyrl/train/config/config.py l.325) and syncs full
        # weights, so it keeps level 2 (_uses_lora_weight_sync, inference_servers/utils.py l.23-34 @2e9c89af)
        merged["rollout"] = {**merged["rollout"], "sleep_level": 1}
    if (name == "nemo-rl" and "rollout" in defaults
            and str((merged.get("rollout") or {}).get("placement", "colocate")) == "colocate"
            and "sleep_level" not in (card_data.get("rollout") or {})):
        # NeMo RL has no sleep setting: a colocated engine is slept at level 1 after every generation and woken for
        # the refit (SLEEP_LEVELS["nemo-rl"]: vllm_generation.py finish_generation l.715-722, vllm_worker.py l.820
        # ``self.llm.sleep(level=1)`` @9dbd9adc95a10f5946cceb36e1d5b31e2429e470); a split engine never sleeps
        merged["rollout"] = {**merged["rollout"], "sleep_level": 1}
    if name == "unsloth":
        merged["parallel"] = unsloth_activation_offload(merged.get("parallel") or {},
                                                        stated=card_data.get("parallel") or {})
    merged["preset"] = name
    return merged


def unsloth_activation_offload(parallel: dict[str, Any], *, stated: dict[str, Any]) -> dict[str, Any]:
    """The merged ``parallel`` section of a ``preset: unsloth`` card with Unsloth's offloaded checkpointing:
    ``activation_offload`` true where every layer is checkpointed (``gradient_checkpointing`` true, no selective or
    every-n-th rule) and the card (``stated``) does not state ``activation_offload`` itself
    (``methods.unsloth.UNSLOTH_OFFLOADED_CHECKPOINT_SOURCE``); the section unchanged otherwise."""
    if "activation_offload" in stated:
        return parallel
    checkpointed = str(parallel.get("gradient_checkpointing", True)).lower() == "true"
    selective = str(parallel.get("selective_checkpointing") or "none") != "none"
    if not checkpointed or selective or parallel.get("checkpoint_every_n_layers") is not None:
        return parallel
    return {**parallel, "activation_offload": True}


def unsloth_offload_follows_checkpointing(knobs: dict[str, Any], *, parallel: dict[str, Any]) -> dict[str, Any]:
    """A search row's ``knobs`` (dotted card keys) on a ``preset: unsloth`` card whose ``parallel`` section (as merged)
    holds the preset's ``activation_offload``: where the row's knobs leave no layer checkpointed, the offload goes
    with the checkpoints (``parallel.activation_offload`` false), since the preset fills it only where every layer is
    checkpointed (``unsloth_activation_offload``: Unsloth offloads the checkpointed layer inputs, so with checkpointing
    off it offloads nothing). The knobs unchanged otherwise. The caller applies this only where the user did not state
    ``activation_offload`` (then it is theirs, kept on every row)."""
    if not parallel.get("activation_offload"):
        return knobs
    row = {k: v for k, v in parallel.items() if k != "activation_offload"}
    row.update({k.split(".", 1)[1]: v for k, v in knobs.items() if k.startswith("parallel.")})
    if unsloth_activation_offload(row, stated={}).get("activation_offload"):
        return knobs
    return {**knobs, "parallel.activation_offload": False}


def preset_weights_for_scope(base: dict[str, Any], *, scope: str) -> Any:
    """``precision.weights`` as preset ``base["preset"]`` fills it for a row of ``scope`` (``fit --search-scope``: the
    row's scope is not the card's): verl's fp32 parameters except under qlora (its nf4 base) and its Megatron backend
    (``apply_preset``), asked of ``apply_preset`` itself on the card's model, method and layers' implementation."""
    probe: dict[str, Any] = {"model": base.get("model"), "method": base.get("method", "sft"), "scope": scope}
    impl = (base.get("parallel") or {}).get("tensor_parallel_impl")
    if impl is not None:
        probe["parallel"] = {"tensor_parallel_impl": impl}
    return (apply_preset(probe, str(base["preset"])).get("precision") or {}).get("weights")


def preset_source(name: str, *, rl: bool) -> str:
    """The source line a plan states for preset ``name``: an RL plan (``rl``: method ppo or grpo) the preset's own,
    another method the line of what that method runs (Unsloth: TRL's SFTTrainer, ``UNSLOTH_SFT_SOURCE``)."""
    if name == "unsloth":
        from trainfit.methods.unsloth import UNSLOTH_OFFLOADED_CHECKPOINT_SOURCE, UNSLOTH_SFT_SOURCE

        return f"{UNSLOTH_PRESET_SOURCE if rl else UNSLOTH_SFT_SOURCE}; {UNSLOTH_OFFLOADED_CHECKPOINT_SOURCE}"
    return preset(name).source


def knob_name(name: str | None, key: str) -> str:
    """The framework's name for a card key (the key itself without a preset)."""
    if name is None:
        return key
    return preset(name).knobs.get(key, key)



@dataclass(frozen=True, slots=True)
class SleepLevels:
    """The ``rollout.sleep_level`` values a framework can be configured to run: colocated by scope (a scope left out
    takes ``colocate_other``), and on a split placement. ``source`` cites the code and names the option."""

    colocate: dict[Scope, frozenset[int]]
    colocate_other: frozenset[int]
    split: frozenset[int]
    source: str


_NO_SPLIT_SLEEP = frozenset({0})
PRESET_SLEEP_LEVELS: dict[str, SleepLevels] = {
    "verl": SleepLevels(
        colocate={Scope.FULL: frozenset({0, 2})}, colocate_other=frozenset({0, 1}), split=_NO_SPLIT_SLEEP,
        source="verl picks the level itself and takes only actor_rollout_ref.rollout.free_cache_engine "
        "(verl-project/verl @483b8a009ba3a97563edee3a19887e4862b8094a verl/trainer/config/rollout/rollout.yaml l.60-61 "
        "free_cache_engine: True): false skips the sleep (verl/workers/rollout/vllm_rollout/vllm_async_server.py "
        "l.791-793 'if self.node_rank != 0 or not self.config.free_cache_engine: return': level 0); true sleeps a "
        "hybrid engine at level 1 when a LoRA adapter is synced, 'lora only update adapter weights, so set sleep "
        "level to 1', else 2 (_sleep_hybrid l.1092-1098); a standalone engine is not slept ('skip sleep in "
        "standalone mode', l.799-800). A LoRA run reaches level 2 only with actor_rollout_ref.model.lora.merge: True "
        "(verl/trainer/config/model/hf_model.yaml l.103-105; lora_as_adapter is rank > 0 and not merge, "
        "vllm_async_server.py l.207-210), which syncs merged full weights: neither planned (a LoRA row syncs its "
        "adapter) nor exported (export.verl writes free_cache_engine, verl_sleep_level), so not searched"),
    "trl": SleepLevels(
        colocate={}, colocate_other=frozenset({0, 2}), split=_NO_SPLIT_SLEEP,
        source="GRPOConfig.vllm_enable_sleep_mode (huggingface/trl @f2cd57710ae345ea6428ae95363267fcf38a3dc8 "
        "trl/trainer/grpo_config.py l.602-603, default False: level 0); True calls self.llm.sleep(level=2) in the "
        "colocate branch only (trl/generation/vllm_generation.py l.369-370, l.701-702); a LoRA adapter is merged "
        "and synced as full weights, so level 2 holds for every scope; export.trl writes vllm_enable_sleep_mode"),
    "openrlhf": SleepLevels(
        colocate={}, colocate_other=frozenset({0, 1}), split=_NO_SPLIT_SLEEP,
        source="--vllm.enable_sleep (OpenRLHF/OpenRLHF @3c3be6234e0cb353e76bb8019947db9dfe99fca7 "
        "openrlhf/cli/train_ppo_ray.py l.245; off: level 0): the engines are slept with batch_vllm_engine_call(..., "
        "'sleep') and no level (openrlhf/trainer/ppo_utils/samples_generator.py l.83, l.120), i.e. "
        "'async def sleep(self, level=1)' (openrlhf/trainer/ray/vllm_engine.py l.138-139); without "
        "--train.colocate_all the flag is switched off (train_ppo_ray.py l.663-665); export.openrlhf writes "
        "--vllm.enable_sleep --ds.enable_sleep"),
    "nemo-rl": SleepLevels(
        colocate={}, colocate_other=frozenset({1}), split=_NO_SPLIT_SLEEP,
        source="no option: a colocated engine is always slept at level 1 after generation (NVIDIA-NeMo/RL "
        "@9dbd9adc95a10f5946cceb36e1d5b31e2429e470 nemo_rl/models/generation/vllm/vllm_generation.py l.715-722 "
        "finish_generation: 'non-colocated only needs reset prefix cache, no need to sleep'; "
        "nemo_rl/models/generation/vllm/vllm_worker.py l.820 self.llm.sleep(level=1)); export.nemo_rl notes the "
        "level is not a setting"),
    "skyrl": SleepLevels(
        colocate={Scope.FULL: frozenset({2})}, colocate_other=frozenset({1}), split=_NO_SPLIT_SLEEP,
        source="no option: under trainer.placement.colocate_all the engine is slept after each rollout (NovaSky-AI/"
        "SkyRL @2e9c89afceb3ef7963748224373ad88882322c99 skyrl/train/trainer.py l.377-379) at "
        "RemoteInferenceClient.sleep's default 'level: int = 2' (l.1028), forced to 1 for a LoRA sync "
        "(skyrl/backends/skyrl_train/inference_servers/remote_inference_client.py l.1041-1048); sleep mode is "
        "enabled only with colocate_all (inference_servers/utils.py l.100)"),
}
"""The ``rollout.sleep_level`` values each preset's framework can be configured to run (``sleep_level_allowed``);
``fit`` searches no other. A preset not listed here (unsloth, miles, slime, the SFT presets) keeps the whole
searched range: its sleep options were not read for this restriction."""


def sleep_level_allowed(*, preset: str | None, placement: Placement, scope: Scope, sleep_level: int) -> bool:
    """Whether the card's framework can be configured to sleep its engine at ``sleep_level`` for ``placement`` and
    ``scope`` (``PRESET_SLEEP_LEVELS``); True where the preset states no restriction."""
    levels = PRESET_SLEEP_LEVELS.get(str(preset or ""))
    if levels is None:
        return True
    if placement is Placement.SPLIT:
        return int(sleep_level) in levels.split
    return int(sleep_level) in levels.colocate.get(scope, levels.colocate_other)


PRESET_CUDA_GRAPHS: dict[str, dict[Placement, frozenset[bool]]] = {
    "trl": {Placement.COLOCATE: frozenset({True}), Placement.SPLIT: frozenset({True, False})},
}
"""The ``rollout.cuda_graphs`` values each preset's framework can be configured to run, by placement
(``cuda_graphs_allowed``); ``fit`` searches no other. TRL's colocated engine is built as ``LLM(model=..., ...,
max_num_batched_tokens=4096, ...)`` with no ``enforce_eager`` argument and GRPOConfig has no such field
(huggingface/trl @f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/generation/vllm_generation.py l.351-368): vLLM's
default, CUDA graphs on, is the only colocated value. A split engine is ``trl vllm-serve``, whose ScriptArguments
has ``enforce_eager`` (trl/scripts/vllm_serve.py l.279, passed to LLM at l.348): both values run (``export.trl``
names the flag for that launch). A preset not listed keeps both."""


def cuda_graphs_allowed(*, preset: str | None, placement: Placement, cuda_graphs: bool) -> bool:
    """Whether the card's framework can be configured to run its engine with ``cuda_graphs`` on ``placement``
    (``PRESET_CUDA_GRAPHS``); True where the preset states no restriction."""
    values = PRESET_CUDA_GRAPHS.get(str(preset or ""), {}).get(placement)
    return values is None or bool(cuda_graphs) in values

# What else fit varies, read against the same commits for the RL presets above, with no restriction added here:
# rollout.gpu_memory_utilization and rollout.tensor_parallel are options of every one (Preset.knobs names them);
# rollout.weight_sync is memory-only in fit and planned as each framework syncs (compute.sync, effective_weight_sync).
# Not yet restricted, though the exporters already note the framework has no option for them:
# rollout.max_num_seqs / max_num_batched_tokens (fit's engine refinement, ENGINE_SPACE): TRL derives max_num_seqs from
# the batch and fixes max_num_batched_tokens=4096 for its colocated engine (trl/generation/vllm_generation.py l.356,
# l.363 @f2cd57710ae345ea6428ae95363267fcf38a3dc8), OpenRLHF has no flag for either (export.openrlhf); verl's
# rollout.placement split is not main_ppo's (export.verl writes it colocated); preset unsloth's, miles' and slime's
# sleep and engine options were not read.
