"""Trainer -> rollout engine weight sync, the way the RL frameworks do it.

Every framework starts the same way: each parameter is gathered whole on the trainer ranks (an
all-gather over the FSDP/ZeRO-3 shards, one collective per parameter: ``DTensor.full_tensor()``,
``deepspeed.zero.GatheredParameters``, Megatron's TP/EP gathers), then the engine's
``model.load_weights`` copies each tensor into its own (tensor-parallel) layout. They differ in how
the tensors travel (``SyncMechanism``):

=======================  ===========================================================================
mechanism                path, per sync
=======================  ===========================================================================
colocated_cuda_ipc       same GPUs: the trainer fills a CUDA-IPC bucket (or shares each tensor); the
                         colocated engine rank opens the handle and loads. HBM copies only.
nccl_broadcast           separate GPUs: trainer rank 0 broadcasts buckets (or each tensor) to every
                         engine rank over NVLink / the NIC (NCCL, pipelined: bytes / bus bandwidth).
http                     TRL server mode: one HTTP request per tensor to ``trl vllm-serve``, which runs
                         ``collective_rpc`` and receives the tensor by an NCCL broadcast + barrier.
disk                     write a checkpoint, the engine reloads it (``bytes / disk_bytes_per_s`` twice).
=======================  ===========================================================================

A card that sets ``rollout.weight_sync`` picks the framework's other path where it has one
(``framework_sync_mechanism``): verl's fully-async trainer sends one tensor at a time with its
checkpoint engine off (``per_parameter``) and 4 GiB buckets with it on (``bucketed``); SkyRL's split placement with
``per_parameter`` runs its older per-tensor loop, one awaited engine request per tensor (``_PER_PARAMETER``,
``S_PER_SKYRL_WEIGHT_REQUEST``), which Marin's fork of it still runs.

Seconds::

    gather    = num_tensors · NCCL all-gather of gather_bytes / num_tensors over the s shards   (its tuner:
                collectives.all_gather_seconds; about (s−1)/s · gather_bytes / bus + its latency each)
                (gather_bytes: the shards in the trainer's dtype where the framework casts after the gather)
    transfer  = colocated: (2·W + 2·W/tp) / hbm        (fill the bucket; each engine rank copies its shard)
                broadcast: S / bus + calls · latency + 2·W/tp / hbm   (calls: buckets, or tensors unbucketed)
                           (latency: ``collectives.nccl_broadcast``, tuning.cc's base and per-step latencies over
                           the ring's fill, one step per link, across the communicator's ranks and nodes: the
                           engine ranks and the trainer ranks in the group, ``trainer_group_ranks``)
                           (S = W, or buckets · bucket where every bucket is sent whole: verl's checkpoint
                           engine, its buckets filled in state_dict order, ``packed_bucket_count``)
    bus: NCCL's intra-node rate; across nodes the NICs of the group's GPUs in one node in parallel
         (``collectives.ring_bus_bytes_per_s``)
                disk:      2·W / disk_bytes_per_s + 2·W/tp / hbm
    per_tensor = num_tensors · s_per_tensor + buckets · S_PER_BUCKET

verl on an FSDP1 trainer gathers everything twice (``fsdp1_state_dict_units``): the export's ``module.state_dict()``,
a ``SHARDED_STATE_DICT``, all-gathers each FSDP unit whole before the per-parameter ``full_tensor()`` runs
(``unshard_units``: one more ``gather`` over the same shards and bytes, one collective per unit).

NeMo RL's Megatron backend gathers differently (``megatron_export_gather``): its refit, colocated or NCCL, walks
Megatron-Bridge's ``export_hf_weights``, which gives every training rank every full tensor, one collective after
another per Megatron parameter: a broadcast from the owning pipeline stage to the ``pp`` ranks, an all-gather over
the TP (expert TP) ranks and, per routed expert, all-gathers over the ``ep`` ranks. So each rank receives the
whole model over its PP, TP and EP groups' links; the export of the next bucket runs beside the send of the
current one (``weight_sync_seconds`` ``trainer_gather``). Its DTensor backend gathers with ``full_tensor()``
(``train_shards``). Other frameworks' Megatron backends (verl's) are not read here and keep ``train_shards`` 1.

The host cost per tensor dominates for many-tensor models (MoE experts as separate tensors). Its
defaults are published measurements:

* ``S_PER_TENSOR_BUCKETED`` = 0.3 ms: SkyRL PR #487 (NovaSky-AI/SkyRL), Qwen3-30B-A3B (18,867 tensors)
  Megatron -> vLLM on 8xH100, flattened CUDA-IPC buckets: 6 s, i.e. 0.32 ms per tensor all in; slime's
  weight-sync write-up (Biao He et al., hebiao064.github.io 2025-08-27, SGLang) profiles a 512 MB
  bucket after flattening: IPC open 3 ms, rebuild 5 ms, load_weights 12 ms for ~160 tensors.
* ``S_PER_TENSOR_IPC`` = 2.5 ms: one IPC handle per tensor, the same SkyRL run before flattening
  (48 s / 18,867 tensors); OpenRLHF's colocated path (a handle, an ``all_gather_object`` and a Ray
  call per parameter) is of this kind.
* ``S_PER_TENSOR_RPC`` = 2 ms: one request per tensor (TRL server mode, OpenRLHF's per-parameter Ray
  ``update_weight``): TRL PR #5249 measured 0.6 s for Qwen2-0.5B (290 tensors) before batching.
* ``S_PER_BUCKET`` = 3 ms: one IPC handle open/close or broadcast handshake per bucket (slime, above).
* ``S_PER_TENSOR_SGLANG_LOAD`` = 0.075 ms: SGLang's ``load_weights`` alone, 12 ms for ~160 tensors in the same
  profile: the host cost per tensor of miles' / slime's broadcast path (``MILES_BROADCAST``), which sends each
  tensor by its own async NCCL broadcast inside a bucket, with one Ray call per bucket and no IPC handle.
* ``S_PER_TENSOR_NEMO_RL_PACKED`` = 0.146 ms: NeMo RL's packed NCCL broadcast (its default non-colocated refit and
  the reshard refit's misc path, one producer / consumer pair), whose export and load overlap: NeMo RL PR #2971's
  bf16 / fp8 refits of one layout, 18,624 tensors apart (a near-twin of the one scored fp8 reshard row).

verl's FSDP engines gather before they cast (``FrameworkSync.gathers_trainer_dtype``): ``get_per_tensor_param``
yields ``param.to(device).full_tensor().to(torch.bfloat16)``, so each all-gather moves the sharded parameter in the
trainer's dtype, fp32 for verl's actor (verl-project/verl verl/workers/engine/fsdp/transformer_impl.py lines
972-981 @b9873ee98f5ee513a460a7a41623262ac4a831e9, with its "TODO: cast fp32 to bf16 to reduce weight sync
overhead"): twice the bf16 bytes on the gather's links. The cast and the copy into the bucket that follow are HBM
traffic (not modelled). verl's VeOmni engine does not cast at all (``param_generator``, veomni/transformer_impl.py
lines 614-633, fp32 under its default ``mixed_precision: true``, line 293 and trainer/config/engine/veomni.yaml
line 17, same commit): it gathers and sends fp32; a card does not name the engine, so that is not modelled.

Known gap: verl's checkpoint engine into SGLang (verl-project/verl docs/advance/delta_weight_sync.md, nccl rows,
H100) is 3.2-3.5x slower than this model for the dense Qwen2.5 7B, 32B and 72B rows. Its code path is
@b9873ee98f5ee513a460a7a41623262ac4a831e9,
the measured one. The bytes stay on the GPU: the fp32 gather above, a bf16 cast and a copy into the bucket. Trainer
rank 0 then broadcasts the whole 2 GiB buffer once per bucket (83 buckets for Qwen2.5-72B,
``packed_bucket_count``). Each rollout rank clones every tensor and passes SGLang's ``update_weights_from_tensor``
one CUDA-IPC handle per tensor (sgl-project/sglang python/sglang/srt/weight_sync/utils.py
@105cec05def6b93d68ea396000500c5d16e00a96). The publisher says "23.5 s of the 72B sender's 24 s is
assembly/bucketing, wire_wait only 0.5-1.8 s" (verl-project/verl issue #7060, 2026-07-20). That does not put the
time in the assembly. The sender's per-bucket ``torch.cuda.synchronize()``
(verl/checkpoint_engine/nccl_checkpoint_engine.py line 258) waits for the previous bucket's broadcast as well.
``wait_for_complete`` (the "wire_wait") waits only for the broadcast to be enqueued (lines 92-100). The same
publisher timed the same sync under the one-step-off trainer at 3.36-3.49 s after the staging fix (verl-project/verl
b7ff88e3dcfc649b1bc830e00ed72ef0ac1810b9, #7005, commit message). That run was also 1+1 H100 nodes, Qwen2.5-7B,
offload on, the nccl backend and SGLang; against it this model is -48 %. The stock engine was also timed on a
stated fabric: AWS EFA, an 8-GPU FSDP2 trainer to 8 vLLM GPUs at TP 4, a 27B bf16 model, 2 GiB buckets. It took
3.01 s ± 0.25 over 20 refits, about 18 GB/s end to end with gather and load included (verl-project/verl PR #7263,
2026-08-04). A single sender's broadcast reached ~25 GB/s on one NIC on GH200 (issue #7167, 2026-07-27).

The pipeline as the code runs it (verl-project/verl @b9873ee98f5ee513a460a7a41623262ac4a831e9):

* Sender. Every actor rank walks the export generator, so its all-gathers run; ranks other than 0 drop the tensors
  (nccl_checkpoint_engine.py lines 241-247). Per parameter: the shard's copy to the GPU, ``full_tensor()``, the bf16
  cast (verl/workers/engine_workers.py lines 756-757, fsdp/transformer_impl.py lines 973-981), and on rank 0 a cupy
  copy into the bucket (line 283). At each bucket boundary ``torch.cuda.synchronize()`` (line 258); then the whole
  buffer's broadcast is enqueued from an executor thread (lines 264-271, 80-90). ray.util.collective runs NCCL on
  cupy's null stream, or under ``NCCL_USE_MULTISTREAM`` on streams created blocking
  (``cupy.cuda.Stream(null=False, non_blocking=False)``: ray-project/ray
  python/ray/util/collective/collective_group/cuda_stream.py ``StreamPool._init_once``
  @028f9061168f3036168b6dd9e71e38343da7025f, const.py @02f64ec3a4959c813b4e7a4910d106f43f271a95). Either way it
  synchronises with PyTorch's default stream, where the next bucket's casts, copies and the all-gathers' stream
  waits queue; with offload, the next parameter's pageable copy also blocks the host until that stream drains. So
  bucket k+1's export starts when bucket k's broadcast ends: gather, staging and wire add (``gather_s + staging_s +
  transfer_s``).
* Receiver: the checkpoint-engine worker of each rollout rank, a process beside SGLang's on the same GPU. It
  enqueues the broadcast of bucket j+1 before it yields bucket j (``_receive_weight_chunks`` lines 352-375). The
  SGLang adapter regroups the tensors into 2 GiB batches and posts a batch to ``update_weights_from_tensor`` when
  the next tensor would overflow it (sglang_rollout/utils.py ``get_named_tensor_buckets`` lines 115-121,
  sglang_rollout.py lines 358-364). That is at the first tensor of bucket j+1, while the broadcast of bucket j+2
  runs, and no device synchronisation comes first. The IPC handles carry an event recorded on the worker's stream
  (``CudaIPCSentData``, pytorch/pytorch torch/csrc/CudaIPCTypes.cpp @02ebcd7ff9db3a2d51ebd004b2c85d8f47a0bbd1), so
  SGLang's copies wait for the broadcast in flight; its per-tensor host work (``S_PER_TENSOR_IPC``) does not.
  So the applies run beside later broadcasts: for n buckets the code takes about max(S, A) + 2·min(S, A)/n, with S
  the sender's chain and A the applies (the last two applies follow the last broadcast), not S + A. vLLM's receiver
  is lock-step instead: ``BucketedWeightSender`` synchronises the device and waits for the engine's ack per bucket
  (verl/workers/rollout/vllm_rollout/bucketed_weight_transfer.py lines 130-132 and 157-159), and that
  synchronisation waits for the broadcast in flight.
* The timer. The V1 trainer's ``update_weights`` (verl/trainer/ppo/v1/trainer_separate_async.py lines 126-130) and
  the one-step-off trainer's ``sync_rollout_weights`` (@b7ff88e3dcfc649b1bc830e00ed72ef0ac1810b9
  verl/experimental/separation/ray_trainer.py lines
  640-645) both time ``CheckpointEngineManager.update_weights`` (base.py lines 486-538). Its steps: abort the
  in-flight requests; release the KV cache; prepare the two buffers and a barrier; the transfer; finalize
  (``empty_cache``); resume the KV cache and flush it; resume generation. The KV release and resume are the plan's
  ``sleep_wake`` (SGLang level 1: the KV cache only), counted in every verl checkpoint-engine row through its
  ``timer_scope``; no source prices the other fixed steps, so they are not modelled.

Not modelled yet: the receiver's overlap. This model adds ``per_tensor_s`` after ``transfer_s``. Modelled as the code
runs it, the apply hides under the sender's chain. The dense H100 rows (7B, 32B offload on, 32B offload off, 72B)
would move from -69 / -71 / -69 / -71 % to -81 / -82 / -83 / -80 %, the one-step-off 7B from -48 to -67 %, and
the MoE rows from +59 / -53 % to +48 / -64 %. The missing piece is not the pipeline's structure.

What the dense rows need is two rates of the publisher's cluster. The publisher measured both; neither is a spec.
The publisher's own split says the time is there, not in host work per tensor: a controlled profile of the 7B sync
(one-step-off, one Slurm allocation on one node pair, offload on) times the sender's "gather/pack 1.4-1.9 s ·
broadcast fully overlapped" and the receiver's "wire 1.6-1.8 (15 GB) · full apply 1.2" (verl-project/verl PR #6974,
comment of 2026-07-10, https://github.com/verl-project/verl/pull/6974, read 2026-12-03): the sender's loop waits on
the broadcast at each bucket (``torch.cuda.synchronize()``, above), so its "gather/pack" is the wire's time, as the
72B's "assembly/bucketing" is.
(1) The sender's wire. The 7B receiver's 1.6-1.8 s for eight whole 2 GiB buffers (17.2 GB) is 9.6-10.7 GB/s. The
72B sender's loop moved 178 GB in 23.5 s, 7.6 GB/s for wire and gather together. That is about 80 % of one
100 Gb/s NIC, a quarter of the 400 Gb/s assumed where a card states none (``DEFAULT_INTER_NODE_BYTES_PER_S``).
(2) The offloaded fp32 shard's pageable copy back, against 10 GB/s per GPU here
(``compute.offload.PAGEABLE_STAGING_BYTES_PER_S``):
* the doc's 32B pair, 17.7-18.1 s with offload and 14.2 s without, prices 8.2 GB per GPU at 3.5-3.9 s, 2.1-2.3
  GB/s per GPU;
* its delta column, 11.2-11.9 s against 6.2 s, gives 1.4-1.6 GB/s;
* the 7B's "gen_wait 2.4-2.7s", 3.8 GB, gives 1.4-1.6 GB/s.
Suppose a card stated 100 Gb/s per GPU and the pageable rate were 1.8 GB/s. This model would give 4.80 / 15.51 /
10.96 / 24.23 s for the 7B / 32B / 32B offload off / 72B rows (-17 / -13 / -23 / -16 %; the one-step-off 7B +40 %).
With the receiver overlapped it would give 4.14 / 13.58 / 9.03 / 21.63 s (-28 / -24 / -36 / -25 %; +21 %). So the
code's path with the cluster's two rates accounts for the dense rows. The 7B is timed at 5.5-6.0 s by V1 and at
3.36-3.49 s by one-step-off, through the same eight steps; the two bracket what one sync costs there.
The first rate is the entries' network: the profile's receiver times the wire apart from the producer stall (it
takes each bucket's metadata over ZMQ before it joins the bucket's broadcast, ``BroadcastOperation._run``,
nccl_checkpoint_engine.py lines 80-90), and before #7005 the gather loop over GPU-resident shards takes 0.1-0.25 s
(verl-project/verl issue #7015, 2026-07-10), so the 1.6-1.8 s is the broadcasts. Inverted through
``collectives.NIC_EFFICIENCY``, 17.18 GB in 1.7 s is 101 Gb/s per GPU, set as ``inter_node_gbps_per_gpu`` on this
author's H100 rows (the six V1 rows and #7005's, ``published_rl_times_verl_perf.json`` and
``published_rl_times_weight_sync.json``; the #7005 row is not held out). With it the rows run at -45 / -34 / -23 / -16 %
(one-step-off -8 %, 235B-A22B -25 %, 30B-A3B +74 %). The second rate, the pageable copy, is not applied: no source
states the host.

The MoE rows are something else. Qwen3-30B-A3B's 18,867 tensors at ``S_PER_TENSOR_IPC`` cost 47 s, more than the
32.2 s published. So verl's SGLang path costs at most 1.7 ms a tensor there, all in (2.3 ms from the A800 row's
43.43 s below). The 235B-A22B row (-53 %) needs what its engine, VeOmni, adds beyond the card: fp32 on the wire (no
cast, above; twice the bytes of the wire and the apply) and a whole-shard staging round trip
(``export_staging_seconds``). A card does not name the engine. verl's TorchTitan engine, the other with expert
parallelism, casts to bf16 (verl/workers/engine/torchtitan/transformer_impl.py line 550
@ce195c95ea3aa9a8b89b00bbe669e854a91d23d1).

Known gap, A800 (the same doc's second table, verl-project/verl @040a28659773fd58eac91cc006d255826c6da03a, #7324):
this model is 5-28x too fast on the dense Qwen3-8B rows, and one unstated cross-node rate covers all of them. Here is
what the code sends across the trainer node's boundary on each sync. (1) The fp32 ``full_tensor()`` of every
parameter, when the 16-rank shard group spans two nodes: a ring carries 15/16 of 32.8 GB each way. Nothing crosses
on one node, or under HSDP, whose shard group stays inside a node. (2) FSDP1's unshard of the same bytes
(``fsdp1_state_dict_units``). (3) The broadcast. The TorchTitan engine sends 16.4 GB of bf16, because it casts
after the gather (``get_per_tensor_param``, verl/workers/engine/torchtitan/transformer_impl.py lines 658-671). The
FSDP engine sends 32.8 GB of fp32, because its export has not cast since f66328232 (#7161, 2026-07-27:
``get_per_tensor_param``, verl/workers/engine/fsdp/transformer_impl.py lines 1005-1013, and ``unfuse_moe_params``
@040a2865). A card pinned to verl 0.9 or later (``software.verl``) sends that fp32 (``VERL_UNCAST_EXPORT_SINCE``);
these rows carry no pin. With the fp32 send and the node-local relays their code had (``verl_broadcast_senders``),
the FSDP-engine rows still plan at about -96 / -97 %: the gap is the unstated link. Take away this
model's SGLang apply (1.0 s, 399 tensors), and the 0.2 s gather where it stays inside a node. Count the rest as
wire, and the rows run at:
* 1+1 nodes: 16.4 GB in 9.8 s, 1.7 GB/s;
* 2+2 TorchTitan: 47.1 GB in 33.2 s, 1.4 GB/s;
* FSDP engine on FSDP2: 63.5 GB in 37.6 s, 1.7 GB/s;
* FSDP1: 94.2 GB in 64.2 s, 1.5 GB/s. FSDP1 minus FSDP2, the unshard alone, is 30.7 GB in 26.6 s (1.2 GB/s);
* HSDP x TP2: 16.4 GB in 9.0 s, 1.8 GB/s.
That is 10-15 Gb/s per node. Here the broadcast gets 20 GB/s, from one 200 Gb/s NIC, and the gather gets 160 GB/s,
from eight. The publisher's pods varied: "That batch of nodes was roughly three times faster end to end (55 s per
step against 183 s)" and "a timing only ever describes one session on one set of pods" (verl-project/verl 2d67b0eda and
e8fd0a011, commits of the PR).
What sets that rate, read from the code and the PR's history (verl-project/verl @040a28659773fd58eac91cc006d255826c6da03a):
* Not the sender's one NIC. The TorchTitan rows ran before #7291 (their table is acd8d6012, authored 2026-08-10): one
  sender. The HSDP and FSDP-engine rows were committed after the branch was rebased (2026-08-18) onto a main with
  #7291 (8de5fb446), whose constructor default ``multi_sender=True`` (nccl_checkpoint_engine.py line 142;
  ``engine_kwargs`` {} by default) puts every actor worker of rank 0's node into the broadcast group as a relay
  (``_multi_sender_ranks``, lines 200-219), so the broadcast can leave through eight GPUs' NICs. Both sets run at
  1.4-1.8 GB/s.
* Not the checkpoint engine's communicator (ray.util.collective over cupy's NCCL). FSDP1's unshard is
  torch.distributed's all-gather inside the trainer, and it crosses at 1.2 GB/s.
* Not a host step per bucket. Per 2 GiB bucket the sender does one ZMQ publish of the bucket's metadata and one
  device synchronisation (lines 95-106 and 350-383), about nine times for Qwen3-8B.
* Not a communicator set up inside the timer. The rows are per-step syncs of training runs (the 1+1 row "50 steps
  sustained"; the PR has no benchmark script), timed after the trainer's first sync (``fit`` syncs once before
  its loop, one_step_off_policy/ray_trainer.py l.286). Each sync does rebuild the group's bookkeeping
  (``CheckpointEngineManager.update_weights`` calls ``build_process_group`` every time, base.py l.532: ``prepare``
  allocates the two 2 GiB buffers, cupy's pool on the sender, ``torch.zeros`` on each receiver after the last
  ``finalize`` emptied the cache; ``init_process_group`` opens a ZMQ subscriber and runs one barrier,
  nccl_checkpoint_engine.py l.165-180 and l.279-312), but the NCCL communicator is created only while the group
  is missing (``rebuild_group`` False by default, l.139 and l.297-300; ``finalize`` destroys it only under
  ``rebuild_group``, l.182-193): milliseconds a sync, not the seconds of a cross-node ``ncclCommInitRank``.
What is left is the link between that session's nodes, 1.2-1.8 GB/s per node. The PR does not state it, so the
entries keep the card's default NIC.
The publisher calls the full broadcast "bandwidth-bound" and says the HSDP batch of nodes "was roughly three times
faster end to end (55 s per step against 183 s)" (docs/advance/delta_weight_sync.md at the PR's commit
2d67b0eda20e6c25c157b8386067c0d4d6f0f1fa); the merged doc says "the HSDP and FSDP rows ran on faster nodes"
(@040a2865). Counted as above, those rows cross at 1.8 (HSDP), 1.7 (FSDP2) and 1.5 GB/s (FSDP1): not three times
the TorchTitan rows' 1.4-1.7. On one slow cross-node path HSDP would shorten the step by itself, since its shard
group stays in a node and the trainer's FSDP gathers stop crossing; the faster step does not show a faster link.
One rate, 1.6 GB/s per node, with the 1.0-1.2 s apply and gather above, gives the five dense rows to within 12 %
(+4 / -11 / +5 / -8 / +12 % for 1+1, 2+2 TorchTitan, FSDP2 engine, FSDP1, HSDP). Not applied: it is read off
these rows, and the MoE row below needs a faster link, unless its nccl baseline ran the TorchTitan export before
c0601f353 (authored 98 minutes before the table's acd8d6012), which gathered the experts over the EP group alone
and sent 64 of the 128 per layer: then about 38 GB cross (24 s at that rate) and the rest is 1.9 ms for each of
~9,600 tensors, between the 1.7 and 2.3 ms bounds on SGLang's cost per tensor above.
The 30B-A3B MoE row does not share that rate. At least 124.8 GB cross in 43.43 s, 2.9 GB/s or more: 58.0 GB of fp32
experts exchanged over efsdp=2, 5.8 GB of dense gather and 61.1 GB of bf16 broadcast. It lands at +24 % here
through 47 s of per-tensor SGLang cost (18,867 tensors), not through the fabric. No source states the fabric, so no
term stands in for it.
A card can now state such a node: ``hardware.nic_gbps_per_node`` caps what all of a node's ranks in one collective
send across nodes (``collectives.gpu_nic_bytes_per_s``; the gather's 8 ranks and the broadcast's one sender share
it). The entries leave it unset, since #7324 names no NIC. What the rows would plan at with it set, weight sync
and KV release together, for 100 / 25 / 16 / 13 Gb/s a node:
* 1+1 TorchTitan (fit half): -72 / -25 / +10 / +32 %;
* 2+2 TorchTitan: -83 / -41 / -9 / +11 %;
* FSDP engine, FSDP2: -85 / -47 / -19 / -1 %;
* FSDP engine, FSDP1: -86 / -50 / -23 / -5 %;
* 0.6B on one node: +55 % at every value;
* 30B-A3B (fit half): +56 / +179 / +270 / +329 %.
So one node-wide link of 13-16 Gb/s (the order of NCCL over TCP sockets, NVIDIA/nccl issue #209 above) puts every
dense cross-node row within 32 %. The MoE row then plans 3.7-4.3x its figure, through its 47 s of per-tensor cost and
125 GB crossing. A rate
fitted on the fit half's two cross-node rows (1+1 and 30B-A3B) would have to split them, so it is not set.
The publisher's own words point the same way. The table's commit says the MoE row's smaller speedup is "the payload
growing with parameter count (1513 MB against 415 MB) while the broadcast stays near flat" (acd8d6012, 2026-08-10
21:32 +0800, docs/advance/delta_weight_sync.md). So the full sync moved 3.7x the 8B's model in 1.27x its time
(43.43 against 34.26 s). On one link that fits an export that sent part of the experts. The fix authored at 19:54
the same evening (c0601f353) says the export before it "emitted 32 of 64 experts per layer" at ep=4 efsdp=2, and
was complete only at efsdp=1; the row ran at efsdp=2. Its message names only a debug model as verified. Which code
timed the row is not stated, so the row keeps the full export.
The same field does not fit Marin's Qwen3-235B-A22B step (marin-community/marin issue #8653, 12 H100 nodes, its
fabric unstated). At 25 Gb/s a node its weight sync lands at +1 %, but its log-prob passes plan 11,886 s against
2,197 s and its update 35,951 s against 10,260 s. At 100 Gb/s a node those two land at +37 / -9 %, and the sync
at -73 %. A cap shared by a node's eight FSDP ranks slows the trainer's rings eight times more than the
one-sender broadcast, and this step's published phases do not show that.

The same-session control (the doc's ``delta_sharded`` column). Each row's delta figure pairs with the nccl figure
of its own session: "Speedups are per session [...] compare each only to its own ``nccl`` baseline"
(docs/advance/delta_weight_sync.md l.182-183 @040a2865); for the HSDP row, "they ran back to back on the same
nodes" (2d67b0eda, same file, l.196-197). Both backends go through the same
``CheckpointEngineManager.update_weights`` (verl/checkpoint_engine/base.py l.505-558 @040a2865; the l.486-538 above
are @b9873ee). So both pay the same fixed steps:
the abort, the KV release and resume, the group build and barrier, ``finalize`` and the Ray calls. The sharded delta
engine drives the training engine itself (verl/workers/engine_workers.py l.758-762 @040a2865) and diffs each rank's
own shard: no full gather (#6974). Its wire is the changed pairs, 418.6 MB for Qwen3-8B. Its apply is one in-place
request per flush. So the fixed steps cost at most the delta figure, 2.2-3.4 s. The nccl excess (nccl minus delta)
is the full path: the gather, the broadcast and the per-tensor apply. No model is needed to see where it goes:
* 0.6B, one node: 0.61 - 0.59 = 0.02 s;
* 1+1 TorchTitan: 11.00 - 3.00 = 8.00 s for 16.4 GB of broadcast crossing, 2.05 GB/s;
* 2+2 HSDP x TP2 (gather inside a node): 10.24 - 2.41 = 7.83 s for 16.4 GB, 2.09 GB/s;
* 2+2 TorchTitan: 34.26 - 3.34 = 30.92 s for 30.7 GB of fp32 gather plus 16.4 GB of broadcast, 1.52 GB/s;
* FSDP engine, FSDP2: 38.58 - 2.24 = 36.34 s for 30.7 + 32.8 GB (fp32 on the wire), 1.75 GB/s;
* FSDP engine, FSDP1: 65.22 - 24.86 = 40.36 s for the same 63.5 GB, 1.57 GB/s. Both FSDP1 figures pay the unshard:
  its delta figure minus the FSDP2 delta, 22.62 s for 30.7 GB, is 1.36 GB/s.
Every one of the excesses, in three sessions and on the "faster nodes" too, is 1.4-2.1 GB/s (11-17 Gb/s) per
trainer node for everything that crosses. Taking out this model's 1.0 s SGLang apply gives 1.6-2.4 GB/s. That
is the order of NCCL over TCP sockets, not of an RDMA NIC. NVIDIA/nccl issue #209 (2019-05-12) measured
10.7-18.4 Gb/s on a 100 Gb/s link, against 92 Gb/s for iperf3. No source says which transport or NIC these pods
had, so the card keeps its default NIC. Checked for it (a null result): the PR's description ("A800 80GB, up to 32
GPUs", https://github.com/verl-project/verl/pull/7324), the merge 040a2865 and all 33 of its author's commits in
verl-project/verl (every branch, up to 1dda039b9c6311889a9c9a26040677e1254814f9 of 2026-08-22) set no ``NCCL_IB_*``,
``NCCL_NET``, ``NCCL_SOCKET_IFNAME`` or ``NCCL_IB_DISABLE`` and name no NIC, RDMA, RoCE or InfiniBand; no launch
script of these rows is committed (the doc's one example,
verl/experimental/one_step_off_policy/shell/grpo_0.6b_gsm8k_fsdp2_sglang_delta_sharded_2_6.sh, sets no NCCL
variable). This is a null result for the code path: nothing in the PR's code
explains the rows, and the link explains all of them.

The cost per tensor, from the same control (a null result). In the H100 30B-A3B session, 32.2 - 7.1 = 25.1 s holds
the nccl path's broadcast (6.2 s here at the card's 101 Gb/s), its gather and staging (1.3 s) and the 18,867-tensor
SGLang apply. So the apply costs at most 0.93 ms a tensor, or 1.33 ms with the wire at zero. That assumes the delta
path's in-place apply costs nothing per tensor. The 0.6B row gives at most (0.61 - 0.125 s of KV release and
resume) / 310 = 1.56 ms. Both are below ``S_PER_TENSOR_IPC``'s 2.5 ms, which came from SkyRL PR #487. That PR's
48 s -> 6 s also removed "redundant torch.device() calls", so its 2.5 ms includes SkyRL's own host work. Another
per-tensor IPC path measured 0.58 ms a tensor for the rebuild and ``load_weights``: Qwen3-30B-A3B, 8xH200, vLLM
TP4, 10.9-11.8 s for 115 chunks of ~170 tensors (vllm-project/vime issue #175, 2026-06-07). Suppose verl's SGLang
path took 1.2 ms a tensor instead of 2.5. The 0.6B row would move +55 -> -12 %, H100 30B-A3B +74 -> -2 % and A800
30B-A3B +24 -> -33 %. But V1 7B would move -45 -> -53 %, 235B-A22B -25 -> -44 % and #7005's 7B -8 -> -21 %. At vime's
0.58 ms, 7B / 235B / A800 30B-A3B would land at -57 / -52 / -60 %. Not applied. Both values push rows that are now
within 50 % beyond it, and the dense H100 rows still miss the unmodelled pageable staging (above). The cost per
tensor cannot be set from these rows until that is modelled. The two go together. Take the pageable rate the
publisher measured, 1.8 GB/s per GPU, with 1.2 ms a tensor. Then the rows land at: V1 7B -23 %, 32B -19 / -30 %
(offload on / off), 72B -20 %, 30B-A3B +9 %, 235B-A22B -42 %, #7005's 7B +30 %, A800 0.6B -12 % and A800 30B-A3B
-33 %. Only the five dense A800 rows stay beyond 50 %. The same rate with 2.5 ms leaves 30B-A3B at +85 % and #7005 at
+43 %. With vime's 0.58 ms, 235B-A22B lands at -51 % and A800 30B-A3B at -60 %. (These are what-ifs: the staging rate
was patched for every row, not for these cards alone.) Neither value is applied. The host rate is one publisher's
cluster and no card field carries it. 1.2 ms is read off these rows.
The name walk is not the cost per tensor either. sgl-project/sglang issue #30848 (2026-07-11, by the H100 rows'
publisher) blames "~60 s per full pass on Qwen3-30B-A3B" on SGLang's MoE ``load_weights``, which tests each tensor's
name against the 3E-entry expert mapping. That walk is 3.75 M substring tests per Qwen3-30B-A3B pass, and it took
0.35-0.73 s on this project's CPU, 19-39 us a tensor (benchmarks/sglang_moe_name_scan_cpu.py). That is under 2 % of
the 47 s that ``S_PER_TENSOR_IPC`` prices, so it is not priced apart.

Read and not the gap: VeOmni's offload in the export (verl/workers/engine/veomni/transformer_impl.py lines 626-666
@ce195c95ea3aa9a8b89b00bbe669e854a91d23d1): ``offload_veomni_model_to_cpu`` (``model.cpu()``) runs after
``state_dict()`` and before the generator's ``full_tensor()`` calls, but ``state_dict()`` holds detached DTensors
that keep the GPU storage (``nn.Module._apply`` replaces each parameter's contents in place, by
``torch.utils.swap_tensors(param, param_applied)`` for a traceable wrapper subclass such as DTensor, by
``param.data = param_applied`` otherwise, so a tensor detached from the parameter before stays on the old storage:
pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel, ``torch/nn/modules/module.py``
``Module._apply`` l.930-1036, the swap l.967-993, ``.data`` l.994-996), so the gathers still run on the GPU over
NCCL, not over the CPU group's Gloo.

Read and priced: the SGLang apply's handle payload grows as tensors x tp^2: per batch, TP rank 0 posts ``tp`` copies of a pickled
list holding each tensor's ``tp`` CUDA-IPC handles (sgl-project/sglang python/sglang/srt/weight_sync/utils.py
``update_weights`` @105cec05def6b93d68ea396000500c5d16e00a96; verl base64-encodes each copy into one JSON request,
verl/workers/rollout/sglang_rollout/http_server_engine.py lines 758-788 @040a28659773fd58eac91cc006d255826c6da03a),
and SGLang's scheduler broadcasts each request whole to every TP rank over its CPU group (``Scheduler.recv_requests``:
``broadcast_pyobj(recv_reqs, ..., self.tp_cpu_group)``, sgl-project/sglang python/sglang/srt/managers/scheduler.py
@d51c1c21d1ac07cd5d1de9ead6c99087d8428e79). Its host steps are timed per byte on a CPU and priced apart
(``sglang_tensor_request_seconds``): 18 µs a tensor at TP 2, 0.96 ms at TP 16, 36 s a sync for Qwen3-235B-A22B's
37,000 tensors into one TP-16 engine (its row: -54 % before, -40 % with it; the Gloo broadcast of the request to the
engine's 16 ranks on two nodes is not timed).

Rows outside 2x, read again (2026-12-05; null results, nothing changed). Thirteen of the 74 scored weight-sync rows
are outside 2x. The verl A800 rows, Marin's 235B step and the NeMo RL v0.3 8B refits are covered above and in
``plan.rl_offload.nemo_rl_offload_bytes``; these five checks are new:
* SkyRL colocated on one L4 (Qwen2.5-0.5B, 1.2 s, -79 %). The optimizer trip inside the timer is real. ``optim_step``
  runs after every mini-batch and moves nothing (skyrl-train/skyrl_train/trainer.py l.1079,
  skyrl_train/workers/worker_dispatch.py l.268-274). ``offload_after_step`` only lets ``offload_to_cpu`` move the
  optimizer (skyrl_train/distributed/fsdp_strategy.py l.84-87, l.129-130), and ``prepare_for_weight_sync`` calls it
  inside the timer (worker_dispatch.py l.365-373), all NovaSky-AI/SkyRL @19552d8f3721ba060a891441ca638892de5ce0b8.
  So the state still lies on the GPU when the timer starts, and the row's timer scope stands. The engine sleeps at
  level 2 (skyrl_train/inference_engines/vllm/vllm_engine.py l.447-465; ray_wrapped_inference_engine.py l.101), so
  its two wake-ups re-map the weights and the KV cache and copy nothing, as ``sleep_wake`` plans. About 0.8 s stays
  unpriced: the host steps the entry lists.
* SkyRL PR #334, 8 L40S, 4,688 tensors (-66 %). Per tensor, the loop at f53414abc0f83a74c42ddecbfd68c6dcd8dae5f7
  (skyrl_train/workers/megatron/megatron_worker.py l.369-425) runs three NCCL collectives over the 8 trainer ranks:
  two all-gathers for the handle's ``all_gather_object`` and the ``barrier``'s all-reduce. NCCL's tuner prices them
  at 14 + 14 + 21 us on PCIe (``collectives.nccl_collective_choices``, the PCI hop row). That is 0.05 ms a tensor,
  0.23 s a sync, 1 % of the 22 s gap. The host-device copies inside ``all_gather_object`` are not priced; they would
  need about 100 times that to close the gap.
* NeMo RL's reshard refit (Qwen3-4B and three Qwen3-30B-A3B rows, -62 to -73 %). No communicator is set up inside a
  steady-state refit. The replica sub-communicators are split once per layout signature and cached
  (``_get_replica_subcommunicator``, nemo_rl/weight_sync/xferdtensor_python.py l.378-425
  @7ea279abfbeb698b092856d0dab61e7cf39bc909). A cache hit returns at l.390-391; the device synchronisation and
  ``communicator.split`` run only on a miss (l.410-416). Still unpriced: the vLLM side's ``finalize``, which runs
  ``process_weights_after_loading`` for bf16 as well as fp8 (nemo_rl/models/generation/vllm/vllm_backend.py
  l.610-629, called at l.1171-1190, same commit; vLLM 0.25.1, pyproject.toml l.147-150). What it does to a bf16 MoE
  depends on the MoE backend that vLLM release picks, which was not read.
* Marin's Qwen3-235B-A22B (-94.5 %). The gather is not under-priced. Its 64 FSDP ranks on 8 nodes cross through the
  eight rails in parallel (``collectives.ring_bus_bytes_per_s``): 1.9 s of the plan's 20.8 s. Published, the sync
  takes 363 ms for each of the 1,037 state-dict tensors. At the card's NIC the loop's own steps (gather, request,
  broadcast, barrier) take about 20 ms a tensor. Only the unstated fabric (above) closes the gap.
* slime colocated, vllm-project/vime issue #175 (3.0 s, +102 %). That row times less than the plan prices. The plan
  prices the whole sync, export included (``S_PER_TENSOR_BUCKETED`` is SkyRL's all-in figure). The issue's stages
  are three: the handle build, the engine's rebuild and load, and ``ipc_collect``. In slime's loop the export runs in
  the chunk generator's ``next()``: ``for hf_named_tensors in get_hf_weight_chunks(...)``, l.167 of
  slime/backends/megatron_utils/update_weight/update_weight_from_tensor.py. That is before ``_send_hf_params``
  (l.168) and ``ray.get`` (l.169), THUDM/slime @8a5397e251e62f965a59a5f9c1662fba8544cd84. The export does three
  things: it copies each local weight from the host dict to the GPU, runs the PP / EP broadcasts and the TP gathers,
  and converts to HF (hf_weight_iterator_direct.py l.24-41, l.44-105). The issue names no stage for it. slime's own
  ``update_weights`` timer holds it (actor.py l.605-664), and under ``--colocate`` that timer also re-creates every
  reloadable NCCL group (``reload_process_groups``, l.624; reloadable_process_group.py l.178-187). That timer reads
  21-26 s, against which this plan's 6.06 s is -71 to -77 %. Neither scope puts the row inside 2x. So the +102 % is
  no evidence that the price per tensor is too high. Not changed.

Pure Python: no torch import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from enum import StrEnum
from math import ceil

from trainfit.compute import collectives
from trainfit.compute.collectives import DEFAULT_INTER_NODE_BYTES_PER_S
from trainfit.compute.rates import DeviceRates, group_rates
from trainfit.errors import CardError
from trainfit.spec.enums import LayerKind, Placement, RolloutEngine, WeightSync
from trainfit.spec.model import ModelSpec

S_PER_TENSOR_BUCKETED = 0.3e-3
"""Host seconds per tensor of a flattened CUDA-IPC bucket sync: 6 s / 18,867 tensors (Qwen3-30B-A3B Megatron ->
vLLM, 8 x H100; https://github.com/NovaSky-AI/SkyRL/pull/487; module docstring)."""
S_PER_TENSOR_IPC = 2.5e-3
"""Host seconds per tensor with one IPC handle each: the same run before flattening, 48 s / 18,867 tensors
(https://github.com/NovaSky-AI/SkyRL/pull/487; module docstring: SGLang rows bound it at 1.7-2.3 ms)."""
S_PER_TENSOR_RPC = 2.0e-3
"""Host seconds per tensor with one request each: 0.6 s for Qwen2-0.5B's 290 tensors before batching
(https://github.com/huggingface/trl/pull/5249; module docstring)."""
S_PER_BUCKET = 3e-3
"""Seconds per bucket: one IPC handle open / close or broadcast handshake, "IPC open 3 ms" in slime's profile of a
512 MB bucket (https://hebiao064.github.io/rl-weight-sync, 2025-08-27; module docstring)."""
S_PER_TENSOR_SGLANG_LOAD = 12e-3 / 160
"""SGLang's ``model.load_weights`` per tensor, Qwen3-30B-A3B on H100: 12 ms for the ~160 tensors of one 512 MB
bucket (slime's weight-sync write-up, Biao He et al., hebiao064.github.io/rl-weight-sync 2025-08-27, the profile
after flattening; the same figure as ``S_PER_BUCKET``'s). The host cost per tensor of miles' / slime's broadcast
path into SGLang, which has no IPC handle and no request per tensor (``MILES_BROADCAST``)."""
S_PER_TENSOR_NEMO_RL_PACKED = 0.146e-3
"""Host seconds per tensor of NeMo RL's packed NCCL broadcast (Megatron-Bridge's export task on the training
side, vLLM's ``load_weights`` on the other), the misc path of ``nccl_reshard_seconds``. Read from NeMo RL's
own pair of refits of one layout that differ in tensor count: Qwen3-30B-A3B, EP8 x PP2 -> vLLM TP2 x DP8 on
H100, bf16 1.21-1.52 s and blockwise fp8 3.20-4.30 s (NVIDIA-NeMo/RL pull request #2971,
https://github.com/NVIDIA-NeMo/RL/pull/2971, description of 2026-06-27, "DGX-H100 - xferdtensor_python_impl";
neither is a benchmark row). The fp8 refit carries 18,624 more tensors on the packed path (one ``*_scale_inv``
per fp8 weight, each its own export task and ``load_weights`` entry) and half the bulk bytes. The midpoints
differ by 2.385 s. With no cost per tensor ``nccl_reshard_seconds`` gives the fp8 refit 0.271 s less than the
bf16 one; it gives the published difference at 0.146 ms per tensor (the ranges' extremes: 0.108-0.183 ms;
``benchmarks/nemo_rl_packed_per_tensor.py`` solves for it and prints the PR's other rows). Half of
``S_PER_TENSOR_BUCKETED``, as the code's overlap predicts: that 0.3 ms is a lock-step path (SkyRL's rank 0
awaits each bucket's load before it exports the next), while ``packed_broadcast_producer`` /
``packed_broadcast_consumer`` (nemo_rl/utils/packed_tensor.py @7ea279abfbeb698b092856d0dab61e7cf39bc909, two
buffers) let the trainer export bucket k+1 while vLLM loads bucket k, so a tensor costs the slower side's host
work, not both sides' sum.

Where it applies: every refit through that producer / consumer pair, the reshard refit's misc path and NeMo RL's
default non-colocated refit (``_FRAMEWORKS`` nemo-rl split). The two run the same code at every release the scored
rows cite: the policy worker's ``broadcast_weights_for_collective`` hands its export iterator (Megatron-Bridge's
``export_hf_weights``; the DTensor workers' ``state_dict()`` with ``full_tensor()`` in ``post_iter_func``) to
``packed_broadcast_producer(src=0)``, and vLLM's ``update_weights_from_collective`` runs
``packed_broadcast_consumer`` with ``load_weights`` as ``post_unpack_func`` (NVIDIA-NeMo/RL v0.4.0
c751f811217db7df0d4c94abdeaada6626cfc150: nemo_rl/models/policy/megatron_policy_worker.py l.1988-2003,
dtensor_policy_worker_v2.py l.1727-1753, nemo_rl/models/generation/vllm/vllm_backend.py l.171-209; v0.5.0
6c7089300fded94abfa49bb9cbf9eb357d862461: policy/workers/megatron_policy_worker.py l.2208-2218, vllm_backend.py l.244;
v0.6.0 5fb588932bf835506a8a5bac01de4f8c7ab0a065: policy/workers/megatron_policy_worker.py l.1100-1111,
vllm_backend.py l.329;
aa8bfb2e8b606f9ad5add01b52635edf9ab620f8, the DeepSeek-V3 refit guide's commit: vllm_backend.py l.614;
7ea279abfbeb698b092856d0dab61e7cf39bc909: megatron_policy_worker.py l.2496-2512 for the default refit and
l.2913-2929 ``_broadcast_misc_params_packed`` for the reshard's misc path, the same producer over the same
``_iter_params_with_optional_kv_scales``; vllm_backend.py l.751-765 and l.1193-1208, the same consumer into the
same ``_load_weights``). ``packed_tensor.py`` keeps its two buffers and per-tensor loop from v0.4.0 to 7ea279ab (the
later commits add ``.contiguous()`` per tensor, a device check, and one stream join per call). NeMo RL v0.3 has no
packed path (v0.3.0 b1c86a816c5e2b4ca41ece193624a38dc62e6fdf: dtensor_policy_worker.py
``broadcast_weights_for_collective`` l.1229 broadcasts tensor by tensor); no scored split row runs it. Applied to the
default refit too, it moved NeMo RL's DeepSeek-V3 NCCL refits (checkpoint-engine-refit guide) +2.6 -> -13.2 % (sync)
and +12.1 -> -5.2 % (async) and the non-colocated v0.4-v0.6 GRPO step rows 0-9 points lower (Qwen3-30B-A3B H100
192 GPUs +15.8 -> +7.4 %, DeepSeek-V3 GB200 v0.6 -19.4 -> -26.7 %, v0.5 -12.6 -> -19.6 %); the RL-step median went
13.8 -> 14.2 %, weight sync 23.1 % and the count beyond 50 % unchanged. Kept: the code is one path, so one price.

How much the pair proves: little beyond its own layout. It is a near-twin of the scored fp8 row it moved
(``nemorl-nccl-reshard-refit-qwen3-30b-a3b-fp8-h100-ep8dp2-tp2dp8``, EP8 x DP2 -> TP2 x DP8, +77.9 -> -7.2 %): the
same PR table, model, vLLM layout, tensor counts and scale siblings, only the training pipeline split differs. That
row agreeing is not held-out evidence for the value; neither is the PR's other fp8 row (EP4 x TP2 x PP2, unscored,
-9 %), which shares the model and the tensor counts. No source measures the packed path on another model or on the
default refit.

What the fp8 - bf16 difference may hold beside the cost per tensor (read in NeMo RL @7ea279ab, which pins vLLM 0.25.1,
pyproject.toml l.138-150): (1) vLLM's finalize (``process_weights_after_loading``, patched by NeMo RL:
nemo_rl/models/generation/vllm/quantization/fp8.py ``process_weights_after_loading`` l.750-803 per fp8 linear,
``process_weights_after_loading_moe`` l.996-1053 per MoE layer, called once a refit by the weight-update lifecycle)
is fp8-only, but per module, not per tensor: Qwen3-30B-A3B has 48 MoE layers and 96 fp8 attention linears, 144 calls
against 18,624 extra tensors; its device pass is priced apart, in the fp8 refit only (``nccl_reshard_seconds``
``finalize``), so the value already leaves it out. No source times its host part: at an assumed 0.1-0.2 ms a call
it is 0.015-0.03 s of the 2.385 s, and taking it out would re-derive 0.145-0.144 ms (0.141 ms even at 0.1 s in all),
inside the ranges' 0.108-0.183 ms: not separated.
(2) NeMo RL's fp8 ``load_weights`` wrapper (fp8.py l.476-530) walks every received entry before vLLM's own
``load_weights``: a ``*_scale_inv`` sibling only passes its name checks (``_is_fp8_weight`` caches each name, and a
name ending ``_scale_inv`` is not re-quantized), a few microseconds; that is per tensor and fp8-only, so on a bf16
engine the value may run a few microseconds high. (3) The misc fp8 weights' re-cast on arrival
(``cast_tensor_to_fp8_blockwise``) is priced per byte (``fp8_cast_bytes_per_param``) in the fp8 refit, also outside
the value."""
SGLANG_IPC_HANDLE_BYTES = 404
"""Bytes of one CUDA-IPC handle in the request verl's SGLang rollout posts per bucket (``sglang_tensor_request_seconds``):
PyTorch's CUDA reduction (``rebuild_cuda_tensor`` and its arguments: two 64-byte handles, the ref-counter file name,
shape, stride, dtype, SGLang's device UUID) pickled with ``ForkingPickler``, 398 B alone and 404 B per extra TP rank
inside a ``LocalSerializedTensor`` (benchmarks/sglang_tensor_request_cpu.py: 469 B per tensor at TP 1, 6,531 B at
TP 16)."""
SGLANG_TENSOR_ENTRY_BYTES = 65
"""Bytes per tensor of one request copy beside its handles: the name and the ``LocalSerializedTensor`` wrapper (the
same measurement's intercept)."""
S_PER_SGLANG_REQUEST_BYTE = 9e-9
"""Host seconds per byte of the request's ``tp`` copies on the steps that carry all of them, one after another: TP
rank 0's ``tp`` serializations, verl's base64 encoding, aiohttp's ``json.dumps``, the HTTP server's ``json.loads``,
the tokenizer manager's pickle to the scheduler and back, and the scheduler's ``broadcast_pyobj`` host copies.
Measured on this project's CPU host (an Intel Xeon, Python 3.11, standard-library ``base64`` / ``json``):
8.1-8.6 ns/B for a 4.5 MB bucket request (TP 8) and 9.2-9.4 ns/B for 17.8 MB (TP 16) over three runs, 9 ns taken
(benchmarks/sglang_tensor_request_cpu.py); a lower bound: the Gloo, ZMQ and HTTP transfers and FastAPI's validation
are not timed."""
S_PER_SGLANG_OWN_COPY_BYTE = 3.1e-9
"""Host seconds per byte of the one copy each TP rank base64-decodes and unpickles (every rank at once): 3.1 ns/B
(3.0-3.2 at TP 4-16 over three runs), the same measurement."""
FP8_SCALE_SIBLING_BYTES = 4.0
"""Bytes of a ``*_scale_inv`` tensor's collective as trainfit prices it: a few (one fp32 per 128 x 128 block), so
NCCL's latency is all it costs."""
DISK_BYTES_PER_S = 8.2e9
"""A GPU node's local NVMe, sequential (write, then read; one rate for both); a network filesystem is slower: pass
yours. The slowest published 8-GPU node: Azure ND A100 v4 FIO sequential write 8.2 / read 9.3 GB/s at 1 MB
(samuel-bohman/AI-benchmarking-guide ``Azure_Results/ND_A100_v4_results.md``
@26d18e9458bb07bd43e3eda7aec8653aa592f2ec); ND H100 v5 33.9 / 55.3 GB/s (``ND_H100_v5_results.md``
@a6533f14ab325f14a5ff87666ee92436be22881f), ND H200 v5 33.8 / 55.4 (``ND_H200_v5_results.md``
@5e2c4e5581b534ececa93041d7d67168065fc07b). Was 2e9 ("one NVMe SSD", unsourced). No published row syncs through disk:
the step-time benchmark moves no row at 8.2e9."""
S_PER_SKYRL_WEIGHT_REQUEST = (4.4 - 1.6) / (443 - 25)
"""Host seconds of one awaited weight-update request to the engines, per tensor, on SkyRL's per-parameter paths
(6.7 ms). SkyRL's colocated FSDP sync of a 14B model on one 8xH100 node (vLLM TP 2: four engines) took "around
4.4s" with one ``update_named_weight`` request per parameter and 1.6 s once the requests were batched by 1 GB
(NovaSky-AI/SkyRL pull request #161, 2025-08-19, description; merged as d07f293e9899e8c7fca037afb8ca3ddd88cf069b).
Both loops keep the per-parameter gather, IPC handle, ``all_gather_object``, barrier and
``torch.cuda.synchronize()`` (skyrl-train/skyrl_train/workers/fsdp/fsdp_worker.py ``broadcast_to_inference_engines``
l.139-175 at the parent commit, l.144-185 at d07f293; the older loop also cloned each tensor, 30 GB of HBM copies,
about 0.02 s), so the 2.8 s they differ by is the requests the batching removed: one per tensor, 443 for Qwen3-14B
(``hf_tensor_count``), less the 25 that remain (a batch is sent once it exceeds 1 GiB,
``weight_transfer_threshold_cuda_ipc_GB``, l.169-170). The PR names no checkpoint; SkyRL's 14B model then was
Qwen3-14B (SkyRL-Agent-14B-v0, NovaSky-AI's SkyRL-v0 post, 2025-05-06); Qwen2.5-14B's 579 tensors would give
5.1 ms. Each request is a Ray call to every engine, vLLM's ``collective_rpc`` to the engine's workers and a
``model.load_weights`` of that one tensor on each, awaited before the trainer's next parameter."""
GIB = 2**30


class SyncMechanism(StrEnum):
    COLOCATED_CUDA_IPC = "colocated_cuda_ipc"
    NCCL_BROADCAST = "nccl_broadcast"
    HTTP = "http"
    DISK = "disk"


@dataclass(frozen=True, slots=True)
class SyncTime:
    """One weight sync; ``total_s = gather_s + transfer_s + per_tensor_s``."""

    gather_s: float
    """All-gather of the sharded parameters on the trainer (bandwidth + one collective per tensor)."""
    transfer_s: float
    """Bytes moved: HBM copies, the broadcast, or the checkpoint round trip."""
    per_tensor_s: float
    """Host cost: per tensor and per bucket."""
    total_s: float
    assumptions: tuple[str, ...]
    staging_s: float = 0.0
    """The trainer's offloaded parameter shard copied back onto the GPU for the export (``export_staging_seconds``);
    in ``total_s``."""
    merge_s: float = 0.0
    """PEFT's merge and unmerge of the adapter around a sync that sends merged weights (``compute.lora_merge``); in
    ``total_s``."""


@dataclass(frozen=True, slots=True)
class FrameworkSync:
    """How one framework syncs weights for one placement."""

    framework: str
    placement: Placement
    mechanism: SyncMechanism
    bucket_bytes: float | None
    """Bytes per bucket; None: one tensor at a time."""
    s_per_tensor: float
    reason: str
    trainer_ranks_in_group: bool
    """Every trainer rank joins the sync group (NeMo RL's split refit, verl's fully-async paths: actor ranks +
    rollout ranks), so a broadcast leaves the trainer's node through all its GPUs' NICs; else trainer rank 0 alone
    sends (verl's checkpoint engine, OpenRLHF, TRL)."""
    source: str
    """repository, path and commit read."""
    broadcasts_whole_bucket: bool = False
    """Every broadcast sends the whole bucket buffer, however full (verl's checkpoint engine before
    verl-project/verl 1ddf0713e, #7107 of 2026-08-10: ``BroadcastOperation(bucket=send_buf)``,
    verl/checkpoint_engine/nccl_checkpoint_engine.py lines 257 and 289 @b178a3cd56f58b2d502255daba591e92833930a7,
    lines 267 and 294 @b9873ee98f5ee513a460a7a41623262ac4a831e9), the buffer filled greedily in ``state_dict`` order
    (``packed_bucket_count``)."""
    gathers_trainer_dtype: bool = False
    """The all-gather moves the sharded parameters in the trainer's dtype and the cast to the engine's dtype follows
    it (verl's FSDP engine: ``full_tensor()`` then ``.to(torch.bfloat16)``; module docstring; NeMo RL's DTensor
    policy the same, its shards fp32: ``full_tensor = tensor.full_tensor()`` then ``full_tensor.to(self.dtype)``,
    nemo_rl/models/policy/dtensor_policy_worker.py ``get_weights_ipc_handles`` l.1202-1209
    @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, v0.3.0; ``dtensor_params_generator``: ``tensor.full_tensor()`` then
    ``.to(target_dtype)``, nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py l.104-115
    @7ea279abfbeb698b092856d0dab61e7cf39bc909);
    else the gather is counted in the dtype sent."""

    sglang_tensor_requests: bool = False
    """The engine receives each bucket through SGLang's ``update_weights_from_tensor`` request as verl posts it:
    ``tp`` copies of ``tp`` CUDA-IPC handles per tensor (``sglang_tensor_request_seconds``)."""
    sends_trainer_state_dict: bool = False
    """The export walks the trainer module's own ``state_dict()``, one tensor per entry, with no renaming to the
    checkpoint's layout: MarinSkyRL's ``FSDPWeightExtractor.extract_weights`` simple path (``params =
    self.model.state_dict()``, then one ``WeightChunk`` per ``params.items()``; the per-expert remap
    ``_extract_weights_streamed`` / ``_remap_grouped_state_dict`` runs only under ``moe_grouped_gemm``, default false,
    skyrl-train/skyrl_train/config/ppo_base_config.yaml l.98), skyrl-train/skyrl_train/workers/fsdp/fsdp_worker.py
    l.91-152 @a559688ccdfe65e44d9f13ddaaccb57aa8a3b0b9. So its tensors are the trainer's parameters
    (``trainer_tensor_count``), not the checkpoint's."""

    @property
    def unshards_fsdp1_state_dict(self) -> bool:
        """The export starts with ``module.state_dict()``, which on an FSDP1 trainer of more than one rank is a
        ``SHARDED_STATE_DICT`` that all-gathers every FSDP unit whole before the per-parameter ``full_tensor()``
        gathers again (verl: ``fsdp1_state_dict_units``, ``weight_sync_seconds`` ``unshard_units``). The same export
        as ``gathers_trainer_dtype`` (verl's ``get_per_tensor_param``: ``state_dict()``, then ``full_tensor()``, then
        the cast), so derived from it; verl's only (NeMo RL's DTensor policy is FSDP2)."""
        return self.gathers_trainer_dtype and self.framework == "verl"


def weight_sync_seconds(
    *,
    mechanism: SyncMechanism | str,
    weight_bytes: float,
    num_tensors: int,
    train_shards: int,
    tp: int,
    rates: DeviceRates,
    engines: int = 1,
    inter_node: bool = False,
    gpus_per_node: int | None = None,
    nic_bytes_per_s: float = DEFAULT_INTER_NODE_BYTES_PER_S,
    bucket_bytes: float | None = 2 * GIB,
    s_per_tensor: float | None = None,
    gather_s_per_tensor: float | None = None,
    disk_bytes_per_s: float = DISK_BYTES_PER_S,
    sender_node_ranks: int = 1,
    receiver_cast_params: float = 0.0,
    receiver_cast_bytes_per_param: float = 0.0,
    trainer_gather: ExportGather | None = None,
    gather_bytes: float | None = None,
    tensor_bytes: Sequence[float] | None = None,
    whole_bucket: bool = False,
    export_staging_s: float = 0.0,
    unshard_units: int = 0,
    trainer_group_ranks: int = 1,
    request_s: float = 0.0,
    inner_shards: int = 1,
) -> SyncTime:
    """Seconds of one trainer -> engine weight update (module docstring).

    ``weight_bytes``: the whole model in the dtype sent; ``gather_bytes``: in the dtype the trainer's all-gather
    moves, where it gathers before casting (``FrameworkSync.gathers_trainer_dtype``; None: ``weight_bytes``).
    ``tensor_bytes``: each tensor's bytes in the order sent (``hf_tensor_bytes``): the buckets are then filled
    greedily as verl's checkpoint engine fills them (``packed_bucket_count``), else ``ceil(weight_bytes /
    bucket_bytes)``. ``whole_bucket``: each broadcast sends the whole bucket buffer
    (``FrameworkSync.broadcasts_whole_bucket``), so ``buckets · bucket_bytes`` cross the wire.
    ``export_staging_s``: seconds the trainer spends copying its offloaded parameter shard back to the GPU before it
    can gather (``export_staging_seconds``); the copy of each parameter precedes its gather in the export
    generator, so it adds (``SyncTime.staging_s``).
    ``unshard_units``: FSDP units the export's ``state_dict()`` all-gathers whole before the per-tensor gathers, one
    collective each over the same ``train_shards`` and in the same dtype (``gather_bytes``): FSDP1's
    ``SHARDED_STATE_DICT`` (``fsdp1_state_dict_units``); 0 where the state dict only references the shards (FSDP2).
    ``num_tensors``: parameters sent
    (``hf_tensor_count``). ``train_shards``: ranks a parameter is sharded over (1: replicated).
    ``tp``: the engine's tensor parallelism; ``engines``: engine instances receiving a broadcast.
    ``inter_node``: the broadcast crosses nodes (NIC per GPU ``nic_bytes_per_s``); the gather does
    when ``train_shards > gpus_per_node``. ``bucket_bytes``: None sends one tensor at a time.
    ``s_per_tensor``: host cost per tensor (default by mechanism and bucketing);
    ``gather_s_per_tensor``: per gathered tensor (default one NCCL launch; DeepSpeed ZeRO-3's
    per-parameter gather is ms-scale: SkyRL PR #161 took 4.4 s for a 14B model, 579 tensors).
    ``trainer_group_ranks``: trainer ranks in the broadcast's communicator (``FrameworkSync.trainer_ranks_in_group``:
    every trainer rank, else rank 0 alone): each broadcast's ring runs through them and the engine ranks, and NCCL's
    latency of it (``collectives.nccl_broadcast``: the pipeline fill, one step per link) counts them.
    ``sender_node_ranks``: GPUs of the broadcast group in the sending node; across nodes their NICs
    carry NCCL's channels in parallel (1: the sending rank alone in its node, one NIC).
    ``receiver_cast_params`` / ``receiver_cast_bytes_per_param``: weights every engine rank casts on arrival and the
    HBM bytes each cast moves (an fp8 engine re-quantizes the bf16 it receives, ``rollout.quantization``). A
    bucketed broadcast overlaps it with the next bucket's broadcast (NeMo RL's ``packed_broadcast_consumer`` loads
    each bucket on its own stream, ``NRL_REFIT_NUM_BUFFERS`` 2: ``nemo_rl/utils/packed_tensor.py``
    @9dbd9adc95a10f5946cceb36e1d5b31e2429e470), so the larger of the two counts; other paths add it.
    ``request_s``: host seconds of the engine's weight-update requests beyond the per-tensor cost, in
    ``per_tensor_s`` (verl into SGLang: ``sglang_tensor_request_seconds``).
    ``inner_shards``: of the ``train_shards``, the ranks of the inner mesh dimension of a 2-D DTensor (FSDP2 over
    tensor parallelism: the TP degree); its ``full_tensor()`` gathers that dimension first and the outer one second,
    over the whole tensor (``dtensor_full_tensor_gather_seconds``). 1: one gather over all ``train_shards``.
    ``trainer_gather``: Megatron-Bridge's export on every training rank (``megatron_export_gather``, NeMo RL's
    Megatron refit; ``train_shards`` must then be 1). It runs per tensor while the buckets go out: colocated, the
    trainer's export and bucket fill of bucket k+1 run while the engine loads bucket k (``stream_weights_via_ipc_zmq_impl``
    ping-pong buffers, ``nemo_rl/models/policy/utils.py``); bucketed NCCL, the export of bucket k+1 runs on the
    process group's stream while bucket k is broadcast on its own stream (``packed_broadcast_producer``, two buffers),
    except that the part of the export over the links the broadcast uses (NICs when it crosses nodes, NVLink when it
    does not) shares them and adds. Two stages over ``n`` buckets take ``max(a, b) + min(a, b) / n``. The host cost
    per tensor and bucket runs beside that device work the same way (kernels and collectives are launched
    asynchronously; the producer synchronises once per bucket: ``torch.cuda.current_stream().synchronize()`` before
    each IPC hand-off, ``streams[i].synchronize()`` before reusing a broadcast buffer), so ``per_tensor_s`` is then
    the host time the device work leaves exposed. NeMo RL's measured NCCL refit of DeepSeek-V3 (32 nodes TP1 PP16 EP16
    -> 4 nodes vLLM TP32: 14.2 s async, 15.5 s sync, ``docs/guides/checkpoint-engine-refit.md``
    @aa8bfb2e8b606f9ad5add01b52635edf9ab620f8, the same export path) is below the sum of the two.
    """
    mech = SyncMechanism(mechanism)
    if weight_bytes <= 0 or min(num_tensors, train_shards, tp, engines) < 1:
        raise CardError("weight sync: weight_bytes > 0 and num_tensors, train_shards, tp, engines >= 1")
    if trainer_gather is not None and train_shards > 1:
        raise CardError("weight sync: a Megatron export gather (trainer_gather) with train_shards 1 only")
    if bucket_bytes is not None and bucket_bytes <= 0:
        raise CardError(f"weight sync: bucket_bytes must be > 0 or None, got {bucket_bytes}")
    if gather_bytes is not None and gather_bytes <= 0:
        raise CardError(f"weight sync: gather_bytes must be > 0 or None, got {gather_bytes}")
    if export_staging_s < 0:
        raise CardError(f"weight sync: export_staging_s must be >= 0, got {export_staging_s}")
    if unshard_units < 0:
        raise CardError(f"weight sync: unshard_units must be >= 0, got {unshard_units}")
    if request_s < 0:
        raise CardError(f"weight sync: request_s must be >= 0, got {request_s}")
    gather_kw = {"weight_bytes": weight_bytes if gather_bytes is None else gather_bytes, "shards": train_shards,
                 "rates": rates, "crosses_nodes": bool(gpus_per_node and train_shards > gpus_per_node),
                 "nic_bytes_per_s": nic_bytes_per_s, "gpus_per_node": gpus_per_node}
    if inner_shards < 1 or train_shards % inner_shards:
        raise CardError(f"weight sync: inner_shards {inner_shards} must divide train_shards {train_shards}")
    if inner_shards > 1 and gather_s_per_tensor is None:
        gather = dtensor_full_tensor_gather_seconds(
            gather_bytes=gather_kw["weight_bytes"], num_tensors=num_tensors, outer_shards=train_shards // inner_shards,
            inner_shards=inner_shards, gpus_per_node=gpus_per_node or inner_shards, rates=rates,
            nic_bytes_per_s=nic_bytes_per_s)
    else:
        gather = _gather_seconds(num_tensors=num_tensors, s_per_tensor=gather_s_per_tensor, **gather_kw)
    # FSDP1's SHARDED_STATE_DICT all-gathers each unit's flat parameter before the export walks the tensors; the
    # per-tensor gathers then run over the DTensor chunks it cut (FrameworkSync.unshards_fsdp1_state_dict)
    unshard = _gather_seconds(num_tensors=unshard_units, s_per_tensor=None, **gather_kw) if unshard_units else 0.0
    gather += unshard
    buckets = (0 if bucket_bytes is None or mech is SyncMechanism.DISK else
               packed_bucket_count(tensor_bytes, bucket_bytes=bucket_bytes) if tensor_bytes else
               ceil(weight_bytes / bucket_bytes))
    load = 2 * weight_bytes / tp / rates.hbm_bytes_per_s  # each engine rank copies its shard in
    cast = receiver_cast_params * receiver_cast_bytes_per_param / rates.hbm_bytes_per_s
    if mech is SyncMechanism.COLOCATED_CUDA_IPC:
        transfer = 2 * weight_bytes / rates.hbm_bytes_per_s + load + cast
        how = "HBM copies: bucket fill + each engine rank's shard"
    elif mech is SyncMechanism.DISK:
        transfer = 2 * weight_bytes / disk_bytes_per_s + load + cast
        how = f"checkpoint written and re-read at {disk_bytes_per_s / 1e9:.1f} GB/s"
    else:
        receivers = engines * tp
        bus = collectives.ring_bus_bytes_per_s(rates=rates, crosses_nodes=inter_node, nic_bytes_per_s=nic_bytes_per_s,
                                               local_ranks=sender_node_ranks)
        sent = buckets * bucket_bytes if whole_bucket and buckets and bucket_bytes else weight_bytes
        # NCCL's latency of each broadcast (``collectives.nccl_broadcast``: tuning.cc's base and per-step latencies,
        # one step per link of the ring's fill) over the communicator's ranks and nodes: the trainer ranks in the
        # group (``trainer_group_ranks``) and the engines'
        trainers = max(1, trainer_group_ranks)
        group = receivers + trainers
        if not inter_node:
            nodes = 1
        elif gpus_per_node:
            nodes = ceil(trainers / gpus_per_node) + ceil(receivers / gpus_per_node)
        else:
            nodes = 2
        calls = buckets or num_tensors
        per_call = collectives.nccl_broadcast(
            total_bytes=sent / max(1, calls), ranks=group, nodes=nodes, bus_bytes_per_s=bus,
            intra_link=collectives.IntraLink.of(nvlink=rates.nvlink)).latency_s
        wire = sent / bus
        overlap = bool(buckets) and mech is SyncMechanism.NCCL_BROADCAST
        transfer = (max(wire, cast) if overlap else wire + cast) + (buckets or num_tensors) * per_call + load
        how = f"broadcast from trainer rank 0 to {receivers} engine ranks at {bus / 1e9:.0f} GB/s" + (
            f", {sent / 1e9:.3g} GB: every bucket sent whole" if sent != weight_bytes else "")
    per_tensor = num_tensors * _s_per_tensor(mech, bucket_bytes, s_per_tensor) + buckets * S_PER_BUCKET + request_s
    export_notes: tuple[str, ...] = ()
    if trainer_gather is not None:
        gather = trainer_gather.total_s
        stages = buckets or num_tensors
        # v0.3's lock-step groups were read on the colocated CUDA-IPC refit only (ExportGather.overlaps_send): the
        # device and the host parts take the same path
        lock_step = mech is SyncMechanism.COLOCATED_CUDA_IPC and not trainer_gather.overlaps_send
        if lock_step:
            # NeMo RL v0.3: per group ray.get of the trainers' handles, then ray.get of the engines' loads
            both = gather + 2 * weight_bytes / rates.hbm_bytes_per_s + load + cast
            export_notes = ("lock-step groups: gather and fill, then the engine's load, one group after the other",)
        elif mech is SyncMechanism.COLOCATED_CUDA_IPC:
            trainer_side, engine_side = gather + 2 * weight_bytes / rates.hbm_bytes_per_s, load + cast
            both = max(trainer_side, engine_side) + min(trainer_side, engine_side) / stages
            export_notes = ("the engine loads bucket k while the trainer exports and fills bucket k+1",)
        elif mech is SyncMechanism.NCCL_BROADCAST and buckets:
            send = transfer - load
            shared = trainer_gather.nic_s if inter_node else gather - trainer_gather.nic_s
            free = gather - shared
            both = shared + max(free, send) + min(free, send) / stages + load
            export_notes = ((f"the export of bucket k+1 runs beside the broadcast of bucket k; its {shared:.2f} s"
                             f" over the {'NICs' if inter_node else 'NVLink'} the broadcast uses adds"),)
        else:
            both = gather + transfer
        transfer = both - gather
        # the host walks the tensors (mappings, launches, packing; the engine its loads) while the GPUs run the
        # collectives it launched: CUDA work is asynchronous and both paths synchronise once per bucket
        host = per_tensor
        if not lock_step:
            per_tensor = max(host, both) + min(host, both) / stages - both
            exposed = f"host cost {host:.2f} s per sync runs beside the device work ({both:.2f} s); "
            export_notes = trainer_gather.notes + export_notes + (f"{exposed}{per_tensor:.2f} s exposed",)
        else:
            # v0.3: the host launches a group's collectives and copies ahead of the device (asynchronous), but
            # each group ends in a blocking ray.get, so nothing of one group overlaps the next
            per_tensor = max(host, both) - both
            exposed = f"host cost {host:.2f} s per sync beside its own group's device work ({both:.2f} s); "
            export_notes = trainer_gather.notes + export_notes + (f"{exposed}{per_tensor:.2f} s exposed",)
    notes = (
        f"{mech.value}: {how}",
        f"gather over {train_shards} shard(s), one collective per tensor"
        + (f", {gather_bytes / 1e9:.3g} GB in the trainer's dtype (cast after the gather)" if gather_bytes else "")
        if train_shards > 1 else
        "no gather (replicated weights)" if trainer_gather is None else f"export gather {gather:.2f} s",
        f"{num_tensors} tensors, " + (f"{buckets} bucket(s) of {bucket_bytes / GIB:.2f} GiB" if buckets else "one at a time"),
    ) + ((f"each engine rank casts {receiver_cast_params / 1e9:.3g}B weights on arrival ({cast:.2f} s of HBM"
          " traffic" + (", beside the next bucket's broadcast)" if buckets and mech is SyncMechanism.NCCL_BROADCAST
                        else ")"),) if cast else ()) + export_notes + (
        (f"the offloaded parameter shard copied back to the GPU for the export: {export_staging_s:.2f} s",)
        if export_staging_s else ()) + (
        (f"state_dict() first all-gathers {unshard_units} FSDP1 units whole (SHARDED_STATE_DICT): {unshard:.2f} s",)
        if unshard else ()) + (
        (f"the engine's weight-update requests, tp copies of tp IPC handles per tensor: {request_s:.2f} s",)
        if request_s else ())
    return SyncTime(gather_s=gather, transfer_s=transfer, per_tensor_s=per_tensor,
                    total_s=gather + transfer + per_tensor + export_staging_s, assumptions=notes,
                    staging_s=export_staging_s)


def sglang_tensor_request_seconds(*, num_tensors: int, tp: int) -> float:
    """Host seconds per sync of the requests that hand verl's received weights to an SGLang engine of ``tp`` ranks:
    their bytes grow with ``tp²`` per tensor.

    verl passes each bucket to ``sglang.srt.weight_sync.utils.update_weights`` (verl-project/verl
    verl/workers/rollout/sglang_rollout/sglang_rollout.py lines 358-364 @b9873ee98f5ee513a460a7a41623262ac4a831e9;
    sgl-project/sglang python/sglang/srt/weight_sync/utils.py @105cec05def6b93d68ea396000500c5d16e00a96). Every TP rank
    pickles one CUDA-IPC handle per tensor and ``gather_object`` brings them to TP rank 0, which wraps each tensor's
    ``tp`` handles in a ``LocalSerializedTensor`` and serializes the whole list once per TP rank
    (``MultiprocessingSerializer.serialize(named_tensors) for _ in range(infer_tp_size)``): ``tp`` copies of ``tp``
    handles per tensor. verl base64-encodes every copy into one JSON request (``AsyncHttpServerAdapter
    .update_weights_from_tensor``, verl/workers/rollout/sglang_rollout/http_server_engine.py lines 745-775, same
    commit); SGLang's server parses it, its tokenizer manager pickles it to the scheduler, TP rank 0's scheduler
    broadcasts it whole to every TP rank (``Scheduler.recv_requests``: ``broadcast_pyobj(recv_reqs, ...,
    self.tp_cpu_group)``, python/sglang/srt/managers/scheduler.py @d51c1c21d1ac07cd5d1de9ead6c99087d8428e79), and each
    rank decodes its own copy. The request of bucket j runs before the checkpoint engine worker takes the next one
    (``await sgl_update_weights``), so it adds to the per-tensor host cost (``S_PER_TENSOR_IPC``, which prices the
    handle itself, its opening and the load).

    Priced per byte, as measured on a CPU (``S_PER_SGLANG_REQUEST_BYTE`` over the ``tp`` copies,
    ``S_PER_SGLANG_OWN_COPY_BYTE`` over one): a copy holds ``SGLANG_TENSOR_ENTRY_BYTES + tp ·
    SGLANG_IPC_HANDLE_BYTES`` per tensor. 18 µs a tensor at TP 2, 0.96 ms at TP 16."""
    if num_tensors < 0 or tp < 1:
        raise CardError("weight sync: num_tensors >= 0 and tp >= 1")
    copy_bytes = num_tensors * (SGLANG_TENSOR_ENTRY_BYTES + tp * SGLANG_IPC_HANDLE_BYTES)
    return copy_bytes * (tp * S_PER_SGLANG_REQUEST_BYTE + S_PER_SGLANG_OWN_COPY_BYTE)


def fsdp1_state_dict_units(spec: ModelSpec) -> int:
    """FSDP units the ``state_dict()`` of verl's FSDP1 trainer all-gathers whole before a weight sync's per-tensor
    export: one per decoder layer and the root (embeddings, final norm, head).

    Both verl exports start with ``params = self.module.state_dict()`` and then yield
    ``param.full_tensor()`` per parameter: the engine workers' ``get_per_tensor_param``
    (verl/workers/engine/fsdp/transformer_impl.py lines 920-981, verl-project/verl
    @b9873ee98f5ee513a460a7a41623262ac4a831e9) and the older rollout sharding manager's ``__enter__``
    (volcengine/verl verl/workers/sharding_manager/fsdp_vllm.py lines 75-98
    @8e7780f5ee2021cc06c248b7cf87cf31200a38fd). On FSDP1 with more than one rank verl sets
    ``StateDictType.SHARDED_STATE_DICT`` (transformer_impl.py lines 462-473 @bf48903d93e4618531d3bbae96551a889007dd8b;
    fsdp_vllm.py lines 52-60 @8e7780f5 under the default ``rollout.load_format: dummy_dtensor``, ppo_trainer.yaml line
    83 and fsdp_workers.py line 334), whose pre-hook runs ``_unshard_params`` on every FSDP unit, an all-gather of
    its flat parameter in full precision, and whose post-hook cuts each unsharded parameter back into a ``Shard(0)``
    chunk (pytorch/pytorch torch/distributed/fsdp/_state_dict_utils.py ``_sharded_pre_state_dict_hook`` /
    ``_sharded_post_state_dict_hook`` @22eccc02f3a5a7818f93bc8ff2aaf98eb8d64742): the whole model crosses the
    gather's links twice, once per unit and once per parameter. verl's own delta-sync doc says as much: "FSDP1's
    state-dict export runs through the unshard machinery" (verl-project/verl docs/advance/delta_weight_sync.md
    @040a28659773fd58eac91cc006d255826c6da03a). FSDP2's ``state_dict()`` only collects the DTensor shards (the same
    file, ``get_per_tensor_param``'s comment). verl wraps one unit per ``_no_split_modules`` class, the decoder layer,
    and the root holds the rest (``get_fsdp_wrap_policy``, verl/utils/fsdp_utils.py lines 80-140 @bf48903d)."""
    return spec.num_layers + 1


def export_staging_seconds(*, shard_bytes_per_rank: float, host_copy_bytes_per_s: float) -> float:
    """Seconds one trainer rank takes to copy its offloaded parameter shard from host memory back onto its GPU for a
    weight sync's export, every rank of a node at once (``host_copy_bytes_per_s``: ``compute.offload.host_copy_bytes_per_s``,
    the rate trainfit gives verl's other ``.to(device)`` copies of offloaded state, ``plan.rl_offload``
    ``trainer_state_offload_phase``).

    verl's FSDP engine with ``param_offload`` keeps the parameter shards in host memory between steps
    (``offload_fsdp2_model_to_cpu``: ``model.cpu()``, verl/utils/fsdp_utils.py lines 196-199) and its export
    streams them back one parameter at a time, each copy ahead of that parameter's all-gather:
    ``param.to(device, non_blocking=True).full_tensor()`` (``get_per_tensor_param``,
    verl/workers/engine/fsdp/transformer_impl.py lines 920-981, verl-project/verl
    @b9873ee98f5ee513a460a7a41623262ac4a831e9, the code docs/advance/delta_weight_sync.md's nccl rows ran). A
    copy from pageable memory is synchronous whatever ``non_blocking`` says, so nothing overlaps it. That is the
    FSDP2 path after verl-project/verl #7005 (b7ff88e3dcfc649b1bc830e00ed72ef0ac1810b9): the shard goes to the GPU
    once. FSDP1 and VeOmni still stage the whole shard on the GPU and send it back (``load_fsdp_model_to_gpu`` /
    ``offload_fsdp_model_to_cpu``; ``load_veomni_model_to_gpu`` / ``offload_veomni_model_to_cpu``,
    verl/workers/engine/veomni/utils.py lines 44-68, same commit), twice the bytes; a card does not say which
    engine, so the single trip is a lower bound there."""
    if shard_bytes_per_rank < 0 or host_copy_bytes_per_s <= 0:
        raise CardError("weight sync: shard_bytes_per_rank >= 0 and host_copy_bytes_per_s > 0")
    return shard_bytes_per_rank / host_copy_bytes_per_s


def _s_per_tensor(mech: SyncMechanism, bucket_bytes: float | None, given: float | None) -> float:
    if given is not None:
        return given
    if bucket_bytes is not None:
        return S_PER_TENSOR_BUCKETED
    if mech is SyncMechanism.COLOCATED_CUDA_IPC:
        return S_PER_TENSOR_IPC
    if mech is SyncMechanism.DISK:
        return S_PER_TENSOR_BUCKETED
    return S_PER_TENSOR_RPC


def _gather_seconds(*, weight_bytes, num_tensors, shards, rates, crosses_nodes, nic_bytes_per_s, s_per_tensor,
                    gpus_per_node=None) -> float:
    if shards <= 1:
        return 0.0
    local = min(shards, gpus_per_node or 1)
    bus = collectives.ring_bus_bytes_per_s(rates=rates, crosses_nodes=crosses_nodes, nic_bytes_per_s=nic_bytes_per_s,
                                           local_ranks=local)
    if s_per_tensor is None and num_tensors >= 1:
        # one all-gather per tensor, NCCL's tuner over the nodes the shards span; the cost is affine in the bytes
        # per protocol, so num_tensors gathers of the mean size stand for the tensors
        nodes = collectives.group_nodes(ranks=shards, ranks_per_node=local) if crosses_nodes else 1
        return num_tensors * collectives.all_gather_seconds(
            total_bytes=weight_bytes / num_tensors, ranks=shards, bus_bytes_per_s=bus, nodes=nodes,
            intra_link=collectives.IntraLink.of(nvlink=rates.nvlink))
    wire = collectives.all_gather_wire_seconds(total_bytes=weight_bytes, ranks=shards, bus_bytes_per_s=bus)
    return wire + num_tensors * (s_per_tensor or 0.0)


DTENSOR_STRIDED_GRAPH_PLAN_SINCE = (2, 10)
"""The torch release whose redistribute no longer plans FSDP2's column-parallel parameters greedily. FSDP2 gives a
parameter whose FSDP and TP cuts fall on one dimension (column-parallel linears, the vocab-parallel embedding)
``_StridedShard(0)`` on its FSDP dimension; from 2.10.0 ``DTensorSpec`` decodes that into a shard order in which
the TP cut comes first (``_normalize_placements_into_shard_order``, torch/distributed/tensor/_dtensor_spec.py l.97,
l.102-125), not the default order, and ``_gen_transform_infos_non_cached`` plans any non-default order with its
graph-based search (``has_non_default_order`` -> ``use_graph_based_transform = True``, _redistribute.py l.757-763),
pytorch/pytorch @449b1768410104d3ed79d3bcfe4ba1d65c7f22c0 (the 2.10.0 release; 2.11.0,
@70d99e998b4955e0049d13a98d77ae1b14db1f45, adds ``has_strided_shard`` to the same test). The 2.7.0, 2.7.1 and 2.9.0
releases (@134179474539648ba7dee1317959529fbd0e7f89, @e2d141dbde55c2a4370fac5165b0561b6af4798b,
@0fabc3ba44823f257e70ce397d989c8de5e362c1) have no other planner: every parameter takes the greedy inner-first
order (``dtensor_full_tensor_gather_seconds``). The graph search's choice is not read here, so a card pinned to
2.10 or later (``software.torch``) keeps the one flat gather over all the shards."""


def dtensor_full_tensor_gather_seconds(*, gather_bytes: float, num_tensors: int, outer_shards: int, inner_shards: int,
                                       gpus_per_node: int, rates: DeviceRates,
                                       nic_bytes_per_s: float = DEFAULT_INTER_NODE_BYTES_PER_S) -> float:
    """Seconds of ``full_tensor()`` on every parameter of an FSDP2 x tensor-parallel model: ``num_tensors``
    parameters, ``gather_bytes`` in all, on a 2-D mesh of ``outer_shards`` FSDP ranks by ``inner_shards`` TP ranks.

    FSDP2 builds each parameter of a TP-sharded model on the 2-D mesh ``(dp, tp)``, the FSDP dimension outer
    (``FSDPParam._init_sharded_param``: ``submesh_names = dp_mesh.mesh_dim_names + tp_mesh.mesh_dim_names``,
    placements ``(Shard(0) or _StridedShard(0), tp placement)``, torch/distributed/fsdp/_fully_shard/_fsdp_param.py
    l.285-329), and ``full_tensor()`` is ``redistribute([Replicate()] * mesh.ndim)`` (torch/distributed/tensor/
    _api.py l.544-573), whose plan walks a sharded source's mesh dimensions from the inner one to the outer one
    (``_gen_transform_infos_non_cached``: ``for mesh_dim in reversed(range(len(current_placements)))`` when
    ``src_spec.num_shards > 1``, a target that is not a Shard taken at once, torch/distributed/tensor/
    _redistribute.py l.92-127), all @134179474539648ba7dee1317959529fbd0e7f89 (the torch 2.7.0 release, NeMo RL
    v0.3's pin). So the TP ranks gather first, each the FSDP shard of the tensor, and then the FSDP ranks gather
    the whole tensor: each rank receives ``(outer − 1)/outer`` of every full parameter over the FSDP group's links.
    The mesh fills a node with TP ranks first (``init_device_mesh`` in row-major order, TP innermost: NeMo RL's
    ``(dp, cp, tp)`` mesh, nemo_rl/models/policy/dtensor_policy_worker.py l.264-266
    @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf), so with TP filling the node the FSDP group has one rank per node and
    each rank's own NIC carries the whole model (``_group_bus``); a flat ring over all the ranks would cross at the
    node's NICs together and move only ``1/inner`` of that per NIC. Each all-gather is priced by NCCL's tuner
    (``collectives.all_gather_seconds``) at the mean tensor size. The plan of torch releases before
    ``DTENSOR_STRIDED_GRAPH_PLAN_SINCE``."""
    if min(num_tensors, outer_shards, inner_shards, gpus_per_node) < 1 or gather_bytes < 0:
        raise CardError("weight sync: num_tensors, outer_shards, inner_shards, gpus_per_node >= 1 and gather_bytes >= 0")
    per_tensor = gather_bytes / num_tensors
    link = collectives.IntraLink.of(nvlink=rates.nvlink)
    total = 0.0
    # inner (TP) first: each rank assembles its FSDP shard; then outer (FSDP), the whole tensor
    for ranks, stride, out_bytes in ((inner_shards, 1, per_tensor / outer_shards),
                                     (outer_shards, inner_shards, per_tensor)):
        if ranks <= 1:
            continue
        bus, _, nodes = _group_bus(rates=rates, ranks=ranks, stride=stride, node_gpus=gpus_per_node,
                                   nic_bytes_per_s=nic_bytes_per_s)
        total += collectives.all_gather_seconds(total_bytes=out_bytes, ranks=ranks, bus_bytes_per_s=bus, nodes=nodes,
                                                intra_link=link)
    return num_tensors * total


@dataclass(frozen=True, slots=True)
class ExportGather:
    """Megatron-Bridge's ``export_hf_weights`` on one training rank (``megatron_export_gather``): seconds of its
    collectives by kind, and the part of them that runs over groups crossing nodes (on the NICs)."""

    pp_broadcast_s: float
    tp_gather_s: float
    """TP all-gathers of the dense weights and the expert-TP all-gathers of the experts."""
    ep_gather_s: float
    nic_s: float
    """Of the three, the seconds of collectives whose group crosses nodes (they share the NICs with a refit
    broadcast that crosses nodes too)."""
    collectives: int
    notes: tuple[str, ...]
    overlaps_send: bool = True
    """The export of the next bucket runs beside the send (and the engine's load) of the current one
    (Megatron-Bridge's refit, ``weight_sync_seconds`` ``trainer_gather``). False: NeMo RL v0.3's colocated refit,
    whose buckets go lock-step (``NEMO_RL_V03_GATHER``): gather, hand-off and load one after the other (read on the
    colocated CUDA-IPC path; v0.3's NCCL path is not modelled)."""

    @property
    def total_s(self) -> float:
        return self.pp_broadcast_s + self.tp_gather_s + self.ep_gather_s


def _group_bus(*, rates: DeviceRates, ranks: int, stride: int, node_gpus: int, nic_bytes_per_s: float
               ) -> tuple[float, bool, int]:
    """Bus bandwidth of a group of ``ranks`` GPUs ``stride`` ranks apart in a rank order that fills a node (or
    NVLink domain) of ``node_gpus`` GPUs before the next: inside it NCCL's intra-node rate; across nodes the NICs of
    its members in one node (``collectives.ring_bus_bytes_per_s``). Returns (bus, crosses nodes, nodes spanned: for
    NCCL's latency, ``collectives.group_nodes``). On bridged PCIe cards a group inside a node whose ranks span one
    bridge group (``ranks x stride`` consecutive GPUs) runs on the bridge (``rates.group_rates``)."""
    crosses = ranks > 1 and ranks * stride > node_gpus
    local = max(1, min(ranks, node_gpus // max(1, stride)))
    if not crosses:
        rates = group_rates(rates, ranks=ranks * max(1, stride))
    bus = collectives.ring_bus_bytes_per_s(rates=rates, crosses_nodes=crosses, nic_bytes_per_s=nic_bytes_per_s,
                                           local_ranks=local)
    return bus, crosses, collectives.group_nodes(ranks=ranks, ranks_per_node=local)


def megatron_export_gather(*, spec: ModelSpec, tp: int, pp: int, ep: int, etp: int, world: int, gpus_per_node: int,
                           rates: DeviceRates, nic_bytes_per_s: float = DEFAULT_INTER_NODE_BYTES_PER_S,
                           bytes_per_param: float = 2.0, ffn: bool = True,
                           fp8_scale_siblings: bool = False, v03_gather: bool = False) -> ExportGather:
    """Collectives of one Megatron-Bridge ``export_hf_weights`` on each training rank, as NeMo RL's Megatron refit
    runs it before sending (both paths: ``megatron_policy_worker.py`` ``_iter_params_with_optional_kv_scales``,
    NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470).

    ``stream_weights_megatron_to_hf`` walks the conversion tasks, one per Megatron parameter of the whole model
    (every pipeline stage's names), and every rank yields every full tensor (NVIDIA-NeMo/Megatron-Bridge
    ``src/megatron/bridge/models/conversion/model_bridge.py`` and ``param_mapping.py`` @1e9a459b43aa1f62ca1356e554d2b0196ebdd546,
    the submodule of that NeMo RL commit). Per task, one after the other on the rank's stream:

    * ``broadcast_from_pp_rank``: an NCCL broadcast of the owning stage's local shard to the ``pp`` ranks (the
      tensor spec is cached after the first refit, so no object all-gather);
    * ``gather_from_tp_ranks`` (column / row / gated-MLP / QKV mappings): an all-gather over the ``tp`` ranks, for
      expert weights over the ``etp`` ranks; replicated tensors (norms, router) have none;
    * ``gather_from_ep_ranks`` for a routed expert: an all-gather of the TP-whole tensor over the ``ep`` ranks,
      twice for ``linear_fc1`` (gate, up) and once for ``linear_fc2``. A rank holds ``E/ep`` experts per layer, so
      ``3·E/ep`` expert all-gathers per MoE layer, each returning ``ep`` experts.

    Each collective costs ``collectives.all_gather_seconds`` with NCCL's tuner latency over the nodes its group spans
    (the PP broadcast: ``broadcast_seconds`` with NCCL's tuner latency of a broadcast, as the refit's broadcast) over its
    group's links: Megatron-Core's rank order tp-cp-(ep-)dp-pp puts TP (and expert TP) ranks 1 apart, EP ranks
    ``etp`` apart and PP ranks ``world / pp`` apart (``parallel_state.py``); a group that fits in ``gpus_per_node``
    (pass the NVLink domain on a rack-scale system: ``plan.time.nvlink_gpus_per_node``) runs at the intra-node
    rate, else on its members' NICs (``_group_bus``). Every rank's groups run at once, each GPU on its own NIC.

    Tensor counts are Megatron's: fused q/k/v (MLA: its four or two down/up projections) and gate/up; norms,
    routers and a shared-expert gate replicated; biases left out (they ride with their weights' tasks in
    bytes). MTP modules are counted as dense layers in bytes only.

    ``ffn`` False: the export of NeMo RL's NCCL reshard refit's misc path (``nccl_reshard_seconds``), which walks only
    the conversion tasks whose weights are not the FFN projections (``_misc_conversion_tasks``): no dense MLP tasks, no
    routed-expert tasks and no EP gathers. ``fp8_scale_siblings``: a blockwise-fp8 trainer's export
    (``build_export_fp8_tasks``) pairs every fp8 weight's task with a ``*_scale_inv`` task, and the reshard refit sends
    every scale sibling on the misc path, the experts' too (``_task_is_misc``, megatron_policy_worker.py lines
    2716-2734 @7ea279abfbeb698b092856d0dab61e7cf39bc909): the same collectives per task, of a few bytes each.

    ``v03_gather``: NeMo RL v0.3's own ``gather_params`` instead (``NEMO_RL_V03_GATHER``, before Megatron-Bridge):
    the TP (expert-TP) all-gather first, on the owning stage only, then the PP broadcast of the TP-whole tensor, so
    the broadcast carries ``tp`` times the bytes; one EP all-gather per local expert weight (``fc1``, ``fc2``), not
    three; and the groups run lock-step (``ExportGather.overlaps_send`` False). Every rank walks every key in one
    sorted loop (refit_utils.py l.98-158 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf) and every stage joins each
    key's PP broadcast, which waits on the owning stage's TP all-gather: every key's TP gather is on every rank's
    path, so the TP gathers count the whole model's tensors, as Megatron-Bridge's do."""
    from trainfit.memory.params import param_breakdown, routed_expert_params

    if min(tp, pp, ep, etp, world, gpus_per_node) < 1:
        raise CardError("weight sync: tp, pp, ep, etp, world and gpus_per_node must be >= 1")
    pb = param_breakdown(spec)
    moe = spec.moe
    n = spec.num_layers
    moe_layers = sum(1 for i in range(n) if moe is not None and moe.is_moe_layer(i)) if moe is not None else 0
    linear_attn = sum(1 for i in range(n) if spec.layer_kind(i) is LayerKind.LINEAR_ATTENTION)
    softmax_attn = n - linear_attn
    # qkv fused + proj; MLA: q down/up (or one q), kv down/up, proj, and its q/kv latent norms replicated
    attn_linears = (5 if spec.mla.q_lora_rank else 4) if spec.mla is not None else 2
    latent_norms = (2 if spec.mla.q_lora_rank else 1) if spec.mla is not None else 0
    shared = moe_layers if moe is not None and moe.shared_expert_intermediate_size else 0
    sharded_tasks = (attn_linears * softmax_attn + 2 * linear_attn + 2 * (n - moe_layers) + 2 * shared
                     + 1 + (0 if spec.tie_word_embeddings else 1))
    replicated_tasks = (n * spec.norms_per_layer + (2 if spec.qk_norm else latent_norms) * softmax_attn + moe_layers
                        + (shared if moe is not None and moe.shared_expert_gate else 0) + (1 if spec.final_norm else 0))
    expert_params = float(routed_expert_params(spec))
    sharded_params = float(pb.linear_weights + pb.embedding + pb.lm_head) - expert_params
    replicated_params = float(pb.other + pb.positions)
    local_experts = ceil(moe.num_experts / ep) if moe is not None and moe_layers else 0
    expert_tasks = 2 * local_experts * moe_layers
    # Megatron-Bridge gathers gate and up apart (two for fc1, one for fc2); v0.3 one stacked all-gather per key
    ep_gathers = (2 if v03_gather else 3) * local_experts * moe_layers
    # the weight tasks of fp8 linears: every linear task but the embedding and the head (their scale siblings)
    linear_tasks = sharded_tasks - 1 - (0 if spec.tie_word_embeddings else 1)
    scale_tasks, scale_expert_tasks, scale_ep_gathers = (linear_tasks, expert_tasks, ep_gathers) if fp8_scale_siblings \
        else (0, 0, 0)
    if not ffn:
        sharded_tasks -= 2 * (n - moe_layers)  # the dense MLPs' fc1 and fc2
        sharded_params -= float(sum(g.weight_params for g in reshard_ffn_groups(spec) if not g.routed))
        expert_params, expert_tasks, ep_gathers = 0.0, 0, 0
    kw = {"rates": rates, "node_gpus": gpus_per_node, "nic_bytes_per_s": nic_bytes_per_s}
    pp_bus, pp_x, pp_nodes = _group_bus(ranks=pp, stride=max(1, world // pp), **kw)
    tp_bus, tp_x, tp_nodes = _group_bus(ranks=tp, stride=1, **kw)
    etp_bus, etp_x, etp_nodes = _group_bus(ranks=etp, stride=1, **kw)
    ep_bus, ep_x, ep_nodes = _group_bus(ranks=ep, stride=etp, **kw)

    def gathers(count: int, total_bytes: float, ranks: int, bus: float, nodes: int) -> float:
        # NCCL's tuner per all-gather; the cost is affine in the bytes per protocol: count collectives of the mean
        # size sum to the same seconds
        if count <= 0 or ranks <= 1:
            return 0.0
        return count * collectives.all_gather_seconds(
            total_bytes=total_bytes * bytes_per_param / count, ranks=ranks, bus_bytes_per_s=bus,
            nodes=nodes, intra_link=collectives.IntraLink.of(nvlink=rates.nvlink))

    pp_tasks = sharded_tasks + replicated_tasks + expert_tasks + scale_tasks + scale_expert_tasks
    pp_s = 0.0
    if pp > 1 and pp_tasks > 0:
        # NCCL's tuner per broadcast (``collectives.nccl_broadcast``) over the nodes the PP group spans
        # Megatron-Bridge broadcasts the owning stage's TP shard; v0.3 the TP-whole tensor (gathered before)
        whole = tp if v03_gather else 1
        expert_whole = etp if v03_gather else 1
        mean = (sharded_params * whole / tp + replicated_params + expert_params * expert_whole / (ep * etp)
                ) * bytes_per_param / pp_tasks
        pp_s = pp_tasks * collectives.broadcast_seconds(total_bytes=mean, ranks=pp, bus_bytes_per_s=pp_bus,
                                                        nodes=pp_nodes,
                                                        intra_link=collectives.IntraLink.of(nvlink=rates.nvlink))
    # a scale sibling's collective carries a few bytes (one fp32 per 128 x 128 block): about NCCL's latency alone
    tiny = FP8_SCALE_SIBLING_BYTES / bytes_per_param
    # v0.3 all-gathers over TP on the owning stage only, but the other stages wait for it in the key's PP broadcast
    # (one sorted loop on every rank): every key's TP gather is on every rank's path, as in Megatron-Bridge's export
    tp_dense = (gathers(sharded_tasks, sharded_params, tp, tp_bus, tp_nodes)
                + gathers(scale_tasks, tiny * scale_tasks, tp, tp_bus, tp_nodes))
    tp_expert = (gathers(expert_tasks, expert_params / ep, etp, etp_bus, etp_nodes)
                 + gathers(scale_expert_tasks, tiny * scale_expert_tasks, etp, etp_bus, etp_nodes))
    ep_s = (gathers(ep_gathers, expert_params, ep, ep_bus, ep_nodes)
            + gathers(scale_ep_gathers, tiny * scale_ep_gathers, ep, ep_bus, ep_nodes))
    sharded_tasks += scale_tasks
    expert_tasks += scale_expert_tasks
    ep_gathers += scale_ep_gathers
    nic = (pp_s if pp_x else 0.0) + (tp_dense if tp_x else 0.0) + (tp_expert if etp_x else 0.0) + (ep_s if ep_x else 0.0)
    count = ((pp_tasks if pp > 1 else 0) + (sharded_tasks if tp > 1 else 0)
             + (expert_tasks if etp > 1 else 0) + (ep_gathers if ep > 1 else 0))

    def where(crosses: bool, bus: float) -> str:
        return f"{'across nodes' if crosses else 'NVLink'} at {bus / 1e9:.0f} GB/s"

    parts = []
    if pp > 1:
        parts.append(f"{pp_tasks} PP broadcasts {'of TP-whole tensors ' if v03_gather and tp > 1 else ''}over {pp}"
                     f" ranks ({where(pp_x, pp_bus)}) {pp_s:.2f} s")
    if tp > 1:
        parts.append(f"{sharded_tasks} TP all-gathers over {tp} ({where(tp_x, tp_bus)}) {tp_dense:.2f} s")
    if etp > 1 and expert_tasks:
        parts.append(f"{expert_tasks} expert-TP all-gathers over {etp} ({where(etp_x, etp_bus)})"
                     f" {tp_expert:.2f} s")
    if ep > 1 and ep_gathers:
        parts.append(f"{ep_gathers} EP all-gathers over {ep} ({where(ep_x, ep_bus)}) {ep_s:.2f} s")
    what = "NeMo RL v0.3 gather_params" if v03_gather else "Megatron-Bridge export"
    note = (f"{what}, every training rank receives every tensor: " + "; ".join(parts)) if parts else (
        f"{what}: no model parallelism, no gather")
    return ExportGather(pp_broadcast_s=pp_s, tp_gather_s=tp_dense + tp_expert, ep_gather_s=ep_s, nic_s=nic,
                        collectives=count, notes=(note,), overlaps_send=not v03_gather)


def _sized_tensor_by_tensor(spec: ModelSpec) -> bool:
    """The layouts whose tensors ``hf_tensors`` sizes one by one. Not: MLA and linear attention (the walk
    lists four attention tensors per MLA layer and Qwen3-Next's seven fused Gated DeltaNet tensors, not the
    checkpoint's), a gated attention output, an ungated MLP (listed as three), norms with biases (the bias is
    not listed), learned positions (not listed) and a separate head width."""
    return not (spec.mla is not None or spec.linear_attention is not None or spec.attn_output_gate
                or not spec.mlp_gated or spec.norm_bias or spec.learned_positions
                or spec.head_outputs is not None
                or any(spec.layer_kind(i) is LayerKind.LINEAR_ATTENTION for i in range(spec.num_layers)))


@lru_cache(maxsize=256)
def hf_tensors(spec: ModelSpec, *, fused_experts: bool = False) -> tuple[tuple[str, int | None], ...]:
    """Named parameters of the Hugging Face checkpoint, the tensors a sync sends one by one, as
    ``(name, numel)`` in ``state_dict`` order, the order a sync walks them; ``numel`` None for every tensor
    of a layout not sized tensor by tensor (``_sized_tensor_by_tensor``).

    ``embed_tokens``; per layer q, k, v (each with its bias), o (and its bias), the q/k norms, or the 7 of
    a linear-attention layer (Gated DeltaNet); the MLP (gate, up, down with their biases) or the MoE router,
    each expert's three (``fused_experts``: transformers v5 stacks them in two), a shared expert's three and
    its gate; the layer norms. Then the final norm and an untied head (transformers' Qwen2/Qwen3/Llama
    ``modeling_*.py`` module order).
    """
    sized = _sized_tensor_by_tensor(spec)

    def t(name: str, numel: int) -> tuple[str, int | None]:
        return name, numel if sized else None

    h, hd = spec.hidden_size, spec.head_dim
    q, kv = spec.num_attention_heads * hd, spec.num_kv_heads * hd
    bias = spec.attention_bias
    attn = ([t("q_proj", q * h)] + ([t("q_proj.bias", q)] if bias else [])
            + [t("k_proj", kv * h)] + ([t("k_proj.bias", kv)] if bias else [])
            + [t("v_proj", kv * h)] + ([t("v_proj.bias", kv)] if bias else [])
            + [t("o_proj", h * q)] + ([t("o_proj.bias", h)] if spec.o_proj_bias else [])
            + ([t("q_norm", q if spec.qk_norm_full_width else hd), t("k_norm", kv if spec.qk_norm_full_width else hd)]
               if spec.qk_norm else []))
    if spec.fused_projections or spec.fused_qkv:
        # Phi-3: one qkv_proj tensor (modeling_phi3.py l.205), then o_proj; Qwen (1.0): c_attn.weight, c_attn.bias,
        # then c_proj.weight (``ModelSpec.fused_qkv``)
        attn = ([t("qkv_proj", (q + 2 * kv) * h)] + ([t("qkv_proj.bias", q + 2 * kv)] if bias else [])
                + [t("o_proj", h * q)] + ([t("o_proj.bias", h)] if spec.o_proj_bias else []))
    linear_attn = [(f"linear_attn.{n}", None)
                   for n in ("in_proj_qkvz", "in_proj_ba", "conv1d", "dt_bias", "A_log", "norm", "out_proj")]
    inter = spec.intermediate_size
    dense = ([t("gate_proj", inter * h), t("gate_proj.bias", inter), t("up_proj", inter * h),
              t("up_proj.bias", inter), t("down_proj", h * inter), t("down_proj.bias", h)] if spec.mlp_bias
             else [t("gate_proj", inter * h), t("up_proj", inter * h), t("down_proj", h * inter)])
    if spec.fused_mlp:  # Phi-3 (modeling_phi3.py l.54), GLM-4: one gate_up_proj tensor, then down_proj
        dense = [t("gate_up_proj", 2 * inter * h), *([t("gate_up_proj.bias", 2 * inter)] if spec.mlp_bias else []),
                 t("down_proj", h * inter), *([t("down_proj.bias", h)] if spec.mlp_bias else [])]
    norms = [t(f"norm{k}", h) for k in range(spec.norms_per_layer)]
    out = [t("embed_tokens", spec.vocab_size * h)]
    moe = spec.moe
    for i in range(spec.num_layers):
        out += linear_attn if spec.layer_kind(i) is LayerKind.LINEAR_ATTENTION else attn
        if moe is not None and moe.is_moe_layer(i):
            e, w, shared = moe.num_experts, moe.expert_intermediate_size, moe.shared_expert_intermediate_size
            out.append(t("router", e * h))
            fused = [t("experts.gate_up_proj", e * 2 * w * h), t("experts.down_proj", e * h * w)]
            out += fused if fused_experts else [t("expert.proj", w * h)] * 3 * e
            out += ([t("shared_expert.proj", shared * h)] * 3 + [t("shared_expert_gate", h)]) if shared else []
        else:
            out += dense
        out += norms
    out += [t("norm", h)] + ([] if spec.tie_word_embeddings else [t("lm_head", spec.vocab_size * h)])
    return tuple(out)


def hf_tensor_count(spec: ModelSpec, *, fused_experts: bool = False) -> int:
    """Named parameters of the Hugging Face checkpoint, the tensors a sync sends one by one
    (``hf_tensors``)."""
    return len(hf_tensors(spec, fused_experts=fused_experts))


def trainer_tensor_count(spec: ModelSpec, *, fused_experts: bool) -> int:
    """Entries of a transformers trainer module's ``state_dict()``: the checkpoint's tensors (``hf_tensors``) with each
    MoE layer's routed experts as that module holds them. transformers from 5.0 holds them as two stacked parameters,
    ``experts.gate_up_proj`` ``[E, 2 * moe_intermediate, hidden]`` and ``experts.down_proj`` (``fused_experts``):
    ``Qwen3MoeExperts.__init__``, transformers 5.10.1 wheel (PyPI) models/qwen3_moe/modeling_qwen3_moe.py l.214-224, the
    checkpoint's per-expert tensors merged on load by ``conversion_mapping.py`` (``"qwen3_moe": "qwen2_moe"`` l.56,
    the ``MergeModulelist`` converters l.712-726); transformers < 5 keeps an ``nn.ModuleList`` of per-expert MLPs, the
    checkpoint's layout. Qwen3-235B-A22B (94 MoE layers of 128 experts, untied head): 1,037 fused, 36,945 per
    expert."""
    return hf_tensor_count(spec, fused_experts=fused_experts)


def hf_tensor_bytes(spec: ModelSpec, *, bytes_per_param: float = 2.0) -> tuple[float, ...] | None:
    """Bytes of each tensor ``hf_tensor_count`` counts, in ``state_dict`` order (``hf_tensors``); None for
    the layouts it does not size tensor by tensor (``_sized_tensor_by_tensor``)."""
    sizes = [numel for _, numel in hf_tensors(spec)]
    if any(n is None for n in sizes):
        return None
    return tuple(float(n * bytes_per_param) for n in sizes)


def packed_bucket_count(tensor_bytes: Sequence[float], *, bucket_bytes: float) -> int:
    """Buckets of ``bucket_bytes`` filled greedily with the tensors in order, as verl's checkpoint engine fills them:
    a tensor larger than a bucket is cut into bucket-sized chunks (``split_weight_chunks``,
    verl/checkpoint_engine/base.py), and a chunk that does not fit in what is left closes the bucket
    (``send_weights``: ``if offset + chunk_size > bucket_size``, nccl_checkpoint_engine.py line 257
    @b9873ee98f5ee513a460a7a41623262ac4a831e9). Qwen2.5-72B in bf16 into 2 GiB buckets: 83, the count the
    publisher logged for that sync (verl-project/verl issue #7060, 2026-07-20: "83 buckets, 145 GB")."""
    if bucket_bytes <= 0:
        raise CardError(f"weight sync: bucket_bytes must be > 0, got {bucket_bytes}")
    buckets, filled = 0, bucket_bytes  # no bucket open yet
    for size in tensor_bytes:
        left = float(size)
        while left > 0:
            chunk = min(bucket_bytes, left)
            if filled + chunk > bucket_bytes:
                buckets, filled = buckets + 1, 0.0
            filled += chunk
            left -= chunk
    return buckets


_FRAMEWORKS = {
    ("verl", Placement.COLOCATE): (
        SyncMechanism.COLOCATED_CUDA_IPC, 2048 * 2**20, S_PER_TENSOR_BUCKETED,
        "each parameter gathered (DTensor.full_tensor), packed into a 2 GiB CUDA-IPC bucket sent over ZMQ "
        "to the colocated vLLM worker, which loads it (rollout.checkpoint_engine.update_weights_bucket_megabytes)",
        "volcengine/verl verl/workers/rollout/vllm_rollout/vllm_rollout.py (update_weights), "
        "verl/workers/engine/fsdp/transformer_impl.py (get_per_tensor_param) @b178a3cd56f58b2d502255daba591e92833930a7"),
    ("verl", Placement.SPLIT): (
        SyncMechanism.NCCL_BROADCAST, 2048 * 2**20, S_PER_TENSOR_BUCKETED,
        "checkpoint engine, nccl backend: all-gather on the trainer, then 2 GiB buckets broadcast from trainer "
        "rank 0 to the rollout replicas (the other trainer ranks stay out of the group: build_topology)",
        "volcengine/verl verl/checkpoint_engine/README.md, verl/checkpoint_engine/nccl_checkpoint_engine.py "
        "(send_weights, build_topology lines 152-160) @b178a3cd56f58b2d502255daba591e92833930a7"),
    ("trl", Placement.COLOCATE): (
        SyncMechanism.COLOCATED_CUDA_IPC, None, S_PER_TENSOR_BUCKETED,
        "vLLM runs in the trainer's process: per parameter full_tensor() then "
        "model_runner.model.load_weights([(name, param)]), no IPC handle",
        "huggingface/trl trl/generation/vllm_generation.py (_push_param_to_vllm, sync_weights) "
        "@f2cd57710ae345ea6428ae95363267fcf38a3dc8"),
    ("trl", Placement.SPLIT): (
        SyncMechanism.HTTP, None, S_PER_TENSOR_RPC,
        "server mode: per parameter an HTTP POST /update_named_param/ to trl vllm-serve, then an NCCL broadcast and a barrier",
        "huggingface/trl trl/generation/vllm_client.py (update_named_param), trl/scripts/vllm_serve.py "
        "@f2cd57710ae345ea6428ae95363267fcf38a3dc8"),
    ("openrlhf", Placement.COLOCATE): (
        SyncMechanism.COLOCATED_CUDA_IPC, None, S_PER_TENSOR_IPC,
        "colocate_all: per parameter a clone, a CUDA-IPC handle, all_gather_object of the handles and a Ray call "
        "per engine (update_weight_cuda_ipc)",
        "OpenRLHF/OpenRLHF openrlhf/trainer/ray/ppo_actor.py (broadcast_to_vllm, _handle_cuda_ipc), "
        "openrlhf/trainer/ray/vllm_worker_wrap.py @3c3be6234e0cb353e76bb8019947db9dfe99fca7"),
    ("openrlhf", Placement.SPLIT): (
        SyncMechanism.NCCL_BROADCAST, None, S_PER_TENSOR_RPC,
        "per parameter: gathered (ZeRO-3), a Ray update_weight call per engine, an NCCL broadcast from DeepSpeed rank 0",
        "OpenRLHF/OpenRLHF openrlhf/trainer/ray/ppo_actor.py (_broadcast_param) @3c3be6234e0cb353e76bb8019947db9dfe99fca7"),
    ("nemo-rl", Placement.COLOCATE): (
        SyncMechanism.COLOCATED_CUDA_IPC, 4 * GIB, S_PER_TENSOR_BUCKETED,
        "refit: CUDA-IPC handles streamed over ZMQ in buffers of 30 % of free memory (NRL_REFIT_BUFFER_MEMORY_RATIO; "
        "4 GiB assumed)",
        "NVIDIA-NeMo/RL nemo_rl/algorithms/grpo.py (refit_policy_generation), nemo_rl/models/policy/utils.py "
        "@7ea279abfbeb698b092856d0dab61e7cf39bc909"),
    ("nemo-rl", Placement.SPLIT): (
        SyncMechanism.NCCL_BROADCAST, 1.6 * GIB, S_PER_TENSOR_NEMO_RL_PACKED,
        "refit: packed NCCL broadcast from rank 0, double-buffered, 2 % of GPU memory per buffer (<= 5 GiB; "
        "1.6 GiB on 80 GB), over one group of every training rank and every vLLM rank (training ranks "
        "first, vLLM ranks after them), so the ring leaves the sending node through all its GPUs' NICs",
        "NVIDIA-NeMo/RL nemo_rl/utils/packed_tensor.py (packed_broadcast_producer) @7ea279abfbeb698b092856d0dab61e7cf39bc909; "
        "nemo_rl/models/policy/workers/base_policy_worker.py (init_collective: rank=self.rank, world_size = train + "
        "inference), nemo_rl/models/generation/vllm/vllm_backend.py (init_collective: rank = train_world_size + ...), "
        "nemo_rl/models/policy/workers/megatron_policy_worker.py (broadcast_weights_for_collective, src=0) "
        "@9dbd9adc95a10f5946cceb36e1d5b31e2429e470"),
}

MILES_BROADCAST = (
    "update_weights_from_distributed: one sender per pipeline stage (data-parallel and TP rank 0) broadcasts to "
    "every SGLang rank over its own NCCL group; TP (expert-TP) all-gather per parameter, Megatron -> HF conversion, "
    "512 MiB buckets (non-expert and expert apart; the experts EP-all-gathered per bucket); per bucket a Ray call to "
    "each engine with the names, dtypes and shapes, one async NCCL broadcast per tensor, and SGLang's "
    "model.load_weights on the received tensors before the next bucket (S_PER_TENSOR_SGLANG_LOAD per tensor)",
    "radixark/miles miles/backends/megatron_utils/update_weight/update_weight_from_distributed/broadcast.py "
    "(_is_source l.94-96, connect_rollout_engines_from_distributed l.201-244 world size engine GPUs + 1, "
    "update_weights_from_distributed l.259-291), megatron_to_hf/qwen3moe.py l.31-39 (each expert's fc1 split into "
    "gate_proj and up_proj: one HF tensor per projection, hf_tensor_count), update_weight_from_distributed/mixin.py "
    "(_gather_and_update_non_expert_weights l.98-130, _gather_and_update_expert_weights l.132-158, "
    "_update_expert_bucket_weights l.184-226), update_weight/common.py (all_gather_param l.189-221), "
    "miles/utils/arguments.py l.771-773 (--update-weight-buffer-size 512 MiB), l.837-839 (transfer mode broadcast) "
    "@748935dc7155d4990d02d62f6061c50ef8054051; sgl-project/sglang python/sglang/srt/model_executor/model_runner.py "
    "ModelRunner.update_weights_from_distributed (load_format None: an async broadcast per name, then "
    "model.load_weights)")
MILES_COLOCATED = (
    "update_weights_from_tensor: every trainer rank gathers the HF tensors of a 512 MiB bucket, flattens them into "
    "one FlattenedTensorBucket, serializes one CUDA-IPC handle, gather_object (Gloo) to its engine's first rank and "
    "one Ray call per engine; SGLang rebuilds the tensors and runs model.load_weights",
    "radixark/miles miles/backends/megatron_utils/update_weight/update_weight_from_tensor.py (update_weights "
    "l.237-282, _send_to_colocated_engine l.450-504) @748935dc7155d4990d02d62f6061c50ef8054051")
SLIME_SAME = ("THUDM/slime slime/backends/megatron_utils/update_weight/update_weight_from_distributed.py "
              "(_is_pp_src_rank, update_weights_from_distributed: one async broadcast per tensor), "
              "update_weight_from_tensor.py (FlattenedTensorBucket, gather_object), slime/utils/arguments.py "
              "(--update-weight-buffer-size 512 MiB) @624b824a898ab0ec1fcb4d373004c7f3852bf515: the same paths")

for _fw, _source in (("miles", ""), ("slime", f"; {SLIME_SAME}")):
    _FRAMEWORKS[(_fw, Placement.COLOCATE)] = (
        SyncMechanism.COLOCATED_CUDA_IPC, 512 * 2**20, S_PER_TENSOR_BUCKETED, MILES_COLOCATED[0],
        MILES_COLOCATED[1] + _source)
    _FRAMEWORKS[(_fw, Placement.SPLIT)] = (
        SyncMechanism.NCCL_BROADCAST, 512 * 2**20, S_PER_TENSOR_SGLANG_LOAD, MILES_BROADCAST[0],
        MILES_BROADCAST[1] + _source)
"""miles (radixark/miles) and slime (THUDM/slime), the framework miles derives from: Megatron-LM trainer, SGLang
engine. Split (the default: ``--colocate`` off), the broadcast path (``MILES_BROADCAST``); colocated, flattened
CUDA-IPC buckets (``MILES_COLOCATED``). Not modelled: the trainer-side TP / EP all-gathers (a Megatron trainer's
card has ``train_shards`` 1, and ``megatron_export_gather`` is NeMo RL's: every rank receives every tensor, where
miles' source rank gathers over its TP and EP groups only; Qwen3-30B-A3B at TP 4 / EP 8 on H100 moves its 57 GB of
experts over NVLink in about 0.2 s); the NCCL latency of one broadcast per tensor (``weight_sync_seconds`` counts
one per bucket); the pause / flush / weight-version calls around the transfer (miles' published timings exclude
the pause). The row that prices them, Qwen3-30B-A3B from a TP 4 / EP 8 trainer on 2 H100 nodes to two TP 8 SGLang
engines on 2 more, 1 GB buckets, 2.67 s (radixark/miles docs/advanced/p2p-weight-transfer.md @748935dc, the NCCL
column), plans at 3.12 s: 1.54 s of wire (61 GB through the sender's one NIC, the card's default) and 1.59 s of host
cost (18,867 x 0.075 ms + 57 buckets x 3 ms: the run's 1 GiB buckets, ``rollout.weight_sync_bucket_mib``; 3.31 s in
miles' default 512 MiB ones). One NCCL latency per tensor instead of per bucket would add 18,867 x
0.085 ms (``collectives.nccl_broadcast`` over 17 ranks on 3 nodes) = 1.6 s, more than the published total leaves beside the wire
(about 1.1 s, at most 60 us a tensor all in): the broadcasts are enqueued back to back (``async_op=True``) behind
the host's loop, so their fixed latency is not paid one after another the way that price assumes; the row does not
say how much of it is. Pipeline stages: each stage's source rank broadcasts its own stage over its own group
(``miles-pp_{pp_rank}``), but every bucket's broadcast and its engines' load run under the rollout manager's one lock
(``_update_weight_implementation`` l.105-125 of broadcast.py, ``Lock`` actor at miles/ray/rollout/rollout_manager.py
l.106 @748935dc7155d4990d02d62f6061c50ef8054051: "Serialize NCCL broadcasts"), so the stages' buckets go one after
another and the plan sums them; only the stages' gathers and conversions, outside the lock, overlap. Both are the
Megatron backend's paths; miles' FSDP backend (miles/backends/fsdp_utils/update_weight_utils.py) is not read.

The colocated cost per tensor (a null result, checked 2026-12-05). slime's colocated rows take SkyRL's lock-step
``S_PER_TENSOR_BUCKETED`` (0.3 ms a tensor into vLLM, trainer and engine together). slime's own path into SGLang
has two published engine-side splits, and they agree. The write-up's profile of one flattened 512 MB bucket of about
160 tensors gives IPC open 3 ms, rebuild 5 ms, load_weights 12 ms and close 0.2 ms: 20 ms, 0.13 ms a tensor
(hebiao064/hebiao064.github.io _posts/2025-08-27-rl-weight-sync.md section 4.3, @0cc99ee40c5451b1fc0cb8a15f4594a0c5402bad).
vllm-project/vime issue #175 (2026-06-07) times slime's ``rayget`` (the engine's rebuild and load_weights) at
2.47-2.53 s for 115 chunks of about 170 tensors: 22 ms a chunk, also 0.13 ms a tensor. Priced that way, the
engine side of Qwen3-30B-A3B's 18,867 tensors is 114 x 3 ms + 18,867 x 17 ms / 160 = 2.3 s, with 0.06 s of copies.
That gives 2.4 s. The vime row (3.0 s, loop only, its trainer-side ``build`` 0.47-0.92 s not priced) would move
+102 -> -20 %. But the write-up's own end state, 7 s on 8 H100 (scored at -13 %), would move to -66 %: its 7 s
holds about 4.6 s beyond its engine-side profile, and the source does not split them (the Megatron gathers, the
conversion, the serialization and the requests of an August 2025 slime). So the same swap that fixes one row
breaks the other: the count within 2x stays the same. Not applied: the trainer side of slime's loop has no price
that fits both releases."""

SKYRL_COLOCATED = (
    ("colocate_all with weight_sync_backend nccl: CUDA IPC. Every trainer rank walks the exporter's 1 GiB buckets "
    "(weight_transfer_threshold_cuda_ipc_GB; Megatron: Megatron-Bridge export_hf_weights per bucket of conversion "
    "tasks, each tensor cast to the engine's dtype; FSDP2: full_tensor() of each module's parameters in the trainer's "
    "dtype, then the cast), packs the bucket into one contiguous buffer, makes one IPC handle, all_gather_object of "
    "the handles, and trainer rank 0 sends one update_weights_ipc request per bucket; every engine rank rebuilds the "
    "buffer of the trainer rank on its own GPU and runs model.load_weights"),
    ("NovaSky-AI/SkyRL skyrl/backends/skyrl_train/weight_sync/__init__.py (get_transfer_strategy l.48-52: ipc when "
    "weight_sync_backend nccl and colocate_all), weight_sync/cuda_ipc_strategy.py (_send_chunks_vllm_native "
    "l.162-257), workers/megatron/megatron_worker.py (MegatronWeightExtractor l.90-324, enable_bucketing=True "
    "l.1363-1367), workers/fsdp/fsdp_worker.py (FSDPWeightExtractor l.51-128, group_by_module for CUDA IPC "
    "l.211-219), skyrl/train/config/config.py l.745-746 (weight_sync_backend nccl, 1.0 GB) "
    "@2e9c89afceb3ef7963748224373ad88882322c99"))
SKYRL_BROADCAST = (
    ("not colocated: trainer rank 0 broadcasts to every engine rank over one NCCL group (world size engine ranks + 1) "
    "with vLLM's packed producer, 1 GiB buffers, two of them; the other trainer ranks only take part in the "
    "exporter's gathers"),
    ("NovaSky-AI/SkyRL skyrl/backends/skyrl_train/weight_sync/broadcast_strategy.py (_send_chunks_vllm_native "
    "l.130-182, create_init_info l.203-228: world size engine ranks + 1) "
    "@2e9c89afceb3ef7963748224373ad88882322c99; vllm-project/vllm "
    "vllm/distributed/weight_transfer/packed_tensor.py (DEFAULT_PACKED_BUFFER_SIZE_BYTES 1 GiB, "
    "DEFAULT_PACKED_NUM_BUFFERS 2, packed_broadcast_producer) @00bd1493b3e82d6c13c68ee8a0e1c5a96707e190"))
_FRAMEWORKS[("skyrl", Placement.COLOCATE)] = (
    SyncMechanism.COLOCATED_CUDA_IPC, GIB, S_PER_TENSOR_BUCKETED, SKYRL_COLOCATED[0], SKYRL_COLOCATED[1])
_FRAMEWORKS[("skyrl", Placement.SPLIT)] = (
    SyncMechanism.NCCL_BROADCAST, GIB, S_PER_TENSOR_BUCKETED, SKYRL_BROADCAST[0], SKYRL_BROADCAST[1])
"""SkyRL (NovaSky-AI/SkyRL): the paths of verl's and miles' colocated buckets (one flattened CUDA-IPC buffer per
bucket, ``S_PER_TENSOR_BUCKETED``) and of NeMo RL's split refit (a packed, double-buffered broadcast from trainer
rank 0: NeMo RL's ``packed_broadcast_producer`` is the same scheme). Its Megatron backend exports through
Megatron-Bridge on every rank, as NeMo RL's does (``megatron_export_gather``, ``plan.rl_sync``); its FSDP backend
gathers in the trainer's dtype and casts after (``FrameworkSync.gathers_trainer_dtype``), as verl's does."""


SGLANG_VERL_LOAD = (
    "into SGLang: each bucket goes through sglang.srt.weight_sync.utils.update_weights, which serializes one CUDA-IPC "
    "handle per tensor (MultiprocessingSerializer.serialize of each tensor, gather_object to the TP leader, "
    "update_weights_from_tensor); every engine rank rebuilds and loads each tensor: S_PER_TENSOR_IPC per tensor",
    "verl-project/verl verl/workers/rollout/sglang_rollout/sglang_rollout.py (update_weights: get_named_tensor_buckets, "
    "sgl_update_weights) @b9873ee98f5ee513a460a7a41623262ac4a831e9; sgl-project/sglang "
    "python/sglang/srt/weight_sync/utils.py (update_weights) @105cec05def6b93d68ea396000500c5d16e00a96")
"""verl's SGLang rollout (colocated, and the checkpoint engine's receiver on a split placement, which hands each
received bucket to the same ``update_weights``): the buckets stay, but the load is per tensor, the mechanism of
``S_PER_TENSOR_IPC`` (one IPC handle per tensor) where verl's vLLM path flattens a bucket into one handle
(``S_PER_TENSOR_BUCKETED``)."""


_PER_PARAMETER = {
    ("verl", Placement.SPLIT): (
        SyncMechanism.NCCL_BROADCAST, None, S_PER_TENSOR_BUCKETED,
        "checkpoint engine off (async_training.checkpoint_engine.enable: False): per parameter full_tensor(), "
        "an NCCL broadcast from trainer rank 0 to every rank of the sync group, and load_weights of that one "
        "tensor on each rollout rank (no RPC per tensor)",
        "volcengine/verl verl/experimental/fully_async_policy/base_detach_sync.py (_sync_vllm_weights) "
        "@b178a3cd56f58b2d502255daba591e92833930a7"),
    ("skyrl", Placement.SPLIT): (
        SyncMechanism.NCCL_BROADCAST, None, S_PER_SKYRL_WEIGHT_REQUEST,
        "SkyRL's FSDP broadcast path before vLLM's packed producer: per parameter full_tensor() and the cast on every "
        "trainer rank, one update_named_weights request to every engine (S_PER_SKYRL_WEIGHT_REQUEST), trainer rank 0's "
        "NCCL broadcast of that tensor, the request awaited, then a barrier of every trainer rank",
        "marin-community/MarinSkyRL skyrl-train/skyrl_train/workers/fsdp/fsdp_worker.py "
        "(broadcast_to_inference_engines l.735-822: the loop l.785-812; FSDPWeightExtractor.extract_weights l.91-152, "
        "one chunk per parameter), "
        "skyrl-train/skyrl_train/inference_engines/vllm/vllm_engine.py (WorkerWrap.load_weights l.553-577: "
        "model.load_weights of the received tensor; update_named_weights l.1746-1759) "
        "@a559688ccdfe65e44d9f13ddaaccb57aa8a3b0b9; NovaSky-AI/SkyRL the same loop before the weight-sync strategies "
        "(fsdp_worker.py l.111-138 @d07f293e9899e8c7fca037afb8ca3ddd88cf069b)"),
    ("skyrl", Placement.COLOCATE): (
        SyncMechanism.COLOCATED_CUDA_IPC, None, S_PER_SKYRL_WEIGHT_REQUEST + S_PER_TENSOR_IPC,
        "SkyRL's colocated FSDP path before the 1 GB request batching: per parameter full_tensor() and the cast, one "
        "CUDA-IPC handle (S_PER_TENSOR_IPC), all_gather_object of the handles and one awaited update_named_weight "
        "request to the engines (S_PER_SKYRL_WEIGHT_REQUEST), then a barrier",
        "NovaSky-AI/SkyRL skyrl-train/skyrl_train/workers/fsdp/fsdp_worker.py broadcast_to_inference_engines "
        "(l.139-175 at the parent of d07f293e9899e8c7fca037afb8ca3ddd88cf069b, pull request #161)"),
}
"""The unbucketed path of frameworks whose default is bucketed (``rollout.weight_sync: per_parameter``).

SkyRL's (``rollout.weight_sync: per_parameter`` with the skyrl preset, split): the per-tensor loop SkyRL's FSDP worker
ran before its weight-sync strategies and vLLM's packed producer (``SKYRL_BROADCAST``), and that Marin's fork of it
(MarinSkyRL) still runs. Per HF tensor, one after the other: every trainer rank gathers it (``full_tensor()`` in the
trainer's dtype, then the cast: ``gathers_trainer_dtype``); rank 0 creates the engines' ``update_named_weights`` task,
broadcasts the tensor to the engine ranks in a worker thread and awaits the task, whose engines receive the broadcast
and ``load_weights`` that one tensor; then every trainer rank meets at ``torch.distributed.barrier()``. So nothing of
one tensor overlaps the next: each pays its gather, its broadcast's NCCL latency and one awaited request
(``S_PER_SKYRL_WEIGHT_REQUEST``). Not priced: the world barrier per tensor, NCCL's tuner latency of a 4-byte
all-reduce over the trainer's ranks (45 us over 64 ranks on 8 nodes, 0.05 s for Qwen3-235B-A22B's 1,037 tensors);
under ``cpu_offload`` each shard's copy to the GPU ahead of its gather (``param.to(device, non_blocking=True)``,
fsdp_worker.py l.171, from FSDP2's ``CPUOffloadPolicy(pin_memory=True)``, skyrl_train/distributed/fsdp_strategy.py
l.343-344, same commit: pinned, 7.3 GB of bf16 per rank for that model on 64 ranks, about half a second: the fork
builds the policy in bf16, ``HFModelWrapper(bf16=True)`` -> ``from_pretrained(torch_dtype=torch.bfloat16)``,
fsdp_worker.py l.652 and model_wrapper.py l.427, since MarinSkyRL 090f3257932d680636723fdc8da1cf83750ce37f,
2025-12-24, and ``fsdp2_load_full_state_dict`` casts the shards to that dtype, fsdp_utils.py l.486-506); and
the fork's layerwise-reload bracket around the sync (``begin_weight_reload`` / ``finish_weight_reload``: one
``process_weights_after_loading`` over the model at the end; on by default from 2026-06-27, MarinSkyRL
2bb70a8800f7af7a0600f4c5a8c310ae4ffafc96). Its tensors are the trainer module's ``state_dict()`` entries
(``FrameworkSync.sends_trainer_state_dict``, ``trainer_tensor_count``): under transformers 5 a MoE layer's routed
experts are two stacked tensors, not three per expert.

SkyRL's colocated per-parameter loop (``rollout.weight_sync: per_parameter`` with the skyrl preset, colocate): the loop
SkyRL pull request #161 timed, 4.4 s for a 14B model on one 8xH100 node, where ``S_PER_SKYRL_WEIGHT_REQUEST`` comes
from. Per tensor it makes one CUDA-IPC handle (``S_PER_TENSOR_IPC``) and one awaited request
(``S_PER_SKYRL_WEIGHT_REQUEST``): 9.2 ms, 4.1 s over Qwen3-14B's 443 tensors against the 4.4 s published."""

_BUCKETED = {
    ("verl", Placement.SPLIT): (
        SyncMechanism.NCCL_BROADCAST, 4 * GIB, S_PER_TENSOR_BUCKETED,
        "checkpoint engine on (fully_async_policy): the parameters staged per trainer rank in pinned host "
        "buckets, each bucket copied to the device, broadcast from its owner rank to the sync group and "
        "loaded (async_training.checkpoint_engine.device_buffer_size_M: 4096)",
        "volcengine/verl verl/experimental/fully_async_policy/checkpoint_engine.py (update_checkpoint), "
        "docs/advance/fully_async.md @b178a3cd56f58b2d502255daba591e92833930a7"),
}
"""The bucketed path where the card asks for it (``rollout.weight_sync: bucketed``) and it differs from the default."""

SKYRL_MEGATRON_PACKED_IPC_SINCE = (0, 3)
"""The first skyrl-train release whose Megatron worker packs each colocated bucket into one buffer with one CUDA-IPC
handle: 0.3.0 (NovaSky-AI/SkyRL tag skyrl_train-v0.3.0, b2a08a0fc3f01f562d47db31a544a6fa1ce46bbe, 2025-12-03),
the first to hold pull request #487 (8c7ba7ef20e0e842f0e45d394844800032d1c5db, 2025-11-21, "bucketed param gather +
cuda ipc flattening"): skyrl-train/skyrl_train/workers/megatron/megatron_worker.py ``broadcast_to_inference_engines``
packs each bucket (``"packed": True``) @b2a08a0fc3f01f562d47db31a544a6fa1ce46bbe. 0.2.0 (skyrl_train-v0.2.0,
1ed499cce4df7ef21462969707b0476bc3c7e0c8) runs the loop of ``SKYRL_IPC_PER_TENSOR``."""
SKYRL_FSDP_PACKED_IPC_SINCE = (0, 4)
"""The first skyrl-train release whose FSDP worker packs each colocated bucket (``CudaIpcTransferStrategy``'s
``send_chunks``, skyrl_train/weight_sync/cuda_ipc_strategy.py l.132-202 at skyrl_train-v0.4.0,
332c7cbcc4f4fad20ca71d94c5bb33d84035da09, 2026-02-13). 0.3.0's FSDP worker still makes one handle per tensor
(skyrl_train/workers/fsdp/fsdp_worker.py l.198-256, ``"packed": False``)."""
SKYRL_IPC_PER_TENSOR = (
    ("SkyRL's colocated path before its packed buffer (a software.skyrl-train pin before SKYRL_MEGATRON_PACKED_IPC_SINCE "
     "for Megatron, SKYRL_FSDP_PACKED_IPC_SINCE for FSDP): per tensor the export's tensor cast to the engine's dtype "
     "(cloned on Megatron), one CUDA-IPC handle (reduce_tensor), all_gather_object of the handles over every trainer "
     "rank, torch.distributed.barrier() and torch.cuda.synchronize(); only the requests are batched, one "
     "update_named_weights per 1 GB (weight_transfer_threshold_cuda_ipc_GB): S_PER_TENSOR_IPC per tensor"),
    ("NovaSky-AI/SkyRL skyrl-train/skyrl_train/workers/megatron/megatron_worker.py broadcast_to_inference_engines "
     "l.383-440 and skyrl-train/skyrl_train/workers/fsdp/fsdp_worker.py l.135-262 @1ed499cce4df7ef21462969707b0476bc3c7e0c8 "
     "(skyrl_train-v0.2.0; the same Megatron loop l.369-426 @f53414abc0f83a74c42ddecbfd68c6dcd8dae5f7, pull request "
     "#334), skyrl-train/skyrl_train/config/ppo_base_config.yaml l.172 (weight_transfer_threshold_cuda_ipc_GB 1.0)"))
"""SkyRL's colocated sync in the releases before its packed CUDA-IPC buffer. ``S_PER_TENSOR_IPC`` is this loop's own
measurement: pull request #487 took the Megatron sync of Qwen3-30B-A3B on 8 x H100 from 48 s with it to 6 s with
the packed buffer (``S_PER_TENSOR_BUCKETED``)."""


def framework_sync_mechanism(framework: str, placement: Placement | str,
                             weight_sync: WeightSync | str | None = None,
                             engine: RolloutEngine | str = RolloutEngine.VLLM,
                             ipc_handle_per_tensor: bool = False) -> FrameworkSync:
    """The sync a framework performs for a placement (``colocate``: trainer and engine share the
    GPUs; ``split``: separate GPUs), read from its source (``FrameworkSync.source``).

    ``weight_sync``: the card's choice when it sets one (``per_parameter``: the framework's unbucketed
    path where it has one; ``bucketed``: its bucketed path); None: the framework's default.
    ``engine``: the rollout engine; verl's default paths into SGLang load one CUDA-IPC handle per tensor
    (``SGLANG_VERL_LOAD``); other frameworks keep their vLLM path (not read for SGLang).
    ``ipc_handle_per_tensor``: SkyRL's colocated buckets as its releases before the packed buffer send them, one
    CUDA-IPC handle per tensor (``SKYRL_IPC_PER_TENSOR``; the plan sets it from a ``software.skyrl-train`` pin). Its
    per-parameter loop has a handle per tensor already and is kept; any other framework or placement is refused.
    """
    name = framework.lower().replace("_", "-").replace("nemo-rl", "nemo-rl").replace("nemorl", "nemo-rl")
    where = Placement("colocate" if str(placement) in ("colocated", "hybrid") else placement)
    try:
        mech, bucket, per, reason, source = _FRAMEWORKS[(name, where)]
    except KeyError:
        known = ", ".join(dict.fromkeys(fw for fw, _ in _FRAMEWORKS))
        raise CardError(f"framework: one of {known}; got {framework!r}") from None
    try:
        choice = None if weight_sync is None else WeightSync(weight_sync)
    except ValueError:
        raise CardError(f"rollout.weight_sync: one of {', '.join(w.value for w in WeightSync)}; "
                        f"got {weight_sync!r}") from None
    variant = {WeightSync.PER_PARAMETER: _PER_PARAMETER, WeightSync.BUCKETED: _BUCKETED}.get(choice, {})
    fully_async_path = (name, where) in variant
    if fully_async_path:
        mech, bucket, per, reason, source = variant[(name, where)]
    if ipc_handle_per_tensor and (name, where) != ("skyrl", Placement.COLOCATE):
        raise CardError(f"weight sync: one CUDA-IPC handle per tensor is SkyRL's colocated path before its packed "
                        f"buffer; allowed with framework skyrl and placement colocate, got {name} {where.value}")
    if ipc_handle_per_tensor and not fully_async_path:
        per, (reason, source) = S_PER_TENSOR_IPC, SKYRL_IPC_PER_TENSOR
    sglang_requests = RolloutEngine(engine) is RolloutEngine.SGLANG and name == "verl" and not fully_async_path
    if sglang_requests:
        per = S_PER_TENSOR_IPC
        reason, source = f"{reason}; {SGLANG_VERL_LOAD[0]}", f"{source}; {SGLANG_VERL_LOAD[1]}"
    return FrameworkSync(framework=name, placement=where, mechanism=mech, bucket_bytes=bucket, s_per_tensor=per,
                         reason=reason, source=source,
                         trainer_ranks_in_group=_trainer_ranks_in_group(name, where, fully_async_path=fully_async_path),
                         # the engine workers' get_per_tensor_param (colocated and the checkpoint engine); the fully
                         # async trainer's own paths are not read here
                         # (both verl exports call module.state_dict() first: unshards_fsdp1_state_dict)
                         # NeMo RL's DTensor policy too (FrameworkSync.gathers_trainer_dtype)
                         # SkyRL's FSDPWeightExtractor: full_tensor() then .to(dtype) (SKYRL_COLOCATED)
                         gathers_trainer_dtype=((name == "verl" and not fully_async_path)
                                                or name in ("nemo-rl", "skyrl")),
                         broadcasts_whole_bucket=(name, where) == ("verl", Placement.SPLIT) and not fully_async_path,
                         sglang_tensor_requests=sglang_requests,
                         sends_trainer_state_dict=name == "skyrl" and choice is WeightSync.PER_PARAMETER)


def _trainer_ranks_in_group(framework: str, placement: Placement, *, fully_async_path: bool = False) -> bool:
    """Every trainer rank joins the sync group: NeMo RL's non-colocated refit (``init_collective`` on every policy
    worker and every vLLM worker, NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470), verl's colocated path
    and verl's fully-async trainer's own split paths (``fully_async_path``: ``rollout.weight_sync`` per_parameter,
    ``base_detach_sync.py`` ``create_weight_sync_group`` with rank = actor rank + offset over actors + rollouts;
    bucketed, ``checkpoint_engine.py`` ``init_checkpoint_engine`` with every actor rank;
    volcengine/verl @b178a3cd56f58b2d502255daba591e92833930a7).

    verl's default split path, the checkpoint engine's nccl backend, broadcasts from trainer rank 0 alone: its
    ``build_topology`` gives actor rank 0 rank 0 and every other actor worker rank -1 (outside the group), world size
    rollout workers + 1 (verl/checkpoint_engine/nccl_checkpoint_engine.py lines 152-160 @b178a3cd56f58b2d502255daba591e92833930a7;
    the same @b9873ee98f5ee513a460a7a41623262ac4a831e9 of verl-project/verl, 2026-07-10, the code the
    docs/advance/delta_weight_sync.md nccl rows
    were measured on). verl-project/verl 8de5fb446 (2026-08-14, ``multi_sender``) later admits rank 0's node-local
    actor workers as relays, on by default: a card that sets ``rollout.weight_sync_relays``, or leaves it unset with a
    verl pin whose default they are (``spec.card.verl_multi_sender_default``), gets them (``verl_broadcast_senders``).
    OpenRLHF and TRL send from trainer rank 0 alone."""
    if framework == "verl":
        return placement is Placement.COLOCATE or fully_async_path
    return framework == "nemo-rl" and placement is Placement.SPLIT


VERL_UNCAST_EXPORT_SINCE = (0, 9)
"""The verl release whose FSDP engine exports the trainer's own dtype: ``get_per_tensor_param`` yields
``param.to(device).full_tensor()`` with no cast (verl-project/verl verl/workers/engine/fsdp/transformer_impl.py l.1004
@483b8a009ba3a97563edee3a19887e4862b8094a, v0.9.0; l.998-1006 @8de5fb4463faa0a06ce1d260cadf3d7cd2a2c338), where v0.8.0
cast each gathered tensor to bf16 (``.full_tensor().to(torch.bfloat16, non_blocking=True)``, l.841
@v0.8.0; its "TODO: cast fp32 to bf16 to reduce weight sync overhead"). The cast went with f66328232 (#7161,
2026-07-27, "move unfuse_moe_params to FSDP backend": l.976 before, l.975 after), whose ``verl/version/version`` is
0.9.0.dev. The checkpoint engine sends what the generator yields (``split_weight_chunks`` views each tensor's own
bytes, verl/checkpoint_engine/base.py l.541-567 @8de5fb44; ``engine_workers.py`` passes the generator on uncast,
l.756-757), so an fp32 trainer's weights cross in fp32 and every receiver copies fp32: ``weight_sync_seconds``
``weight_bytes`` is then the trainer's bytes (``plan.rl_sync``), on the colocated CUDA-IPC path too, which walks the
same generator. The merged-LoRA export still casts (l.1054). A card names no training engine: this is the FSDP
engine's export; verl's TorchTitan engine casts to bf16 (verl/workers/engine/torchtitan/transformer_impl.py l.550
@ce195c95ea3aa9a8b89b00bbe669e854a91d23d1, module docstring) and would send half these bytes."""


VERL_MULTI_SENDER_SOURCE = (
    "verl-project/verl verl/checkpoint_engine/nccl_checkpoint_engine.py (NCCLCheckpointEngine.__init__ multi_sender "
    "l.142, _single_sender_ranks l.196-199, _multi_sender_ranks l.201-219, build_topology l.222-250, send_weights "
    "pipelined = self.num_senders == 1 l.345, _relay_weights l.407-434) @8de5fb4463faa0a06ce1d260cadf3d7cd2a2c338 "
    "(#7291, 2026-08-14)")


def verl_broadcast_senders(*, relays: bool, train_gpus: int, gpus_per_node: int) -> int:
    """Trainer ranks in the broadcast group of verl's checkpoint-engine nccl backend (``VERL_MULTI_SENDER_SOURCE``).

    Without relays (``_single_sender_ranks``, every verl before 8de5fb44): actor rank 0 alone, every other actor worker
    gets rank -1 and only walks the export generator. With ``multi_sender`` (``_multi_sender_ranks``): actor rank 0 and
    every actor worker on rank 0's Ray node, the ones NVLink reaches; a worker on any other node gets rank -1. Rank 0
    stays the only source: the relays walk the same generator, cut the same bucket boundaries and join each bucket's one
    broadcast with a scratch buffer (``_relay_weights``). They give NCCL's broadcast ring more GPUs, and so more NICs,
    on the sending node: its channels leave the node through each of them (``collectives.ring_bus_bytes_per_s``
    ``local_ranks``), which is what lifts the cap of one NIC ("With a single sender, broadcast bandwidth is capped by
    the one NIC reachable from the source GPU", PR #7291). The actor workers fill nodes from rank 0, so rank 0's node
    holds ``min(train_gpus, gpus_per_node)`` of them.

    With relays the root also stops overlapping the fill of bucket k+1 with the broadcast of bucket k (``pipelined``
    is false for more than one sender: it waits for each broadcast as soon as the bucket is filled, so the relays and
    the root queue the two groups' collectives in one order); ``weight_sync_seconds`` already adds gather and
    broadcast one after the other for this backend (module docstring: "bucket k+1's export starts when bucket k's
    broadcast ends"), so that changes nothing here."""
    if min(train_gpus, gpus_per_node) < 1:
        raise CardError("weight sync: train_gpus and gpus_per_node >= 1")
    return min(train_gpus, gpus_per_node) if relays else 1


NRL_REFIT_NUM_STREAMS = 2
"""CUDA streams a vLLM rank spreads the training pipeline stages' bulk reshards over (``NRL_REFIT_NUM_STREAMS``,
default 2: ``vllm_backend.py`` ``nccl_reshard_refit`` lines 1138-1166, NVIDIA-NeMo/RL
@7ea279abfbeb698b092856d0dab61e7cf39bc909)."""
NEMO_RL_V03_GATHER = (
    "NVIDIA-NeMo/RL nemo_rl/models/megatron/refit_utils.py gather_params l.79-161 (per key, sorted: on the owning "
    "stage the TP / expert-TP all_gather and torch.cat, then torch.distributed.broadcast of the TP-whole tensor over "
    "the PP group, then one all_gather of the stacked expert over the EP group), called per group by "
    "nemo_rl/models/policy/megatron_policy_worker.py get_weights_ipc_handles l.1420-1520; nemo_rl/algorithms/grpo.py "
    "refit_policy_generation l.396-455: per group ray.get of every worker's handles (lm_policy.py l.511-528), "
    "then ray.get of the engines' update_weights_from_ipc_handles (nemo_rl/models/generation/vllm.py l.1971-1978) "
    "@b1c86a816c5e2b4ca41ece193624a38dc62e6fdf (v0.3.0; the same at v0.3.1 "
    "27d0af945b96c5bf9fa928bf45fd1a6ce016632d); from v0.4.0 (c751f811217db7df0d4c94abdeaada6626cfc150) the refit "
    "walks Megatron-Bridge's export_hf_weights instead (megatron_policy_worker.py l.1895)")
"""Where NeMo RL's Megatron refit gathered before Megatron-Bridge (``megatron_export_gather`` ``v03_gather``)."""
NRL_MISC_GROUP = (
    "NVIDIA-NeMo/RL nemo_rl/weight_sync/nccl_reshard_weight_synchronizer.py init_communicator l.141-154 "
    "(model_update_group: world_size = train_world_size + inference_world_size, every policy worker and every vLLM "
    "worker joins), nemo_rl/models/policy/workers/megatron_policy_worker.py _broadcast_misc_params_packed "
    "l.2913-2929 (packed_broadcast_producer over self.model_update_group, src 0, run by every training rank) "
    "@7ea279abfbeb698b092856d0dab61e7cf39bc909")
"""The communicator of the NCCL reshard refit's misc path (``nccl_reshard_seconds``): each packed broadcast's ring runs
through every training rank as well as the vLLM ranks, so NCCL's latency of it counts them all
(``weight_sync_seconds`` ``trainer_group_ranks``). Effect on the scored refits: Qwen3-4B DP8 -> TP8 and the
Qwen3-30B-A3B ones under 0.2 ms; DeepSeek-V3 PP16 x EP16 -> TP32 x DP8, 256 training ranks in the ring, +21 ms (H100,
-9.8 -> -9.0 %) and +18 ms (GB200, -30.8 -> -30.0 %)."""
NEMO_RL_BRIDGE_SINCE = (0, 4)
"""The NeMo RL release whose Megatron refit exports through Megatron-Bridge (``NEMO_RL_V03_GATHER``)."""
NRL_RESHARD_SOURCE = (
    "NVIDIA-NeMo/RL docs/design-docs/nccl-reshard-refit.md, docs/guides/refit.md, "
    "nemo_rl/weight_sync/xferdtensor_python.py "
    "(module docstring: striped receives, one all-gather per replica group), "
    "nemo_rl/models/policy/workers/megatron_policy_worker.py (nccl_reshard_refit lines 2835-2925, "
    "prepare_nccl_reshard_refit_info lines 2605-2736), nemo_rl/models/generation/vllm/vllm_backend.py "
    "(nccl_reshard_refit lines 1096-1191, build_hf_to_local_param_map lines 811-949) "
    "@7ea279abfbeb698b092856d0dab61e7cf39bc909 (merged in e40aa046e5fd4af30f93c27acdcdb9cc748670ab, #2971)")


def reshard_ffn_groups(spec: ModelSpec) -> list:
    """The linear groups NeMo RL's NCCL reshard refit sends on its bulk path: the FFN projections, dense MLP
    ``gate_proj`` / ``up_proj`` / ``down_proj`` and the routed experts' (``is_nccl_reshard_param``); shared experts
    ride the misc path (design doc, "Bulk path")."""
    from trainfit.memory.params import linear_groups

    return [g for g in linear_groups(spec)
            if g.routed or (g.name in ("gate_proj", "up_proj", "down_proj", "gate_up_proj") and not g.is_fused_experts)]


def _hf_tensors_of(g) -> int:
    """Hugging Face tensors of a linear group: one per expert and projection (trainfit fuses gate and up)."""
    return g.count * g.experts * (2 if g.is_fused_experts and g.lora_rank_multiplier == 2 else 1)


def fp8_scale_tensor_count(spec: ModelSpec, kept: tuple[str, ...] = ()) -> int:
    """``*_scale_inv`` tensors of a block-fp8 checkpoint: one per fp8 linear weight (each expert's projections
    apart), the linears named in ``kept`` left in bf16."""
    from trainfit.memory.params import linear_groups

    return sum(_hf_tensors_of(g) for g in linear_groups(spec) if not any(k in g.name for k in kept))


@dataclass(frozen=True, slots=True)
class ReshardPayload:
    """What NeMo RL's NCCL reshard refit sends on each path (``reshard_payload``)."""

    bulk_bytes: float
    """The FFN projections (``reshard_ffn_groups``) in the wire dtype: the xferdtensor path."""
    misc_bytes: float
    """Everything else, fp8 block scales included: the packed broadcast."""
    bulk_calls: int
    """xferdtensor calls: one per HF parameter, a layer's experts grouped into one per projection."""
    misc_tensors: int
    """Tensors the packed broadcast carries and vLLM's ``load_weights`` takes one by one."""
    scale_tensors: int
    """Of them, fp8 ``*_scale_inv`` siblings (one per fp8 weight, each expert's apart)."""
    routed_bytes: float
    gated_bytes: float
    """Bulk bytes of gate and up projections (received into a buffer, copied into vLLM's fused tensor)."""
    misc_fp8_params: float
    """Misc-path fp8 weights the vLLM worker casts again on arrival (``fp8.load_weights``)."""

    @property
    def bulk_fraction(self) -> float:
        """The design doc's "XferDTensor fraction": the bulk's share of the refit payload."""
        return self.bulk_bytes / (self.bulk_bytes + self.misc_bytes)


def reshard_payload(spec: ModelSpec, *, weight_bytes: float, fp8: bool = False,
                    fp8_kept: tuple[str, ...] = ()) -> ReshardPayload:
    """The split of one NCCL reshard refit between its bulk and misc paths (``nccl_reshard_seconds``): the FFN
    projections in the wire dtype (1 byte under fp8) on the bulk path, and the rest of ``weight_bytes`` (the model as
    the engine holds it) on the misc path, with one ``*_scale_inv`` per fp8 linear weight
    (``prepare_nccl_reshard_refit_info``, megatron_policy_worker.py lines 2605-2736
    @7ea279abfbeb698b092856d0dab61e7cf39bc909)."""
    from trainfit.memory.weights import count_scale

    scale = count_scale(spec)
    groups = reshard_ffn_groups(spec)

    def per_param(g) -> float:
        return 1.0 if fp8 and not any(k in g.name for k in fp8_kept) else 2.0

    bulk_bytes = scale * sum(g.weight_params * per_param(g) for g in groups)
    gated_bytes = scale * sum(g.weight_params * per_param(g) for g in groups
                              if g.lora_rank_multiplier == 2 or g.name in ("gate_proj", "up_proj", "gate_up_proj"))
    routed_bytes = scale * sum(g.weight_params * per_param(g) for g in groups if g.routed)
    bulk_tensors = sum(_hf_tensors_of(g) for g in groups)
    # one xferdtensor per HF parameter, the experts grouped: gate, up, down per MoE layer
    bulk_calls = sum(g.count * (2 if g.lora_rank_multiplier == 2 else 1) if g.is_fused_experts else g.count
                     for g in groups)
    if weight_bytes <= bulk_bytes:
        raise CardError(f"weight sync: nccl_reshard weight_bytes {weight_bytes:.3g} must exceed the FFN bytes "
                        f"{bulk_bytes:.3g}")
    misc_bytes = weight_bytes - bulk_bytes
    if fp8:
        from trainfit.memory.params import linear_groups

        fp8_linears = [g for g in linear_groups(spec) if not any(k in g.name for k in fp8_kept)]
        scales = fp8_scale_tensor_count(spec, fp8_kept)
        misc_fp8_params = scale * sum(g.weight_params for g in fp8_linears if g not in groups)
    else:
        scales, misc_fp8_params = 0, 0.0
    misc_tensors = max(1, hf_tensor_count(spec) - bulk_tensors + scales)
    return ReshardPayload(bulk_bytes=bulk_bytes, misc_bytes=misc_bytes, bulk_calls=bulk_calls,
                          misc_tensors=misc_tensors, scale_tensors=scales, routed_bytes=routed_bytes,
                          gated_bytes=gated_bytes,
                          misc_fp8_params=misc_fp8_params)


def nccl_reshard_seconds(*, spec: ModelSpec, weight_bytes: float, train_tp: int, train_pp: int, train_ep: int,
                         train_etp: int, train_world: int, gen_tp: int, gen_engines: int, rates: DeviceRates,
                         gpus_per_node: int,
                         inter_node: bool, nic_bytes_per_s: float = DEFAULT_INTER_NODE_BYTES_PER_S,
                         fp8: bool = False, fp8_kept: tuple[str, ...] = (), misc_bucket_bytes: float = 1.6 * GIB,
                         sender_node_ranks: int = 1, misc_s_per_tensor: float = S_PER_TENSOR_NEMO_RL_PACKED,
                         fp8_cast_bytes_per_param: float = 0.0) -> SyncTime:
    """One refit by NeMo RL's NCCL reshard transport (``policy.generation.refit_transport: nccl_reshard``), read from
    ``NRL_RESHARD_SOURCE``. Two paths, one after the other (the training worker synchronises between them):

    * **Bulk**: the FFN projections (``reshard_ffn_groups``). Every training rank walks the metadata and calls
      ``xferdtensor`` once per HF parameter of its pipeline stage (the experts of a layer grouped into one
      ``[num_experts, ...]`` entry per projection), sending its live TP/EP-local shard (the grouped experts stacked
      first, ``pre``); every vLLM rank receives exactly its own shard into the live parameter (gate and up into a
      buffer copied into ``w13`` / ``gate_up_proj``, ``post``). The readable transport (``xferdtensor_python_impl``;
      the nccl4py ``m2n.reshard`` one is NCCL's own) sends each destination region once. With more than one vLLM
      instance it stripes each region over the replicas, takes the sources round-robin over the training ranks that
      hold a copy (``_build_striped_transfers``, nemo_rl/weight_sync/xferdtensor_python.py lines 749-774) and
      rebuilds each replica with one all-gather over the replica group. With one instance there is no replica group
      (``_build_striped_targets`` returns None, lines 705-746): the generic plan sends every region from the first
      training rank holding it (``_build_exact_plan`` line 277), so a data-parallel trainer (Qwen3-4B DP8 -> TP8)
      sends the whole bulk from its rank 0. The NICs still carry ``bulk / gen_tp`` each: NCCL routes a cross-node
      point-to-point through the NIC of the peer's rail, relayed over NVLink by the local GPU of the peer's index
      (PXN, ``NCCL_P2P_PXN_LEVEL`` default 2: ``ncclTopoGetNetDev``, NVIDIA/nccl src/graph/search.cc lines 1397-1474
      @5067397c2676d5aed50042fc39e5c8ee96eb0027), so rank 0's sends leave through the node's NICs and its NVLink
      carries the bulk, faster than those NICs. Modelled: each training rank sends ``bulk / train_world`` bytes,
      each vLLM rank receives ``bulk / gen_tp``, every rank on its own link at once (its NIC when the two sides are
      on different nodes). Per call: a grouped point-to-point and, with more than one vLLM instance, the replica
      all-gather, NCCL's latency each; the stages' calls spread over ``NRL_REFIT_NUM_STREAMS`` streams on the vLLM
      side.
    * **Misc**: everything else (attention, embeddings, norms, routers, shared experts, MTP and, with fp8, every
      ``*_scale_inv`` sibling, the experts' included) through the default refit's machinery: Megatron-Bridge's export
      of those tasks (``megatron_export_gather`` ``ffn=False``), the packed broadcast from training rank 0 and vLLM's
      ``load_weights`` per tensor (``weight_sync_seconds``, ``nccl_broadcast``, NeMo RL's split settings).

    ``fp8``: blockwise-fp8 training to fp8 vLLM, the pairing the transport requires ("Precision must match end to
    end"): the bulk moves 1-byte weights, and the misc path carries one ``*_scale_inv`` per fp8 weight, each its own
    export task with its PP / TP / EP collectives and its own ``load_weights`` entry (Qwen3-30B-A3B: 18,432 expert
    scales beside ~580 misc tensors in bf16). The vLLM worker's ``fp8.load_weights`` re-casts each misc fp8 weight
    on arrival (``cast_tensor_to_fp8_blockwise``, ``fp8_cast_bytes_per_param`` of HBM per weight), and the finalize
    (``process_weights_after_loading``: the fp8 linears' and MoE layers' ``copy_`` into the kernel layout,
    nemo_rl/models/generation/vllm/quantization/fp8.py lines 750-803 and 996-1053
    @7ea279abfbeb698b092856d0dab61e7cf39bc909) passes over the rank's
    weights once. ``fp8_kept``: linears kept bf16 (``rollout.quantization_bf16_modules``). ``weight_bytes``: the
    whole model as the engine holds it (fp8: 1-byte linears with their block scales); the misc path carries what the
    bulk does not.

    The timer: the design doc's "Refit time" is the whole ``sync_weights`` (``prepare_for_generation/
    transfer_and_update_weights``: both workers' ``nccl_reshard_refit`` and ``ray.get``,
    nemo_rl/weight_sync/nccl_reshard_weight_synchronizer.py @7ea279abfbeb698b092856d0dab61e7cf39bc909); the
    communicators and the metadata are built
    once, before training (``init_communicator``). Its Qwen3-30B-A3B rows are the readable transport's: the merge
    PR lists them under "DGX-H100 - xferdtensor_python_impl (fallback path)" (NVIDIA-NeMo/RL pull request #2971,
    https://github.com/NVIDIA-NeMo/RL/pull/2971, description of 2026-06-27, read 2026-12-03).

    The misc path's host cost per tensor, ``misc_s_per_tensor``: ``S_PER_TENSOR_NEMO_RL_PACKED`` (0.146 ms), read
    from that PR's bf16 / fp8 pair of one layout (EP8xPP2 -> TP2xDP8), which differs by 2.4 s for 18,624 more misc
    tensors (the fp8 ``*_scale_inv`` siblings) and half the bulk bytes; half of ``S_PER_TENSOR_BUCKETED``, the
    lock-step CUDA-IPC figure this path took before, as the packed broadcast's overlap of export and load predicts.
    Against seven of that PR's 30B rows (the design doc carries three; the pair is not among the scored rows), this
    model with it: bf16 EP4xTP2xDP2 -> TP4xDP4 1.13-1.53 s (0.47 s), EP4xTP2xPP2 -> TP4xDP4 0.74-1.17 s (0.48),
    EP8xPP2 -> TP2xDP8 1.21-1.52 s (0.88), EP8xPP2 -> TP8xDP2 0.74-1.00 s (0.33); fp8 EP4xTP2xPP2 -> TP2xDP8
    3.19-4.04 s (3.29), EP8xPP2 -> TP2xDP8 3.20-4.30 s (3.27), EP8xDP2 -> TP2xDP8 2.90-4.00 s (3.20). At 0.3 ms the
    fp8 rows were 6.1-6.2 s (+64 to +78 %); the fp8 row of the other layout (EP4xTP2xPP2), not used to read the value,
    now lands at -9 %. The bf16 rows are 0.4-0.8 s short with no bytes left to add, 0.05 s further than at 0.3 ms
    (the design doc's Qwen3-4B -57 -> -73 %, 30B bf16 -56 -> -62 %): the bf16 shortfall is not a cost per tensor (it
    would take 1-2 ms per misc tensor, against that pair). The default non-colocated refit runs the same producer /
    consumer pair over every tensor, so it takes the same value (``S_PER_TENSOR_NEMO_RL_PACKED``: where it applies, the
    code at each cited release, and how weakly the near-twin pair tests it). Read in the code,
    not priced (no source measures them): the Python of each ``xferdtensor`` call on both sides (plan-cache look-up, the per-transfer
    slicing, one nccl4py group of sends and receives, ``record_stream``); the device synchronisations and
    ``empty_cache`` between the bulk and the misc path (megatron_policy_worker.py lines 2898-2899 and 2905,
    vllm_backend.py lines 1166-1167, 1174, 1181 and 1190); vLLM's ``process_weights_after_loading`` over the whole
    model on every refit (``finalize``, vllm_backend.py lines 620-625, 1188); the Ray dispatch of both sides.

    The same feature's earlier merge requests sent a wider set of parameters through ``xferdtensor`` (#2971 is "The
    same feature as #2808, but reducing the target scope to the dominant parameters only"). They list Qwen3-4B
    DP8 -> TP8 at 0.07-0.08 s and Qwen3-30B-A3B EP8xPP2 -> TP8xDP2 at 0.50-0.51 s (NVIDIA-NeMo/RL pull requests
    #2413, description of 2026-05-05, and #2808, 2026-06-15, https://github.com/NVIDIA-NeMo/RL/pull/2808, read
    2026-12-03). The design doc gives 0.21-0.34 s and 0.74-1.00 s for the merged split, whose 30B rows #2971 lists
    under "xferdtensor_python_impl (fallback path)"; this model gives 0.12 and 0.38 s, near the earlier figures. The
    same bytes moved 0.13-0.26 s (4B) and 0.24-0.49 s (30B) faster there, so what the doc's rows add is the merged
    split's misc path and fallback transport, not bytes. No source splits that time between host work per call and
    the paths' synchronisations.

    Not modelled: the NCCL library's own reshard algorithm (the nccl4py transport, used when importable), which may
    send more per training rank (each replica's region straight from its source, no replica all-gather).

    Checked, not the gap (the design doc's rows, this model at the lock-step 0.3 ms per misc tensor it priced before
    ``S_PER_TENSOR_NEMO_RL_PACKED``: 4B DP8 -> TP8 0.119 s for 0.275 published, -57 %; 30B bf16 0.380 s for 0.87,
    -56 %; 30B fp8 6.14 s for 3.45, +78 %; with it 0.074 / 0.328 / 3.20 s, -73 / -62 / -7 %):
    * The two sides' host work on the misc path overlaps, and this model adds it. The producer only synchronises
      the stream of the buffer it is about to reuse. The consumer enqueues each bucket's receive and runs
      ``load_weights`` on its views straight away (``packed_broadcast_producer`` / ``packed_broadcast_consumer``,
      nemo_rl/utils/packed_tensor.py, two buffers, @7ea279abfbeb698b092856d0dab61e7cf39bc909). So the trainer's
      export and the engine's load run at the same time in two processes: ``max(a, b) + min(a, b) / buckets``, not
      ``a + b``. ``S_PER_TENSOR_BUCKETED`` comes from a lock-step path: SkyRL's rank 0 awaits each bucket's
      ``update_named_weights`` before it exports the next (NovaSky-AI/SkyRL
      skyrl-train/skyrl_train/workers/megatron/megatron_worker.py ``broadcast_to_inference_engines``
      @0d350b17f70ecaeb9dd1dc8207a8c7e6a962aafc; the packed buckets that PR #487 added await the same way). PR #487
      ran Qwen3-30B-A3B at TP 2, EP 8 on 8 H100s. Split into an engine
      share of ``S_PER_TENSOR_SGLANG_LOAD`` (the only engine ``load_weights`` rate measured, and that is SGLang's)
      and the rest to the trainer, the fp8 row goes from +78 to +57 % (6.14 -> 5.42 s; 2 misc buckets, so only
      half of the smaller side hides). The bf16 rows go further under: 4B -57 -> -61 %, 30B -56 -> -58 %;
      DeepSeek-V3 is unchanged within 0.01 s. Not applied: the fp8 row stays past 50 %, the bf16 rows get worse,
      and the split borrows SGLang's rate for vLLM. ``S_PER_TENSOR_NEMO_RL_PACKED`` now prices the overlapped cost
      per tensor from NeMo RL's own pair instead.
    * Nothing priced here is a fixed cost that the bf16 rows lack. The 4B's bulk, 5.38 GB, takes 0.02 s over eight
      NICs. Its misc path, 2.67 GB and 290 tensors, takes 0.10 s, of which 0.09 s is host time per tensor. The
      feature's earlier PRs, which put more tensors on the bulk path, give 0.07-0.08 s for the same layout
      (above). The design doc describes a refit that runs "concurrently with generation" (Execution Flow: Refit
      Time, docs/design-docs/nccl-reshard-refit.md @7ea279ab). Under the async engine the vLLM side is the
      ``nccl_reshard_refit_async`` engine call (vllm_generation.py l.1160-1174), so it can meet generation in flight.
      The generation load behind the table's rows is not stated, so no term prices it.
    * The Python of the ``xferdtensor`` calls (a null result). ``benchmarks/xferdtensor_host_cpu.py`` runs
      ``xferdtensor_python.py`` (@7ea279ab) on meta tensors of the ranks' shard shapes, with the NCCL calls and the
      stream and device contexts stubbed, one steady-state call per role. Over three runs on a two-core x86 CPU (AMD EPYC)
      it measured:
      - Qwen3-4B DP8 -> TP8, training rank 0 (it sends every region): 0.10-0.18 ms per gate / up call and 0.22-0.38
        ms per down call, so 15-27 ms per refit over 108 calls;
      - the same layout, a vLLM rank: 0.05-0.10 ms per call, 5-11 ms per refit;
      - Qwen3-30B-A3B EP8 x PP2 -> TP8 x DP2, a training rank: 0.24-0.54 ms per grouped-expert call, 17-34 ms over
        its stage's 72 calls;
      - the same layout, a vLLM rank: 0.08-0.19 ms per call, 12-24 ms over all 144.
      No call synchronises the host with the device once the plan and the split communicator are cached, so this
      time runs beside the transfers it enqueues (the 4B's bulk wire is 0.017 s here). Added in full it would move
      the rows only to -51..-47 % (4B) and -54..-53 % (30B bf16), against gaps of 0.16 s and 0.49 s. Not applied.
      Not timed, so a lower bound: the nccl4py calls themselves, ``record_stream``, and the vLLM ``pre`` / ``post``
      hooks.
    * A fixed cost per refit (a null result). What the timer holds, read at @7ea279ab: ``sync_weights`` only
      (nccl_reshard_weight_synchronizer.py l.103-130: one Ray dispatch to the training workers, one to the vLLM
      workers, two ``ray.get``). The synchronizer is "a pure data mover" (module docstring l.34-36): no
      ``offload_before_refit`` / ``offload_after_refit``, ``gc.collect``, sleep or wake, or ``reset_prefix_cache`` runs
      in it, and the async engine's call adds only ``_reset_encoder_cache_after_weight_update``
      (vllm_worker_async.py l.1524-1550). Unpriced in it: the vLLM call's route (``collective_rpc`` through the engine
      to its TP workers); one ``empty_cache`` on each training rank (megatron_policy_worker.py l.2899) and three on
      each vLLM rank (vllm_backend.py l.1167, 1181, 1190), after which every refit's misc buffers, 2 % of the card
      each (``get_target_packed_tensor_size``, nemo_rl/utils/packed_tensor.py l.24-31: 1.6 GiB on an 80 GB card), are
      fresh device allocations on both sides (``torch.cat`` l.108, ``torch.empty`` l.221); and vLLM's
      ``process_weights_after_loading`` over the model (``finalize``, bf16 too). No source times any of them. The
      published rows leave, over this model: Qwen3-4B +0.20 s, Qwen3-30B-A3B fp8 +0.25 s, DeepSeek-V3 H100
      +0.24 s (all three on the held-out half), Qwen3-30B-A3B bf16 +0.54 s and DeepSeek-V3 GB200 +0.68 s (the fit
      half), and on PR #2971's unscored rows +0.33 to +0.86 s (range midpoints). So it is not one constant: the
      residual does not follow the payload (the 4B's and DeepSeek-V3's are alike), the engine count (one engine
      +0.20 s, eight +0.24 to +0.68 s) or the training pipeline depth (PP 1 from +0.20 to +0.86 s), and it spreads
      about as widely as the published ranges (0.13-1.1 s wide). A constant fitted on the fit half (0.61 s) would
      take the 30B bf16 row inside 50 % (-62 -> +8 %) and the GB200 row to -3 %, but the 4B row from -73 to
      +149 %, the fp8 row from -7 to +11 % and DeepSeek-V3 H100 from -9 to +14 %, with no mechanism to carry it.
      Not applied."""
    if min(train_tp, train_pp, train_ep, train_etp, train_world, gen_tp, gen_engines, gpus_per_node) < 1:
        raise CardError("weight sync: nccl_reshard needs tp, pp, ep, etp, world, engines and gpus_per_node >= 1")
    if train_etp != 1:
        raise CardError(f"rollout.weight_transport nccl_reshard: parallel.expert_tensor_parallel must be 1 (NeMo RL's "
                        f"check_nccl_reshard_refit_support); got {train_etp}")
    pay = reshard_payload(spec, weight_bytes=weight_bytes, fp8=fp8, fp8_kept=fp8_kept)
    bulk_bytes, misc_bytes, bulk_calls, misc_tensors, scales = (pay.bulk_bytes, pay.misc_bytes, pay.bulk_calls,
                                                                pay.misc_tensors, pay.scale_tensors)
    routed_bytes, gated_bytes, misc_fp8_params = pay.routed_bytes, pay.gated_bytes, pay.misc_fp8_params
    link = collectives.ring_bus_bytes_per_s(rates=rates, crosses_nodes=inter_node, nic_bytes_per_s=nic_bytes_per_s,
                                            local_ranks=1)
    send_b, recv_b = bulk_bytes / train_world, bulk_bytes / gen_tp
    wire = max(send_b, recv_b) / link
    streams = min(train_pp, NRL_REFIT_NUM_STREAMS)
    # per call NCCL's latency of a grouped send / receive (one round: each rank's few peers) and, with more than one
    # vLLM instance, of the replica all-gather over ``gen_engines`` ranks, as NCCL's tuner prices them
    p2p_s = collectives.grouped_p2p_latency_s(ranks=2, nodes=2 if inter_node else 1)
    replica_s = 0.0
    if gen_engines > 1:
        per_node = max(1, gpus_per_node // gen_tp)
        ag = min(collectives.nccl_collective_choices(
            collective="all_gather", ranks=gen_engines,
            nodes=collectives.group_nodes(ranks=gen_engines, ranks_per_node=per_node),
            bus_bytes_per_s=link, intra_link=collectives.IntraLink.of(nvlink=rates.nvlink)),
            key=lambda c: c.seconds(recv_b / max(1, bulk_calls)))
        replica_s = ag.latency_s
    calls_s = bulk_calls * (p2p_s + replica_s) / streams
    # pre: the training rank stacks its local experts; post: each vLLM rank copies gate and up into the fused tensor
    stack = 2 * routed_bytes / (train_ep * train_pp) / rates.hbm_bytes_per_s
    fuse = 2 * gated_bytes / gen_tp / rates.hbm_bytes_per_s
    export = megatron_export_gather(spec=spec, tp=train_tp, pp=train_pp, ep=train_ep, etp=train_etp, world=train_world,
                                    gpus_per_node=gpus_per_node, rates=rates, nic_bytes_per_s=nic_bytes_per_s,
                                    ffn=False, fp8_scale_siblings=fp8)
    misc = weight_sync_seconds(
        mechanism=SyncMechanism.NCCL_BROADCAST, weight_bytes=misc_bytes, num_tensors=misc_tensors,
        train_shards=1, tp=gen_tp, rates=rates, engines=gen_engines, inter_node=inter_node,
        gpus_per_node=gpus_per_node, nic_bytes_per_s=nic_bytes_per_s, bucket_bytes=misc_bucket_bytes,
        s_per_tensor=misc_s_per_tensor, sender_node_ranks=sender_node_ranks,
        # the misc broadcast runs over model_update_group, every training rank and every vLLM rank (NRL_MISC_GROUP)
        trainer_group_ranks=train_world,
        receiver_cast_params=misc_fp8_params, receiver_cast_bytes_per_param=fp8_cast_bytes_per_param,
        trainer_gather=export)
    finalize = 2 * weight_bytes / gen_tp / rates.hbm_bytes_per_s if fp8 else 0.0
    bulk_s = wire + stack + fuse
    notes = (
        f"nccl_reshard: bulk FFN {bulk_bytes / 1e9:.3g} GB ({bulk_bytes / (bulk_bytes + misc_bytes):.1%} of the "
        f"payload) shard to shard: {send_b / 1e9:.3g} GB sent per training rank, {recv_b / 1e9:.3g} GB received per "
        f"vLLM rank at {link / 1e9:.0f} GB/s: {wire:.2f} s; {bulk_calls} xferdtensor calls over {streams} stream(s): "
        f"{calls_s:.2f} s; expert stacking and gate/up copies {stack + fuse:.2f} s",
        f"misc path {misc_bytes / 1e9:.3g} GB, {misc_tensors} tensors"
        + (f" ({scales} fp8 *_scale_inv siblings)" if scales else "")
        + f" by the packed broadcast after the bulk: {misc.total_s:.2f} s",
    ) + tuple(f"misc: {a}" for a in misc.assumptions) + (
        (f"fp8 finalize (process_weights_after_loading) over the rank's weights: {finalize:.2f} s",) if finalize else ()
    ) + (f"source: {NRL_RESHARD_SOURCE}",)
    return SyncTime(gather_s=misc.gather_s, transfer_s=bulk_s + misc.transfer_s + finalize,
                    per_tensor_s=calls_s + misc.per_tensor_s,
                    total_s=bulk_s + calls_s + misc.total_s + finalize, assumptions=notes)


CHECKPOINT_ENGINE_SOURCE = (
    "MoonshotAI/checkpoint-engine README.md ('Optimized Weight Broadcast', Benchmark), checkpoint_engine/ps.py "
    "(_detect_bucket_size lines 604-654, _copy_to_buffer lines 656-686, _update_per_bucket lines 723-870), "
    "checkpoint_engine/worker.py (update_weights_from_ipc, VllmColocateWorkerExtension), examples/update.py "
    "(split_checkpoint_files) @59a3c4ffa2e14c0c26e81f62642e2d3ed68253ab")
CHECKPOINT_ENGINE_MAX_BUCKET_BYTES = 8 * GIB
"""``PS_MAX_BUCKET_SIZE_GB`` default 8 (ps.py line 651 @59a3c4ff)."""
CHECKPOINT_ENGINE_MEM_FRACTION = 0.9
"""``PS_MEM_FRACTION`` default (ps.py ``ParameterServer.__init__`` @59a3c4ff): the share of the free device memory the
buffers may take."""


def checkpoint_engine_bucket_bytes(*, free_bytes: float, max_tensor_bytes: float = 0.0) -> float:
    """The bucket ``_detect_bucket_size`` picks (ps.py lines 604-654 @59a3c4ff): a third of ``PS_MEM_FRACTION`` of
    the free device memory (the H2D buffer and the two halves of the IPC buffer), capped at ``PS_MAX_BUCKET_SIZE_GB``
    but never below the largest tensor."""
    if free_bytes <= 0:
        raise CardError("rollout.gpu_memory_utilization: checkpoint_engine needs device memory beside the engine for"
                        " its buckets; allowed with weight_transport checkpoint_engine: below 1")
    return max(min(CHECKPOINT_ENGINE_MAX_BUCKET_BYTES, free_bytes * CHECKPOINT_ENGINE_MEM_FRACTION / 3),
               max_tensor_bytes)


def checkpoint_engine_seconds(*, weight_bytes: float, num_tensors: int, ranks: int, tp: int, gpus_per_node: int,
                              rates: DeviceRates, bucket_bytes: float, h2d_bytes_per_s: float,
                              nic_bytes_per_s: float = DEFAULT_INTER_NODE_BYTES_PER_S,
                              s_per_tensor: float = S_PER_TENSOR_SGLANG_LOAD, finalize: bool = False) -> SyncTime:
    """One ``ParameterServer.update`` without ``ranks`` (the Broadcast implementation) into vLLM, read from
    ``CHECKPOINT_ENGINE_SOURCE``.

    The checkpoint's files are split over the ``ranks`` GPUs of every engine instance (``split_checkpoint_files``), and
    each rank registers its part in pinned host memory and cuts it into buckets of ``bucket_bytes``
    (``checkpoint_engine_bucket_bytes``). Round ``i``: every rank copies its ``i``-th bucket to its H2D buffer, all at
    once (``_copy_to_buffer`` then a device synchronisation: ``h2d_bytes_per_s`` per GPU while the node's GPUs copy
    together); then, owner after owner, the owner copies it into one half of the IPC buffer and broadcasts it to every
    rank of the group (``dist.broadcast`` over all instances: NVLink in a node, the NICs of a node's GPUs across
    nodes), and every vLLM rank loads the previous bucket from the other half (the ZMQ reply is awaited after the
    next broadcast is enqueued) by ``model.load_weights`` on every tensor of it, each rank taking its slice. So the
    broadcasts and the loads run as two stages over the buckets, ``max(B, L) + min(B, L) / buckets``, the H2D copies
    do not overlap them, and each bucket adds a ZMQ round trip, an all-reduce of the return code and a
    synchronisation (``S_PER_BUCKET``).

    ``s_per_tensor``: the engine's ``load_weights`` per tensor and nothing else: one IPC buffer opened once, the
    tensors cut from it as views (``_extract_weights``), no request and no export per tensor;
    ``S_PER_TENSOR_SGLANG_LOAD`` by default, the only load-only measurement here (SGLang's; not vLLM's).
    ``finalize``: vLLM's
    ``process_weights_after_loading`` after the last bucket rewrites the rank's fp8 weights (one HBM pass over the
    rank's shard); ``weight_bytes`` and ``num_tensors`` are the checkpoint's as stored (fp8 with its scale tensors)."""
    if weight_bytes <= 0 or min(num_tensors, ranks, tp, gpus_per_node) < 1 or bucket_bytes <= 0 or h2d_bytes_per_s <= 0:
        raise CardError("weight sync: checkpoint_engine needs weight_bytes, bucket_bytes, h2d_bytes_per_s > 0 and "
                        "num_tensors, ranks, tp, gpus_per_node >= 1")
    share = weight_bytes / ranks
    rounds = ceil(share / bucket_bytes)
    buckets = rounds * ranks
    h2d = rounds * min(bucket_bytes, share) / h2d_bytes_per_s
    crosses = ranks > gpus_per_node
    bus = collectives.ring_bus_bytes_per_s(rates=rates, crosses_nodes=crosses, nic_bytes_per_s=nic_bytes_per_s,
                                           local_ranks=min(ranks, gpus_per_node))
    # NCCL's tuner per bucket's broadcast over the nodes the group spans (``collectives.nccl_broadcast``)
    per_call = collectives.nccl_broadcast(
        total_bytes=min(bucket_bytes, share), ranks=ranks,
        nodes=collectives.group_nodes(ranks=ranks, ranks_per_node=gpus_per_node), bus_bytes_per_s=bus,
        intra_link=collectives.IntraLink.of(nvlink=rates.nvlink))
    per_call = per_call.latency_s if per_call is not None else 0.0
    d2d = 2 * weight_bytes / rates.hbm_bytes_per_s  # each owner's copy into the IPC half, the owners in turn
    broadcast = weight_bytes / bus + buckets * per_call + d2d
    load = num_tensors * s_per_tensor + 2 * weight_bytes / tp / rates.hbm_bytes_per_s
    both = max(broadcast, load) + min(broadcast, load) / buckets
    host = buckets * S_PER_BUCKET
    post = 2 * weight_bytes / tp / rates.hbm_bytes_per_s if finalize else 0.0
    notes = (
        f"checkpoint_engine: {weight_bytes / 1e9:.3g} GB in host memory over {ranks} ranks, {buckets} bucket(s) of "
        f"{bucket_bytes / GIB:.2f} GiB in {rounds} round(s); H2D {h2d:.2f} s at {h2d_bytes_per_s / 1e9:.0f} GB/s"
        " per GPU",
        f"broadcast to all {ranks} ranks at {bus / 1e9:.0f} GB/s: {broadcast:.2f} s, beside vLLM's load_weights of "
        f"{num_tensors} tensors ({s_per_tensor * 1e3:.3f} ms each): {load:.2f} s; together {both:.2f} s",
        f"{buckets} bucket hand-offs (ZMQ, return-code all-reduce, synchronisation): {host:.2f} s"
        + (f"; fp8 finalize {post:.2f} s" if post else ""),
        f"source: {CHECKPOINT_ENGINE_SOURCE}",
    )
    # the loads the broadcasts leave exposed count as host time
    return SyncTime(gather_s=0.0, transfer_s=h2d + broadcast + post, per_tensor_s=both - broadcast + host,
                    total_s=h2d + both + host + post, assumptions=notes)
