"""OpenRLHF 0.11 command-line flags.

OpenRLHF 0.11 groups its flags by namespace (``--actor.num_gpus_per_node``, ``--ds.zero_stage``,
``--vllm.gpu_memory_utilization``...); releases up to 0.9 used flat names (``--actor_num_gpus_per_node``,
``--zero_stage``, ``--vllm_gpu_memory_utilization``). PPO/GRPO run
``python3 -m openrlhf.cli.train_ppo_ray`` (Ray); SFT, DPO and RM run ``deepspeed --module
openrlhf.cli.train_sft|train_dpo|train_rm``. OpenRLHF trains with DeepSpeed, so FSDP strategies
map to their ZeRO stage.

Each value is one argv token, quoted for the shell with ``shlex.quote``; a value that starts with
``-`` is joined to its flag (``--flag=value``) so argparse cannot read it as a flag. Weight sync:
OpenRLHF sends the actor's parameters to vLLM one at a time (``--vllm.sync_backend`` picks the
transport); ``trainfit import --from openrlhf`` reads it back as per_parameter.

Model parallelism (openrlhf 0.11.2 from PyPI, ``openrlhf/cli/train_*.py``, ``openrlhf/utils/deepspeed/deepspeed.py``):
``--ds.ring_attn_size`` (context parallel by ring-flash-attn's llama3 varlen ring attention; it turns on
``--ds.packing_samples`` and replaces Hugging Face's flash-attention function, so the model runs
flash_attention_2), ``--ds.ring_attn_head_stride`` (heads per ring step, default 1), and
``--ds.tensor_parallel_size`` (DeepSpeed AutoTP, ``tensor_parallel.autotp_size``). Its device mesh is
(dp, sp, tp) and ``--train.batch_size`` counts sequences over the dp ranks only (``accumulated_gradient =
train_batch_size x ring_attn_size x tensor_parallel_size / micro_train_batch_size / world_size``).
OpenRLHF 0.11 has no Ulysses, pipeline, expert or sequence parallel flag, no selective checkpointing and
no fp8 training: those are said in notes and listed as lost.
"""

from __future__ import annotations

import shlex

from trainfit.export.common import (
    DS_STAGE3_KEYS,
    DS_STAGE12_KEYS,
    HF_ATTENTION,
    Export,
    ExportError,
    effective_weight_sync,
    finite,
    is_rl,
    model_name,
    non_default,
    overlap_comm,
    shared_notes,
    train_gpus_per_node,
    zero_stage,
)
from trainfit.export.parallel import missing_parallel_notes
from trainfit.memory.deepspeed import DEFAULTS as DS_DEFAULTS
from trainfit.methods.roles import critic_model, kl_coef, reference_placement, reward_model
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    Attention,
    ComputeDtype,
    ContextParallelKind,
    Method,
    Offload,
    Optimizer,
    Placement,
    RefPlacement,
    RolloutEngine,
    Scope,
    SelectiveCheckpointing,
    Strategy,
    WeightSync,
)
from trainfit.spec.enums import SERVING_ENGINES

SCRIPT = {
    Method.SFT: "openrlhf.cli.train_sft",
    Method.DPO: "openrlhf.cli.train_dpo",
    Method.RM: "openrlhf.cli.train_rm",
    Method.PPO: "openrlhf.cli.train_ppo_ray",
    Method.GRPO: "openrlhf.cli.train_ppo_ray",
}

_FROM_FSDP = {Strategy.FSDP: 3, Strategy.FSDP_GRAD_OP: 2, Strategy.HSDP: 3, Strategy.DDP: 0, Strategy.SINGLE: 0}


def _zero_flags(card: RunCard, stage: int, notes: list[str]) -> list[str]:
    """The card's ``deepspeed`` section as OpenRLHF 0.11 flags. Its get_train_ds_config
    (openrlhf/utils/deepspeed/deepspeed_utils.py) writes every bucket size and stage-3 limit as "auto",
    which deepspeed.initialize drops (runtime/config_utils.py): DeepSpeed's defaults, whatever the card
    says. The one flag, --ds.overlap_comm, sets overlap_comm and contiguous_gradients true."""
    if zero_stage(card) is None:  # an FSDP/DDP card: its plan reads no deepspeed section
        return []
    ds = card.deepspeed
    f = ["--ds.overlap_comm"] if ds.overlap_comm is True else []
    gets: dict[str, object] = {k: DS_DEFAULTS[k] for k in DS_STAGE12_KEYS + DS_STAGE3_KEYS}
    gets["contiguous_gradients"] = True
    gets["overlap_comm"] = True if f else stage == 3
    keys = DS_STAGE12_KEYS + (DS_STAGE3_KEYS if stage == 3 else ())
    card_has = {k: getattr(ds, k) for k in keys}
    card_has["overlap_comm"] = overlap_comm(card)
    for k in keys:
        if card_has[k] != gets[k]:
            how = ("OpenRLHF 0.11 has no flag to turn it off (--ds.overlap_comm only turns it on)"
                   if k in ("overlap_comm", "contiguous_gradients") else
                   "OpenRLHF 0.11 has no flag; its DeepSpeed config says \"auto\", which deepspeed.initialize drops")
            notes.append(f"deepspeed.{k} {card_has[k]}: {how}; DeepSpeed uses {gets[k]}")
    return f


def _ds_flags(card: RunCard, notes: list[str], gc_flag: str) -> list[str]:
    s = card.parallel.strategy
    stage = zero_stage(card)
    f: list[str] = []
    if stage is None:
        stage = _FROM_FSDP[s]
        note = f"parallel.strategy {s.value}: OpenRLHF trains with DeepSpeed; exported as --ds.zero_stage {stage}"
        if stage:
            keys = DS_STAGE12_KEYS + (DS_STAGE3_KEYS if stage == 3 else ())
            note += (f"; its ZeRO settings read back as DeepSpeed's defaults ({', '.join('deepspeed.' + k for k in keys)}),"
                     f" which the card's {s.value} plan does not read")
        notes.append(note)
    f += ["--ds.zero_stage", str(stage)]
    if stage:
        f += _zero_flags(card, stage, notes)
    if s is Strategy.HSDP:
        f += ["--ds.zpg", str(train_gpus_per_node(card))]
    off = card.parallel.offload
    if off is not Offload.NONE:
        f.append("--ds.adam_offload")
    if off is Offload.PARAMS_AND_OPTIMIZER:
        notes.append("parallel.offload params_and_optimizer: OpenRLHF offloads only the optimizer (--ds.adam_offload); no parameter offload flag")
    if card.parallel.checkpoints_layers:
        f.append(gc_flag)
        if card.parallel.selective_checkpointing is not SelectiveCheckpointing.NONE:
            notes.append(f"parallel.selective_checkpointing {card.parallel.selective_checkpointing.value}: OpenRLHF"
                         f" checkpoints whole layers ({gc_flag}); exported as full checkpointing"
                         " (parallel.gradient_checkpointing true: less memory, more time than planned)")
    if card.parallel.activation_offload:
        notes.append("parallel.activation_offload: OpenRLHF has no activation offload flag")
    c = card.precision.compute
    if c is ComputeDtype.FP16:
        f += ["--ds.param_dtype", "fp16"]
    else:
        f += ["--ds.param_dtype", "bf16"]
        if c is ComputeDtype.FP32:
            notes.append("precision.compute fp32: OpenRLHF trains in bf16 or fp16 only; exported as bf16")
        if c.quantized_gemms:
            notes.append(f"precision.compute {c.value}: OpenRLHF 0.11 has no {c.value} training; exported as bf16")
    par = card.parallel
    notes.extend(missing_parallel_notes(card, "OpenRLHF 0.11", has={"tensor_parallel", "context_parallel"}))
    attn = card.attention
    if par.context_parallel > 1:
        f += ["--ds.ring_attn_size", str(par.context_parallel), "--ds.ring_attn_head_stride", "1", "--ds.packing_samples"]
        if par.context_parallel_kind is ContextParallelKind.ULYSSES:
            notes.append("parallel.context_parallel_kind ulysses: OpenRLHF 0.11 splits the sequence with ring attention"
                         " only (--ds.ring_attn_size); exported as ring")
        if attn is not Attention.FLASH:
            notes.append(f"attention {attn.value}: OpenRLHF's ring attention replaces the flash-attention function;"
                         " exported as flash_attention_2")
            attn = Attention.FLASH
    b = card.batch
    if b.packed_sample_tokens is not None and not is_rl(card):
        # --ds.packing_samples: samples packed into rows, kept apart by flash-attention's varlen kernel (OpenRLHF
        # replaces the Hugging Face flash-attention function); the mean sample length is the data's
        if "--ds.packing_samples" not in f:
            f.append("--ds.packing_samples")
        cv = (f", batch.packed_sample_length_cv {b.packed_sample_length_cv:g}"
              if b.packed_sample_length_cv is not None else "")
        notes.append(f"batch.packed_sample_tokens {b.packed_sample_tokens}{cv}: written as --ds.packing_samples; the"
                     " mean sample length is the data's, not an OpenRLHF flag (the import plans rows as one sequence"
                     " each until it is set again)")
        if attn is not Attention.FLASH:
            notes.append(f"attention {attn.value}: OpenRLHF packs samples with flash attention's varlen kernel;"
                         " exported as flash_attention_2")
            attn = Attention.FLASH
    if par.tensor_parallel > 1:
        f += ["--ds.tensor_parallel_size", str(par.tensor_parallel)]
    f += ["--ds.attn_implementation", HF_ATTENTION[attn]]
    if card.loss.chunked:
        f.append("--ds.use_liger_kernel")
    if card.scope is not Scope.FULL:
        f += ["--ds.lora.rank", str(card.lora.rank), "--ds.lora.alpha", str(int(finite("lora.alpha", card.lora.alpha)))]
        if not float(card.lora.alpha).is_integer():
            notes.append(f"lora.alpha {card.lora.alpha}: OpenRLHF takes an integer alpha; rounded down")
        t = list(card.lora_targets)
        bad = [x for x in t if not x or x.startswith("-")]
        if bad:
            raise ExportError(f"lora.targets: {bad[0]!r} cannot be passed to OpenRLHF (argparse reads it as a flag); allowed: module names")
        f += ["--ds.lora.target_modules", *t]
        if card.lora.dropout:
            f += ["--ds.lora.dropout", str(card.lora.dropout)]
        if card.scope is Scope.QLORA:
            f.append("--ds.load_in_4bit")
    o = card.precision.optimizer
    if o is not Optimizer.ADAMW:
        notes.append(f"precision.optimizer {o.value}: OpenRLHF uses DeepSpeed Adam (or Muon); no {o.value}")
    return f


def _ppo(card: RunCard, notes: list[str]) -> list[str]:
    hw = card.hardware
    ro = card.rollout
    per_node = train_gpus_per_node(card)
    m = model_name(card)
    f = [f"--actor.model_name_or_path={m}", "--actor.num_nodes", str(hw.nodes), "--actor.num_gpus_per_node", str(per_node)]
    ref = reference_placement(card)
    kl = kl_coef(card)
    if ref is not RefPlacement.NONE:
        f += ["--ref.num_nodes", str(hw.nodes), "--ref.num_gpus_per_node", str(per_node)]
        if ref is RefPlacement.CPU:
            f.append("--ref.offload")
        if ref is RefPlacement.PRECOMPUTED:
            notes.append("roles.reference precomputed: OpenRLHF computes reference log-probs every step")
        if ref is RefPlacement.LORA_DISABLED:
            notes.append("roles.reference lora_disabled: OpenRLHF loads a separate reference model (its own GPU memory)")
        if ref is RefPlacement.HOST_SWAP:
            notes.append("roles.reference host_swap: OpenRLHF loads a separate reference model (its own GPU memory);"
                         " exported without --ref.offload")
    critic = critic_model(card, m)
    if critic is not None:
        f += [f"--critic.model_name_or_path={critic}", "--critic.num_nodes", str(hw.nodes), "--critic.num_gpus_per_node", str(per_node)]
    rm = reward_model(card)
    if rm:
        f += [f"--reward.model_name_or_path={rm}", "--reward.num_nodes", str(hw.nodes), "--reward.num_gpus_per_node", str(per_node)]
    else:
        notes.append("roles.reward_model rule: pass --reward.remote_url or --train.agent_func_path with your reward function")
    # rollout
    if ro.engine is RolloutEngine.SGLANG:
        notes.append("rollout.engine sglang: OpenRLHF rolls out with vLLM only; exported as vllm")
    if ro.engine in SERVING_ENGINES:
        engine_gpus = hw.gpus_per_node * hw.nodes if ro.placement is Placement.COLOCATE else (ro.gpus or 1) * hw.nodes
        f += [
            "--vllm.num_engines", str(max(1, engine_gpus // ro.tensor_parallel)),
            "--vllm.tensor_parallel_size", str(ro.tensor_parallel),
            "--vllm.gpu_memory_utilization", str(ro.gpu_memory_utilization),
        ]
        if ro.placement is Placement.COLOCATE:
            f.append("--train.colocate_all")
            if ro.sleep_level > 0:
                f += ["--vllm.enable_sleep", "--ds.enable_sleep"]
        elif ro.sleep_level > 0:
            notes.append("rollout.sleep_level: OpenRLHF sleeps vLLM only with --train.colocate_all; dropped for a split placement")
        if ro.sleep_level == 2:
            notes.append("rollout.sleep_level 2: OpenRLHF's --vllm.enable_sleep picks the level itself")
        if non_default(card, "rollout.max_num_seqs") or non_default(card, "rollout.max_num_batched_tokens"):
            notes.append("rollout.max_num_seqs / max_num_batched_tokens: OpenRLHF has no flag for these vLLM settings")
    else:
        f += ["--vllm.num_engines", "0"]
        notes.append(
            f"rollout.engine {ro.engine.value}: OpenRLHF generates with the DeepSpeed actor (--vllm.num_engines 0); the vLLM settings "
            "rollout.tensor_parallel, rollout.sleep_level and rollout.cuda_graphs are not written"
        )
    sync = effective_weight_sync(card)
    if sync is not WeightSync.PER_PARAMETER:
        notes.append(
            f"rollout.weight_sync {sync.value}: OpenRLHF syncs one parameter at a time (--vllm.sync_backend picks only "
            "the transport); plan the OpenRLHF run with --set rollout.weight_sync=per_parameter"
        )
    if ro.generation_calls > 1:
        notes.append(f"rollout.generation_calls {ro.generation_calls}: OpenRLHF generates the step's prompts in one"
                     " call; not written (the run is planned with one call, --set rollout.generation_calls=1)")
    f += [
        "--rollout.batch_size", str(ro.prompts_per_step),
        "--rollout.n_samples_per_prompt", str(ro.num_generations),
        "--rollout.max_new_tokens", str(ro.response_len),
        "--data.max_len", str(ro.prompt_len + ro.response_len),
        "--rollout.micro_batch_size", str(ro.logprob_micro_batch_size or card.batch.micro_batch_size),
        "--train.micro_batch_size", str(card.batch.micro_batch_size),
        "--train.batch_size", str(_rl_train_batch(card, notes)),
    ]
    notes.append(
        f"rollout.prompt_len {ro.prompt_len}: OpenRLHF has no prompt-length flag; --data.max_len "
        f"{ro.prompt_len + ro.response_len} bounds prompt + response"
    )
    if card.method is Method.GRPO:
        f += ["--algo.advantage.estimator", "group_norm", "--algo.kl.init_coef", str(kl)]
        if kl > 0:
            f += ["--algo.kl.use_loss", "--algo.kl.estimator", "k3"]
    else:
        f += ["--algo.advantage.estimator", "gae", "--algo.kl.init_coef", str(kl)]
    f += _ds_flags(card, notes, "--actor.gradient_checkpointing_enable")
    return f


def _offline(card: RunCard, notes: list[str]) -> list[str]:
    f = [
        f"--model.model_name_or_path={model_name(card)}",
        "--train.micro_batch_size", str(card.batch.micro_batch_size),
        "--train.batch_size", str(_train_batch(card)),
        "--data.max_len", str(card.batch.seq_len),
    ]
    if card.method is Method.DPO:
        f += ["--model.beta", str(kl_coef(card))]
        ref = reference_placement(card)
        if ref is RefPlacement.CPU:
            f.append("--ref.offload")
        elif ref is RefPlacement.PRECOMPUTED:
            notes.append("roles.reference precomputed: OpenRLHF DPO computes reference log-probs every step")
        elif ref is RefPlacement.HOST_SWAP:
            notes.append("roles.reference host_swap: OpenRLHF DPO loads a separate reference model on the GPU")
    f += _ds_flags(card, notes, "--model.gradient_checkpointing_enable")
    return f


_MULTI = ("--ds.lora.target_modules",)


def _argv(flags: list[str]) -> list[str]:
    """The argv tokens, checked: a LoRA module name that argparse would read as a flag is refused.
    (Free-text values such as model ids are written as one ``--flag=value`` token.)"""
    i = 0
    while i < len(flags):
        if flags[i] in _MULTI:
            i += 1
            while i < len(flags) and not flags[i].startswith("--"):
                if flags[i].startswith("-") or not flags[i]:
                    raise ExportError(f"lora.targets: {flags[i]!r} cannot be passed to OpenRLHF; allowed: module names")
                i += 1
        else:
            i += 1
    return flags


def _train_batch(card: RunCard) -> int:
    """``--train.batch_size``: sequences per optimizer step over OpenRLHF's dp ranks (training GPUs over ring
    attention x tensor parallel; a pipeline split it cannot write leaves its ranks to data parallel)."""
    p = card.parallel
    return card.batch.micro_batch_size * card.batch.grad_accum * max(
        1, train_gpus_per_node(card) * card.hardware.nodes // (p.context_parallel * p.tensor_parallel))


def _rl_train_batch(card: RunCard, notes: list[str]) -> int:
    """``--train.batch_size`` of an RL run: the rollout's samples over the card's ``rollout.mini_batches``. OpenRLHF
    takes rollout.batch_size x n_samples_per_prompt / train.batch_size optimizer steps per rollout batch (OpenRLHF/
    OpenRLHF openrlhf/trainer/ppo_trainer.py l.72-78 ``max_steps``; the DeepSpeed engine accumulates train.batch_size
    x ring x tp / micro_batch_size / world micro-batches a step, openrlhf/utils/deepspeed/deepspeed.py l.110-116
    @3c3be6234e0cb353e76bb8019947db9dfe99fca7). (It was micro-batch x accumulation x dp ranks: a step count the plan
    does not have.)"""
    ro = card.rollout
    samples = ro.prompts_per_step * ro.num_generations
    batch = max(1, samples // ro.mini_batches)
    if samples % ro.mini_batches:
        notes.append(f"rollout.mini_batches {ro.mini_batches} does not divide the rollout's {samples} samples:"
                     f" --train.batch_size {batch}, so OpenRLHF takes {-(-samples // batch)} optimizer steps per"
                     " rollout batch")
    dp = max(1, _train_batch(card) // (card.batch.micro_batch_size * card.batch.grad_accum))
    if batch % (dp * card.batch.micro_batch_size):
        notes.append(f"--train.batch_size {batch} is not a whole number of micro-batches of {card.batch.micro_batch_size}"
                     f" on each of {dp} data-parallel ranks; OpenRLHF's accumulation rounds it down")
    return batch


def _s(key: str, v: object) -> str:
    return str(finite(key, v))


def build(card: RunCard) -> Export:
    notes: list[str] = []
    hw = card.hardware
    script = SCRIPT[card.method]
    if is_rl(card):
        flags = _ppo(card, notes)
        launcher = f"python3 -m {script}"
    else:
        flags = _offline(card, notes)
        launcher = f"deepspeed --num_nodes {hw.nodes} --num_gpus {hw.gpus_per_node} --module {script}"
    notes.extend(shared_notes(card, "openrlhf"))
    flags = _argv(flags)
    parts: list[str] = []
    for tok in flags:
        if tok.startswith("--"):
            parts.append(shlex.quote(tok))
        else:
            parts[-1] += " " + shlex.quote(tok)
    text = launcher + " \\\n" + " \\\n".join(f"    {p}" for p in parts) + "\n"
    data = {"command": launcher, "script": script, "flags": flags}
    return Export(target="openrlhf", text=text, data=data, notes=notes, filename="run_openrlhf.sh")


def to_openrlhf(card: RunCard) -> list[str]:
    """OpenRLHF CLI flags (argv tokens, values as separate items) for the card."""
    return build(card).data["flags"]
