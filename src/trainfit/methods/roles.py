"""Which roles a method has, where each lives, and what it holds on a GPU.

Roles (PPO/GRPO as in TRL, verl and OpenRLHF; RM/DPO as in TRL's trainers):

actor / policy
    trained; its step is the SFT step over ``prompt_len + response_len`` tokens.
critic (PPO)
    trained; the actor's architecture with a scalar value head (no vocabulary logits).
reference
    frozen; on the GPU (sharded like the actor), offloaded to the CPU, absent when the KL
    coefficient is 0 (TRL's GRPO default ``beta=0.0``), or the LoRA-disabled actor (PEFT's
    ``disable_adapter()``: no extra weights). DPO may precompute its log-probs. NeMo RL keeps it in
    pinned host memory and swaps it into the policy's parameters for its pass (``host_swap``).
reward model
    frozen scalar-head model, or a rule-based function with no GPU cost.
rollout engine
    vLLM (or ``generate`` on the training model); see ``trainfit.rollout.vllm``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainfit.spec.card import RunCard, pin_before, rl_group_sizes
from trainfit.spec.enums import FSDP_STRATEGIES, SERVING_ENGINES, ComputeDtype, LossKernel, Method, Placement, RefPlacement, Scope


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    trained: bool
    placement: str
    """gpu, cpu, none, lora_disabled, precomputed, host_swap, colocate, split, rule."""
    gpus: int
    model: str


GRPO_DEFAULT_KL_PRESETS = {"openrlhf": 0.01, "skyrl": 0.001, "nemo-rl": 0.01}
"""The KL coefficient a GRPO run under these frameworks has when the launch leaves it alone (a reference loaded and
run, ``reference_loaded``), where trainfit's GRPO default is TRL's beta 0.0:

* OpenRLHF: ``--algo.kl.init_coef`` default 0.01, and ``ref_model`` is built when it is above 0 (OpenRLHF/OpenRLHF
  openrlhf/cli/train_ppo_ray.py l.419, l.93 @3c3be6234e0cb353e76bb8019947db9dfe99fca7; GRPO is the same script);
* SkyRL: ``use_kl_loss: bool = True``, ``kl_loss_coef: float = 0.001`` (NovaSky-AI/SkyRL
  skyrl/train/config/config.py l.606-608 @2e9c89afceb3ef7963748224373ad88882322c99);
* NeMo RL: ``loss_fn.reference_policy_kl_penalty: 0.01`` in the preset's own source config (NVIDIA-NeMo/RL
  examples/configs/grpo_math_1B.yaml l.80 @7ea279abfbeb698b092856d0dab61e7cf39bc909).

verl (``use_kl_loss: false``, ``use_kl_in_reward: false``: verl/trainer/config/_generated_ppo_trainer.yaml l.74,
l.576 @b178a3cd56f58b2d502255daba591e92833930a7), slime / miles (``--kl-coef`` 0.0, ``--use-kl-loss`` off) and TRL
(beta 0.0) have none by default: 0, as before."""


def kl_coef(card: RunCard) -> float:
    """The KL coefficient: the card's, else each method's default (TRL GRPO beta=0.0; PPO 0.05), a GRPO card under
    a preset whose framework keeps a KL term by default taking that framework's (``GRPO_DEFAULT_KL_PRESETS``)."""
    if card.roles.kl_coef is not None:
        return card.roles.kl_coef
    if card.method is Method.GRPO and card.preset in GRPO_DEFAULT_KL_PRESETS:
        return GRPO_DEFAULT_KL_PRESETS[card.preset]
    return {Method.PPO: 0.05, Method.DPO: 0.1}.get(card.method, 0.0)


REFERENCE_SWAP_PRESETS = ("nemo-rl",)
"""Frameworks whose reference is a host copy swapped into the policy's own parameters for its pass
(``RefPlacement.HOST_SWAP``, ``trainfit.compute.reference_swap``): NeMo RL's Megatron and DTensor workers alike
(NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 and @7ea279abfbeb698b092856d0dab61e7cf39bc909
``use_reference_model``), with or without LoRA (the whole state dict is swapped)."""


REFERENCE_OFFLOAD_PRESETS = ("skyrl",)
"""Frameworks whose colocated reference is a separate model kept in host memory outside its own pass
(``RefPlacement.CPU``): SkyRL's reference is its own actor group, and under ``colocate_all`` ``WorkerDispatch``
backloads it for its forward and offloads it when the policy is next requested (``_ensure_on_gpu`` offloads the other
members of the colocation group; the reference's pass runs before the policy's), so it holds no GPU memory through
the policy's passes, the update or the sync (NovaSky-AI/SkyRL @2e9c89afceb3ef7963748224373ad88882322c99
skyrl/backends/skyrl_train/workers/worker_dispatch.py lines 132-170, skyrl/train/trainer.py lines 1322-1340). Its
copies are priced with the trainer's (``plan.rl_offload.trainer_state_offload_phase``)."""


KL_GATED_REFERENCE_PPO_PRESETS = ("verl", "openrlhf", "skyrl", "slime", "miles")
"""Frameworks that neither load nor run a PPO reference when the KL coefficient is 0 (``reference_loaded``, which
cites each). nemo-rl is not among them: NeMo RL's PPO loads its reference whatever the KL coefficient."""


def reference_loaded(card: RunCard) -> bool:
    """Whether the framework loads and runs the reference model of an RL step: the one rule for the memory phases and
    the step time (both read ``reference_placement``, which is ``RefPlacement.NONE`` where this is False, whatever
    ``roles.reference`` says). Always True outside PPO and GRPO and with a KL coefficient above 0. At ``kl_coef`` 0:

    * TRL's GRPOTrainer: ``if self.beta == 0.0: self.ref_model = None`` (no reference model, no reference pass, with
      or without PEFT; trl 1.16.0 from PyPI, read 2026-12-05: trl/trainer/grpo_trainer.py l.983-990);
    * verl: ``need_reference_policy`` is ``algorithm.use_kl_in_reward or actor.use_kl_loss`` (volcengine/verl
      verl/trainer/ppo/utils.py l.72-76 @b178a3cd56f58b2d502255daba591e92833930a7), both False for a card whose
      kl_coef is 0 (``export.verl``: ``use_kl_loss=kl > 0``, ``use_kl_in_reward=kl > 0``);
    * OpenRLHF: ``if args.algo.kl.init_coef > 0: ref_model = RayActorGroup(...) else: ref_model = None``
      (OpenRLHF/OpenRLHF openrlhf/cli/train_ppo_ray.py l.93-103 @3c3be6234e0cb353e76bb8019947db9dfe99fca7);
    * SkyRL: ``use_ref_model = cfg.trainer.algorithm.use_kl_loss or cfg.trainer.algorithm.use_kl_in_reward``, else
      ``ref_model = None`` (NovaSky-AI/SkyRL skyrl/train/trainer.py l.644, 673-688, 735-753
      @2e9c89afceb3ef7963748224373ad88882322c99; PPO and GRPO alike). ``use_kl_loss`` defaults to True with
      ``kl_loss_coef`` 0.001 (skyrl/train/config/config.py l.604-608): a card's kl_coef 0 reads as both switches
      off; a run that keeps ``use_kl_loss`` with ``kl_loss_coef`` 0 still loads and runs the reference;
    * slime: ``with_ref=actor_args.kl_coef != 0 or actor_args.use_kl_loss`` (THUDM/slime slime/ray/placement_group.py
      l.178 @624b824a898ab0ec1fcb4d373004c7f3852bf515; ``--kl-coef`` defaults to 0.0 and ``--use-kl-loss`` to
      False, slime/utils/arguments.py l.909-911, 981), and miles, derived from it, the same
      ``with_ref=args.kl_coef != 0 or args.use_kl_loss`` (radixark/miles miles/ray/placement_group.py l.150
      @748935dc7155d4990d02d62f6061c50ef8054051); the actor loads ``ref_load`` only ``if with_ref``
      (slime/backends/megatron_utils/actor.py l.132-133; miles/backends/megatron_utils/actor.py l.236-237) and the
      reference pass runs only for a ``"ref"`` backup (l.435-438; l.499);
    * NeMo RL's GRPO: ``init_reference_model = loss_config.reference_policy_kl_penalty > 0`` (NVIDIA-NeMo/RL
      nemo_rl/algorithms/grpo.py l.1145 @7ea279abfbeb698b092856d0dab61e7cf39bc909). Its PPO does not gate:
      ``setup`` builds ``Policy(...)`` without ``init_reference_model`` (nemo_rl/algorithms/ppo.py l.762-770), whose
      default is True (nemo_rl/models/policy/lm_policy.py l.101), so the host copy is held at kl 0; only the pass is
      skipped, by ``ppo.skip_reference_policy_logprobs_calculation`` (ppo.py l.181, l.1546): a PPO card under
      nemo-rl keeps its reference (memory and pass; the skipped pass is not modelled).

    So GRPO has none at kl 0 under every preset, and PPO under verl, OpenRLHF, SkyRL, slime or miles has none. A PPO
    card under another framework keeps its reference at kl 0 and the step times its pass (nemo-rl above; a framework
    whose code at kl 0 was not read here: the reference as the card states it)."""
    if card.method not in (Method.PPO, Method.GRPO) or kl_coef(card) > 0.0:
        return True
    if card.method is Method.GRPO:
        return False
    return card.preset not in KL_GATED_REFERENCE_PPO_PRESETS


def unloaded_reference_warning(card: RunCard) -> str | None:
    """The warning for a ``roles.reference`` the user set that the framework neither loads nor runs at the card's
    KL coefficient (``reference_loaded``), else None. Only a value the user set: a preset's own fill (verl's
    ``roles.reference: cpu``, ``methods.presets``) is merged into the card data before validation, so
    ``model_fields_set`` counts it as set and survives every re-validation of the dumped card (``plan.resolve.card_with``,
    the searches); the preset's filled value is what tells them apart (``presets.preset_fill``). A card that states
    the preset's own value gets no warning: it asks for nothing the preset would not have filled, and the assumption
    line ``reference: none`` still shows."""
    from trainfit.methods.presets import preset_fill

    ref = card.roles.reference
    if ref in (None, RefPlacement.NONE) or "reference" not in card.roles.model_fields_set or reference_loaded(card):
        return None
    if card.preset and preset_fill(card.preset, "roles.reference") == ref.value:
        return None
    return (f"roles.reference {ref.value} is neither loaded nor run at kl_coef 0 (the framework skips it: TRL GRPO"
            " beta 0, verl without a KL loss or KL reward, OpenRLHF init_kl_coef 0, SkyRL without use_kl_loss or"
            " use_kl_in_reward, slime / miles kl_coef 0 without use_kl_loss, NeMo RL GRPO reference_policy_kl_penalty"
            " 0: methods.roles.reference_loaded); set roles.kl_coef > 0 to plan it")


def reference_placement(card: RunCard) -> RefPlacement:
    """Where the reference lives when the card leaves it open (``roles.reference`` as set always wins).

    verl's FSDP workers keep a full-weight reference in host memory under FSDP's own CPU offload, at every version the
    rows cite and under both FSDP versions: ``cpu_offload = None if role == "actor" else
    CPUOffload(offload_params=True)`` (volcengine/verl verl/workers/fsdp_workers.py l.260-262
    @e0d035cd4a6a5c29835516a58d78710a28e73b18, FSDP1), the same at l.524-526 and, under FSDP2,
    ``CPUOffloadPolicy(pin_memory=True)`` for every role but the actor at l.547-552
    @b178a3cd56f58b2d502255daba591e92833930a7, and the newer engine workers give a forward-only engine
    ``CPUOffload(offload_params=True)`` / ``CPUOffloadPolicy(pin_memory=True)`` (verl/workers/engine/fsdp/
    transformer_impl.py l.309-349, same commit): ``RefPlacement.CPU``, whose shards ``plan.rl_passes`` copies in
    during the reference pass. A LoRA card's reference is the actor with its adapters off; verl's Megatron
    workers are not FSDP. An RL card whose framework would not load the reference at its KL coefficient
    (``reference_loaded``) has none, ``roles.reference`` set or not (the plan says so in one assumption line)."""
    if not reference_loaded(card):
        return RefPlacement.NONE
    if card.roles.reference is not None:
        return card.roles.reference
    if card.method in (Method.SFT, Method.RM):
        return RefPlacement.NONE
    if card.preset in REFERENCE_SWAP_PRESETS:
        return RefPlacement.HOST_SWAP
    if (card.preset == "verl" and card.parallel.strategy in FSDP_STRATEGIES and card.scope is Scope.FULL
            and card.method in (Method.PPO, Method.GRPO)):
        return RefPlacement.CPU
    if (card.preset in REFERENCE_OFFLOAD_PRESETS and card.scope is Scope.FULL
            and card.method in (Method.PPO, Method.GRPO) and card.rollout.placement is Placement.COLOCATE):
        return RefPlacement.CPU
    if card.scope is not Scope.FULL:
        return RefPlacement.LORA_DISABLED
    return RefPlacement.GPU


OLD_LOGPROB_PRESETS = ("verl", "openrlhf", "nemo-rl", "miles", "slime", "skyrl")
"""Frameworks whose trainer recomputes the old policy's log-probs in a no-grad pass of the actor every step, even
with one update per batch (the ratio is then 1, but the pass runs):

* verl: ``RayPPOTrainer.fit`` runs ``_compute_old_log_prob`` (``actor_rollout_wg.compute_log_prob``, timed as
  ``old_log_prob``) unless ``algorithm.rollout_correction.bypass_mode`` reuses the engine's log-probs
  (``old_log_probs = rollout_log_probs``); ``bypass_mode`` defaults to false (volcengine/verl
  @b178a3cd56f58b2d502255daba591e92833930a7 ``verl/trainer/ppo/ray_trainer.py`` lines 1486-1502,
  ``verl/trainer/config/algorithm.py`` line 178).
* OpenRLHF: ``RemoteExperienceMaker.make_experience`` dispatches the actor's forward for ``action_log_probs``
  unconditionally, and the update reads them as the old log-probs (OpenRLHF/OpenRLHF
  @3c3be6234e0cb353e76bb8019947db9dfe99fca7 ``openrlhf/trainer/ppo_utils/experience_maker.py`` lines 153-158,
  ``openrlhf/trainer/ray/ppo_actor.py`` line 270).
* NeMo RL: ``grpo_train`` sets ``train_data["prev_logprobs"] = policy.get_logprobs(...)`` unless
  ``loss_fn.force_on_policy_ratio`` (default false) skips it (NVIDIA-NeMo/RL
  @7ea279abfbeb698b092856d0dab61e7cf39bc909 ``nemo_rl/algorithms/grpo.py`` ``_resolve_logprob_skip_flags`` lines
  2488-2510, the pass lines 3238-3241; ``nemo_rl/algorithms/loss/loss_functions.py`` line 158).
* miles / slime: ``MegatronTrainRayActor.train_actor`` switches to the actor and runs ``compute_log_prob`` (store
  prefix "") unless ``--use-rollout-logprobs`` (default false) or ``--skip-actor-forward-only`` skips it
  (radixark/miles @748935dc7155d4990d02d62f6061c50ef8054051 ``miles/backends/megatron_utils/actor.py`` lines
  522-538, ``miles/utils/arguments.py`` lines 1518-1520; THUDM/slime @624b824a898ab0ec1fcb4d373004c7f3852bf515
  ``slime/backends/megatron_utils/actor.py`` lines 474-485, ``slime/utils/arguments.py`` lines 1051-1053).

* SkyRL: ``RayPPOTrainer.fwd_logprobs_values_reward`` runs the policy's forward unless ``_skip_policy_forward``
  (a ``policy_loss_type`` in ``LOSSES_WITHOUT_OLD_LOGPROBS`` = {rollout_is, dppo} with the engine's log-probs, no KL
  in the reward and no off-policy correction); the default ``policy_loss_type`` is ``regular`` (NovaSky-AI/SkyRL
  @2e9c89afceb3ef7963748224373ad88882322c99 ``skyrl/train/trainer.py`` lines 1265-1340,
  ``skyrl/backends/skyrl_train/utils/ppo_utils.py`` line 461, ``skyrl/train/config/config.py`` line 619).

TRL is not among them; its rule is ``trl_old_logprob_pass``."""


TRL_IS_CORRECTION_SINCE = "v0.23.0"
"""The first TRL release whose ``GRPOTrainer`` recomputes the old log-probs for vLLM importance-sampling correction
(``vllm_importance_sampling_correction``, default true): huggingface/trl commit
12fc85fd13ac79247542db588f55137f1cc5a8f2 (#3867, 2025-09-03), first in tag v0.23.0
(6adfd138d895b7ac257c4079eab7d519a0472aaa ``trl/trainer/grpo_trainer.py`` lines 1371-1373,
``trl/trainer/grpo_config.py`` lines 601-602); v0.22.2 (2d597e4a188878215a588cb6e8020726e1b1e6be
``trl/trainer/grpo_trainer.py`` line 1331) runs the pass only when generation and optimizer steps are misaligned.
A card for an older TRL with vLLM says ``rollout.recompute_old_logprobs: false``, or pins ``software.trl`` before it
(``TRL_IS_CORRECTION_SINCE_VERSION``)."""

TRL_IS_CORRECTION_SINCE_VERSION = (0, 23)
"""``TRL_IS_CORRECTION_SINCE`` as (major, minor) for a ``software.trl`` pin (``pin_before``): a card pinned before it
runs the pass with vLLM only where its optimizer and generation steps are misaligned (``trl_old_logprob_pass``)."""


def trl_old_logprob_pass(card: RunCard) -> bool:
    """TRL's ``GRPOTrainer._generate_and_score_completions`` computes ``old_per_token_logps`` (a no-grad forward of
    the policy over each generation batch) when ``gradient_accumulation_steps % (steps_per_generation *
    num_iterations) != 0`` or ``use_vllm and vllm_importance_sampling_correction`` (huggingface/trl
    @f2cd57710ae345ea6428ae95363267fcf38a3dc8 ``trl/trainer/grpo_trainer.py`` lines 2561-2576; the correction
    defaults to true, ``trl/trainer/grpo_config.py`` lines 915-916; ``steps_per_generation`` defaults to
    ``gradient_accumulation_steps``, lines 1077-1079). On a card: a serving engine (``use_vllm``; TRL exports sglang
    as vllm), ``num_iterations > 1``, or ``mini_batches > 1`` (several optimizer steps per generation batch:
    ``steps_per_generation > gradient_accumulation_steps``). Otherwise ``old_per_token_logps`` stays None and the
    loss takes the detached current log-probs (lines 3031-3037). A ``software.trl`` pin before
    ``TRL_IS_CORRECTION_SINCE_VERSION`` drops the vLLM clause: v0.22.2 computes the pass only when
    ``gradient_accumulation_steps % generate_every != 0`` (huggingface/trl 2d597e4a188878215a588cb6e8020726e1b1e6be
    ``trl/trainer/grpo_trainer.py`` line 1331), the same condition v0.23.0 keeps beside the correction
    (6adfd138d895b7ac257c4079eab7d519a0472aaa lines 1370-1386)."""
    ro = card.rollout
    corrects = ro.engine in SERVING_ENGINES and not pin_before(card.software.trl, TRL_IS_CORRECTION_SINCE_VERSION)
    return corrects or ro.num_iterations > 1 or ro.mini_batches > 1


def old_logprob_pass(card: RunCard) -> bool:
    """Whether the RL step runs the old policy's log-prob pass (a no-grad forward of the actor before the update).
    The one rule for the memory phases (``methods.rl.rl_groups``) and the step time (``plan.rl_time``).

    PPO and GRPO only; ``rollout.recompute_old_logprobs`` when the card sets it, else with PPO,
    ``num_iterations > 1`` (each batch is reused, so the log-probs before the first update are needed),
    ``mini_batches > 1`` (every mini-batch after the first is trained by an already updated policy, so its ratio
    needs the log-probs of the policy that generated: verl and the other ``OLD_LOGPROB_PRESETS`` compute them every
    step anyway, TRL by ``steps_per_generation > gradient_accumulation_steps`` in ``trl_old_logprob_pass``), an
    ``OLD_LOGPROB_PRESETS`` preset, or where TRL is the planned framework (the trl preset or none,
    ``trl_planned``) ``trl_old_logprob_pass`` (vLLM importance-sampling correction, TRL >=
    ``TRL_IS_CORRECTION_SINCE``; a card for an older TRL sets the override false). SkyRL (the
    skyrl preset) runs it unless the loss reads only the engine's log-probs with no off-policy correction and no KL
    in the reward (``RayPPOTrainer._skip_policy_forward``, NovaSky-AI/SkyRL ``skyrl/train/trainer.py``
    @2e9c89afceb3ef7963748224373ad88882322c99): a card for such a loss says ``false``."""
    if card.method not in (Method.PPO, Method.GRPO):
        return False
    ro = card.rollout
    if ro.recompute_old_logprobs is not None:
        return ro.recompute_old_logprobs
    if trl_planned(card) and trl_old_logprob_pass(card):
        return True
    return (card.method is Method.PPO or ro.num_iterations > 1 or ro.mini_batches > 1
            or card.preset in OLD_LOGPROB_PRESETS)


def trl_planned(card: RunCard) -> bool:
    """TRL is the RL framework the plan stands for: the trl preset, or no preset (the weight sync planned is then
    TRL's, ``plan.rl_sync``: ``card.preset or "trl"``), so TRL's old log-prob rule (``trl_old_logprob_pass``)
    applies to both."""
    return card.preset in (None, "", "trl")


TRL_LOGITS_TO_KEEP_SINCE = (0, 14)
"""The first TRL release whose ``GRPOTrainer`` asks the model for the completion's logits only: huggingface/trl
commit 801582ec240c46ecd487a72fcc8944f268380830 (#2683, 2025-01-29, "Use num_logits_to_keep to reduce memory usage in
GRPO"), first in tag v0.14.0 (49711efab9e0cc3762d3228c9fd5a8064d489503 ``trl/trainer/grpo_trainer.py`` l.430-443:
``logits = model(input_ids, num_logits_to_keep=num_logits_to_keep + 1).logits``, ``num_logits_to_keep =
completion_ids.size(1)``), the first release with a ``GRPOTrainer`` (#2565, 2025-01-20); renamed ``logits_to_keep``
by 1c35a48b50f54b92c6b820437aaf75c4e3d777ce (#2721), v0.15.0 (00e58893809af89d07c2ff9c582ac5060888363c l.478-487:
``logits_to_keep=logits_to_keep + 1``, then ``logits[:, :-1, :]``). transformers' causal-LM forward slices the hidden
states before ``lm_head`` (5.24.0 models/llama/modeling_llama.py ``slice_indices = slice(-logits_to_keep, None)``;
``self.lm_head(hidden_states[:, slice_indices, :])``). TRL 1.16.0's fused head scores the same positions only
(trl/trainer/grpo_trainer.py ``labels[:, :-logits_to_keep] = -100``; trl/trainer/utils.py ``add_fused_lm_head``:
``hidden_states[mask]`` of the labelled rows) on a Triton device only (``TRL_FUSED_HEAD_COMPACT``). A ``software.trl``
pin before it keeps the whole sequence's logits. From v0.16 a model is passed ``logits_to_keep`` only when its forward
takes it (v0.20.0 @30576d2ddcf2c0e17c399399e2465fbe81446ade trl/trainer/grpo_trainer.py l.1107-1116: ``if
"logits_to_keep" in self.model_kwarg_keys``, else the whole logits then ``logits[:, -logits_to_keep:, :]``); every
causal-LM decoder the planner resolves takes it (transformers 5.24.0), the VLMs that do not are not planned here."""

TRL_FUSED_HEAD_COMPACT = "loss.triton"
"""The gate of TRL's fused lm_head (``loss.kernel: trl``, TRL 1.16.0 ``add_fused_lm_head``, trl/trainer/utils.py
l.1640-1648, the PyPI wheel read 2026-12-05): ``compact = _use_triton(hidden_states.device)``
(trl/kernels/chunked_logprob.py l.48-49: Triton importable and a ``cuda`` / ``xpu`` device); compact, the head scores
``hidden_states[mask]``, the rows whose label is not -100 (grpo_trainer.py l.1495-1496: ``labels[:, :-logits_to_keep] =
-100``, so the completion's tokens); otherwise ``hidden_states.reshape(-1, h)``, every one of the ``s - 1`` shifted
positions ("every position is scored instead", l.1640-1641). Measured on CPU with torch 2.13's MemTracker (tiny random
Qwen2, hidden 64, fp32, b 4 x (128 prompt + 128 completion), ``fused_lm_head=True``): 1020 rows scored, peak 149.59
MiB (the fp32 ``mm_buf`` 1020 x 32768: 127.5 MiB) as shipped; 512 rows, peak 80.12 MiB with ``_use_triton`` patched
true. The acceptance run (trainfit accept, CPU) is the first case: its forward measured 136.4 MiB against 76.6 MiB
planned over the completion only, so its card states ``loss.triton: false``. Every GPU card is the second (the
default). The eager path (TRL 0.14 to the fused head, ``loss.chunked`` false, or Liger's ``_get_last_hidden_state``
slice) keeps the completion on every device."""


def logit_positions(card: RunCard, *, seq_len: int) -> int:
    """Positions per sequence whose logits the policy and reference passes of an RL step compute: TRL's GRPO (the
    planned framework, ``trl_planned``) from ``TRL_LOGITS_TO_KEEP_SINCE`` keeps the completion's ``response_len + 1``
    (at most ``seq_len``) of its padded batch, except TRL's fused head off a Triton device (``loss.triton: false``,
    ``TRL_FUSED_HEAD_COMPACT``), which scores every position; every other case the whole ``seq_len``, packed passes
    (``rollout.packed_sequences``, ``rollout.max_tokens_per_micro_batch``: AReaL's cards) included. verl and OpenRLHF compute the logits over the
    whole (packed) sequence and slice the log-probs afterwards, so they are left at ``seq_len``: volcengine/verl
    @b178a3cd56f58b2d502255daba591e92833930a7 verl/workers/actor/dp_actor.py l.258 ``logits_rmpad =
    output.logits.squeeze(0)`` (every packed token), l.344 ``full_log_probs.squeeze(-1)[:, -response_length - 1 :
    -1]``; OpenRLHF/OpenRLHF @3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/models/actor.py l.265-267
    ``output = self.model(sequences, ...)``, ``output["logits"].to(torch.float32)``, l.294 ``log_probs[:,
    -action_mask.shape[1]:]``. TRL's PPO and DPO score the whole sequence (left too)."""
    if card.method is not Method.GRPO or not trl_planned(card):
        return seq_len
    from trainfit.plan.rl_batches import passes_pack  # late: plan imports methods

    ro = card.rollout
    if ro.max_tokens_per_micro_batch is not None or passes_pack(card):
        # packed rows or a token budget (AReaL's and verl's layouts, not TRL's padded completion block): the row's
        # logits over every packed token
        return seq_len
    if pin_before(card.software.trl, TRL_LOGITS_TO_KEEP_SINCE):
        return seq_len
    if card.loss.chunked and card.loss.kernel is LossKernel.TRL and not card.loss.triton:
        # TRL's fused head off a Triton device scores every position (TRL_FUSED_HEAD_COMPACT)
        return seq_len
    return min(seq_len, card.rollout.response_len + 1)


def resolve_role_model(name: str, *, field: str) -> Any:
    """The ModelSpec of a role's model id (``roles.critic``, ``roles.reward_model``); an id that does not resolve is
    refused naming that field, not the card's ``model``."""
    from trainfit.catalog.models import resolve_model
    from trainfit.errors import TrainfitError

    try:
        return resolve_model(name)
    except TrainfitError as exc:
        raise type(exc)(f"{field}: {str(exc).removeprefix('model: ')}") from None


def critic_model(card: RunCard, actor: str) -> str | None:
    if card.method is not Method.PPO:
        return None
    c = card.roles.critic
    return actor if c in (None, "same_as_actor") else c


def reward_model(card: RunCard) -> str | None:
    """A model id when the reward is a frozen model; None for rule-based or none."""
    if card.method not in (Method.PPO, Method.GRPO):
        return None
    r = card.roles.reward_model
    return None if r in ("rule", "none") else r


def reward_model_weight_bytes_per_param(card: RunCard) -> int | None:
    """Bytes a weight of the card's reward model is held in where the card states its dtype
    (``roles.reward_model_dtype``: 4 for fp32, 2 for bf16 / fp16); None where it does not (the trained model's)."""
    d = card.roles.reward_model_dtype
    return None if d is None or reward_model(card) is None else d.bytes


def reward_model_gemm_dtype_bytes(card: RunCard) -> float:
    """Bytes of the operands the reward model's forward GEMMs run in: 4 (fp32, the card's non-tensor-core fp32 rate,
    ``compute.gemm``) where its weights are fp32 (``roles.reward_model_dtype``) and nothing autocasts its forward
    (``precision.autocast`` false: accelerate wraps a prepared model's forward in autocast only under native mixed
    precision, huggingface/accelerate src/accelerate/accelerator.py l.1402-1413 @v1.3.0
    bdd70d5d93c3a66e859d966b6482871971ae7510, and TRL 0.14 prepares its reward models through it,
    huggingface/trl trl/trainer/grpo_trainer.py l.353-355 @49711efab9e0cc3762d3228c9fd5a8064d489503); PyTorch
    leaves TF32 off for matmuls by default (``torch.backends.cuda.matmul.allow_tf32`` False since 1.12,
    https://pytorch.org/docs/stable/notes/cuda.html, read 2026-12-05), so those GEMMs take the CUDA cores.
    2 otherwise (bf16 / fp16 tensor cores). With ``precision.tf32`` the fp32 GEMMs take the TF32 tensor rate
    (``plan.time.rates_of``)."""
    fp32 = reward_model_weight_bytes_per_param(card) == 4
    # precision.compute fp32: the run has no 16-bit autocast to run it under either
    cast = card.precision.autocast and card.precision.compute is not ComputeDtype.FP32
    return 4.0 if fp32 and not cast else 2.0


def group_sizes(card: RunCard) -> tuple[int, int]:
    """(training GPUs, rollout GPUs), whole run. Colocated: both are every GPU."""
    ro = card.rollout
    return rl_group_sizes(gpus_per_node=card.hardware.gpus_per_node, nodes=card.hardware.nodes,
                          split=card.method in (Method.PPO, Method.GRPO) and ro.placement is not Placement.COLOCATE,
                          rollout_nodes=ro.nodes, rollout_gpus=ro.gpus)


def train_nodes(card: RunCard) -> tuple[int, int]:
    """(nodes, GPUs per node) of the training group: every node with ``gpus_per_node − rollout.gpus`` each,
    or, when the engine has whole nodes (``rollout.nodes``), the other nodes whole."""
    train, _ = group_sizes(card)
    nodes = card.hardware.nodes
    if (card.method in (Method.PPO, Method.GRPO) and card.rollout.placement is Placement.SPLIT
            and card.rollout.nodes is not None):
        return nodes - card.rollout.nodes, card.hardware.gpus_per_node
    return nodes, max(1, train // nodes)


def rollout_nodes(card: RunCard) -> tuple[int, int]:
    """(nodes, GPUs per node) the rollout engines run on: colocated, every node whole; split, every node's
    ``rollout.gpus`` or ``rollout.nodes`` whole nodes."""
    ro = card.rollout
    if ro.placement is Placement.SPLIT and ro.nodes is not None:
        return ro.nodes, card.hardware.gpus_per_node
    if ro.placement is Placement.SPLIT:
        return card.hardware.nodes, ro.gpus or 1
    return card.hardware.nodes, card.hardware.gpus_per_node


def roles_of(card: RunCard, actor_name: str) -> list[Role]:
    train, roll = group_sizes(card)
    out = [Role("actor", True, "gpu", train, actor_name)]
    critic = critic_model(card, actor_name)
    if critic is not None:
        out.append(Role("critic", True, "gpu", train, critic))
    ref = reference_placement(card)
    if card.method in (Method.DPO, Method.PPO, Method.GRPO):
        gpus = train if ref in (RefPlacement.GPU, RefPlacement.LORA_DISABLED, RefPlacement.HOST_SWAP) else 0
        out.append(Role("reference", False, ref.value, gpus, actor_name))
    if card.method in (Method.PPO, Method.GRPO):
        rm = reward_model(card)
        out.append(Role("reward_model", False, "gpu" if rm else card.roles.reward_model, train if rm else 0, rm or "-"))
        placement = card.rollout.placement.value
        engine = card.rollout.engine
        out.append(Role("rollout", False, f"{placement} ({engine.value})", roll if engine in SERVING_ENGINES else train, actor_name))
    return out
