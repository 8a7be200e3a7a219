"""The step-time hook of a plan: a resolved card into seconds per optimizer step, phase by phase.

Training phases come from the op-level model of ``trainfit.compute.training`` (GEMMs at a
shape-dependent efficiency, memory-bound kernels at HBM bandwidth, fused attention, host cost per
kernel, the optimizer's traffic, collectives left exposed by the framework's overlap, offload).
PPO/GRPO add generation (``compute.generation``), the frozen log-prob passes, reward, weight sync
(``compute.sync``) and sleep/wake, summed, or overlapped when the card runs one step off-policy.

Self-contained: the rest of ``trainfit.plan`` calls only ``step_time_of``. Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil

from trainfit.catalog.gpus import GpuSpec
from trainfit.compute.attention_time import (
    AUTO_KERNEL, BASE_HEAD_DIM, KERNEL_ARCH_TEXT, KERNEL_NAMES, head_dim_efficiency, kernel_head_dim_of,
    kernel_head_dim_runs, kernel_head_dim_text, kernel_rated, kernel_rates, kernel_runs_on, kernels_allowed,
    packed_attention_context,
)
from trainfit.compute.float8_all_gather import Fp8GatherShard, gathered_bytes_saved, gathered_weight_casts
from trainfit.compute.float8_casts import CastTraffic, cast_traffic
from trainfit.compute.inventory import Adapter
from trainfit.compute.rates import (BRIDGE_GROUP_GPUS, NVLINK_DOMAIN_GPUS, DeviceRates, catalog_link, default_rates,
                                    group_rates, link_label, stated_link_rates, stock_driver_refuses_pcie_p2p)
from trainfit.compute import collectives as coll
from trainfit.compute import moe_time
from trainfit.compute.training import (
    ModelParallel, OptimizerSpec, Parallel, PhaseTime, train_step_time,
)
from trainfit.memory import attention as attn
from trainfit.memory.fp8 import quantized_element_bytes
from trainfit.memory.logits import PRIME_RL_LM_HEAD_CHUNK_COLUMNS
from trainfit.memory.lora import lora_trainable_params, targeted_groups
from trainfit.memory.params import param_breakdown, param_tensors, routed_expert_layer_params, routed_expert_params
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import WeightBytes, count_scale, total_params, weight_bytes
from trainfit.errors import CardError, TrainfitError
from trainfit.plan.checkpointing import checkpoint_reentrant
from trainfit.plan.fsdp_no_sync import pipeline_fsdp2_holds_unsharded
from trainfit.plan.resolve import gpu_of, method_model_spec, model_dtype, trainable_spec, transformers_v4_modules
from trainfit.methods.roles import logit_positions, train_nodes
from trainfit.plan.terms import (bnb_loop_experts, fsdp_gathered_dtype, loss_input_copy_of,
                                 megatron_fsdp_fp8_params, padding_mask_of, runs_hf_modelling_code,
                                 trained_dtype_bytes, zero_master_states)
from trainfit.spec.card import (
    VERL_MEGATRON_CORE_RELEASE,
    RunCard,
    megatron_core_pin,
    pin_before,
    pin_names_release,
    thd_rope_loop_of,
)
from trainfit.spec.enums import Attention, ComputeDtype, ContextParallelKind, Dtype, Fp8Recipe, Method, Scope
from trainfit.spec.enums import AdapterDtype, ExpertAdapters, LayerKind, LoraDropoutPosition, QloraDequant
from trainfit.spec.enums import FSDP_STRATEGIES, LossKernel, MoeDispatcher, MoeExperts, TensorParallelImpl
from trainfit.spec.enums import MoeExpertMlp, MoeLaunch, MoeLoadBalancing, MoeRouterLoad, MoeRouting, Nf4ComputeDtype, Offload, Padding, RolloutEngine
from trainfit.spec.enums import Interconnect, ModelParallelKernels, KbitPrepare, Launcher, RefPlacement, Stack, Zero1ParamSync
from trainfit.spec.enums import ThdRopeLoop
from trainfit.spec.model import ModelSpec
from trainfit.units import BYTES_PER_DTYPE

COMPILE_MEMORY_FACTOR = 0.5
"""torch.compile (Inductor) fuses chains of pointwise ops (norm, rotary, SwiGLU, residual, the loss):
about half the memory-bound traffic remains (each chain reads its inputs and writes its output once)."""
COMPILE_KERNEL_FACTOR = 0.35
"""... and about a third of the kernels (and their host dispatch) remain."""


def kernel_factor_of(card: RunCard) -> float:
    """The factor the card's layer kernels (and their host dispatch) are scaled by: Unsloth's counted layer inventory
    over the eager one (``compute.unsloth_layers.UNSLOTH_KERNEL_FACTOR``) on ``parallel.unsloth_layers``, the compile
    factor on a fused-kernel card (``fused_kernels``), else 1."""
    if card.parallel.unsloth_layers:
        from trainfit.compute.unsloth_layers import UNSLOTH_KERNEL_FACTOR  # Unsloth cards only (cold start)

        return UNSLOTH_KERNEL_FACTOR
    return COMPILE_KERNEL_FACTOR if fused_kernels(card) else 1.0


@dataclass(frozen=True, slots=True)
class StepTiming:
    """Seconds of one optimizer step on the slowest GPU, by phase."""

    total_s: float
    tokens_per_step: float
    """Tokens trained per optimizer step over all GPUs."""
    phases: tuple[PhaseTime, ...]
    assumptions: tuple[str, ...]
    unavailable: str | None = None
    """Why the step has no time although some of its phases do (an RL step whose rollout engine cannot start:
    its generation, the step's largest phase, has no time, and a sum without it is not the step); None: a time."""

    @property
    def parts(self) -> dict[str, float]:
        return {p.name: p.seconds for p in self.phases}

    @property
    def bound(self) -> str:
        return max(self.phases, key=lambda p: p.seconds).bound if self.phases else "compute"


NIC_GBPS_BY_GPU = {"h100-sxm": 400, "h100-sxm-hbm2e-96gb": 400, "h200": 400, "h800": 400, "h20": 400, "b200": 400,
                   "gb200": 400,
                   "a100-80gb": 200, "a100-40gb": 200, "a800-80gb": 200, "b300": 800, "gb300": 800}
"""One NIC per GPU in the vendors' reference 8-GPU servers: DGX H100/H200 and HGX B200 (ConnectX-7, 400 Gb/s
NDR), DGX A100 (ConnectX-6, 200 Gb/s HDR), DGX B300 (8 ConnectX-8 SuperNICs at up to 800 Gb/s: NVIDIA DGX B300
datasheet, https://resources.nvidia.com/en-us-dgx-systems/dgx-b300-datasheet, read 2026-12-03), GB300 NVL72 (a
ConnectX-8 SuperNIC at 800 Gb/s per GPU: https://www.nvidia.com/en-us/data-center/gb300-nvl72/, read 2026-12-03), Meta's
Grand Teton H100 96GB HBM2e hosts ('backend RDMA network with 400 Gb/s per GPU', pytorch/torchtitan docs/performance.md
@eaea6f6a2fa940f03a10906be1df3489cf30af85 l.6), GB200 NVL72 (a ConnectX-7 at 400 Gb/s per GPU: four per compute
tray of four GPUs), the H800 (a ConnectX-7 at 400 Gb/s per GPU on DeepSeek's hosts); the A800 (an A100 with NVLink
cut to 400 GB/s, catalog a800-80gb) assumed on the A100's server and the H20 on the Hopper one, both uncited
(``NIC_UNCITED_BY_GPU`` says why). Other (PCIe) cards: 100 Gb/s assumed. The figures with a quoted source are in
``NIC_SOURCE_BY_GPU``; a multi-node plan names the figure it used and its source, or 'uncited default', in its
assumptions (``nic_note``)."""


_DGX_HOPPER_NICS = ("NVIDIA DGX BasePOD reference architecture, core components, https://docs.nvidia.com/dgx-basepod/"
                    "reference-architecture-infrastructure-foundation-enterprise-ai/latest/core-components.html, read"
                    " 2026-12-05, DGX H200 and H100: 'Four OSFP ports serving eight single-port NVIDIA ConnectX-7 VPI, ...,"
                    " up to 400 Gb/s InfiniBand/Ethernet'")
_DGX_A100_NICS = ("MLPerf Training system descriptions of NVIDIA's DGX A100 nodes, 'host_networking': '... Compute: 8x"
                  " ConnectX-6 IB HDR 200Gb/Sec' (one 200 Gb/s HDR NIC per GPU), for the A100-SXM4-40GB:"
                  " mlcommons/training_results_v0.7 NVIDIA/systems/dgxa100_n32_ngc20.06_pytorch.json"
                  "@c66406115bb3c60cb9c49889b076727ccecba31e l.17, and the A100-SXM4-80GB:"
                  " mlcommons/training_results_v1.0 NVIDIA/systems/dgxa100_n32_ngc21.05_pytorch.json"
                  "@8200377f425ae24b6ed6c2816b9273aab0996d43 l.17")
NIC_SOURCE_BY_GPU = {
    "a100-80gb": _DGX_A100_NICS,
    "a100-40gb": _DGX_A100_NICS,
    "h800": "deepseek-ai/DeepEP README.md@0aaa6744c890c5af051f622252975c4393795000 l.88: 'We test normal kernels on H800"
            " (~160 GB/s NVLink maximum bandwidth), with each connected to a CX7 InfiniBand 400 Gb/s RDMA network card'",
    "gb200": "NVIDIA DGX GB200 user guide, hardware, https://docs.nvidia.com/dgx/dgxgb200-user-guide/hardware.html, read"
             " 2026-12-05: compute tray '2x Grace CPUs and 4x Blackwell GPUs', cluster network '4x NVIDIA ConnectX-7"
             " single port 400G OSFP NIC' (one 400 Gb/s NIC per GPU)",
    "h100-sxm": _DGX_HOPPER_NICS,
    "h200": _DGX_HOPPER_NICS,
    "b200": "NVIDIA DGX B200 user guide, https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html,"
            " read 2026-12-05: '4 x OSFP ports for 8 x NVIDIA ConnectX-7 Single Port Cards', InfiniBand 'Up to 400Gbps'",
    "b300": "NVIDIA DGX B300 datasheet, https://resources.nvidia.com/en-us-dgx-systems/dgx-b300-datasheet, read"
            " 2026-12-03: 8 ConnectX-8 SuperNICs at up to 800 Gb/s",
    "gb300": "https://www.nvidia.com/en-us/data-center/gb300-nvl72/, read 2026-12-03: a ConnectX-8 SuperNIC at 800 Gb/s"
             " per GPU",
    "h100-sxm-hbm2e-96gb": "pytorch/torchtitan docs/performance.md@eaea6f6a2fa940f03a10906be1df3489cf30af85 l.6:"
                           " 'backend RDMA network with 400 Gb/s per GPU'",
}
"""Where ``NIC_GBPS_BY_GPU``'s figure is quoted; the other kinds' figures (one NIC per GPU of the vendor's reference
server, 100 Gb/s for PCIe cards) are uncited defaults, and the plan's assumption line says so (``nic_note``)."""

NIC_UNCITED_BY_GPU = {
    "a800-80gb": ("one 200 Gb/s NIC per GPU, as on the DGX A100 the A800 derives from; the A800 is sold in OEM servers"
                  " and neither an NVIDIA reference server nor a published A800 host's NICs are cited here"),
    "h20": ("one 400 Gb/s NIC per GPU, as on the DGX H100; the H20 is sold in OEM servers and neither an NVIDIA"
            " reference server nor a published H20 (96 GB) host's NICs are cited here (a published 8 x 400 Gb/s RoCE"
            " cluster, https://github.com/NVIDIA/nccl-tests/issues/367 read 2026-12-05, is of the H20-3e, another card)"),
}
"""Catalog NIC defaults left uncited, with the reason the plan's assumption line gives."""


def nic_default_source(gpu_id: str) -> str:
    """The catalog default NIC's source for ``gpu_id``, or the words 'uncited default' and what it assumes."""
    if gpu_id in NIC_SOURCE_BY_GPU:
        return NIC_SOURCE_BY_GPU[gpu_id]
    if gpu_id in NIC_UNCITED_BY_GPU:
        return f"uncited default: {NIC_UNCITED_BY_GPU[gpu_id]}"
    if gpu_id in NIC_GBPS_BY_GPU:
        return "uncited default: one NIC per GPU, as in the vendor's reference 8-GPU server"
    return "uncited default: 100 Gb/s assumed for a card without a reference server in the table"


def nic_note(card: RunCard, gpu: GpuSpec) -> str | None:
    """The plan's assumption line of the inter-node network its cross-node collectives (and a split rollout's weight
    sync) were timed on, whenever the card has more than one node: the NIC per GPU and per node, whether the card
    stated it (``hardware.nic_gbps_per_gpu`` / ``nic_gbps_per_node``) or the catalog default gave it (its source,
    ``nic_default_source``), and the fields to change it. None on one node."""
    hw = card.hardware
    if hw.nodes <= 1:
        return None
    per_gpu_gbps = nic_bytes_per_s(card) * 8 / 1e9
    gpus = hw.gpus_per_node
    why = ("stated (hardware.nic_gbps_per_gpu)" if hw.nic_gbps_per_gpu is not None
           else f"the catalog default for {gpu.id} ({nic_default_source(gpu.id)})")
    if hw.nic_gbps_per_node:
        share_gbps = min(per_gpu_gbps, hw.nic_gbps_per_node / gpus)
        link = (f"{hw.nic_gbps_per_node:g} Gb/s per node, stated (hardware.nic_gbps_per_node), shared by its {gpus} GPUs:"
                f" {share_gbps:g} Gb/s per GPU when all cross at once, at most {per_gpu_gbps:g} Gb/s per GPU, {why}")
    else:
        link = f"{per_gpu_gbps:g} Gb/s per GPU ({per_gpu_gbps * gpus:g} Gb/s per node of {gpus} GPUs), {why}"
    return (f"inter-node network: {hw.nodes} nodes, {link}; set hardware.nic_gbps_per_gpu / hardware.nic_gbps_per_node"
            " to the cluster's")


def nic_bytes_per_s(card: RunCard) -> float:
    """Inter-node bytes per second per GPU per direction: the card's, else the GPU's reference server's."""
    gbps = card.hardware.nic_gbps_per_gpu
    if gbps is None:
        try:
            gid = gpu_of(card).id
        except TrainfitError:
            gid = ""
        gbps = NIC_GBPS_BY_GPU.get(gid, 100)
    return gbps * 1e9 / 8


def fused_kernels(card: RunCard) -> bool:
    """torch.compile, or a run on Megatron-Core's layers (``tensor_parallel_impl: megatron``, at any TP / PP) or a
    tensor/pipeline-parallel one: those run Transformer Engine's fused kernels (norm + linear, RoPE, SwiGLU,
    cross-entropy), which the compile factors stand for. At TP = PP = 1 too: Megatron-Core's TE layer spec puts the
    norm inside ``TELayerNormColumnParallelLinear`` whatever the parallel sizes (NVIDIA/Megatron-LM
    @7094270c6fa1dbc6b2e99072171e3a559ca36d0f, megatron/core/models/gpt/gpt_layer_specs.py l.106-170), so no eager
    RMSNorm chain runs (``compute.te_host`` prices that module's Python). Not a tensor / pipeline-parallel card that
    states ``parallel.model_parallel_kernels: eager``: torchtitan's DTensor plan without torch.compile shards the
    model's own nn.Linear layers (torch.distributed.tensor.parallel.parallelize_module) and runs its nn.RMSNorm,
    F.silu(w1(x)) * w3(x) and RoPE as eager PyTorch ops (pytorch/torchtitan torchtitan/experiments/qwen3/model/model.py
    l.74, 140-145, 253, 299-300 and infra/parallelize.py l.183-195; torchtitan/models/llama3/model/model.py l.69, 237,
    276-277 @d66b72a6ac57be4e7ff749dabe2908a4fcc58a1d), no Transformer Engine: timed as the eager stack.

    Unsloth's layers (``parallel.unsloth_layers``) too: their Triton norm, RoPE and SwiGLU read and write each tensor
    once, as a fused chain does, so the compile memory factor applies; their kernel count is their own
    (``kernel_factor_of``, ``compute.unsloth_layers``).
    """
    return (card.parallel.compile or card.parallel.unsloth_layers
            or card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON
            or (card.parallel.tensor_parallel * card.parallel.pipeline_parallel > 1
                and card.parallel.model_parallel_kernels is not ModelParallelKernels.EAGER))


def stack_of(card: RunCard) -> Stack:
    """The stack the card's step time stands for: Megatron-Core / Transformer Engine (``tensor_parallel_impl:
    megatron``, or a tensor / pipeline-parallel card without torch.compile, timed on those fused kernels:
    ``fused_kernels``), torch.compile, or eager modules. ``fit`` ranks rows of one stack against each other only
    where the card states its stack, and shows each row's."""
    if card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON:
        return Stack.MEGATRON
    if card.parallel.compile:
        return Stack.COMPILE
    if card.parallel.unsloth_layers:
        return Stack.UNSLOTH
    return Stack.MEGATRON if fused_kernels(card) else Stack.EAGER


def verl_fsdp_workers(card: RunCard) -> bool:
    """The card runs verl's FSDP workers (the verl preset on a torch FSDP strategy), not its Megatron ones."""
    return card.preset == "verl" and card.parallel.strategy in FSDP_STRATEGIES


def torch_fsdp_cpu_offload(card: RunCard) -> bool:
    """Whether the trained module runs under torch FSDP's own CPU offload (FSDP1 ``CPUOffload(offload_params=True)``,
    FSDP2 ``CPUOffloadPolicy``): an FSDP strategy with ``parallel.offload: params_and_optimizer`` (torch FSDP has no
    optimizer-only offload), so its shards, gradients and optimizer states live on the host, the training loop's
    optimizer steps there and every forward copies the shards in. Not verl's FSDP workers: they never wrap the actor
    with it (``cpu_offload = None if role == "actor"``, FSDP2 ``offload_policy`` only where the actor's
    ``fsdp_config.offload_policy`` is set, which a card does not state; volcengine/verl verl/workers/fsdp_workers.py
    l.524-526, l.547-552 @b178a3cd56f58b2d502255daba591e92833930a7): its ``param_offload`` / ``optimizer_offload``
    move the actor's state between phases and the optimizer steps on the GPU (``plan.rl_offload``)."""
    par = card.parallel
    return (par.strategy in FSDP_STRATEGIES and par.offload is Offload.PARAMS_AND_OPTIMIZER
            and not verl_fsdp_workers(card))


def step_offload_of(card: RunCard) -> Offload:
    """The offload the optimizer step itself runs under (``compute.training.train_step_time``'s ``offload``: the
    host optimizer step and its PCIe copies): ``parallel.offload``, except on verl's FSDP workers, which run none.
    Their actor's ``param_offload`` / ``optimizer_offload`` load the FSDP shards and the optimizer state back to the
    GPU before ``update_policy`` and offload them after it, so every optimizer step of the update runs
    ``torch.optim.AdamW`` on the GPU (volcengine/verl verl/workers/fsdp_workers.py ``update_actor`` l.893-898 and
    l.928-932, ``load_fsdp_optimizer`` / ``offload_fsdp_optimizer`` verl/utils/fsdp_utils.py l.204-224
    @b178a3cd56f58b2d502255daba591e92833930a7; the engine workers the same through ``BaseEngineCtx._context_switch``,
    verl-project/verl verl/workers/engine/base.py l.314-336 and verl/workers/engine/fsdp/transformer_impl.py
    ``FSDPEngine.to`` l.820-844 @040a28659773fd58eac91cc006d255826c6da03a); the state's trips are priced once, by
    ``plan.rl_offload.trainer_state_offload_phase``. Megatron cards keep ``parallel.offload``: there it stands for
    Megatron-Core's ``optimizer_cpu_offload`` (the hybrid optimizer steps on the host), not verl's phase moves."""
    return Offload.NONE if verl_fsdp_workers(card) else card.parallel.offload


def fsdp_optimizer_offload_refusal(card: RunCard) -> str | None:
    """One line refusing ``parallel.offload: optimizer`` under a torch FSDP strategy outside verl's FSDP workers; None
    otherwise. torch FSDP offloads the parameters with their gradients and optimizer states or nothing: FSDP1's
    ``CPUOffload`` has the one switch ``offload_params``, FSDP2's ``CPUOffloadPolicy`` moves the parameters (and so
    the step) to the host (pytorch/pytorch torch/distributed/fsdp/api.py ``CPUOffload`` l.230-241,
    torch/distributed/fsdp/_fully_shard/_fsdp_api.py ``CPUOffloadPolicy`` l.183, torch 2.13.0), and accelerate's FSDP
    plugin writes only ``fsdp_offload_params`` (``export.accelerate``). The step model has no optimizer-only FSDP
    path to price (DeepSpeed's CPU Adam is ZeRO's). verl's FSDP workers do run one (the actor's
    ``optimizer_offload``, moved between phases: ``plan.rl_offload.verl_fsdp_actor_offload``)."""
    par = card.parallel
    if par.strategy not in FSDP_STRATEGIES or par.offload is not Offload.OPTIMIZER or verl_fsdp_workers(card):
        return None
    return (f"parallel.offload: optimizer is not run by torch FSDP (strategy {par.strategy.value}: it offloads the"
            " parameters, gradients and optimizer states together, or nothing; optimizer-only offload is ZeRO's or"
            " verl's actor optimizer_offload, preset verl); allowed with it: none, params_and_optimizer")


RAY_TRAINER_PRESETS = ("verl", "openrlhf", "nemo-rl", "skyrl", "miles", "slime")
"""Presets whose training ranks are Ray actors (``host_one_thread_per_rank``)."""


def launcher_of(card: RunCard) -> Launcher:
    """The card's process launcher (``loop.launcher``); unset: Ray under ``RAY_TRAINER_PRESETS``, else torchrun (TRL,
    LLaMA-Factory, ms-swift, and any card without a preset, PPO / GRPO included: with no preset naming the RL
    framework TRL's trainer is planned, ``plan.assumptions``, and TRL runs under accelerate / torchrun, not Ray)."""
    if card.loop.launcher is not None:
        return card.loop.launcher
    if card.preset in RAY_TRAINER_PRESETS:
        return Launcher.RAY
    return Launcher.TORCHRUN


def host_one_thread_per_rank(card: RunCard, *, ranks_per_node: int) -> bool:
    """Whether each training rank's host-side torch ops (torch's CPU AdamW under FSDP's CPU offload,
    ``compute.offload.torch_cpu_adamw_seconds``; FSDP2's host gradient add, ``compute.offload.
    fsdp2_host_add_bytes_per_s``) run on one thread: torch's intra-op pool has ``OMP_NUM_THREADS`` threads, the
    host's cores when it is unset, and the launcher (``launcher_of``) decides.

    Ray sets ``OMP_NUM_THREADS`` to the worker's CPU allotment, 1 when none is given, however many actors share the
    node (ray-project/ray python/ray/_private/utils.py ``set_omp_num_threads_if_unset``
    @f0cfdad9e9d7823676609c680034903201203304); SkyRL's training actors ask for one CPU a GPU
    (marin-community/MarinSkyRL skyrl-train/skyrl_train/workers/worker.py l.754-824
    @a559688ccdfe65e44d9f13ddaaccb57aa8a3b0b9). torchrun sets it to 1 only when a node runs more than one process
    (torch 2.13.0 torch/distributed/run.py l.872-884): one rank a node keeps the default pool.
    ``torch.multiprocessing.spawn`` sets none (e.g. AnswerDotAI/fsdp_qlora train.py l.1072
    @e877dda5026dfd964cccdb92a4532da587cbdae0, ``mp.spawn(fsdp_main, ...)``): the default pool."""
    if ranks_per_node < 1:
        raise ValueError("host_one_thread_per_rank: ranks_per_node >= 1")
    launcher = launcher_of(card)
    if launcher is Launcher.RAY:
        return True
    return launcher is Launcher.TORCHRUN and ranks_per_node > 1


def nemo_rl_dtensor_packed(card: RunCard) -> bool:
    """NeMo RL's DTensor (FSDP2) policy with sequence packing, which loads the model with
    ``attn_implementation="flash_attention_2"`` (the card's ``attention: flash``; NVIDIA-NeMo/RL
    nemo_rl/models/policy/dtensor_policy_worker.py l.181-199 @27d0af945b96c5bf9fa928bf45fd1a6ce016632d, v0.3.1; v0.3.0
    @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf the same). Without packing it keeps transformers' default (SDPA)."""
    return nemo_rl_dtensor(card) and card.attention is Attention.FLASH


LLM_FOUNDRY_PRECOMPUTED_PADDING = (0, 5)
"""llm-foundry computes flash attention's padding info once per model forward from v0.5.0 on
(``compute.inventory.UNPAD_CALL_SYNCS``): "Precompute flash attention padding info (#880)", 2024-01-17,
https://github.com/mosaicml/llm-foundry/commit/6dcc0d84b9cc7e5ba3b3f8148cf8459e298e2ba1 (the oldest release tag
containing it is v0.5.0; v0.4.0 does not)."""


def llm_foundry_unpad_syncs(card: RunCard) -> bool:
    """A ``software`` pin of llm-foundry before v0.5.0 (``0.4.0``, ``==0.3.0``): its ``flash_attn_fn`` unpads q, k
    and v in every attention call, with their host syncs (``compute.inventory.UNPAD_CALL_SYNCS``); only models with
    ``ModelSpec.unpadded_attention`` run it. No pin, or an unparsable one: False."""
    return pin_before((card.software.model_extra or {}).get("llm-foundry"), LLM_FOUNDRY_PRECOMPUTED_PADDING)


def nemo_rl_dtensor(card: RunCard) -> bool:
    """NeMo RL's DTensor policy (the nemo-rl preset on a torch FSDP strategy): every decoder layer and the whole model
    are FSDP2 modules with ``MixedPrecisionPolicy(output_dtype=torch.float32)`` (NVIDIA-NeMo/RL
    nemo_rl/models/dtensor/parallelize.py l.464-488 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf), whose boundary casts
    every pass pays (``compute.fsdp2_output_cast``). ``output_dtype`` exists only in FSDP2's
    ``MixedPrecisionPolicy``: a card with ``fsdp_version`` fsdp1 does not take it (``parallel.fsdp2``)."""
    return card.preset == "nemo-rl" and card.parallel.fsdp2


def nemo_rl_pg_loss_of(card: RunCard) -> str:
    """NeMo RL's GRPO update on packed sequences runs its loss once per sequence (``SequencePackingLossWrapper``,
    ``compute.inventory.NEMO_RL_PG_LOSS``): "dtensor" for the DTensor policy at tensor parallel 1 (a plain logits
    tensor), "megatron" for the Megatron policy (the non-FSDP strategies under the preset) and for the DTensor policy
    at tensor parallel > 1, whose vocabulary-sharded DTensor logits take the same ``DistributedLogprob`` on the local
    shard after the same fp32 cast (``ClippedPGLossFn`` -> ``get_logprobs_from_vocab_parallel_logits`` ->
    ``dtensor_from_parallel_logits_to_logprobs``, nemo_rl/models/dtensor/parallelize.py and
    nemo_rl/distributed/model_utils.py l.123-189 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf; DTensor's own dispatch
    on the host not counted); "" otherwise (no packing, other methods, other frameworks)."""
    if card.preset != "nemo-rl" or card.method is not Method.GRPO:
        return ""
    if card.rollout.packed_sequences is False:
        return ""
    if card.parallel.strategy in FSDP_STRATEGIES and card.parallel.tensor_parallel == 1:
        return "dtensor"
    return "megatron"


def packed_flash_syncs(card: RunCard) -> bool:
    """verl's FSDP workers: transformers models under flash attention, fed packed rows with ``position_ids`` only,
    so every attention call synchronises the host (``compute.inventory.PACKED_FLASH_FORWARD_SYNCS``). verl's
    Megatron workers (zero1 cards) read the lengths to the host once per micro-batch and hand Transformer Engine a
    ``PackedSeqParams`` (verl/models/mcore/util.py ``preprocess_packed_seqs`` l.25-103, volcengine/verl @b178a3cd).

    NeMo RL's packed DTensor passes sync at the same places (``nemo_rl_dtensor_packed``). ``get_logprobs`` and
    ``train`` call the model with ``position_ids`` that restart at every packed sequence and hand the precomputed
    ``cu_seqlens`` as one keyword, ``flash_attn_kwargs=...`` (dtensor_policy_worker.py l.940-946 and l.654-661
    @27d0af94). transformers 4.52.4, the version NeMo RL's uv.lock pins at v0.3.0 and v0.3.1 (l.5095-5096), takes it
    into ``Qwen2Model.forward``'s ``**flash_attn_kwargs`` (``LlamaModel``'s too: modeling_qwen2.py l.383,
    modeling_llama.py l.400) as a single nested entry. That entry reaches ``_flash_attention_forward``'s ``**kwargs``
    and nothing reads it; its ``cu_seq_lens_q`` stays None (modeling_flash_attention_utils.py l.279-298). With
    ``attention_mask`` None there (the model drops an all-ones mask under flash attention: modeling_qwen2.py l.474-485,
    modeling_llama.py l.491-494), the packed
    ``position_ids`` take the ``prepare_fa2_from_position_ids`` branch (l.377-385, l.216-229), the lines the verl
    figure counts."""
    return verl_fsdp_workers(card) or nemo_rl_dtensor_packed(card)


def activation_offload_of(card: RunCard, shard: ModelSpec, rates: DeviceRates, *, micro_batch_size: int,
                          seq_len: int) -> tuple[int, float, float]:
    """(layers, mean saved bytes of one offloaded layer of one micro-batch, host copy bytes/s) of Transformer Engine's
    partial activation offload (``parallel.activation_offload_layers``; ``compute.offload.layer_offload_stall_seconds``);
    (0, 0, 0) without it. The bytes are the memory model's saved activations of the rank's layers
    (``memory.activations.activation_bytes`` of the rank's shard, as ``plan.terms.step_terms``); the rate is
    ``compute.offload.host_copy_bytes_per_s`` with every GPU of the host copying at once, as the trainer's other
    host copies (``plan.rl_offload.host_copy_rates``)."""
    n = card.parallel.activation_offload_layers
    if not n:
        return 0, 0.0, 0.0
    from trainfit.compute.offload import host_copy_bytes_per_s
    from trainfit.memory.activations import activation_bytes
    from trainfit.plan.terms import (
        fp8_linear_input_bytes,
        glu_input_bytes,
        gptq_torch_dequant,
        hf_sdpa_of,
        padding_mask_of,
        sac_saves_linear_outputs,
    )

    act = activation_bytes(shard, micro_batch_size=micro_batch_size, seq_len=seq_len, attention=card.attention,
                           trainable=trainable_spec(card),
                           compute_dtype_bytes=compute_dtype_bytes(card),
                           selective=card.parallel.selective_checkpointing, compiled=card.parallel.compile,
                           linear_input_bytes=fp8_linear_input_bytes(card),
                           sac_saves_linear_outputs=sac_saves_linear_outputs(card),
                           sac_saves_attention=card.parallel.sac_saves_attention,
                           bf16_layers=(card.precision.bf16_first_layers, card.precision.bf16_last_layers),
                           hf_sdpa=hf_sdpa_of(card),
                           gptq_torch_dequant=gptq_torch_dequant(card),
                           padding_mask=padding_mask_of(card), glu_input_bytes=glu_input_bytes(card, shard))
    n = min(n, len(act.per_layer))
    rate = host_copy_bytes_per_s(pcie_bytes_per_s=rates.pcie_bytes_per_s,
                                 host_memory_bytes_per_s=rates.host_memory_bytes_per_s,
                                 gpus_per_node=train_nodes(card)[1])
    return n, sum(act.per_layer[:n]) / max(1, n), rate


def offloaded_checkpoint_copy_of(card: RunCard, shard: ModelSpec, rates: DeviceRates, *, micro_batch_size: int,
                                 seq_len: int) -> float:
    """Seconds a micro-batch's update waits on Unsloth's offloaded checkpoint copies (``preset: unsloth`` with
    ``parallel.activation_offload``, which the preset sets: ``methods.presets.unsloth_activation_offload``), 0 otherwise:
    one layer input (micro-batch x tokens x hidden in the activation dtype) a layer each way, at the host copy rate
    (``compute.offload.offloaded_checkpoint_copy_seconds``). The log-prob passes are not priced: whether their forwards
    run through the checkpointer (it is used when the model is in training mode, unslothai/unsloth
    @027b5100c7492bce025fe2f03681f440843e4666 unsloth/models/llama.py l.748-753) was not read further."""
    par = card.parallel
    if card.preset != "unsloth" or not par.activation_offload or par.activation_offload_layers or not par.checkpoints_layers:
        return 0.0
    from trainfit.compute.offload import host_copy_bytes_per_s, offloaded_checkpoint_copy_seconds

    rate = host_copy_bytes_per_s(pcie_bytes_per_s=rates.pcie_bytes_per_s,
                                 host_memory_bytes_per_s=rates.host_memory_bytes_per_s,
                                 gpus_per_node=train_nodes(card)[1])
    layer_input = micro_batch_size * seq_len * shard.hidden_size * compute_dtype_bytes(card)
    return offloaded_checkpoint_copy_seconds(layers=shard.num_layers, layer_input_bytes=layer_input,
                                             copy_bytes_per_s=rate)


def rates_of(card: RunCard, gpu: GpuSpec, rates: DeviceRates | None) -> DeviceRates:
    """The rates the card's step is timed at: the calibration's (``rates``) or the published defaults, with what the
    card's ``hardware`` section states of its own hosts. ``hardware.interconnect`` is applied here and nowhere else:
    its link's bus bandwidth, peer-to-peer and NVLink flags replace the catalog's (``compute.rates.stated_link_rates``,
    the fractions ``default_rates`` takes for the catalog's link), except a bus bandwidth a calibration file measured
    (``calibrated_link_bus``). The node link's rate is that of a ring over the job's ``hardware.gpus_per_node`` GPUs:
    on bridged PCIe cards with more of them than one bridge group, the PCIe hop between groups
    (``compute.rates.link_rates``; a tensor-parallel group inside one bridge group keeps the bridge:
    ``compute.rates.group_rates``). A split RL node's training group restates it for its own GPUs in a node
    (``plan.rl_time.training_group_rates``), the engine's tensor-parallel group for its size
    (``plan.rl_generation``); transfers between the two groups keep it. The memory plan reads no link
    (``link_note``)."""
    node_gpus = card.hardware.gpus_per_node
    r = rates or default_rates(gpu, node_gpus=node_gpus)
    if card.hardware.interconnect is not None or (rates is not None and gpu.id in BRIDGE_GROUP_GPUS):
        # a calibration's rates start from default_rates(gpu) (one bridge group): restated for the job's GPUs
        r = stated_link_rates(r, gpu, link=card.hardware.interconnect or catalog_link(gpu), node_gpus=node_gpus,
                              calibrated_bus=calibrated_link_bus(gpu, rates))
    if card.hardware.host_memory_gbps:
        r = replace(r, host_memory_bytes_per_s=card.hardware.host_memory_gbps * 1e9)
    if card.hardware.host_numa_nodes:
        r = replace(r, host_numa_nodes=card.hardware.host_numa_nodes)
    if card.hardware.nic_gbps_per_node:
        r = replace(r, node_nic_bytes_per_s=card.hardware.nic_gbps_per_node * 1e9 / 8)
    if card.precision.tf32 and gpu.tf32_dense_flops_per_s and gpu.half_dense_flops_per_s:
        # fp32 GEMMs on the TF32 tensor cores at the fraction of its peak the card's bf16 GEMMs sustain (the same
        # tensor-core pipes; no TF32 sweep is read): the card validator refused a GPU without a TF32 figure
        r = replace(r, tf32_matmul_flops_per_s=gpu.tf32_dense_flops_per_s
                    * r.matmul_flops_per_s / gpu.half_dense_flops_per_s)
    return r


def calibrated_link_bus(gpu: GpuSpec, rates: DeviceRates | None) -> bool:
    """Whether a calibration's ``rates`` carry an intra-node bus bandwidth of their own (a measurement), not the
    catalog link's default."""
    return rates is not None and rates.intra_node_bus_bytes_per_s != default_rates(gpu).intra_node_bus_bytes_per_s


def link_note(card: RunCard, gpu: GpuSpec, r: DeviceRates, *, calibration: DeviceRates | None = None) -> str | None:
    """The plan's assumption line of the node link its collectives were timed on (``r``: ``rates_of``'s result;
    ``calibration``: the calibration's rates it started from), and why: stated (``hardware.interconnect``) or the GPU
    catalog's (``compute.rates.catalog_link``); None on one GPU. A card stating pcie on a GeForce kind whose stock
    driver refuses PCIe peer-to-peer (``compute.rates.stock_driver_refuses_pcie_p2p``: an RTX 3090 without its
    bridge, an RTX 4090) is planned as stated, and the line says that assumes a patched driver.

    Memory reads no link: NCCL's buffers are planned as one communicator with a fixed ring of
    ``memory.overhead.NCCL_CHANNELS`` channels whatever the transport (``memory.overhead.overhead_bytes``), so a
    stated link moves the step time only; a card stating pcie_no_p2p plans the memory a card whose catalog link is
    pcie_no_p2p (an RTX 4090) does, so memory and time agree for every link. Not modelled, for stated and catalog
    links alike: NCCL's SHM transport keeps its send / receive buffers (the protocols' ``buffSizes``) in host shared
    memory (``shmSendSetup`` / ``shmRecvSetup`` size them, ``ncclShmOpen`` maps them: NVIDIA/nccl
    src/transport/shm.cc @5067397c2676d5aed50042fc39e5c8ee96eb0027), so without peer-to-peer the device holds less than
    the term's 32 MiB of ring buffers (within the term's own spread: NCCL picks 2-32 channels by topology)."""
    if card.world_size <= 1:
        return None
    link = card.hardware.interconnect
    shown = link or catalog_link(gpu)
    why = ("stated (hardware.interconnect)" if link is not None
           else f"the GPU catalog's link for {gpu.id} (hardware.interconnect unset)")
    measured = " (the calibration's measurement)" if calibrated_link_bus(gpu, calibration) else ""
    transport = (link_label(gpu) + ("" if r.nvlink else ", bridged in pairs") if shown is Interconnect.NVLINK
                 else "PCIe peer-to-peer" if r.p2p else "PCIe without peer-to-peer, through host memory")
    if shown is Interconnect.NVLINK and r.bridge_group_gpus:  # the ring crosses PCIe between bridge groups
        transport = (f"{link_label(gpu)} bridges in groups of {r.bridge_group_gpus}, the ring over the node's GPUs"
                     f" crossing PCIe{' without peer-to-peer' if not r.p2p else ''} between them")
    patched = ("; PCIe peer-to-peer on this GeForce card needs a patched open kernel module (the stock driver"
               " refuses it: state pcie_no_p2p otherwise)"
               if link is Interconnect.PCIE and stock_driver_refuses_pcie_p2p(gpu) else "")
    return (f"node link: {shown.value} ({transport}), {why}; NCCL bus bandwidth in a node"
            f" {r.intra_node_bus_bytes_per_s / 1e9:.0f} GB/s{measured}{patched}")


def _model_seq_len(card: RunCard) -> int:
    """Tokens per sequence through the model: prompt tuning prepends its virtual tokens."""
    extra = card.prompt_tuning.num_virtual_tokens if card.scope is Scope.PROMPT_TUNING else 0
    return card.batch.seq_len + (extra or 0)


def adapter_of(card: RunCard, spec: ModelSpec) -> Adapter | None:
    if card.scope is Scope.FULL:
        return None
    if card.scope in (Scope.IA3, Scope.PROMPT_TUNING):  # a frozen base with gradients flowing, no LoRA GEMMs
        return Adapter(rank=1, targets=())
    if card.scope is Scope.PREFIX_TUNING:  # the same, attention over the prefix too (compute.prefix_tuning)
        return Adapter(rank=1, targets=(), prefix_tokens=card.prefix_tuning.num_virtual_tokens or 0)
    lo = card.lora
    return Adapter(rank=lo.rank, targets=card.lora_targets, dropout=lo.dropout,
                   dropout_post=lo.dropout_position is LoraDropoutPosition.POST, nf4_base=card.scope is Scope.QLORA,
                   gptq_torch_dequant=card.scope is Scope.QLORA and lo.dequant is QloraDequant.AUTOGPTQ_TORCH,
                   nf4_torch_ops=card.scope is Scope.QLORA and (lo.dequant is QloraDequant.TORCHAO
                                                                 or card.preset == "torchtune"),
                   adapter_dtype_bytes=4 if lo.adapter_dtype is AdapterDtype.FP32 else 2,
                   # bitsandbytes' Linear4bit: the dtype its dequantised GEMMs run in (spec.enums.Nf4ComputeDtype)
                   base_dtype_bytes=4 if card.precision.nf4_compute_dtype is Nf4ComputeDtype.FP32 else 2,
                   # PEFT's prepare_model_for_kbit_training: fp32 stream, casts around the 4-bit linears
                   kbit_upcast=card.scope is Scope.QLORA and card.lora.prepare_kbit is not KbitPrepare.NONE,
                   saved_head="lm_head" in lo.modules_to_save, saved_embedding="embed_tokens" in lo.modules_to_save,
                   # prime-rl's unmerged grouped expert adapters (compute.inventory.GROUPED_EXPERT_LORA_BYTES)
                   grouped_expert_adapters=lo.expert_adapters is ExpertAdapters.GROUPED,
                   # host syncs in every adapted linear's forward call (prime-rl's MultiLoRALinear)
                   call_syncs=lo.call_syncs,
                   # DeepSpeed-Chat (its Hybrid Engine rollouts) adapts with its own one-module LinearLayer_LoRA
                   single_module_lora=(card.rollout is not None
                                       and card.rollout.engine is RolloutEngine.DEEPSPEED_HYBRID),
                   # transformers < 5: PEFT wraps a MoE family's expert and router linears as modules of their own
                   transformers_v4=transformers_v4_modules(card))


def saved_trained(card: RunCard, spec: ModelSpec) -> tuple[float, float]:
    """(parameters, tensors) the optimizer steps beside a LoRA adapter for ``lora.modules_to_save``: PEFT's
    ModulesToSaveWrapper deep-copies each named module and marks the copy trainable (peft 0.13.2 wheel,
    peft/utils/other.py l.242-263: ``copy.deepcopy(self.original_module)``, ``requires_grad_(True)``), so AdamW,
    the gradient clip and zero_grad walk its full weight (one tensor per module). The memory terms count the copy
    already (``plan.terms``); the step time did not."""
    if card.lora is None or not card.lora.modules_to_save:
        return 0.0, 0.0
    from trainfit.memory.lora import saved_module_params

    sizes = saved_module_params(spec, tuple(card.lora.modules_to_save))
    return float(sum(sizes)) * count_scale(spec), float(sum(1 for n in sizes if n))


def lora_trained_tensors(spec: ModelSpec, lora, *, grouped_expert_adapters: bool = False) -> float:
    """Trained tensors (parameters the optimizer, the gradient norm and ZeRO-3's per-parameter hooks loop over) of a
    LoRA adapter on ``spec``: an A and a B per wrapped linear module (``lora_A`` / ``lora_B``, one ``nn.Linear`` each),
    so two per targeted group and layer, and per expert where each expert is a module of its own (transformers 4.x:
    the ``_v4_groups`` rows, ``experts`` 1 and ``count`` over layers x experts).

    A stacked 3-D expert parameter (transformers 5, ``LinearGroup.is_fused_experts``) is wrapped once, by PEFT's
    ``ParamWrapper``, whose A and B hold every expert's factors in one tensor each: ``self.lora_A[adapter_name] =
    nn.Linear(self.in_features, r * self.num_experts, bias=False)`` and ``self.lora_B[adapter_name] =
    nn.Linear(r * self.num_experts, self.out_features, bias=lora_bias)`` (peft 0.21.2 wheel,
    ``peft/tuners/lora/layer.py`` ``ParamWrapper.update_layer`` l.2455-2456; ``get_delta_weight`` l.2534-2535 reshapes
    them to ``(experts, rank, in)`` and ``(experts, out, rank)``): two tensors per stack and layer, not two per
    expert; the parameters are the same (``r * E * (in + out)``). ``grouped_expert_adapters`` (``lora.expert_adapters:
    grouped``, prime-rl's ``MultiLoRAGroupedExperts``): an ``[E, r, in]`` A and an ``[E, out, r]`` B per projection,
    ``w1``, ``w3`` and ``w2`` apart (PrimeIntellect-ai/prime-rl src/prime_rl/trainer/models/layers/lora/multi_moe.py
    l.92-100 @d8f290ef0358a804f1912bd29ea1b37cc56894b4), so the fused ``gate_up_proj`` group
    (``lora_rank_multiplier`` 2) is two pairs."""
    n = 0
    for g in targeted_groups(spec, lora):
        if g.is_fused_experts:
            n += 2 * g.count * (g.lora_rank_multiplier if grouped_expert_adapters else 1)
        else:
            n += 2 * g.count * g.experts
    return float(n)


def _trained(card: RunCard, spec: ModelSpec) -> tuple[float, float, OptimizerSpec]:
    """(trained parameters, trained tensors, optimizer) of the card's model."""
    prec = card.precision
    trainable = trainable_spec(card)
    from trainfit.plan.terms import variant_trained

    variant = variant_trained(card, spec)  # DoRA, (IA)^3, prompt tuning
    if variant is not None:
        params, tensors = variant
    elif trainable.lora is not None:
        params = lora_trainable_params(spec, trainable.lora) * count_scale(spec)
        tensors = lora_trained_tensors(spec, trainable.lora,
                                       grouped_expert_adapters=card.lora.expert_adapters is ExpertAdapters.GROUPED)
        params, tensors = params + (saved := saved_trained(card, spec))[0], tensors + saved[1]
    else:
        params = float(total_params(spec))
        tensors = float(sum(t.count for t in param_tensors(spec)))
    w, g, master, s = trained_dtype_bytes(card)
    master, s, _ = zero_master_states(card, card.parallel.strategy, train_bytes=w, use_master=master, state_bytes=s)
    if prec.quantized_params and not mxfp8_params_gather_bf16(card) and variant is None and trainable.lora is None:
        # fp8 primary weights: the dense linears' weights are 1 B (Megatron's uint8 parameter buffer,
        # param_and_grad_buffer.py l.921-923 @d98e8a64): the step writes and the all-gather moves their mean bytes
        from trainfit.memory.weights import quantized_linear_params

        share = quantized_linear_params(spec) / max(1, total_params(spec))
        w = w * (1.0 - share) + (NVFP4_PARAM_BYTES if prec.fp4_params else FP8_PARAM_BYTES) * share
    opt = OptimizerSpec(name=prec.optimizer.value, impl=prec.optimizer_impl.value, weight_bytes=w, grad_bytes=g,
                        state_bytes=s, master=master, clip=True, in_backward=prec.optimizer_in_backward)
    return params, tensors, opt


FP8_PARAM_BYTES = 1.0
"""An fp8 primary weight's element (``memory.fp8``)."""
NVFP4_PARAM_BYTES = 0.5
"""An NVFP4 primary weight's element in Megatron-Core's packed parameter buffer (``nvfp4_packed_numel``: numel / 2,
NVIDIA/Megatron-LM megatron/core/distributed/param_and_grad_buffer.py l.1100-1130 @d98e8a64ddf34856e74b24714e3bedb2f5a39553):
what the step writes and the all-gather moves; TE then builds the column-wise copy by a 16x16-block transpose
(``post_all_gather_processing`` -> ``_nvfp4_2d_multi_tensor_transpose``, NVIDIA/TransformerEngine
transformer_engine/pytorch/tensor/utils.py l.1404-1450 @d0067d0da6cb01811b8072a7d304f0e00344ce2b; its ~1.1 B per weight
once per step is not timed)."""


def mxfp8_params_gather_bf16(card: RunCard) -> bool:
    """MXFP8 primary weights (``fp8_params`` with ``fp8_recipe: mxfp8``): Megatron-Core all-gathers them in bf16
    through the gradient buffer and casts the gathered bf16 into the MXFP8 weights (row- and column-wise) once per
    step: ``_post_param_sync`` under ``reuse_grad_buf_for_mxfp8_param_ag`` ("Cast the bucket in one call",
    ``copy_tensors_to_quantized_params``; NVIDIA/Megatron-LM megatron/core/distributed/param_and_grad_buffer.py
    l.301-330 @d98e8a64ddf34856e74b24714e3bedb2f5a39553), which Megatron-Bridge's ``bf16_with_mxfp8_mixed`` sets
    with ``fp8_param_gather`` (src/megatron/bridge/training/mixed_precision.py l.255-267
    @067f987df03b8355b03192d88d70f1709fedf51a). So the step writes and the all-gather moves bf16, and the weights are
    cast once per step as TE's weight cache casts them: timed as mxfp8 without primary weights."""
    prec = card.precision
    return prec.fp8_params and prec.fp8_recipe is Fp8Recipe.MXFP8


def _fp8_non_tn(card: RunCard) -> bool:
    """Whether fp8 primary weights skip TE's post-all-gather transpose (``plan.terms.fp8_card_non_tn_gemm``)."""
    if not card.precision.quantized_params:
        return False
    from trainfit.plan.terms import fp8_card_non_tn_gemm

    return fp8_card_non_tn_gemm(card)


def rank_spec(spec: ModelSpec, *, tp: int, pp: int, ep: int, etp: int, first: int | None = None,
              last: int | None = None, layout: tuple[int, ...] | None = None) -> ModelSpec:
    """One model-parallel rank's shard of ``spec`` (Megatron layout): attention heads, MLP width and the
    vocabulary split by ``tp`` (kv heads fewer than ``tp`` are replicated), the layers of the pipeline's
    largest stage (the slowest sets the pace; ``first`` / ``last``: uneven end stages,
    ``trainfit.memory.pipeline.stage_layer_counts``; among equally large stages the one with the most MoE layers,
    ``stage_layers``; ``layout``: ``parallel.pipeline_layout``, the rank whose layers and head hold the most work),
    the experts split by ``ep`` (each expert's width by ``etp``)."""
    if tp * pp * ep * etp == 1:
        return spec
    window = stage_layers(spec, pp, first=first, last=last, layout=layout)
    layers = len(window)
    la = spec.linear_attention
    if la is not None and tp > 1:
        la = replace(la, num_key_heads=max(1, la.num_key_heads // tp), num_value_heads=max(1, la.num_value_heads // tp))
    moe = spec.moe
    if moe is not None:
        # the stage's own dense / MoE layers, re-indexed from 0 (every other layer of the window is MoE)
        moe = replace(moe, num_experts=max(1, moe.num_experts // ep),
                      expert_intermediate_size=max(1, moe.expert_intermediate_size // etp),
                      shared_expert_intermediate_size=moe.shared_expert_intermediate_size // tp, sparse_step=1,
                      mlp_only_layers=tuple(j for j, i in enumerate(window) if not moe.is_moe_layer(i)))
    return replace(
        spec, name=f"{spec.name} [tp{tp} pp{pp} ep{ep} shard]", num_attention_heads=max(1, spec.num_attention_heads // tp),
        num_kv_heads=max(1, spec.num_kv_heads // tp), intermediate_size=max(1, ceil(spec.intermediate_size / tp)),
        vocab_size=ceil(spec.vocab_size / tp), num_layers=layers,
        layer_types=tuple(spec.layer_types[i] for i in window) if spec.layer_types else (), linear_attention=la,
        sliding_layers=tuple(j for j, i in enumerate(window) if i in spec.sliding_layers),
        moe=moe, params_override=None,
    )


def stage_layers(spec: ModelSpec, pp: int, *, first: int | None = None, last: int | None = None,
                 layout: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """The decoder layers of the pipeline stage ``rank_spec`` times: the largest (``first`` / ``last``: uneven end
    stages, ``memory.pipeline.stage_layer_counts``; otherwise ``ceil(layers / pp)``), and among equally large ones
    the one with the most MoE layers (a model whose first layers are dense, DeepSeek-V3's three, has its routed
    layers, their all-to-alls and their expert gradients on the later stages). Contiguous windows, one per stage
    (interleaved virtual stages are timed as one contiguous block).

    With a ``layout`` (``parallel.pipeline_layout``: decoder layers per virtual stage, stage i on rank i % pp) the
    ranks' chunks differ in size and content, so the rank is picked by its work: the matmul parameters one token
    meets in its layers (attention, dense MLP, router and shared experts whole, the routed experts at top_k / E:
    ``layout_rank_work``) plus the output head's ``vocab x hidden`` on the last rank; ties go to the rank with the
    most MoE layers, then the first. Its layers (all its chunks) are returned; a pick other than the last rank is
    timed without the head (``timed_rank_holds_head``)."""
    n = spec.num_layers
    if pp <= 1:
        return tuple(range(n))
    if layout is not None:
        from trainfit.memory.pipeline import layout_problem, layout_rank_chunks

        why = layout_problem(n, layout, pp)
        if why:
            raise CardError(f"parallel.pipeline_layout: {why} ({spec.name})")
        ranks = [tuple(i for ch in chunks for i in ch) for chunks in layout_rank_chunks(layout, pp)]
        return ranks[layout_timed_rank(spec, pp, layout)]
    if first is not None or last is not None:
        from trainfit.memory.pipeline import stage_layer_counts

        counts = stage_layer_counts(n, pp, first=first, last=last)
    else:
        each = ceil(n / pp)
        counts = tuple(min(each, max(0, n - s * each)) for s in range(pp))
    starts = [sum(counts[:s]) for s in range(pp)]
    moe = spec.moe

    def weight(s: int) -> tuple[int, int]:
        window = range(starts[s], min(n, starts[s] + counts[s]))
        return len(window), sum(1 for i in window if moe is not None and moe.is_moe_layer(i))

    best = max(range(pp), key=weight)  # the first of the heaviest
    return tuple(range(starts[best], min(n, starts[best] + counts[best])))


def layout_timed_rank(spec: ModelSpec, pp: int, layout: tuple[int, ...]) -> int:
    """The pipeline rank a ``parallel.pipeline_layout`` times (``stage_layers``): the most work
    (``layout_rank_work``), then the most MoE layers, then the first. Assumes the layout was checked."""
    from trainfit.memory.pipeline import layout_rank_chunks

    ranks = [tuple(i for ch in chunks for i in ch) for chunks in layout_rank_chunks(layout, pp)]
    work = layout_rank_work(spec, ranks)
    moe = spec.moe
    return max(range(pp), key=lambda s: (work[s], sum(1 for i in ranks[s] if moe is not None and moe.is_moe_layer(i))))


def timed_rank_holds_head(spec: ModelSpec, pp: int, layout: tuple[int, ...] | None) -> bool:
    """Whether the pipeline rank ``rank_spec`` times holds the final norm, the output head and the loss (the last
    rank). Only a ``parallel.pipeline_layout`` picks its rank by work, head included (``layout_timed_rank``): where a
    rank without the head has more (nanotron's cost-balanced split gives the head's rank fewer layers,
    ``memory.pipeline.nanotron_layout``), that rank sets the pace and is timed without a head it does not run. Even
    and first / last splits time the largest stage with the head, as before (an upper bound by one head where the
    largest is not the last)."""
    from trainfit.memory.pipeline import layout_problem

    if pp <= 1 or layout is None or layout_problem(spec.num_layers, layout, pp):
        return True
    return layout_timed_rank(spec, pp, layout) == pp - 1


def layout_rank_work(spec: ModelSpec, ranks: list[tuple[int, ...]]) -> tuple[float, ...]:
    """Per pipeline rank (its decoder layers), the parameters one token multiplies through: each layer's
    parameters with its routed experts at ``experts_per_token / num_experts`` of them, plus the output head
    (``head_outputs or vocab`` x hidden, tied or not) on the last rank. A proxy of the rank's matmul FLOPs
    (2 per parameter per token forward); the embedding is a lookup and adds none."""
    pb = param_breakdown(spec)
    moe = spec.moe
    share = moe.experts_per_token / moe.num_experts if moe is not None and moe.num_experts else 0.0

    def layer(i: int) -> float:
        routed = routed_expert_layer_params(spec, i) if moe is not None else 0
        return pb.per_layer[i] - routed + routed * share

    head = float((spec.head_outputs or spec.vocab_size) * spec.hidden_size)
    return tuple(sum(layer(i) for i in r) + (head if s == len(ranks) - 1 else 0.0) for s, r in enumerate(ranks))


def model_parallel_of(card: RunCard, spec: ModelSpec, r: DeviceRates, *, gpus_per_node: int) -> ModelParallel:
    par = card.parallel
    nic = nic_bytes_per_s(card)

    def bus(span: int) -> float:
        # a ring over ``span`` consecutive ranks (tensor, tensor x context, expert tensor x expert parallel: the
        # innermost mesh dimensions) runs on NVLink when every such group lies in one NVLink domain
        # (``gpus_per_node``: nvlink_gpus_per_node); one that spans domains leaves each through the NICs of its GPUs
        # there, one NCCL channel per NIC (collectives.domain_ranks, collectives.ring_bus_bytes_per_s)
        # on bridged PCIe cards a group's ranks in a node that fit one bridge group run on the bridge
        # (compute.rates.group_rates)
        local = coll.domain_ranks(ranks=span, domain_gpus=gpus_per_node)
        return coll.ring_bus_bytes_per_s(rates=group_rates(r, ranks=local), crosses_nodes=local < span,
                                         nic_bytes_per_s=nic, local_ranks=local)

    tp, cp, ep = par.tensor_parallel, par.context_parallel, par.expert_parallel
    # an expert-parallel group's ranks are expert_tensor_parallel apart (Megatron-Core orders the expert ranks
    # tp-cp-ep-dp-pp with tp = expert_tensor_parallel): its ranks in one NVLink domain (collectives.domain_ranks)
    ep_local = coll.domain_ranks(ranks=ep, stride=par.expert_tensor_parallel, domain_gpus=gpus_per_node)
    # a pipeline group is pp ranks world / pp apart; a send between domains is one GPU to one GPU over its NIC
    pp = par.pipeline_parallel
    pp_local = coll.domain_ranks(ranks=pp, stride=max(1, card.world_size // pp), domain_gpus=gpus_per_node)
    node_ranks = max(1, min(ep, gpus_per_node // par.expert_tensor_parallel))  # the group's ranks a node can hold
    ep_rates = group_rates(r, ranks=ep_local * par.expert_tensor_parallel)
    if (par.moe_dispatcher is MoeDispatcher.DEEPEP and spec.moe is not None and ep_local < ep
            and (ep_local < node_ranks or ep % node_ranks)):
        raise CardError(f"parallel.moe_dispatcher: deepep needs the expert-parallel group to fill whole nodes, but"
                        f" expert_parallel {ep} spans {node_ranks} ranks per node; allowed: alltoall, or"
                        f" expert_parallel up to {node_ranks} or a multiple of it")
    return ModelParallel(
        tp=tp, sequence_parallel=par.sequence_parallel, cp=cp,
        ulysses=par.context_parallel_kind is ContextParallelKind.ULYSSES, pp=par.pipeline_parallel,
        virtual_stages=par.virtual_stages, ep=ep, etp=par.expert_tensor_parallel, full_q_dim=spec.q_dim,
        full_kv_dim=spec.kv_dim,
        tp_bus_bytes_per_s=bus(tp), cp_bus_bytes_per_s=bus(tp * cp),
        tp_nodes=coll.group_nodes(ranks=tp, ranks_per_node=coll.domain_ranks(ranks=tp, domain_gpus=gpus_per_node)),
        # the CP group's ranks tp apart, the pipeline's world / pp apart (collectives.domain_ranks): NCCL's latencies
        cp_nodes=coll.group_nodes(ranks=cp, ranks_per_node=coll.domain_ranks(ranks=cp, stride=tp,
                                                                             domain_gpus=gpus_per_node)),
        pp_nodes=coll.group_nodes(ranks=pp, ranks_per_node=pp_local),
        # the share of the all-to-all bound for the rank's own NVLink domain moves over NVLink, the rest over each
        # GPU's NIC
        # on bridged PCIe cards an expert group whose ranks in a node (ep_local, expert_tensor_parallel apart) lie in
        # one bridge group exchanges over the bridge (compute.rates.group_rates over the span they cover)
        ep_bus_bytes_per_s=coll.all_to_all_bus_bytes_per_s(rates=ep_rates, ranks=ep, ranks_in_node=ep_local,
                                                           nic_bytes_per_s=nic),
        # a send between domains is one GPU to one GPU over its NIC, shared on a node with fewer NICs than GPUs by
        # every rank of the node whose next stage is off the node, which send together (pipeline_senders_per_node,
        # collectives.p2p_bytes_per_s)
        pp_bytes_per_s=coll.p2p_bytes_per_s(rates=r, crosses_nodes=pp_local < pp, nic_bytes_per_s=nic,
                                            senders_per_node=pipeline_senders_per_node(
                                                world_size=card.world_size, pp=pp,
                                                gpus_per_node=card.hardware.gpus_per_node)),
        tp_comm_overlap=par.tp_comm_overlap, pp_scatter_gather=par.pipeline_scatter_gather,
        # Megatron-Core's layers (Transformer Engine's LayerNormLinear / Linear): the sequence-parallel backward's
        # async re-gather and reduce-scatter, the all-gathers at the quantised width (compute.model_parallel)
        sp_async_backward=par.tensor_parallel_impl is TensorParallelImpl.MEGATRON,
        sp_gather_bytes_per_element=sp_gather_element_bytes(card), frozen_weights=card.scope is not Scope.FULL,
        # DeepEP / HybridEP: the per-node rows leave through each GPU's NIC, the fan-out runs over NVLink
        # (compute.moe_dispatch), the same links and efficiency as the all-to-all above
        moe_dispatcher=par.moe_dispatcher, ep_ranks_per_node=ep_local,
        # Megatron-Core's TEGroupedMLP through Transformer Engine's op fuser (compute.inventory.step_inventory)
        fused_expert_mlp=par.moe_expert_mlp is MoeExpertMlp.TE_OPS,
        ep_nic_bytes_per_s=coll.gpu_nic_bytes_per_s(rates=r, nic_bytes_per_s=nic, local_ranks=ep_local)
        * coll.NIC_EFFICIENCY, ep_nvlink_bytes_per_s=ep_rates.intra_node_bus_bytes_per_s,
        # Megatron-Core overlap_moe_expert_parallel_comm (compute.model_parallel.ep_overlap_exposed)
        ep_comm_overlap=par.moe_comm_overlap and spec.moe is not None and ep > 1, moe_routing=par.moe_routing,
        # a trained router on real tokens: every rank waits for the busiest one (compute.moe_time)
        ep_load_factor=ep_load_factor_of(card, spec),
        # the all-gather dispatcher's ring over the expert tensor x expert parallel ranks (compute.moe_dispatch)
        ep_ring_bus_bytes_per_s=bus(ep * par.expert_tensor_parallel),
    )


def pipeline_senders_per_node(*, world_size: int, pp: int, gpus_per_node: int) -> int:
    """The GPUs of one host that send a pipeline boundary's activations (or, the other way, its gradients) off the
    host at the same moment: every rank whose next stage lies on another host. A pipeline group's ranks are
    ``world_size / pp`` apart, pp outermost (Megatron-Core's rank order tp-cp-ep-dp-pp, NVIDIA/Megatron-LM
    megatron/core/parallel_state.py ``RankGenerator`` default order l.617 @d98e8a64ddf34856e74b24714e3bedb2f5a39553;
    torchtitan's mesh ``["pp", "dp_replicate", "dp_shard", "cp", "tp"]``, pytorch/torchtitan
    torchtitan/parallelisms/parallel_dims.py ``build_mesh`` @01223650a29ed7e929fe0f5ebe003503d0ae2227), and hosts
    hold consecutive ranks: a stage spanning whole hosts sends from all of a host's GPUs, a stage of
    ``world_size / pp`` ranks inside a host from that many (the host's last stage, whose next one is on the next host). The stage's tensor,
    context and data-parallel ranks all count: the data-parallel replicas run the same schedule, so their sends of
    one micro-batch meet on the host's NICs too."""
    stride = max(1, world_size // max(1, pp))
    return max(1, min(stride, gpus_per_node))


def fp8_attention_recipe(card: RunCard) -> str:
    """The fp8 attention kernel's recipe for ``compute.attention_time.fp8_attention_ratio``: "mxfp8" under the
    MXFP8 recipe (Transformer Engine runs MXFP8 attention with an MXFP8 autocast, its ``DotProductAttention`` recipe
    table, NVIDIA/TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/dot_product_attention.py
    l.164 @4220403e831d29e93868f7793693ea83f6b8b05b, the TE Megatron-Bridge v0.5.0 pins), "fp8" under a per-tensor
    recipe, "" without ``precision.fp8_attention``."""
    prec = card.precision
    if not prec.fp8_attention:
        return ""
    return "mxfp8" if prec.fp8_recipe is Fp8Recipe.MXFP8 else "fp8"


def sp_gather_element_bytes(card: RunCard) -> float:
    """Bytes per element of Transformer Engine's sequence-parallel all-gathers: the quantised copy with its block
    scales under quantised GEMMs on Megatron-Core's layers (``memory.fp8.quantized_element_bytes``; a card without a
    recipe: 1 B), else 0 (the activation dtype) (``compute.model_parallel`` module docstring)."""
    prec = card.precision
    if not prec.compute.quantized_gemms or card.parallel.tensor_parallel_impl is not TensorParallelImpl.MEGATRON:
        return 0.0
    recipe = prec.gemm_recipe
    return 1.0 if recipe is None else quantized_element_bytes(recipe)


def legacy_sdpa_copies_of(spec: ModelSpec, card: RunCard, *, eager: bool) -> dict[str, float]:
    """The forward copies the card's ``software.transformers`` pin adds to each SDPA layer
    (``compute.attention_time.legacy_sdpa_copy_work`` of ``memory.attention.legacy_sdpa``): none for v5's path,
    eager attention, the flash path, or layers that are not transformers' (``plan.terms.hf_sdpa_of``)."""
    from trainfit.compute.attention_time import legacy_sdpa_copy_work
    from trainfit.plan.terms import hf_sdpa_of

    copies = hf_sdpa_of(card)
    if eager or card.attention is not Attention.SDPA or not (copies.repeats_kv or copies.contiguous):
        return {}
    per_token, kernels = legacy_sdpa_copy_work(
        q_dim=spec.q_dim, kv_dim=spec.kv_dim, num_heads=spec.num_attention_heads, num_kv_heads=spec.num_kv_heads,
        repeats_kv=copies.repeats_kv, contiguous=copies.contiguous,
        dtype_bytes=compute_dtype_bytes(card))
    return {"sdpa_copy_bytes_per_token": per_token, "sdpa_copy_kernels": kernels} if kernels else {}


def fp32_model_gemm_dtype_bytes(card: RunCard) -> float | None:
    """4 where the trained model computes in fp32 (``precision.compute`` fp32: fp32 weights run without autocast, as
    accelerate leaves a model without native mixed precision, huggingface/accelerate src/accelerate/accelerator.py
    l.1402-1413 @v1.3.0 bdd70d5d93c3a66e859d966b6482871971ae7510): its GEMMs, forward and backward, and those of the
    passes that run it (old log-probs, its reference copy, a critic of its precision) run in fp32 at the card's fp32
    rate, or TF32 with ``precision.tf32``; None otherwise (the 16-bit compute dtype, or a QLoRA base's own
    ``Adapter.base_dtype_bytes``)."""
    return 4.0 if card.precision.compute is ComputeDtype.FP32 else None


def compute_dtype_bytes(card: RunCard) -> int:
    """Bytes of the card's activations' dtype: 4 in fp32 compute, else 2 (bf16 / fp16; fp8 / fp4 run their non-GEMM
    ops in bf16; a QLoRA model loaded in float32: 4, ``resolve.model_dtype``), as the memory plan takes them."""
    return 4 if model_dtype(card) is ComputeDtype.FP32 else 2


def window_masked_sdpa(spec: ModelSpec, card: RunCard, *, seq_len: int) -> bool:
    """Whether the windowed layers of ``spec`` (the rank's shard) run SDPA with transformers' materialised
    sliding-window mask at ``seq_len`` tokens per row (``memory.attention.sdpa_window_masked``;
    ``compute.attention_time`` module docstring)."""
    return any(attn.sdpa_window_masked(spec, layer=i, kv_tokens=seq_len, attention=card.attention)
               for i in spec.sliding_layers[:1])


def sdpa_mask_layers(spec: ModelSpec, card: RunCard, *, seq_len: int) -> int:
    """Layers of ``spec`` (the rank's shard) whose SDPA call takes transformers' materialised bool mask at ``seq_len``
    keys, past the sliding window or under the card's padding mask: ``memory.attention.sdpa_masked``, the predicate
    the memory plan counts the mask's saved copy by. Each such call converts the mask to the query's dtype
    (``compute.inventory.step_inventory``'s ``mask_layers``). Not counted in time: the grouped-query k/v that
    ``repeat_kv`` widens under a mask (the memory plan's ``sdpa_window_repeats_kv``)."""
    pad = padding_mask_of(card)
    return sum(attn.sdpa_masked(spec, layer=i, kv_tokens=seq_len, attention=card.attention, padding_mask=pad)
               for i in range(spec.num_layers))


def packed_attention(card: RunCard, *, eager: bool, seq_len: int) -> tuple[float | None, bool, str | None]:
    """(attention context, causal skip, the plan's note) of a card whose rows pack several samples
    (``batch.packed_sample_tokens``; ``compute.attention_time`` module docstring): a fused kernel that skips
    masked blocks (the card's ``flash``: varlen FlashAttention, FlexAttention, Transformer Engine ``thd``)
    works ``Σ len_i²`` per row, a causal span of ``mean·(1 + cv²)`` keys; SDPA handed the packed block mask runs
    every key block of the row (no causal halving); eager attention computes the whole row's scores (as
    unpacked). ``(None, True, note)`` when the card does not pack: the plan is the one-sequence row's, and a
    supervised card (SFT, RM, DPO: RL rows are one prompt and its response) says so, since a packed row planned as
    one sequence overstates attention by up to the row over the samples' mean (benchmarks/step_times.md: ms-swift's
    packed LongAlpaca rows at 512K, +783 % before their published sample lengths were stated)."""
    b = card.batch
    mean = b.packed_sample_tokens
    if mean is None:
        rl = card.method in (Method.PPO, Method.GRPO)
        return None, True, (None if rl else
                            f"attention over each whole {seq_len}-token row, one sequence a row"
                            " (batch.packed_sample_tokens unset); if rows pack several samples, set it (and"
                            " packed_sample_length_cv): attention then runs per sample")
    cv = b.packed_sample_length_cv
    spread = f"cv {cv:g}" if cv is not None else "cv not given: every sample the mean length, the least work for it"
    if eager:
        return None, True, (f"packed rows ({mean} tokens per sample, {spread}): eager attention computes every score"
                            f" of the {seq_len}-token row, planned as one sequence")
    if card.attention is Attention.SDPA:
        return None, False, (f"packed rows ({mean} tokens per sample): SDPA given the packed block mask runs its"
                             f" memory-efficient kernel over every key block of the {seq_len}-token row"
                             " (no causal skip, at half FlashAttention-2's rate); attention: flash runs per sample")
    ctx = packed_attention_context(mean_sample_tokens=mean, sample_length_cv=cv or 0.0, row_tokens=seq_len)
    return ctx, True, (f"packed rows: attention per sample ({mean} tokens mean, {spread}): a causal span of"
                       f" {ctx:.0f} keys per query instead of the {seq_len}-token row's")


def padding_mask_attention(card: RunCard, *, eager: bool, seq_len: int) -> tuple[bool, str | None]:
    """(causal skip, the plan's note) of a card whose samples are padded to ``seq_len`` with an attention mask that
    holds zeros (``batch.padding`` mask). Under SDPA transformers keeps such a mask (only an all-ones mask is dropped:
    ``AttentionMaskConverter._ignore_causal_mask_sdpa``, huggingface/transformers v4.49.0
    src/transformers/modeling_attn_mask_utils.py l.288-291; the model's ``_update_causal_mask`` calls it,
    models/llama/modeling_llama.py l.646, and returns the 4-D float mask, l.686), and ``sdpa_attention_forward`` then
    calls ``scaled_dot_product_attention`` with ``attn_mask`` set and ``is_causal`` False (integrations/sdpa_attention.py
    l.45-46). PyTorch's flash backend refuses a mask (``check_for_attn_mask`` in ``use_flash_attention``,
    aten/src/ATen/native/transformers/cuda/sdp_utils.cpp), so the memory-efficient kernel runs and computes every key
    block of the row: no causal halving, as SDPA handed a packed block mask (``packed_attention``). Eager attention
    computes every score anyway; the flash path unpads and stays causal: (True, None) for both, and for ``padding``
    none. A card whose layers are not transformers' (``plan.terms.runs_hf_modelling_code``: Megatron-Core's and
    nanotron's own attention) is refused the mask in ``spec.card``; here it keeps the causal skip."""
    if not padding_mask_of(card) or eager or card.attention is not Attention.SDPA:
        return True, None
    if card.scope is Scope.PREFIX_TUNING:
        n = card.prefix_tuning.num_virtual_tokens
        return False, (f"prefix tuning: {n} prefix keys make transformers keep its 4-D mask; SDPA runs its"
                       f" memory-efficient kernel over all {n} + {seq_len} keys of every query (no causal skip), at half"
                       " FlashAttention-2's rate (compute.attention_time)")
    return False, (f"batch.padding mask: SDPA given transformers' 4-D padding mask runs its memory-efficient kernel"
                   f" over every key block of the {seq_len}-token row (no causal skip), at half FlashAttention-2's rate"
                   " (compute.attention_time); every padded token still runs the GEMMs")


def attention_kernel_of(card: RunCard, rates: DeviceRates, *, eager: bool, head_dim: int | None = None,
                        backward: bool = True) -> tuple[str, str | None]:
    """(the fused attention kernel whose rates time the step, the plan's note) from ``card.attention_kernel``
    (``compute.attention_time`` module docstring). ``auto`` and eager attention: the architecture's default rates,
    no note. A kernel without a build for the card's architecture (FlashAttention-3 off Hopper, FlashAttention-4 off
    Blackwell, FlashAttention-2 on Volta / Turing) or for the model's ``head_dim`` there (FlashAttention-1 above 128,
    or training above 64 off compute capability 8.0 / 9.0; ``backward``: the pass trains) is refused; a pair without
    a published rate takes the default, said so. The note states the rates at the model's head dim."""
    k = card.attention_kernel.value
    if k == AUTO_KERNEL or eager:
        return AUTO_KERNEL, None
    cc = rates.compute_capability
    if not kernel_runs_on(kernel=k, compute_capability=cc):
        raise CardError(f"attention_kernel: '{k}' runs on {KERNEL_ARCH_TEXT[k]} only; {rates.gpu_id} is compute"
                        f" capability {cc}; allowed there: {', '.join(kernels_allowed(compute_capability=cc))}")
    if not kernel_head_dim_runs(kernel=k, compute_capability=cc, head_dim=head_dim, backward=backward):
        allowed = kernels_allowed(compute_capability=cc, head_dim=head_dim, backward=backward)
        why = kernel_head_dim_text(kernel=k, compute_capability=cc, head_dim=head_dim)
        raise CardError(f"attention_kernel: '{k}' ({KERNEL_NAMES[k]}) {why} ({rates.gpu_id}); allowed there:"
                        f" {', '.join(allowed)}")
    if not kernel_rated(kernel=k, compute_capability=cc):
        return AUTO_KERNEL, (f"attention kernel {k}: no published rate on compute capability {cc}; timed at the"
                             " architecture's default fused-attention rates (compute.attention_time)")
    fwd, bwd = kernel_rates(kernel=k, compute_capability=cc)
    hd = head_dim or BASE_HEAD_DIM
    hd_f = head_dim_efficiency(compute_capability=cc, head_dim=hd, backward=False, kernel=k)
    hd_b = head_dim_efficiency(compute_capability=cc, head_dim=hd, backward=True, kernel=k)
    return k, (f"attention kernel {k} ({KERNEL_NAMES[k]}): {fwd * hd_f:.2f} / {bwd * hd_b:.2f} of the matmul rate"
               f" forward / backward at head dim {hd} on compute capability {cc}, its published measurements"
               " (compute.attention_time)")


def nvlink_gpus_per_node(gpu_id: str, per_node: int, group_gpus: int) -> int:
    """GPUs of a ``group_gpus``-GPU job (``per_node`` per host) that share one NVLink domain: the "node" every
    training collective sees, and the one place the training time model reads the domain size. A host's GPUs, or on a
    rack-scale NVLink system (GB200 NVL72: 72 GPUs over 18 trays of 4, ``rates.NVLINK_DOMAIN_GPUS``) the job's share
    of one rack, where NCCL runs on NVLink between trays: with Multi-Node NVLink it fuses the topology of the ranks of
    one NVLink clique as one node's (NVIDIA/nccl src/graph/topo.cc l. 1887-1891) and counts its nodes as the NVLink
    domains (src/init.cc ``initNvlDomainInfo`` l. 876-878, ``nNvlDomains = nNodes``), so its tuner prices the hops
    inside the rack as NVLink hops (src/graph/tuning.cc ``hwLatencies[NVLINK]``, the same as inside an 8-GPU host)
    and only those between racks as network hops (@5067397c2676d5aed50042fc39e5c8ee96eb0027).

    The job's share of a rack: its hosts split into equal segments, each inside one rack, the largest segment of at
    most a rack's trays that divides the host count, as Megatron-Bridge's GB200 launcher asks Slurm for them
    (``sbatch --segment``: every host count up to 18 in one segment, else the largest divisor up to 18; 32 trays
    run as two racks of 16 trays, 64 GPUs each: NVIDIA-NeMo/Megatron-Bridge scripts/performance/utils/executors.py
    l. 168-176 @067f987df03b8355b03192d88d70f1709fedf51a). Which groups fit in one domain is the rank layout's
    (``collectives.domain_ranks``)."""
    rack = NVLINK_DOMAIN_GPUS.get(gpu_id, 0)
    if per_node <= 0 or rack <= per_node:
        return per_node
    hosts = max(1, group_gpus // per_node)
    segment = max(n for n in range(1, min(hosts, rack // per_node) + 1) if hosts % n == 0)
    return segment * per_node


def fsdp2_offload_copy_rates(card: RunCard, rates: DeviceRates, *, gpus_per_node: int) -> tuple[float, float] | None:
    """(pageable, pageable into freshly allocated memory) bytes/s of one training GPU's blocking gradient copies under
    FSDP2's CPU offload (``parallel.fsdp_version`` fsdp2 under ``torch_fsdp_cpu_offload``: torch's
    ``CPUOffloadPolicy``), every GPU of its node copying at once (``plan.rl_offload.host_copy_rates``;
    ``compute.offload.fsdp2_offload_accumulation_seconds`` reads them); None for any other layout, which is the one
    guard of that term."""
    if not (card.parallel.fsdp2 and torch_fsdp_cpu_offload(card)):
        return None
    from trainfit.plan.rl_offload import host_copy_rates  # the RL offload modules: imported only where the term is

    _, pageable, fresh = host_copy_rates(card, rates, gpu_of(card), gpus_per_node=gpus_per_node)
    return pageable, fresh


def gathered_weight_bytes_of(card: RunCard, spec: ModelSpec) -> WeightBytes:
    """The whole model's weights as FSDP / ZeRO-3 all-gathers them for the actor's passes, in the dtype they are
    stored in (base and adapter, bytes): nf4 for a QLoRA actor, fp8 where the card gathers fp8. The training pass
    (``training_time``) and the no-grad passes over the actor's own sharded weights (the old policy's log-probs, a
    ``lora_disabled`` reference: ``plan.rl_passes.frozen_pass_phases``) gather the same flat parameters."""
    scale = count_scale(spec)
    trainable = trainable_spec(card)
    # FSDP / ZeRO-3 gather fp32 master parameters in the mixed-precision dtype (cast before the all-gather: FSDP
    # MixedPrecision param_dtype, FSDP2 MixedPrecisionPolicy): plan.terms.fsdp_gathered_dtype, bf16 for fp8 compute
    gather_dtype = fsdp_gathered_dtype(card) if card.weights_dtype is Dtype.FP32 else card.weights_dtype
    # transformers < 5's per-expert loop under bitsandbytes: each expert's linears are Linear4bit, gathered packed as
    # the dense ones, the condition memory reads (plan.terms.bnb_loop_experts); v5's 3-D stacks stay bf16
    w = weight_bytes(spec, weights=gather_dtype, compute=card.precision.compute, trainable=trainable,
                     quantized_experts=bnb_loop_experts(card))
    mfsdp_fp8 = megatron_fsdp_fp8_params(card)
    if mfsdp_fp8:  # Megatron-FSDP gathers the fp8 primary weights' uint8 buffer: 1 B per linear weight
        from trainfit.memory.fp8 import fp8_linear_params

        w = replace(w, base=w.base - fp8_linear_params(spec) * scale * (BYTES_PER_DTYPE[gather_dtype.value] - 1.0))
    if card.precision.fp8_all_gather:  # torchao gathers its float8 linears' weights as fp8 (compute.float8_all_gather)
        from trainfit.memory.fp8 import fp8_linear_params

        w = replace(w, base=w.base - gathered_bytes_saved(
            linear_weight_params=fp8_linear_params(spec) * scale * fp8_layer_share_of(card, spec),
            gathered_dtype_bytes=BYTES_PER_DTYPE[gather_dtype.value]))
    return w


def training_time(
    card: RunCard, spec: ModelSpec, rates: DeviceRates, *, ranks: int, gpus_per_node: int, micro_batch_size: int,
    seq_len: int, micro_steps: int, work_cv: float = 0.0, attention_context: float | None = None,
    attention_span_factor: float = 1.0, forward_shares: bool = False, packed_sequence_tokens: float | None = None,
):
    """One optimizer step on ``ranks`` training GPUs (``gpus_per_node`` of them per node), each holding its
    model-parallel shard; ``seq_len`` is the whole sequence (context parallel splits it here). ``work_cv``: the
    spread of a micro-batch's tokens across the data-parallel ranks (``compute.training.train_step_time``).
    ``attention_context``: the keys a query's causal span covers when a row of ``seq_len`` tokens packs several
    sequences that attend only within themselves (``plan.rl_batches.pipeline_packed_rows``); None: the row is one
    sequence. ``attention_span_factor``: the packed sequences' attention span over their mean length, ``1 + cv²``
    for lengths of relative spread ``cv`` (``compute.attention_time.packed_attention_context``; the RL passes,
    ``plan.rl_passes.packed_span_factor``): the causal span each query covers is ``attention_context`` (else the
    sequence) times it; the sequence count the loss sees keeps the mean. ``forward_shares``: the phases also carry a
    forward-only pass's share of the collectives (``compute.training.train_step_time``; DPO's reference forward,
    ``reference_forward_of``). ``packed_sequence_tokens``: an RL update's packed sequences' mean tokens, each one
    thd sample of the row (``rope_loop_samples_of``); None: the card's ``batch.packed_sample_tokens``."""
    par = card.parallel
    tp, cp, pp = par.tensor_parallel, par.context_parallel, par.pipeline_parallel
    shard = rank_spec(spec, tp=tp, pp=pp, ep=par.expert_parallel, etp=par.expert_tensor_parallel,
                      first=par.pipeline_first_stage_layers, last=par.pipeline_last_stage_layers,
                      layout=par.pipeline_layout)
    scale = count_scale(spec)
    params, tensors, opt = _trained(card, spec)  # the whole model (a bare count already scaled)
    mfsdp_fp8 = megatron_fsdp_fp8_params(card)
    w = gathered_weight_bytes_of(card, spec)
    share = 1.0
    if shard is not spec:  # this rank's fraction of the parameters (and of the weight bytes)
        share = param_breakdown(shard).total / param_breakdown(spec).total
        tensors = tensors * shard.num_layers / spec.num_layers
    params *= share
    eager = attn.runs_eager(spec.family, card.attention) and spec.num_full_attention_layers > 0
    mp = model_parallel_of(card, spec, rates, gpus_per_node=gpus_per_node)
    data_ranks = max(1, ranks // (tp * pp))  # gradients are reduced over data x context ranks
    expert, edp, edp_local = expert_data_parallel(card, spec, shard, params=params, data_ranks=data_ranks,
                                                  gpus_per_node=gpus_per_node)
    par_dp = Parallel(strategy=par.strategy.value, ranks=data_ranks,
                      # pipeline stages are the outermost ranks, so a node holds gpus_per_node / tp data-parallel
                      # ranks of one stage: Megatron-Core global_rank = tp_rank + dp_rank * tp + pp_rank * tp * dp
                      # (order tp-cp-ep-dp-pp, megatron/core/parallel_state.py l.269-300, l.617, NVIDIA/Megatron-LM
                      # @d98e8a64ddf34856e74b24714e3bedb2f5a39553); nanotron reshapes (ep, pp, dp, tp)
                      # (src/nanotron/parallel/context.py l.69-80, huggingface/nanotron
                      # @c252843039cc167ff8d6894b87172af4637eb14b)
                      gpus_per_node=coll.domain_ranks(ranks=data_ranks, stride=tp, domain_gpus=gpus_per_node),
                      nic_bytes_per_s=nic_bytes_per_s(card),
                      # verl's FSDP actor steps AdamW on the GPU whatever its param / optimizer offload
                      # (step_offload_of); the state's trips between phases are plan.rl_offload's
                      offload=step_offload_of(card).value, expert_ranks=edp,
                      expert_gpus_per_node=edp_local, overlap_param_gather=par.overlap_param_gather,
                      grad_reduce_after_backward=par.grad_reduce_after_backward,
                      grad_accumulation_pass=par.grad_accumulation_pass, fsdp2=par.fsdp2,
                      fsdp_adapter_units=card.resolved_fsdp_adapter_units,
                      # HSDP's shard group as the memory plans it (plan.rl_common.hsdp_shard_of): a host's GPUs, not
                      # the NVLink domain ``gpus_per_node`` stands for on GB200 NVL72
                      hsdp_shard=par.hsdp_shard_size or min(data_ranks, train_nodes(card)[1]),
                      overlap_comm=deepspeed_overlap_comm(card),
                      zero_all_reduce_bucket=deepspeed_all_reduce_bucket(card, spec),
                      **deepspeed_flat_step(card, shard),
                      # InternEvo's zero1 groups and per-rank parameter broadcasts (parallel.zero1_shard_size,
                      # zero1_param_sync; compute.training.zero1_group_of)
                      zero1_shard=par.zero1_shard_size or 0,
                      zero1_broadcast_per_rank=par.zero1_param_sync is Zero1ParamSync.BROADCAST_PER_RANK,
                      **deepspeed_zero3_buckets(card, shard, params=params, tensors=tensors),
                      # torch DDP's reducer all-reduces bucket by bucket (bucket_cap_mb, default 25 MiB); Megatron's DDP
                      # (its layers: tensor_parallel_impl megatron) reduces its contiguous buffer, kept as one collective
                      ddp_bucket_bytes=0.0 if par.tensor_parallel_impl is TensorParallelImpl.MEGATRON
                      else coll.DDP_BUCKET_BYTES)
    packed_context, causal_skip, packed_note = packed_attention(card, eager=eager, seq_len=seq_len)
    padded_skip, padding_note = padding_mask_attention(card, eager=eager, seq_len=seq_len)
    causal_skip = causal_skip and padded_skip
    kernel, kernel_note = attention_kernel_of(card, rates, eager=eager, head_dim=kernel_head_dim_of(spec))
    rope_samples = rope_loop_samples_of(card, micro_batch_size=micro_batch_size, seq_len=seq_len,
                                        sequence_tokens=packed_sequence_tokens)
    a2a = a2a_thd_sequences_of(card, micro_batch_size=micro_batch_size, seq_len=seq_len)
    off_layers, off_bytes, off_rate = activation_offload_of(card, shard, rates, micro_batch_size=micro_batch_size,
                                                            seq_len=max(1, seq_len // cp))
    t = train_step_time(
        shard, rates=rates, micro_batch_size=micro_batch_size, seq_len=max(1, seq_len // cp), micro_steps=micro_steps,
        # a model computed in fp32 (precision.compute fp32: no autocast): fp32 GEMMs (fp32_model_gemm_dtype_bytes)
        model_dtype_bytes=fp32_model_gemm_dtype_bytes(card),
        # TRL's GRPO update: the completion's logits only (logits_to_keep; methods.roles.logit_positions)
        head_positions=logit_positions(card, seq_len=max(1, seq_len // cp)),
        activation_offload_layers=off_layers, activation_offload_bytes_per_layer=off_bytes,
        activation_offload_copy_bytes_per_s=off_rate,
        checkpoint_copy_s_per_micro_batch=offloaded_checkpoint_copy_of(card, shard, rates,
                                                                        micro_batch_size=micro_batch_size,
                                                                        seq_len=max(1, seq_len // cp)),
        fsdp2_offload_copy_bytes_per_s=fsdp2_offload_copy_rates(card, rates, gpus_per_node=min(ranks, gpus_per_node)),
        # torch FSDP's own CPU offload (not verl's phase moves), and the launcher's OMP_NUM_THREADS for the host-side
        # torch ops it runs (torch's AdamW step, FSDP2's gradient add): host_one_thread_per_rank
        torch_cpu_offload=torch_fsdp_cpu_offload(card),
        host_one_thread=host_one_thread_per_rank(card, ranks_per_node=min(ranks, gpus_per_node)),
        adapter=adapter_of(card, spec), eager_attention=eager, gradient_checkpointing=par.gradient_checkpointing,
        parallel=par_dp, optimizer=opt, trained_params=params, trained_tensors=tensors,
        gathered_weight_bytes=(w.base + w.adapter) * share, count_scale=scale,
        memory_factor=COMPILE_MEMORY_FACTOR if fused_kernels(card) else 1.0,
        kernel_factor=kernel_factor_of(card),
        model_parallel=mp, attention_context=packed_context or (
            (attention_context or seq_len) * attention_span_factor if attention_span_factor != 1.0
            else attention_context or (seq_len if cp > 1 else None)),
        selective=par.layer_selective_checkpointing.value, recompute_modules=megatron_recompute_timed(card),
        op_recomputes_attention=not par.sac_saves_attention,
        fp8=card.precision.compute.quantized_gemms,
        fp8_weight_cache=fp8_weight_cache_of(card), work_cv=work_cv, expert_params=expert,
        fp8_params=card.precision.quantized_params and not mxfp8_params_gather_bf16(card),
        fp8_param_transpose=not _fp8_non_tn(card),
        # Megatron-FSDP builds the transpose after each backward all-gather and drops it with the unit
        # (memory.fp8.megatron_fsdp_fp8_unit_bytes): every micro-step, not once per step
        fp8_param_transpose_every_micro=mfsdp_fp8,
        causal_skip=causal_skip, window_mask=window_masked_sdpa(shard, card, seq_len=seq_len),
        mask_layers=sdpa_mask_layers(shard, card, seq_len=seq_len),
        **legacy_sdpa_copies_of(shard, card, eager=eager),
        window_mask_dtype_bytes=compute_dtype_bytes(card),
        fused_cross_entropy=card.loss.kernel is LossKernel.FLASH_ATTN,
        compiled_cross_entropy=card.loss.compiled,
        loss_input_copy=loss_input_copy_of(card).forward_copy,
        loss_input_slice_backward=loss_input_copy_of(card).slice_backward,
        recompute_layer_share=_recompute_layer_share(card, spec), packed_flash_syncs=packed_flash_syncs(card),
        expert_loop=par.moe_experts.per_expert, expert_loop_every=par.moe_experts is MoeExperts.LOOP_ALL,
        expert_loop_stacked=par.moe_experts is MoeExperts.LOOP_V5, expert_hit_share=par.moe_experts_hit,
        zero3_expert_leaf=par.moe_zero3_leaf,
        fsdp2_copies=par.fsdp2,
        # torch pipelining + FSDP2: the stage reduce-scatters once, after its last backward; it gathers as FSDP2's
        # default reshard_after_forward does (NeMo Automodel's blocks), every micro-batch: torchtitan's
        # reshard_after_forward=False under pipeline parallel (one gather a step) is not something a card says
        fsdp2_pipeline_held=pipeline_fsdp2_holds_unsharded(card), fsdp2_pipeline_reshard_after_forward=True,
        fp8_casts=fp8_casts_of(card),
        fp8_layer_share=fp8_layer_share_of(card, spec),
        fp8_gather=fp8_gather_shard_of(card, shard, data_ranks=data_ranks),
        megatron_experts=par.tensor_parallel_impl is TensorParallelImpl.MEGATRON,
        moe_eager_launch=par.resolved_moe_launch is MoeLaunch.EAGER,
        # ... and the router's load-balancing loss, where the card states one (compute.moe_time "Router aux-loss ops")
        moe_load_balancing=par.moe_load_balancing,
        # Megatron-Core's layers are Transformer Engine's modules: their Python backward (compute.te_host)
        te_layers=par.tensor_parallel_impl is TensorParallelImpl.MEGATRON,
        # a re-entrant checkpoint re-runs the whole layer, its last linear and residual add included
        # (compute.inventory.StepInventory.layers_recompute_whole; checkpoint_reentrant)
        recompute_whole_layer=checkpoint_reentrant(card),
        expert_streams=par.moe_experts is MoeExperts.GROUPED_STREAMS,
        expert_padding=par.moe_experts is MoeExperts.GROUPED_PADDED,
        unpad_call_syncs=llm_foundry_unpad_syncs(card),
        attention_kernel=kernel, attention_fp8=fp8_attention_recipe(card),
        head=timed_rank_holds_head(spec, pp, par.pipeline_layout),
        vocab_chunk_columns=PRIME_RL_LM_HEAD_CHUNK_COLUMNS
        if card.loss.chunked and card.loss.kernel is LossKernel.PRIME_RL else 0,
        # a packed row of seq_len tokens holds seq_len / attention_context sequences (plan.rl_batches)
        nemo_rl_loss=nemo_rl_pg_loss_of(card),
        # NeMo RL's DTensor modules cast their outputs to fp32 (compute.fsdp2_output_cast)
        fsdp2_fp32_outputs=nemo_rl_dtensor(card),
        loss_sequences=micro_batch_size * (seq_len / attention_context if attention_context else 1.0),
        # the loop's element-by-element reads walk the whole (unsharded) micro-batch (loop.token_scan_syncs)
        scan_syncs=card.loop.token_scan_syncs * max(0, micro_batch_size * seq_len - 1),
        # the model's attention forward reads values back to the host in every layer (loop.attention_call_syncs)
        attention_call_syncs=card.loop.attention_call_syncs,
        rope_loop_samples=rope_samples,
        rope_loop_context_parallel=cp,
        rope_loop_form=thd_rope_loop_of(card),  # the loop of the card's Megatron-Core release
        a2a_thd_sequences=a2a,
        te_ring_context_parallel=te_ring_context_parallel_of(card, eager=eager),
        launch_blocking=card.loop.launch_blocking,  # CUDA_LAUNCH_BLOCKING=1 (training.launch_blocking_syncs)
        forward_shares=forward_shares,
    )
    rope_note = rope_loop_note(rope_samples, card=card)
    a2a_note = (f"a2a context parallel on packed rows: Transformer Engine reorders {a2a:.1f} sequences' chunks around"
                " every attention all-to-all in a Python list, with host syncs (compute.inventory.te_a2a_thd_reorders)"
                if a2a else None)
    walk_note = zero3_reuse_walk_note(card, shard)
    notes = tuple(n for n in (packed_note, padding_note, kernel_note, rope_note, a2a_note, walk_note,
                              fused_router_load_balancing_note(card), router_load_note(card, spec)) if n)
    return replace(t, assumptions=t.assumptions + notes) if notes else t


def rope_loop_samples_of(card: RunCard, *, micro_batch_size: int, seq_len: int,
                         sequence_tokens: float | None = None) -> float:
    """Packed samples per micro-batch over which Megatron-Core's unfused thd RoPE loops (``batch.packed_rope_loop``,
    ``compute.inventory.thd_rope_loop``): ``micro_batch_size x seq_len / packed_sample_tokens`` (the whole row's,
    before any context-parallel split: every rank loops over every sample); 0 when the card does not say so.
    ``sequence_tokens``: an RL pass's packed sequences' mean tokens (``plan.rl_passes``), where the card states no
    ``packed_sample_tokens``: verl's Megatron actor packs every micro-batch into one thd row whose samples are its
    rollout sequences (``preprocess_packed_seqs``, volcengine/verl verl/models/mcore/util.py l.23-102
    @62549582a71881fe861b09f8375e3aea80ac6754, from ``gptmodel_forward``'s ``pack_seqs=True``,
    verl/models/mcore/model_forward.py l.22-39), so the loop runs once per sequence."""
    b = card.batch
    per_sample = b.packed_sample_tokens or sequence_tokens
    if not b.packed_rope_loop or not per_sample:
        return 0.0
    return micro_batch_size * seq_len / per_sample


def te_ring_context_parallel_of(card: RunCard, *, eager: bool) -> int:
    """The ring size of Transformer Engine's P2P context-parallel attention (``compute.cp_ring``): the card's context
    parallel on Megatron-Core layers (``tensor_parallel_impl`` megatron, whose attention is TEDotProductAttention) of
    the ring kind, with a fused attention kernel; 1 otherwise (torch's ring attention, Ulysses, eager attention)."""
    par = card.parallel
    if (par.tensor_parallel_impl is not TensorParallelImpl.MEGATRON or par.context_parallel <= 1
            or par.context_parallel_kind is not ContextParallelKind.RING or eager):
        return 1
    return par.context_parallel


def a2a_thd_sequences_of(card: RunCard, *, micro_batch_size: int, seq_len: int) -> float:
    """Packed sequences per micro-batch whose chunks Transformer Engine's a2a context parallel reorders
    (``compute.inventory.te_a2a_thd_reorders``): Megatron-Core layers (``tensor_parallel_impl`` megatron: its
    ``cp_comm_type`` a2a is the card's Ulysses kind) with context parallel > 1 on packed rows (thd), ``micro_batch_size
    x seq_len / packed_sample_tokens``; else 0."""
    par, b = card.parallel, card.batch
    if (par.tensor_parallel_impl is not TensorParallelImpl.MEGATRON or par.context_parallel <= 1
            or par.context_parallel_kind is not ContextParallelKind.ULYSSES or not b.packed_sample_tokens):
        return 0.0
    return micro_batch_size * seq_len / b.packed_sample_tokens


def ep_load_factor_of(card: RunCard, spec: ModelSpec) -> float:
    """The busiest expert-parallel rank's routed rows over the mean rank's for the card
    (``compute.moe_time.trained_router_load_factor``): 1 for a dense model, expert parallel 1, a card that routes
    balanced by construction (``parallel.moe_router_load`` balanced, or ``parallel.moe_routing`` consecutive: NeMo
    Automodel's ``FakeBalancedGate`` gives every expert the same count, nemo_automodel/components/moe/layers.py
    @01926a5c443b7979463c73341bf64adf79de638e) or a family without a published spread."""
    par = card.parallel
    if (spec.moe is None or par.expert_parallel <= 1 or par.moe_router_load is not MoeRouterLoad.TRAINED
            or par.moe_routing is MoeRouting.CONSECUTIVE):
        return 1.0
    return moe_time.trained_router_load_factor(family=spec.family, ep=par.expert_parallel,
                                               experts=spec.moe.num_experts)


def router_load_note(card: RunCard, spec: ModelSpec) -> str | None:
    """The plan's note when a trained router's busiest-rank factor applies (``ep_load_factor_of`` above 1): the
    factor, where it comes from, the expert-parallel sizes its checks cover and how to time a forced-balance run.
    None otherwise."""
    f = ep_load_factor_of(card, spec)
    if f <= 1.0:
        return None
    ep = card.parallel.expert_parallel
    covered = max(moe_time.TRAINED_ROUTER_CHECKED_EP)
    beyond = (f"; EP {ep} lies beyond the expert-parallel sizes its published checks cover (EP"
              f" {' and '.join(str(e) for e in moe_time.TRAINED_ROUTER_CHECKED_EP)}): the order-statistics form is"
              " extrapolated there") if ep > covered else ""
    return (f"trained router (parallel.moe_router_load trained): every rank waits for the busiest of {ep} EP ranks,"
            f" its routed expert work and dispatch bytes x{f:.2f} ({spec.family}'s published per-expert load spread,"
            f" CV {moe_time.TRAINED_ROUTER_EXPERT_LOAD_CV[spec.family]:.2f}, compute.moe_time"
            f".busiest_rank_load_factor){beyond}; set balanced for a forced-balance run")


def fused_router_load_balancing_note(card: RunCard) -> str | None:
    """The plan's note for a card that states a router load-balancing loss (``parallel.moe_load_balancing`` aux_loss or
    seq_aux_loss) on a fused router (``parallel.moe_launch`` fused): the loss's extra ops
    (``compute.moe_time.AUX_LOSS_KERNELS``) are priced on the eager router only (``compute.inventory``), so the
    field changes nothing there. None otherwise."""
    par = card.parallel
    lb = par.moe_load_balancing
    if lb is None or lb is MoeLoadBalancing.NONE or par.resolved_moe_launch is not MoeLaunch.FUSED:
        return None
    return (f"parallel.moe_load_balancing {lb.value}: not counted on a fused or graphed router (parallel.moe_launch"
            " fused): router fusion computes the loss's scores in fused kernels and a CUDA graph replays its ops"
            " without host launches; only the eager router's extra ops are priced")


def rope_loop_note(n: float, *, card: RunCard) -> str | None:
    """The plan's note for ``rope_loop_samples_of``'s ``n`` samples per micro-batch (None when 0): the loop of the
    card's Megatron-Core release (``spec.card.thd_rope_loop_of``) and where that release comes from."""
    if not n:
        return None
    form = thd_rope_loop_of(card)
    pin = megatron_core_pin(card)
    if form is ThdRopeLoop.CAT:
        how = "one host sync per call (.tolist()), the samples joined by one cat (Megatron-Core core_v0.10-0.14)"
    else:
        how = "two host syncs per call (.tolist(), .item()), each sample copied into the output (core_v0.19 / main)"
    if pin_names_release(pin):
        release = f"software.megatron-core {pin}"
    elif card.preset == "verl":
        release = (f"no software.megatron-core release pin: verl's pinned core_v{VERL_MEGATRON_CORE_RELEASE}"
                   " (its install script; set software.megatron-core to the run's release)")
    else:
        release = ("no software.megatron-core release pin: Megatron-LM main's loop (core_v0.19, Megatron-Bridge's"
                   " submodule; set software.megatron-core to the run's release)")
    return (f"rotary embeddings per packed sample: {n:.1f} samples per micro-batch, each a few bare kernels in every"
            f" attention layer's query and key, {how}; {release} (Megatron-Core's unfused thd RoPE,"
            " compute.inventory.thd_rope_loop)")


def megatron_recompute_timed(card: RunCard) -> tuple[str, ...]:
    """Megatron-Core's ``recompute_modules`` the recompute pass re-runs (``compute.training.train_step_time``):
    the card's list when it holds more than core_attn (that one alone is the ``core_attention`` selective pass),
    on tensor_parallel_impl megatron; else none."""
    from trainfit.spec.enums import RecomputeModule

    mods = card.parallel.megatron_recompute_modules
    if not mods - {RecomputeModule.CORE_ATTN} or card.parallel.tensor_parallel_impl is not TensorParallelImpl.MEGATRON:
        return ()
    return tuple(sorted(m.value for m in mods))


def deepspeed_overlap_comm(card: RunCard) -> bool:
    """Whether the card's gradient reductions overlap the backward (``compute.training.Parallel.overlap_comm``):
    DeepSpeed's ZeRO (``plan.ranks._deepspeed_zero``: zero2 and zero3, zero1 under Ulysses alone) as its
    ``zero_optimization.overlap_comm`` resolves, unset: true at stage 3 only (deepspeedai/DeepSpeed
    deepspeed/runtime/zero/config.py ``overlap_comm_valid`` l.351-354 @v0.17.1, the same rule from v0.9.0 to v0.19.5);
    without it the reductions run on the compute stream (``collectives.reductions_on_compute_stream``). Every other
    framework's reductions overlap (True)."""
    from trainfit.plan.ranks import _deepspeed_zero  # the one place the card's ZeRO is read as DeepSpeed's

    if not _deepspeed_zero(card):
        return True
    ds = card.deepspeed.overlap_comm
    return card.parallel.strategy.value == "zero3" if ds is None else ds


def deepspeed_all_reduce_bucket(card: RunCard, spec: ModelSpec) -> int:
    """Elements per gradient all-reduce of the card's ZeRO-1/2 when it is DeepSpeed's (``plan.ranks._deepspeed_zero``;
    ``compute.training.Parallel.zero_all_reduce_bucket``): its ``deepspeed.reduce_bucket_size`` resolved as the memory
    plan reads it (``plan.terms.zero_config_of``: DeepSpeed's 5e8 elements unset, the HF Trainer's hidden² for auto).
    DeepSpeed since 0.12.4 all-reduces each such bucket in full (``collectives.deepspeed_bucket_all_reduce``: the
    entries' versions and the current one). 0 for every other ZeRO-1/2 (Megatron-Core's distributed optimizer
    reduce-scatters) and every other strategy."""
    from trainfit.plan.ranks import _deepspeed_zero  # the one place the card's ZeRO is read as DeepSpeed's
    from trainfit.plan.terms import zero_config_of

    stage = {"zero1": 1, "zero2": 2}.get(card.parallel.strategy.value)
    if stage is None or not _deepspeed_zero(card):
        return 0
    return max(1, zero_config_of(card, spec, stage).reduce_bucket_size)


def zero3_grad_groups(spec: ModelSpec, *, expert_loop: bool = False) -> tuple[tuple[int, ...], ...]:
    """Elements of each gradient a full fine-tune of ``spec`` produces, in the order the backward finishes them,
    grouped: the head's (the untied head, the final norm), each decoder layer's from the last, the input
    embedding's. It is the forward's parameters reversed; per decoder layer, forward: the input norm (its bias after
    it where norms carry one), the attention projections, each followed by its bias where the family has one (q/k/v:
    ``attention_bias``; o: ``o_proj_bias``) and q / k by their norms (``qk_norm``: Qwen3's ``q_norm`` / ``k_norm`` over
    head_dim, applied to the q and k projections' outputs), the other norms, then the MLP's linears (their biases:
    ``mlp_bias``) or the MoE block's router, experts and shared expert (``plan.terms._layer_modules``'s matrices, each
    weight one tensor). Fused projections (Phi-3): qkv_proj, then o_proj; gate_up_proj, then down_proj.

    ``expert_loop`` (``parallel.moe_experts`` loop / loop_all, transformers < 5): every expert is a module of three
    ``nn.Linear`` (``Qwen3MoeSparseMoeBlock.__init__``: ``self.experts = nn.ModuleList([Qwen3MoeMLP(...) for _ in
    range(self.num_experts)])``, ``Qwen3MoeMLP``: ``gate_proj``, ``up_proj``, ``down_proj``, ``bias=False``;
    huggingface/transformers src/transformers/models/qwen3_moe/modeling_qwen3_moe.py
    @00d4b3d2142cb4ced2f51b90614b5d26bc045015, ``compute.expert_loop``), so each expert's projection is its own
    parameter and its own gradient, not one tensor over all experts."""
    from trainfit.plan.terms import _layer_modules  # the matrices the ZeRO-3 memory plan fetches

    h = spec.hidden_size
    nb = 2 if spec.norm_bias else 1  # a LayerNorm's weight and bias are two tensors
    norm = [h] * nb
    layers: list[tuple[int, ...]] = []
    for i in range(spec.num_layers):
        mods = _layer_modules(spec, i)
        full = spec.layer_kind(i) is LayerKind.FULL_ATTENTION
        # Phi-3: qkv_proj, o_proj (gate_up_proj, down_proj below); Qwen (1.0): c_attn with its bias, c_proj
        fused = (spec.fused_projections or spec.fused_qkv) and full
        n_attn = (2 if fused else 4) if full else 5
        attn = list(mods[:n_attn])
        if fused:
            qkv, o = attn
            attn = [qkv, *([spec.q_dim + 2 * spec.kv_dim] if spec.attention_bias else []),
                    o, *([h] if spec.o_proj_bias else [])]
        elif full:
            q, k, v, o = attn
            if spec.qk_norm:
                qn = spec.head_dim * (spec.num_attention_heads if spec.qk_norm_full_width else 1)
                kn = spec.head_dim * (spec.num_kv_heads if spec.qk_norm_full_width else 1)
            attn = [q, *([spec.q_dim] if spec.attention_bias else []), *([qn] if spec.qk_norm else []),
                    k, *([spec.kv_dim] if spec.attention_bias else []), *([kn] if spec.qk_norm else []),
                    v, *([spec.kv_dim] if spec.attention_bias else []),
                    o, *([h] if spec.o_proj_bias else [])]
        ffn = list(mods[n_attn:])
        moe = spec.moe if spec.moe is not None and spec.moe.is_moe_layer(i) else None
        if moe is None:
            inter = spec.intermediate_size
            lin = [(h * inter, inter), (h * inter, inter), (inter * h, h)] if spec.mlp_gated else \
                [(h * inter, inter), (inter * h, h)]
            if spec.fused_mlp:  # Phi-3, GLM-4: one gate_up_proj
                lin = [(2 * h * inter, 2 * inter), (inter * h, h)]
            ffn = [n for w, b in lin for n in ((w, b) if spec.mlp_bias else (w,))]
        else:
            e, inter = moe.num_experts, moe.expert_intermediate_size
            router = [e * h, *([e] if moe.router_bias else [])]
            if expert_loop:
                one = [h * inter, *([inter] if moe.expert_bias else []), h * inter,
                       *([inter] if moe.expert_bias else []), inter * h, *([h] if moe.expert_bias else [])]
                experts = one * e
            else:
                experts = [e * 2 * h * inter, *([e * 2 * inter] if moe.expert_bias else []),
                           e * inter * h, *([e * h] if moe.expert_bias else [])]
            shared = list(mods[n_attn + 3:])
            if shared and moe.shared_expert_gate:
                shared.append(h)
            ffn = [*router, *experts, *shared]
        fwd = [*norm, *attn, *(norm * max(0, spec.norms_per_layer - 1)), *ffn]
        layers.append(tuple(reversed(fwd)))
    head = ((0 if spec.tie_word_embeddings else spec.vocab_size * h), *((norm if spec.final_norm else [0])))
    # the input embedding, then the learned positions (OPT) it adds: their gradients finish in reverse
    embed = (spec.learned_positions * h, spec.vocab_size * h)
    return (tuple(n for n in head if n), *reversed(layers), tuple(n for n in embed if n))


def deepspeed_flat_step(card: RunCard, spec: ModelSpec) -> dict:
    """``compute.training.Parallel``'s ``deepspeed_zero_stage`` / ``zero_sub_group_numel`` under zero2 / zero3, which
    are always DeepSpeed's (``plan.ranks._deepspeed_zero``): its optimizer steps flat fp32 partitions
    (``compute.optimizer_time.deepspeed_flat_partitions``), stage 3 in sub-groups of the card's
    ``deepspeed.sub_group_size`` as the memory plan resolves it (``plan.terms.zero_config_of``). Empty otherwise,
    zero1 included: the cards' zero1 under all-to-all context parallel maps NeMo's Megatron-Core distributed optimizer
    too, which steps its per-parameter fp32 shards (``shard_fp32_from_float16_groups``), not one flat buffer."""
    from trainfit.plan.ranks import _deepspeed_zero
    from trainfit.plan.terms import zero_config_of

    stage = {"zero2": 2, "zero3": 3}.get(card.parallel.strategy.value)
    if stage is None or not _deepspeed_zero(card):
        return {}
    sub = float(zero_config_of(card, spec, 3).sub_group_size) if stage == 3 else 0.0
    return {"deepspeed_zero_stage": stage, "zero_sub_group_numel": sub}


def deepspeed_zero3_buckets(card: RunCard, spec: ModelSpec, *, params: float, tensors: float) -> dict:
    """``compute.training.Parallel``'s ``zero3_grad_groups`` / ``zero3_bucket_numel`` under the card's ZeRO-3 when it
    is DeepSpeed's: the card's ``deepspeed.reduce_bucket_size`` resolved as the memory plan reads it
    (``plan.terms.zero_config_of``: 5e8 unset, hidden² for the HF Trainer's auto). A full fine-tune's gradients are
    ``zero3_grad_groups`` of the rank's ``spec``; any other scope's ``tensors`` trained tensors are taken as equal,
    ``params / tensors`` elements each, spread evenly over the decoder layers (adapters: many small tensors). Empty
    for every other strategy."""
    from trainfit.plan.ranks import _deepspeed_zero  # the one place the card's ZeRO is read as DeepSpeed's
    from trainfit.plan.terms import zero_config_of

    if card.parallel.strategy.value != "zero3" or not _deepspeed_zero(card) or tensors < 1 or params <= 0:
        return {}
    bucket = max(1, zero_config_of(card, spec, 3).reduce_bucket_size)
    if card.scope is Scope.FULL:
        groups = zero3_grad_groups(spec, expert_loop=card.parallel.moe_experts.is_loop)
    else:
        n = max(1, round(tensors))
        per_layer = max(1, round(n / max(1, spec.num_layers)))
        size = max(1, round(params / n))
        groups = ((), *(((size,) * per_layer,) * spec.num_layers), ())
    return {"zero3_grad_groups": groups, "zero3_bucket_numel": bucket}


def zero3_reuse_walk_note(card: RunCard, spec: ModelSpec) -> str | None:
    """Under DeepSpeed ZeRO-3, the one uncached reuse-distance walk of the first step with a complete module trace
    (``compute.zero3_trace``): a once-per-run host cost, stated beside the step time, not in it, and an estimate (the
    per-module rate measured on a tiny model applied to a model of the walk), not a measurement. ``spec``: the
    rank's model (ZeRO-3 gathers it whole); ``stage3_max_reuse_distance`` resolved as the memory plan reads it
    (``plan.terms.zero_config_of``). None for every other strategy."""
    from trainfit.compute.training import zero3_hooked_modules
    from trainfit.plan.ranks import _deepspeed_zero  # the one place the card's ZeRO is read as DeepSpeed's
    from trainfit.plan.terms import zero_config_of

    par = card.parallel
    if par.strategy.value != "zero3" or not _deepspeed_zero(card):
        return None
    from trainfit.compute.zero3_trace import reuse_walk_seconds, trace_entries  # ZeRO-3 cards only
    modules = zero3_hooked_modules(spec, expert_loop=par.moe_experts.is_loop, leaf=par.moe_zero3_leaf)
    recompute = par.gradient_checkpointing
    walk_s = reuse_walk_seconds(hooked_modules=modules, recompute=recompute, params=total_params(spec),
                                max_reuse_distance_numel=float(zero_config_of(card, spec, 3).max_reuse_distance))
    return (f"DeepSpeed ZeRO-3: the first step with a complete module trace also walks the"
            f" {trace_entries(hooked_modules=modules, recompute=recompute):,}-entry trace for parameter reuse at every"
            f" release, once per run (an lru_cache'd __params_to_release; compute.zero3_trace): about {walk_s:.1f} s"
            " of host time in that one step (estimated from a measured per-module rate), not in the step time")


def fp8_casts_of(card: RunCard) -> CastTraffic | None:
    """Who casts a card's fp8 linears (``compute.float8_casts``): Transformer Engine (``memory.fp8``'s
    ``transformer_engine_linears``), else torchao float8, whose casts ``parallel.compile`` fuses or leaves eager.
    None without fp8 compute."""
    prec = card.precision
    recipe = prec.gemm_recipe
    if recipe is None:
        return None
    from trainfit.memory.fp8 import transformer_engine_linears

    te = transformer_engine_linears(recipe=recipe, tensor_parallel_impl=card.parallel.tensor_parallel_impl)
    casts = cast_traffic(transformer_engine=te, compiled=card.parallel.compile, recipe=recipe)
    # torchao's float8 all-gather hands the linear an fp8 weight: no weight cast in the layer (compute.float8_all_gather)
    return gathered_weight_casts(casts) if prec.fp8_all_gather else casts


def fp8_gather_shard_of(card: RunCard, shard: ModelSpec, *, data_ranks: int) -> Fp8GatherShard | None:
    """The rank's float8 linear weight shards under torchao's float8 all-gather (``precision.fp8_all_gather``;
    ``compute.float8_all_gather``): the model-parallel ``shard``'s float8 linears (their quantised layers' share,
    ``fp8_layer_share_of``) over the FSDP shard group (HSDP: the shard group ``training_time`` prices; otherwise
    the ``data_ranks`` data x context ranks), held in ``precision.weights`` (fp32 under FSDP2 mixed precision). None
    without it."""
    if not card.precision.fp8_all_gather:
        return None
    from trainfit.memory.fp8 import fp8_linear_count, fp8_linear_params

    share = fp8_layer_share_of(card, shard)
    par = card.parallel
    group = max(1, (par.hsdp_shard_size or min(data_ranks, train_nodes(card)[1])) if par.strategy.value == "hsdp"
                else data_ranks)
    return Fp8GatherShard(shard_elements=fp8_linear_params(shard) * count_scale(shard) * share / group,
                          linears=fp8_linear_count(shard) * share,
                          shard_dtype_bytes=BYTES_PER_DTYPE[card.weights_dtype.value])


def fp8_layer_share_of(card: RunCard, spec: ModelSpec) -> float:
    """The share of the model's decoder layers whose linears run quantised (``precision.bf16_first_layers`` /
    ``bf16_last_layers``; Megatron-Core ``get_fp8_context`` / ``get_fp4_context`` return a null context for them:
    NVIDIA/Megatron-LM megatron/core/fp8_utils.py l.706-730, megatron/core/fp4_utils.py l.247-265
    @d98e8a64ddf34856e74b24714e3bedb2f5a39553). A pipeline stage is timed at the whole model's share."""
    if not card.precision.compute.quantized_gemms:
        return 1.0
    return card.precision.quantized_layer_share(spec.num_layers)


def block_scaled_recipe(card: RunCard) -> bool:
    """Whether the card's quantised GEMMs are Blackwell block-scaled ones: ``fp8_recipe: mxfp8`` or ``compute:
    fp4``."""
    return card.precision.compute is ComputeDtype.FP4 or card.precision.fp8_recipe is Fp8Recipe.MXFP8


def fp8_weight_cache_of(card: RunCard) -> bool:
    """Whether the card's quantised weights are cast once per step rather than per micro-step: Transformer Engine's
    ``is_first_microbatch`` weight cache for the TE-only recipes (``memory.fp8.TE_ONLY_RECIPES``: under Megatron-Core / NeMo its linears cache their fp8 weights between the
    micro-batches of a step; ``current`` is also torchao's, which casts every forward), and for mxfp8 / nvfp4 on
    Transformer Engine (a Megatron-Core card); torchao casts every forward."""
    prec = card.precision
    recipe = prec.gemm_recipe
    from trainfit.memory.fp8 import TE_ONLY_RECIPES

    if recipe in TE_ONLY_RECIPES:
        return True
    if block_scaled_recipe(card):
        from trainfit.memory.fp8 import transformer_engine_linears

        return transformer_engine_linears(recipe=recipe, tensor_parallel_impl=card.parallel.tensor_parallel_impl)
    return False


def _recompute_layer_share(card: RunCard, spec: ModelSpec) -> float:
    """The share of the decoder layers whose forward backward recomputes (``RunCard.parallel.checkpointed_layers``)."""
    layers = card.parallel.checkpointed_layers(spec.num_layers)
    return sum(layers) / len(layers) if layers else 1.0


EXPERT_GROUP_STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp_grad_op")
"""Strategies whose expert gradients, gathers and optimizer shards follow the expert-data-parallel group in the time
model: Megatron-Core's DDP and distributed optimizer (``compute.collectives`` module docstring), FSDP2 with the
experts on their own ``ep_shard`` mesh (``collectives.exposed_sharded``). HSDP keeps them with the dense group."""


def expert_data_parallel(card: RunCard, spec: ModelSpec, shard: ModelSpec, *, params: float, data_ranks: int,
                         gpus_per_node: int) -> tuple[float, int, int]:
    """(routed-expert parameters among this rank's trained ``params``, expert-data-parallel ranks, how many of them
    share a node) for a full-scope MoE card on Megatron-Core's DDP / distributed optimizer or FSDP
    (``EXPERT_GROUP_STRATEGIES``); ``(0, data_ranks, 1)`` otherwise. The group is tp·cp·dp / (ep·etp) ranks (``memory.parallel.ParallelLayout.expert_data_group``; here
    tp · ``data_ranks`` / (ep·etp), ``data_ranks`` being dp·cp), ``etp·ep`` ranks apart (Megatron-Core's expert rank
    order ``tp-cp-ep-dp-pp`` with tp = etp). The experts' share of ``params`` is the shard's: each MoE layer's
    ``E/ep`` local experts of three ``hidden x intermediate/etp`` projections."""
    par = card.parallel
    moe = shard.moe
    if moe is None or card.scope is not Scope.FULL or par.strategy.value not in EXPERT_GROUP_STRATEGIES:
        return 0.0, data_ranks, 1
    expert_shard = routed_expert_params(shard)
    total = param_breakdown(shard).total
    if expert_shard <= 0 or total <= 0:
        return 0.0, data_ranks, 1
    ep, etp = par.expert_parallel, par.expert_tensor_parallel
    edp = max(1, par.tensor_parallel * data_ranks // (ep * etp))
    local = coll.domain_ranks(ranks=edp, stride=ep * etp, domain_gpus=gpus_per_node)
    return params * min(1.0, expert_shard / total), edp, local


PAGING_PASSES = 2
"""Paged optimizer states that do not fit on the card move over PCIe twice per step: in for the update,
out again under the next step's activation pressure (bitsandbytes paged optimizers on CUDA managed memory)."""


def default_power_limit_note(gpu: GpuSpec) -> str | None:
    """The plan's note for a card whose hosts run below its TDP by default (``GpuSpec.default_power_limit_w``): the
    plan keeps the datasheet peaks and says what the limit would give (``compute.rates.power_limited_rates``)."""
    from trainfit.compute.rates import POWER_CLOCK_EXPONENT

    lim, tdp = gpu.default_power_limit_w, gpu.tdp_w
    if not lim or not tdp or lim >= tdp:
        return None
    return (f"{gpu.name}: its hosts run a default {lim:g} W power limit of the {tdp:g} W TDP (catalog source);"
            f" planned at the {tdp:g} W datasheet peaks; at the limit the matmul rates would be"
            f" x{(lim / tdp) ** POWER_CLOCK_EXPONENT:.3f} (compute.rates.power_limited_rates; state it with trainfit"
            " calibrate)")


def step_time_of(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout, *,
                 rates: DeviceRates | None = None, paged_spill_bytes: float = 0.0) -> StepTiming | None:
    """The step's time on the slowest GPU; None when the GPU catalog lacks FLOP/s or bandwidth."""
    from trainfit.errors import TrainfitError

    if not gpu.half_dense_flops_per_s or not gpu.hbm_bytes_per_s:
        return None
    try:
        r = rates_of(card, gpu, rates)
        unsloth = None
        if card.parallel.unsloth_layers:
            from trainfit.compute.unsloth_layers import unsloth_layers_note  # Unsloth cards only (cold start)

            unsloth = unsloth_layers_note(qlora=card.scope is Scope.QLORA)
        links = tuple(n for n in (link_note(card, gpu, r, calibration=rates), nic_note(card, gpu), unsloth) if n)
        if card.method in (Method.PPO, Method.GRPO):
            from trainfit.plan.rl_time import rl_step_time

            t = rl_step_time(card, spec, gpu, sharding, rollout, r)
            return replace(t, assumptions=t.assumptions + links)
        t = _sft_time(card, spec, gpu, sharding, r)
        t = replace(t, assumptions=t.assumptions + links)
        if paged_spill_bytes > 0:
            secs = PAGING_PASSES * paged_spill_bytes / r.pcie_bytes_per_s
            t = StepTiming(t.total_s + secs, t.tokens_per_step,
                           t.phases + (PhaseTime("paging", secs, "offload", {"spilled_bytes": paged_spill_bytes}),),
                           t.assumptions + (f"paged optimizer: {paged_spill_bytes / 2**30:.1f} GiB of states do not fit"
                                            f" and page over PCIe {PAGING_PASSES}x per step",))
        limit = default_power_limit_note(gpu) if rates is None else None
        if limit:
            t = replace(t, assumptions=t.assumptions + (limit,))
        return t
    except TrainfitError as exc:
        return StepTiming(float("nan"), 0.0, (), (f"not estimated: {exc}",))


DPO_NO_REFERENCE_PASS = (RefPlacement.PRECOMPUTED, RefPlacement.NONE)
"""DPO reference placements with no reference forward in the training step. ``precomputed``: TRL's DPOTrainer with
``precompute_ref_log_probs`` runs the reference over the whole dataset once, in ``__init__``
(``self.train_dataset = self._precompute_ref_logps(...)``), and the step's loss reads the stored columns
(``_compute_loss``: ``if self.precompute_ref_logps: ref_chosen_logps, ref_rejected_logps = inputs["ref_chosen_logps"],
inputs["ref_rejected_logps"]``, else the no-grad reference forward; huggingface/trl trl/trainer/dpo_trainer.py
l.959-963, l.1364-1378 @f2cd57710ae345ea6428ae95363267fcf38a3dc8), the placement the TRL export writes as
``precompute_ref_log_probs=True`` (``export.trl``); ``none``: no reference at all (as the memory walk,
``methods.rl.dpo_reference_pass``, and the RL passes, ``plan.rl_passes``, already treat both). ``cpu`` (a host-offloaded
reference) is refused for DPO by the card (``spec.card._check_reference_placement``), so neither walk nor time plans it.
With ``precomputed`` the one-time reference pass over the dataset is outside the step time (an assumption line says
so)."""


def reference_forward_of(phases: tuple[PhaseTime, ...]) -> PhaseTime:
    """DPO's reference forward over the step's micro-batches (``phases``: the policy's step, ``training_time``): the
    policy's forward compute (the reference is the same model, laid out like it: ``plan.dpo_ranks``), its share of
    the model-parallel collectives per micro-step (each communication phase's ``forward``: the tensor-parallel
    all-reduces, the context-parallel exchange, the expert all-to-alls exposed in full, as a forward-only pass has no
    other micro-batch's backward to hide them behind, and the pipeline's activation sends), the FSDP / ZeRO-3 units'
    forward all-gathers again (``communication``'s ``forward_gathers``: the frozen copy's own shards, or the policy's
    units resharded after its forward; the memory plan holds them, ``methods.rl._gathered``) and, under pipeline
    parallel (NeMo RL's host swap: its Megatron worker scores the reference with ``forward_backward_func(...,
    forward_only=True)``, NVIDIA-NeMo/RL nemo_rl/models/policy/workers/megatron_policy_worker.py ``get_logprobs``
    l.1812-1887 @7ea279abfbeb698b092856d0dab61e7cf39bc909), the forward-only schedule's bubble: the training bubble's idle
    micro-step slots, ``(p - 1) / v`` (Narayanan et al. 2021, arXiv:2104.04473 §2.2.1), each a forward micro-step
    with its collectives (``pipeline_bubble``'s ``forward_micro_step``)."""
    by = {p.name: p for p in phases}
    fwd = by["forward"]
    comm = {name: by[name].terms.get("forward", 0.0) for name in ("tensor_parallel", "context_parallel",
                                                                     "expert_parallel", "pipeline_p2p") if name in by}
    gathers = by["communication"].terms.get("forward_gathers", 0.0) if "communication" in by else 0.0
    bubble = by.get("pipeline_bubble")
    idle = bubble.terms["idle_micro_steps"] * bubble.terms["forward_micro_step"] if bubble is not None else 0.0
    extra = {f"{name}_forward": secs for name, secs in comm.items() if secs}
    extra |= {k: v for k, v in (("fsdp_forward_gathers", gathers), ("pipeline_forward_bubble", idle)) if v}
    return PhaseTime("reference_forward", fwd.seconds + sum(extra.values()), fwd.bound, dict(fwd.terms) | extra)


def _sft_time(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, r: DeviceRates) -> StepTiming:
    world = sharding.world_size
    pairs = 2 if card.method in (Method.RM, Method.DPO) else 1
    mbs = card.batch.micro_batch_size * pairs
    step_spec = method_model_spec(card, spec)  # the reward model's score head (one place for every consumer)
    # the "node" the training collectives see: the host, or a rack-scale NVLink domain (GB200 NVL72)
    per_node = nvlink_gpus_per_node(gpu.id, min(card.hardware.gpus_per_node, world), world)
    from trainfit.methods.roles import reference_placement

    ref_pass = card.method is Method.DPO and reference_placement(card) not in DPO_NO_REFERENCE_PASS
    t = training_time(card, step_spec, r, ranks=world, gpus_per_node=per_node,
                      micro_batch_size=mbs, seq_len=_model_seq_len(card), micro_steps=card.batch.grad_accum,
                      forward_shares=ref_pass)
    phases = list(t.phases)
    if ref_pass:
        phases.insert(0, reference_forward_of(t.phases))
        if reference_placement(card) is RefPlacement.HOST_SWAP:
            # NeMo RL DPO: get_reference_policy_logprobs once per global batch (dpo.py add_ref_logprobs_to_data
            # @9dbd9adc95a10f5946cceb36e1d5b31e2429e470), the reference swapped in and the policy back around it
            from trainfit.plan.rl_offload import reference_swap_phase

            phases.insert(1, reference_swap_phase(card, spec, r, train_gpus=world))
    # one data-parallel replica (tp x cp x pp GPUs; a context-parallel group shares its sequences) per
    # micro-batch
    tokens = float(mbs * card.batch.seq_len * card.batch.grad_accum * max(1, world // card.parallel.model_parallel))
    total = sum(p.seconds for p in phases)
    assumptions = t.assumptions
    if card.method is Method.DPO and reference_placement(card) is RefPlacement.PRECOMPUTED:
        assumptions += ("DPO reference precomputed: the one-time reference pass over the dataset before training"
                        " (TRL's precompute_ref_log_probs) is not in the step time",)
    return StepTiming(total, tokens, tuple(phases), assumptions)
