"""The rollout engine's LoRA adapter slots and the trainer's peak while it hands an adapter to the engine.

Pure: no torch.

Slots. With ``enable_lora`` vLLM replaces every supported linear by its LoRA wrapper when it loads the model and
allocates that wrapper's stacked adapter buffers once, ``max_loras`` slots of ``max_lora_rank`` each, zero-filled,
in ``lora_dtype`` (the model dtype): ``create_lora_weights`` builds, per packed slice, ``lora_a_stacked`` of
``(max_loras, 1, max_lora_rank, input_size)`` and ``lora_b_stacked`` of ``(max_loras, 1, output_size,
max_lora_rank)``, where a column-parallel linear (QKV, gate/up) keeps its whole input and a ``1/tp`` share of its
output, and a row-parallel one (O, down) a ``1/tp`` share of its input and its whole output (vllm-project/vllm
vllm/lora/layers.py ``ColumnParallelLinearWithLoRA`` / ``MergedColumnParallelLinearWithLoRA`` /
``RowParallelLinearWithLoRA.create_lora_weights`` @fb82bf149526911a296c35c90ebae28e58554a8a, the 0.6 line; the same
shapes in ``BaseLinearLayerWithLoRA.create_lora_weights``, vllm/lora/layers/base_linear.py
@01235a494f173b84814002c8382137e379371b07, the later package layout). The runs this serves (verl with vLLM 0.8-0.9,
whose release the logs do not print) lie between the two. The slots exist before the KV cache is profiled and
sized, so they come out of the engine's budget as the weights do (counted with them, ``methods.rl.engine_for``).

Left out (a lower bound): the embedding and head wrappers of the models whose ``embedding_modules`` name them
(Llama's, not Qwen2's), with V0's ``lora_extra_vocab_size`` rows (256 by default): ``(vocab + 256) x rank`` and ``256
x hidden`` elements a slot, about 10 MB for Llama-3-8B at rank 32; the punica wrapper's index buffers (tokens x a few
int64); and the linears of MLA and linear-attention layers (counted as none here, as in
``compute.decode_step.engine_lora_kernels``).
"""

from __future__ import annotations

from trainfit.spec.enums import LayerKind
from trainfit.spec.model import ModelSpec

VERL_ENGINE_MAX_LORAS = 1
"""Adapter slots verl asks of vLLM for its LoRA actor: ``{"enable_lora": True, "max_loras": 1, "max_lora_rank":
self._lora_rank}`` (verl-project/verl verl/workers/fsdp_workers.py l.417
@7dc3ee7476c9af1042636f44bca9e412d1de1a6d)."""


def _dense_mlp_layers(spec: ModelSpec) -> int:
    moe = spec.moe
    return sum(1 for i in range(spec.num_layers) if moe is None or moe.num_experts <= 1 or not moe.is_moe_layer(i))


def _attention_layers(spec: ModelSpec) -> int:
    """Layers whose attention vLLM wraps as a packed QKV and an O linear (softmax attention without MLA)."""
    if spec.mla is not None:
        return 0
    return sum(1 for i in range(spec.num_layers) if spec.layer_kind(i) is LayerKind.FULL_ATTENTION)


def engine_lora_slot_bytes(spec: ModelSpec, *, max_lora_rank: int, max_loras: int, tp: int,
                           dtype_bytes: float = 2.0) -> float:
    """Bytes of the adapter slots one vLLM rank of ``tp`` allocates at start-up with ``enable_lora`` (module
    docstring): per attention layer the packed QKV (three A slices of ``rank x hidden``, B of ``(q_dim / tp + 2
    max(kv_heads / tp, 1) head_dim) x rank``: a rank keeps at least one KV head) and O (A of ``rank x q_dim / tp``, B
    of ``hidden x rank``); per dense-MLP layer gate/up (two A slices of ``rank x hidden``, B of ``2 intermediate / tp x rank``) and down (A of ``rank x intermediate / tp``, B of
    ``hidden x rank``); times ``max_loras`` and ``dtype_bytes`` (the model dtype, bf16). Every supported linear is
    wrapped whichever modules the adapter targets. Qwen2.5-32B at rank 32, TP 8: 0.20 GB a rank.

    Raises ``ValueError`` for ``max_lora_rank``, ``max_loras`` or ``tp`` below 1."""
    if min(max_lora_rank, max_loras, tp) < 1:
        raise ValueError("engine LoRA slots: max_lora_rank, max_loras and tp must be >= 1")
    h, r = spec.hidden_size, max_lora_rank
    # vLLM keeps at least one KV head a rank: past the KV heads, tp replicates them (QKVParallelLinear
    # num_kv_head_replicas = tp / kv_heads, num_kv_heads 1; vllm-project/vllm vllm/model_executor/layers/linear.py
    # l.1027-1045 @8c94938cfb92cc00b244ae4a933c5f60dbc1139f), and the LoRA wrapper sizes its K and V slices by it
    kv_rank_dim = max(spec.num_kv_heads // tp, 1) * spec.head_dim
    qkv = 3 * r * h + (spec.q_dim / tp + 2 * kv_rank_dim) * r
    o = r * spec.q_dim / tp + h * r
    gate_up = 2 * r * h + 2 * spec.intermediate_size / tp * r
    down = r * spec.intermediate_size / tp + h * r
    elements = _attention_layers(spec) * (qkv + o) + _dense_mlp_layers(spec) * (gate_up + down)
    return max_loras * elements * dtype_bytes


def adapter_summon_peak_bytes(*, largest_layer_params: float, decoder_params: float, adapter_params: float,
                              num_layers: int, trainer_bytes_per_param: float, layered: bool,
                              summons_base_units: bool, adapter_sharded: bool) -> float:
    """Bytes one trainer rank holds beyond its shards while verl collects a LoRA actor's adapter for the engine.

    ``summons_base_units`` (an FSDP1 actor): ``FSDP.summon_full_params`` unshards whole FSDP units, base weights
    included, in full precision (the trainer's dtype: fp32 for verl's actor), and the adapter tensors are copied to
    host memory (``.cpu()``) before the next unit is gathered.

    Otherwise only the adapter is gathered. FSDP2 (``adapter_sharded``): torch's ``FSDP.summon_full_params`` acts on
    FSDP1 units only, so verl's summon leaves the ``fully_shard`` DTensors sharded and each adapter tensor is gathered
    alone by ``param.full_tensor()`` before its ``.cpu()``; newer verl skips the summon outright under FSDP2
    (``summon_ctx = FSDP.summon_full_params(...) if is_fsdp1 else nullcontext()``, "FSDP2 DTensor params all-gather
    via param.full_tensor(); only FSDP1 needs the explicit summon context": verl-project/verl verl/utils/fsdp_utils.py
    ``layered_summon_lora_params`` / ``collect_lora_params`` l.633-740 @8a694930275061f52ebd538c906ef8819af56dbd,
    #6512; l.645-750 @1dda039b9c6311889a9c9a26040677e1254814f9): the adapter (its per-layer share under
    ``layered``), an upper bound, as each tensor is freed after its copy. An unsharded actor (neither) holds its
    adapter whole already and gathers nothing: 0.

    ``layered`` (verl ``rollout.layered_summon``): one decoder layer at a time, each with its nested LoRA units
    (``layered_summon_lora_params``, verl-project/verl verl/utils/fsdp_utils.py l.464-496
    @7dc3ee7476c9af1042636f44bca9e412d1de1a6d; verl's LoRA wrap policy makes every trainable leaf linear a unit of
    its own, ``get_fsdp_wrap_policy`` l.97-104): the largest layer and its share of the adapter. Otherwise
    ``FSDP.summon_full_params(self.module)`` over the whole actor (verl/workers/sharding_manager/fsdp_vllm.py
    ``__enter__`` l.117-121, same commit): every decoder layer and the adapter at once (the root unit's embeddings
    and head are left out here, as the layered path leaves them out).

    ``decoder_params``: the decoder layers' parameters; ``adapter_params``: the adapter's (``num_layers`` share it
    evenly). ``summons_base_units`` implies a sharded actor. Raises ``ValueError`` for ``num_layers`` below 1."""
    if num_layers < 1:
        raise ValueError("adapter summon: num_layers must be >= 1")
    if summons_base_units:
        base = largest_layer_params if layered else decoder_params
    elif adapter_sharded:
        base = 0.0
    else:
        return 0.0
    adapter = adapter_params / num_layers if layered else adapter_params
    return (base + adapter) * trainer_bytes_per_param
