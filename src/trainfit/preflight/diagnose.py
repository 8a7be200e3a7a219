"""`trainfit diagnose`: a symptom -> what to check first and which way to go (the seed's table);
a CUDA OOM log + a card -> the phase that failed, the planned tensor that failed, and what each
one-variable fix saves in that phase at the card's own shapes.

The phase comes from the traceback above the OOM message, read from the innermost frame outwards
(``PHASE_RULES``: TRL, transformers, accelerate, PEFT, verl, OpenRLHF, DeepSpeed, vLLM and torch
function names). A frame either names one phase (``_multi_tensor_adamw``: the optimizer step), a
set the outer frames narrow (``_get_per_token_logps``: a log-prob pass, whose caller says whether
it is the reference, the old policy or the loss), or nothing (model code). Words elsewhere in
the log (an engine start line, a warning) never count. Where the frames leave more than one
phase and a card is given, the failed allocation's size decides among them; without frames the
size alone may name the phase; otherwise the phase is reported as unknown, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.preflight.oom import Frame, OomMessage, last_oom, traceback_before
from trainfit.spec.card import RunCard
from trainfit.spec.enums import Method, Phase, Scope
from trainfit.units import GIB, MIB

ONE_VARIABLE_ADVICE = (
    "change one main variable at a time, and record peak memory, phase times and task results before and after"
)
MATCH_REL_TOLERANCE = 0.02
MATCH_ABS_TOLERANCE_BYTES = 12 * MIB
"""The allocator rounds large blocks to 2 MiB and the message prints two decimals (0.005 GiB ~ 5 MiB)."""
FIX_MIN_SAVING_BYTES = 0.01 * GIB
"""A re-planned change that saves less than this in the failing phase (and does not make the plan fit) is not listed."""
MEASURED_OVER_PLAN_RATIO = 2.6
"""The log's allocated bytes must exceed this many times the plan's allocated figure for the failing phase (and by
``MEASURED_OVER_PLAN_ABS_BYTES``) before diagnose says the card likely does not describe the run. Above the worst
under-plan of the published-memory benchmark: benchmarks/accuracy.md table (b), worst point #2703 (QLoRA 70B under
FSDP1 with parameter offload: measured 19.56 GiB on the device, planned 7.72 GiB, -60.5 %, 2.53x the plan; next
#2704, 2.29x); no held-out point (table (b')) is above 1.35x. A plan that is off by as much as trainfit is on a
published run is a planning error, not a different run, so it must not steer the user away from the card's fixes
(tests/preflight/test_diagnose_review.py reads benchmarks/accuracy.json and fails if a published point's
measured/planned ratio reaches this). Only the log's figure above the plan's is read: an OOM part way through a
phase holds less than the phase's high-water mark, so a lower figure says nothing."""
MEASURED_OVER_PLAN_ABS_BYTES = 2 * GIB
"""The least excess (log's allocated bytes minus the plan's) that is flagged, whatever the ratio: on a small plan a
few hundred MiB of workspaces and allocator rounding the plan does not itemise is not a different run."""


@dataclass(frozen=True, slots=True)
class Symptom:
    key: str
    name: str
    seed: str
    """The seed's wording (Chinese), for traceability. ``oom-forward`` and ``oom-no-grad`` are not rows of the seed's
    table (its OOM rows are load, backward and generation); their Chinese follows the seed's pattern (加载阶段 / 反向阶段 /
    生成阶段 OOM)."""
    check_first: tuple[str, ...]
    direction: str


SYMPTOMS: dict[str, Symptom] = {s.key: s for s in (
    Symptom("oom-load", "OOM while loading", "加载阶段 OOM", ("weight precision", "duplicate copies of the model", "actual sharding"),
            "solve load capacity first: the weights must fit before anything else is worth measuring"),
    Symptom("oom-forward", "OOM in forward", "前向阶段 OOM",
            ("micro-batch size", "sequence length", "logits (tokens x vocabulary, upcast to fp32 for the loss)", "activations"),
            "reduce the micro-batch or the sequence length; when the failing tensor is the logits, compute the loss in"
            " chunks (loss.chunked) so the full-vocabulary logits are never held"),
    Symptom("oom-no-grad", "OOM in a no-grad pass", "无梯度前向阶段 OOM",
            ("log-prob micro-batch size (rollout.logprob_micro_batch_size, logprob_max_tokens_per_micro_batch)",
             "logits (tokens x vocabulary) of the log-prob pass", "the reference's placement (on the GPU, offloaded,"
             " or the policy with its LoRA adapter disabled)", "a colocated engine's gpu_memory_utilization while it is"
             " not asleep"),
            "the reference / old-policy log-prob, reward or critic-values pass keeps no activations for backward: its"
            " peak is one micro-batch's logits on top of the weights resident then; lower the log-prob micro-batch (or"
            " its token budget), compute the log-probs in chunks (loss.chunked), keep no second copy of the weights"
            " on the GPU (an offloaded reference, or the LoRA policy with its adapter disabled), and let a colocated"
            " engine sleep or take a smaller gpu_memory_utilization"),
    Symptom("oom-backward", "OOM in backward", "反向阶段 OOM", ("micro-batch size", "trajectory/sequence length", "activations"),
            "reduce the micro-batch, then verify activation (gradient) checkpointing is really on"),
    Symptom("oom-generation", "OOM during generation", "生成阶段 OOM", ("candidate concurrency", "generation length", "KV cache"),
            "lower the number of sequences generated at once"),
    Symptom("low-gpu-util", "low GPU utilisation", "GPU 利用率低", ("communication", "tool execution", "CPU", "data loading"),
            "time each phase separately (generation, reward/tools, forward/backward, optimizer, sync)"),
    Symptom("identical-rewards", "identical rewards within a group", "同组奖励全相同", ("task difficulty", "the test runner", "the reward function"),
            "check whether the relative learning signal is missing: identical rewards give zero advantage"),
    Symptom("no-change-after-update", "generation unchanged after an update", "更新后生成无变化", ("weight sync", "adapter version"),
            "check what the generation side has actually loaded"),
    Symptom("wrong-after-resume", "wrong results after resume", "恢复后结果异常", ("optimizer", "scheduler", "random state", "data position"),
            "use the framework's full resume mechanism; a final adapter is for deployment and usually cannot resume exactly"),
)}
OOM_SYMPTOMS = ("oom-load", "oom-forward", "oom-no-grad", "oom-backward", "oom-generation")
NO_GRAD_PHASES = ("ref_logprob", "old_logprob", "reward", "critic_value")
"""The forward-only passes of an RL or DPO step (no activations kept for a backward): the ``oom-no-grad`` row's."""
"""The rows whose fixes a card re-plans (one-variable changes at the card's shapes)."""


# ---------------------------------------------------------------------------------------------
# the phase from the traceback

LOAD, ROLLOUT, REF, OLD, REWARD, VALUE = "load", "rollout", "ref_logprob", "old_logprob", "reward", "critic_value"
FWD, BWD, STEP, SYNC = "forward", "backward", "optimizer_step", "weight_sync"
"""Role-neutral phase tokens: forward/backward/optimizer_step become actor_* or critic_* in an RL run."""
TRAIN = frozenset({FWD, BWD, STEP})
LOGPROB = frozenset({REF, OLD, FWD})
"""A log-prob pass: the reference's, the old policy's, or the loss's own forward."""


@dataclass(frozen=True, slots=True)
class PhaseRule:
    """Frames this rule recognises -> the phases they can be in."""

    framework: str
    phases: frozenset[str]
    functions: frozenset[str] = frozenset()
    """Function names (any, when empty and ``code`` is given)."""
    path: str = ""
    """A substring the frame's file must contain ('' for any)."""
    code: tuple[str, ...] = ()
    """Substrings of the frame's source line; any one matches."""
    critic: bool = False
    """The frame is the critic's (verl update_critic, OpenRLHF training_step_critic)."""

    def matches(self, f: Frame) -> bool:
        if self.path and self.path not in f.path:
            return False
        if self.functions and f.function not in self.functions:
            return False
        if self.code and not any(c in f.code for c in self.code):
            return False
        return bool(self.functions or self.code or self.path)


def _r(framework: str, phases, functions=(), path: str = "", code=(), critic: bool = False) -> PhaseRule:
    ph = frozenset({phases} if isinstance(phases, str) else phases)
    return PhaseRule(framework, ph, frozenset(functions), path, tuple(code), critic)


PHASE_RULES: tuple[PhaseRule, ...] = (
    # --- the source line a frame printed (caller frames: which pass they started) -------------
    _r("trl", REF, code=("ref_per_token_logps", "ref_logps", "ref_chosen_logps", "ref_rejected_logps", "reference_chosen_logps",
                          "compute_ref_log_probs(")),
    _r("openrlhf", REF, code=("base_action_log_probs", "self.initial_model(")),
    _r("trl", OLD, code=("old_per_token_logps",)),
    _r("openrlhf", OLD, code=("action_log_probs = self.actor(",)),
    _r("openrlhf", VALUE, code=("value = self.critic(",)),
    _r("trl", REWARD, code=("_calculate_rewards(", "self.reward_model(", "remote_rm_fn", "get_reward(")),
    _r("trl", SYNC, code=("_move_model_to_vllm(", "_sync_fsdp", "broadcast_to_vllm(", "sync_weights(")),
    _r("any", ROLLOUT, code=(".generate(", "generate_sequences(", "generate_samples(", "unwrap_model_for_generation(")),
    _r("any", BWD, code=(".backward(", "run_backward(")),
    _r("any", STEP, code=("optimizer.step(", "optimizer_step(")),
    _r("any", LOAD, code=("from_pretrained(",)),
    # --- torch --------------------------------------------------------------------------------
    _r("torch", BWD, ("backward", "_engine_run_backward", "run_backward"), path="torch/autograd/"),
    _r("torch", BWD, ("backward",), path="torch/_tensor.py"),
    _r("torch", BWD, ("unpack_hook", "recompute_fn", "unpack", "backward"), path="torch/utils/checkpoint.py"),
    _r("torch", BWD, ("_post_backward_hook", "_pre_backward_hook", "_post_backward_reshard", "post_backward"), path="torch/distributed/"),
    _r("torch", STEP, path="torch/optim/"),
    _r("bitsandbytes", STEP, path="bitsandbytes/optim/"),
    _r("torch", LOAD, ("_apply", "to", "cuda", "load_state_dict", "_load_from_state_dict"), path="torch/nn/modules/module.py"),
    _r("torch", LOAD, ("__init__", "_init_param_handle_from_module", "_auto_wrap", "fully_shard", "_move_module_to_device",
                        "_materialize_meta_module"), path="torch/distributed/fsdp/"),
    # --- transformers / accelerate / peft -----------------------------------------------------
    _r("transformers", LOAD, ("from_pretrained", "_load_pretrained_model", "_load_state_dict_into_meta_model", "load_shard_file",
                               "_load_state_dict_into_model", "dispatch_model", "caching_allocator_warmup")),
    _r("transformers", ROLLOUT, ("generate", "_sample", "_beam_search", "_assisted_decoding", "sample", "greedy_search",
                                 "beam_search", "_contrastive_search"), path="transformers/generation/"),
    _r("transformers", FWD, ("compute_loss",), path="transformers/trainer.py"),
    _r("transformers", {FWD, BWD}, ("training_step",), path="transformers/trainer.py"),
    _r("transformers", STEP, ("_inner_training_loop",), code=("optimizer.step", "lr_scheduler.step")),
    _r("accelerate", BWD, ("backward",), path="accelerate/"),
    _r("accelerate", STEP, ("step",), path="accelerate/optimizer.py"),
    _r("accelerate", LOAD, ("prepare", "prepare_model", "_prepare_deepspeed", "_prepare_fsdp", "_prepare_one"), path="accelerate/"),
    _r("peft", SYNC, ("merge_adapter", "merge_and_unload", "_unload_and_optionally_merge")),
    _r("peft", LOAD, ("get_peft_model", "prepare_model_for_kbit_training")),
    # --- TRL ----------------------------------------------------------------------------------
    _r("trl", LOGPROB, ("_get_per_token_logps", "_get_per_token_logps_and_entropies", "selective_log_softmax",
                        "get_per_token_logps")),
    _r("trl", FWD, ("compute_loss", "_compute_loss", "compute_liger_loss", "_compute_loss_liger"), path="trl/"),
    _r("trl", {REF, OLD, ROLLOUT, REWARD}, ("_generate_and_score_completions", "_prepare_inputs")),
    _r("trl", ROLLOUT, ("_generate", "_generate_single_turn", "_generate_with_vllm", "unwrap_model_for_generation",
                        "_generate_completions", "generate_completions")),
    _r("trl", REWARD, ("_calculate_rewards", "get_reward")),
    _r("trl", SYNC, ("_move_model_to_vllm", "_sync_fsdp_params_to_vllm", "_sync_fsdp1_params_to_vllm",
                     "_sync_fsdp2_params_to_vllm", "_sync_weights", "update_named_param", "_fix_param_name_to_vllm")),
    _r("trl", {FWD, REF}, ("concatenated_forward", "_compute_loss_liger_dpo")),
    _r("trl", REF, ("compute_ref_log_probs", "compute_reference_log_probs", "_compute_ref_log_probs")),
    _r("trl", {FWD, REF}, ("get_batch_loss_metrics",)),
    _r("trl", {REF, OLD, VALUE, REWARD, ROLLOUT}, ("batched_forward_pass",)),
    # --- verl ---------------------------------------------------------------------------------
    _r("verl", ROLLOUT, ("actor_rollout_generate_sequences", "rollout_generate_sequences", "generate_sequences")),
    _r("verl", OLD, ("actor_rollout_compute_log_prob", "actor_rollout_ref_compute_log_prob")),
    _r("verl", OLD, ("compute_log_prob",), path="fsdp_workers"),
    _r("verl", OLD, ("compute_log_prob",), path="megatron_workers"),
    _r("verl", REF, ("compute_ref_log_prob", "actor_rollout_compute_ref_log_prob", "ref_compute_ref_log_prob",
                     "actor_rollout_ref_compute_ref_log_prob")),
    _r("verl", {REF, OLD}, ("compute_log_prob",)),
    _r("verl", LOGPROB, ("_forward_micro_batch", "logprobs_from_logits", "logprobs_from_logits_flash_attn",
                         "logprobs_from_logits_v2", "logprobs_from_logits_naive", "entropy_from_logits",
                         "entropy_from_logits_with_chunking")),
    _r("verl", TRAIN, ("update_policy", "update_actor", "actor_rollout_update_actor", "actor_rollout_ref_update_actor")),
    _r("verl", VALUE, ("compute_values", "critic_compute_values")),
    _r("verl", TRAIN, ("update_critic", "critic_update_critic"), critic=True),
    _r("verl", REWARD, ("compute_rm_score", "rm_compute_rm_score")),
    _r("verl", SYNC, path="sharding_manager"),
    _r("verl", LOAD, ("init_model", "actor_rollout_init_model", "_build_model_optimizer", "_build_rollout", "critic_init_model",
                      "load_fsdp_model_to_gpu", "load_fsdp_optimizer")),
    # --- OpenRLHF -----------------------------------------------------------------------------
    _r("openrlhf", {REF, OLD, VALUE, REWARD, ROLLOUT}, ("make_experience", "make_experience_list", "make_experience_batch",
                                                         "make_experience_batch_from_samples")),
    _r("openrlhf", ROLLOUT, ("generate_samples", "_generate_vllm", "_generate_with_hf", "generate_responses")),
    _r("openrlhf", TRAIN, ("training_step_actor", "ppo_train"), path="openrlhf/"),
    _r("openrlhf", TRAIN, ("training_step_critic",), critic=True),
    _r("openrlhf", SYNC, ("_broadcast_to_vllm", "broadcast_to_vllm", "_broadcast_param", "update_weight")),
    _r("openrlhf", BWD, ("backward",), path="openrlhf/"),
    _r("openrlhf", STEP, ("optimizer_step",), path="openrlhf/"),
    # --- DeepSpeed ----------------------------------------------------------------------------
    _r("deepspeed", BWD, ("backward", "reduce_ready_partitions_and_remove_grads", "reduce_partition_and_remove_grads",
                          "_reduce_and_partition_ipg_grads", "__reduce_and_partition_ipg_grads", "reduce_independent_p_g_buckets_and_remove_grads",
                          "average_tensor", "allreduce_gradients", "partition_grads", "__add_grad_to_ipg_bucket"), path="deepspeed/"),
    _r("deepspeed", STEP, ("step", "_take_model_step", "_optimizer_step", "unscale_and_clip_grads", "_prepare_fp32_grad_for_sub_group",
                           "_post_step", "_reassign_or_swap_out_partitioned_parameters"), path="deepspeed/"),
    _r("deepspeed", LOAD, ("initialize", "__init__", "_configure_distributed_model", "_broadcast_model", "_configure_optimizer",
                           "_configure_zero_optimizer", "_setup_for_real_optimizer", "initialize_optimizer_states",
                           "_create_fp32_partitions", "_create_fp16_partitions_with_defragmentation", "_convert_to_zero_parameters",
                           "load_checkpoint"), path="deepspeed/"),
    # --- vLLM (engine start and generation) -----------------------------------------------------
    _r("vllm", LOAD, ("__init__", "from_engine_args", "_initialize_kv_caches", "determine_num_available_blocks", "profile_run",
                      "initialize_cache", "_init_cache", "determine_available_memory", "initialize_from_config",
                      "capture_model", "_dummy_sampler_run", "load_model", "initialize_kv_cache"), path="vllm/"),
    _r("vllm", {LOAD, SYNC}, ("load_weights",), path="vllm/"),
    _r("vllm", ROLLOUT, ("generate", "_run_engine", "step", "execute_model", "_sample", "sample", "compute_logits",
                         "_validate_and_add_requests", "chat"), path="vllm/"),
    _r("vllm", SYNC, ("wake_up",), path="vllm/"),
    # any other vLLM frame: the engine runs at start-up (profiling, CUDA graphs) or while generating
    _r("vllm", {LOAD, ROLLOUT}, path="vllm/"),
)
RL_PATHS = ("grpo_trainer", "ppo_trainer", "rloo_trainer", "online_dpo_trainer", "/verl/", "/openrlhf/", "experience_maker",
            "/slime/", "/nemo_rl/", "/skyrl")
"""A frame in one of these files makes the traceback an RL run's (actor_/critic_ phases)."""


@dataclass(frozen=True, slots=True)
class Attribution:
    """Where the OOM happened, and how trainfit knows."""

    phase: Phase | None
    """None when neither the frames nor the size say."""
    candidates: tuple[Phase, ...]
    """Every phase the frames allow (one when they decide; the size picks among several)."""
    source: str
    """'traceback', 'traceback+size', 'size' or 'unknown'."""
    frame: Frame | None = None
    """The innermost frame a rule recognised."""
    refined_by: Frame | None = None
    """The outer frame that narrowed it (a log-prob pass's caller), if any."""
    framework: str | None = None
    why: str = ""


def _rule_for(f: Frame) -> PhaseRule | None:
    for rule in PHASE_RULES:
        if rule.matches(f):
            return rule
    return None


def _ray_class_rule(f: Frame) -> PhaseRule | None:
    """OpenRLHF's Ray actors name their role in the class: ray::ReferenceModelRayActor.forward()."""
    if f.file != "ray":
        return None
    cls = f.code.removeprefix("ray::").split(".")[0].lower()
    fn = f.function
    if "reference" in cls:
        return _r("openrlhf", REF, (fn,))
    if "reward" in cls:
        return _r("openrlhf", REWARD, (fn,))
    if "critic" in cls:
        return _r("openrlhf", VALUE if fn in ("forward", "compute_values") else TRAIN, (fn,), critic=fn not in ("forward", "compute_values"))
    if "llm" in cls or "vllm" in cls:
        return _r("vllm", ROLLOUT, (fn,))
    if ("policy" in cls or "actor" in cls) and fn == "fit":
        return _r("openrlhf", TRAIN, (fn,))
    return None


def _is_rl(frames: tuple[Frame, ...]) -> bool:
    return any(f.file == "ray" or any(p in f.path for p in RL_PATHS) for f in frames)


def _to_phase(token: str, *, rl: bool, critic: bool) -> Phase:
    if token in TRAIN and rl:
        return Phase(("critic_" if critic else "actor_") + token)
    return Phase(token)


def _model_code(f: Frame) -> bool:
    return "torch/nn/" in f.path or "/modeling_" in f.path or f.function in ("forward", "_call_impl", "_wrapped_call_impl")


def phase_from_frames(frames: tuple[Frame, ...], *, rl_card: bool = False) -> Attribution:
    """The phase of the innermost recognised frame, narrowed by its callers (see ``PHASE_RULES``)."""
    rl = rl_card or _is_rl(frames)
    cand: frozenset[str] | None = None
    first: Frame | None = None
    refined: Frame | None = None
    framework: str | None = None
    rules = [(f, _ray_class_rule(f) or _rule_for(f)) for f in frames]
    critic = any(r is not None and r.critic for _, r in rules)
    for f, rule in reversed(rules):
        if rule is None:
            continue
        if cand is None:
            cand, first, framework = rule.phases, f, rule.framework
        else:
            narrowed = cand & rule.phases
            if narrowed and narrowed != cand:
                cand, refined = narrowed, f
        if len(cand) == 1:
            break
    if cand is None:
        if any(_model_code(f) for f in frames):
            inner = next(f for f in reversed(frames) if _model_code(f))
            phases = (_to_phase(FWD, rl=rl, critic=False),)
            return Attribution(phases[0], phases, "traceback", inner, None, "torch",
                               "only model code in the traceback: a forward pass (no framework frame says which)")
        return Attribution(None, (), "unknown", why="no traceback frames above the message" if not frames
                           else "no frame in the traceback belongs to a known training phase")
    order = [LOAD, ROLLOUT, REF, OLD, REWARD, VALUE, FWD, BWD, STEP, SYNC]
    phases = tuple(_to_phase(t, rl=rl, critic=critic) for t in order if t in cand)
    where = f"{first.function} ({_short(first.path)}:{first.line})"
    if refined is not None:
        where += f", called from {refined.function} ({_short(refined.path)}:{refined.line})"
    if len(phases) == 1:
        return Attribution(phases[0], phases, "traceback", first, refined, framework, f"innermost recognised frame: {where}")
    return Attribution(None, phases, "traceback", first, refined, framework,
                       f"innermost recognised frame: {where}; it runs in {', '.join(p.value for p in phases)}")


def _short(path: str) -> str:
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.rsplit("/", 3)[-1] if path.count("/") > 3 else path


# ---------------------------------------------------------------------------------------------
# the allocation's size against the plan, at the card's own shapes

RL_METHODS = (Method.PPO, Method.GRPO)


@dataclass(frozen=True, slots=True)
class Match:
    label: str
    phase: str | None
    bytes: float
    relative_error: float
    matches: bool


@dataclass(frozen=True, slots=True)
class Shapes:
    """Token shapes of the card's passes: what the plan itself uses."""

    train_sequences: int
    """Sequences per trained micro-batch (DPO: chosen + rejected)."""
    train_tokens: int
    """Tokens per trained sequence (RL: rollout.prompt_len + rollout.response_len)."""
    logprob_sequences: int
    """RL: sequences per log-prob pass (rollout.logprob_micro_batch_size, else the micro-batch)."""
    prompt_len: int | None
    response_len: int | None
    """RL only."""

    def describe(self) -> str:
        if self.response_len is None:
            return f"{self.train_sequences} sequence(s) x {self.train_tokens} tokens"
        return (f"{self.train_sequences} sequence(s) x {self.prompt_len} + {self.response_len} = {self.train_tokens} tokens"
                f" (rollout.prompt_len + rollout.response_len)")


def card_shapes(card: RunCard) -> Shapes:
    b = card.batch.micro_batch_size
    if card.method in RL_METHODS:
        ro = card.rollout
        return Shapes(b, ro.prompt_len + ro.response_len, ro.logprob_micro_batch_size or b, ro.prompt_len, ro.response_len)
    if card.method is Method.DPO:
        return Shapes(2 * b, card.batch.seq_len, 2 * b, None, None)
    return Shapes(b, card.batch.seq_len, b, None, None)


def _plan_phases(plan) -> dict[str, float]:
    """Phase -> its largest device figure over the plan's GPU groups."""
    out: dict[str, float] = {}
    for phases in [g.phases for g in plan.groups] or [plan.phases]:
        for ph in phases:
            out[ph.phase.value] = max(out.get(ph.phase.value, 0.0), ph.device)
    return out


def candidates(card: RunCard, plan) -> list[tuple[str, str | None, float]]:
    """(label, phase, bytes) of single tensors and planned components an allocation could be, at the
    card's own shapes: RL passes over prompt + response tokens, DPO over chosen + rejected."""
    spec = plan.spec
    sh = card_shapes(card)
    rl = card.method in RL_METHODS
    fwd, bwd = ("actor_forward", "actor_backward") if rl else ("forward", "backward")
    step = "actor_optimizer_step" if rl else "optimizer_step"
    b, s = sh.train_sequences, sh.train_tokens
    vocab = spec.head_outputs or spec.vocab_size
    tokens = b * s
    act = 4 if card.precision.compute.value == "fp32" else 2
    wbytes = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "nf4": 0.5}.get(card.weights_dtype.value, 2)
    present = _plan_phases(plan)
    out: list[tuple[str, str | None, float]] = []
    if not card.loss.chunked:
        for ph in (fwd, bwd):
            out.append((f"fp32 logits of one micro-batch (4·b·s·V = 4·{b}·{s}·{vocab}: upcast, log-softmax output or its gradient)", ph,
                        4.0 * tokens * vocab))
        out.append((f"bf16 logits of one micro-batch (2·b·s·V = 2·{b}·{s}·{vocab}: lm_head output or its gradient)", fwd,
                    2.0 * tokens * vocab))
        if rl and sh.response_len:
            r = sh.response_len
            out.append((f"bf16 logits of the responses (2·b·(R+1)·V = 2·{b}·{r + 1}·{vocab}: TRL logits_to_keep)", fwd, 2.0 * b * (r + 1) * vocab))
            for ph in (fwd, bwd):
                out.append((f"fp32 logits of the responses (4·b·R·V = 4·{b}·{r}·{vocab})", ph, 4.0 * b * r * vocab))
    for ph in (fwd, bwd):
        out += [
            (f"one MLP intermediate activation (b·s·I = {b}·{s}·{spec.intermediate_size})", ph, float(act * tokens * spec.intermediate_size)),
            (f"one hidden-state tensor (b·s·h = {b}·{s}·{spec.hidden_size})", ph, float(act * tokens * spec.hidden_size)),
        ]
    if card.attention.value == "eager":
        out.append((f"eager attention scores of one layer (b·heads·s·s = {b}·{spec.num_attention_heads}·{s}·{s})", fwd,
                    float(act * b * spec.num_attention_heads * s * s)))
    out += [
        ("the embedding matrix in the weights dtype", "load", wbytes * spec.vocab_size * spec.hidden_size),
        ("the embedding matrix in fp32 (an optimizer state or master copy)", step, 4.0 * spec.vocab_size * spec.hidden_size),
    ]
    if card.method is Method.DPO and "ref_logprob" in present and not card.loss.chunked:
        out.append((f"bf16 logits of the reference's micro-batch (2·b·s·V = 2·{b}·{s}·{vocab}: chosen + rejected)", "ref_logprob",
                    2.0 * tokens * vocab))
    if rl:
        m, s1, r = sh.logprob_sequences, s - 1, sh.response_len or 0
        for ph in ("ref_logprob", "old_logprob", "reward", "critic_value"):
            if ph not in present:
                continue
            if ph in ("ref_logprob", "old_logprob") and not card.loss.chunked:
                out += [
                    (f"bf16 logits of one log-prob micro-batch (2·m·s·V = 2·{m}·{s}·{vocab})", ph, 2.0 * m * s * vocab),
                    (f"bf16 logits without the last position (2·m·(s-1)·V = 2·{m}·{s1}·{vocab}: the shifted / temperature copy)", ph,
                     2.0 * m * s1 * vocab),
                    (f"bf16 logits of the responses (2·m·(R+1)·V = 2·{m}·{r + 1}·{vocab}: TRL logits_to_keep)", ph, 2.0 * m * (r + 1) * vocab),
                    (f"fp32 logits of the responses (4·m·R·V = 4·{m}·{r}·{vocab}: an fp32 log-softmax or entropy)", ph, 4.0 * m * r * vocab),
                    (f"one sequence's fp32 log-softmax (4·(s-1)·V = 4·{s1}·{vocab})", ph, 4.0 * s1 * vocab),
                    (f"one sequence's bf16 log-softmax (2·(s-1)·V = 2·{s1}·{vocab}: TRL selective_log_softmax row)", ph, 2.0 * s1 * vocab),
                ]
            out.append((f"one MLP intermediate activation of the pass (m·s·I = {m}·{s}·{spec.intermediate_size})", ph,
                        float(2 * m * s * spec.intermediate_size)))
        summary = getattr(plan, "rollout", None)
        if summary is not None and "rollout" in present:
            ro = card.rollout
            if summary.engine == "vllm":
                for ph in ("load", "rollout"):  # the start-up profiling run samples the same batch
                    out.append((f"vLLM sampler fp32 logits (max_num_seqs·V = {ro.max_num_seqs}·{vocab}·4)", ph,
                                4.0 * ro.max_num_seqs * vocab))
                if summary.kv_cache_bytes:
                    out.append(("vLLM's KV cache on this GPU (plan)", "load", float(summary.kv_cache_bytes)))
                    layers = max(1, spec.num_layers)
                    out.append((f"one layer's share of vLLM's KV cache (KV cache / {layers} layers)", "load",
                                float(summary.kv_cache_bytes) / layers))
    for phases in [g.phases for g in plan.groups] or [plan.phases]:
        for ph in phases:
            for name, value in ph.components.items():
                out.append((f"all of '{name}' in {ph.phase.value} (plan component)", ph.phase.value, float(value)))
    seen: set[tuple[str, str | None, float]] = set()
    unique = []
    for c in out:
        if c[2] > 0 and c not in seen:
            seen.add(c)
            unique.append(c)
    return unique


def match_allocation(
    requested: float, card: RunCard, plan, *, phase_hint: str | None = None, phases: tuple[str, ...] = (), top: int = 3
) -> list[Match]:
    """The nearest candidates to a failed allocation, best first: the traceback's phase(s) first (a
    tensor of another phase cannot be the one that failed there), then within tolerance, then the
    nearest. Empty for a zero-byte request (nothing to match)."""
    if not requested or requested <= 0:
        return []
    allowed = set(phases) | ({phase_hint} if phase_hint else set())
    found = []
    for label, phase, size in candidates(card, plan):
        err = abs(size - requested) / requested
        ok = abs(size - requested) <= max(MATCH_REL_TOLERANCE * requested, MATCH_ABS_TOLERANCE_BYTES)
        found.append(Match(label, phase, size, err, ok))
    found.sort(key=lambda m: (bool(allowed) and m.phase not in allowed, not m.matches, m.relative_error))
    return found[:top]


# ---------------------------------------------------------------------------------------------
# fixes, each re-planned at the card's shapes

@dataclass(frozen=True, slots=True)
class Fix:
    change: str
    peak_before_bytes: float
    peak_after_bytes: float
    capacity_bytes: float
    phase: str | None = None
    """The phase the saving is measured in (the OOM's phase; else the plan's peak phase)."""
    phase_before_bytes: float = 0.0
    phase_after_bytes: float = 0.0
    """0 when the change removes the phase."""
    fits: bool = False
    """The re-planned card fits."""

    @property
    def saved_bytes(self) -> float:
        return self.phase_before_bytes - self.phase_after_bytes


def _variants(card: RunCard) -> list[tuple[str, dict[str, Any]]]:
    """One-variable changes worth re-planning (a micro-batch change keeps the global batch)."""
    b, p = card.batch, card.parallel
    out: list[tuple[str, dict[str, Any]]] = []
    budget = card.rollout.max_tokens_per_micro_batch if card.method in RL_METHODS else None
    if b.micro_batch_size > 1 and budget is None:  # under a token budget the micro-batch count is not read
        half = b.micro_batch_size // 2
        ga = b.grad_accum * b.micro_batch_size // half
        out.append((f"batch.micro_batch_size {b.micro_batch_size} -> {half} (grad_accum {b.grad_accum} -> {ga} keeps the global batch)",
                    {"batch.micro_batch_size": half, "batch.grad_accum": ga}))
    if not p.gradient_checkpointing:
        out.append(("parallel.gradient_checkpointing -> true", {"parallel.gradient_checkpointing": True,
                                                                "parallel.selective_checkpointing": "none"}))
    if not card.loss.chunked:
        # flash-attn's kernel is a full-logits one: the chunked fix switches to Liger's
        patch = {"loss.chunked": True} | ({"loss.kernel": "liger", "loss.inplace_backward": False,
                                           "loss.temperature_copy": False}
                                          if card.loss.kernel.value == "flash_attn" else {})
        out.append(("loss.chunked -> true (fused linear cross-entropy / chunked log-probs: no full logits)", patch))
    if card.attention.value == "eager":
        out.append(("attention -> sdpa", {"attention": "sdpa"}))
    if card.method in RL_METHODS:
        ro = card.rollout
        from trainfit.methods.rl import logprob_token_budget

        # verl's dynamic batching: halve a token budget, down to the longest sequence (the card's floor)
        floor = -(-(ro.prompt_len + ro.response_len) // p.context_parallel)
        lp_budget = logprob_token_budget(card)
        for key, tokens in (("max_tokens_per_micro_batch", budget),
                            ("logprob_max_tokens_per_micro_batch", lp_budget if lp_budget != budget
                             or ro.logprob_max_tokens_per_micro_batch is not None else None)):
            if tokens is not None and max(floor, tokens // 2) < tokens:
                new_tokens = max(floor, tokens // 2)
                out.append((f"rollout.{key} {tokens} -> {new_tokens}", {f"rollout.{key}": new_tokens}))
        m = ro.logprob_micro_batch_size or b.micro_batch_size
        if m > 1 and lp_budget is None:
            out.append((f"rollout.logprob_micro_batch_size {m} -> {m // 2}", {"rollout.logprob_micro_batch_size": m // 2}))
        if ro.sleep_level == 0 and ro.engine.value == "vllm":
            out.append(("rollout.sleep_level 0 -> 1 (vLLM frees its KV cache and weights while training)", {"rollout.sleep_level": 1}))
        if "weight_sync" not in ro.model_fields_set:
            out.append(("rollout.weight_sync unset (PEFT under FSDP/ZeRO-3 gathers the full model) -> per_parameter",
                        {"rollout.weight_sync": "per_parameter"}))
        elif ro.weight_sync.value != "per_parameter":
            out.append((f"rollout.weight_sync {ro.weight_sync.value} -> per_parameter", {"rollout.weight_sync": "per_parameter"}))
        if ro.max_num_seqs > 1:
            out.append((f"rollout.max_num_seqs {ro.max_num_seqs} -> {ro.max_num_seqs // 2}", {"rollout.max_num_seqs": ro.max_num_seqs // 2}))
        if ro.gpu_memory_utilization > 0.35:
            u = round(ro.gpu_memory_utilization - 0.2, 2)
            out.append((f"rollout.gpu_memory_utilization {ro.gpu_memory_utilization} -> {u}", {"rollout.gpu_memory_utilization": u}))
        if ro.tensor_parallel * 2 <= card.hardware.gpus_per_node:
            out.append((f"rollout.tensor_parallel {ro.tensor_parallel} -> {ro.tensor_parallel * 2}",
                        {"rollout.tensor_parallel": ro.tensor_parallel * 2}))
    if card.method in RL_METHODS or card.method is Method.DPO:
        out += _reference_variants(card)
    if card.scope.value == "full":
        out.append(("scope -> lora", {"scope": "lora"}))
    elif card.scope is Scope.LORA:
        out.append(("scope -> qlora", {"scope": "qlora", "precision.weights": None}))
    if card.world_size > 1 and p.strategy.value in ("single", "ddp", "zero1", "zero2", "fsdp_grad_op"):
        out.append((f"parallel.strategy {p.strategy.value} -> fsdp (shard weights too)", {"parallel.strategy": "fsdp"}))
    from trainfit.methods.presets import offload_change

    more = {"none": "optimizer", "optimizer": "params_and_optimizer"}.get(p.offload.value)
    patch = None if more is None else offload_change(preset=card.preset, world_size=card.world_size,
                                                     strategy=p.strategy, offload=more)
    if patch is None and more == "optimizer":  # a framework that offloads only both (FSDP2's CPUOffloadPolicy)
        more = "params_and_optimizer"
        patch = offload_change(preset=card.preset, world_size=card.world_size, strategy=p.strategy, offload=more)
    if patch is not None:
        with_strategy = f" with parallel.strategy {patch['parallel.strategy']}" if "parallel.strategy" in patch else ""
        out.append((f"parallel.offload -> {more}{with_strategy}", patch))
    if card.precision.optimizer.value == "adamw":
        out.append(("precision.optimizer -> adamw_8bit", {"precision.optimizer": "adamw_8bit"}))
    return out


def _reference_variants(card: RunCard) -> list[tuple[str, dict[str, Any]]]:
    """A reference held on the GPU moved off it: the PEFT policy with its adapter disabled (no second copy of the
    weights), or (PPO/GRPO: ``spec.card._check_reference_placement`` refuses cpu for DPO) offloaded to the host where
    ``methods.rl`` plans an offloaded reference's own pass (SkyRL's, verl's FSDP workers'). Elsewhere a cpu reference
    plans no ref_logprob phase at all, and the re-plan would read the whole phase as saved."""
    from trainfit.methods.roles import REFERENCE_OFFLOAD_PRESETS, reference_placement
    from trainfit.plan.time import verl_fsdp_workers
    from trainfit.spec.enums import RefPlacement

    if reference_placement(card) is not RefPlacement.GPU:
        return []
    out: list[tuple[str, dict[str, Any]]] = []
    if card.scope is not Scope.FULL:
        out.append(("roles.reference gpu -> lora_disabled (the policy with its adapter disabled: no second copy)",
                    {"roles.reference": "lora_disabled"}))
    if card.method in RL_METHODS and (card.preset in REFERENCE_OFFLOAD_PRESETS or verl_fsdp_workers(card)):
        out.append(("roles.reference gpu -> cpu (offloaded: its weights come in for its own pass)",
                    {"roles.reference": "cpu"}))
    return out


def _replanned(card: RunCard, variants, *, calibration=None):  # noqa: ANN001, ANN202
    """``(change, plan)`` for each ``(change, {dotted: value})`` of ``variants``: ``card`` with the patch applied,
    planned with ``calibration``; a patch the card or the planner refuses is skipped."""
    from trainfit.plan import make_plan
    from trainfit.spec.dotted import deep_copy, set_dotted

    base = card.model_dump(mode="json", exclude_unset=True)
    for change, patch in variants:
        data = deep_copy(base)
        for dotted, value in patch.items():
            set_dotted(data, dotted, value)
        try:
            new = make_plan(RunCard.model_validate(data), calibration=calibration)
        except (TrainfitError, ValueError):
            continue
        yield change, new


def quantify_fixes(card: RunCard, plan, phase: str | None = None, *, calibration=None) -> list[Fix]:
    """Re-plan the card once per one-variable change (with the ``calibration`` the plan used); what each
    saves in ``phase`` (default: the plan's peak phase) and whether the changed card fits. Fitting changes first, then by saving;
    a change is kept when it saves ``FIX_MIN_SAVING_BYTES`` there, or when it makes a card that does not fit fit. Where the
    card already fits, fitting after the change says nothing about it: a change that saves under ``FIX_MIN_SAVING_BYTES``
    is left out (it was listed as a fix that 'fits' while saving 0.00 GiB)."""
    where = phase or plan.peak.phase.value
    before = _plan_phases(plan)
    fixes = []
    for change, new in _replanned(card, _variants(card), calibration=calibration):
        after = _plan_phases(new)
        fix = Fix(change, plan.peak.device, new.peak.device, new.capacity_bytes, where,
                  before.get(where, plan.peak.device), after.get(where, 0.0), bool(new.fits))
        if fix.saved_bytes >= FIX_MIN_SAVING_BYTES or (fix.fits and not plan.fits):
            fixes.append(fix)
    fixes.sort(key=lambda f: (not f.fits, -f.saved_bytes, f.change))
    return fixes


def confirmed_fixes(card: RunCard, plan, *, calibration=None) -> list[Fix]:
    """The one-variable changes after which the planner says the card fits."""
    return [f for f in quantify_fixes(card, plan, calibration=calibration) if f.fits]


# ---------------------------------------------------------------------------------------------
# notes at the card's own lengths

def card_notes(symptom: Symptom, card: RunCard) -> list[str]:
    """The card's own settings behind a symptom's 'check first' items."""
    b, ro = card.batch, card.rollout
    sh = card_shapes(card)
    rl = card.method in RL_METHODS
    if rl:
        gen = [(f"{ro.prompts_per_step} prompts x {ro.num_generations} candidates per step, prompt {ro.prompt_len} + response"
                f" {ro.response_len} tokens (rollout.prompt_len, rollout.response_len), max_num_seqs {ro.max_num_seqs},"
                f" gpu_memory_utilization {ro.gpu_memory_utilization}, sleep level {ro.sleep_level}")]
    else:
        gen = [f"the card is {card.method.value}: it has no generation phase"]
    notes = {
        "oom-load": [f"weights stored as {card.weights_dtype.value}; strategy {card.parallel.strategy.value} on {card.world_size} GPU(s)"],
        "oom-forward": [f"micro_batch_size {b.micro_batch_size}, {sh.describe()}, loss.chunked {str(card.loss.chunked).lower()},"
                        f" gradient_checkpointing {card.parallel.gradient_checkpointing}"],
        "oom-no-grad": _no_grad_notes(card),
        "oom-backward": [f"micro_batch_size {b.micro_batch_size}, {sh.describe()}, gradient_checkpointing {card.parallel.gradient_checkpointing}"],
        "oom-generation": gen,
        "low-gpu-util": [f"{card.world_size} GPU(s), interconnect {card.hardware.interconnect or 'from the GPU catalog'}, task {card.task.kind.value}"],
        "identical-rewards": [f"{ro.num_generations} candidates per prompt; with 1 there is no group to compare"] if ro.num_generations < 2 else [],
        "wrong-after-resume": ["the card resumes from an adapter only: that cannot resume training exactly"]
        if card.checkpoint.resume == "adapter_only" else [f"checkpoint resume method: {card.checkpoint.resume}"],
    }
    return notes.get(symptom.key, [])


def _no_grad_notes(card: RunCard) -> list[str]:
    """The card's settings behind the ``oom-no-grad`` row's checks (RL: the log-prob batching and the engine; DPO:
    the micro-batch its reference pass runs at)."""
    if card.method not in RL_METHODS and card.method is not Method.DPO:
        return [f"the card is {card.method.value}: it has no reference, old-policy, reward or critic-values pass"]
    from trainfit.methods.roles import reference_placement

    chunked, ref = str(card.loss.chunked).lower(), reference_placement(card).value
    if card.method is Method.DPO:
        return [f"micro_batch_size {card.batch.micro_batch_size} (chosen + rejected), loss.chunked {chunked}, reference {ref}"]
    from trainfit.methods.rl import logprob_token_budget

    ro = card.rollout
    budget = logprob_token_budget(card)
    return [f"logprob_micro_batch_size {ro.logprob_micro_batch_size or 'unset: the micro-batch'}, log-prob token budget"
            f" {budget if budget is not None else 'none (fixed micro-batches)'}, loss.chunked {chunked}, reference {ref},"
            f" engine {ro.engine.value} gpu_memory_utilization {ro.gpu_memory_utilization}, sleep level {ro.sleep_level}"]


def phase_notes(phase: str, card: RunCard, plan) -> list[str]:
    """What the failing phase holds at the card's shapes."""
    spec = plan.spec
    sh = card_shapes(card)
    vocab = spec.head_outputs or spec.vocab_size
    def g(x: float) -> str:
        return f"{x / GIB:.2f} GiB"

    if phase in ("ref_logprob", "old_logprob", "reward", "critic_value"):
        m, s = sh.logprob_sequences, sh.train_tokens
        what = {"ref_logprob": "the reference's log-probs", "old_logprob": "the old policy's log-probs",
                "reward": "the reward model's scores", "critic_value": "the critic's values"}[phase]
        logits = "" if card.loss.chunked or phase in ("reward", "critic_value") else (
            f"; its bf16 logits are 2·{m}·{s}·{vocab} = {g(2.0 * m * s * vocab)} (loss.chunked false)")
        return [(f"{phase}: a no-grad forward for {what} over {m} sequence(s) x {sh.prompt_len} + {sh.response_len} = {s} tokens"
                 f" (rollout.logprob_micro_batch_size {card.rollout.logprob_micro_batch_size or 'unset: the micro-batch'}){logits}")]
    if phase == "weight_sync":
        ro = card.rollout
        buffer = max((ph.components.get("weight_sync_buffer", 0.0) for grp in plan.groups for ph in grp.phases), default=0.0)
        setting = ro.weight_sync.value if "weight_sync" in ro.model_fields_set else f"unset ({ro.weight_sync.value})"
        return [f"weight_sync: rollout.weight_sync {setting}; the plan's sync buffer is {g(buffer)}, sleep level {ro.sleep_level}"]
    if phase in ("optimizer_step", "actor_optimizer_step", "critic_optimizer_step"):
        pr = card.precision
        return [(f"{phase}: optimizer {pr.optimizer.value} ({pr.optimizer_impl.value}), states {pr.optimizer_states.value},"
                 f" offload {card.parallel.offload.value}; a first step allocates the states")]
    if phase in ("forward", "backward", "actor_forward", "actor_backward", "critic_forward", "critic_backward"):
        return [(f"{phase}: micro_batch_size {card.batch.micro_batch_size}, {sh.describe()}, vocabulary {vocab},"
                 f" loss.chunked {str(card.loss.chunked).lower()},"
                 f" gradient_checkpointing {str(card.parallel.gradient_checkpointing).lower()}")]
    return []


# ---------------------------------------------------------------------------------------------
# the diagnosis

@dataclass(frozen=True, slots=True)
class Diagnosis:
    symptom: Symptom | None
    oom: OomMessage | None = None
    phase_hint: str | None = None
    """The phase, as a string (kept for the JSON's old key)."""
    matches: tuple[Match, ...] = ()
    fixes: tuple[Fix, ...] = ()
    notes: tuple[str, ...] = ()
    advice: str = ONE_VARIABLE_ADVICE
    extra: dict[str, Any] = field(default_factory=dict)
    attribution: Attribution | None = None
    frames: tuple[Frame, ...] = ()
    fixes_computed: bool = False
    """A card was given and its one-variable changes were re-planned (``fixes`` may still be empty)."""
    failure: Any = None
    """Not an OOM: the NCCL timeout, vLLM KV-cache error or extension build error read (``preflight.failures``)."""
    kv_fixes: tuple["KvFix", ...] = ()
    """A vLLM KV-cache error with a card: each engine setting re-planned at the card's shapes."""
    card_mismatch: str | None = None
    """The log's measured allocation is well above the plan's for the failing phase (``measured_vs_plan``): the card
    likely does not describe the run. Printed before the symptom and the fixes."""


def diagnose_symptom(key: str, card: RunCard | None = None, *, calibration=None) -> Diagnosis:
    """The seed's row for ``key``; with a card, its settings and (OOM symptoms) the one-variable fixes,
    re-planned with ``calibration`` (a loaded Calibration, as ``plan`` uses; None: default rates)."""
    if key not in SYMPTOMS:
        raise TrainfitError(f"diagnose: unknown symptom '{key}'; allowed: {', '.join(SYMPTOMS)}")
    symptom = SYMPTOMS[key]
    notes: list[str] = card_notes(symptom, card) if card is not None else []
    fixes: list[Fix] = []
    if card is not None and key in OOM_SYMPTOMS:
        from trainfit.plan import make_plan

        plan = make_plan(card, calibration=calibration)
        phase = {"oom-load": "load", "oom-generation": "rollout"}.get(key)
        if key == "oom-no-grad":  # the no-grad pass the plan holds most in
            present = _plan_phases(plan)
            phase = max((p for p in NO_GRAD_PHASES if p in present), key=present.__getitem__, default=None)
        elif phase is None:
            step = "forward" if key == "oom-forward" else "backward"
            phase = f"actor_{step}" if card.method in RL_METHODS else step
        if phase not in _plan_phases(plan):
            phase = None
        fixes = quantify_fixes(card, plan, phase, calibration=calibration)
        notes.append(_plan_note(plan))
    computed = card is not None and key in OOM_SYMPTOMS
    return Diagnosis(symptom, fixes=tuple(fixes), notes=tuple(notes), fixes_computed=computed)


def _plan_note(plan) -> str:
    peak = plan.peak
    verdict = "fits" if plan.fits else "does not fit"
    return f"plan: peak {peak.device / 2**30:.2f} GiB in {peak.phase.value} of {plan.capacity_bytes / 2**30:.2f} GiB: {verdict}"


def _phase_allocated(plan, phase: str) -> tuple[float, float] | None:
    """(allocated, device) of ``phase`` on the plan's GPU group that allocates the most in it; None without the phase."""
    best = None
    for phases in [g.phases for g in plan.groups] or [plan.phases]:
        for ph in phases:
            if ph.phase.value == phase and (best is None or ph.allocated > best[0]):
                best = (float(ph.allocated), float(ph.device))
    return best


def measured_vs_plan(oom: OomMessage, plan, phase: str | None) -> str | None:
    """One line when the log's allocated bytes (PyTorch's 'allocated by PyTorch', or the old format's 'already
    allocated') exceed ``MEASURED_OVER_PLAN_RATIO`` times the plan's allocated figure for the failing ``phase`` (the
    plan's peak phase when the phase is unknown or not planned) and exceed it by ``MEASURED_OVER_PLAN_ABS_BYTES``;
    else None.
    The fixes are re-planned from the card, so a card that is not the run's ranks changes that do not touch its
    memory."""
    measured = oom.allocated_by_pytorch_bytes if oom.allocated_by_pytorch_bytes is not None else oom.already_allocated_bytes
    if not measured:
        return None
    where = phase if phase is not None and _phase_allocated(plan, phase) is not None else plan.peak.phase.value
    figures = _phase_allocated(plan, where)
    if figures is None:
        return None
    allocated, device = figures
    if measured <= MEASURED_OVER_PLAN_RATIO * allocated or measured - allocated <= MEASURED_OVER_PLAN_ABS_BYTES:
        return None
    held = f"held {oom.this_process_bytes / GIB:.2f} GiB, " if oom.this_process_bytes else ""
    if where == phase:
        which = f"the plan's {where} is"
    elif phase is None:
        which = f"the log names no phase; compared with the plan's peak phase {where},"
    else:
        which = f"the plan's peak phase {where} (the log's phase {phase} is not planned) is"
    return (f"the log's process {held}{measured / GIB:.2f} GiB allocated by PyTorch before the failed request;"
            f" {which} {allocated / GIB:.2f} GiB allocated ({device / GIB:.2f} GiB on the device),"
            f" {(measured - allocated) / GIB:.2f} GiB below the log's: the card likely does not describe this run: check the"
            " model, method, scope, batch and sequence lengths (micro-batch, rollout lengths and counts), GPU count and"
            " parallel layout, and the framework (preset) against the run's launch; the fixes below are the card's")


def _symptom_of_phase(phase: Phase | None) -> Symptom | None:
    """The seed's row for a phase: load, generation, the training side (forward/backward) and the no-grad passes."""
    if phase is None:
        return None
    if phase is Phase.LOAD:
        return SYMPTOMS["oom-load"]
    if phase is Phase.ROLLOUT:
        return SYMPTOMS["oom-generation"]
    if phase in (Phase.FORWARD, Phase.ACTOR_FORWARD, Phase.CRITIC_FORWARD):  # the training forward, not backward's row
        return SYMPTOMS["oom-forward"]
    if phase in (Phase.BACKWARD, Phase.ACTOR_BACKWARD, Phase.CRITIC_BACKWARD):
        return SYMPTOMS["oom-backward"]
    if phase.value in NO_GRAD_PHASES:
        return SYMPTOMS["oom-no-grad"]
    return None


def attribute(oom: OomMessage, frames: tuple[Frame, ...], card: RunCard | None, plan=None) -> tuple[Attribution, list[Match]]:
    """The phase from the frames, narrowed (or, without frames, named) by the allocation's size."""
    from dataclasses import replace

    att = phase_from_frames(frames, rl_card=card is not None and card.method in RL_METHODS)
    if card is None or plan is None:
        return att, []
    names = tuple(p.value for p in att.candidates)
    matches = match_allocation(oom.requested_bytes, card, plan, phases=names)
    hits = [m for m in matches if m.matches]
    if att.phase is None and len(att.candidates) > 1:
        inside = [m for m in hits if m.phase in names]
        if inside:
            best = inside[0]
            att = replace(att, phase=Phase(best.phase), source="traceback+size",
                          why=att.why + f"; the size matches {best.label} ({best.phase})")
    elif att.source == "unknown" and hits:
        phases = sorted({m.phase for m in hits if m.phase}, key=lambda p: [x.value for x in Phase].index(p))
        if len(phases) == 1:
            att = replace(att, phase=Phase(phases[0]), candidates=(Phase(phases[0]),), source="size",
                          why=f"no traceback; the size matches {hits[0].label}")
        elif phases:
            att = replace(att, candidates=tuple(Phase(p) for p in phases), source="size",
                          why=f"no traceback; the size matches tensors of {', '.join(phases)}")
    return att, matches


def diagnose_log(text: str, card: RunCard | None = None, *, source: str = "the log", calibration=None) -> Diagnosis:
    """Diagnose the last OOM message in ``text``. TrainfitError when there is none. Linear in ``len(text)``.
    ``calibration``: the loaded Calibration the card's plan and re-planned fixes use (as ``plan``'s)."""
    oom, count = last_oom(text)
    if oom is None:
        from trainfit.preflight.failures import last_failure

        failure = last_failure(text)
        if failure is None:
            raise TrainfitError(f"diagnose: no CUDA/HIP out-of-memory message, NCCL watchdog timeout, vLLM KV-cache error"
                                f" or extension build error in {source}")
        return diagnose_failure(failure, card, calibration=calibration)
    frames = traceback_before(text, oom.start)
    notes = _message_notes(oom)
    plan = None
    if card is not None:
        from trainfit.plan import make_plan

        plan = make_plan(card, calibration=calibration)
    att, matches = attribute(oom, frames, card, plan)
    phase = att.phase.value if att.phase is not None else None
    symptom = _symptom_of_phase(att.phase)
    fixes: list[Fix] = []
    mismatch = None
    if plan is not None:
        mismatch = measured_vs_plan(oom, plan, phase)
        notes.append(_plan_note(plan))
        if oom.total_bytes and abs(oom.total_bytes - plan.gpu.usable_memory_bytes) > 0.05 * oom.total_bytes:
            notes.append(
                f"the log's GPU has {oom.total_bytes / 2**30:.2f} GiB but the card plans for "
                f"{plan.gpu.name} ({plan.gpu.usable_memory_bytes / 2**30:.2f} GiB): is this the card's run?"
            )
        present = _plan_phases(plan)
        if phase is not None and phase not in present:
            notes.append(f"the traceback fails in {phase}, which the card's plan does not have"
                         f" (its phases: {', '.join(present)}): is this the card's run?")
        if oom.requested_bytes == 0:
            notes.append("the message asks for 0 bytes: there is no allocation size to match")
        if phase is not None:
            notes += phase_notes(phase, card, plan)
        if symptom is not None:
            notes += card_notes(symptom, card)
        fixes = quantify_fixes(card, plan, phase if phase in present else None, calibration=calibration)
    else:
        notes.append("no card: give --card to match the allocation against the plan and re-plan fixes at the card's shapes")
    return Diagnosis(symptom, oom=oom, phase_hint=phase, matches=tuple(matches), fixes=tuple(fixes), notes=tuple(notes),
                     extra={"messages_found": count}, attribution=att, frames=frames, fixes_computed=plan is not None,
                     card_mismatch=mismatch)


def _message_notes(oom: OomMessage) -> list[str]:
    def g(x: float) -> str:
        return f"{x / 2**30:.2f} GiB"

    notes = []
    if oom.other_processes_bytes:
        notes.append(f"other processes hold {g(oom.other_processes_bytes)} on GPU {oom.gpu_index}: a colocated engine or a stale job")
    frag = oom.fragmentation_bytes
    if frag is not None and oom.requested_bytes and frag >= oom.requested_bytes:
        notes.append(f"{g(frag)} reserved but unallocated >= the request: fragmentation; try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    if oom.total_bytes and oom.requested_bytes > oom.total_bytes:
        notes.append("the single request is larger than the whole GPU: shrink that tensor (batch, length, chunking), no setting frees enough")
    return notes


# ---------------------------------------------------------------------------------------------
# failures other than an OOM (``preflight.failures``)

@dataclass(frozen=True, slots=True)
class KvFix:
    """One vLLM engine setting re-planned at the card's shapes: the KV cache it leaves and whether one request
    of the card's longest sequence (rollout.prompt_len + rollout.response_len) then fits in it."""

    change: str
    kv_before_bytes: float
    kv_after_bytes: float
    capacity_tokens_after: int
    one_request_fits: bool
    plan_fits: bool


def diagnose_failure(failure, card: RunCard | None = None, *, calibration=None) -> Diagnosis:
    """What a non-OOM failure means and what to check; a vLLM KV error with an RL card is compared with the
    plan's KV demand and capacity, and its engine settings re-planned."""
    from trainfit.preflight.failures import ExtensionBuildError, KvCacheShortage, NcclTimeout

    if isinstance(failure, NcclTimeout):
        return Diagnosis(None, failure=failure, notes=tuple(nccl_notes(failure, card, calibration=calibration)),
                         fixes_computed=card is not None)
    if isinstance(failure, ExtensionBuildError):
        return Diagnosis(None, failure=failure, notes=tuple(extension_notes(failure, card)), fixes_computed=card is not None)
    assert isinstance(failure, KvCacheShortage)
    symptom = SYMPTOMS["oom-generation"]
    notes = kv_message_notes(failure)
    kv_fixes: list[KvFix] = []
    if card is None:
        notes.append("no card: give --card to compare with the plan's KV demand and capacity and re-plan the engine settings")
    elif card.method not in RL_METHODS or card.rollout.engine.value != "vllm":
        notes.append(f"the card's run has no vLLM engine (method {card.method.value}, engine {card.rollout.engine.value}):"
                     " is this the card's run?")
    else:
        from trainfit.plan import make_plan

        plan = make_plan(card, calibration=calibration)
        notes += kv_plan_notes(failure, card, plan)
        notes += card_notes(symptom, card)
        kv_fixes = quantify_kv_fixes(card, plan, calibration=calibration)
    return Diagnosis(symptom, phase_hint="rollout", failure=failure, notes=tuple(notes), kv_fixes=tuple(kv_fixes),
                     fixes_computed=bool(card is not None and card.method in RL_METHODS))


def _gib(x: float) -> str:
    return f"{x / GIB:.2f} GiB"


def nccl_notes(t, card: RunCard | None, *, calibration=None) -> list[str]:
    """The op, the timeout and what a watchdog timeout means: this rank waited, another did not arrive."""
    rank = f"rank {t.rank}" if t.rank is not None else "a rank"
    sizes = f", {t.numel_in} elements in, {t.numel_out} out" if t.numel_in is not None else ""
    seq = f" (SeqNum {t.seq}{sizes})" if t.seq is not None else ""
    timeout = f"{t.timeout_ms} ms ({t.timeout_ms / 60000:.1f} min)" if t.timeout_ms is not None else "its timeout"
    ran = f" ran {t.ran_ms} ms" if t.ran_ms is not None else " did not complete"
    out = [
        f"NCCL watchdog timeout on {rank}: collective {t.op}{seq}{ran} against a timeout of {timeout}",
        ("likely causes: the other ranks never reached this collective, or reached it far later: a rank hung or died"
         " (the host's OOM killer, an exception on that rank only, a dataloader, checkpoint or generation stall),"
         " the ranks' collectives fell out of step (a desynchronised collective: a rank-dependent code path, uneven"
         " batch counts, a different op order), or a link far slower than planned (NCCL over sockets instead of"
         " NVLink/InfiniBand)"),
        ("check: the first error on any rank (the earliest timestamp, often another rank's OOM or exception);"
         " dmesg / journalctl -k on each host for the OOM killer; TORCH_NCCL_DESYNC_DEBUG=1 for the op each rank"
         " last ran, or the flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1);"
         " NCCL_DEBUG=INFO for the transport NCCL chose (NET/IB or NET/Socket); raise the timeout"
         " (init_process_group(timeout=...), transformers' ddp_timeout) only once a slow but progressing rank is"
         " the cause"),
    ]
    if card is not None:
        from trainfit.plan import make_plan

        plan = make_plan(card, calibration=calibration)
        if plan.step_seconds:
            verdict = ("longer than the timeout: one rank a whole step behind the others times out"
                       if t.timeout_ms is not None and plan.step_seconds * 1000 > t.timeout_ms else
                       "far under the timeout: a timeout means a rank stopped, not a slow step")
            out.append(f"plan: step {plan.step_seconds:.1f} s on {card.world_size} GPU(s) ({plan.gpu.name}), {verdict}")
    return out


def extension_notes(e, card: RunCard | None) -> list[str]:
    """The op that failed to build and the three ways out."""
    what = f"DeepSpeed op '{e.name}'" if e.deepspeed else f"torch C++/CUDA extension '{e.name}'"
    out = [f"{what} failed to build just in time (torch.utils.cpp_extension, with ninja): the training never started"]
    if e.ninja_missing:
        out.append("ninja is not installed: pip install ninja (DeepSpeed's JIT build needs it)")
    out.append("fix: a compiler and a CUDA toolkit whose nvcc matches torch.version.cuda (CUDA_HOME set), and ninja,"
               " then rerun; the build log above the error names the failing command")
    if e.deepspeed:
        flag = f"DS_BUILD_{e.name.upper()}=1"
        out.append(f"or build the op at install time: {flag} pip install deepspeed --no-build-isolation (DS_BUILD_OPS=1"
                   " for every op; `ds_report` lists what is installed and compatible), or install a prebuilt"
                   " DeepSpeed wheel built for this torch and CUDA")
        if e.name in ("cpu_adam", "cpu_adagrad", "cpu_lion") and card is not None:
            out.append(f"the card's parallel.offload is {card.parallel.offload.value}: '{e.name}' is the optimizer"
                       " DeepSpeed runs for an offloaded optimizer; parallel.offload none avoids the op if memory allows")
    return out


def kv_message_notes(k) -> list[str]:
    if k.reason == "none":
        logged = f" (the engine logged {_gib(k.available_bytes)} available)" if k.available_bytes is not None else ""
        return [f"vLLM found no memory for the KV cache{logged}: weights, activations of its profiling run and"
                " anything else on the GPU already exceed gpu_memory_utilization x the GPU's memory"]
    est = f"; vLLM estimates {k.estimated_max_len} tokens fit" if k.estimated_max_len else ""
    return [f"vLLM's KV cache holds {_gib(k.available_bytes)} but one request of max_model_len {k.max_model_len} tokens"
            f" needs {_gib(k.needed_bytes)}{est}"]


def kv_plan_notes(k, card: RunCard, plan) -> list[str]:
    """The log's KV figures beside the plan's, at the card's shapes."""
    s = getattr(plan, "rollout", None)
    if s is None or s.engine != "vllm":
        return ["the plan has no vLLM engine summary to compare with"]
    longest = card.rollout.prompt_len + card.rollout.response_len
    out = [f"plan: vLLM KV cache {_gib(s.kv_cache_bytes)} per engine ({s.kv_capacity_tokens} tokens at"
           f" {s.kv_bytes_per_token / 2**10:.1f} KiB per token); one request of the card's longest sequence"
           f" (rollout.prompt_len + rollout.response_len = {longest} tokens) needs {_gib(longest * s.kv_bytes_per_token)}"]
    if k.reason == "max-len" and k.max_model_len and s.kv_bytes_per_token:
        planned = k.max_model_len * s.kv_bytes_per_token
        out.append(f"the log's {k.max_model_len}-token request at the plan's KV per token: {_gib(planned)}"
                   f" (log {_gib(k.needed_bytes)}); the log's max_model_len is"
                   + (f" {k.max_model_len - longest} tokens above the card's longest sequence: set max_model_len to"
                      f" {longest}" if k.max_model_len > longest else " within the card's longest sequence"))
    if k.available_bytes is not None:
        gap = s.kv_cache_bytes - k.available_bytes
        if gap > 0.1 * max(s.kv_cache_bytes, GIB):
            out.append(f"the engine had {_gib(gap)} less KV cache than the plan: memory held outside the plan (a"
                       " colocated trainer's state not offloaded, another process) or a different GPU; check nvidia-smi"
                       " before the engine starts")
    return out


def _kv_variants(card: RunCard) -> list[tuple[str, dict[str, Any]]]:
    ro = card.rollout
    out: list[tuple[str, dict[str, Any]]] = []
    for step in (0.1, 0.2):
        u = round(min(0.95, ro.gpu_memory_utilization + step), 2)
        if u > ro.gpu_memory_utilization and (not out or out[-1][1]["rollout.gpu_memory_utilization"] != u):
            out.append((f"rollout.gpu_memory_utilization {ro.gpu_memory_utilization} -> {u}", {"rollout.gpu_memory_utilization": u}))
    if ro.max_num_seqs > 1:
        out.append((f"rollout.max_num_seqs {ro.max_num_seqs} -> {ro.max_num_seqs // 2} (a smaller profiling batch)",
                    {"rollout.max_num_seqs": ro.max_num_seqs // 2}))
    if ro.tensor_parallel * 2 <= card.hardware.gpus_per_node:
        out.append((f"rollout.tensor_parallel {ro.tensor_parallel} -> {ro.tensor_parallel * 2} (weights and KV split)",
                    {"rollout.tensor_parallel": ro.tensor_parallel * 2}))
    return out


def quantify_kv_fixes(card: RunCard, plan, *, calibration=None) -> list[KvFix]:
    """Re-plan the card once per engine setting: the KV cache each leaves and whether one request of the card's
    longest sequence fits. Settings that add no KV cache are left out; the largest KV first."""
    s = getattr(plan, "rollout", None)
    if s is None or s.engine != "vllm":
        return []
    longest = card.rollout.prompt_len + card.rollout.response_len
    out = []
    for change, new in _replanned(card, _kv_variants(card), calibration=calibration):
        after = getattr(new, "rollout", None)
        if after is None or after.kv_cache_bytes <= s.kv_cache_bytes:
            continue
        out.append(KvFix(change, s.kv_cache_bytes, after.kv_cache_bytes, after.kv_capacity_tokens,
                         after.kv_capacity_tokens >= longest, bool(new.fits)))
    out.sort(key=lambda f: (not f.one_request_fits, not f.plan_fits, -f.kv_after_bytes))
    return out
