"""PPO/GRPO (and DPO's reference pass): per-phase, per-GPU-group memory of an RL step.

The training side reuses the SFT step walk (``trainfit.memory.phases``) for the actor (and the
critic) over ``prompt_len + response_len`` tokens; every other role adds what it keeps resident
and the transient of its own pass:

* **frozen forward passes** (reference / old-policy log-probs, reward score, critic values) run
  under ``no_grad``: the role's weights (gathered unit by unit under FSDP/ZeRO-3), the widest
  in-layer transient (``micro-batch x seq x (2h + 3I)`` bf16: the layer's input, output and the
  MLP's gate/up/act tensors), and the logits: bf16 logits ``2·b·s·V`` plus one row's fp32
  log-softmax ``4·s·V`` (TRL's ``selective_log_softmax`` loops over rows for bf16 logits);
  a fused/chunked log-prob (``loss.chunked``) removes them;
* **the rollout engine** (vLLM: ``trainfit.rollout.vllm``) keeps its budget from start-up; with
  sleep mode it releases weights (level 1: to host RAM) and KV cache between rollouts. Its
  memory is not in the trainer's torch allocator (vLLM's CuMemAllocator pool): it counts in the
  device figure only. With ``engine: hf`` generation runs on the training model: under
  FSDP/ZeRO-3 the whole model is gathered (TRL's ``unwrap_model_for_generation``) and HF's KV
  cache holds ``sequences x (prompt + response) x kv bytes per token``;
* **weight sync** trainer -> engine: the engine's weights are back on the GPU plus the gather
  spike of the mechanism: one parameter (per-parameter gather), one bucket (bucketed, assumed
  1 GiB), or the whole model (full gather: PEFT under ZeRO-3/FSDP merges the adapter);
* **trainer offload between phases** (``rollout.trainer_offload``, colocated engines): verl and
  NeMo RL move the trainer's state to host RAM while the engine starts, generates and receives
  weights, and back for the log-prob and update passes. The engine-start, rollout and weight-sync
  phases then leave out the moved state (the weights are back while they are sent); host RAM holds it.
  verl and NeMo RL bring the optimizer state back only for the update: their log-prob passes leave it out too
  (``frozen_pass_offloaded``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache

from trainfit.memory.hybrid_engine import HE_MAX_OUT_TOKENS, HybridEngineMemory, hybrid_engine_memory
from trainfit.memory.overhead import CUDA_CONTEXT_BYTES as TRAINER_CUDA_CONTEXT_BYTES
from trainfit.memory.logits import trl_fused_logprob_bytes, verl_compiled_entropy_bytes, verl_logprob_pass_bytes
from trainfit.memory.params import param_tensors
from trainfit.memory.phases import PhasePeak, StepTerms, step_peaks
from trainfit.memory.weights import count_scale, weight_bytes
from trainfit.methods.roles import (REFERENCE_OFFLOAD_PRESETS, critic_model, group_sizes, logit_positions, old_logprob_pass,
                                    reference_placement, resolve_role_model, reward_model)
from trainfit.rollout.vllm import CUDA_CONTEXT_BYTES as ENGINE_CUDA_CONTEXT_BYTES
from trainfit.rollout.vllm import EngineConfig, EngineMemory, RolloutDemand, engine_memory, sleep_resident_bytes
from trainfit.methods.unsloth import engine_shares_trainer_weights
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    LogprobEntropy,
    FSDP_STRATEGIES,
    ComputeDtype,
    Dtype,
    Method,
    Offload,
    Phase,
    Placement,
    RefPlacement,
    SERVING_ENGINES,
    RolloutEngine,
    Scope,
    Strategy,
    VllmEngineGeneration,
    WeightSync,
)
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import TrainableSpec
from trainfit.units import GIB

SYNC_BUCKET_BYTES = 1 * GIB
"""Assumed bucket of bucketed weight sync (verl/OpenRLHF send weights in buckets of this order); a card's
``rollout.weight_sync_bucket_mib`` replaces it (``sync_bucket_bytes``)."""


def _gpu_memory_utilization_source(card: RunCard) -> str:
    """`` (where it comes from)`` for a fraction the card left null (``spec.card._resolve_gpu_memory_utilization``);
    empty for one the card, a ``--set`` or the preset stated."""
    if "gpu_memory_utilization" in card.rollout.model_fields_set:
        return ""
    from trainfit.spec.card import default_gpu_memory_utilization_of

    _value, source = default_gpu_memory_utilization_of(card)
    return f" ({source})"


def sync_bucket_bytes(card: RunCard) -> float:
    """The bucket a bucketed weight sync holds: the card's ``rollout.weight_sync_bucket_mib`` (miles / slime
    ``--update-weight-buffer-size``), else ``SYNC_BUCKET_BYTES``. miles' source rank keeps each TP-gathered,
    HF-converted tensor in ``converted_named_tensors`` until the next unit would pass
    ``update_weight_buffer_size``, then
    broadcasts the bucket (``_gather_and_update_non_expert_weights``; experts: the bucket of TP-gathered tensors
    times the EP size after the EP gather, ``_gather_and_update_expert_weights``; radixark/miles
    miles/backends/megatron_utils/update_weight/update_weight_from_distributed/mixin.py l.98-158
    @748935dc7155d4990d02d62f6061c50ef8054051); each engine rank receives the same bytes per broadcast."""
    mib = card.rollout.weight_sync_bucket_mib
    return SYNC_BUCKET_BYTES if mib is None else float(mib) * 2**20
ENGINE = "rollout_engine"
"""Component name of the engine's memory: outside the trainer's torch allocator."""


def _hybrid_pool(em) -> dict[str, float]:
    """The KV pool of a hybrid engine as the time model admits sequences into it (``RolloutSummary``); empty for an
    engine without linear-attention state groups."""
    if not (em.linear_groups and em.attention_groups):
        return {}
    # a sequence's last attention block is half empty on average: hybrid blocks are hundreds of tokens (the attention
    # page is padded to the state's, rollout.vllm), so that waste is counted with the state
    return {"attention_kv_capacity_tokens": em.usable_blocks / em.attention_groups * em.block_size,
            "state_tokens_per_seq": (em.linear_groups / em.attention_groups + 0.5) * em.block_size}


@dataclass(frozen=True, slots=True)
class RolloutSummary:
    engine: str
    kv_bytes_per_token: float
    kv_capacity_tokens: int
    demand_tokens: int
    """KV tokens one engine instance needs for its share of the step's sequences."""
    needed_concurrency: int
    max_concurrency: int
    preempts: bool
    reason: str
    engine_fits: bool
    engine_device_bytes: float
    engine_instances: int
    budget_bytes: float = 0.0
    kv_cache_bytes: float = 0.0
    engine_weights_bytes: float = 0.0
    attention_kv_capacity_tokens: float = 0.0
    """Hybrid (linear-attention) engine: attention tokens per attention layer the pool's usable blocks hold,
    ``usable_blocks / attention_groups x block_size`` (0: use ``kv_capacity_tokens``)."""
    state_tokens_per_seq: float = 0.0
    """Hybrid engine: the state blocks a running sequence holds whatever its length, in those attention tokens
    (``linear_groups / attention_groups x block_size``; ``rollout.vllm.EngineMemory.blocks_per_seq``), and half a
    block for its partly filled last attention block."""


@dataclass(frozen=True, slots=True)
class GroupPhases:
    name: str
    gpus: int
    peaks: tuple[PhasePeak, ...]


def frozen_weights(spec: ModelSpec, card: RunCard, *, divisor: int, dtype: Dtype | None = None) -> float:
    """A frozen copy of ``spec`` in the card's weight dtype (``dtype`` where the card states the role model's own:
    ``roles.reward_model_dtype``), sharded by ``divisor``."""
    w = dtype or (card.weights_dtype if card.weights_dtype is not Dtype.FP32 else Dtype.BF16)
    return weight_bytes(spec, weights=w, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base / divisor


def reference_swap_state_bytes(spec: ModelSpec, card: RunCard, *, divisor: float) -> float:
    """Bytes of the policy's state dict on one rank, which ``roles.reference: host_swap`` copies out and back,
    and of the reference's pinned host copy (the same tensors; ``trainfit.compute.reference_swap``): Megatron's
    ``Float16Module`` parameters in bf16 (the fp32 main copy belongs to the optimizer), the rank's TP/PP/EP shard
    (``divisor``, as a frozen copy is laid out); NeMo RL's DTensor worker builds the model in fp32
    (``dtensor_policy_worker.py`` line 221 @9dbd9adc95a10f5946cceb36e1d5b31e2429e470: ``torch_dtype=torch.float32``;
    FSDP2's ``MixedPrecisionPolicy(param_dtype=...)`` casts for compute only), so under FSDP the local shard in the
    card's weight dtype, fp32 included. LoRA adapters (a small share) are left out."""
    if card.parallel.strategy in FSDP_STRATEGIES and card.weights_dtype is Dtype.FP32:
        return weight_bytes(spec, weights=Dtype.FP32, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base / divisor
    return frozen_weights(spec, card, divisor=divisor)


def forward_only_transient(
    spec: ModelSpec,
    *,
    sequences: int,
    seq_len: int,
    chunked: bool,
    gathered_units: float,
    gathered_at_head: float | None = None,
    divides_by_temperature: bool = True,
    kernel: str = "liger",
    temperature_copy: bool = False,
    entropy: bool = False,
    logit_positions: int | None = None,
) -> float:
    """Peak transient of a no-grad forward over ``sequences`` x ``seq_len`` tokens and its log-probs.

    ``logit_positions``: the positions per sequence whose logits the pass computes (TRL's GRPO asks for the
    completion's ``logits_to_keep + 1`` only: ``methods.roles.logit_positions``); None: all ``seq_len``. The layers
    run over every token either way; the log-prob terms below read ``s`` as these positions.

    Mechanism (transformers 5 decoders under ``torch.no_grad()``, measured with the fake-tensor
    trace ``trainfit.trace.rl_passes``; ``tests/trace/test_grid_rl.py`` checks it within 2%). With
    ``b`` sequences, ``s`` tokens, ``T = b·s``, hidden ``h``, MLP width ``I``, vocabulary ``V``:

    inside a decoder layer (>= 1), at the MLP
        the embedding output (``inputs_embeds``, held by the model's forward for the whole loop),
        the layer's input (held by the loop), the residual after attention and the normed input:
        ``4·T·h`` bf16; SwiGLU's ``act(gate)``, ``up`` and their product: ``3·T·I`` bf16; plus the
        rotary ``cos``/``sin`` of the pass (``2·s·head_dim`` bf16). With q/k-norm (Qwen3) the
        attention may be wider: the q projection (bf16) and RMSNorm's fp32 upcast and fp32 product
        over the q heads, with three ``T·h`` tensors alive.
    log-probs, TRL (GRPO ``_get_per_token_logps``: ``logits = model(...).logits``;
    ``logits = logits[:, :-1, :]``; ``logits = logits / self.temperature``; then
    ``selective_log_softmax``, trl/trainer/utils.py:538-601, row-wise ``log_softmax`` for bf16)
        the bf16 logits of every position (``2·b·s·V``) are alive while the division writes its
        bf16 copy (``2·b·(s-1)·V``); the first die when ``logits`` is rebound. The row loop then
        holds the divided logits and two rows' bf16 log-softmax (``row_logps`` of the previous row
        is still bound while the next is written): ``2·b·(s-1)·V + min(b, 2)·2·(s-1)·V``.
        Without a copying division (DPO: no temperature; PPO divides in place) the full logits
        stay alive through the row loop: ``2·b·s·V + min(b, 2)·2·(s-1)·V``.
        A fused/chunked log-prob (``loss.chunked``) removes them.
    log-probs, verl with flash-attn's kernel (``loss.kernel: flash_attn``; ``memory.logits`` module doc)
        the bf16 logits of the packed row, divided in place, and the kernel's three fp32 per-row outputs:
        ``2·b·s·V + 12·b·s`` (``memory.logits.verl_logprob_pass_bytes``); ``temperature_copy`` (verl's engine
        workers from 51504d84): the undivided logits beside the divided copy, ``4·b·s·V + 12·b·s``.
    entropy over the logits (verl's old-policy pass, ``loss.logprob_entropy``: ``entropy``): torch.compile'd
        ``entropy_from_logits`` reads the logits and, on a GPU, writes per-row buffers only
        (``memory.logits.verl_compiled_entropy_bytes``: Inductor realizes a logits-shaped fp32 ``exp`` buffer only for a
        CPU tensor), alive with the logits before the log-probs: ``+ 18·T`` on the flash-attn path, at least
        ``2·T·V + 18·T`` on the others.
    scalar head (critic values, reward scores: TRL ``get_reward``)
        ``score(last_hidden_state)``: ``T·h`` + ``T·N`` bf16, below the layer's transient.

    Returns the largest of these plus the gathered FSDP/ZeRO-3 units: ``gathered_units`` beside the layer's
    transient and ``gathered_at_head`` (None: ``gathered_units``) beside the head's (a ZeRO-3 engine's coordinator
    holds more mid-model, its prefetch running ahead, than while the head runs: ``pass_gathered``).
    """
    b, s = sequences, seq_len
    tokens = b * s
    h = spec.hidden_size
    width = spec.intermediate_size if spec.moe is None else spec.moe.experts_per_token * spec.moe.expert_intermediate_size
    rotary = 2 * s * spec.head_dim * 2
    mlp = tokens * (4 * h + 3 * width) * 2
    qk = tokens * (3 * h * 2 + spec.q_dim * 2 + 2 * spec.q_dim * 4 + 2 * spec.num_attention_heads * 4) if spec.qk_norm else 0
    layer = max(mlp, qk) + rotary
    # the log-prob terms over the positions whose logits are computed (logits_to_keep), the layers over all
    s = seq_len if logit_positions is None else max(1, min(seq_len, logit_positions))
    if spec.head_outputs is not None:
        head = tokens * (h + spec.head_outputs) * 2
    elif chunked and kernel == "trl":
        # TRL's fused lm_head under no_grad: the scored rows' copy, the [4096 x 32768] tile, fp32 stats
        head = trl_fused_logprob_bytes(tokens=b * (s - 1), hidden_size=h, vocab_size=spec.vocab_size).forward_peak
    elif chunked:
        head = 0.0
    elif kernel == "flash_attn":
        head = verl_logprob_pass_bytes(tokens=tokens, vocab_size=spec.vocab_size, temperature_copy=temperature_copy)
    else:
        v = spec.vocab_size
        full, shifted, rows = 2.0 * b * s * v, 2.0 * b * (s - 1) * v, min(b, 2) * 2.0 * (s - 1) * v
        head = max(full + shifted, shifted + rows) if divides_by_temperature else full + rows
    if entropy and spec.head_outputs is None and not chunked:
        ent = verl_compiled_entropy_bytes(tokens=tokens)
        head = head + ent if kernel == "flash_attn" else max(head, 2.0 * tokens * spec.vocab_size + ent)
    at_head = gathered_units if gathered_at_head is None else gathered_at_head
    return max(layer + gathered_units, head + at_head)


TRAINER_OFFLOAD_PRESETS = ("nemo-rl", "skyrl")
"""Frameworks that offload the trainer's state around a colocated engine whatever the config: NeMo RL's
``grpo.py`` refit calls ``policy.offload_before_refit()`` (optimizer state to CPU) and, after the refit,
``policy.offload_after_refit()`` (weights to CPU) before generating; ``prepare_for_lp_inference`` moves the
gradient buffer to CPU (NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470
nemo_rl/models/policy/workers/megatron_policy_worker.py lines 1403-1421 (grads and optimizer to cpu) and
1435-1439 (``move_model(self.model, "cpu")``), nemo_rl/algorithms/grpo.py lines 1005, 1078; grpo_math_1B.yaml @7ea279abfbeb698b092856d0dab61e7cf39bc909
line 139: "colocated generation will always offload optimizer ... before refit").

SkyRL under ``trainer.placement.colocate_all`` (its default): ``WorkerDispatch._prepare_for_weight_sync`` offloads the
optimizer before the sync and ``_finish_weight_sync`` the weights after it, whatever the config; ``forward`` brings
the weights back, ``forward_backward`` the optimizer (NovaSky-AI/SkyRL
skyrl/backends/skyrl_train/workers/worker_dispatch.py lines 124-130, 140-170, 590-604
@2e9c89afceb3ef7963748224373ad88882322c99)."""

OPTIMIZER_SIDE = ("master_weights", "optimizer_states", "paged_optimizer_states")
"""Components ``rollout.trainer_offload: optimizer`` moves to the host (verl ``offload_megatron_optimizer`` /
``offload_fsdp_optimizer``: the optimizer's fp32 main parameters and states)."""
PARAM_SIDE = ("weights", "adapter_weights")
"""Components ``params_and_optimizer`` moves as well (verl ``offload_megatron_model_to_cpu`` /
``offload_fsdp_model_to_cpu``; FSDP's gradients are freed after the update anyway, and Megatron-Core's gradient buffer
is planned per phase by ``grad_buffer_held``)."""


ENGINE_FIRST_PRESETS = ("nemo-rl", "openrlhf", "skyrl")
"""Frameworks that start the colocated engine before they build the trainer, so the engine finds the GPU free of
trainer state at start-up (``trainer_bytes_at_engine_start`` 0):

* NeMo RL: colocated, ``init_generation_fn()`` runs before ``init_policy()`` ("Initialize generation engine first
  (clean GPU memory), then policy", NVIDIA-NeMo/RL @7ea279abfbeb698b092856d0dab61e7cf39bc909
  nemo_rl/algorithms/grpo.py lines 1257-1270);
* OpenRLHF: ``create_vllm_engines(...)`` (openrlhf/cli/train_ppo_ray.py line 66, which waits for the engines through
  ``batch_vllm_engine_call(vllm_engines, "sleep")`` under sleep mode, openrlhf/trainer/ray/vllm_engine.py lines
  310-311) before ``actor_model.async_init_model_from_pretrained`` (train_ppo_ray.py line 173), OpenRLHF/OpenRLHF
  @3c3be6234e0cb353e76bb8019947db9dfe99fca7;
* SkyRL: ``_setup_trainer`` builds the inference engine client (skyrl/train/entrypoints/main_base.py line 281) before
  ``trainer.build_models(...)`` (line 313), NovaSky-AI/SkyRL @a9564572eb8e91076be43c1bd5e4615e3de17265.

Not verl: ``init_model`` builds the actor (``_build_model_optimizer``), offloads it under ``param_offload``, then calls
``_build_rollout``; the reference comes after (volcengine/verl @b178a3cd56f58b2d502255daba591e92833930a7
verl/workers/fsdp_workers.py lines 790, 811-818, 826, 828). Not TRL: ``GRPOTrainer.__init__`` hands the model to ``Trainer.__init__`` (trl/trainer/grpo_trainer.py
line 936) before it builds ``VLLMGeneration`` (line 1074), whose colocated mode creates the ``LLM``
(trl/generation/vllm_generation.py line 351), huggingface/trl @f2cd57710ae345ea6428ae95363267fcf38a3dc8."""


VERL_VLLM_OWN_PROCESS_SINCE = (0, 7, 1)
"""The first verl release whose colocated vLLM engine runs in processes of its own: ``vLLMHttpServer`` builds it with
``"distributed_executor_backend": "mp"`` and a ``vLLMColocateWorkerExtension`` that receives the trainer's weights
over IPC ("implement vLLM colocated training-inference rollout with process separation", verl-project/verl #4280,
@e9405d70b77d56a23e72bb2e40a17b906856e913, 2026-01-24, first tagged in v0.7.1; the same at v0.9.0
@483b8a009ba3a97563edee3a19887e4862b8094a verl/workers/rollout/vllm_rollout/vllm_async_server.py l.292). Before it
the engine's workers were the hybrid trainer workers themselves (``ExternalZeroMQDistributedExecutor``,
vllm_async_server.py l.92, l.415-416 @f31df34471584cc4f02432873280c4963841eb81; earlier the SPMD rollout's
``external_launcher``)."""


VERL_OWN_PROCESS_MIN_VLLM = (0, 8, 5)
"""verl's process-separated vLLM server (``VERL_VLLM_OWN_PROCESS_SINCE``) builds ``vllm.v1.engine.async_llm.AsyncLLM``
(vllm_async_server.py l.39, l.389 @e9405d70b77d56a23e72bb2e40a17b906856e913) and requires ``vllm>=0.8.5,<=0.12.0``
(setup.py l.52, same commit): a verl card on vLLM's V0 engine (``rollout.vllm_engine``) or a ``software.vllm`` pin
below 0.8.5 ran an older verl, its engine in the trainer workers."""


def engine_in_trainer_process(card: RunCard) -> tuple[bool, str]:
    """Whether the colocated serving engine runs inside the trainer's process (one CUDA context per GPU for both) or
    in processes of its own (a second context on each GPU, about 0.5 GiB: ``rollout.vllm.CUDA_CONTEXT_BYTES``), and
    why. Same process: TRL's colocate mode (``LLM(..., distributed_executor_backend="external_launcher")``,
    huggingface/trl trl/generation/vllm_generation.py l.351-365 @f2cd57710ae345ea6428ae95363267fcf38a3dc8), Unsloth
    (the training model is built on the in-process engine's tensors, ``methods.unsloth`` 1.), verl's vLLM before
    ``VERL_VLLM_OWN_PROCESS_SINCE`` (a ``software.verl`` pin), and a card without a preset (TRL's shape). Own
    processes: any SGLang engine (``Engine`` launches its schedulers with ``mp.Process``, sglang 0.5.8 wheel
    sglang/srt/entrypoints/engine.py l.903-904, which verl calls through ``_launch_subprocesses``,
    verl/workers/rollout/sglang_rollout/async_sglang_server.py l.330 @b178a3cd56f58b2d502255daba591e92833930a7),
    verl's vLLM from ``VERL_VLLM_OWN_PROCESS_SINCE``, OpenRLHF (``@ray.remote class RolloutRayActor``,
    openrlhf/trainer/ray/vllm_engine.py l.33-34 @3c3be6234e0cb353e76bb8019947db9dfe99fca7), NeMo RL (``@ray.remote``
    ``VllmGenerationWorker``, nemo_rl/models/generation/vllm/vllm_worker.py l.1359-1362
    @7ea279abfbeb698b092856d0dab61e7cf39bc909) and SkyRL (its inference servers are Ray actors,
    skyrl/backends/skyrl_train/inference_servers/server_group.py l.147 @a9564572eb8e91076be43c1bd5e4615e3de17265)."""
    if card.rollout.engine is RolloutEngine.SGLANG:
        return False, "SGLang runs its schedulers in subprocesses"
    preset = card.preset
    if preset in ("openrlhf", "nemo-rl", "skyrl"):
        return False, f"{preset} runs its engines as Ray actors"
    if preset == "verl":
        from trainfit.plan.rl_generation import sglang_release  # late: plan imports methods; parses any x.y.z pin

        pin = sglang_release((card.software.model_extra or {}).get("verl"))
        if pin is not None and pin < VERL_VLLM_OWN_PROCESS_SINCE:
            return True, f"verl {'.'.join(map(str, pin))} runs vLLM in its trainer workers"
        vllm = sglang_release(card.software.vllm)
        if card.rollout.vllm_engine is not VllmEngineGeneration.V1 or (
                vllm is not None and vllm < VERL_OWN_PROCESS_MIN_VLLM):
            # the process-separated server is vLLM V1's AsyncLLM on vllm >= 0.8.5 (VERL_OWN_PROCESS_MIN_VLLM): a V0
            # engine or an older vLLM is the verl before it, whose engine ran in the trainer workers
            return True, "verl's V0-engine / pre-0.8.5 vLLM rollout runs in its trainer workers"
        return False, "verl's vLLM server runs its own worker processes since v0.7.1"
    return True, "the engine runs in the trainer's process" + (f" ({preset})" if preset else "")


def trainer_bytes_at_engine_start(card: RunCard, actor: StepTerms) -> float:
    """Bytes per GPU the trainer holds when a colocated serving engine starts: the actor's weight shard, adapter and
    fp32 master copy, less what ``rollout.trainer_offload`` has moved to the host by then (verl offloads before
    ``_build_rollout``, ``ENGINE_FIRST_PRESETS``); never the optimizer states, which torch creates at the first step.
    An engine in processes of its own (``engine_in_trainer_process``) finds the trainer process's CUDA context there
    too. 0 for a split placement (the engine has its own GPUs), for frameworks that start the engine first
    (``ENGINE_FIRST_PRESETS``) and for Unsloth (the engine's weights are the trainer's, ``methods.unsloth``).
    ``rollout.vllm.engine_memory`` takes it as ``other_used_bytes``: SGLang's pool shrinks by ``mem_fraction_static
    x`` it, vLLM refuses to start when the free memory is below its budget."""
    if card.rollout.placement is not Placement.COLOCATE or card.rollout.engine not in SERVING_ENGINES:
        return 0.0
    if engine_shares_trainer_weights(card.preset) or card.preset in ENGINE_FIRST_PRESETS:
        return 0.0
    away = offloaded_components(trainer_offload_of(card)[0])
    held = {"weights": actor.weights, "adapter_weights": actor.adapter_weights, "master_weights": actor.master_weights}
    # an engine in its own process also finds the trainer process's CUDA context on the GPU
    context = 0.0 if engine_in_trainer_process(card)[0] else float(TRAINER_CUDA_CONTEXT_BYTES)
    return float(sum(v for k, v in held.items() if k not in away)) + context


def trainer_offload_of(card: RunCard) -> tuple[Offload, str]:
    """The trainer state moved to host RAM around a colocated engine, and why (``rollout.trainer_offload``;
    unset: ``params_and_optimizer`` under the NeMo RL preset, else none). A split placement keeps the
    engine on other GPUs: nothing needs to move, none."""
    ro = card.rollout
    if ro.placement is not Placement.COLOCATE:
        return Offload.NONE, "split placement: the engine has its own GPUs"
    if ro.trainer_offload is not None:
        return ro.trainer_offload, "rollout.trainer_offload as set"
    if card.preset in TRAINER_OFFLOAD_PRESETS:
        return Offload.PARAMS_AND_OPTIMIZER, (f"{card.preset} preset: offload_before_refit / offload_after_refit"
                                              " around the colocated engine")
    return Offload.NONE, "rollout.trainer_offload unset"


def offloaded_components(mode: Offload, *, sending_weights: bool = False) -> tuple[str, ...]:
    """Trainer components off the GPU under ``mode``; ``sending_weights``: the weight-sync phase, where verl
    (``rollout_mode``: ``load_megatron_model_to_gpu(..., load_grad=False)`` before ``update_weights``, volcengine/verl
    @b178a3cd56f58b2d502255daba591e92833930a7 verl/workers/megatron_workers.py lines 681-682, offloaded again at
    731-732; fsdp_workers.py lines 683, 721) and NeMo RL (``offload_after_refit`` only after the refit) have the
    weights back."""
    if mode is Offload.NONE:
        return ()
    if mode is Offload.OPTIMIZER or sending_weights:
        return OPTIMIZER_SIDE
    return OPTIMIZER_SIDE + PARAM_SIDE


LOGPROB_OPTIMIZER_AWAY_PRESETS = ("verl", "nemo-rl", "skyrl")
"""Frameworks whose optimizer state stays in host RAM through the frozen passes under trainer offload, back on the
GPU only for the update:

* verl: ``compute_log_prob`` loads only the actor's parameters (``load_fsdp_model_to_gpu`` /
  ``load_megatron_model_to_gpu(..., load_grad=False)``), ``update_actor`` alone loads the optimizer
  (``load_fsdp_optimizer`` / ``load_megatron_optimizer``) and offloads it again after the update; the standalone
  reference (``compute_ref_log_prob``), critic (``compute_values``) and reward workers never load the actor's state,
  so under ``param_offload`` its parameters stay in host RAM through their passes too (volcengine/verl
  @94d681dce4911c3ad6abb011a2d03c62d318868d verl/workers/fsdp_workers.py lines 671-711 (update_actor), 757-797
  (compute_log_prob), 801-833 (compute_ref_log_prob: with LoRA it calls compute_log_prob, the actor with its
  adapter disabled); the same in verl/workers/megatron_workers.py @503ea75f533f715cf1667551bd375ec9b1e0d5fc lines
  501-537, 582-625 and @df340d703292538fafc1439b4aa9f1f226ccadc5 lines 743-781, 839-905; fsdp_workers.py
  ``compute_log_prob`` at v0.3.0.post1 lines 523-551 and v0.4.0 lines 640-678 alike). verl's engine workers do the
  same: an eval-mode context moves the model only (``BaseEngineCtx._context_switch``: ``self.engine.to(device,
  model=..., optimizer=False, grad=False)`` for ``mode == "eval"``, verl/workers/engine/base.py lines 242-255
  @b178a3cd56f58b2d502255daba591e92833930a7);
* NeMo RL, colocated: ``offload_before_refit`` moves the optimizer to the CPU before the refit,
  ``prepare_for_lp_inference`` brings back the parameters only (the Megatron worker also moves the gradient buffers
  to the CPU), and ``prepare_for_training`` reloads the optimizer "if offload_optimizer_for_logprob or
  is_generation_colocated" after both log-prob passes (NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470
  nemo_rl/algorithms/grpo.py lines 1518-1550; nemo_rl/models/policy/workers/megatron_policy_worker.py lines
  1360-1397, dtensor_policy_worker_v2.py lines 1399-1434; v0.3.0 and v0.4.0 ``prepare_for_lp_inference`` calls
  ``offload_before_refit`` itself). Its reference pass runs on the policy's own storage (``roles.reference:
  host_swap``), so the weights are on the GPU for both passes;
* SkyRL, colocated: ``WorkerDispatch.forward`` backloads the model only (``_ensure_on_gpu(model,
  need_optimizer=False)``), ``forward_backward`` the optimizer as well; the optimizer went to the host before the
  previous sync (``_prepare_for_weight_sync``). A pass of another model (the reference, the critic) first offloads
  the policy's weights and optimizer both (``_ensure_on_gpu`` offloads the rest of the colocation group,
  ``offload_to_cpu()`` with its defaults), as verl's standalone reference leaves them on the host (NovaSky-AI/SkyRL
  @2e9c89afceb3ef7963748224373ad88882322c99 skyrl/backends/skyrl_train/workers/worker_dispatch.py lines 140-170,
  201-229, 311-351, 590-604).

Not miles: its colocated actor's ``train()`` calls ``wake_up()``, which resumes every torch_memory_saver region
(optimizer included) before ``train_actor`` runs the log-prob passes (radixark/miles
@bb6f7dbd319d519d3a333a5ae6bdeac21d8ed59a miles/backends/megatron_utils/actor.py lines 327-341, 386-397, 503-537)."""


OTHER_MODEL_PASS_POLICY_AWAY_PRESETS = ("verl", "skyrl")
"""Frameworks of ``LOGPROB_OPTIMIZER_AWAY_PRESETS`` whose passes of another model (the reference, the critic, the
reward model) run with the policy's offloaded weights still in host RAM: verl's standalone workers never load the
actor's state, SkyRL's ``_ensure_on_gpu`` offloads the rest of the colocation group first (both cited above). Not
NeMo RL: its reference runs on the policy's own storage."""


def frozen_pass_offloaded(card: RunCard, mode: Offload, *, actor_weights: bool) -> tuple[str, ...]:
    """Trainer components still in host RAM during a frozen (no-grad) pass under trainer offload ``mode``, for the
    frameworks of ``LOGPROB_OPTIMIZER_AWAY_PRESETS``: the optimizer side always; ``actor_weights`` False (a pass that
    does not run on the actor: verl's standalone reference, critic values, reward model) the parameters as well,
    where ``mode`` moved them. Other frameworks (and cards without a preset): nothing, the whole state counted."""
    if mode is Offload.NONE or card.preset not in LOGPROB_OPTIMIZER_AWAY_PRESETS:
        return ()
    if actor_weights or card.preset not in OTHER_MODEL_PASS_POLICY_AWAY_PRESETS:
        return OPTIMIZER_SIDE
    return offloaded_components(mode)


class GradBufferPhase(StrEnum):
    """The RL phases outside a role's own update, as ``grad_buffer_held`` names them: loading, generation, the log-prob
    passes on the actor (old policy, reference on its storage), passes of another model (standalone reference, critic
    values, reward), the weight sync and the other role's update."""

    LOAD = "load"
    ROLLOUT = "rollout"
    LOGPROB = "logprob"
    OTHER_PASS = "other_pass"
    WEIGHT_SYNC = "weight_sync"
    OTHER_UPDATE = "other_update"


GRAD_BUFFER_PHASES = tuple(GradBufferPhase)


def grad_buffer_held(card: RunCard, mode: Offload, *, phase: GradBufferPhase) -> bool:
    """Whether a Megatron-Core trainer's gradient buffer is on the GPU in ``phase`` (one of ``GRAD_BUFFER_PHASES``)
    of an RL step. Its own update always holds it (``plan.ranks.megatron_grad_buffer_held``: allocated when
    ``DistributedDataParallel`` wraps the model and only zeroed each iteration, ``grads_preallocated``).

    * Not Megatron-Core (``megatron_grad_buffer_held`` False): no buffer outside the update.
    * NeMo RL (``nemo-rl``): ``prepare_for_lp_inference`` frees it before the log-prob passes in every placement
      (``move_model(self.model, "cpu", move_params=False, move_grads=True)`` "get rid of grad buffers"),
      ``offload_before_refit`` before a colocated refit, and ``prepare_for_training`` re-allocates it for the update
      (NVIDIA-NeMo/RL nemo_rl/models/policy/workers/megatron_policy_worker.py l.1360-1436
      @9dbd9adc95a10f5946cceb36e1d5b31e2429e470; Megatron-Core's ``offload_to_cpu`` frees ``grad_data`` with
      ``storage().resize_(0)``, ``reload_from_cpu`` re-allocates and zeroes it, megatron/core/distributed/
      param_and_grad_buffer.py l.780-805 @2ff0f099ffc30ffd152e3e29e921a1609d00855c). So held only where nothing
      freed it since the update: in a split placement the load, the weight sync and the other role's update. In a
      colocated placement in no phase at all, the load included: ``offload_before_refit`` runs before every refit,
      the first one too, so the load is planned as the steady state after it (the buffer allocated when
      ``DistributedDataParallel`` wraps the model and held until that first refit is not planned).
    * ``rollout.trainer_offload: params_and_optimizer`` (verl ``param_offload``, SkyRL): verl's
      ``offload_megatron_model_to_cpu`` frees it (``grad_data.storage().resize_(0)``), the log-prob pass and the sync
      bring the parameters back with ``load_grad=False``, and only ``update_actor`` re-allocates it
      (volcengine/verl verl/utils/megatron_utils.py l.411-435, 447-456, verl/workers/megatron_workers.py
      ``rollout_mode`` l.681-682, ``compute_log_prob`` l.866-867 @b178a3cd56f58b2d502255daba591e92833930a7; at
      04acd09d65900521e8019adefd10308220cb7ee2
      ``generate_sequences`` still reloaded it with the parameters, l.420-421, not planned): freed outside the
      update.
    * Otherwise (no offload, or the optimizer only): nothing frees it. verl offloads the model only under
      ``param_offload`` (megatron_workers.py ``init_model`` l.319-324, ``update_actor`` l.384-411,
      ``generate_sequences`` l.420-433 @04acd09d; the critic's ``CriticWorker`` likewise, l.624-687), and
      ``offload_megatron_optimizer`` moves the optimizer state only: held in every phase."""
    from trainfit.plan.ranks import megatron_grad_buffer_held

    phase = GradBufferPhase(phase)  # ValueError naming the value for anything else
    if not megatron_grad_buffer_held(card):
        return False
    if card.preset == "nemo-rl":
        colocated = card.rollout.placement is Placement.COLOCATE
        return phase in (GradBufferPhase.LOAD, GradBufferPhase.WEIGHT_SYNC, GradBufferPhase.OTHER_UPDATE) and not colocated
    return mode is not Offload.PARAMS_AND_OPTIMIZER


def _held_grads(t: StepTerms) -> float:
    """A Megatron-Core trainer's gradient buffer: the gradients its forward already holds (``grads_preallocated``)."""
    return t.grads_total if t.grads_preallocated and not t.grad_buffer else 0.0


def _without(components: dict[str, float], names: tuple[str, ...]) -> dict[str, float]:
    return {k: (0.0 if k in names else v) for k, v in components.items()}


def _persistent(t: StepTerms) -> float:
    return t.weights + t.adapter_weights + t.master_weights + t.optimizer_states + t.ddp_buckets


def _gathered(t: StepTerms) -> float:
    return t.fsdp_layer_units + t.fsdp_root_unit


def _zero3_gathers(t: StepTerms) -> bool:
    """Whether the trained engine is a ZeRO-3 one that gathers its parameters (``plan.terms._deepspeed_terms`` sets
    the FSDP unit fields to 0 and keeps its gathered bytes in ``gathered_forward`` / ``gathered_backward``)."""
    return bool(t.gathered_forward or t.gathered_backward)


def pass_gathered(card: RunCard, t: StepTerms, spec: ModelSpec, sharding, *,  # noqa: ANN001
                  dtype: Dtype | None = None, own_engine: bool = False,
                  actor_units: bool = True) -> dict[str, float]:
    """``forward_only_transient``'s gathered keywords for a no-grad pass of ``spec`` (the reference, the reward
    model, the actor's own old-policy pass) on the trained engine's GPUs: under ZeRO-3 the pass's own engine
    gathers its own modules (``plan.terms.frozen_pass_gathered_bytes``: its most at once beside the layers, what it
    holds at the head beside the logits; ``t``'s FSDP unit fields are 0 there), elsewhere the trained model's units
    (``_gathered``). ``own_engine``: the pass runs on the trained engine (old policy, a policy with its adapters
    off, NeMo RL's host swap). ``actor_units`` False: ``spec`` is another architecture (the reward model), whose
    own FSDP units (its layer units and its root unit, embedding and one-output score head, at the same shard
    divisor; ``plan.terms.frozen_pass_gathered_bytes``) the pass gathers, as the critic's values pass gathers the
    critic's (``_gathered(critic)``). ``sharding`` None (a model-parallel layout's worst rank): ``_gathered``."""
    if sharding is None or not (_zero3_gathers(t) or not actor_units):
        return {"gathered_units": _gathered(t)}
    from trainfit.memory.weights import total_params
    from trainfit.plan.terms import frozen_pass_gathered_bytes

    bpp = frozen_weights(spec, card, divisor=1, dtype=dtype) / total_params(spec)
    peak, at_head = frozen_pass_gathered_bytes(card, spec, sharding, bytes_per_param=bpp, own_engine=own_engine)
    return {"gathered_units": peak, "gathered_at_head": at_head}


VERL_TOTAL_FRACTION_SINCE_VLLM = (0, 7, 0)
"""The first vLLM release verl runs with vLLM's own ``gpu_memory_utilization`` (a share of the total): before it,
verl's patched 0.5.4 / 0.6.3 worker takes a share of the memory remaining after the profile run
(``rollout.vllm.EngineConfig.remaining_fraction``; verl docs/examples/config.rst l.312-315 @72429f21b7e7d34993e8c447e46578123b27edb4:
"For vLLM v0.5.4 and v0.6.3: The proportion of the **remaining** GPU memory ... For vLLM v0.7.0 and later: The
fraction of **total** GPU memory")."""


def verl_remaining_fraction(card: RunCard) -> bool:
    """True for the verl preset on vLLM with a ``software.vllm`` release pin before ``VERL_TOTAL_FRACTION_SINCE_VLLM``
    (0.5.4, 0.6.3): its KV cache is ``gpu_memory_utilization x`` the memory free after the trainer, the engine's
    weights and the profile run.

    No step-time row moves with it (benchmarks/step_times.py, 2026-12-05): none pins verl with a vLLM before 0.7. The
    candidate is rllm-issue29-grpo-deepscaler-1.5b-8k-a100-8g (agentica's verl fork of February 2025 on vLLM's V0
    engine, gpu_memory_utilization 0.85), whose entry cites no vLLM release; it stays planned at vLLM's share of the
    total until one is cited."""
    if card.preset != "verl" or card.rollout.engine is not RolloutEngine.VLLM:
        return False
    from trainfit.plan.rl_generation import sglang_release  # late: plan imports methods; parses any x.y.z pin

    pin = sglang_release(card.software.vllm)
    return pin is not None and pin < VERL_TOTAL_FRACTION_SINCE_VLLM


def engine_for(card: RunCard, spec: ModelSpec, *, gpu_memory: float,
               other_used_bytes: float = 0.0) -> tuple[EngineMemory, RolloutDemand, int]:
    """The engine's memory on one of its GPUs, the rollout demand of one instance and the instance count;
    ``other_used_bytes``: what else holds the GPU when the engine starts (``trainer_bytes_at_engine_start``)."""
    ro = card.rollout
    heads = spec.num_attention_heads
    if heads % ro.tensor_parallel:
        from trainfit.errors import CardError

        raise CardError(
            f"rollout.tensor_parallel: {ro.tensor_parallel} does not divide the {heads} attention heads of {spec.name}"
        )
    w = Dtype.BF16 if card.weights_dtype in (Dtype.FP32, Dtype.NF4) else card.weights_dtype
    if engine_shares_trainer_weights(card.preset) and card.weights_dtype is not Dtype.FP32:
        # Unsloth's engine holds the one copy the trainer is built on, at the trainer's storage precision (bitsandbytes
        # 4-bit under qlora: methods.unsloth 1.), so its KV cache is sized after those bytes
        w = card.weights_dtype
    cfg = EngineConfig(
        tp=ro.tensor_parallel,
        max_model_len=ro.prompt_len + ro.response_len,
        gpu_memory_utilization=ro.gpu_memory_utilization,
        max_num_seqs=ro.max_num_seqs,
        max_num_batched_tokens=max(ro.max_num_batched_tokens, ro.prompt_len + ro.response_len)
        if ro.max_num_batched_tokens < ro.prompt_len
        else ro.max_num_batched_tokens,
        weights=w,
        sleep_level=ro.sleep_level,
        static_fraction=ro.engine is RolloutEngine.SGLANG,  # mem_fraction_static (rollout.vllm.EngineConfig)
        remaining_fraction=verl_remaining_fraction(card),
    )
    _, roll = group_sizes(card)
    instances = max(1, roll // ro.tensor_parallel)
    # one generate call's prompts at a time (rollout.generation_calls: TRL before 0.17 hands the engine one
    # gradient-accumulation micro-batch's prompts per llm.generate call, huggingface/trl grpo_trainer.py compute_loss
    # l.370-400 @29de6eec7ba9b3923e41012e4984e9e352c9ea54)
    per_call = -(-_generated_prompts(card) // ro.generation_calls)
    per_instance = max(1, -(-per_call // instances))
    demand = RolloutDemand(
        prompts_per_step=per_instance,
        generations_per_prompt=ro.num_generations,
        prompt_len=ro.prompt_len,
        completion_len=ro.response_len,
    )
    from trainfit.rollout.quantization import card_engine_rank_bytes

    rank = card_engine_rank_bytes(card, spec)
    if slots := engine_adapter_slot_bytes(card, spec):
        # vLLM's adapter slots are allocated with the model (memory.engine_lora): the KV cache is sized after both
        from trainfit.rollout.vllm import weights_per_gpu_bytes

        rank = (weights_per_gpu_bytes(spec, tp=cfg.tp, weights=cfg.weights, compute=cfg.dtype)
                if rank is None else rank) + slots
    return _engine_memory(spec, gpu_memory, cfg, rank, other_used_bytes), demand, instances


def serves_adapter(card: RunCard) -> bool:
    """The engine generates through the actor's LoRA adapter unmerged (``plan.rl_generation.engine_serves_adapter``)."""
    from trainfit.plan.rl_generation import engine_serves_adapter  # late: plan imports methods

    return engine_serves_adapter(card)


def engine_adapter_slot_bytes(card: RunCard, spec: ModelSpec) -> float:
    """Bytes of the adapter slots each engine rank allocates when it serves the actor's adapter (verl: one slot of
    the actor's rank, ``memory.engine_lora.VERL_ENGINE_MAX_LORAS``; ``engine_lora_slot_bytes``); 0 otherwise."""
    if not serves_adapter(card):
        return 0.0
    from trainfit.memory.engine_lora import VERL_ENGINE_MAX_LORAS, engine_lora_slot_bytes

    return engine_lora_slot_bytes(spec, max_lora_rank=card.lora.rank, max_loras=VERL_ENGINE_MAX_LORAS,
                                  tp=card.rollout.tensor_parallel)


def adapter_sync_spike(card: RunCard, spec: ModelSpec) -> float | None:
    """Bytes a trainer rank holds beyond its shards while verl collects the adapter it hands the engine
    (``memory.engine_lora.adapter_summon_peak_bytes``, in the trainer's dtype: FSDP1 unshards one decoder layer's
    unit under ``rollout.layered_summon``, else the whole actor; FSDP2 gathers the adapter only; an unsharded actor
    nothing; ``plan.rl_generation.adapter_collect_gathers``); None when the engine does not serve the adapter (the
    weights are sent merged, ``_sync_spike``)."""
    if not serves_adapter(card):
        return None
    from trainfit.memory.engine_lora import adapter_summon_peak_bytes
    from trainfit.memory.lora import lora_trainable_params
    from trainfit.memory.params import param_breakdown
    from trainfit.plan.resolve import trainable_spec  # late: plan imports methods
    from trainfit.plan.rl_generation import adapter_collect_gathers
    from trainfit.units import BYTES_PER_DTYPE

    pb = param_breakdown(spec)
    scale = count_scale(spec)
    base_units, sharded = adapter_collect_gathers(card)
    return adapter_summon_peak_bytes(
        largest_layer_params=pb.largest_layer * scale, decoder_params=sum(pb.per_layer) * scale,
        adapter_params=lora_trainable_params(spec, trainable_spec(card).lora), num_layers=spec.num_layers,
        trainer_bytes_per_param=BYTES_PER_DTYPE[card.weights_dtype.value], layered=card.rollout.layered_summon,
        summons_base_units=base_units, adapter_sharded=sharded)


def _generated_prompts(card: RunCard) -> int:
    """The prompts the engine generates per step, as the generation time counts them (``plan.rl_common.
    generated_prompts``): the engine's sequences in flight, the hf engine's KV cache and the Hybrid Engine's batches
    follow them; the trainer's passes keep ``prompts_per_step``."""
    from trainfit.plan.rl_common import generated_prompts  # late: plan imports methods

    return generated_prompts(card)


@lru_cache(maxsize=4096)
def _engine_memory(spec: ModelSpec, gpu_memory: float, cfg: EngineConfig,
                   rank_weights_bytes: float | None = None, other_used_bytes: float = 0.0) -> EngineMemory:
    return engine_memory(spec, gpu_memory_bytes=gpu_memory, engine=cfg, rank_weights_bytes=rank_weights_bytes,
                         other_used_bytes=other_used_bytes)


def _hf_generation(spec: ModelSpec, card: RunCard, actor: StepTerms, train_gpus: int) -> float:
    """transformers generate on the trainer: gathered weights + the larger of the prefill (the prompts' KV cache and
    one decoder layer's activations over the prompt tokens) and the end of the decode (the whole KV cache and the
    last-token logits), the cache at the compute dtype (``memory.hf_prefill``). The cache holds one generate call's
    sequences: with ``rollout.generation_calls`` each call is one gradient-accumulation micro-batch (TRL before 0.17
    calls ``unwrapped_model.generate`` on the micro-batch's own prompts, huggingface/trl trl/trainer/grpo_trainer.py
    compute_loss l.419-424 @29de6eec7ba9b3923e41012e4984e9e352c9ea54), and the cache of one call is released before
    the next. An MoE model's prefill activations (routed experts) are not modelled: its KV cache and logits only."""
    from trainfit.memory.hf_prefill import hf_generate_peak_bytes, hf_prefill_activation_bytes_per_token
    from trainfit.rollout.vllm import kv_bytes_per_token

    ro = card.rollout
    seqs = -(-_generated_prompts(card) * ro.num_generations // (train_gpus * ro.generation_calls))
    gathered = actor.weights * (train_gpus - 1) if actor.fsdp_layer_units or actor.fsdp_all_gathered else 0.0
    dtype_bytes = 4 if card.precision.compute is ComputeDtype.FP32 else 2
    act = 0.0 if spec.moe is not None else hf_prefill_activation_bytes_per_token(
        num_layers=spec.num_layers, hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
        head_dim=spec.head_dim, dtype_bytes=dtype_bytes)
    return gathered + hf_generate_peak_bytes(
        sequences=seqs, prefill_tokens=ro.prompt_len, total_tokens=ro.prompt_len + ro.response_len,
        kv_bytes_per_token=kv_bytes_per_token(spec, tp=1, dtype_bytes=dtype_bytes), activation_bytes_per_token=act,
        vocab_size=spec.vocab_size)


def hybrid_engine_memory_of(spec: ModelSpec, card: RunCard, train_gpus: int) -> HybridEngineMemory:
    """DeepSpeed's Hybrid Engine on the trainer (``memory.hybrid_engine``): static batches of ``max_num_seqs / tp``
    prompts per GPU (``compute.hybrid_engine``), the actor's ZeRO-3 partitions gathered for every call."""
    ro = card.rollout
    whole = weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
    embed = spec.vocab_size * spec.hidden_size * (1 if spec.tie_word_embeddings else 2)
    other = min(whole, 2.0 * (embed + spec.learned_positions * spec.hidden_size))
    per_gpu = min(-(-_generated_prompts(card) * ro.num_generations // train_gpus), max(1, ro.max_num_seqs // ro.tensor_parallel))
    return hybrid_engine_memory(
        hidden_size=spec.hidden_size, num_heads=spec.num_attention_heads, head_dim=spec.head_dim,
        num_layers=spec.num_layers, vocab_size=spec.vocab_size, layer_weight_bytes=whole - other,
        other_weight_bytes=other, largest_matrix_elems=spec.hidden_size * max(spec.hidden_size, spec.intermediate_size),
        per_gpu_prompts=per_gpu, prompt_len_tokens=ro.prompt_len, inference_tp=ro.tensor_parallel,
        zero3=card.parallel.strategy is Strategy.ZERO3, lora=card.scope is not Scope.FULL,
        max_out_tokens=max(HE_MAX_OUT_TOKENS, ro.prompt_len + ro.response_len),
        gather_partition_layers=ro.tp_gather_partition_size,
    )


def logprob_token_budget(card: RunCard) -> int | None:
    """Tokens per GPU of a log-prob micro-batch under dynamic batching: ``rollout.logprob_max_tokens_per_micro_batch``,
    else the update's ``max_tokens_per_micro_batch`` (verl's ``log_prob_max_token_len_per_gpu`` defaults to
    ``${actor_rollout_ref.actor.ppo_max_token_len_per_gpu}`` and ``log_prob_use_dynamic_bsz`` to the actor's
    ``use_dynamic_bsz``, verl/trainer/config/ppo_trainer.yaml l.81-82 and l.107-108
    @e0d035cd4a6a5c29835516a58d78710a28e73b18) unless the card states ``logprob_micro_batch_size`` (fixed log-prob
    micro-batches: ``log_prob_use_dynamic_bsz`` False); None: fixed micro-batches of sequences."""
    ro = card.rollout
    if ro.logprob_max_tokens_per_micro_batch is not None:
        return ro.logprob_max_tokens_per_micro_batch
    return ro.max_tokens_per_micro_batch if ro.logprob_micro_batch_size is None else None


def critic_token_budget(card: RunCard, *, values: bool = False) -> int | None:
    """Tokens per GPU of a critic micro-batch under dynamic batching, for its update or (``values``) its values
    pass: ``rollout.critic_max_tokens_per_micro_batch`` for both (verl's ``critic.ppo_max_token_len_per_gpu``, with
    ``critic.forward_max_token_len_per_gpu: ${critic.ppo_max_token_len_per_gpu}`` for the values pass,
    verl/trainer/config/ppo_trainer.yaml l.159-161 @e0d035cd4a6a5c29835516a58d78710a28e73b18,
    _generated_ppo_trainer.yaml l.446-448 @b178a3cd56f58b2d502255daba591e92833930a7). Unset, the actor's: the
    update's ``max_tokens_per_micro_batch`` and the log-prob passes' budget (``logprob_token_budget``) for the values
    pass, as the plan read them before the field existed (verl's own default is 32768, the card field's doc)."""
    ro = card.rollout
    if ro.critic_max_tokens_per_micro_batch is not None:
        return ro.critic_max_tokens_per_micro_batch
    return logprob_token_budget(card) if values else ro.max_tokens_per_micro_batch


def rl_groups(
    card: RunCard,
    spec: ModelSpec,
    actor: StepTerms,
    critic: StepTerms | None,
    *,
    critic_spec: ModelSpec | None,
    gpu_memory: float,
    weights_divisor: float,
    reward_divisor: float | None = None,
    sharding=None,  # noqa: ANN001
) -> tuple[list[GroupPhases], RolloutSummary, dict[str, float], list[str]]:
    """Per-group phase peaks of one PPO/GRPO step, the rollout summary, host RAM and notes.

    ``weights_divisor``: the policy's parameters over a frozen copy's bytes on one training GPU (the reference's,
    laid out like the actor: under model parallel ``1 / plan.stages.frozen_share``); ``reward_divisor``: the reward
    model's own (its architecture on the actor's grid), None: ``weights_divisor``; ``sharding``: the training group's
    (one GPU group), which sizes a frozen pass's own gathered units (``pass_gathered``); None: the actor's."""
    notes: list[str] = []
    host: dict[str, float] = {}
    ro = card.rollout
    train_gpus, roll_gpus = group_sizes(card)
    colocate = ro.placement.value == "colocate"
    seq = ro.prompt_len + ro.response_len
    mbs = ro.logprob_micro_batch_size or card.batch.micro_batch_size
    lp_budget = logprob_token_budget(card)
    keep: int | None = None
    from trainfit.plan.rl_batches import passes_pack  # late: plan imports methods

    if lp_budget is not None:
        # dynamic batching: a log-prob micro-batch is one packed row of at most the budget's tokens on each GPU
        # (verl rearrange_micro_batches over budget x Ulysses size, then the Ulysses slice; plan.walk.rl_budget_row),
        # and never more than the rank's share of the step at the longest sequence (plan.walk.rl_rank_sequences)
        from trainfit.plan.walk import rl_rank_sequences

        cp = card.parallel.context_parallel
        share = -(-rl_rank_sequences(card, update=False) * seq // cp)
        mbs, seq = 1, min(lp_budget, share)
        notes.append(f"log-prob passes: packed micro-batches of at most {seq} tokens per GPU (dynamic batching"
                     + (f", the rank's whole share under the budget of {lp_budget})" if share < lp_budget else ")"))
    elif ro.packed_logprob_row_tokens is not None and passes_pack(card):
        # NeMo RL sequence packing: a log-prob micro-batch is one packed row of at most logprob_mb_tokens
        # (lm_policy.py get_logprobs l.208-217: sequence_packing_args["max_tokens_per_microbatch"] = logprob_mb_tokens,
        # shard_by_batch_size into bins of that capacity, NVIDIA-NeMo/RL @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf;
        # plan.walk.rl_packed_row for the update), never more than the rank's share of the step at the longest
        from trainfit.plan.walk import rl_rank_sequences

        cp = card.parallel.context_parallel  # the row is the whole micro-batch; context parallel splits it
        share = rl_rank_sequences(card, update=False) * seq
        mbs, seq = 1, -(-min(max(int(ro.packed_logprob_row_tokens), seq), share) // cp)
        notes.append(f"log-prob passes: packed rows of at most {seq} tokens per GPU"
                     " (rollout.packed_logprob_row_tokens)")
    else:
        # TRL's GRPO computes the completion's logits only (logits_to_keep; roles.logit_positions)
        keep = logit_positions(card, seq_len=seq)
        if keep < seq:
            notes.append(f"log-prob passes: logits of the completion's {keep} positions per sequence, not {seq}"
                         " (TRL logits_to_keep)")
    chunked = card.loss.chunked

    # frozen roles resident on the training GPUs
    ref_place = reference_placement(card)
    ref_w = frozen_weights(spec, card, divisor=weights_divisor) if ref_place is RefPlacement.GPU else 0.0
    if ref_place is RefPlacement.CPU:
        host["reference_weights"] = frozen_weights(spec, card, divisor=1)
    if ref_place is RefPlacement.HOST_SWAP:
        # NeMo RL: the reference's pinned host copy and the policy's saved copy (compute.reference_swap), every
        # training GPU of the node its own shard; on the GPU the reference pass runs on the policy's own storage
        from trainfit.compute.reference_swap import reference_swap_host_bytes

        host["reference_weights"], host["reference_swap_policy_copy"] = reference_swap_host_bytes(
            state_bytes_per_gpu=reference_swap_state_bytes(spec, card, divisor=weights_divisor),
            gpus_per_node=min(card.hardware.gpus_per_node, train_gpus))
    rm_spec = reward_spec_of(card)
    rm_w = 0.0
    if rm_spec is not None:
        # the reward model in the dtype the card states it loaded in (roles.reward_model_dtype: fp32 4 B a weight)
        rm_dtype = card.roles.reward_model_dtype
        rm_w = frozen_weights(rm_spec, card, divisor=weights_divisor if reward_divisor is None else reward_divisor,
                              dtype=Dtype(rm_dtype.value) if rm_dtype is not None else None)
    critic_keep = _persistent(critic) if critic is not None else 0.0  # its gradient buffer added below

    # the engine
    summary, engine_run, engine_idle, engine_sync = _engine(card, spec, actor, gpu_memory, train_gpus)
    if started_beside := trainer_bytes_at_engine_start(card, actor):
        notes.append(f"engine start-up: the trainer holds {started_beside / GIB:.2f} GiB per GPU when the colocated"
                     f" {ro.engine.value} engine starts (methods.rl.trainer_bytes_at_engine_start; "
                     + ("SGLang's mem_fraction_static is a share of the memory then free)" if ro.engine is
                        RolloutEngine.SGLANG else "verl's vLLM <= 0.6.3 shares out what remains)"
                        if verl_remaining_fraction(card) else "vLLM refuses to start when less than its budget is free)"))
    if verl_remaining_fraction(card):
        notes.append(f"verl on vLLM {card.software.vllm}: gpu_memory_utilization {ro.gpu_memory_utilization} is a share"
                     f" of the memory free after the trainer ({trainer_bytes_at_engine_start(card, actor) / GIB:.2f}"
                     f" GiB), the engine's weights and its profile run: KV cache {summary.kv_cache_bytes / GIB:.2f} GiB"
                     " (verl's vllm_v_0_6_3 worker, rollout.vllm.EngineConfig.remaining_fraction)")
    if colocate and ro.engine in SERVING_ENGINES and not (same := engine_in_trainer_process(card))[0]:
        notes.append(f"rollout engine in processes of its own ({same[1]}): its CUDA context"
                     f" ({ENGINE_CUDA_CONTEXT_BYTES / GIB:.2f} GiB) beside the trainer's on every GPU, asleep too"
                     " (methods.rl.engine_in_trainer_process)")
    if ro.engine is RolloutEngine.VLLM and ro.sleep_level == 1:
        # level 1 keeps each engine rank's weight shard in host RAM while asleep
        host["rollout_weights_asleep"] = summary.engine_weights_bytes * min(card.hardware.gpus_per_node, roll_gpus)
    if colocate:
        idle = engine_idle
    else:
        idle = 0.0

    def extras(skip: str = "") -> dict[str, float]:
        ex = {
            "reference_weights": ref_w,
            "reward_model_weights": rm_w,
            "critic_state": critic_keep if skip != "critic" else 0.0,
            ENGINE: idle,
        }
        return ex

    actor_keep = _persistent(actor)
    peaks: list[PhasePeak] = []
    trainer_resident = {"weights": actor.weights, "adapter_weights": actor.adapter_weights,
                        "master_weights": actor.master_weights, "optimizer_states": actor.optimizer_states,
                        "paged_optimizer_states": actor.paged_optimizer_states}
    # trainer state moved to the host around the colocated engine (verl init_model offloads before
    # _build_rollout: megatron_workers.py lines 595-601, fsdp_workers.py lines 812-826 @b178a3cd; generate_sequences
    # offloads the optimizer, megatron_workers.py lines 800-801; update_actor loads it back, lines 744-748)
    off_mode, off_why = trainer_offload_of(card)
    if ro.engine not in SERVING_ENGINES:
        off_mode, off_why = Offload.NONE, "engine hf generates on the trainer's own weights"
    away = offloaded_components(off_mode)
    # Megatron-Core's gradient buffers outside their own update (grad_buffer_held): the actor's per phase, the critic's
    # with the critic's state, the actor's through the critic's update
    actor_grads, critic_grads = _held_grads(actor), (_held_grads(critic) if critic is not None else 0.0)

    def grads(phase: GradBufferPhase) -> dict[str, float]:
        return {"gradients": actor_grads} if actor_grads and grad_buffer_held(card, off_mode, phase=phase) else {}

    if critic_grads and grad_buffer_held(card, off_mode, phase=GradBufferPhase.OTHER_UPDATE):
        critic_keep += critic_grads
    kept = [ph for ph in GRAD_BUFFER_PHASES if actor_grads and grad_buffer_held(card, off_mode, phase=ph)]
    if kept:
        notes.append(f"Megatron-Core gradient buffer ({actor_grads / GIB:.2f} GiB"
                     + (f", the critic's {critic_grads / GIB:.2f} GiB" if critic_grads else "")
                     + f") kept outside the update: {', '.join(kept)} (methods.rl.grad_buffer_held)")
    if away:
        moved = sum(v for k, v in trainer_resident.items() if k in away)
        if moved > 0:
            host["trainer_offloaded"] = moved * min(card.hardware.gpus_per_node, train_gpus)
        notes.append(f"trainer offload {off_mode.value} ({off_why}): {', '.join(away)} in host RAM while the engine"
                     " starts, generates and receives weights (weights back for the sync); back for log-probs and"
                     " the update (frozen_pass_offloaded: what stays away through the log-prob passes)")
    loaded = trainer_resident | extras()
    at_load = engine_idle if ro.engine is RolloutEngine.DEEPSPEED_HYBRID else engine_run  # nothing gathered yet
    peaks.append(PhasePeak(Phase.LOAD, ((_without(loaded, away) | {ENGINE: at_load}) if colocate else loaded) | grads(GradBufferPhase.LOAD),
                           "all roles loaded" + (", trainer state offloaded" if away else "")))
    if colocate:
        rollout = engine_run if ro.engine in SERVING_ENGINES else 0.0
        gen_trainer = 0.0 if ro.engine in SERVING_ENGINES else engine_run
        if ro.engine is RolloutEngine.DEEPSPEED_HYBRID:  # workspace outside the allocator, the gather inside
            rollout, gen_trainer = engine_idle, engine_run - engine_idle
        peaks.append(PhasePeak(Phase.ROLLOUT, _without(trainer_resident, away) | extras()
                               | {ENGINE: rollout, "generation": gen_trainer} | grads(GradBufferPhase.ROLLOUT),
                               f"generating {_generated_prompts(card)}x{ro.num_generations} sequences"
                               + (f" in {ro.generation_calls} calls" if ro.generation_calls > 1 else "")))
    # the frozen passes: the optimizer state (and, for a pass not on the actor, its weights) still in host RAM where
    # the framework's code leaves it there (LOGPROB_OPTIMIZER_AWAY_PRESETS); elsewhere the whole state is counted
    own_away = frozen_pass_offloaded(card, off_mode, actor_weights=True) if colocate else ()
    other_away = frozen_pass_offloaded(card, off_mode, actor_weights=False) if colocate else ()
    if own_away:
        notes.append(f"frozen passes ({card.preset}): {', '.join(own_away)} stay in host RAM until the update"
                     + (f"; passes not on the actor also without {', '.join(n for n in other_away if n not in own_away)}"
                        if set(other_away) - set(own_away) else ""))
    # a no-grad pass of the policy's architecture (reference, old policy) gathers the units of its own engine
    own_gathered = pass_gathered(card, actor, spec, sharding, own_engine=True)
    ref_gathered = pass_gathered(card, actor, spec, sharding,
                                 own_engine=ref_place in (RefPlacement.LORA_DISABLED, RefPlacement.HOST_SWAP))
    from trainfit.plan.time import verl_fsdp_workers  # late: plan imports methods

    if ref_place in (RefPlacement.GPU, RefPlacement.LORA_DISABLED, RefPlacement.HOST_SWAP):
        # GRPO divides by the temperature into a copy; PPO divides the logits in place
        tr = forward_only_transient(spec, sequences=mbs, seq_len=seq, chunked=chunked, **ref_gathered,
                                    divides_by_temperature=card.method is Method.GRPO, kernel=card.loss.kernel.value,
                                    temperature_copy=card.loss.temperature_copy, logit_positions=keep,
                                    entropy=card.loss.logprob_entropy is LogprobEntropy.EVERY_PASS)
        ref_away = other_away if ref_place is RefPlacement.GPU else own_away  # LoRA / host swap: the actor's weights
        ref_grads = grads(GradBufferPhase.OTHER_PASS if ref_place is RefPlacement.GPU else GradBufferPhase.LOGPROB)
        peaks.append(PhasePeak(Phase.REF_LOGPROB, _without(trainer_resident, ref_away) | extras() | {"logprob_pass": tr}
                               | ref_grads,
                               "reference log-probs"))
    elif ref_place is RefPlacement.CPU and card.preset in REFERENCE_OFFLOAD_PRESETS:
        # SkyRL: the reference comes to the GPU for its own pass (its bf16 shard, as the trainer's layout shards it)
        # after _ensure_on_gpu has sent the policy's weights and optimizer to the host (other_away), and leaves after
        # it (roles.REFERENCE_OFFLOAD_PRESETS; WorkerDispatch._ensure_on_gpu, worker_dispatch.py l.140-170 @2e9c89af)
        tr = forward_only_transient(spec, sequences=mbs, seq_len=seq, chunked=chunked, **ref_gathered,
                                    divides_by_temperature=card.method is Method.GRPO, kernel=card.loss.kernel.value,
                                    temperature_copy=card.loss.temperature_copy, logit_positions=keep,
                                    entropy=card.loss.logprob_entropy is LogprobEntropy.EVERY_PASS)
        on_gpu = {"reference_weights": frozen_weights(spec, card, divisor=weights_divisor), "logprob_pass": tr}
        peaks.append(PhasePeak(Phase.REF_LOGPROB, _without(trainer_resident, other_away) | extras() | on_gpu
                               | grads(GradBufferPhase.OTHER_PASS),
                               "reference log-probs (the reference brought in, the policy offloaded)"))
    elif ref_place is RefPlacement.CPU and verl_fsdp_workers(card):
        # verl's FSDP workers wrap the reference with FSDP's own CPU offload (``cpu_offload = None if role ==
        # "actor" else CPUOffload(offload_params=True)``, volcengine/verl verl/workers/fsdp_workers.py l.260-262
        # @e0d035cd4a6a5c29835516a58d78710a28e73b18; FSDP2 ``CPUOffloadPolicy(pin_memory=True)``, l.547-552
        # @b178a3cd56f58b2d502255daba591e92833930a7): its shards stay in host RAM, yet its forward runs on the GPU,
        # each unit's shard copied in and all-gathered before its use and freed after it (FSDP1
        # ``FlatParamHandle.pre_unshard`` / ``reshard``, FSDP2 ``FSDPParam.all_gather_inputs``), beside what the actor
        # keeps resident (verl's actor is never so offloaded). So the pass holds the reference's gathered units (laid
        # out like the actor's: the same architecture and mesh) and its log-prob transient, no resident weights.
        # plan.rl_passes times the same pass (_reference_host_shard_bytes_per_s). Not modelled: the copied-in
        # param_dtype shard of the unit being gathered (one unit over the shard group, beside the gathered unit).
        tr = forward_only_transient(spec, sequences=mbs, seq_len=seq, chunked=chunked, **ref_gathered,
                                    divides_by_temperature=card.method is Method.GRPO, kernel=card.loss.kernel.value,
                                    temperature_copy=card.loss.temperature_copy, logit_positions=keep,
                                    entropy=card.loss.logprob_entropy is LogprobEntropy.EVERY_PASS)
        peaks.append(PhasePeak(Phase.REF_LOGPROB, _without(trainer_resident, other_away) | extras() | {"logprob_pass": tr}
                               | grads(GradBufferPhase.OTHER_PASS),
                               "reference log-probs (the reference's host shards gathered unit by unit)"))
    if old_logprob_pass(card):
        # the policy's own log-probs before the update (PPO's old policy; GRPO when each batch is reused
        # for several updates, or every step under verl / OpenRLHF / NeMo RL: ``roles.OLD_LOGPROB_PRESETS``, and TRL
        # with a serving engine: ``roles.trl_old_logprob_pass``):
        # a no-grad pass of the trained actor, adapters included
        tr = forward_only_transient(spec, sequences=mbs, seq_len=seq, chunked=chunked, **own_gathered,
                                    divides_by_temperature=card.method is Method.GRPO, kernel=card.loss.kernel.value,
                                    temperature_copy=card.loss.temperature_copy, logit_positions=keep,
                                    entropy=card.loss.logprob_entropy is not LogprobEntropy.NONE)
        peaks.append(PhasePeak(Phase.OLD_LOGPROB, _without(trainer_resident, own_away) | extras() | {"logprob_pass": tr}
                               | grads(GradBufferPhase.LOGPROB),
                               "old-policy log-probs"))
    if rm_spec is not None:
        rm_dtype = card.roles.reward_model_dtype
        tr = forward_only_transient(rm_spec, sequences=mbs, seq_len=seq, chunked=chunked,
                                    **pass_gathered(card, actor, rm_spec, sharding, actor_units=False,
                                                    dtype=Dtype(rm_dtype.value) if rm_dtype else None))
        peaks.append(PhasePeak(Phase.REWARD, _without(trainer_resident, other_away) | extras() | {"reward_pass": tr}
                               | grads(GradBufferPhase.OTHER_PASS),
                               "reward model scores"))
    if critic is not None and critic_spec is not None:
        c_mbs, c_seq = mbs, seq
        if ro.critic_max_tokens_per_micro_batch is not None:
            # the critic's own budget (critic_token_budget): one packed row, at most the rank's share, as above
            from trainfit.plan.walk import rl_rank_sequences

            c_budget = ro.critic_max_tokens_per_micro_batch
            c_share = -(-rl_rank_sequences(card, update=False) * (ro.prompt_len + ro.response_len)
                        // card.parallel.context_parallel)
            c_mbs, c_seq = 1, min(c_budget, c_share)
            notes.append(f"critic values pass: packed micro-batches of at most {c_seq} tokens per GPU (the critic's"
                         " budget, rollout.critic_max_tokens_per_micro_batch"
                         + (f"; the rank's whole share under the budget of {c_budget})" if c_share < c_budget else ")"))
        tr = forward_only_transient(critic_spec, sequences=c_mbs, seq_len=c_seq, chunked=chunked,
                                    gathered_units=_gathered(critic))
        peaks.append(PhasePeak(Phase.CRITIC_VALUE, _without(trainer_resident, other_away) | extras() | {"value_pass": tr}
                               | grads(GradBufferPhase.OTHER_PASS),
                               "critic values"))
    names = {Phase.FORWARD: Phase.ACTOR_FORWARD, Phase.BACKWARD: Phase.ACTOR_BACKWARD,
             Phase.OPTIMIZER_STEP: Phase.ACTOR_OPTIMIZER_STEP}
    for p in step_peaks(actor)[1:]:
        peaks.append(PhasePeak(names[p.phase], dict(p.components) | extras(), p.at))
    if critic is not None:
        cnames = {Phase.FORWARD: Phase.CRITIC_FORWARD, Phase.BACKWARD: Phase.CRITIC_BACKWARD,
                  Phase.OPTIMIZER_STEP: Phase.CRITIC_OPTIMIZER_STEP}
        for p in step_peaks(critic)[1:]:
            held = actor_grads if grad_buffer_held(card, off_mode, phase=GradBufferPhase.OTHER_UPDATE) else 0.0
            comps = dict(p.components) | extras(skip="critic") | {"actor_state": actor_keep + held}
            peaks.append(PhasePeak(cnames[p.phase], comps, p.at))
    mech, why = effective_weight_sync(card, actor)
    bucket = sync_bucket_bytes(card)
    adapter_spike = adapter_sync_spike(card, spec)
    spike = _sync_spike(mech, spec, bucket_bytes=bucket) if adapter_spike is None else adapter_spike
    sync_kind = mech.value
    if adapter_spike is not None:
        layered = card.rollout.layered_summon
        sync_kind = "adapter-only"
        from trainfit.plan.rl_generation import adapter_collect_gathers  # late: plan imports methods

        base_units, sharded = adapter_collect_gathers(card)
        collected = (("one decoder layer at a time" if layered else "from the whole actor gathered at once")
                     + f" (rollout.layered_summon {str(layered).lower()})" if base_units
                     else "by gathering the adapter's FSDP2 shards alone" if sharded
                     else "from the unsharded actor, nothing gathered")
        why = ("the engine serves the LoRA adapter unmerged: after the first sync verl hands vLLM only the adapter"
               " (add_lora of a TensorLoRARequest), collected " + collected + "; vLLM's adapter slots"
               f" {engine_adapter_slot_bytes(card, spec) / GIB:.2f} GiB per engine rank")
        if engine_shares_trainer_weights(card.preset):
            why = ("the engine serves the LoRA adapter unmerged and shares the trainer's base weights (Unsloth: no"
                   " weight sync, each generate call hands vLLM the trainer's adapter tensors, load_lora(...,"
                   " load_tensors=True)); vLLM's adapter slot"
                   f" {engine_adapter_slot_bytes(card, spec) / GIB:.2f} GiB; the engine's"
                   " weights are the trainer's (counted once, at its storage precision)")
    sync = trainer_resident | extras() | {"weight_sync_buffer": spike} | grads(GradBufferPhase.WEIGHT_SYNC)
    from trainfit.rollout.quantization import card_refit_cast_peak_bytes

    # an fp8 engine casts each received bf16 tensor to fp8 on its own GPUs (rollout.quantization)
    cast = {"fp8_refit_cast": c} if (c := card_refit_cast_peak_bytes(card, spec)) else {}
    if colocate:
        sync = _without(sync, offloaded_components(off_mode, sending_weights=True))
        sync[ENGINE] = engine_sync
        sync |= cast
    peaks.append(PhasePeak(Phase.WEIGHT_SYNC, sync, f"{sync_kind} sync to the rollout engine"))
    groups = [GroupPhases("train" if not colocate else "all", train_gpus, tuple(peaks))]
    if not colocate:
        rpeaks = (
            PhasePeak(Phase.LOAD, {ENGINE: engine_run}, "engine started"),
            PhasePeak(Phase.ROLLOUT, {ENGINE: engine_run}, f"generating {_generated_prompts(card)}x{ro.num_generations} sequences"
                      + (f" in {ro.generation_calls} calls" if ro.generation_calls > 1 else "")),
            PhasePeak(Phase.WEIGHT_SYNC, {ENGINE: engine_sync, "weight_sync_buffer": min(spike, bucket)}
                      | cast, "receiving weights"),
        )
        groups.append(GroupPhases("rollout", roll_gpus, rpeaks))
    notes.append(
        f"rollout: {ro.engine.value}, {ro.placement.value}, tensor parallel {ro.tensor_parallel},"
        f" gpu_memory_utilization {ro.gpu_memory_utilization}{_gpu_memory_utilization_source(card)},"
        f" sleep level {ro.sleep_level}"
    )
    notes.append(f"reference: {ref_place.value}; reward: {reward_model(card) or card.roles.reward_model}")
    # a roles.reference the user set and the framework skips at kl 0: a warning (plan.make_plan,
    # methods.roles.unloaded_reference_warning), not an assumption
    notes.append(f"weight sync: {sync_kind} ({why})")
    return groups, summary, host, notes


def _engine(card: RunCard, spec: ModelSpec, actor: StepTerms, gpu_memory: float, train_gpus: int):
    """(summary, bytes while generating, bytes while training, bytes during weight sync), per GPU."""
    ro = card.rollout
    if ro.engine not in SERVING_ENGINES:  # hf, deepspeed_hybrid: generate on the trainer's own weights
        from trainfit.rollout.vllm import kv_bytes_per_token

        # one generate call's sequences (rollout.generation_calls; 1 for deepspeed_hybrid, spec.card)
        seqs = -(-_generated_prompts(card) * ro.num_generations // ro.generation_calls)
        if ro.engine is RolloutEngine.DEEPSPEED_HYBRID:
            # the workspace (KV cache included) stays allocated outside the allocator from the first call on, with the
            # QKV merge buffer (in the allocator, 0.1-0.2 GB, counted with it)
            he = hybrid_engine_memory_of(spec, card, train_gpus)
            run = he.generation_bytes + he.resident_bytes
            summary = RolloutSummary(ro.engine.value, kv_bytes_per_token(spec, tp=1, dtype_bytes=2), 0,
                                     seqs * (ro.prompt_len + ro.response_len), seqs, seqs, False,
                                     "DeepSpeed Hybrid Engine: static batches, KV cache in its workspace", True,
                                     run, train_gpus, kv_cache_bytes=he.workspace.kv_cache_bytes,
                                     engine_weights_bytes=he.gathered.generate_bytes)
            return summary, run, he.resident_bytes, he.resident_bytes
        gen = _hf_generation(spec, card, actor, train_gpus)
        summary = RolloutSummary(ro.engine.value, kv_bytes_per_token(spec, tp=1, dtype_bytes=2), 0, seqs * (ro.prompt_len + ro.response_len),
                                 seqs, seqs, False, "transformers generate: no preemption; KV grows with the batch", True,
                                 gen, train_gpus)
        return summary, gen, 0.0, 0.0
    em, demand, instances = engine_for(card, spec, gpu_memory=gpu_memory,
                                       other_used_bytes=trainer_bytes_at_engine_start(card, actor))
    summary = RolloutSummary(
        engine=ro.engine.value,
        kv_bytes_per_token=em.kv_bytes_per_token,
        kv_capacity_tokens=em.kv_tokens_capacity,
        demand_tokens=em.needed_kv_tokens(demand),
        needed_concurrency=em.needed_concurrency(demand),
        max_concurrency=em.max_concurrent_seqs(demand),
        preempts=em.preempts(demand),
        reason=em.preempt_reason(demand) if em.fits else em.reason,
        engine_fits=em.fits,
        engine_device_bytes=em.total_device_bytes,
        engine_instances=instances,
        budget_bytes=em.budget,
        kv_cache_bytes=em.kv_cache,
        engine_weights_bytes=em.weights,
        **_hybrid_pool(em),
    )
    # the engine's CUDA context: counted with the trainer's (the plan's device overhead) when the engine runs in the
    # trainer's process, or alone on its own GPUs (split placement); an engine in processes of its own beside the
    # trainer holds a second one in every phase, asleep too (engine_in_trainer_process)
    own = ro.placement is Placement.COLOCATE and not engine_in_trainer_process(card)[0]
    context = 0.0 if own else em.cuda_context
    # Unsloth: the engine's weights are the trainer's (one shared copy, methods.unsloth 1.), counted in the trainer's
    # weights already; the engine adds its KV cache, adapter slot, graphs and activations only
    shared = (em.weights - engine_adapter_slot_bytes(card, spec)) if engine_shares_trainer_weights(card.preset) else 0.0
    run = em.total_device_bytes - context - shared
    idle = run if ro.sleep_level == 0 else sleep_resident_bytes(em, ro.sleep_level) - context - shared
    if ro.engine is RolloutEngine.SGLANG and ro.sleep_level == 1:
        # SGLang's release at verl's level 1 frees the KV cache only: the weights stay on the GPU (tags ["kv_cache"],
        # verl-project/verl verl/workers/rollout/sglang_rollout/sglang_rollout.py release @b9873ee98f5ee513a460a7a41623262ac4a831e9)
        idle += em.weights
        sync = max(0.0, idle)
    else:
        sync = em.weights - shared + max(0.0, idle) if ro.sleep_level else run
    return summary, run, max(0.0, idle), sync


def effective_weight_sync(card: RunCard, actor: StepTerms) -> tuple[WeightSync, str]:
    """The trainer -> engine sync the plan holds memory for, and why: the card's ``rollout.weight_sync``
    when it is set; left unset, PEFT under FSDP/ZeRO-3 merges the adapter into a gathered full copy
    (TRL's default), else one parameter at a time (the field's default)."""
    mech = card.rollout.weight_sync
    if "weight_sync" in card.rollout.model_fields_set:
        return mech, "rollout.weight_sync as set"
    if card.scope is not Scope.FULL and actor.fsdp_layer_units:
        return WeightSync.FULL_GATHER, (
            "rollout.weight_sync unset: PEFT under FSDP/ZeRO-3 merges the adapter into a gathered full copy;"
            " set rollout.weight_sync=per_parameter when the trainer streams merged weights one tensor at a time")
    return mech, "rollout.weight_sync default"


def _sync_spike(mech: WeightSync, spec: ModelSpec, *, bucket_bytes: float = SYNC_BUCKET_BYTES) -> float:
    """Bytes the trainer holds while sending weights by ``mech`` (bf16 engine weights); ``bucket_bytes``: a bucketed
    sync's bucket (``sync_bucket_bytes``)."""
    full = weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
    if mech is WeightSync.FULL_GATHER:
        return full
    if mech is WeightSync.BUCKETED:
        return min(bucket_bytes, full)
    largest = max(t.numel for t in param_tensors(spec)) * count_scale(spec)
    return 2.0 * largest


def dpo_reference_pass(spec: ModelSpec, card: RunCard, actor: StepTerms, *, weights_divisor: int,
                       sharding=None) -> tuple[float, float]:  # noqa: ANN001
    """(reference weights resident, transient of the live reference pass) for DPO (``roles.reference: cpu`` is refused
    for DPO by the card, ``spec.card._check_reference_placement``)."""
    place = reference_placement(card)
    if place in (RefPlacement.NONE, RefPlacement.PRECOMPUTED):
        return 0.0, 0.0
    # host_swap (NeMo RL DPO): the reference pass runs on the policy's own storage, no weights of its own
    weights = frozen_weights(spec, card, divisor=weights_divisor) if place is RefPlacement.GPU else 0.0
    # ``card`` is the DPO step card of plan.walk_sft_like, whose micro-batch is already chosen+rejected (2x):
    # the reference scores that same concatenated batch, without a temperature division
    tr = forward_only_transient(
        spec, sequences=card.batch.micro_batch_size, seq_len=card.batch.seq_len, chunked=card.loss.chunked,
        **pass_gathered(card, actor, spec, sharding, own_engine=place is not RefPlacement.GPU),
        divides_by_temperature=False,
        kernel=card.loss.kernel.value,
    )
    return weights, tr


def reward_spec_of(card: RunCard) -> ModelSpec | None:
    """The card's reward model (``roles.reward_model``) as a one-output sequence classifier; None without one."""
    name = reward_model(card)
    if name is None:
        return None
    return replace(resolve_role_model(name, field="roles.reward_model"), head_outputs=1)


def critic_spec_of(card: RunCard, actor_spec: ModelSpec) -> ModelSpec | None:
    name = critic_model(card, actor_spec.name)
    if name is None:
        return None
    if name == actor_spec.name:
        return replace(actor_spec, head_outputs=1)
    return replace(resolve_role_model(name, field="roles.critic"), head_outputs=1)
