"""PEFT's DoRA, (IA)^3, prompt tuning and prefix tuning on a frozen base: what each trains and what it saves for
backward.

Read from peft 0.21.2 (huggingface/peft, the version the trace runs; ``peft/tuners/...`` paths below are
that release's files). All three keep their trained tensors in fp32 on a bf16 base (``autocast_adapter_dtype``,
the default; measured on the trace: 4 B per trained element).

DoRA (``LoraConfig(use_dora=True)``, ``tuners/lora/dora.py`` ``DoraLinearLayer``): every adapted linear also
trains a magnitude vector of ``out_features`` (``update_layer`` l.130: ``self.weight = nn.Parameter(weight_norm)``).
Its forward (l.132-166; called by ``tuners/lora/variants.py`` ``DoraLinearVariant.forward`` l.230-257 with the
base layer's output when dropout is off, else it recomputes it from the dropped input) rebuilds ``B·A``
through ``lora_B(lora_A(eye(in)))``, takes the row norm of
``W + scale·B·A`` (detached: no gradient, nothing saved) and returns
``(m/‖W+sBA‖ - 1)·base_result + (m/‖W+sBA‖)·lora_result·s``. For backward the two products save, per token,
the base layer's output (compute dtype, ``out``) and ``lora_B``'s output (adapter dtype, ``out``), on top of
what LoRA saves; per module also the fp32 ``m/‖·‖`` and ``m/‖·‖ - 1`` rows and the bf16 norm
(10·out B). The ``eye(in)`` (fp32, in²), ``B·A`` and ``W + s·B·A`` (out·in each) it builds each forward are
transient: ``dora_forward_transient_bytes``, a forward transient of each layer (and, under checkpointing, of
its recompute in backward).
``ephemeral_gpu_offload`` (``LoraConfig.runtime_config``, default False; read only by
``DoraLinearVariant.init``, variants.py l.148-157) only moves the init-time norm of CPU-offloaded weights to the
GPU; it changes nothing in a training step.

(IA)^3 (``IA3Config``, ``tuners/ia3/layer.py`` ``Linear.forward`` l.172-199): a vector ``ia3_l`` per
target, ``(out, 1)`` scaling the output, or ``(1, in)`` scaling the input of a feedforward module. Output
scaling ``(result * l).to(bf16)`` saves ``result`` (compute dtype, ``out`` per token) and ``l``; input scaling
``(x.to(fp32) * l).to(bf16)`` saves the fp32 cast of x (4·in per token) and ``l``. The frozen linear saves
nothing. Default targets per model type: ``peft/utils/constants.py``
``TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING`` / ``..._FEEDFORWARD_MODULES_MAPPING`` (``IA3_DEFAULTS``).

Prompt tuning (``PromptTuningConfig``, ``peft_model.py`` ``PeftModelForCausalLM.forward``): ``n`` trained
virtual-token embeddings (``n × hidden``) are concatenated before the token embeddings, labels are padded with
-100: every sequence is ``s + n`` tokens through every layer and the head, and since the prompt needs a
gradient the whole stack's activations are saved as in any adapter run whose input needs a gradient.
The prompt lookup saves its indices (int64, ``b × n``).

Prefix tuning (``PrefixTuningConfig``, ``prefix_projection`` False; huggingface/peft
@d787f51bbaa196862733ed53c1b7def75b49ab29, the commit the MetaMathQA result files name): ``PrefixEncoder`` is one
``nn.Embedding(n, num_layers * 2 * token_dim)`` (src/peft/tuners/prefix_tuning/model.py l.77), fp32 (created in
torch's default dtype), and PEFT sets ``token_dim = head_dim * num_key_value_heads`` for a grouped-query model
(src/peft/utils/other.py l.1186-1201), so it trains ``n x layers x 2 x kv_dim`` elements. Every forward
``get_prompt`` (src/peft/peft_model.py l.775-808) looks the rows up for the batch (fp32, ``b x n x layers·2·kv``),
casts them to the model dtype (l.795-796), views, permutes and splits them into one key and one value per layer, and
hands them to the model as its ``past_key_values`` cache; ``forward`` prepends ``n`` ones to the attention mask
(l.1903-1904). Each layer's cache update concatenates its prefix before the new keys / values (``torch.cat``,
``n + s`` rows), which the cache holds and the returned output keeps through backward; with a prefix the key
length differs from the query length, so transformers keeps the materialised mask (``_ignore_causal_mask_sdpa``
drops it only when ``kv_length == q_length``: transformers 5.24.0 src/transformers/masking_utils.py l.292, the
installed wheel) and SDPA runs with ``attn_mask``: k and v repeated to every query head (``repeat_kv``, as under a
padding mask) and the mask saved, each over ``n + s`` keys. No token is added to the MLPs or the head.

The frozen-base activations come from ``trainfit.memory.activations`` with a *probe* adapter: a rank-1 fp32
LoRA on the modules where gradients start (IA3: its targets; prompt tuning: every linear, plus layer 0's
input norm, which the prompt already makes need a gradient; prefix tuning: every linear, since layer 0's attention
already takes keys and values that need a gradient), minus exactly what that LoRA saves
(4·(in + 1) per token per wrapped module). Then each method's own saved tensors are added.

Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainfit.errors import CardError
from trainfit.memory.activations import ActivationBytes
from trainfit.memory.lora import linear_names, targeted_groups
from trainfit.memory.params import LinearGroup, TensorGroup, linear_groups
from trainfit.spec.enums import Scope
from trainfit.spec.model import DEEPSEEK_FAMILIES, ModelSpec
from trainfit.spec.training import ALL_LINEAR, LoraSpec

PEFT_VERSION = "0.21.2"
FP32 = 4
INT64 = 8
VARIANT_DTYPE_BYTES = FP32
"""IA3 vectors and prompt embeddings: fp32 under PEFT's default ``autocast_adapter_dtype=True``."""
DORA_CONSTANT_BYTES_PER_OUT = 10
"""Per DoRA module: fp32 ``m/‖·‖`` and ``m/‖·‖ - 1`` rows (saved by the two products) and the bf16 norm
(saved by the division), per output feature: ``DoraLinearLayer.forward`` casts the weight to ``x.dtype`` (l.142), so
the detached norm is bf16; the fp32 ``magnitude`` over it promotes (l.153); ``(mag_norm_scale - 1) * base_result +
mag_norm_scale * lora_result * scaling`` (l.165). huggingface/peft @d787f51bbaa196862733ed53c1b7def75b49ab29:
https://github.com/huggingface/peft/blob/d787f51bbaa196862733ed53c1b7def75b49ab29/src/peft/tuners/lora/dora.py#L132-L165"""

IA3_DEFAULTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "llama": (("k_proj", "v_proj", "down_proj"), ("down_proj",)),
    "mistral": (("k_proj", "v_proj", "down_proj"), ("down_proj",)),
    "gemma": (("q_proj", "v_proj", "down_proj"), ("down_proj",)),
    "gemma2": (("q_proj", "v_proj", "down_proj"), ("down_proj",)),
    "gemma3_text": (("q_proj", "v_proj", "down_proj"), ("down_proj",)),
    "qwen2": (("q_proj", "v_proj", "down_proj"), ("down_proj",)),
    "qwen3": (("q_proj", "v_proj", "down_proj"), ("down_proj",)),
}
"""(targets, feedforward) by model type, peft 0.21.2 ``utils/constants.py`` (the dense decoder families trainfit
plans; others need ``ia3.targets``)."""


@dataclass(frozen=True, slots=True)
class PeftVariant:
    """One of the PEFT methods this module models, resolved against a model."""

    scope: Scope
    lora: LoraSpec | None = None
    """DoRA: its LoRA (rank, targets, adapter dtype)."""
    ia3_targets: tuple[str, ...] = ()
    ia3_feedforward: tuple[str, ...] = ()
    num_virtual_tokens: int = 0
    """Prompt tuning: tokens prepended to every sequence; prefix tuning: keys and values before every layer's."""


@dataclass(frozen=True, slots=True)
class VariantParams:
    """What the method trains beyond LoRA's A/B (DoRA) or instead of them (IA3, prompt tuning)."""

    count: int
    tensors: tuple[TensorGroup, ...]
    largest: int


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def check_dense(spec: ModelSpec, scope: Scope) -> None:
    """The variants are modelled on dense decoders of full-attention layers with transformers' standard layout."""
    kinds = {spec.layer_kind(i).value for i in range(spec.num_layers)}
    if spec.moe is not None or len(kinds) > 1 or spec.family in DEEPSEEK_FAMILIES | {"gpt_oss", "opt"}:
        raise CardError(f"scope: {scope.value} is modelled for dense decoders with full attention in every layer"
                        f" ({spec.name} is {spec.family}); allowed there: full, lora, qlora")


def resolve_ia3(spec: ModelSpec, targets: list[str] | None, feedforward: list[str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(targets, feedforward) with PEFT's defaults for the model type; a target matching no linear is refused."""
    if spec.fused_qkv and not spec.fused_projections:
        raise CardError(f"scope: ia3 on {spec.name} (Qwen (1.0)'s c_attn / c_proj / w1 / w2 layout) is not modelled;"
                        " allowed there: full, lora, qlora, dora")
    if targets is None:
        if spec.family not in IA3_DEFAULTS:
            raise CardError(f"ia3.targets: PEFT has no default (IA)^3 targets for {spec.family}; give them, from:"
                            f" {', '.join(linear_names(spec))}")
        t, f = IA3_DEFAULTS[spec.family]
        return t, f if feedforward is None else tuple(feedforward)
    names = linear_names(spec)
    bad = [m for m in targets if m not in names]
    if bad:
        raise CardError(f"ia3.targets: '{bad[0]}' matches no linear layer of {spec.name}; its linear layers:"
                        f" {', '.join(names)}")
    return tuple(targets), tuple(feedforward or ())


def _ia3_groups(spec: ModelSpec, v: PeftVariant) -> list[tuple[LinearGroup, bool]]:
    """(group, is feedforward) for every linear group (IA3) the vectors scale."""
    return [(g, _short(g.name) in v.ia3_feedforward) for g in linear_groups(spec) if _short(g.name) in v.ia3_targets]


def trained_params(spec: ModelSpec, v: PeftVariant) -> VariantParams:
    """DoRA: the magnitude vectors (``out`` per adapted module); IA3: one vector per target (``in`` for a
    feedforward module, else ``out``); prompt tuning: the ``n × hidden`` prompt embedding."""
    if v.scope is Scope.DORA:
        assert v.lora is not None
        shapes = [((g.out_features,), g.count * g.experts) for g in targeted_groups(spec, v.lora)]
    elif v.scope is Scope.IA3:
        shapes = [(((1, g.in_features) if ff else (g.out_features, 1)), g.count) for g, ff in _ia3_groups(spec, v)]
    elif v.scope is Scope.PREFIX_TUNING:
        shapes = [((v.num_virtual_tokens, prefix_row_elements(spec)), 1)]
    else:
        shapes = [((v.num_virtual_tokens, spec.hidden_size), 1)]
    tensors = tuple(TensorGroup(s, c) for s, c in shapes)
    return VariantParams(count=sum(t.numel * t.count for t in tensors), tensors=tensors,
                         largest=max((t.numel for t in tensors), default=0))


def probe_lora(v: PeftVariant) -> LoraSpec | None:
    """The rank-1 fp32 LoRA whose requires-grad flow matches the method's (None for DoRA: its own LoRA)."""
    if v.scope is Scope.IA3:
        return LoraSpec(rank=1, alpha=1.0, targets=v.ia3_targets, adapter_dtype_bytes=FP32)
    if v.scope in (Scope.PROMPT_TUNING, Scope.PREFIX_TUNING):
        return LoraSpec(rank=1, alpha=1.0, targets=(ALL_LINEAR,), adapter_dtype_bytes=FP32)
    return None


def prefix_row_elements(spec: ModelSpec) -> int:
    """Elements of one virtual token's row in PEFT's prefix embedding: a key and a value of ``kv_dim`` for every
    layer (``num_layers * 2 * token_dim``, ``token_dim = head_dim * num_key_value_heads``)."""
    return spec.num_layers * 2 * spec.kv_dim


def prefix_saved_bytes_per_layer(spec: ModelSpec, *, micro_batch_size: int, seq_len: int, num_virtual_tokens: int,
                                 compute_dtype_bytes: int) -> float:
    """What a prefix adds to one layer's saved bytes beyond the masked SDPA layer at ``seq_len`` keys
    (``memory.activations._attention`` with ``masked``): the cache's concatenated key and value (``kv_dim`` wide over
    ``n + s`` rows, kept by the returned cache), the ``n`` more rows of the repeated k and v SDPA saves (``q_dim``
    wide: ``repeat_kv`` copies them under a mask, ``memory.attention.sdpa_window_repeats_kv``; ``kv_dim`` where it
    does not), and the saved float mask's ``s x n`` more columns."""
    from trainfit.memory.attention import sdpa_window_repeats_kv

    a, b, n, s = compute_dtype_bytes, micro_batch_size, num_virtual_tokens, seq_len
    repeated = spec.q_dim if sdpa_window_repeats_kv(spec) else spec.kv_dim
    return float(2 * a * b * ((n + s) * spec.kv_dim + n * repeated) + a * b * s * n)


def effective_seq_len(seq_len: int, v: PeftVariant | None) -> int:
    """Tokens per sequence through the model: prompt tuning prepends its virtual tokens."""
    return seq_len + (v.num_virtual_tokens if v is not None and v.scope is Scope.PROMPT_TUNING else 0)


def _per_layer(spec: ModelSpec, total: float) -> float:
    return total / spec.num_layers


def probe_saved_bytes_per_layer(spec: ModelSpec, probe: LoraSpec, *, tokens: int) -> float:
    """What the probe LoRA saves per layer: PEFT's fp32 input cast (4·in) and rank-1 ``lora_A`` output (4·1)."""
    total = sum(g.count * tokens * FP32 * (g.in_features + probe.rank * g.lora_rank_multiplier)
                for g in targeted_groups(spec, probe))
    return _per_layer(spec, total)


def method_saved_bytes_per_layer(spec: ModelSpec, v: PeftVariant, *, tokens: int, compute_dtype_bytes: int,
                                 micro_batch_size: int = 1) -> float:
    """The method's own saved bytes per decoder layer (beyond LoRA's for DoRA; beyond the frozen base's for IA3)."""
    a = compute_dtype_bytes
    if v.scope is Scope.DORA:
        assert v.lora is not None
        adapter = v.lora.adapter_dtype_bytes
        total = sum(g.count * g.out_features * (tokens * (a + adapter) + DORA_CONSTANT_BYTES_PER_OUT)
                    for g in targeted_groups(spec, v.lora))
    elif v.scope is Scope.IA3:
        total = sum(g.count * ((tokens * FP32 * g.in_features + FP32 * g.in_features) if ff
                               else (tokens * a * g.out_features + FP32 * g.out_features))
                    for g, ff in _ia3_groups(spec, v))
    elif v.scope is Scope.PREFIX_TUNING:
        return prefix_saved_bytes_per_layer(spec, micro_batch_size=micro_batch_size, seq_len=tokens // micro_batch_size,
                                            num_virtual_tokens=v.num_virtual_tokens,
                                            compute_dtype_bytes=compute_dtype_bytes)
    else:
        total = 0.0
    return _per_layer(spec, total)


def dora_forward_transient_bytes(spec: ModelSpec, v: PeftVariant, *, grad: bool, base_dtype_bytes: float) -> float:
    """The largest adapted module's weight-norm temporaries in one DoRA forward (bytes; they all go when the
    module returns). peft casts the input to the adapter dtype (``tuners/lora/layer.py`` l.1100), then
    ``dora.py`` builds ``eye(in)`` (l.97), ``lora_B(lora_A(eye)).T`` (l.98, out x in), the base weight cast
    to the input's dtype (a copy when the base is stored in another dtype) and, in ``get_weight_norm``
    (l.86-91), ``scaling * lora_weight`` and ``weight + ...`` (out x in each). With grad (a forward without
    checkpointing, or the checkpointed layer's recompute in backward) ``lora_A`` saves ``eye`` for its weight's
    gradient and the graph lives to the module's return: ``a in^2 + (3 + cast) a in out`` at the norm. Without
    grad (the checkpointed forward) ``eye`` goes once read: ``max(a in^2 + a in out, (3 + cast) a in out)``.
    Fake-tensor trace, one llama layer (hidden 2048, intermediate 8192, fp32 adapters on bf16), DoRA minus
    LoRA forward peak with grad / without: down_proj 511.5 / 319.5 MiB (here 512 / 320), gate_proj 270.7 /
    254.6 (272 / 256), q_proj 78.4 / 62.3 (80 / 64), k_proj 30.4 / 18.4 (32 / 20)."""
    assert v.lora is not None
    a = v.lora.adapter_dtype_bytes
    cast = 1 if base_dtype_bytes != a else 0

    def one(i: int, o: int) -> float:
        norm = (3 + cast) * a * i * o
        return float(a * i * i + norm if grad else max(a * i * i + a * i * o, norm))

    return max((one(g.in_features, g.out_features) for g in targeted_groups(spec, v.lora)), default=0.0)


def adjust_activations(act: ActivationBytes, spec: ModelSpec, v: PeftVariant, *, micro_batch_size: int,
                       seq_len: int, compute_dtype_bytes: int, zero_centred_norm: bool) -> ActivationBytes:
    """The method's saved bytes from ``act`` (computed with ``probe_lora(v)`` or DoRA's LoRA at
    ``effective_seq_len``): the probe's own tensors out, the method's in; prompt tuning also saves layer 0's
    input norm (fp32 copy and rsqrt; zero-centred norms their fp32 ``1 + w``) and the prompt indices."""
    tokens = micro_batch_size * seq_len
    delta = method_saved_bytes_per_layer(spec, v, tokens=tokens, compute_dtype_bytes=compute_dtype_bytes,
                                         micro_batch_size=micro_batch_size)
    probe = probe_lora(v)
    if probe is not None:
        delta -= probe_saved_bytes_per_layer(spec, probe, tokens=tokens)
    per_layer = [p + delta for p in act.per_layer]
    embedding, ckpt_embedding, own = act.embedding, act.checkpointed_embedding, act.embedding_backward
    if v.scope is Scope.PROMPT_TUNING:
        h = spec.hidden_size
        per_layer[0] += tokens * (FP32 * h + FP32) + (FP32 * h if zero_centred_norm else 0)
        indices = INT64 * micro_batch_size * v.num_virtual_tokens
        embedding, ckpt_embedding = embedding + indices, ckpt_embedding + indices
        own = None if own is None else own + indices
    return replace(act, per_layer=tuple(int(round(p)) for p in per_layer), embedding=embedding,
                   checkpointed_embedding=ckpt_embedding, embedding_backward=own)


def notes(spec: ModelSpec, v: PeftVariant, *, micro_batch_size: int, seq_len: int) -> list[str]:
    """What the plan assumes for the method, one line each."""
    if v.scope is Scope.DORA:
        assert v.lora is not None
        widest = max(targeted_groups(spec, v.lora), key=lambda g: g.in_features)
        eye = FP32 * widest.in_features ** 2
        return [f"DoRA (peft {PEFT_VERSION} tuners/lora/dora.py): a trained fp32 magnitude per output of each adapted"
                " module; each module also saves its base output and lora_B output for the magnitude's gradient;"
                f" the per-forward weight-norm temporaries (fp32 eye(in), {eye / 2**20:.0f} MiB for"
                f" {_short(widest.name)}, B·A and W + s·B·A) are a transient of each layer's forward (and of its"
                " recompute under checkpointing); their compute is not in the step time (timed as LoRA)"]
    if v.scope is Scope.IA3:
        return [f"(IA)^3 (peft {PEFT_VERSION}): vectors on {', '.join(v.ia3_targets)} (input-scaled:"
                f" {', '.join(v.ia3_feedforward) or 'none'}), fp32; the frozen base saves what grads flowing from the"
                " first target need"]
    if v.scope is Scope.PREFIX_TUNING:
        return [f"prefix tuning (huggingface/peft @d787f51b, prefix_projection false): a trained fp32 key and value of"
                f" {v.num_virtual_tokens} virtual tokens for each of {spec.num_layers} layers"
                f" ({prefix_row_elements(spec)} elements a token); every layer's attention reads {v.num_virtual_tokens}"
                f" + {seq_len} keys through SDPA with transformers' materialised mask (memory-efficient kernel, k and v"
                " repeated to every head, no causal skip); the MLPs and the head run the sequence's tokens only; the"
                " cached prefix keys / values and the per-layer concatenations are saved beside the base's"]
    return [f"prompt tuning (peft {PEFT_VERSION}): {v.num_virtual_tokens} virtual tokens prepended: every layer, the"
            f" logits and the step time run {seq_len + v.num_virtual_tokens} tokens per sequence (the loss ignores the"
            " virtual ones); the fp32 prompt embedding is the only trained tensor"]
