"""The RL step's passes on the training GPUs: the frozen forwards (old-policy and reference log-probs, the critic's
values, a reward model) and the actor's and critic's updates.

verl's FSDP actor update beyond a forward, backward and optimizer step, read at volcengine/verl
@e0d035cd4a6a5c29835516a58d78710a28e73b18 (the play-verl rows; the same at v0.3.0.post0
@8e7780f5ee2021cc06c248b7cf87cf31200a38fd) and priced at the catalog rates: each is planned or too small to plan
apart. ``update_policy`` (verl/workers/actor/dp_actor.py l.240-362) takes ``ppo_mini_batch_size`` mini-batches x
``ppo_epochs`` optimizer steps (as planned); it reads four or five losses per micro-batch and the norm per step with
``.item()`` (a queue drain each); the vocabulary work is ``compute.inventory``'s (the update's entropy only where
``entropy_coeff`` is not 0: 0 at e0d035cd, ppo_trainer.yaml l.46); FSDP1 ``clip_grad_norm_`` reads the gradient shard
once and all-reduces one scalar; AdamW runs on the fp32 shard (``optimizer_step``); FSDP1's fp32 reduction casts and
pre-divides each unit's unsharded gradient on its post-backward stream (14 B per parameter per micro-batch, 32 ms for
Qwen2-7B on an H100, behind the next unit's backward). The critic's update has its own timer, before the actor's
(verl/trainer/ppo/ray_trainer.py l.1033-1043); ``update_actor`` loads and offloads the actor's state inside its timer
(verl/workers/fsdp_workers.py l.512-552: the benchmark's offload share). What the published per-step lines hold beyond
the plan is none of these, and lies inside ``update_policy``: verl's own ``perf/mfu/actor`` times it alone
(fsdp_workers.py l.525-530, an H100 counted at 989 TFLOP/s, verl/utils/flops_counter.py l.37-38), which leaves outside
it 0.38 s of play-verl's Qwen2-7B 'recommended' 33.5 s update, 1.3 s of the offloading 'min' run's 10.6 s and 0.03 s
of the 0.5B GRPO run's 1.0 s. A least-squares fit of each timer on the step's tokens (yushengsu-thu/verl_training_log
gsm8k/{grpo,ppo}_run_deepseek7b_llm.log @deb1507ca0740580d2019e7150d08edf8dd6ca35, MI300X, 1007 steps each) leaves the
log-prob passes a fixed part of 0.0-0.4 s and the updates 1.9 +- 0.5 s (GRPO actor, 4 optimizer steps), 2.6 +- 0.4 s
(PPO actor, 4) and 2.0 +- 0.3 s (PPO critic, 4), with slopes 3.4-3.9 x the forward pass's (4 x: forward, recompute, a
backward twice as long); play-verl's Qwen2-7B PPO actor update (dingxianzhong/play-verl
logs/verl_qwen2_7b_recommended.log @7716a615fc4b68961f2bb7716c9aadcd65ca28d2, 55 steps, 16 optimizer steps each) grows
6.1 +- 2.1 s per million tokens, where 4 x its log-prob pass's 3.87 +- 0.15 would give 15.5. Not modelled: a fixed
part of about 0.5-0.7 s per optimizer step of a 7B model on 8 GPUs (the MI300X fits over 4 steps; 4 x the forward
slope leaves 11 s over play-verl's 16), whose mechanism these reads do not name (one profiled update on a device
would). The MI300X rows' token-proportional part is 1.35 x the plan's in the log-prob passes as well, as the torchao
MI300X pretrain rows are under: the MI300X bf16 rate is the MAMF table's TunableOp row (``compute.rates``), not a
default-heuristic one.

Seen in the offloading 'min' run, not modelled (dingxianzhong/play-verl logs/verl_qwen2_7b_min.log
@7716a615fc4b68961f2bb7716c9aadcd65ca28d2, the benchmark's 111 steps): ``timing_s/update_actor`` is two-valued. In 24
steps it is 8.39 s, in the other 87 11.22 s (-2.83 s); those 24 steps are 1.78 s shorter in all, their
``old_log_prob``, ``ref``, ``values`` and ``update_critic`` timers 0.66, 0.43, 0.21 and 0.73 s longer and ``gen`` 0.97
s shorter (update against old log-prob: r = -0.47). About 1.8 s of work that most steps pay inside the actor's update
is skipped in some, and about 1 s moves between the trainer's timers. The actor, critic and reference share one process
per GPU (one ``WorkerDict`` pid, 3095283, logs both the critic's and the actor's model build) and move their state with
``non_blocking`` copies (verl/utils/fsdp_utils.py l.113-168 @e0d035cd4a6a5c29835516a58d78710a28e73b18), so a timer can
close before its copies end and the next synchronising call pays them; what the skipped 1.8 s is, these lines do not
say. The 'recommended' run (no offload) is one-valued (update p5-p95 31.2-35.5 s, r = +0.30). Against the 24 short
steps the plan's 'min' update (5.19 s with its offload share) is -38 %, against the mean -51 %.

Two candidate mechanisms for the 'min' update were checked and rejected (2026-12-03). Neither explains the gap.
(1) The optimizer offload is not a per-step transfer. verl turns FSDP's CPUOffload off for the actor ("it causes
incorrect results when using grad accumulation": fsdp_workers.py l.260-262 @e0d035cd). ``update_actor`` moves the
parameters and the optimizer state to the GPU once before ``update_policy`` and back once after it (l.517-520,
l.546-551; ``verl/utils/fsdp_utils.py`` l.112-166, all ``non_blocking``). So all 16 optimizer steps run AdamW on the
GPU, with no PCIe traffic per step; the plan's state-offload share already prices the two moves. (2) FSDP1's
``limit_all_gathers`` rate limiter (torch's default, which verl does not override: l.263-275) does not stall the
host here. It blocks the CPU only when the GPU is two units behind. Each 'min' micro-batch is one packed row of
about 1,046 tokens (4 sequences a rank per optimizer step). The plan's forward issues about 3.2 ms of host work per
decoder layer (1.42 s over 16 micro-batches and 28 layers), against a 1.1 ms all-gather of the layer's 466 MB of
bf16 weights (7/8 of them over a 370 GB/s NVLink ring). The stream is host-paced, and the GPU never falls behind.
What is left is a fixed 0.33 s per optimizer step inside ``update_policy``. verl's own MFU metric gives 9.34 s
there, against the plan's 4.12 s without the offload; the non-blocking state loads, which the stream runs first,
fall inside the 9.34 s. The 'recommended' run, with no offload, leaves 0.58 s per step (33.5 s against 24.2 s, 16
steps). These reads do not name what either gap is.

The RL passes' signed bias (2026-12-03: actor update median -20.6 %, 20 of 21 rows under; log-prob passes -15.9 %,
16 of 20). Taken: verl's fixed log-prob micro-batches pay the ranks' token spread (``update_work_cv``, in
``forward_pass``) and verl's FSDP reference copies its pinned host shards in every micro-batch
(``_reference_host_shard_bytes_per_s``); together they move the MI300X PPO row's log-prob passes -24 -> -19 % and
the log-prob median 18.2 -> 17.6 %, and leave the update's bias as it was. Checked and not the cause of the update's
gap, which stays about 1.9-2.4 s per optimizer step on NeMo RL's DTensor Llama-3.1-8B rows (30.5 s planned against
38 and 40 s, 4 steps), 1.2-1.45 s on its Megatron ones (22.2 s against 27 and 28 s) and 0.58 s on play-verl's
Qwen2-7B (above): NeMo RL's ``get_grad_norm`` and ``clip_grad_by_total_norm_`` over the 291 gradient DTensors
(``to_local``, norm, power, sum, then a multiply each, about 1,500 ops at ``rates.DTENSOR_OP_HOST_S``: 19 ms a step,
0.2 % of the update; nemo_rl/models/dtensor/parallelize.py l.538-608 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf);
its ``torch.cuda.empty_cache()`` runs once per ``train`` call, after every global batch (dtensor_policy_worker.py
l.791, same commit), not per optimizer step; its dummy micro-batches are in ``nemo_rl_dtensor_padded_rows``. verl
empties the cache only after generation and in its offload helpers (fsdp_workers.py l.587, fsdp_utils.py l.36 and
l.128 @e0d035cd), none inside ``update_policy``, whose entropy runs only with ``entropy_coeff`` not 0 (0 at
e0d035cd). Charging the rank spread to a log-prob count that stands for a token budget (the rows that state no
fixed count: verl balances those micro-batches) sends verl-v050-rlinf-compare's log-prob pass from -16 to +38 %:
not done.

The RL update loops' per-micro-batch work, checked 2026-12-04 against the signed bias (actor update -19.3 %, 19 of 21
rows under; log-prob -10.2 %, 16 of 20; RL step -10.0 %, 62 of 85). Taken: NeMo RL's DTensor modules cast their
outputs to fp32 (``compute.fsdp2_output_cast``): Llama-3.1-8B DTensor updates -18.4 -> -16.5 % and -22.5 -> -20.6 %.
verl's FSDP2 ``MixedPrecisionPolicy`` sets no ``output_dtype`` (volcengine/verl verl/workers/fsdp_workers.py l.544-546
@b178a3cd56f58b2d502255daba591e92833930a7) and FSDP1 has none: nothing there. Checked and not the cause (each under
1 % of a row's update):
(1) host syncs per micro-batch. verl's ``update_policy`` reads ``kl_loss.item()`` before ``loss.backward()``, four
metrics after it, the norm per step (``torch.isfinite``, ``.item()``), and ``unpad_input`` reads a ``nonzero`` and a
``max().item()`` (dp_actor.py l.85, l.168, l.340, l.348-354, l.359 @e0d035cd4a6a5c29835516a58d78710a28e73b18);
NeMo RL's loop ``global_valid_seqs.item()``, ``global_valid_toks.item()`` and ``loss.item()`` per micro-batch beside
the loss's own (dtensor_policy_worker.py l.743-744, l.760 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf). The plan
already times each pass of each micro-step as ``max(host, device)`` and adds them (``compute.training.
train_step_time``: the forward, recompute and backward phases scaled by ``micro_steps``), so a drain at every pass
and micro-batch boundary is implied; a sync adds only its refill and round trip (``synced_seconds``), under 0.5 ms a
micro-batch: under 16 ms of play-verl's Qwen2-7B update (16 optimizer steps, 1.91 micro-batches each expected) and
under 15 ms of NeMo RL's Llama-3.1-8B one (60 packed rows a rank, three syncs each).
(2) the loss's passes over (tokens x vocabulary): verl's are counted in ``compute.inventory``'s module docstring (its
``div_(temperature)``, flash-attn's loss, the entropy only where ``entropy_coeff`` is not 0; a 30 / 45 B charge moves
no verl row by more than 8 points); NeMo RL's fp32 logits are the casts taken above.
(3) unpad / pad per micro-batch (``unpad_input``, ``index_first_axis``, ``torch.roll``, ``pad_input``): about 15
kernels on (tokens)-sized integer and log-prob tensors, under 1 MB; their host time after the drain about 1 ms a
micro-batch at ``HOST_S_PER_FORWARD_KERNEL``: 32 ms of the Qwen2-7B update, 4 ms of the 0.5B GRPO update whose gap is
0.28 s.
(4) gradient clipping and the optimizer step: NeMo RL's above (19 ms a step); verl's FSDP1 ``clip_grad_norm_`` reads
the fp32 gradient shard once (Qwen2-7B: 30 GB / 8 ranks, about 1 ms on an H100) and all-reduces a scalar; AdamW is
planned.
(5) dynamic batching: verl's ``rearrange_micro_batches`` takes the count from the rank's tokens, all-reduces it to
the ranks' maximum and balances the sequences over the micro-batches (Karmarkar-Karp, seqlen_balancing.py l.224-232
@e0d035cd), which ``rl_batches.dynamic_micro_batches`` models; no nearly empty last micro-batch.
(6) the micro-batch counts match the frameworks' (play-verl Qwen2-7B: 40 sequences of 281 tokens a rank and step
under a 12,000-token budget, 1.91 micro-batches expected; NeMo RL Llama-3.1-8B: 15 packed rows of 4,096 a rank and
step), and the update packs the same sequences the log-prob passes do.
What the FSDP updates still miss beyond their log-prob passes (NeMo RL DTensor 8B about 6-8 s of 38-40 s while the
log-prob passes are within 4 %; play-verl's Qwen2-7B about 9 s of 33.5 s, log-prob -6 %) is none of these.

Where the update's missing time sits, 2026-12-04 (signed median -19.3 %, 19 of 21 under). NeMo RL's published update
over its log-prob column (the policy's and the reference's forward passes together, 8,192-token packed micro-batches) is
1.56 (8B and 70B Megatron; a forward and a backward of twice its work over two forwards: 1.5) but 2.0-2.1 for the
DTensor 8B and 3.5-4.0 for the DTensor 70B, whose configs recompute nothing (grpo_math_8B.yaml / grpo_math_1B.yaml
``activation_checkpointing: false``; nemo_rl/models/dtensor/parallelize.py l.461-462 wraps the MLPs only when set,
NVIDIA-NeMo/RL @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf): the FSDP2 update's backward runs about 1.5 x its planned
length, where FSDP2 all-gathers and fp32-reduce-scatters every unit in every micro-batch behind it. Checked and not
taken: charging the hidden collectives' bytes to the HBM beside the compute (NCCL's maintainer, NVIDIA/nccl issue
#1428: 2-3 passes a byte), added to the step in full: DTensor 8B updates -16.5 -> -8.4 % and -20.6 -> -13.0 %,
actor-update median 20.6 -> 18.9 %, but it moves 735 training rows (fit half 9.91 -> 9.42 %, held-out half 9.61 ->
9.73 %, SFT full 7.3 -> 7.5 %): a GEMM-bound compute does not wait on HBM, so the full charge is an upper bound, and
what share of it a step pays is not published. Taken since 2026-12-05 in another form, with the step's flow-shop timeline (``compute.training.lockstep_flow_shop``): the hidden seconds' compute slowed by the HBM share of 3 passes a byte, each span capped by its fluid bound (``compute.collectives.hbm_contention_exposed``; all rows 10.15 -> 9.91 %, fit half 10.30 -> 10.04 %, held-out half 9.90 -> 9.82 %, DTensor 8B update -16.5 -> -8.4 %). Checked and not the cause: NeMo RL's ``SequencePackingLossWrapper``
runs the loss one packed sequence at a time (nemo_rl/algorithms/loss_functions.py l.621-698, same commit), two
``.item()`` a sequence there and eight in ``ClippedPGLossFn`` (mult_prob_error, probs_ratio, probs_ratio_clamped, loss,
kl, sampling_importance_ratio, num_valid_samples, approx_entropy) beside about 55 small kernels: at 15 us a kernel and
30 us a sync about 1.2 ms a sequence, 4.5 sequences a 4,096-token row, 60 rows: 0.3 s of 38 s; the optimizer state's
move back to the GPU runs under the ``training_prep`` timer (``prepare_for_training``, grpo.py l.660-663), not
``policy_training``. Taken: the DTensor 70B run batches dynamically (the blog's footnote), and NeMo RL's dynamic
batching sorts each global batch by length, deals it to the ranks and pads each micro-batch to its longest within
``train_mb_tokens`` (``rl_batches.nemo_rl_dynamic_micro_batches``), 11 micro-batches a rank and optimizer step where
a packed 4,096-token budget takes 9.84; its update is bound by the per-micro-batch FSDP collectives across nodes.
Its log-prob passes batch the same way: ``get_logprobs`` and ``get_reference_policy_logprobs`` call
``shard_by_batch_size(dp_size, batch_size=None, dynamic_batching_args)`` with ``logprob_mb_tokens`` (NVIDIA-NeMo/RL
nemo_rl/models/policy/lm_policy.py l.185-207, l.250-270; the worker's ``make_microbatch_iterator_with_dynamic_shapes``,
dtensor_policy_worker.py l.850-851 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf), the whole step one chunk; taken as
the code does it: the DTensor 70B runs 20 padded micro-batches of 7,543 tokens a rank (8,192-token budget) where the
packed budget's largest rank took about 18.3, 14.6 -> 16.0 s a pass, and the log-prob columns move over the published
from +6.0 to +16.1 % (blog) and +5.0 to +16.7 % (issue #959 rerun); log-prob median 12.8 -> 16.4 % (these two rows
of 20 cross the median), RL step median 14.2 -> 13.8 %, ALL 9.5 -> 9.6 %, beyond 50 % 38 -> 38. Which of the
pass's terms over-plans these runs is not checked here.

The update against its signed bias, 2026-12-05 (the 30 published actor-update rows: signed median -15.4 %, 4 beyond
50 %; over all 51 scored update rows by framework: verl FSDP +7.4 % (24 rows), verl Megatron -32.7 % (11), NeMo RL
DTensor -20.2 % (5), NeMo RL Megatron -15.8 % (6)). Taken: verl's fixed update micro-batches pay one micro-batch's
length spread (``fixed_update_micro_batches``; three rows 1-2 points closer). Checked and not the cause:
(1) verl up to v0.3.0.post1 takes the compiled entropy in every update micro-batch and backpropagates through it
whatever ``entropy_coeff`` (``policy_loss = pg_loss - entropy_loss * entropy_coeff``, volcengine/verl
verl/workers/actor/dp_actor.py l.283-297 @070ed6ac3f6aea13a916556794f34e8f2bde7dde, ``entropy_coeff: 0.001`` by
default there, verl/trainer/config/ppo_trainer.yaml l.34; gated on ``entropy_coeff != 0`` from e0d035cd, dp_actor.py
l.304-311). Its ops on the logits (``div_``, flash-attn's loss, Inductor's entropy and their backwards, the two
gradients summed) come to about 14 B per logit forward and 20 B backward, within the 14 + 22.5 B the update is
charged (``compute.inventory``): nothing to add on verl issue 1208's row (v0.3.0.post1), whose update misses 5.5 s.
(2) verl's Megatron update with fixed micro-batches (ISEEKYAN/verl_megatron_practice grpo_qwen2.5_7b.csv
@9976592e899543c776e1a1086cee288079ef5b58, Qwen2.5-7B on 8 H100; -56 to -65 %): each fixed / token-budget pair of
the table, read as a + b x tokens a micro-batch (2,048 fixed micro-batches of 2 sequences, about 1,412 tokens, a
rank at TP 4; about 296 budgeted ones of about 9,770), gives published b = 23.7 us a token and a = 114 ms at TP 4
(planned 26.1 us, 17.6 ms), 68.9 us and 150 ms at TP 2 with full recompute (planned 63.8 us, 17.9 ms; 1,024 and
about 152 micro-batches). The token-proportional part is planned within 10 %; the miss is the constant per
micro-batch, which ``compute.te_host``'s null result and the rows' notes already bound (host syncs, the batch's
copies, the fused linear cross-entropy's launches, cuDNN graphs: none of that size). No mechanism for it is named
in the cited code, so no per-micro-batch charge is made. The update path re-read end to end at the verl the runs
used (volcengine/verl @62549582a71881fe861b09f8375e3aea80ac6754, the last commit before the run script; the script
GRPO_7B/qwen2.5_7b_megatron_vllm_benchmark.sh @f8e0d3a187afe6edbde583f46a5708a76a3423a3 sets
``use_fused_kernels=True``, ``entropy_coeff=0``, no ``use_mbridge``) with the stack of verl's vLLM image of that
commit (docker/verl0.5-cu126-torch2.7-fa2.7.4/Dockerfile.app.vllm.mcore0.13 l.3, 26, 29, 32: cuDNN 9.8.0.87,
TransformerEngine v2.2.1, Megatron-Core core_v0.13.0 = c550cf6c41c31cd3ec72e05c25ea0c979f2b6631; the table names no
image), hypothesis by hypothesis:
(a) padding computed: no. ``use_fused_kernels`` reaches the actor (verl/trainer/config/actor/actor.yaml l.134), so
every micro-batch runs ``fused_forward_gptmodel`` (verl/models/mcore/model_forward_fused.py), whose
``preprocess_packed_seqs`` (verl/models/mcore/util.py l.23-102) drops the padding and pads each sequence only to a
multiple of TP (CP 1) or 2 x TP x CP (``align_size``, l.38): at most 3 / 1 / 7 tokens a 706-token sequence at TP 4 /
TP 2 / TP 2 x CP 2 (under 1 %); THD with ``cu_seqlens``, never bshd. Whatever work follows the padded width
(10,240 = prompt + response maxima) is per sequence, not per micro-batch: ``rearrange_micro_batches``
(verl/utils/seqlen_balancing.py l.250-320) regroups whole 10,240-wide rows as ``mini_batch.batch.split(2)``
(megatron_actor.py l.418) does, so both runs of a pair carry the same 8,192 padded rows and such work lands in the
slope b (planned within 10 %), not in a.
The reference pass packs too (checked 2026-12-05): its ``ref`` config carries no ``use_fused_kernels``, so
``MegatronPPOActor`` reads False (megatron_actor.py l.130, built with ``config=self.config.ref`` at
verl/workers/megatron_workers.py l.523) and runs ``gptmodel_forward`` (verl/models/mcore/registry.py l.107, Qwen2),
whose ``pack_seqs=True`` default (model_forward.py l.22-39) calls the same ``preprocess_packed_seqs``; its logits are
the packed tokens' only. Nor would padding fit the numbers had it been there: padding a 2-sequence micro-batch to
the pair's longest response adds E[max of two] / mean = 1.5 of the response under an exponential length
distribution (the card default, ``compute.response_lengths``), about 1.4x the micro-batch's tokens against the
2.7x missed; padding to the full 10,240 width would be 14x.
(b) padded-length work per micro-batch: the labels' and label mask's clones (megatron_actor.py l.468-472), the
outputs' ``torch.zeros(batch, 10,240)`` and boolean scatters (``postprocess_packed_seqs``, util.py l.105-162),
the log-probs' slice to the response: a few hundred kB a 2-sequence micro-batch, per sequence again (b, not a); the
logits are never materialised (``linear_cross_entropy`` on the packed tokens).
(c) memory and data handling: ``empty_cache`` only after the whole ``update_policy`` / ``compute_log_prob``
(megatron_actor.py l.613, l.250); ``broadcast_dict_tensor`` once a mini-batch over the pipeline group (l.376; one
rank at PP 1); the micro-batch's ``batch.to(device)`` (l.451) is the 8 pageable copies ``compute.te_host`` bounds.
(d) gradient buffers: ``overlap_grad_reduce`` False and ``grad_reduce_in_fp32`` True (verl/utils/megatron_utils.py
l.139-141): one reduce-scatter after the last micro-batch of each mini-batch (Megatron-Core
megatron/core/pipeline_parallel/schedules.py ``forward_backward_no_pipelining`` l.450-552: no_sync until then), 16
a step, not per micro-batch. Real and per micro-batch: verl leaves ``gradient_accumulation_fusion`` at
Megatron-Core's default False (Qwen2 goes through verl/models/mcore/config_converter.py
``hf_to_mcore_config_dense`` l.164-181 and ``_get_base_transformer_config`` l.32-97, neither sets it, the DeepSeek-V3
converter has it commented out at l.348; megatron/core/model_parallel_config.py l.145), so TE returns each weight
gradient in bf16 and the DDP hook adds it into the fp32 ``main_grad`` (megatron/core/distributed/
distributed_data_parallel.py l.486-507) after every backward: the pass ``compute.training.
fp32_grad_accumulation_seconds`` times. Tried as a time-only switch for verl Megatron cards (benchmarks/step_times.py
rerun, not committed): 4.4 ms a micro-batch at TP 4, 9.1-9.2 ms at TP 2, 8.3 ms at TP 2 x CP 2: about 4-6 % of the
114 / 150 ms constant; the fixed-micro-batch updates move 3-4 points (TP 4 -62.8 -> -59.8 %, TP 2 -60.2 -> -55.9 %,
TP 2 x CP 2 -64.8 -> -60.6 %), the budgeted ones 1-1.5 points, the 11 verl Megatron update rows' signed median
-32.7 -> -31.7 %, but the rows planned close go over (verl one-step-off DAPO Megatron updates +9.4 -> +11.6 % and
+5.8 -> +7.9 %, verl PR 1629 PPO TP 2 step +26.3 -> +30.8 %), all rows 10.3 -> 10.4 %, beyond 50 % 58 -> 58; and the
forward-only log-prob pass of the TP 2 x CP 2 run, which has no gradient, carries an 85 ms constant of its own. Not
taken: it does not reproduce the constant at either TP.
(e) the loss: ``compute_ppo_loss`` (megatron_actor.py l.303-355) aggregates over the (2, 8,192) response mask (a
dozen small kernels) and reads five ``.item()`` (l.330-333, 352), the syncs ``compute.te_host`` already bounds.
(f) cuDNN graphs per micro-batch (varying batch and longest sequence): with that image's cuDNN 9.8 (>= 9.6) TE keys
a ragged batch's graph by the quantised batch and token counts (``compute.te_host``), a handful of graphs a run.
(g) the trainer state's trips to the host between phases (checked 2026-12-05): verl's Megatron worker moves it once
per timed call, never per mini- or micro-batch. ``update_actor`` loads the parameters and the optimizer state before
``update_policy`` and offloads them after it (volcengine/verl verl/workers/megatron_workers.py l.613-648
@62549582a71881fe861b09f8375e3aea80ac6754); ``compute_log_prob`` loads the parameters without gradients (l.728-747).
``offload_megatron_model_to_cpu`` copies each DDP buffer's ``param_data`` (the rank's bf16 shard) to pinned host
memory and frees ``grad_data``; ``load_megatron_model_to_gpu`` copies it back and re-zeroes the gradients
(verl/utils/megatron_utils.py l.322-381). ``offload_megatron_optimizer`` and ``load_megatron_optimizer`` move the
fp32 main parameters and Adam's two moments (l.467-505). The plan already prices these trips (``plan.rl_offload``'s
``state_offload``): 9.5 s a step at TP 4, 18.2 s at TP 2 and at TP 2 x CP 2, a third of it in the update timer (3.2
/ 6.1 s: benchmarks/step_times.py ``VERL_MEGATRON_OFFLOAD_SHARES``). The table bounds the trips' share itself. Its
TP 4 fixed pair (rows 7 and 8) differs in Offload and in 'Cuda graph', which the entries read as vLLM's (generation
115.7 -> 84.8 s), and reads 300.2 s without offload, 300.7 s with it. Its token-budgeted TP 4 pair reads 102.0 s and
124.6 s (+22.6 s; the plan +3.2 s). The TP 4 fixed row without offload misses by as much as its offloaded twin
(-62.8 / -61.8 %). At any PCIe rate these trips are not the constant: nothing to add.
(h) the constant against the layout. The table's row 3 (TP 4 x CP 2, fixed micro-batches, no offload: update 880.6
s; not recorded as an entry, since it publishes no log-prob or throughput figure) was planned as a diagnostic, from
the TP 4 fixed entry with CP 2: 263.4 s. That is (880.6 - 263.4) s / 4,096 micro-batches (DP 1) = 151 ms a
micro-batch, against 92 ms at TP 4 (DP 2) and 129 ms at TP 2 (DP 4) and at TP 2 x CP 2 (DP 2). So CP 2 adds about 60
ms a micro-batch at TP 4 and nothing at TP 2: the constant is not a function of the model-parallel size alone. Nor
is it a wait between data-parallel ranks: row 3 has none and shows the largest constant. A profile of one 2-sequence
micro-batch at TP 4 and TP 2 is what would name it.
So the constant stays unexplained in the cited code; no per-micro-batch charge is made.

What a Megatron-Core trainer adds to the RL passes, 2026-12-05 (benchmarks/step_times.json before this paragraph's
change; log-prob / update errors). Against the FSDP rows of the same sources: NeMo RL v0.3's blog and issue #959
rerun, Llama-3.1-8B and 70B and Qwen3-32B Megatron -12..+18 % / -18..-5 % (their DTensor twins -4..+2 % / -31..-8 %);
its Qwen3-30B-A3B Megatron row -52 / -60 % is a MoE row (no dense miss of that size in the source), left to the MoE
rows' notes (compute.model_parallel). verl's one-step-off H20 DAPO rows, Megatron TP 2 x PP 2 +9 / +2 % and +9 / +6 %
(FSDP2 +10 / +15 % and +21 / +34 %); RLinf's Megatron row -24 / 0 % against verl FSDP's -7 / +5 %; the
verl_megatron_practice rows -12 % (log-prob, token budget) and -21 / -33 % (update, budget) but -67 % and -56..-65 %
with fixed 2- and 4-sequence micro-batches ((2) above); the GPG Qwen2-7B TP 2 x PP 2 row -65 / -42 % against its
FSDP twin's -33 / -37 %. So the miss is not Megatron's as such: it follows the fixed small micro-batches of
verl_megatron_practice, the MoE path, and the GPG run.
Taken: Megatron-Core's unfused RoPE over packed sequences where the run's transformer config leaves
``apply_rope_fusion`` at its default False (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py l.255
@c550cf6c41c31cd3ec72e05c25ea0c979f2b6631): every micro-batch of verl's Megatron actor is one thd row
(``rope_loop_samples_of``), and ``apply_rotary_pos_emb`` (megatron/core/models/common/embeddings/rope_utils.py l.200,
l.250, same commit) takes ``_apply_rotary_pos_emb_thd``: a ``.tolist()`` of the lengths (l.166), then 12 kernels per
sequence and one closing ``torch.cat`` (l.139-179; core_v0.10-0.14's loop, ``compute.inventory.THD_ROPE_CAT_*``, the
verl preset's default release ``spec.card.VERL_MEGATRON_CORE_RELEASE``; Megatron-LM main's loop, 13 per sequence and
two syncs, is Megatron-Bridge's), for the query and the key of each layer (``compute.inventory.thd_rope_loop``). The loop's forward is
serial (``inventory.PassInventory.serial_kernels``): the sync has drained the queue and each kernel on a
few-hundred-token slice runs shorter than its launch, so the GPU idles through the loop. Stated on the rows whose
config is read (train.packed_rope_loop_source): the GPG Megatron log prints 'apply_rope_fusion=False'; verl PR 1629's
two PPO steps (their response lengths are not published, the card's default profile stands in) and the one-step-off
Megatron rows run the same converter with no override. With the loop first counted at Megatron-LM main's 13 kernels
and two syncs (04f9b37f): GPG log-prob -65.0 -> -45.8 %, update -41.8 -> -25.7 %, step -46.4 -> -33.4 % (then, with
the recompute the run never ran taken out, the same log's 'recompute_granularity=None', update -48.0 % and step
-44.9 %); PR 1629 steps -5.8 -> +12.2 % and +26.4 -> +51.1 %; one-step-off log-prob +8.6 -> +17.3 % and +2.3 -> +10.9
%, update +9.4 -> +13.5 % and +5.8 -> +9.8 %, step +8.4 -> +11.9 %. Counted at the rows' own release line (core_v0.12
/ 0.13, 12 kernels and one sync; benchmarks/step_times regenerated on the merged tree): GPG log-prob -47.7 %, update
-49.7 %, step -46.2 % (the update still misses as its FSDP twin's does, by more than the loop); PR 1629 steps +10.3 %
and +48.5 %; one-step-off log-prob +16.4 % and +10.1 %, update +12.8 % and +9.1 %, step +11.4 %. Of
Megatron-Bridge's seven verification rows that loop over 392-token samples (Megatron-LM main's loop), six move
0.2-3.1 points closer (all under); the Qwen3-8B 32k SFT row (+25.9 %) does not move. On the merged tree all rows
10.74 % with main's counts on the verl rows, 10.70 % with their release's (held-out half 10.58 -> 10.52 %, fit half
10.96 %); no subset's median moves, H200 rows unchanged. The verl_megatron_practice script sets
``override_transformer_config.apply_rope_fusion=True`` (its
entries' notes), RLinf's recipe ``apply_rope_fusion: True`` (RLinf/RLinf
examples/math/config/qwen2.5-1.5b-grpo-megatron.yaml @27368f3541d652c8cd38c93574e91c035401cf49), NeMo RL's Megatron
policy defaults it to True (NVIDIA-NeMo/RL nemo_rl/models/megatron/setup.py l.2292
@7ea279abfbeb698b092856d0dab61e7cf39bc909): not looped, and (2)'s constant stays unexplained.
Checked in the same pass and not a cause (no change): (i) Transformer Engine's thd attention per layer (TE v2.2.1,
the verl image's, transformer_engine/pytorch/attention.py @c55e425ac5751c72bfa656560fc7c65ab7d895e9): it reads
``max_seqlen`` from the tensors only when it is None (l.5967-5978; verl passes Python ints, verl/models/mcore/util.py
l.90-97 @62549582a71881fe861b09f8375e3aea80ac6754), and its ``pad_between_seqs`` test ``torch.equal(
cu_seqlens_q_padded[:-1], cu_seqlens_q[:-1])`` (l.6141-6148) compares two views of the one tensor verl passes as both,
which torch's ``cuda_equal`` answers without a kernel or a sync for aliased views of the same storage, offset and
strides (pytorch/pytorch pull request #102714 'Introduce fast path for cuda_equal', merged 2023-06-03, read
2026-12-05); TE's fused thd RoPE is one kernel each way (transformer_engine/pytorch/dot_product_attention/rope.py
l.102-143). (ii) Pipeline p2p with ``variable_seq_lengths`` True (verl's base transformer config; the GPG log l.672
'variable_seq_lengths=True, ... batch_p2p_comm=False'): every send and receive first swaps the tensor's shape and
calls ``torch.cuda.synchronize()`` (Megatron-LM megatron/core/pipeline_parallel/p2p_communication.py
``_communicate_shapes`` l.21-110, called at l.282-287, @d580efc68a9f0dbf1945f834f6f6200cd01d3343 core_v0.12.0): a
drain at each micro-batch boundary of a stage, which the plan's per-pass ``max(host, device)`` already implies; the two
stages still run different micro-batches at once, so each adds a round trip, not a stage's time.

verl's FSDP update and old-policy pass against the GPG Qwen2-7B rows, checked 2026-12-05: no model change (null
result). The FSDP run's two steps (benchmarks/data/published_rl_times_firstcontact_2612g.json: 8 A100-class GPUs, in
both passes and at both steps 40 fixed micro-batches of 16 sequences a rank) split each timer into a part that grows
with the step's tokens and one that does not. The old-policy pass grows 9.65 s a million tokens, the plan 9.70 (within
0.5 %), and sits 10.8 s and 10.7 s over the plan at the two steps. The update grows 32.3 s a million, the plan 36.4,
and extrapolates to 71.5 s at zero tokens against the plan's 14.4. Where that time is: verl's ``perf/mfu/actor`` is
its FlopsCounter over ``update_policy``'s own ``Timer`` (volcengine/verl verl/workers/fsdp_workers.py l.612-617
@d815db5ad87ba2b11f20ba3a4a040ad31cadbfbd, the last commit before the run; the Qwen2 count at
verl/utils/flops_counter.py l.84-115). At 312e12 (A100 / A800), the logged 0.269 and 0.374 put ``update_policy`` at
133.3-134.6 s of the 134.13 s timer and at 197.8-201.8 s of 199.42 s (the squared-length sum between its floor and a
length cv of 1). So the worker wrapper and the batch's Ray transfer (planned 0.81 s) hold under about 1 s, and the
constant is inside ``update_policy``. Read there, at that commit, with the run's launch command; each item is real
and none is of that size:
(1) Entropy. The launch sets ``actor.entropy_coeff=0``, so the update's ``calculate_entropy`` is False
(verl/workers/actor/dp_actor.py l.397-400). The old-policy pass takes the compiled entropy (fsdp_workers.py l.701;
``torch.compile(..., dynamic=True)``, dp_actor.py l.75-79) over tokens x vocabulary. That work grows with the tokens,
lands in the slope that the plan matches, and is counted (``compute.inventory``).
(2) Micro-batch counts. ``use_dynamic_bsz`` is false and ``mini_batch.split(16)`` (l.366-368) gives 1,280 sequences
a mini-batch / 8 ranks / 16 = 10 micro-batches, 4 mini-batches, 40 a rank. The log-prob pass's ``batch.split(16)``
(l.301) gives 40. Both as planned.
(3) Host syncs: four ``.item()`` after each backward (l.439-445), ``unpad_input``'s (l.104), the norm's
``isfinite`` once an optimizer step (l.255). Each is under 0.5 ms (the 2026-12-04 paragraph above), under 0.1 s an
update.
(4) Optimizer steps: 4 an update. ``_optimizer_step`` (l.244-260) runs FSDP1 ``clip_grad_norm_`` (a scalar
all-reduce) and AdamW (foreach) on the fp32 shard. Planned at 0.24 s in all; 57 s would be 14 s a step.
(5) The wrappers, each once a call, none per micro-batch. ``update_actor`` moves the batch to the CPU (l.601),
offloads nothing (``param_offload`` / ``optimizer_offload`` False in the launch command) and times
``update_policy`` alone (l.612-614). ``compute_log_prob`` moves the rank's batch to the GPU once (l.691), the output
back once (l.708) and reshards the FSDP1 root once (l.712-713). The Ulysses sharding manager does nothing at sp 1
(verl/workers/sharding_manager/fsdp_ulysses.py l.37-47). ``GPUMemoryLogger`` reads the allocator's counters
before and after each call (verl/utils/debug/performance.py l.29-95).
(6) FSDP1's collectives: the one per-micro-batch cost that does not grow with the tokens (the bf16 gathers and the
fp32 reduce-scatter every micro-batch; verl runs no ``no_sync``). At the catalog's A100 NVLink the plan exposes
4.04 s of them in the update. Planned over PCIe with peer-to-peer (``hardware.interconnect: pcie``), the update's
exposed share becomes 13.62 s (+9.6 s at both steps). The old-policy pass gains 4.2 s at step 2 but 0.7 s at step
209, where the longer compute hides it; the published excess is the same at both steps. Without peer-to-peer the
update plans 259 and 262 s (published 134 and 199). No link rate gives a step-independent 57 s and 11 s.
(7) The ranks' length spread over one 16-sequence micro-batch (``fixed_update_micro_batches``): planned 16.8 s and
25.9 s. It grows with the tokens; the published excess does not.
What is left is a step-independent excess of about 57 s in the update and 11 s in the old-policy pass. Two steps
of one run cannot tell per micro-batch (1.4 s, 0.27 s) from per call or per optimizer step. verl's code at the
run's tree does not name it; a profiled step would. This FSDP constant and the Megatron rows' 90-150 ms per
micro-batch ((2) above) share only verl's trainer and the worker wrappers, and the wrappers' share is bounded above
(under 1 s a call). No common per-micro-batch mechanism is in verl's own code, so no term is added. Nor does the
benchmark show one constant across the verl FSDP updates with fixed micro-batches: their miss over the plan is 0.02 s
a micro-batch on play-verl's Qwen2.5-0.5B PPO run (H100, 64 a rank), 0.17 s on verl issue 1208's 0.5B GRPO run
(GH200, 32), 0.35 s on verl PR 5596's Qwen3-8B (GB200, 40) and 1.0-1.2 s on the GPG Qwen2-7B steps (A100, 40). A
charge fitted to one of these would over-plan the others. The lead
this paragraph left open, checked 2026-12-05 (no model change): the same step lines log
``perf/max_memory_reserved_gb`` 99.2 and 113.6, more than an 80 GB card holds. vLLM's sleep releases the colocated
engine's physical memory while torch's counters keep it (vllm-project/vllm issues 17117 and 33625, read 2026-12-05),
so the figure is the engine's pool (at most 0.6 of the card here) plus the actor's own reserved memory; the card is
still the A100 class the logged MFU names (the entries' checked text: the run's fork commit, its get_device_flops
table, the allocated peaks that rule out an H200). The actor's own reserved memory is then 51.7-61.7 GiB at step 2
of the card's 79.26 GiB: 17.6-27.6 GiB under it, while step 2 misses by the same 57 s as step 209. So the fixed
excess is not caching-allocator retries at the card's limit; ``num_alloc_retries`` is still not logged.

Pure: no torch.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil

from trainfit.compute.attention_time import kernel_head_dim_of
from trainfit.compute.inventory import VERL_ENTROPY_COMPILED_BYTES, VERL_ENTROPY_COMPILED_KERNELS
from trainfit.compute.model_parallel import pipeline_bubble_micro_steps
from trainfit.compute.moe_time import expert_token_shards
from trainfit.compute.rates import DeviceRates
from trainfit.compute.training import (
    Parallel,
    PhaseTime,
    forward_only_time,
    fsdp_units,
    model_parallel_comm_of,
)
from trainfit.memory import attention as attn
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import count_scale
from trainfit.methods.roles import (
    logit_positions,
    old_logprob_pass,
    reference_placement,
    reward_model,
    reward_model_gemm_dtype_bytes,
)
from trainfit.plan.rl_batches import (
    RlBatch,
    balanced_micro_batches,
    dynamic_micro_batches,
    nemo_rl_dtensor_padded_rows,
    nemo_rl_dynamic_shape,
    pipeline_packing,
    update_work_cv,
)
from trainfit.plan.rl_common import bf16_engine_weight_bytes, generated_prompts, hsdp_shard_of, rl_phase
from trainfit.plan.rl_offload import reference_swap_phase
from trainfit.plan.time import (
    kernel_factor_of,
    COMPILE_MEMORY_FACTOR,
    a2a_thd_sequences_of,
    adapter_of,
    attention_kernel_of,
    compute_dtype_bytes,
    fp32_model_gemm_dtype_bytes,
    fp8_attention_recipe,
    fp8_casts_of,
    fp8_layer_share_of,
    fp8_weight_cache_of,
    fused_kernels,
    gathered_weight_bytes_of,
    model_parallel_of,
    mxfp8_params_gather_bf16,
    nemo_rl_dtensor,
    nemo_rl_pg_loss_of,
    nic_bytes_per_s,
    packed_flash_syncs,
    rank_spec,
    rope_loop_samples_of,
    te_ring_context_parallel_of,
    thd_rope_loop_of,
    timed_rank_holds_head,
    training_time,
    sdpa_mask_layers,
    window_masked_sdpa,
)
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    FSDP_STRATEGIES,
    LogprobEntropy,
    LossKernel,
    MoeExperts,
    MoeLaunch,
    RefPlacement,
    TensorParallelImpl,
)
from trainfit.spec.model import ModelSpec


def takes_entropy(card: RunCard, phase: str) -> bool:
    """Whether the log-prob pass ``phase`` also takes the entropy of the logits (``loss.logprob_entropy``): the old
    policy's under old_policy and every_pass, the reference's under every_pass."""
    e = card.loss.logprob_entropy
    return (phase == "old_logprob" and e is not LogprobEntropy.NONE) or (
        phase == "ref_logprob" and e is LogprobEntropy.EVERY_PASS)


def _weighted(name: str, timed: list[tuple[float, PhaseTime]]) -> PhaseTime:
    """The expected phase over micro-batch counts drawn with the given probabilities (``dynamic_micro_batches``):
    seconds and terms averaged, the bound of the likeliest count."""
    terms: dict[str, float] = {}
    for p, t in timed:
        for k, v in t.terms.items():
            terms[k] = terms.get(k, 0.0) + p * v
    likeliest = max(timed, key=lambda pt: pt[0])[1]
    return PhaseTime(name, sum(p * t.seconds for p, t in timed), likeliest.bound, terms)


def _reference_host_shard_bytes_per_s(card: RunCard, r: DeviceRates) -> float:
    """Bytes/s at which a verl FSDP reference's host-resident shards come to the GPU in its log-prob pass, 0 where
    its weights stay on the GPU. verl's FSDP workers wrap every role but the actor with FSDP's own CPU offload
    (``cpu_offload = None if role == "actor" else CPUOffload(offload_params=True)``, volcengine/verl
    verl/workers/fsdp_workers.py l.260-262 @e0d035cd4a6a5c29835516a58d78710a28e73b18; ``CPUOffloadPolicy`` under
    FSDP2 at b178a3cd56f58b2d502255daba591e92833930a7), which ``methods.roles.reference_placement`` gives a verl FSDP
    card by default (``roles.reference: cpu``). FSDP keeps that shard pinned (``_flat_param.py`` l.1260, torch 2.13.0;
    FSDP2's ``CPUOffloadPolicy(pin_memory=True)``), so every training GPU of the node copies at the pinned rate
    (``compute.offload.host_copy_bytes_per_s``); ``compute.training.forward_only_time`` times the copies."""
    from trainfit.compute.offload import host_copy_bytes_per_s
    from trainfit.methods.roles import train_nodes
    from trainfit.plan.time import verl_fsdp_workers

    if not verl_fsdp_workers(card) or reference_placement(card) is not RefPlacement.CPU:
        return 0.0
    return host_copy_bytes_per_s(pcie_bytes_per_s=r.pcie_bytes_per_s, host_memory_bytes_per_s=r.host_memory_bytes_per_s,
                                 gpus_per_node=train_nodes(card)[1])


def _policy_host_shard_bytes_per_s(card: RunCard, r: DeviceRates) -> float:
    """Bytes/s (of the gathered 16-bit weights) at which an FSDP policy's host-resident shards come to the GPU in
    its old log-prob pass, 0 where its shards stay on the GPU. A card whose FSDP training offloads the parameters
    (``parallel.offload: params_and_optimizer``: FSDP1 ``CPUOffload(offload_params=True)``, FSDP2
    ``CPUOffloadPolicy``) wraps the policy module with it, and the old log-prob pass runs that module: every unit's
    pre-forward all-gather first copies the rank's shard from host memory (FSDP2 ``FSDPParam.all_gather_inputs``:
    ``sharded_param_data.to(self.device, non_blocking=True)`` when ``offload_to_cpu``, then the cast to
    ``param_dtype``, torch 2.13.0 ``torch/distributed/fsdp/_fully_shard/_fsdp_param.py`` l.895-901; FSDP1
    ``FlatParamHandle.pre_unshard``), every micro-batch, as ``_reference_host_shard_bytes_per_s`` for verl's
    reference. The shard is pinned (``CPUOffloadPolicy(pin_memory=True)``, the default, l.312-315 there), so every
    training GPU of a node copies at the pinned rate (``compute.offload.host_copy_bytes_per_s``); the copy moves the
    shard in its stored dtype (``RunCard.weights_dtype``: 4 B for fp32 shards under a mixed-precision policy), which ``compute.training.forward_only_time`` counts as 16-bit bytes, so the rate is scaled by 2 over
    it. E.g. MarinSkyRL's ``trainer.policy.fsdp_config.cpu_offload`` -> ``fully_shard(offload_policy=
    CPUOffloadPolicy(pin_memory=True))`` (marin-community/MarinSkyRL skyrl-train/skyrl_train/distributed/
    fsdp_strategy.py l.343-349 @a559688ccdfe65e44d9f13ddaaccb57aa8a3b0b9), whose policy forward computes the
    log-probs (the same worker's module). Not verl's FSDP actor, which is never wrapped with FSDP's offload
    (``plan.time.torch_fsdp_cpu_offload``).

    The same module runs the reference pass of a LoRA policy under PEFT's ``disable_adapter()``
    (``RefPlacement.LORA_DISABLED``), which ``frozen_pass_phases`` charges at this rate too. Not modelled: a PPO
    critic trained under FSDP's parameter offload copies its own shards in its values pass the same way; that pass
    keeps its shards on the GPU here."""
    from trainfit.compute.offload import host_copy_bytes_per_s
    from trainfit.methods.roles import train_nodes
    from trainfit.plan.time import torch_fsdp_cpu_offload
    from trainfit.units import BYTES_PER_DTYPE

    if not torch_fsdp_cpu_offload(card):
        return 0.0
    shard_bytes = BYTES_PER_DTYPE[card.weights_dtype.value]
    rate = host_copy_bytes_per_s(pcie_bytes_per_s=r.pcie_bytes_per_s, host_memory_bytes_per_s=r.host_memory_bytes_per_s,
                                 gpus_per_node=train_nodes(card)[1])
    return rate * 2.0 / max(shard_bytes, 1e-9)


def packed_span_factor(card: RunCard, spec: ModelSpec, batch: RlBatch, *, eager: bool) -> float:
    """The attention span of an RL pass's packed sequences over their mean length: ``E[len²] / E[len]²`` =
    ``1 + cv²`` (``compute.attention_time.packed_attention_context``), ``cv`` the relative spread of one sequence's
    tokens (``rl_batches.sequence_token_spread``: the card's response lengths, the prompt at its mean), at most the
    longest sequence (prompt_len + response_len) over the mean. The passes run each sequence's attention alone
    (verl's remove-padding flash-attn varlen path, NeMo RL's packed flash-attention and THD rows), so the work is
    ``Σ len_i²``, not ``n · mean²``: the sequences' lengths vary and the quadratic term follows the longer ones.
    1.0 for padded sequences (every one the longest) and eager attention (which plans a whole row).

    Every packed pass takes it, whether the card states the mean response (``rollout.response_len_mean``) or a
    length profile gives it (``rl_common.length_profile``): the spread comes from the same length shape either way
    (``rollout.response_len_shape``), so a gate on the stated mean would pick rows by outcome. Measured
    2026-12-03 against the gated version: the 54 rows without a published mean go from an 18.3 to a 21.6 % median
    (beyond 50 %: 7 -> 7; verl fully-async ReTool Qwen2.5-7B update +75 -> +95 %, log-prob +30 -> +41 %, step +10 ->
    +17 %; verl one-step-off DAPO Qwen2.5-Math-7B updates +28 -> +34 % and +16 -> +21 %; AReaL v0.2 1.5B 8-GPU step +9
    -> +14 %; the under-planned closer: verl fully-async Qwen3-30B-A3B update -45 -> -40 %); every other subset and
    the whole table (10.4 %) unchanged. Those rows' over-plans are not this term's: they stay a miss to explain."""
    from trainfit.compute.attention_time import packed_attention_context
    from trainfit.plan.rl_batches import sequence_token_spread

    if not batch.packed or eager or batch.seq_len <= 0:
        return 1.0
    spread = batch.token_spread or sequence_token_spread(card, spec)
    longest = card.rollout.prompt_len + card.rollout.response_len
    context = packed_attention_context(mean_sample_tokens=batch.seq_len, sample_length_cv=spread / batch.seq_len,
                                       row_tokens=max(longest, batch.seq_len))
    return context / batch.seq_len


def _fsdp_hooked_units(card: RunCard, spec: ModelSpec, *, ranks: int) -> int:
    """FSDP units whose forward hooks run in every log-prob micro-batch (``compute.training.forward_only_time``): one
    per decoder layer and the root (verl wraps the model's ``_no_split_modules``, FSDP1 with ``use_orig_params=False``:
    volcengine/verl verl/utils/fsdp_utils.py get_fsdp_wrap_policy l.64-85, verl/workers/fsdp_workers.py l.274
    @2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1; l.73 and l.196 @b178a3cd56f58b2d502255daba591e92833930a7). None for an
    unsharded model.

    The nemo-rl preset's DTensor policy pays them too. Its ``get_logprobs`` runs the micro-batches inside
    ``unshard_fsdp2_model`` (NVIDIA-NeMo/RL nemo_rl/models/policy/dtensor_policy_worker.py l.77-88 and l.847
    @27d0af945b96c5bf9fa928bf45fd1a6ce016632d, v0.3.1; the same lines at v0.3.0), which calls ``unshard()`` on every
    FSDP module before the loop and ``reshard()`` after it. That does not keep the layers unsharded between
    micro-batches. ``_parallelize_model`` gives each decoder layer ``fully_shard`` with the default
    ``reshard_after_forward=True`` and only the root ``reshard_after_forward=False`` (nemo_rl/models/dtensor/
    parallelize.py l.476-489, same commit). FSDP2 runs every unit's pre-forward hook in every forward; ``unshard`` is a
    no-op only while the group is unsharded. Its post-forward hook calls ``reshard()``, which returns early in FORWARD
    only when ``_reshard_after_forward`` is False (pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch
    2.13.0 wheel, torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py ``unshard`` l.372-376, ``reshard``
    l.499-509, ``pre_forward`` l.540-555, ``post_forward`` l.557-566; ``_fsdp_state.py`` l.290-330 runs them for every
    forward). So the first micro-batch finds the layers gathered, every later one gathers them again, and every
    micro-batch pays the hooks. Keeping them requires ``reshard_after_forward=False``, whose runtime setter
    ``set_reshard_after_forward`` came in pytorch/pytorch pull request #149103, which answers issue #149029 (2025-03-12:
    "Since inference under no_grad consumes less memory, I want to set reshard_after_forward to False to save
    computation time"). NeMo RL v0.3.x does not call it."""
    if card.parallel.strategy not in FSDP_STRATEGIES or ranks <= 1:
        return 0
    return fsdp_units(spec)


def frozen_pass_phases(card: RunCard, spec: ModelSpec, r: DeviceRates, sharding: Sharding, batch: RlBatch, *,
                       train_gpus: int, gpus_per_node: int,
                       critic: ModelSpec | None) -> tuple[list[PhaseTime], list[str]]:
    """The no-grad forwards of one RL step on the ``train_gpus`` training GPUs (``gpus_per_node`` of them on one NVLink
    domain), with their notes: the old policy's log-probs (``methods.roles.old_logprob_pass``), the reference's unless
    the KL coefficient is 0 (and its host swap, ``rl_offload.reference_swap_phase``), the ``critic``'s values, and a
    reward model's scores. Each is ``compute.training.forward_only_time`` over the step's sequences (``batch``) cut into
    balanced micro-batches, verl's dynamic batches or NeMo RL's packed rows (``rl_batches``)."""
    ro = card.rollout
    seqs, seq_len, packed = batch.sequences, batch.seq_len, batch.packed
    prompt, mean = batch.prompt_mean_tokens, batch.response_mean_tokens
    spread, dp_ranks, per_node = batch.token_spread, batch.data_parallel, gpus_per_node
    phases: list[PhaseTime] = []
    notes: list[str] = []

    compile_ = fused_kernels(card)
    # HSDP: the memory's shard group (hsdp_shard_size, else a host's training GPUs), not the NVLink domain
    par = Parallel(strategy=card.parallel.strategy.value, ranks=train_gpus, gpus_per_node=per_node,
                   nic_bytes_per_s=nic_bytes_per_s(card), hsdp_shard=hsdp_shard_of(card, sharding),
                   fsdp2=card.parallel.fsdp2,
                   # PEFT's adapter linears as FSDP1 units of their own: their hooks in every no-grad forward too
                   fsdp_adapter_units=card.resolved_fsdp_adapter_units)
    lp_mbs_max = ro.logprob_micro_batch_size or card.batch.micro_batch_size
    eager = attn.runs_eager(spec.family, card.attention) and spec.num_full_attention_layers > 0
    frozen_w = bf16_engine_weight_bytes(spec)
    # the passes that run the actor's own sharded flat parameters (the old policy's; the reference as the actor with
    # its adapters disabled, or swapped into the actor's parameters) all-gather them in the dtype they are stored in,
    # as the training pass does (plan.time.gathered_weight_bytes_of: nf4 plus the adapters for a QLoRA actor): PEFT's
    # disable_adapter() only flips the LoRA layers' ``_disable_adapters`` flag (peft 0.21.2 from PyPI, read
    # 2026-12-05: peft/peft_model.py ``disable_adapter`` l.1023-1060 calls ``disable_adapter_layers``;
    # peft/tuners/tuners_utils.py ``enable_adapters`` l.2000-2017), so the base Linear4bit weights FSDP gathers are
    # the same packed uint8 shards; a separate frozen model (reference on its GPU or host, critic, reward model) is bf16
    actor_gathered = gathered_weight_bytes_of(card, spec)
    actor_w = actor_gathered.base + actor_gathered.adapter

    cp = card.parallel.context_parallel
    mp = model_parallel_of(card, spec, r, gpus_per_node=per_node)
    fp8 = card.precision.compute.quantized_gemms

    lp_rows = pipeline_packing(card, row_tokens=ro.packed_logprob_row_tokens, sequences=seqs, prompt_tokens=prompt,
                               response_mean_tokens=mean, train_gpus=train_gpus) if packed else None
    if lp_rows is not None:
        notes.append(f"log-prob passes: packed rows of {lp_rows[1]} tokens under pipeline parallel, {lp_rows[0]} per"
                     " data-parallel rank, each padded to the longest (plan.rl_batches.pipeline_packed_rows)")

    # verl dynamic batching (rollout.max_tokens_per_micro_batch / logprob_max_tokens_per_micro_batch): micro-batch
    # counts from the token budget, the largest of the data-parallel ranks (dynamic_micro_batches)
    from trainfit.methods.rl import critic_token_budget, logprob_token_budget

    lp_budget = logprob_token_budget(card)
    lp_nemo = nemo_rl_dynamic_shape(card, sequences=seqs, prompt_tokens=prompt, response_mean_tokens=mean,
                                    data_parallel=dp_ranks, budget_tokens=lp_budget * cp) if (
        lp_budget is not None and packed and lp_rows is None) else None
    if lp_nemo is not None:
        notes.append(f"log-prob passes: NeMo RL dynamic batching, the step's {seqs} sequences sorted by length over"
                     f" {dp_ranks} data-parallel ranks, micro-batches padded to their longest within {lp_budget}"
                     f" tokens: {lp_nemo[0]} a rank, {lp_nemo[1]:.0f} tokens each"
                     " (plan.rl_batches.nemo_rl_dynamic_micro_batches)")
    elif lp_budget is not None and packed:
        notes.append(f"log-prob passes: dynamic batching, packed micro-batches of at most {lp_budget} tokens per GPU;"
                     f" each rank runs the largest count of the {dp_ranks} data-parallel ranks"
                     " (plan.rl_batches.dynamic_micro_batches)")

    def forward_pass(name: str, pspec: ModelSpec, adapter=None, sequences: int = seqs,
                     budget: int | None = lp_budget) -> PhaseTime:
        # ``sequences``: the step's sequences this pass runs (the reward model scores every generated one);
        # ``budget``: its token budget per GPU under dynamic batching (the critic's values pass has its own)
        p_ = card.parallel
        rows = lp_rows if sequences == seqs else pipeline_packing(
            card, row_tokens=ro.packed_logprob_row_tokens, sequences=sequences, prompt_tokens=prompt,
            response_mean_tokens=mean, train_gpus=train_gpus) if packed else None
        shard = rank_spec(pspec, tp=p_.tensor_parallel, pp=p_.pipeline_parallel, ep=p_.expert_parallel,
                          etp=p_.expert_tensor_parallel, first=p_.pipeline_first_stage_layers,
                          last=p_.pipeline_last_stage_layers, layout=p_.pipeline_layout)

        def timed(micro_: int, mbs_: int, rank_seq_: int, context_: float | None, work_cv_: float = 0.0) -> PhaseTime:
            return timed_pass(name, pspec, adapter, shard, micro_, mbs_, rank_seq_, context_, work_cv_)

        rank_seqs = ceil(sequences / train_gpus) * p_.tensor_parallel * p_.pipeline_parallel * cp
        micro, lp_mbs = balanced_micro_batches(rank_seqs, lp_mbs_max)
        rank_seq = max(1, seq_len // cp)
        context = seq_len if cp > 1 else None
        if rows is not None:  # NeMo RL packed rows under pipeline parallel (rl_batches.pipeline_packed_rows)
            micro, lp_mbs, rank_seq = rows[0], 1, max(1, rows[1] // cp)
            context = seq_len  # attention runs per sequence inside the row (THD), the mean sequence's span
        nemo = nemo_rl_dynamic_shape(card, sequences=sequences, prompt_tokens=prompt, response_mean_tokens=mean,
                                     data_parallel=dp_ranks, budget_tokens=budget * cp) if (
            budget is not None and packed and rows is None) else None
        if nemo is not None:
            # NeMo RL's dynamic batching in its log-prob passes: ``get_logprobs`` and ``get_reference_policy_logprobs``
            # call ``shard_by_batch_size(dp_size, batch_size=None, dynamic_batching_args)`` with
            # ``max_tokens_per_microbatch = dynamic_batching.logprob_mb_tokens`` (NVIDIA-NeMo/RL
            # nemo_rl/models/policy/lm_policy.py l.185-207 and l.250-270 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf):
            # the whole step's batch is one chunk, sorted by length, dealt to the shards, and each worker walks
            # ``make_microbatch_iterator_with_dynamic_shapes`` (dtensor_policy_worker.py l.850-851, same commit),
            # micro-batches padded to their longest, as the update's (rl_batches.nemo_rl_dynamic_micro_batches)
            return timed(nemo[0], 1, max(1, round(nemo[1]) // cp), seq_len)
        if budget is not None and packed:
            # verl dynamic batching: the largest rank's micro-batch count, each a packed row of total / count tokens
            counts = dynamic_micro_batches(sequences=rank_seqs, token_mean=seq_len, token_std=spread,
                                           budget_tokens=budget * cp, data_parallel=dp_ranks)
            return _weighted(name, [(pr, timed(k, 1, max(1, round(rank_seqs * seq_len / k) // cp), seq_len))
                                    for k, pr in counts])
        # verl's fixed log-prob micro-batches: ``compute_log_prob`` splits the rank's share in batch order
        # (``batch.split(micro_batch_size)``, volcengine/verl verl/workers/actor/dp_actor.py l.209-214
        # @e0d035cd4a6a5c29835516a58d78710a28e73b18), so each micro-batch is a random draw of lp_mbs packed sequences
        # and the FSDP ranks, gathering every layer together, run at the pace of the one holding the most tokens
        # (update_work_cv, as the update's). Dynamic batching (above) balances the rank's whole share over its
        # micro-batches (rearrange_micro_batches, Karmarkar-Karp), and that share is itself balanced across the ranks
        # by ``_balance_batch`` (trainer.balance_batch True, verl/trainer/config/ppo_trainer.yaml l.210;
        # ray_trainer.py l.849-859 and l.958-959, equal_size=True, @e0d035cd): no spread charged there (other
        # frameworks: none, as update_work_cv). Only where the card states the fixed count
        # (rollout.logprob_micro_batch_size, verl's log_prob_micro_batch_size_per_gpu): a count taken from
        # batch.micro_batch_size may stand for a token budget, which the card cannot tell apart (the lower, 0, taken)
        fixed = ro.logprob_micro_batch_size is not None and packed and rows is None
        work_cv = update_work_cv(card, spec, micro_batch_sequences=lp_mbs) if fixed else 0.0
        return timed(micro, lp_mbs, rank_seq, context, work_cv)

    def timed_pass(name: str, pspec: ModelSpec, adapter, shard, micro: int, lp_mbs: int, rank_seq: int,
                   context: float | None, work_cv: float = 0.0) -> PhaseTime:
        p_ = card.parallel
        # the model-parallel collectives of one micro-batch's forward (forward only: half of forward + backward)
        c = model_parallel_comm_of(shard, mp, tokens=lp_mbs * rank_seq, rates=r, recompute=False) if mp.active \
            else None
        t = forward_only_time(
            shard, rates=r, micro_batch_size=lp_mbs, seq_len=rank_seq, micro_steps=micro,
            # TRL's GRPO: the completion's logits only (logits_to_keep; roles.logit_positions)
            head_positions=logit_positions(card, seq_len=rank_seq),
            adapter=adapter, eager_attention=eager, parallel=par,
            # a reward model loaded in float32 and run without autocast: fp32 GEMMs (roles.reward_model_gemm_dtype_bytes)
            # the other passes in the trained model's compute dtype (plan.time.fp32_model_gemm_dtype_bytes)
            model_dtype_bytes=(reward_model_gemm_dtype_bytes(card) if name == "reward_model"
                               else fp32_model_gemm_dtype_bytes(card)),
            gathered_weight_bytes=actor_w if _runs_actor_weights(card, name) else frozen_w,
            count_scale=count_scale(pspec), memory_factor=COMPILE_MEMORY_FACTOR if compile_ else 1.0,
            kernel_factor=kernel_factor_of(card),
            # each packed sequence attends alone: the span of the varied lengths, not the mean's (packed_span_factor)
            attention_context=(context or rank_seq) * span if span != 1.0 else context,
            # SDPA handed transformers' sliding-window mask past the window, as the training pass of the same card
            # (plan.time.window_masked_sdpa over the row's key span)
            window_mask=window_masked_sdpa(shard, card, seq_len=round(context) if context else rank_seq),
            mask_layers=sdpa_mask_layers(shard, card, seq_len=round(context) if context else rank_seq),
            window_mask_dtype_bytes=compute_dtype_bytes(card),
            # the same expert-parallel routing and dispatch work as the training pass (compute.moe_time)
            expert_parallel=mp.ep, expert_token_shards=expert_token_shards(
                tp=mp.tp, etp=mp.etp, ep=mp.ep, sequence_parallel=mp.sequence_parallel),
            # the busiest EP rank's routed rows under a trained router (compute.moe_time.busiest_rank_load_factor)
            expert_load_factor=mp.ep_load_factor,
            # a model trained in fp8 runs its log-prob forwards in fp8 as well (the same linears)
            fp8=fp8, fp8_weight_cache=fp8 and fp8_weight_cache_of(card),
            # the card's casts, as the training pass takes them (plan.time.training_time): TE's, torchao float8's
            # (compiled or eager) or the block-scaled recipes' own, with their GEMM rate
            fp8_casts=fp8_casts_of(card),
            fp8_layer_share=fp8_layer_share_of(card, pspec),
            # fp8 primary weights: no weight casts (MXFP8's are cast once per step from the bf16 gather)
            fp8_params=fp8 and card.precision.quantized_params and not mxfp8_params_gather_bf16(card),
            packed_flash_syncs=packed_flash_syncs(card), expert_loop=p_.moe_experts.per_expert,
            expert_loop_every=p_.moe_experts is MoeExperts.LOOP_ALL,
            expert_loop_stacked=p_.moe_experts is MoeExperts.LOOP_V5, expert_hit_share=p_.moe_experts_hit,
            zero3_expert_leaf=p_.moe_zero3_leaf, hooked_units=_fsdp_hooked_units(card, pspec, ranks=train_gpus),
            # FSDP2's all-gather copy-out on the compute stream (no copy-in: no gradients), every micro-batch for the
            # resharded layers, NeMo RL's too (_fsdp_hooked_units)
            fsdp2_copies=p_.fsdp2,
            # the fused attention kernel the card states (compute.attention_time; its note is the actor's)
            attention_kernel=attention_kernel_of(card, r, eager=eager, head_dim=kernel_head_dim_of(pspec),
                                                 backward=False)[0],
            # NeMo RL Megatron's packed get_logprobs head (compute.inventory.NEMO_RL_PG_LOSS "megatron_logprob")
            nemo_rl_loss="megatron_logprob" if (nemo_rl_pg_loss_of(card) == "megatron" and packed
                                                and p_.strategy not in FSDP_STRATEGIES) else "",
            loss_sequences=(lp_mbs * (rank_seq * cp / context if context else 1.0)),
            # verl's log-probs from flash-attn's kernel (loss.kernel flash_attn): its bytes, as the update's head
            fused_cross_entropy=card.loss.kernel is LossKernel.FLASH_ATTN,
            # the layers the training pass prices (plan.time.training_time): Megatron-Core's TEGroupedMLP,
            # grouped_gemm's gmm, and no head on a timed pipeline rank that holds none
            megatron_experts=p_.tensor_parallel_impl is TensorParallelImpl.MEGATRON,
            # ... and their router and dispatcher launches as the card states them (compute.moe_time)
            moe_eager_launch=p_.resolved_moe_launch is MoeLaunch.EAGER,
            # ... their dispatcher's and the op fuser's expert work, as the training pass (inventory.step_inventory)
            moe_dispatcher=mp.moe_dispatcher, fused_expert_mlp=mp.fused_expert_mlp,
            # ... whose TE grouped linears loop over their GEMMs in Python (compute.te_host)
            te_layers=p_.tensor_parallel_impl is TensorParallelImpl.MEGATRON,
            expert_streams=p_.moe_experts is MoeExperts.GROUPED_STREAMS,
            expert_padding=p_.moe_experts is MoeExperts.GROUPED_PADDED,
            head=timed_rank_holds_head(pspec, p_.pipeline_parallel, p_.pipeline_layout),
            # verl's old-policy pass (and before verl #1100 the reference's) also takes the entropy of the rank's
            # packed logits (loss.logprob_entropy, compute.inventory.VERL_ENTROPY_COMPILED_BYTES)
            **({"entropy_bytes_per_logit": VERL_ENTROPY_COMPILED_BYTES,
                "entropy_kernels": VERL_ENTROPY_COMPILED_KERNELS} if takes_entropy(card, name) else {}),
            # Megatron-Core's thd RoPE loop and Transformer Engine's a2a thd reorders run in a no-grad forward as in
            # the training pass (plan.time.training_time), counted over the whole row of rank_seq x cp tokens
            rope_loop_samples=rope_loop_samples_of(card, micro_batch_size=lp_mbs, seq_len=rank_seq * cp,
                                                   sequence_tokens=seq_len if packed else None),
            rope_loop_context_parallel=cp, rope_loop_form=thd_rope_loop_of(card),
            a2a_thd_sequences=a2a_thd_sequences_of(card, micro_batch_size=lp_mbs, seq_len=rank_seq * cp),
            # Transformer Engine's ring context-parallel glue runs in its forward, grad or not (compute.cp_ring)
            te_ring_context_parallel=te_ring_context_parallel_of(card, eager=eager),
            # precision.fp8_attention: the fp8 attention kernel and its casts, as the training pass (plan.time)
            attention_fp8=fp8_attention_recipe(card),
            work_cv=work_cv, data_ranks=dp_ranks,
            # verl's FSDP reference lives in pinned host memory (CPUOffload(offload_params=True)): each unit's shard
            # is copied in before its all-gather, every micro-batch (_reference_host_shard_bytes_per_s); so does a
            # policy trained under FSDP's parameter offload in its old log-prob pass and, a LoRA policy with its
            # adapters disabled, in the reference pass (_policy_host_shard_bytes_per_s)
            host_shard_bytes_per_s=(
                _policy_host_shard_bytes_per_s(card, r) if name == "old_logprob"
                or (name == "ref_logprob" and reference_placement(card) is RefPlacement.LORA_DISABLED)
                else _reference_host_shard_bytes_per_s(card, r) if name == "ref_logprob" else 0.0),
            # NeMo RL's DTensor modules cast their outputs to fp32, grad or not (compute.fsdp2_output_cast)
            fsdp2_fp32_outputs=nemo_rl_dtensor(card),
            # the reference of a LoRA policy is the policy under PEFT's disable_adapter() (the only reference pass
            # handed the adapter, RefPlacement.LORA_DISABLED): its LoRA layers run their base layers alone
            adapter_enabled=name != "ref_logprob",
            # the TP collectives the compute stream waits on, priced as the update's forward prices its own (a
            # launch-bound micro-batch's GPU slack absorbs them; compute.training.tensor_parallel_slack_exposed_s),
            # added below: the per-layer gathers hide behind them too (compute.training.data_parallel_window_s)
            tensor_parallel_comm_s=c.tensor_s / 2 if c is not None else 0.0,
            launch_blocking=card.loop.launch_blocking,
        )
        comm = 0.0
        if c is not None:
            # forward only: half of forward + backward; the TP share as forward_only_time exposed it
            comm = micro * (c.total_s - c.tensor_s) / 2 + t.tensor_parallel_s
            comm += pipeline_bubble_micro_steps(pp=mp.pp, virtual_stages=mp.virtual_stages) * t.seconds / micro
        return rl_phase(name, t.seconds + comm, t.bound, gemm=t.gemm_s, attention=t.attention_s,
                        memory_bound=t.memory_s, host_launch=t.host_s, model_parallel=comm)

    adapter = adapter_of(card, spec)
    span = packed_span_factor(card, spec, batch, eager=eager)
    if span != 1.0:
        notes.append(f"packed sequences attend alone: the causal span of their lengths is {span:.2f}x the mean's"
                     " (E[len²] / E[len]², plan.rl_passes.packed_span_factor)")
    if old_logprob_pass(card):
        phases.append(forward_pass("old_logprob", spec, adapter))
    ref = reference_placement(card)
    if ref not in (RefPlacement.NONE, RefPlacement.PRECOMPUTED):  # methods.roles.reference_loaded
        phases.append(forward_pass("ref_logprob", spec, adapter if ref is RefPlacement.LORA_DISABLED else None))
        if ref is RefPlacement.HOST_SWAP:
            phases.append(reference_swap_phase(card, spec, r, train_gpus=train_gpus,
                                               shard_ranks=hsdp_shard_of(card, sharding) or train_gpus))
    cspec = critic
    if cspec is not None:
        # the critic's values pass under its own budget when the card gives one (methods.rl.critic_token_budget:
        # verl's critic.forward_max_token_len_per_gpu, by default its ppo_max_token_len_per_gpu)
        c_values_budget = critic_token_budget(card, values=True)
        if ro.critic_max_tokens_per_micro_batch is not None and packed:
            notes.append(f"critic: dynamic batching under its own budget, packed micro-batches of at most"
                         f" {c_values_budget} tokens per GPU in the values pass and the update"
                         " (rollout.critic_max_tokens_per_micro_batch)")
        phases.append(forward_pass("critic_values", cspec, adapter, budget=c_values_budget))
    rm_id = reward_model(card)
    if rm_id not in (None, "rule", "none"):
        from trainfit.methods.roles import resolve_role_model

        # the reward model's own shape when the card names another model (DeepSpeed-Chat: OPT-350M)
        rm_spec = spec if rm_id == spec.name else resolve_role_model(rm_id, field="roles.reward_model")
        # every generated group is scored, the ones dynamic sampling then drops too (generated_prompts)
        phases.append(forward_pass("reward_model", replace(rm_spec, head_outputs=1),
                                   sequences=generated_prompts(card) * ro.num_generations))
    return phases, notes


def _runs_actor_weights(card: RunCard, name: str) -> bool:
    """Whether the no-grad pass ``name`` runs the actor's own sharded parameters (so gathers them as stored): the
    old policy's log-probs, and the reference's when it is the actor with its adapters disabled or a state swapped
    into the actor's parameters (``RefPlacement.LORA_DISABLED``, ``RefPlacement.HOST_SWAP``)."""
    if name == "old_logprob":
        return True
    return name == "ref_logprob" and reference_placement(card) in (RefPlacement.LORA_DISABLED, RefPlacement.HOST_SWAP)


def fixed_update_micro_batches(card: RunCard, *, packed: bool) -> bool:
    """Whether the card's verl actor update splits each rank's mini-batch into fixed micro-batches of
    ``batch.micro_batch_size`` sequences taken in batch order, so that every micro-batch is its own random draw of
    response lengths and the FSDP ranks, which gather every layer and reduce-scatter the gradients in every
    micro-batch, run it at the pace of the rank holding the most tokens (``rl_batches.update_work_cv`` over one
    micro-batch's sequences, not over the rank's optimizer-step share).

    verl's FSDP ``update_policy`` without ``use_dynamic_bsz`` runs ``mini_batch.split(ppo_micro_batch_size_per_gpu)``
    (volcengine/verl verl/workers/actor/dp_actor.py l.279 @e0d035cd4a6a5c29835516a58d78710a28e73b18; l.265 at
    v0.3.0.post1 @070ed6ac3f6aea13a916556794f34e8f2bde7dde), and the rank's share comes from ``_balance_batch``, which
    balances each rank's whole step (Karmarkar-Karp over the ranks) and hands each partition over in index order
    (``_check_and_sort_partitions``: ``sorted(partition)``, verl/utils/seqlen_balancing.py l.162-175;
    verl/trainer/ppo/ray_trainer.py l.849-860, both @e0d035cd), not its micro-batches by length; with
    ``use_dynamic_bsz`` ``rearrange_micro_batches`` balances them, the share's spread (the caller's default).
    Measured on ``benchmarks/step_times`` (2026-12-05): the three rows it reaches move closer, actor update
    rocm-verl PPO DeepSeek-LLM-7B (MI300X) -34.9 -> -32.5 %, GRPO -22.0 -> -20.9 %, verl PR 5596's Qwen3-8B
    (GB200) -19.3 -> -17.4 %; no subset median moves. verl issue 1208's 0.5B GRPO update (GH200, 40 sequences a
    micro-batch) takes it too and does not move: its plan is launch-bound, the extra tokens stay under the host.

    Taken only where the card states verl's fixed log-prob count (``rollout.logprob_micro_batch_size``: verl's
    ``log_prob_micro_batch_size_per_gpu``, read only when ``log_prob_use_dynamic_bsz`` is false, which interpolates
    the actor's ``use_dynamic_bsz``: verl/trainer/config/ppo_trainer.yaml l.81 @e0d035cd, l.66 @070ed6ac), and no
    update token budget (``rollout.max_tokens_per_micro_batch``): a ``batch.micro_batch_size`` alone may stand for a
    token budget below the longest sequence, which the card cannot tell apart (the lower spread is kept there).
    A log-prob token budget (``rollout.logprob_max_tokens_per_micro_batch``) with no update budget says the same:
    verl's importer writes that card for ``actor.use_dynamic_bsz: false`` with ``log_prob_use_dynamic_bsz: true``,
    whose update micro-batches are the fixed count. Packed sequences only (padded ones are all one length); the
    verl preset, or none as the verl importer writes it (the split and ``_balance_batch`` cited above are verl's)."""
    ro = card.rollout
    stated = ro.logprob_micro_batch_size is not None or ro.logprob_max_tokens_per_micro_batch is not None
    return packed and card.preset in (None, "verl") and ro.max_tokens_per_micro_batch is None and stated


def update_phases(card: RunCard, spec: ModelSpec, r: DeviceRates, batch: RlBatch, *, train_gpus: int,
                  gpus_per_node: int, critic: ModelSpec | None) -> tuple[list[PhaseTime], list[str], tuple[str, ...]]:
    """The actor's update of one RL step and the ``critic``'s (PPO), with their notes and the actor's training-step
    assumptions: ``compute.training`` over the step's sequences (``batch``) in ``rollout.mini_batches`` optimizer steps,
    ``num_iterations`` times; balanced micro-batches, verl's dynamic batches or NeMo RL's packed rows
    (``rl_batches``)."""
    from trainfit.methods.rl import critic_token_budget

    ro = card.rollout
    seqs, seqs_per_gpu, seq_len, packed = batch.sequences, batch.sequences_per_gpu, batch.seq_len, batch.packed
    prompt, mean = batch.prompt_mean_tokens, batch.response_mean_tokens
    spread, dp_ranks, per_node = batch.token_spread, batch.data_parallel, gpus_per_node
    up_budget = ro.max_tokens_per_micro_batch
    cspec = critic
    phases: list[PhaseTime] = []
    notes: list[str] = []

    # updates: the rollout batch in ``mini_batches`` optimizer steps, each of micro-batches
    mbs = card.batch.micro_batch_size
    replica = card.parallel.model_parallel  # GPUs one model replica spans (tp x cp x pp)
    ga, mbs = balanced_micro_batches(ceil(seqs_per_gpu * replica / ro.mini_batches), mbs)
    opt_steps = ro.optimizer_steps_per_rl_step
    work_cv = update_work_cv(card, spec, micro_batch_sequences=mbs if fixed_update_micro_batches(card, packed=packed)
                             else mbs * ga)
    update_len, update_context = seq_len, None
    padded_rows = nemo_rl_dtensor_padded_rows(card)
    rows = pipeline_packing(card, row_tokens=ro.packed_row_tokens, sequences=ceil(seqs / ro.mini_batches),
                            prompt_tokens=prompt, response_mean_tokens=mean, train_gpus=train_gpus,
                            padded_rows=padded_rows) if packed else None
    if rows is not None:  # NeMo RL packed rows under pipeline parallel (rl_batches.pipeline_packed_rows)
        ga, mbs, update_len, update_context = rows[0], 1, rows[1], seq_len
        notes.append(f"update: packed rows of {rows[1]} tokens, {rows[0]} per data-parallel rank, "
                     + ("each padded to the capacity (plan.rl_batches.nemo_rl_dtensor_padded_rows)" if padded_rows else
                        "under pipeline parallel, each padded to the longest (plan.rl_batches.pipeline_packed_rows)"))
    # the update's (count, probability, sequences, row tokens, attention span) shapes: one fixed shape, or verl's
    # dynamic batching (dynamic_micro_batches) over a packed row of the rank's tokens / count
    shapes = [(ga, 1.0, mbs, update_len, update_context)]
    dynamic = up_budget is not None and packed and rows is None
    rank_seqs = ceil(seqs_per_gpu * replica / ro.mini_batches)

    def budget_shapes(budget: int) -> list[tuple[int, float, int, int, int]]:
        counts_ = dynamic_micro_batches(sequences=rank_seqs, token_mean=seq_len, token_std=spread,
                                        budget_tokens=budget * card.parallel.context_parallel,
                                        data_parallel=dp_ranks)
        return [(k, pr, 1, max(1, round(rank_seqs * seq_len / k)), seq_len) for k, pr in counts_]

    critic_shapes = shapes
    nemo = nemo_rl_dynamic_shape(card, sequences=ceil(seqs / ro.mini_batches), prompt_tokens=prompt,
                                 response_mean_tokens=mean, data_parallel=dp_ranks,
                                 budget_tokens=up_budget * card.parallel.context_parallel) if dynamic else None
    if nemo is not None:  # NeMo RL's sorted, padded micro-batches (rl_batches.nemo_rl_dynamic_micro_batches)
        shapes = critic_shapes = [(nemo[0], 1.0, 1, max(1, round(nemo[1])), seq_len)]
        notes.append(f"update: NeMo RL dynamic batching, {ceil(seqs / ro.mini_batches)} sequences an optimizer step"
                     f" sorted by length over {dp_ranks} data-parallel ranks, micro-batches padded to their longest"
                     f" within {up_budget} tokens: {nemo[0]} a rank, {nemo[1]:.0f} tokens each")
    elif dynamic:
        shapes = budget_shapes(up_budget)
        counts = [(k, pr) for k, pr, *_ in shapes]
        critic_shapes = shapes
        if ro.critic_max_tokens_per_micro_batch is not None:  # the critic's own budget (critic_token_budget)
            critic_shapes = budget_shapes(critic_token_budget(card))
        expected = sum(k * pr for k, pr in counts)
        notes.append(f"update: dynamic batching, {rank_seqs} sequence(s) of {seq_len} tokens per data-parallel rank"
                     f" and optimizer step in packed micro-batches of at most {up_budget} tokens per GPU; the largest"
                     f" count of the {dp_ranks} ranks, {expected:.2f} expected ("
                     + ", ".join(f"{k}: {pr:.0%}" for k, pr in counts) + ")")

    eager = attn.runs_eager(spec.family, card.attention) and spec.num_full_attention_layers > 0
    span = packed_span_factor(card, spec, batch, eager=eager)

    def update(name: str, pspec: ModelSpec, shapes_=shapes):
        timed = [(pr, training_time(card, pspec, r, ranks=train_gpus, gpus_per_node=per_node, micro_batch_size=b,
                                    seq_len=length, micro_steps=k, work_cv=work_cv, attention_context=context,
                                    attention_span_factor=span,
                                    # each packed sequence one thd sample of Megatron-Core's RoPE loop
                                    # (rope_loop_samples_of)
                                    packed_sequence_tokens=seq_len if packed else None))
                 for k, pr, b, length, context in shapes_]
        phase = _weighted(name, [(pr, rl_phase(name, t.total_s * opt_steps, t.bound,
                                               **{p.name: p.seconds * opt_steps for p in t.phases}))
                                 for pr, t in timed])
        return phase, max(timed, key=lambda pt: pt[0])[1]

    actor_phase, actor = update("actor_update", spec)
    phases.append(actor_phase)
    if cspec is not None:
        phases.append(update("critic_update", cspec, critic_shapes)[0])
    if not dynamic:
        notes.append(f"{opt_steps} optimizer step(s) per RL step (rollout.mini_batches x num_iterations),"
                     f" {ga} micro-batch(es) of {mbs} sequence(s) each")
    else:
        notes.append(f"{opt_steps} optimizer step(s) per RL step (rollout.mini_batches x num_iterations)")
    return phases, notes, actor.assumptions
