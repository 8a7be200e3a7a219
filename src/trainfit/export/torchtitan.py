"""torchtitan 0.2.2 job config (TOML): ``torchrun ... -m torchtitan.train --job.config_file torchtitan.toml``.

Keys and defaults: pytorch/torchtitan v0.2.2 (73a0e6979dd10b6b1904098eb3c8f62c18ab87ce, the last release with
TOML job configs; the next commit's refactor #2386 moved to Python config registries),
``torchtitan/config/job_config.py``, read by ``torchtitan/config/manager.py`` ``ConfigManager`` (which refuses
unknown fields):

* ``[parallelism]``: ``data_parallel_replicate_degree`` (1), ``data_parallel_shard_degree`` (-1: the leftover
  ranks; written explicitly, so the file holds the world size), ``fsdp_reshard_after_forward`` (default |
  never), ``tensor_parallel_degree`` (torchtitan's TP plan always shards norms along the sequence: sequence
  parallel), ``pipeline_parallel_degree``, ``pipeline_parallel_schedule`` (1F1B | Interleaved1F1B: a looped
  schedule with no ``pipeline_parallel_layers_per_stage`` builds 2 stages per rank,
  ``torchtitan/distributed/pipeline_parallel.py``), ``module_fqns_per_model_part`` (the modules of every model
  part: the card's ``pipeline_layout``), ``pipeline_parallel_microbatch_size``,
  ``context_parallel_degree`` (ring attention over SDPA: KV shards passed by all-gather or all-to-all;
  no Ulysses), ``expert_parallel_degree``, ``expert_tensor_parallel_degree`` (1 or TP),
  ``expert_parallel_comm_backend`` (standard | deepep: the card's ``moe_dispatcher``).
* ``[training]``: ``local_batch_size`` (per device; under PP split into microbatches), ``global_batch_size``
  (gradient accumulation = global / (local x dp)), ``seq_len``, ``enable_cpu_offload`` (FSDP CPU offload of
  parameters, gradients and optimizer states), ``dtype`` (float32 | bfloat16: all parameters, gradients and
  optimizer states in bf16), ``mixed_precision_param`` (bfloat16 | float32).
* ``[activation_checkpoint]`` ``mode``: selective (default, ``selective_ac_option`` "2": every 2nd layer, the
  card's ``checkpoint_every_n_layers``; "op": per-op SAC) | full | none.
* ``[model]`` ``name`` / ``flavor`` (``torchtitan/models/*/__init__.py``), ``hf_assets_path``
  (``scripts/download_hf_assets.py`` saves to ``./assets/hf/<repo name>``), ``converters``:
  ``quantize.linear.float8`` with ``[quantize.linear.float8] recipe_name`` tensorwise (the card's
  ``current``) | rowwise | rowwise_with_gw_hp (``torchtitan/components/quantization/float8.py``).
* ``[optimizer]`` ``name`` (Adam | AdamW), ``implementation`` (for-loop | foreach | fused),
  ``early_step_in_backward``; ``[compile] enable``, ``components`` (model: ``parallel.compile``; loss:
  ``loss.compiled``; torchtitan's default is both).

torchtitan trains a causal language model on text: method sft, full weights only.
"""

from __future__ import annotations

import shlex
from typing import Any

from trainfit.export.common import (
    Export,
    ExportError,
    fsdp2_only_note,
    hsdp_shard_group,
    model_name,
    shared_notes,
    train_gpus_per_node,
)
from trainfit.export.parallel import data_parallel
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    Attention,
    ComputeDtype,
    ContextParallelKind,
    Dtype,
    Fp8Recipe,
    Method,
    MoeDispatcher,
    Offload,
    Optimizer,
    OptimizerImpl,
    PipelineSchedule,
    Scope,
    SelectiveCheckpointing,
    Strategy,
)

VERSION = "0.2.2"
FILENAME = "torchtitan.toml"

FLAVORS: dict[str, tuple[str, str]] = {
    **{f"meta-llama/{p}Llama-3.1-{s}{v}": ("llama3", s) for p in ("", "Meta-") for s in ("8B", "70B", "405B")
       for v in ("", "-Instruct")},
    **{f"Qwen/Qwen3-{s}{v}": ("qwen3", s) for s in ("0.6B", "1.7B", "4B", "8B", "14B", "32B", "30B-A3B", "235B-A22B")
       for v in ("", "-Base")},
    **{f"deepseek-ai/DeepSeek-V3{v}": ("deepseek_v3", "671B") for v in ("", "-Base")},
}
"""Hugging Face ids -> torchtitan 0.2.2 ``[model] name, flavor`` (``torchtitan/models/{llama3,qwen3,deepseek_v3}/__init__.py``)."""

_IMPL = {OptimizerImpl.FUSED: "fused", OptimizerImpl.FOREACH: "foreach", OptimizerImpl.FOR_LOOP: "for-loop"}
IMPL_FROM = {v: k for k, v in _IMPL.items()}


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return toml_string(str(v))


def toml_string(s: str) -> str:
    """A TOML basic string (ASCII): quote, backslash, control characters and non-ASCII escaped (\\uXXXX,
    \\UXXXXXXXX); a lone surrogate, which TOML cannot hold, is refused."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif 0xD800 <= o <= 0xDFFF:
            raise ExportError(f"{s[:40]!r}: a lone surrogate cannot be written to TOML; allowed: Unicode text")
        else:
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
    return '"' + "".join(out) + '"'


def module_fqns(layout: tuple[int, ...]) -> list[list[str]]:
    """``parallelism.module_fqns_per_model_part`` for the card's ``parallel.pipeline_layout``: the embedding on the
    first model part, the final norm and head on the last (torchtitan 0.2.2
    ``torchtitan/distributed/pipeline_parallel.py`` ``generate_llm_fqn_per_model_part`` names: tok_embeddings,
    layers.<i>, norm, output)."""
    parts: list[list[str]] = []
    i = 0
    for k, n in enumerate(layout):
        part = ["tok_embeddings"] if k == 0 else []
        part += [f"layers.{j}" for j in range(i, i + n)]
        i += n
        parts.append(part + (["norm", "output"] if k == len(layout) - 1 else []))
    return parts


def layout_from_fqns(parts: Any) -> tuple[int, ...]:
    """The decoder layers of every model part from ``module_fqns_per_model_part`` (the inverse of ``module_fqns``);
    ValueError (one line) for parts that are not the model's modules in order."""
    where = "parallelism.module_fqns_per_model_part"
    if not isinstance(parts, list) or not parts or not all(isinstance(p, list) for p in parts):
        raise ValueError(f"{where}: a list of module-name lists, one per model part")
    counts, nxt = [], 0
    for k, part in enumerate(parts):
        names = [str(x) for x in part]
        head = ["tok_embeddings"] if k == 0 else []
        tail = ["norm", "output"] if k == len(parts) - 1 else []
        if names[:len(head)] != head or (tail and names[-len(tail):] != tail):
            raise ValueError(f"{where}: tok_embeddings must open the first part and norm, output close the last")
        mid = names[len(head):len(names) - len(tail)]
        if mid != [f"layers.{j}" for j in range(nxt, nxt + len(mid))]:
            raise ValueError(f"{where}: part {k} holds {mid[:3]}...; allowed: consecutive layers.<i> in model order")
        counts.append(len(mid))
        nxt += len(mid)
    return tuple(counts)


def _sections(card: RunCard, notes: list[str]) -> dict[str, dict[str, Any]]:
    par = card.parallel
    prec = card.precision
    m = model_name(card)
    if m not in FLAVORS:
        known = sorted({f"{n} ({', '.join(sorted({f for i, (nn, f) in FLAVORS.items() if nn == n}))})"
                        for n, _ in FLAVORS.values()})
        raise ExportError(f"model: torchtitan {VERSION} has no [model] name/flavor for {m!r}; allowed for --to torchtitan:"
                          f" {', '.join(known)} (Hugging Face ids such as meta-llama/Llama-3.1-70B, Qwen/Qwen3-8B)")
    name, flavor = FLAVORS[m]
    model: dict[str, Any] = {"name": name, "flavor": flavor, "hf_assets_path": f"./assets/hf/{m.rsplit('/', 1)[-1]}"}

    # precision
    training: dict[str, Any] = {}
    w = card.weights_dtype
    if w is Dtype.FP32:
        training["dtype"] = "float32"
    else:
        training["dtype"] = "bfloat16"
        if w is not Dtype.BF16:
            notes.append(f"precision.weights {w.value}: torchtitan keeps parameters in float32 or bfloat16; exported as bfloat16")
    if prec.master_weights.value != "none":
        notes.append(f"precision.master_weights {prec.master_weights.value}: torchtitan has no separate master copy"
                     " (training.dtype float32 keeps the parameters themselves in fp32: precision.weights fp32)")
    if prec.optimizer_states.value not in ("same_as_weights", "fp32" if w is Dtype.FP32 else "bf16"):
        notes.append(f"precision.optimizer_states {prec.optimizer_states.value}: torchtitan's optimizer states follow"
                     " training.dtype")
    if prec.grads is not None and prec.grads.value != {"float32": "fp32", "bfloat16": "bf16"}[training["dtype"]]:
        notes.append(f"precision.grads {prec.grads.value}: torchtitan's gradients follow training.dtype")
    c = prec.compute
    training["mixed_precision_param"] = "float32" if c is ComputeDtype.FP32 else "bfloat16"
    if c is ComputeDtype.FP16:
        notes.append("precision.compute fp16: torchtitan's mixed precision is bfloat16 or float32; exported as bfloat16")
    quant: dict[str, Any] = {}
    if c is ComputeDtype.FP4 or prec.fp8_recipe is Fp8Recipe.MXFP8:
        notes.append(f"precision.compute {c.value} ({prec.gemm_recipe.value}): torchtitan's MXFP8 / NVFP4 converters"
                     " are not written by this export; exported without them (precision.compute bf16)")
    elif c is ComputeDtype.FP8:
        if prec.fp8_recipe is Fp8Recipe.CURRENT:
            model["converters"] = ["quantize.linear.float8"]
            quant = {"recipe_name": "tensorwise"}
            if prec.fp8_all_gather:  # torchao's float8 FSDP2 all-gather, with the scales precomputed once a step
                quant |= {"enable_fsdp_float8_all_gather": True, "precompute_float8_dynamic_scale_for_fsdp": True}
        else:
            notes.append(f"precision.fp8_recipe {prec.fp8_recipe.value if prec.fp8_recipe else None}: torchtitan's float8"
                         " (torchao) scales tensorwise (the card's current) or rowwise, not delayed or 128x128 blockwise;"
                         " exported without fp8 (precision.compute bf16)")

    # parallel layout
    world = train_gpus_per_node(card) * card.hardware.nodes
    tp, cp, pp = par.tensor_parallel, par.context_parallel, par.pipeline_parallel
    dp = data_parallel(card)
    s = par.strategy
    replicate, shard, reshard = 1, dp, "default"
    if s is Strategy.SINGLE:
        replicate = shard = dp = 1
        world = tp * cp * pp
        if card.world_size > world:
            notes.append(f"parallel.strategy single: one data-parallel replica on {world} GPU(s); the card's other"
                         f" {card.world_size - world} GPUs idle (hardware.gpus_per_node / hardware.nodes: the file"
                         f" launches {world})")
    elif s is Strategy.DDP and tp * cp * pp == 1:
        replicate, shard = dp, 1
    elif s is Strategy.HSDP:
        # the card's HSDP shard group over the data x context ranks (parallel.hsdp_shard_size, else a node's);
        # torchtitan's FSDP mesh is dp_shard x cp (ParallelDims: dp_shard_cp), replicated dp_replicate times
        group = hsdp_shard_group(card)
        if group % cp == 0 and dp % (group // cp) == 0:
            shard = group // cp
            replicate = dp // shard
        else:
            notes.append(f"parallel.strategy hsdp: a shard group of {group} data x context ranks does not split into"
                         " torchtitan's (replicate, shard) mesh; exported as FSDP over all data ranks")
    elif s is Strategy.FSDP_GRAD_OP:
        reshard = "never"
    elif s is not Strategy.FSDP:
        notes.append(f"parallel.strategy {s.value}: torchtitan shards with FSDP2 (or replicates with DDP when nothing"
                     " else is parallel); exported as fsdp")
    if note := fsdp2_only_note(card, "torchtitan"):
        notes.append(note)
    para: dict[str, Any] = {"data_parallel_replicate_degree": replicate, "data_parallel_shard_degree": shard}
    if reshard != "default":
        para["fsdp_reshard_after_forward"] = reshard
    para["tensor_parallel_degree"] = tp
    if tp > 1 and not par.sequence_parallel:
        notes.append("parallel.sequence_parallel false: torchtitan's tensor-parallel plan always shards the norms along"
                     " the sequence (sequence parallel); exported with it")
    para["pipeline_parallel_degree"] = pp
    mb, ga = card.batch.micro_batch_size, card.batch.grad_accum
    if pp > 1:
        looped = par.pipeline_schedule is PipelineSchedule.INTERLEAVED and par.virtual_stages > 1
        para["pipeline_parallel_schedule"] = "Interleaved1F1B" if looped else "1F1B"
        if par.pipeline_layout is not None:
            # every stage's modules in model order (stage i on rank i % pp for 1F1B and the looped schedules)
            para["module_fqns_per_model_part"] = module_fqns(par.pipeline_layout)
        elif looped and par.virtual_stages != 2:
            notes.append(f"parallel.virtual_stages {par.virtual_stages}: torchtitan's Interleaved1F1B builds 2 stages per"
                         " rank unless pipeline_parallel_layers_per_stage is set; exported with 2")
        if par.pipeline_schedule is PipelineSchedule.INTERLEAVED and par.virtual_stages == 1:
            notes.append("parallel.pipeline_schedule interleaved with one virtual stage: exported as 1F1B")
        para["pipeline_parallel_microbatch_size"] = mb
        training["local_batch_size"] = mb * ga  # split into ga microbatches of mb
    else:
        training["local_batch_size"] = mb
        if par.pipeline_schedule is not PipelineSchedule.ONE_F_ONE_B or par.virtual_stages > 1:
            notes.append("parallel.pipeline_schedule / virtual_stages: only read with pipeline_parallel > 1; not written")
    para["context_parallel_degree"] = cp
    if cp > 1 and par.context_parallel_kind is ContextParallelKind.ULYSSES:
        notes.append("parallel.context_parallel_kind ulysses: torchtitan's context parallel is ring attention over SDPA"
                     " (KV shards all-gathered or rotated); exported as ring")
    para["expert_parallel_degree"] = par.expert_parallel
    if par.moe_dispatcher is MoeDispatcher.DEEPEP:
        para["expert_parallel_comm_backend"] = "deepep"
    etp = par.expert_tensor_parallel
    if etp not in (1, tp):
        notes.append(f"parallel.expert_tensor_parallel {etp}: torchtitan takes 1 or the tensor-parallel degree; exported as 1")
        etp = 1
    para["expert_tensor_parallel_degree"] = etp
    training["global_batch_size"] = training["local_batch_size"] * dp if pp > 1 else mb * ga * dp
    training["seq_len"] = card.batch.seq_len

    off = par.offload
    training["enable_cpu_offload"] = off is Offload.PARAMS_AND_OPTIMIZER
    if off is Offload.OPTIMIZER:
        notes.append("parallel.offload optimizer: torchtitan offloads parameters, gradients and optimizer states"
                     " together (training.enable_cpu_offload) or nothing; exported as none")
    if par.activation_offload:
        notes.append("parallel.activation_offload: torchtitan 0.2.2 has no activation offload setting")

    ac: dict[str, Any]
    sel = par.selective_checkpointing
    if sel is SelectiveCheckpointing.OP:
        ac = {"mode": "selective", "selective_ac_option": "op"}
    elif par.gradient_checkpointing and par.checkpoint_every_n_layers not in (None, 1):
        # torchtitan wraps layer k (from 1) when k % selective_ac_option == 0, the card's rule
        ac = {"mode": "selective", "selective_ac_option": str(par.checkpoint_every_n_layers)}
    elif par.gradient_checkpointing or sel is SelectiveCheckpointing.CORE_ATTENTION:
        ac = {"mode": "full"}
        if sel is SelectiveCheckpointing.CORE_ATTENTION:
            notes.append("parallel.selective_checkpointing core_attention: torchtitan's selective checkpointing is per op"
                         " (op) or every n-th layer; exported as full (parallel.gradient_checkpointing true: less memory,"
                         " more time than planned)")
    else:
        ac = {"mode": "none"}

    opt: dict[str, Any] = {"name": "AdamW", "implementation": _IMPL.get(prec.optimizer_impl, "fused")}
    if prec.optimizer_impl not in _IMPL:  # Apex's DistributedFusedAdam: torchtitan builds torch's AdamW
        notes.append(f"precision.optimizer_impl {prec.optimizer_impl.value}: torchtitan {VERSION} builds torch's AdamW;"
                     " exported as fused")
    if prec.optimizer is not Optimizer.ADAMW:
        notes.append(f"precision.optimizer {prec.optimizer.value}: torchtitan {VERSION} builds Adam or AdamW; exported as AdamW")
    if prec.optimizer_in_backward:
        opt["early_step_in_backward"] = True

    if card.attention is not Attention.SDPA:
        notes.append(f"attention {card.attention.value}: torchtitan's {name} runs torch SDPA (its flash backend on"
                     " Hopper/Ampere); written by the model flavor, not a setting")
    if card.loss.chunked:
        notes.append("loss.chunked: torchtitan computes the full logits (loss parallel over the vocabulary with TP)")

    # torchtitan compiles the model and the loss by default (``compile.components`` ["model", "loss"]: pytorch/torchtitan
    # v0.2.2 torchtitan/config/job_config.py l.721-727, torchtitan/components/loss.py l.33-35): the card's
    # parallel.compile is the model, loss.compiled the loss
    compile_section: dict[str, Any] = {"enable": par.compile or card.loss.compiled}
    if compile_section["enable"] and not (par.compile and card.loss.compiled):
        compile_section["components"] = [c for c, on in (("model", par.compile), ("loss", card.loss.compiled)) if on]
    out: dict[str, dict[str, Any]] = {
        "job": {"description": f"trainfit: {card.name or m}"},
        "model": model,
        "optimizer": opt,
        "training": training,
        "parallelism": para,
        "activation_checkpoint": ac,
        "compile": compile_section,
    }
    if quant:
        out["quantize.linear.float8"] = quant
    return out, world


def build(card: RunCard) -> Export:
    notes: list[str] = []
    if card.method is not Method.SFT:
        raise ExportError(f"method: torchtitan {VERSION} trains a language model on text (no {card.method.value}"
                          " trainer); allowed for --to torchtitan: sft (use --to verl, nemo-rl or openrlhf)")
    if card.scope is not Scope.FULL:
        raise ExportError(f"scope: torchtitan {VERSION} trains full weights (no LoRA adapter); allowed for --to torchtitan:"
                          " full (use --to trl, verl or nemo-rl for LoRA)")
    sections, world = _sections(card, notes)
    # expert_parallel_comm_backend writes alltoall (standard) and deepep; torchtitan has no all-gather dispatcher
    allgather = card.parallel.moe_dispatcher is MoeDispatcher.ALLGATHER
    notes.extend(shared_notes(card, "torchtitan", megatron_has=set() if allgather else {"moe_dispatcher"}))
    nodes = card.hardware.nodes if world == train_gpus_per_node(card) * card.hardware.nodes else 1
    per_node = world // nodes
    launch = (f"torchrun --nnodes={nodes} --nproc_per_node={per_node} -m torchtitan.train"
              f" --job.config_file {FILENAME}")
    lines = [f"# torchtitan {VERSION} job config written by trainfit export",
             f"# launch: {launch}"]
    if nodes > 1:
        lines.append("# (on each node, with --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT)")
    lines.append(f"# hf assets: python scripts/download_hf_assets.py --repo_id {shlex.quote(model_name(card))}"
                 " --assets tokenizer config safetensors index")
    for sec, kv in sections.items():
        lines.append("")
        lines.append(f"[{sec}]")
        lines += [f"{k} = {_toml(v)}" for k, v in kv.items()]
    text = "\n".join(lines) + "\n"
    data = {"launch": launch, "config": sections}
    if nodes != card.hardware.nodes:
        notes.append(f"hardware.nodes {card.hardware.nodes}: the run fits on one machine ({world} GPUs)")
    return Export(target="torchtitan", text=text, data=data, notes=notes, filename=FILENAME)


def to_torchtitan(card: RunCard) -> dict[str, dict[str, Any]]:
    """torchtitan TOML sections (dotted section names) for the card."""
    return build(card).data["config"]
