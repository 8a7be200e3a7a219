"""One decode step of a vLLM-style engine: weights and KV read, FLOPs, tensor-parallel all-reduce, launch.

One decode step over ``B`` running sequences holding ``T`` context tokens (Pope et al. 2022,
"Efficiently Scaling Transformer Inference", §2; Kwon et al. 2023, PagedAttention, §2.2)::

    bandwidth = (rank weight bytes + T·kv_bytes_per_token/tp + B·(kv_bytes_per_token/tp + state)) / hbm_bytes_per_s
    compute   = (B·2·N + T·4·q_dim·full_attention_layers) / (matmul_flops_per_s · tp)
                (vLLM's FlashAttention-3 decode on Hopper: q_dim -> kv_heads·head_dim·max(heads/kv_heads, 64),
                 "Padded decode attention" below)
    comm      = 2·layers · all_reduce(B·hidden·2 bytes)                               (0 when tp = 1)
    launch    = eager: decode_kernels(spec, tp)·eager_s_per_kernel_of(rates, engine, spec=spec)   (layers x
                       kernels per layer; the engine's measured price within its scope, else
                       host_s_per_forward_kernel)
                CUDA graphs: one launch, host_s_per_forward_kernel
    core      = engine_s_per_step + B · ENGINE_S_PER_SEQUENCE      (engine core's host work, serial in both modes)
    gaps      = (decode_kernels(spec, tp) − all-reduce kernels) · GRAPH_KERNEL_GAP_S   (graphed and eager alike)
    G         = max(max(bandwidth + gaps, compute) + comm, launch) + core
                SGLang's overlap scheduler: max(max(bandwidth + gaps, compute) + comm, launch + engine_s_per_step)
                                            + B · ENGINE_S_PER_SEQUENCE
    multi-process engine: step = max(G, B · FRONTEND_S_PER_SEQUENCE)
    in-process engine:    step = G + FRONTEND_S_PER_STEP + B · FRONTEND_S_PER_SEQUENCE

``state``: a hybrid model's linear-attention state, read and written back by every running sequence every step
(``linear_state_step_bytes``; 0 for softmax attention only).

The rank's weight bytes are the model's ``weight_bytes`` times the rank's share of the parameters as vLLM shards
them (``rank_weight_bytes``): what vLLM replicates (norms, router gates, DeepSeek MLA's ``q_a`` / ``kv_a``
down-projections, KV heads when ``tp`` exceeds their number) every rank reads whole; DeepSeek-V3 at TP 32 reads
about 2 GB of replicated weights per rank per step (0.7 ms on an H100) that ``weight_bytes / tp`` leaves out.

A mixture-of-experts model reads only the experts its ``B`` tokens are routed to: with top-``k`` of
``E`` routed experts and routing taken as independent and uniform, a layer touches the expected
share ``1 − (1 − k/E)^B`` of its experts, so ``weight_bytes`` above is the dense part plus that share
of the routed experts' bytes (bf16). One sequence of Qwen3-30B-A3B (8 of 128) reads 6 % of its
experts per step, 64 sequences 98 %: the long tail of an MoE rollout is cheaper per step than its
bulk. Real routing is skewed, so the uniform share is an upper bound on the experts read.
Those routed experts stream through vLLM's Triton ``fused_moe`` kernel, not cuBLAS; on a card for which vLLM ships
no tuned tile config it runs the default tiles and reads them at ``fused_moe_read_bytes_per_s`` (below
``hbm_bytes_per_s`` on GB200: ``FUSED_MOE_UNTUNED_READ_BYTES_PER_S``).

**The tensor-parallel all-reduce** (``all_reduce`` above; ``TpAllReduce``): two per decoder layer (after attention
and after the MLP / MoE), on ``B·hidden`` bf16 activations. vLLM's ``CudaCommunicator.all_reduce`` runs its custom
all-reduce when ``CustomAllreduce.should_custom_ar`` takes the buffer, else NCCL (vllm-project/vllm
``vllm/distributed/device_communicators/cuda_communicator.py`` @00b5a01dd29b5e84c9434de139fbabd49e84efa6: "try quick
reduce first, then custom allreduce, and then pynccl"; quick reduce is ROCm only). The custom all-reduce
(``custom_all_reduce.py`` @00d618aab60448acdf3fac3e9c4e2e22d0c6c753) is disabled when the group spans hosts ("this
process group spans across nodes"), for a world size outside 2, 4, 6, 8, for more than two GPUs without full
NVLink ("not supported on more than two PCIe-only GPUs") and without peer-to-peer access; it takes buffers under
8 MiB. Its time is ``collectives.custom_all_reduce_seconds`` (one-shot / two-shot kernels, fitted on a published
H100 table); NCCL's is ``collectives.nccl_all_reduce`` (tuning.cc's latency and (algorithm, protocol) choice:
ring/tree x LL/LL128/Simple), on the link as the card has it: NVLink, PCIe (PCI hop latencies, no LL128), or,
for a group over several hosts, NCCL nodes over the NIC. Decode runs under CUDA graphs (vLLM captures the decode
batch sizes; ``custom_all_reduce`` registers the graph's buffers in ``capture()`` so the graph replays the kernel
without the eager input copy): the times above are device times, the launch is the graph's one launch. The
fitted custom all-reduce figures are eager (they include that copy), so a slight upper bound. Not modelled: the
torch / NCCL symmetric-memory all-reduce that newer vLLM versions put in front of the custom one for some sizes
on Hopper/Blackwell (``all_reduce_utils.py`` ``should_nccl_symm_mem_allreduce``, off unless enabled), NVLS.

**Custom all-reduce off** (``tp_all_reduce(custom_all_reduce=False)``). An engine built with
``disable_custom_all_reduce=True`` all-reduces every buffer through NCCL (vLLM's ``PyNcclCommunicator``, captured
into the decode graphs). verl builds every vLLM rollout so, and has since vLLM entered through its own wrapper:
the synchronous SPMD rollout (``vllm_rollout_spmd.py``: ``LLM(..., distributed_executor_backend=
"external_launcher", disable_custom_all_reduce=True)``, volcengine/verl v0.2.0.post2
fb532783ad3176b4f2a1acbe4f75a5d695b4e0b4 l.100, v0.4.1 8d9e350ea58c7ad4b50dd14d9dcb50577242c55f l.157, v0.5.0
8fdc4d3f202f41461f4de9f42a637228e342668b l.173, v0.6.1 d62da4950573d7a4b7ef2362337952e7ab59e78d l.239), the async
server (``vllm_async_server.py``: v0.4.1 l.174, v0.5.0 l.253, v0.6.1 l.230, v0.7.0
f9c855f7cf04d603c9546bc01776c74806a879c1 l.306), and, before vLLM 0.7, verl's patched vLLM 0.5.4 / 0.6.3, whose
``parallel_state.py`` builds the tensor-parallel group with ``use_custom_allreduce=False`` ("TODO: check why True is
not work in Ray trainer", v0.3.0.post1 ``verl/third_party/vllm/vllm_v_0_6_3/parallel_state.py`` l.144). verl's main
dropped the flag from the async server on 2026-01-27 (6a671a377a440ffdf0fc6bb8aa965dc37f3311f1, after v0.7.0), so a
later release runs vLLM's default, the custom kernel (``plan.rl_generation.engine_custom_all_reduce``).

NCCL's side was checked on the same in-graph benchmark as the custom kernel (``collectives``' custom all-reduce
comment: vLLM's ``benchmark_device_communicators.py``, ten all-reduces in a CUDA graph, bf16): ``pynccl`` on 6 H100
reads 23 / 25 / 32 / 43 / 47 / 53 us for 0.5 / 1 / 1.5 / 2 / 3 / 4 MiB (vllm-project/vllm PR #24111, 2025-09-02),
``nccl_all_reduce_choices`` 18.8 / 25.0 / 31.2 / 37.4 / 48.4 / 53.5 us; on 4 GPUs (PR #24532, 2025-09-09) 21 / 23 /
25 / 28 / 33 / 39 us against 15.8 / 21.4 / 26.9 / 32.5 / 39.3 / 43.9 us. Eager, 8 H20, 4-4096 B: 12.5-16.7 us
against 15.0 us (``collectives`` module docstring). So NCCL's small-buffer latency in the tuner's terms is not low
but for the smallest in-graph point (0.5 MiB, 18-25 % under); nothing is changed there. What made NCCL plan cheaper
than the custom kernel for decode-sized buffers was the custom kernel's first fit (read rate 4x slow, the published
sizes taken as bytes where they count float32 elements); with the refit, the plan's times for one all-reduce (us):

    buffer   TP 2 / 4 / 8: custom, first fit -> refit      NCCL (tuner), H100; A100 where it differs
    8 KiB    8.8 / 9.1 / 9.6 -> 8.8 / 8.9 / 9.0            7.9 / 10.3 / 15.1
    64 KiB   9.8 / 11.9 / 16.1 -> 9.1 / 9.6 / 10.7         8.3 / 10.9 / 15.8; 8.3 / 11.0 / 15.9
    512 KiB  17.2 / 28.7 / 30.8 -> 10.9 / 18.1 / 18.7      11.5 / 15.8 / 21.5; 12.1 / 16.6 / 22.4
    4 MiB    76.4 / 117.5 / 134.4 -> 26.0 / 40.6 / 44.9   26.5 / 43.9 / 62.2; 32.2 / 53.1 / 72.9

The custom kernel's figures are eager (an upper bound in a graph); the tuner's NCCL figures carry no launch (a graph
replay's), and an eager NCCL call also pays its host launch, which the eager step's per-kernel launch prices as any
other kernel's.

**An engine across hosts** (``TpLink``, ``tp_link``): a tensor-parallel group larger than the rollout GPUs of one
node (vLLM multi-node tensor parallel over Ray; NeMo RL runs DeepSeek-V3 at TP 32 on 8-GPU nodes) all-reduces
through NCCL over the NIC: its ring runs at the NICs of the group's GPUs in one node in parallel
(``collectives.ring_bus_bytes_per_s``) and NCCL's tuner prices the network steps (``hwLat[NET]``), each plus the
excess a measured two-node H100 all-reduce shows over the tuner (``collectives.NCCL_NET_STEP_EXCESS_S``, 18.2 us a
step, NVIDIA/nccl #1453; checked on a second 2 x 8 H100 InfiniBand cluster): DeepSeek-V3 at TP 32 over 4 nodes,
64 sequences, pays ~145 us per all-reduce (tree, 4 network steps) where the tuner alone gives ~72 us, 17.7 ms of a
~31 ms step. Published multi-node decode is slower still than this (SGLang DeepSeek-R1-0528 TP 16 on 2 x 8 H100
over InfiniBand, concurrency 1: TPOT 23.1 ms, tenstorrent/tt-inference-server issue #356, 2025-07-09; this model
~9.4 ms), so the across-hosts step stays an under-estimate. The engine's per-step round trip to its workers on
other hosts is ``TpLink.host_s_per_step`` (``engine_hosts``: vLLM's Ray compiled-graph executor, which NeMo RL and
OpenRLHF use for every engine of more than one GPU, pushes the ``SchedulerOutput`` to remote workers and their
outputs back over Ray's gRPC mutable-object channel; 1.38 ms a step from Ray's two-node compiled-graph benchmark less
its one-node echo), added to the engine core's serial host work. The kernel gaps (below) add ~1.2 ms to that
step; the rest of the gap to 23.1 ms is not modelled. A GB200 NVL72
rack is one NVLink domain of 72 GPUs over 4-GPU trays, each its own host
(https://www.nvidia.com/en-us/data-center/gb200-nvl72/): a group of up to 72 stays on NVLink (NCCL's multi-node
NVLink), but spans hosts, so it runs NCCL, not the custom all-reduce.

**Kernel gaps** (``GRAPH_KERNEL_GAP_S``). A CUDA graph removes the host's launch of each kernel, not the device's
boundary between two kernels: the next kernel's blocks start only once the previous kernel's last block is done,
and between them no weight streams. Hazy Research measured about 1.3 us per kernel on an H100 even with CUDA graphs
and traces vLLM's and SGLang's batch-1 Llama-3.2-1B decode (about a hundred kernels a step) to at most 50 % of the
H100's bandwidth for it ("Look Ma, No Bubbles!", https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles,
2025-05-27; the 1.3 us read 2026-12-02 through https://mlops.substack.com/p/one-megakernel-to-rule-llama-1b). The
gaps are a stall of the weight stream, so they add to the bandwidth term (``bandwidth + K x gap``), not a floor
under it (``max(bandwidth, K x gap)``: that would take a kernel's minimum duration, which the published figure is
not). ``K`` is ``decode_kernels(spec, tp)`` less the two all-reduces per layer, whose fitted latencies already hold
their kernels. An eager step pays them too, on the device side of ``max(device, launch)``: its kernels cross the
same boundaries (the figure is "even with CUDA graphs"), and the host's launch of the next kernel covers the gap only
when the launch is the slower side, which the ``max`` already takes. (Until the eager launch of a dense model was
priced at the engines' measured ~25 us, eager steps were launch-bound and priced with no gaps; at that price a large
eager batch is device-bound, and without the gaps it would run faster than the same batch graphed.)
The figure is an H100 one and is taken for every card. Programmatic dependent launch hides most of it (a 100-kernel
Llama-3.2-1B batch-1 step under CUDA graphs with PDL ran 979.5 us on an H100 against 972.8 us for the Hazy
megakernel: msaroufim/megakernels-vs-cuda-graphs ``llama/docs/RESULTS.md`` @e7b1b5eb0e1b22370aebe48638205f046fdac620);
vLLM's decode kernels do not launch with it, so the gap is kept whole. Per step: Llama-3.1-8B (320 kernels)
0.42 ms, Qwen3-30B-A3B (672) 0.87 ms, Qwen3-235B-A22B at TP 8 (1,316 outside the all-reduces) 1.71 ms, DeepSeek-V3
at TP 16 (1,257) 1.63 ms.

``ENGINE_S_PER_STEP`` is what the engine spends per step outside the GPU's kernels (scheduler,
input preparation, sampling, output processing): the residual of a published batch-1 TPOT once
the weight read and the kernel gaps are taken out (H100 SXM, Llama-3.1-8B bf16, vLLM 0.21, concurrency 1: TPOT p50
6.48 ms, InferenceBench concurrency-sweep recipe, https://yobitelcomm.github.io/bench/recipes/
concurrency-sweep/; the weight read at 90 % of 3.35 TB/s is 5.33 ms, the graph launch and KV
read ~0.03 ms: 1.1 ms, which was rounded down to 1 ms; less 320 kernels x 1.3 us = 0.42 ms of gaps: 0.58 ms), so
the Llama-3.1-8B point is planned as before and a model of more kernels per step than Llama-3.1-8B's 320 pays more.
``tests/compute/test_generation.py`` checks it on an independent A100 point.

**Host work per decode step: the engine core and the frontend** (``engine_multiprocess``). vLLM V1 splits an
engine into an ``EngineCore`` (scheduler, executor, model runner) and a frontend (``LLMEngine`` / ``AsyncLLM``:
turning the core's outputs into request outputs, incremental detokenization, stop checks). The core's busy loop
(``run_busy_loop`` -> ``_process_engine_step`` -> ``step_fn``) runs ``EngineCore.step`` one part after the other:
``scheduler.schedule()``, ``model_executor.execute_model(...)`` and its ``future.result()`` (the worker's input
preparation, the forward pass, sampling), then ``scheduler.update_from_output(...)`` (vllm-project/vllm
``vllm/v1/engine/core.py`` v0.11.2 lines 327-352, v0.20.0 lines 413-430; PyPI sdists
https://pypi.org/project/vllm/0.11.2/ and /0.20.0/, read 2026-12-01). The GPU waits while the core schedules,
prepares inputs and updates from the output, whether the core runs in its own process or in the caller's: that
host work, a constant (``engine_s_per_step``) and a part per running sequence (``ENGINE_S_PER_SEQUENCE``: the
scheduler's and ``update_from_output``'s per-request loops, the per-request input rows), is serial in both modes.
Only the frontend's work runs beside the GPU when the core has its own process (the frontend works on step ``n``
while the core runs step ``n+1``; vllm-project/vllm PR #9826, ``AsyncLLM``; Qwen2.5-1.5B ShareGPT offline throughput
27.81 vs 25.98 requests/s with ``VLLM_ENABLE_V1_MULTIPROCESSING`` on / off, PR #10241). With the variable at 0 the
core runs in the caller's process (``InprocClient.get_output`` calls ``engine_core.step_fn()``,
``core_client.py`` v0.11.2 line 267) and the frontend's work on each step (``FRONTEND_S_PER_STEP`` + ``B ·
FRONTEND_S_PER_SEQUENCE``) adds to it too. NeMo RL sets it to 0 for its synchronous vLLM workers
(NVIDIA-NeMo/RL ``nemo_rl/models/generation/vllm/vllm_worker.py`` line 112 @9dbd9adc95a10f5946cceb36e1d5b31e2429e470,
still at @7ea279abfbeb698b092856d0dab61e7cf39bc909 line 243) and drives ``vllm.LLM`` in-process; its
``async_engine`` runs ``AsyncLLM`` (multi-process); verl serves through ``AsyncLLM`` (verl-project/verl
``verl/workers/rollout/vllm_rollout/vllm_async_server.py`` @1dda039b9c6311889a9c9a26040677e1254814f9) and OpenRLHF
through ``vllm.AsyncLLMEngine`` (``openrlhf/trainer/ray/vllm_engine.py`` @3c3be6234e0cb353e76bb8019947db9dfe99fca7
sets the variable to 0 only for ``full_determinism``).

*Async scheduling* is what would take the core's work off the GPU's path: with
``SchedulerConfig.async_scheduling`` the executor reports ``max_concurrent_batches`` 2 and the core runs
``step_with_batch_queue``, scheduling step ``n+1`` while step ``n`` runs (``core.py`` v0.11.2 lines 175-181 and
200-202, ``vllm/v1/executor/uniproc_executor.py`` line 59, ``multiproc_executor.py`` line 412, ``ray_executor.py``
line 114). It is off by default up to vLLM 0.13 (``async_scheduling: bool = False``, ``vllm/config/scheduler.py``
v0.11.0 line 138, v0.11.2 line 140, v0.13.0 line 133) and on by default from 0.14.0 (``Field(default=None)``,
resolved in ``VllmConfig.__post_init__``, ``vllm/config/vllm.py`` v0.14.0 lines 588-628) unless pipeline
parallel > 1, a non-EAGLE speculative decoder or an executor without it: only ``mp``, ``uni`` and
``external_launcher`` in 0.14-0.17.1 (``vllm.py`` v0.17.1 line 682), ``Executor.supports_async_scheduling()`` in
0.20.0, False for the Ray executor (``vllm/v1/executor/abstract.py`` v0.20.0 line 368, not overridden in
``ray_executor.py``). NeMo RL pins vLLM 0.10.0 (tag v0.4.0), 0.11.0 (@cff17f83b), 0.11.2 (v0.5.0,
@9dbd9adc95a10f5946cceb36e1d5b31e2429e470), 0.17.1 (v0.6.0) and 0.20.0 (v0.7.0, @aea463dd2dad3c9dd39d92df3a1616647c8ff45a)
(``pyproject.toml``), never sets ``async_scheduling`` and runs an engine of more than one GPU on the Ray executor
(``distributed_executor_backend = "ray"``, ``vllm_worker.py`` line 310 @aea463dd2dad3c9dd39d92df3a1616647c8ff45a);
the verl rows of the benchmark that name their vLLM ran 0.7 / 0.8.3, before async scheduling. So the step here has none: the
exception is a one-GPU NeMo RL engine on vLLM >= 0.14 (``uni`` executor, async scheduling on by default), which
the card cannot say yet (2 benchmark rows: the v0.20 Qwen3-30B-A3B GB200 ones).

**SGLang's overlap scheduler** (``rollout.engine: sglang``; ``overlap_schedule``, ``rollout.sglang_overlap_schedule``).
SGLang's scheduler runs one batch ahead of the GPU: ``Scheduler.event_loop_overlap`` receives requests, builds the
next batch (``get_next_batch_to_run``), hands it to the model worker (``run_batch``) and only then processes the
previous batch's result (``process_batch_result``), so scheduling step ``n+1`` and processing step ``n-1``'s tokens
run while the GPU runs step ``n``; the next step's input ids are "future" token ids resolved on the GPU
(sgl-project/sglang ``python/sglang/srt/managers/scheduler.py`` l.402-437 and ``tp_worker_overlap_thread.py``
l.109-167 of the 0.4.0.post2 wheel: a forward thread launches the batch on its own stream, ``resolve_batch_result``
waits on the batch's ``copy_done`` event; in 0.5.6.post2 the scheduler thread itself launches the forward on a
forward stream and the sampling after the previous result, ``scheduler.py`` l.1005-1063, l.1968-2108; wheels
https://pypi.org/project/sglang/0.4.0.post2/ and /0.5.6.post2/, read 2026-12-03). It has been on by default since
0.3.6 (``--disable-overlap-schedule``, ``server_args.py`` l.127 of the 0.3.6 wheel, l.133 of 0.4.0.post2;
sgl-project/sglang PR #2067, 2024-11-18, "Enable overlap by default"; 0.3.5 has ``enable_overlap_schedule: bool =
False``, l.121), so a card pinning an earlier release runs it off (``plan.rl_generation.sglang_scheduler_inputs``). SGLang turns it off for embedding models and, in 0.4.0, multimodal models
(``scheduler.py`` l.174-181) and DP attention (``server_args.py`` l.220-225); in 0.5.6.post2 for pipeline parallel
(l.1675-1677), speculative decoding without ``SGLANG_ENABLE_SPEC_V2`` (l.1754-1755, l.1840), Qwen3-Next and the
NemotronH family while their Mamba radix cache is on (l.1291-1297, l.1336-1342) and diffusion LLMs (l.2096-2100).
With a grammar, 0.4.0's sampler of step ``n+1`` waits for step ``n``'s result processing (``ModelRunner.sample``,
``model_executor/model_runner.py`` l.704-708). The launch and the scheduler's work share one Python process (a
thread and the GIL in 0.4, one thread in 0.5.6; sgl-project/sglang issue #10514, 2025-09-16, names that contention),
so the host side of a step is the launch plus the host work, and the step is
``max(device, launch + engine_s_per_step) + B · ENGINE_S_PER_SEQUENCE`` (``overlap_schedule_step_seconds``) where
the serial engine gives ``max(device, launch) + engine_s_per_step + B · ENGINE_S_PER_SEQUENCE``
(``serial_schedule_step_seconds``).

Only the per-step constant (the batch-1 host residual above) is hidden: no source gives SGLang's host cost per
running request, and the per-sequence constant, fitted on vLLM rows, is not that. SGLang's own measurements of
the overlap put its gain near 10 %: "10% throughput improvement even when radix cache is turned off" (Llama-3.1-8B,
3,000 ShareGPT prompts, sgl-project/sglang PR #1738, 2024-10-21) and "Zero-overhead batch scheduler: 1.1x increase
in throughput" (SGLang v0.4 release blog, https://lmsys.org/blog/2024-12-04-sglang-v0-4/, 2024-12-04, read
2026-12-03 through its copy at https://openlm.ai/sglang-v0.4). For Llama-3.1-8B on an H100 at 128 running sequences of
700 context tokens this model gives 1.03x with only the constant hidden, 1.17x if vLLM's published host gap (19.2 us
per sequence, vLLM issue #10634, below) were hidden too and 1.88x (1.64x at 256 sequences) if the whole 80 us were:
so at most a small part of the 80 us is host work SGLang overlaps, and it stays serial. On the scored SGLang rows
(``benchmarks/step_times.py``; all serial, then the overlap with the per-sequence part hidden at 0 / 19.2 / 80 us):
RLinf's R1-Distill-1.5B H100 generation +13.0 -> +7.0 / -5.8 / -30.6 %, its step +5.1 -> +0.5 / -9.3 / -28.4 %;
AReaL v0.2's H800 rows (SGLang 0.4.0.post2, graphs up to 160) 1.5B on 8 GPUs +10.4 -> +9.2 / +4.5 / +2.6 %, on 32
+4.9 -> +3.6 / +1.2 / -6.1 %, on 128 -25.5 -> -29.6 / -34.7 / -46.1 %, 7B on 32 -7.2 -> -8.3 / -11.2 / -18.2 %, on
128 -24.3 -> -26.2 / -28.7 / -36.4 %, 32B 0.0 -> -1.3 / -6.1 / -21.3 %; verl PR #5596's eager GB200 row is
host-bound and does not move. The values were not chosen by these rows: 0 is the absence of a source.

Not modelled: SGLang's admission. A new request needs its prompt plus min(``max_new_tokens``, 4,096) free tokens after
every running request's min(remaining ``max_new_tokens``, 4,096) x ``new_token_ratio`` is set aside (0.7 at first,
decaying to 0.1 over 600 steps; ``managers/schedule_policy.py`` l.33-35, l.208-219, l.341-352 and ``global_config.py``
l.17-25 of 0.4.0.post2), and running requests are retracted when the pool runs out (``retract_decode``). With a
27,648-token limit the estimate is clipped at 4,096, so, like vLLM's admission on the KV held
(``continuous_batching``), it admits more long responses than the pool keeps to the end.

**CUDA graph batch limit** (``cuda_graph_max_batch``; ``sglang_cuda_graph_max_batch``). SGLang replays a CUDA
graph only up to the largest batch it captured (``CudaGraphRunner.can_run``); a larger decode batch runs eagerly,
every kernel launched (``launch`` at ``decode_kernels``) and no kernel gaps. The default limit depends on the
release and the GPU's memory: 160 on an 80 GB GPU from 0.4.0 to 0.5.2, 256 / 512 from 0.5.4
(``sglang_cuda_graph_max_batch``). The card gives the release as ``software.sglang``; a card without it is
planned at the newest release read (0.5.6, ``plan.rl_generation.SGLANG_NEWEST_RELEASE_READ``), a release before
0.4.0 or a pin that names none (a branch, a commit) gets no limit. vLLM's captured sizes (up to 512 by default, 0.8.3, below) are not limited here.

**The measured eager price, within its scope** (``measured_eager_s_per_kernel``). An eager decode step (vLLM
``enforce_eager``, SGLang ``disable_cuda_graph`` or a batch above its largest captured graph) issues
``decode_kernels`` kernels at the engine's rate field, which a calibration may set
(``compute.rates.ENGINE_HOST_FIELDS``). Unset, a step of vLLM's V1 engine or of SGLang on a model whose decoder
layers are all softmax attention with a dense MLP is priced at the engine's published measurement: DeepSpeed PR
#8352's GPT-2 decode on one H200, eager against CUDA graphs (``rates.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED``,
25.1 us; ``rates.SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED``, 27.4 us). Both engines run the forward grad-free
(below), which is why they issue a kernel faster than a transformers training forward (65 us,
``host_s_per_forward_kernel``, module hooks and autograd recording included). Outside the measurement's scope the
step keeps ``host_s_per_forward_kernel``: (1) vLLM's V0 engine (``rollout.vllm_engine`` v0: the measurement's
"verl / vLLM" path is V1's, whose piecewise-compiled graphs it compares against, and V0's per-sequence host constant
``ENGINE_V0_S_PER_SEQUENCE`` was fitted with the 65 us in place); (2) routed experts, latent attention and Gated
DeltaNet layers, whose eager paths run torch ops the GPT-2 forward does not have (DeepSeek's grouped top-k under
``torch.compile``, MLA's absorbed batched matmuls and copies, the GDN copies listed below) and whose kernel counts
``decode_kernels`` states low; no per-kernel price of those paths is published. Within the scope the kernel count
is the GPT-2-like layer's ``DECODE_KERNELS_PER_LAYER`` (norm, QKV, rotary, cache write, attention, O, add+norm,
gate/up, activation, down), the kinds the measurement times.

Measured (``benchmarks/step_times.py``, tree of 0930ec8 with the DeepScaleR rows' engine read as V0, against that
tree): the generation subset's median |error| 17.2 -> 17.2 % (beyond 50 %: 4 -> 1: play-verl Qwen2-7B ``min`` +61
-> -20 %, ``rec`` +74 -> +22 %, verl PR #5596's SGLang GB200 phase +65 -> +38 %), rows without a published mean
response 22.6 -> 22.6 % (10 -> 7: verl's fully-async H20 64-GPU phase +90 -> +7 %, one-step-off colocated Megatron
+55 -> +15 %, async FSDP2 +66 -> +41 %), RL step 13.4 -> 14.2 % (2 -> 2), all rows 10.0 -> 10.1 % (47 -> 41). Made
worse: the H20 Qwen2.5-Math-7B colocated 32-GPU and one-step-off FSDP2 phases +3 / +4 -> -32 / -33 %, the 128-GPU one
+33 -> -33 %, play-verl Qwen2-7B ``min`` step -10 -> -31 %: the RL step median worsens by 0.8 points. The phase the
trainer waits for is the slowest engine's (``generation`` module docstring, "The slowest engine"); with it the RL step
median returns to 13.4 % and those phases to -25 / -25 / -9 %.

The paragraphs below are the history of this price: the measured figures applied to every model (the MoE, MLA and
Gated DeltaNet rows broke), with refitted host constants, and a per-call cost.

**The eager decode launch, one rule for both engines** (superseded by the paragraph above for the models and engines
in the measurement's scope). Before it, both engines' eager kernels were priced at ``host_s_per_forward_kernel``, the
transformers training-forward figure (65 us), by the same rule. The published engine figures were kept as
measurements, not defaults: DeepSpeed PR #8352 (GPT-2, one H200, eager against CUDA graphs, over the 32 graphed
decode forwards of 140 kernels) gives SGLang 27.4 us and vLLM
25.1 us per kernel (``rates.SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED``,
``rates.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED``). SGLang's scheduler loops run the forward grad-free (``@DynamicGradMode()`` on ``event_loop_normal`` /
``event_loop_overlap``, ``sglang/srt/managers/scheduler.py`` l.979-1005 of the 0.5.6.post2 wheel,
https://pypi.org/project/sglang/0.5.6.post2/, read 2026-12-03), and so does vLLM's (``torch.inference_mode()``,
below): the mechanism that makes the measured price lower than the training figure is the same in both engines, so a
split keyed on the engine would be chosen by its effect on the rows alone.

Null result, both measured figures applied (``benchmarks/step_times.py`` on the tree of d51490c, vLLM 25.1 us and
SGLang 27.4 us against 65 us for both): median |error| of the generation subset 17.2 -> 27.6 % (beyond 50 %: 3 -> 3),
RL step 14.2 -> 15.3 % (2 -> 3), mean response not published 18.0 -> 24.2 %; ALL 10.1 -> 10.2 % (39 -> 40). Rows
helped: verl's fully-async Qwen2.5-Math-7B H20 64-GPU generation +90 -> +7 %, play-verl Qwen2-7B ``rec`` +74 -> +22 %
and ``min`` +61 -> -20 %, one-step-off colocated Megatron +55 -> +15 %, verl PR #5596's SGLang GB200 phase +65 ->
+38 %. Rows broken, none explained by a mechanism read here: DeepSeek-V3 on H20 generation -12 -> -61 % (step -17 ->
-48 %; ``decode_kernels`` counts DeepSeek's grouped top-k and the absorbed MLA matmuls low, see
``MOE_EXTRA_KERNELS`` and ``MLA_EXTRA_KERNELS``, but no kernel count of those eager paths is read); SkyRL's eager
Qwen3.5-9B baseline generation -14 -> -63 % (step -17 -> -54 %; its Gated DeltaNet layers are counted at 16 kernels
from vLLM's packed decode, the unpacked path's 4 more would not close it); play-verl GRPO Qwen2.5-0.5B
generation -16 -> -53 % (vLLM V0 by its XFORMERS fallback: V0's Python scheduling and sampling per step, priced by
``ENGINE_V0_S_PER_SEQUENCE``, fitted with the 65 us in place); NeMo RL v0.5 DAPO DeepSeek-V3 512-GPU step -49 -> -69
%; rllm's DeepScaleR-1.5B H200 step -35 -> -58 %; verl's fully-async Qwen3-30B-A3B 128-GPU generation +27 -> -43 %;
the MI300X deepseek-llm-7b generation 0 / +24 -> -42 / -26 % (ROCm hosts). SGLang alone at 27.4 us (vLLM at 65 us)
moves only verl PR #5596's row (+65 -> +38 %) and AReaL v0.2's H800 steps (0.4-7 points): that was the split of
1877794, reverted here because it rests on the rows' effect only. ``ENGINE_S_PER_SEQUENCE`` and
``FRONTEND_S_PER_STEP`` were fitted with the 65 us in place (below), so the measured figures need those refitted with
them and the missing kernel counts above; until then a calibration sets the engine fields.

Null result, the measured figures as defaults with the eager kernels read and the host constants refitted on the
fit half (``benchmarks/step_times.py`` on the tree of a75453f, 2026-12-03). (1) vLLM 25.1 us and SGLang 27.4 us per
eager kernel as the engines' defaults. (2) The eager-only kernels read in the vLLM 0.8.5 sdist
(https://pypi.org/project/vllm/0.8.5/, read 2026-12-03). V1 compiles the model with inductor and custom ops off only
when not ``enforce_eager`` (``vllm/config.py`` l.3884-3891), so these count for eager steps only, not for the graph
steps' kernel gaps:

- DeepSeek's absorbed MLA decode, 10 a layer beyond ``MLA_EXTRA_KERNELS``: ``q_a_proj`` and ``kv_a_proj_with_mqa``
  as two GEMMs and ``kv_c.contiguous()`` (``vllm/model_executor/models/deepseek_v2.py`` l.470-477); the ``W_UK_T``
  batched matmul (``vllm/v1/attention/backends/mla/common.py`` l.700-710), ``decode_q_pe.contiguous()`` and the two
  copies of the rotated ``q_pe`` / ``k_pe`` back (l.938-942), the ``torch.cat`` of the query
  (``mla/flashmla.py`` l.133), the ``W_UV`` batched matmul and its ``transpose(0, 1).reshape`` copy (``common.py``
  l.690-697), the copy into ``output[:num_decode_tokens]`` (l.970-972);
- DeepSeek's YaRN rotary in torch ops (``DeepseekScalingRotaryEmbedding.forward``,
  ``vllm/model_executor/layers/rotary_embedding.py`` l.779-815, ``_rotate_gptj`` l.42-46, non-NeoX at
  ``deepseek_v2.py`` l.421-427): the cache gather, two ``repeat_interleave`` (2 each), and per query and key the
  negation, ``stack`` and ``x * cos + rotate(x) * sin``: 15 where one is counted;
- DeepSeek's ``grouped_topk``, ``torch.compile(dynamic=True)`` even under ``enforce_eager``
  (``vllm/model_executor/layers/fused_moe/fused_moe.py`` l.887-944): its three aten ``topk`` and about five
  generated kernels around them where one is counted, plus the ``routed_scaling_factor`` multiply
  (``deepseek_v2.py`` l.157-160): 8 more per routed layer (the count follows the compiled function's structure,
  it was not traced);
- Qwen3's ``q_norm`` / ``k_norm``: 2 a layer (a custom-op kernel each; 0.8.5 itself runs ``forward_native``, eight
  torch ops each, ``qwen3.py`` l.136-140, ``qwen3_moe.py`` l.228-233, ``layers/layernorm.py`` l.117-143, but the
  card does not give the release). Qwen3-MoE's renormalisation runs inside ``topk_softmax`` at 0.8.5
  (``fused_moe.py`` l.856-881): nothing added. Gated DeltaNet was not recounted: recent vLLM fuses Qwen3.5's split,
  QK norm, rotary and gate into one kernel (``fused_qk_rmsnorm_rope_gate``, ``vllm/model_executor/models/
  qwen3_next.py`` @002d6073aa034d4f5545d45021b0e56d1f3c3593), and the card does not give the SkyRL row's release.

DeepSeek-V3 at TP 32: 3,307 eager kernels a step against the 1,379 of ``decode_kernels``; Qwen3-8B 432 against
360. (3) The constants fitted with 65 us in place, refitted the way they were fitted: a grid on the fit half
(``half_of(id) == 0``; RL step and RL generation-phase rows, 46 rows; median |error|, ties broken by the mean),
one constant at a time, then jointly around the optimum. ``ENGINE_S_PER_SEQUENCE`` 60 / 80 / 100 / 120 us:
15.30 / 14.90 / 15.42 / 15.79 %; ``ENGINE_V0_S_PER_SEQUENCE`` 80 / 120 / 160 / 200 / 240 / 300 us: 14.90 / 14.90 /
14.21 / 14.21 / 14.90 / 14.21 % (means 18.06 / 17.87 / 17.96 % at 160 / 200 / 300); ``FRONTEND_S_PER_STEP`` 0 / 1 /
2 / 4 / 8 ms: 15.29 / 14.90 / 14.90 / 15.46 / 16.46 %; jointly (65-80 us x 160 / 200 us, then 1-4 ms) best at 70
us, 200 us and 3 ms: fit half 12.96 % (mean 18.07 %) against 14.90 % (17.77 %) as it is. Held-out half, as it is
-> refitted: generation 37.2 -> 26.7 % (beyond 50 %: 4 -> 1), RL step 12.8 -> 14.2 % (1 -> 2), mean response not
published 16.6 -> 16.5 % (6 -> 6); whole subsets: generation 17.2 -> 19.7 %, RL step 14.2 -> 14.2 % (2 -> 4), not
published 18.0 -> 20.2 % (6 -> 7); ALL 9.9 -> 9.9 % (41 -> 41). Not kept: the held-out RL steps get worse and two
rows go beyond 50 %: SkyRL's eager Qwen3.5-9B step -17 -> -54 % (generation -14 -> -63 %) and rllm's DeepScaleR-1.5B
H200 step -35 -> -59 %. Helped: DeepSeek-V3 on H20 generation -12 -> -18 % (the counts; -61 % without them), verl's
fully-async Qwen2.5-Math-7B 64-GPU generation +90 -> +2 %, play-verl Qwen2-7B ``rec`` +74 -> +12 %, one-step-off
colocated Megatron +55 -> +8 %, AReaL v0.1's 7B H800 step -34 -> +9 %. Broken besides: verl's fully-async
Qwen3-30B-A3B H20 step +5 -> -41 % (fit half), the H20 Qwen2.5-Math-7B colocated FSDP2 and 32-GPU generations +4 / +3
-> -36 %, play-verl's Qwen2.5-0.5B PPO generation 0 -> +42 % (V0 at 200 us), Marin's generation -48 -> -75 %. The
counts alone at 65 us take the held-out generation from 37.2 to 39.8 % (beyond 50 %: 4 -> 5), so neither part is
kept alone. What breaks are V1 eager engines of 1.5-9B models (verl, SkyRL, rllm) whose phase the 65 us offsets: the
per-call cost of the play-verl intercept (below) is still missing, and no refit of the per-sequence, V0 or
in-process constants stands in for it.

Null result, a fixed cost per generation call under the measured price (``benchmarks/step_times.py`` on the tree of
4b1ed8b, 2026-12-03; "the attempt" is the previous paragraph's change: 25.1 / 27.4 us, the eager kernels read in vLLM
0.8.5, the host constants at 70 us / 200 us / 3 ms). (1) The per-call cost the play-verl log measures: ``timing_s/gen``
of dingxianzhong/play-verl ``logs/verl_qwen2_7b_min.log`` @7716a615fc4b68961f2bb7716c9aadcd65ca28d2 (111 steps: step 1
and the 28 steps with ``timing_s/testing`` or ``timing_s/save_checkpoint`` left out; ``response_length/max`` 363-1,024,
mean 150-242) by least squares is 4.43 +- 0.36 s + 8.25 +- 0.40 ms x max (rmse 0.89 s); with the mean as a second
regressor 4.88 +- 0.94 s + 8.27 +- 0.41 ms x max - 2.8 +- 5.4 ms x mean, i.e. 4.41 +- 0.36 s at the run's mean response
(168 tokens). The plan's own per-call work inside that timer is 2.07 s (sleep/wake 1.33, weight sync 0.30, the 20 %
offload share of 1.52, prefill 0.11, controller transfer 0.03), so the log asks for 2.3-2.4 s more per call. The same
regression on ``logs/verl_qwen2_7b_recommended.log`` (TP 2, 55 steps) gives 1.7 +- 4.1 s: no second measurement of it.
(2) Where it could be, read: verl's sharding manager and post-processing take 0.86 s in all for SmolLM2-135M on one GPU,
but RLinf's verl run of a 7B on 64 GPUs times 4.19 s of ``reshard`` and up to 3.94 s after the engine call (the
paragraph "verl's ``gen`` timer, operation by operation" below), so for a 7B the work outside the engine can hold the
4.4 s; the plan prices its weight copies and sync (the 2.07 s above), and what it leaves unpriced there (four
``empty_cache``, ``gc.collect``, ``reset_prefix_cache``) was not measured; vLLM 0.8.5's ``LLM.generate`` (the log's
engine is 0.8.3) adds each prompt through ``Processor.process_inputs``, ``OutputProcessor.add_request`` and
``EngineCore.add_request`` (``vllm/entrypoints/llm.py`` l.1314-1360, ``vllm/v1/engine/llm_engine.py`` l.171-208 of the
sdist, https://pypi.org/project/vllm/0.8.5/) and then steps the engine until it is empty (``llm.py`` l.1405-1430): work
per request (64 a engine on this run), not per call, and no warm-up or cache reset per call beyond
``reset_prefix_cache`` in ``sleep``. No per-call term beyond those was found in the code, and none was measured here (no
vLLM in the CPU environment). (3) Added anyway, 2.4 s on the ``gen`` timer and step of every verl vLLM row mapped
colocated with no ``rollout.async`` in its entry (the fully-async H20 rows among them, +1-2 points) on top of the
attempt: held-out generation 26.7 -> 26.8 % (beyond 50 %: 1 -> 2, play-verl Qwen2.5-0.5B PPO +42 -> +69 %), held-out RL
step 14.2 -> 13.9 % (12.8 % as it is), fit-half RL step 14.0 -> 12.0 %; play-verl Qwen2-7B ``min`` -21 -> 0 %, ``rec``
+12 -> +22 %. The rows the attempt breaks do not move: at 25.1 us they lack 115-235 s a step with one generation phase a
step (rllm DeepScaleR-1.5B H200 235 s, SkyRL Qwen3.5-9B 217 s, verl fully-async Qwen3-30B-A3B 206 s, the H20
Qwen2.5-Math-7B colocated generations 115 / 128 s), 50-100 times the play-verl intercept: what the 65 us offsets there
grows with the decode steps, not with the calls. (4) The price each row implies (the plan interpolated per row between
25.1 and 65 us with the attempt's counts and constants; held-out generation / RL step medians 26.7 / 14.2 % at 25.1 us,
36.9 / 14.2 % at 45 us, 38.6 / 13.9 % at 65 us, against 37.2 / 12.8 % as it is): verl fully-async Qwen2.5-Math-7B on
H20, one framework, engine, model and GPU, generation 66 / 24 / 46 us at 32 / 64 / 128 GPUs; one-step-off colocated
FSDP2 64 us against Megatron 17 us; play-verl Qwen2-7B ``min`` 35 us, ``rec`` 16 us; Qwen3-30B-A3B fully-async 45 us;
DeepSeek-V3 H20 31 us; SkyRL Qwen3.5-9B 75 us; rllm DeepScaleR-1.5B steps 102 / 128 us (A100 / H200); Marin 114 us; the
V0 and ROCm phases -33 to 59 us. Rows whose cards state the same engine, framework and release (the H20 rows) ask for
prices 2-4x apart, so neither a per-call constant nor a per-kernel price keyed on those fields reconciles them; the
launch stays at ``host_s_per_forward_kernel`` and the attempt is not applied.

**Eager decode against published per-step logs (a known gap, not yet modelled).** The eager launch above prices
every kernel at ``host_s_per_forward_kernel`` (65 us, fitted on transformers *training* forwards: module hooks and
autograd recording included). vLLM runs its model under ``torch.inference_mode()`` with fused custom ops
(``GPUModelRunner.execute_model``, ``vllm/v1/worker/gpu_model_runner.py`` line 974 of the v0.8.3 wheel,
https://pypi.org/project/vllm/0.8.3/, read 2026-12-02). A run that logs each step's longest response measures its
one-sequence eager step: the slope of ``timing_s/gen`` over ``response_length/max`` across the run's steps (the
phase ends with the longest sequence, alone in its engine; least squares with the mean length and a step trend
as further regressors). dingxianzhong/play-verl ``logs/verl_qwen2_7b_min.log`` @7716a615fc4b68961f2bb7716c9aadcd65ca28d2
(Qwen2-7B-Instruct, one H100 per engine, vLLM 0.8.3 V1 eager, 111 steps): 8.3 +- 0.4 ms, where this model gives
19.3 ms (280 kernels x 65 us + 1.1 ms); yushengsu-thu/verl_training_log ``gsm8k/grpo_run_deepseek7b_llm.log`` and
``ppo_run_deepseek7b_llm.log`` @deb1507ca0740580d2019e7150d08edf8dd6ca35 (deepseek-llm-7b, MI300X, TP 2 and 4,
1007 steps each): 12.9 +- 0.3 and 14.5 +- 0.7 ms against 24.5 ms, i.e. ~26 us per kernel (H100, vLLM 0.8.3) and
~33-38 us (those ROCm hosts). The same regressions give each run's cost per generated token of an engine: play-verl
(vLLM 0.8.3) 37 +- 12 us (Qwen2-7B TP 2, up to 1024 running), 61 +- 18 us (Qwen2.5-0.5B, up to 256), 123 +- 20 us
(0.5B, up to 64); the ROCm runs 185 +- 13 and 221 +- 16 us. Those play-verl figures compare engine generations, not
model sizes: the Qwen2.5-0.5B runs' launch scripts export ``VLLM_ATTENTION_BACKEND=XFORMERS``, which vLLM 0.8.3
answers with "Falling back to V0" (``arg_utils.py`` line 1708, printed in both logs), while the Qwen2-7B scripts
unset it and their logs show ``vllm.v1.worker.gpu_worker.Worker`` (examples/tuning/*.sh and logs/*.log, same
commit). The fixed part shows in the V1 run too: ``timing_s/gen`` = 4.43 +- 0.36 s + 8.25 +- 0.40 ms x
``response_length/max`` (min log, 111 steps); the plan's weight sync, sleep/wake, offload share and prefill (2.0 s)
and the bulk's per-sequence work above one-sequence steps (64 x 168 tokens x 36-80 us) leave 1.5-2 s of it, so the
per-phase cost below is a fixed cost per ``gen`` call, not a per-step one, in V0 and V1 alike. The planned eager
rows of ``benchmarks/step_times.py`` land near their published phase only where the over-priced launch offsets what
the plan leaves out: at 26 us per kernel the play-verl phases of Qwen2.5-0.5B (two runs) and Qwen2-7B (TP 1) all
read 2.4-2.6 s short (Qwen2-7B at TP 2, 1024 running, 22 % long: its lower per-token cost), a per-phase cost of
verl's ``gen`` timer outside the decode that does not grow with the model (candidates in the sharding manager: FSDP
``state_dict()``, a ``full_tensor()`` and ``load_weights`` per tensor, the ``empty_cache`` calls, vLLM 0.8.3
``CuMemAllocator.sleep``'s ``gc.collect()``, ``vllm/device_allocator/cumem.py`` line 208), where the plan has
0.3-0.9 s of weight sync and sleep/wake; the ROCm runs need their larger per-token cost; DeepSeek-V3's eager step
(H20, TP 32) launches more kernels than ``decode_kernels`` counts (grouped top-k in torch ops, the absorbed MLA
matmuls). So the launch stays at the training figure until those are modelled with it: 26 us alone moves the
generation subset's median from 15 % to 34 % and its held-out RL steps from 15 % to 19 %.
``tests/compute/test_eager_decode_evidence.py`` holds the one-sequence step against the play-verl measurement
(strict xfail). A fourth source agrees: vLLM and SGLang eager against CUDA graphs on one H200 (GPT-2, batch 1;
deepspeedai/DeepSpeed PR #8352, 2026-09-22) give 25 and 27 us per kernel; ``decode_kernels`` also leaves out
Qwen3's ``q_norm`` / ``k_norm`` (2 a layer); both in ``tests/compute/test_engine_eager_host_cost.py`` (strict
xfails, with the rows each moves). verl's synchronous rollout (``vllm_rollout_spmd.py``
@2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1 lines 141-164) also runs the engine in-process
(``distributed_executor_backend="external_launcher"``, which vLLM 0.8.3
answers with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, ``vllm/config.py`` lines 1556-1559), all-reduces through NCCL
(``disable_custom_all_reduce=True``; planned so, "Custom all-reduce off" above) and asks for ``logprobs=0`` (one ``Logprob`` per token in the frontend); the
measured 8.3 ms step leaves no room for the in-process ``FRONTEND_S_PER_STEP`` fitted on NeMo RL rows. The
play-verl rows' engine runs in-process in fact (the logs' verl e0d035cd4 builds ``vllm.LLM`` with
``external_launcher``, ``vllm_rollout_spmd.py`` line 131), yet ``benchmarks/step_times.py`` maps them multi-process
on purpose (ee79554 mapped them in-process; its revert 4cc1239 measured the Qwen2-7B generation rows going
from +58 % / +73 % to +116 % / +106 % with that fix alone), until the eager launch (~26 us per kernel) and the
``gen`` timer's per-phase cost are modelled with it.

**verl's ``gen`` timer, operation by operation (read, checked against published timers, nothing added).** The
``gen`` timer wraps one ``actor_rollout_wg.generate_sequences`` call (verl e0d035cd4a6a5c29835516a58d78710a28e73b18,
``verl/trainer/ppo/ray_trainer.py`` l.925-927). What runs inside it, and where the plan has it:

- the driver's ``DP_COMPUTE_PROTO`` dispatch and collect of the padded ``DataProto`` (``controller_transfer``);
- ``FSDPVLLMShardingManager.__enter__`` (``verl/workers/sharding_manager/fsdp_vllm.py`` l.84-131): an
  ``empty_cache``; ``load_fsdp_model_to_gpu`` under parameter offload (the plan's ``state_offload`` share); the FSDP1
  ``SHARDED_STATE_DICT``, which unshards every unit (``sync.fsdp1_state_dict_units``); ``wake_up(tags=["weights"])``
  (the weight copy of ``sleep_wake``); ``load_weights`` with a ``full_tensor()`` per parameter (``weight_sync``
  gather and per-tensor terms); the offload back; a second ``empty_cache``; ``wake_up(tags=["kv_cache"])`` (the
  re-map of ``sleep_wake``);
- ``vLLMRollout.generate_sequences`` (``vllm_rollout_spmd.py`` l.190-324): the prompt list, ``LLM.generate`` (this
  module), ``pad_2d_list_to_length`` and the masks;
- ``__exit__`` (l.134-152): ``LLM.sleep(level=1)``, which is ``reset_prefix_cache`` and then
  ``CuMemAllocator.sleep``. That copies the weights to pinned host memory (``sleep_wake``), unmaps every
  allocation, runs ``gc.collect()`` and an ``empty_cache`` (``vllm/device_allocator/cumem.py`` l.194-209 of the
  0.8.3 wheel). Then ``module.train()`` and one more ``empty_cache``;
- ``output.to("cpu")`` and a last ``empty_cache`` (``fsdp_workers.py`` l.584-587).

Unpriced are the four ``empty_cache`` calls, ``gc.collect``, ``reset_prefix_cache`` and verl's pre/post-processing.
Published timers bound them. From verl f252da34cffd66cb2eb48d41005e86e7da0c7120 (the same operations) the worker
times ``__enter__`` as ``reshard`` and the rollout call as ``generate_sequences``, both inside ``gen``
(``fsdp_vllm.py`` l.193, ``fsdp_workers.py`` l.740). Two published runs:

- one GPU, SmolLM2-135M, vLLM 0.8.5.post1, 1,024 sequences of at most 128 tokens, parameter and optimizer offload
  (johnson7788/RLDecisionAgent ``backend/char_count/README.md`` @bba72075dfbb86b61c98710f00591e93d0709e52, step 1):
  ``gen`` 16.23 s, ``generate_sequences`` 15.36 s, ``reshard`` 0.23 s. Everything after the engine call (the
  sleep, the copies, the dispatch and collect) takes 0.63 s;
- RLinf's verl run (DeepSeek-R1-Distill-Qwen-7B, 64 GPUs, verl f252da3; RLinf/RLinf
  ``docs/source-en/rst_source/resources/blog/compare_with_verl.rst`` @5d75412a245847a2b293a7498574dc67b46dea78, the
  commented-out table): 325.09 s, 316.96 s and 4.19 s, so 3.94 s after the engine call. That is an upper bound:
  ``reduce_timing`` averages ``generate_sequences`` over the ranks (``verl/utils/profiler/performance.py``
  l.182-205), so the slowest rank's lead over the mean is in it.

So on one GPU the whole part of ``gen`` outside vLLM's generate is under 0.9 s, and the plan already prices its
copies. The 2-2.5 s per call that the play-verl intercept asks for (4.4 +- 0.6 s against 2.0 s of planned fixed
work, above) is not in the sharding manager or verl's pre/post-processing. It would be inside ``LLM.generate`` or
in the batch's longest response, which the regression reads from ``response_length/max``.

Scored on 4d89d40 (``benchmarks/step_times.py``; median |error| of the generation, RL step and mean-not-published
subsets, then of those three subsets' half-1 rows):

- as it is: 17.2 / 14.1 / 25.5 %, held out 16.3 %;
- the eager launch at 24 us per kernel (DeepSpeed PR #8352's vLLM figure): 28.6 / 14.7 / 25.9 %, held out 22.0 %;
- the same and 2.5 s more on every colocated synchronous verl ``gen`` and step: 20.1 / 14.6 / 27.3 %, held out
  21.3 %.

The rows the lower launch price breaks are mostly not colocated synchronous verl calls:

- verl's fully-async and one-step-off H20 rows (their own rollout GPUs, no sharding manager per call; fully-async
  Qwen3-30B-A3B on 128 GPUs +27 -> -45 %);
- SkyRL's eager Qwen3.5-9B baseline (-14 -> -65 %);
- DeepSeek-V3 on H20 (-12 -> -62 %);
- the MI300X deepseek-llm-7b phases (+24 / 0 -> -28 / -43 %);
- rllm's DeepScaleR rows (-35 -> -58 %).

So the 65 us offsets more than verl's per-call cost, and the two cannot land together. Where the 65 us comes from:
``HOST_S_PER_FORWARD_KERNEL``, fitted on the 15 H200 training cases (50 us at b8d08aa, 65 us at 99ad126). The eager
decode has read it since 32189db and it was never fitted on generation rows. But ``ENGINE_S_PER_SEQUENCE`` (80 us) and
``FRONTEND_S_PER_STEP`` (2 ms) were fitted on the fit half with it in place (below), so a lower launch price would
need them refitted too. Refitting the per-sequence constant (V1 and V0 together) at 24 us on the fit half (all RL
subsets, half 0) does not recover it: 40 / 60 / 80 / 100 / 120 / 150 us give 22.7 / 20.9 / 19.5 / 20.6 / 20.6 /
22.4 %, against 18.7 % as it is (launch 65 us, 80 us per sequence).

**The host constants, per path** (``rollout.vllm_engine``, ``rollout.engine_multiprocess``, ``rollout.engine_outputs``).
Each is a ``DeviceRates`` field of the same name in lower case (``compute.rates``, where the defaults below are
defined), so a calibration file sets them per GPU kind; ``trainfit calibrate`` fits one factor on
``engine_s_per_sequence``, ``engine_v0_s_per_sequence`` and ``frontend_s_per_step`` from RL run records with measured
generation phases (``trainfit.calibration.engine``). The step model reads them from its ``rates``.
``ENGINE_S_PER_STEP`` is what the engine spends per step outside the GPU's kernels at batch 1 (the residual of a
published batch-1 TPOT, above). The rest depends on the engine's path:

- *V1 engine core* (``ENGINE_S_PER_SEQUENCE``, 80 us per running sequence, serial in both modes; fitted, see "The
  split evaluated and not kept" below): vllm-project/vllm issue #10634 ("Initial Idea and Design for Asynchronous Scheduling", 2024-11-25,
  read 2026-12-03) publishes the GPU idle gap between two decode steps of the V1 ``AsyncLLM`` (the core in its own
  process, the frontend not in the gap): Llama2-7b, batch 256, ShareGPT, "about 5-6ms", i.e. (5.5 - 0.58) ms / 256 =
  19.2 us; play-verl's V1 per-step logs give 37 +- 12 us per generated token, GPU share included (above). Both are
  well under 80 us, yet the
  published offline batches on RTX 4090 (Database Mart, 256 sequences, ``tests/compute/test_rtx4090_decode_evidence.py``)
  are met within 10 % at 80 us and come out 41-44 % short at 19.2 us (Qwen2.5-3B 17.1 s planned vs 29.1 s), i.e. they
  carry ~85 us per sequence-step; the figure differs by vLLM release and host CPU, which the card does not say.
- *V0 engine* (``ENGINE_V0_S_PER_SEQUENCE``, 80 us, all of the host work serial, no frontend split): V1 is vLLM's
  default from 0.8 (play-verl's 0.8.3 logs show ``vllm.v1.worker.gpu_worker.Worker`` with no ``VLLM_USE_V1`` set); up
  to 0.7 V1 is an opt-in (``VLLM_USE_V1``, ``vllm/envs.py`` line 477 @v0.7.0, default '0'), and a 0.8.x engine falls
  back to V0 for what V1 does not support (``VLLM_ATTENTION_BACKEND=XFORMERS``: "Falling back to V0", ``arg_utils.py``
  line 1708 @v0.8.3). The play-verl per-step regressions above ("Eager decode against published per-step logs") give
  an engine's cost per generated token, GPU share included, of 61 +- 18 and 123 +- 20 us on the V0 Qwen2.5-0.5B runs
  (a model whose GPU share is small) against 37 +- 12 us on the V1 Qwen2-7B one; 80 us, the value the earlier single
  per-sequence constant was fitted to, lies inside the V0 range and is kept.
- *V1 frontend, final outputs only* (``FRONTEND_S_PER_SEQUENCE``, 1.5 us per running sequence; ``LLM.generate``):
  ``OutputProcessor.process_outputs`` per request per step (stats, incremental detokenization and stop check, the
  sampled token's ``Logprob``; ``vllm/v1/engine/output_processor.py`` l.300-375 of the 0.9.0 wheel), measured as a
  CPU lower bound by ``benchmarks/engine_frontend_cpu.py`` (1.5-2.1 us on the 2-core Xeon VM it was run on). Overlapped with
  the GPU step when the core has its own process; serial in-process.
- *V1 frontend, cumulative outputs* (``AsyncLLM.generate``'s default ``RequestOutputKind.CUMULATIVE``,
  ``vllm/sampling_params.py`` l.233 @0.9.0; NeMo RL's ``async_engine`` path, whose ``generate_async`` iterates every
  step's output of every request, ``nemo_rl/models/generation/vllm.py`` l.683-692
  @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf,
  ``nemo_rl/models/generation/vllm/vllm_worker_async.py`` l.750-759 @9dbd9adc95a10f5946cceb36e1d5b31e2429e470, keeping
  the last): every step each request gets a ``RequestOutput`` and its ``generate()`` coroutine is woken,
  + ``FRONTEND_CUMULATIVE_S_PER_SEQUENCE`` (3.9 us; 3.6-3.9 us over runs) per running sequence, a CPU lower bound from
  the same script.
  No part of it grows with the tokens generated so far: the cumulative ``CompletionOutput`` takes
  ``detokenizer.output_token_ids``, which ``FastIncrementalDetokenizer`` (vLLM's choice for a fast tokenizer with
  ``tokenizers`` >= 0.21.1) inherits as ``return self.token_ids``, the list itself, its ``output_text`` is the string
  itself when no stop-string buffer is held back (NeMo RL sets ``include_stop_str_in_output=True``) and its logprobs
  the list itself (``vllm/v1/engine/detokenizer.py`` l.20-56 and l.134-149, ``output_processor.py`` l.201-228 of the
  0.9.0 wheel). Only ``SlowIncrementalDetokenizer`` copies ``token_ids[prompt_len:]`` every step (l.239-241): 12-13 ns
  per token held on the machine above, not modelled. ``AsyncLLM`` always runs the core in its own process
  (``AsyncMPClient``, ``vllm/v1/engine/async_llm.py`` l.119-123 @0.9.0, whatever ``VLLM_ENABLE_V1_MULTIPROCESSING``
  says), so this work overlaps the GPU step; it shows only where the frontend is slower than the core.
- *V1 in-process frontend per step* (``FRONTEND_S_PER_STEP``, 2 ms; fitted). Only NeMo RL's synchronous path runs an
  in-process engine among the scored rows (vLLM 0.9-0.11 ``LLM.generate`` under ``VLLM_ENABLE_V1_MULTIPROCESSING=0``;
  verl's ``external_launcher`` engines are mapped multi-process, above). play-verl's V1 in-process eager step (8.3 +-
  0.4 ms in all at one sequence, against ~8.4 ms of launch at ~26 us per kernel and the 1.1 ms batch-1 residual) leaves
  no room for a per-step constant on verl's path, and the 8 ms fitted with the single per-sequence constant was out
  of line with it. Refitted alone on the fit half (``int(sha1(id), 16) % 2 == 0``; RL step and RL generation-phase
  rows, 39 fit / 53 held out; V1 core 80 us, V0 80 us, the frontend figures above), 0 / 1 / 2 / 3 / 4 / 5 / 6 / 8 ms:
  fit-half median |error| 15.84 / 15.61 / 15.61 / 15.61 / 15.61 / 15.84 / 15.84 / 15.84 %, tied from 1 to 4 ms and
  broken by the fit half's mean |error| (18.69 / 18.35 / 18.36 / 18.47 % at 1-4 ms): 2 ms. Held out: median 15.05 %
  at 8 ms -> 13.46 %, mean 19.55 -> 19.54 %; the generation subset 24.2 % -> 16.7 %, the RL steps 14.7 % -> 14.3 %.
  What NeMo RL's synchronous path does per step was not found (the remaining candidates are its piecewise CUDA graphs
  in vLLM 0.9-0.10, whose attention runs eagerly between graph pieces, and the Ray executor's round trip for engines of
  more than one GPU; neither is modelled).

**The split evaluated and not kept.** With the V1 core at the published 19.2 us and the in-process constant at 0
(mechanisms only), ``benchmarks/step_times.py`` moves the NeMo RL v0.3 blog's in-process generation phases from +41 %
to -32 / -35 % (Llama-3.1-8B, Qwen3-30B-A3B), the generation subset's median to 32 %. Refitting the in-process constant
alone on the fit half (``int(sha1(id), 16) % 2 == 0``, RL step and RL generation-phase rows, 39 fit / 53 held out),
0, 2, 4, 6, 8, 10 ms: fit-half medians 24.7, 21.8, 20.3, 20.3, 20.1, 20.3 %, held-out 23.2, 22.0, 22.0, 18.8, 18.6,
18.6 %; at 8 ms the generation subset goes 24.2 % -> 20.1 %, the rows without a published mean response 43.4 % ->
24.0 % (verl's one-step-off and fully-async H20 rows, verl PR #5596's SGLang GB200 row +111 % -> -2 %), but the RL
steps 14.7 % -> 19.4 % and both halves get worse (fit 15.8 -> 20.1 %, held-out 14.8 -> 18.6 %): NeMo RL's
multi-process (``async_engine``) Qwen3-30B-A3B and Llama-3.1-8B step rows fall from about 0 % to -26 / -42 %. Those
rows run one step off policy on their own rollout nodes, so their step is the slower side, and it is the generation:
NeMo RL v0.5 Qwen3-30B-A3B on 32 H100 planned 152 s -> 102 s against 154 s published, Llama-3.1-8B on 8 GB200 74 s ->
46 s against 71 s. So there the 80 us is not an offset of training phases planned short: NeMo RL's ``AsyncLLM`` path
(vLLM 0.10-0.17, TP 1 and 2) pays about that per sequence-step, while its synchronous path (the v0.3 blog, vLLM 0.9.0)
and verl's V1 rows (the H20 one-step-off and fully-async rows without a published mean response) want much less. The
cumulative-output frontend does not close it: it runs beside the core, holds no per-token copy, and stays under the
GPU step.
What NeMo RL's asynchronous path pays per sequence beside the published core gap is not found; the card cannot tell
the paths apart by a mechanism yet, so the fitted 80 us stays for every V1 engine and the published gap is held as a
strict xfail (``tests/compute/test_engine_host_per_sequence_evidence.py``). The RTX 4090 offline batches
(``tests/compute/test_rtx4090_decode_evidence.py``) also sit at 80 us, but their source reports 64 % GPU use and
1.4 % CPU for the 1.5B / 3B runs (about one core of a many-core host busy; "all requests are sent at once"), so
they may measure a frontend bound on one Python process rather than the engine core.

**The split by output path, evaluated and not kept.** The core's per-sequence cost taken from the output path
instead: ``final_only`` (``LLM.generate``; by default every in-process engine) at the published #10634 gap, (5.5 -
0.58) ms / 256 = 19.2 us (https://github.com/vllm-project/vllm/issues/10634, 2024-11-25, read 2026-12-03), and
``cumulative`` (``AsyncLLM``) at the fitted 80 us (fitted on the fit half, above), with ``FRONTEND_S_PER_STEP``
refitted alone on the fit half (RL step and RL generation-phase rows, 45 fit / 59 held out; the other host constants
as they are), 0 / 1 / 2 / 3 / 4 / 5 / 6 / 8 / 10 / 12 ms: fit-half median |error| 22.20 / 20.70 / 19.42 / 16.67 /
16.67 / 17.65 / 16.74 / 18.17 / 18.30 / 18.67 %, 3 and 4 ms tied, broken by the fit half's mean (21.77 / 20.79 %):
4 ms. Against the model as it is (80 us for every V1 engine, 2 ms): fit half 15.61 -> 16.67 %, held-out half median
14.08 -> 14.08 %, mean 19.72 -> 20.23 %, the generation subset's median 16.67 -> 16.67 %, the RL steps' 14.78 ->
15.31 %; no value of the grid keeps both subsets (10 ms: RL steps 14.67 %, generation 23.17 %). The rows it moves
are NeMo RL's synchronous ones: its on-policy v0.4-v0.6 step rows, already planned short at 80 us, go 8-18 pt
shorter (v0.4 Qwen3-30B-A3B on 32 H100 -15.0 -> -33.3 %, v0.5 Llama-3.1-8B on 8 GB200 -19.3 -> -28.8 %), the v0.3
blog's Qwen3-30B-A3B generation +10.9 -> -11.3 %; so NeMo RL's synchronous path also pays more than 19.2 us per
sequence-step at its batches. Nor is the output path a mechanism of the core: vLLM 0.9.0's engine core emits an
``EngineCoreOutput`` for every request that sampled a token, every step (``update_from_output``,
``vllm/v1/core/sched/scheduler.py`` l.797-811 of the wheel, https://pypi.org/project/vllm/0.9.0/) and reads no
``output_kind``; only the frontend's ``OutputProcessor`` does (``vllm/v1/engine/output_processor.py`` l.154-158),
and the #10634 gap was itself measured on ``AsyncLLM`` (after PR #9826: the multi-process side, not
``LLM.generate``). So 80 us stays for every V1 engine.

Earlier fits (one per-sequence constant for every engine): ``ENGINE_S_PER_SEQUENCE``, ``FRONTEND_S_PER_STEP`` and the
frontend's per-sequence part were fitted together on the fit half, 18 fit / 28 held out then: best 80 us, 8 ms and
0 us (fit half 29.1 % -> 16.5 %, held-out half 33.7 % -> 15.4 %).

**Read in vLLM and priced, not added** (the scored rows' moves are from ``benchmarks/step_times.py`` on the tree of
4d89d40):

- *The sampler's passes over the logits.* vLLM 0.8.3's V1 ``Sampler.forward`` (``vllm/v1/sample/sampler.py`` and
  ``ops/topk_topp_sampler.py`` of the wheel, https://pypi.org/project/vllm/0.8.3/, read 2026-12-03) runs eager torch
  ops over every running sequence's whole vocabulary row each step. With ``logprobs=0`` (verl, NeMo RL), temperature
  1, no top-k / top-p, the bytes per vocabulary entry are: ``log_softmax(dtype=float32)`` of the bf16 logits (2 read
  + 4 written), ``logits.to(float32)`` (2 + 4), the in-place temperature division (4 + 4), ``softmax`` (4 + 4), then
  ``random_sample``'s ``exponential_`` (4), ``probs.div_(q)`` (8 + 4) and ``argmax`` (4), and the sampled token's
  rank ``(logprobs >= token_logprobs).sum(-1)`` (4 + 1 + 1). That is about 54 B: 8.2 MB per Qwen sequence
  (151,936 entries) per step on every TP rank, since ``LogitsProcessor`` all-gathers the logits (``logits_processor.py``
  l.87-98). On an H100 that is 2.5 us, 3 % of the fitted 80 us per running sequence. Added to ``bw_seq``, it moved
  32 scored RL points by 0.5-2 pt: the generation median went 17.2 -> 18.4 % and the RL-step median 14.1 -> 13.6 %.
  The 80 us was fitted with this traffic already inside the rows, so the traffic is not added on top of it.
- *Steps above the largest captured batch.* vLLM 0.8.3 V1 captures ``[1, 2, 4] + range(8, 513, 8)``
  (``vllm/config.py`` l.3703-3711 of the wheel). A step with more scheduled tokens runs without graphs
  (``gpu_model_runner.py`` l.996-1004). No scored generation or step row runs more than 512 sequences on one engine with
  CUDA graphs on; only the weight-sync benchmarks' engines do, and their generation is not scored. At those batches
  the per-sequence host work (80 us x 512 = 41 ms) is far larger than the launches.
- *Piecewise CUDA graphs.* V1 splits the compiled graph at every attention layer. The attention runs eagerly between
  graph replays. vllm-project/vllm PR #20059 (comment of 2025-06-29, read 2026-12-03) benchmarks Qwen2.5-1.5B-Instruct
  on ShareGPT. Median TPOT, piecewise against full graphs: 5.42 against 5.09 / 5.02 ms at 1 request/s, and 8.00
  against 7.68 / 7.72 ms at 100 requests/s. That is 0.3-0.4 ms a step over 28 layers, about 13 us a layer exposed;
  the benchmark's GPU is not stated. This would add 3-6 % to the CUDA-graph steps of vLLM releases whose decode
  replays piecewise graphs. It is not applied because the card does not say the engine's release or graph mode.

**Padded decode attention** (``fa3_decode_query_rows``, ``FA3_DECODE_TILE_ROWS``; the plan passes it for vLLM V1
engines; 128 rows under a ``software.vllm`` pin before 0.8.5, ``plan.rl_generation.VLLM_FA3_ONE_MMA_WG_SINCE``).
vLLM's FlashAttention backend runs FlashAttention-3 on Hopper. Its decode packs the query heads that share
a KV head into the rows of one tile (``pack_gqa``) and the warpgroup MMA computes the whole tile: 64 rows at head dim
128 since vllm-project/flash-attention PR #63 (hopper/heuristics.h ``use_one_mma_wg``, hopper/tile_size.h
@13d0fd9cc276cb666afc88373e2d81449acdc749), 128 before. A group of 5-8 query heads per KV head thus costs 64 rows of
``4·head_dim`` FLOPs per context token and KV head, 8-13x its own: 64 FLOPs per byte of bf16 KV read. An H100
(about 790 TFLOP/s against 3 TB/s) hides that under the KV read; an H20 (142 TFLOP/s measured against 3.6 TB/s, 39
FLOPs per byte) does not, and long-context decode on it turns compute-bound on attention. The step keeps one roofline
(``max(bandwidth, compute)`` over the whole step), so the padded FLOPs add to the GEMMs' and the KV bytes to the
weights'. The one published comparison on the same card and model shape (not a fit) is SGLang's, so it exercises
the 128-row tile on an engine this term is not applied to, and checks neither the adopted 64-row tile nor vLLM:
sgl-project/sglang issue #5630
(2025-04-22), QwQ-32B (Qwen2.5-32B shapes, 40 query / 8 KV heads) at TP 4 on H20, 64 requests at 12,000 input
tokens: 908 tok/s with the FlashAttention-3 backend against 2,014 with FlashInfer (0.45x); this step's device time
at that batch and context gives 1,060 against 2,692 tok/s (0.39x) with a 128-row tile, against no padding.
Which tile the scored runs had: verl at the practice table's date pins ``vllm>=0.7.3,<=0.9.1`` (setup.py l.51
@2633140a73be8b6c244910c3fbbd021a43920344) and names ``app-verl0.5-vllm0.9.1`` its image (docs/start/install.rst
l.66, same commit); the fork's commit 8798f27777fb57f447070301bf33a9f9c607f491 (2025-04-25, which vLLM builds pin)
already holds the 64-row change, so 64 rows. A sensitivity check, not adopted (a release before the change, or every
step at 128 rows): the Qwen3-14B-Base generation phases land at -8..-9 %, the generation subset's median 17.9 ->
15.4 %, but the one-step-off Qwen2.5-Math-7B rows (no published mean) +43 / +24 % -> +73 / +51 %, beyond 50 %: 48 ->
51. Not modelled: a step that carries a prefill chunk beside its decodes (chunked prefill) runs the varlen kernel at
``max_seqlen_q`` above 64 and its 128-row tile; other head dims (other tiles), FlashAttention-2 cards (16-row MMA
tiles, under the KV read), V0 engines (V0 does not hand the head counts to the scheduler metadata, vllm-project/vllm
PR #16864 review, 2025-04-23), and SGLang. SGLang's FA3 backend is the same kernel family (FlashAttention-3's Hopper
kernels through sgl-kernel, GQA packed into the tile the same way) and pads the same way, but at 128 rows: its decode
took the single-warpgroup 64-row tile only with sgl-project/sglang PR #18985 (2026-02-18, "Use single mma warp group
for short q_len in FA to optimize decoding performance", sgl-project/sgl-flash-attn PR #34), and it made FA3 its
Hopper default only for some models and from some release on (sgl-project/sglang #5064, #6066, 2025-05-07). Not
applied to SGLang: which scored SGLang runs had FA3 rather than FlashInfer is not stated by any of them, and the
release pin that carries #18985 is not read here; a card that sets SGLang therefore prices attention at its query
heads' FLOPs (a lower bound on a pre-#18985 FA3 run at long context on an H20-class card).
Effect on the benchmark table (``benchmarks/step_times.py``, plan against published, the tree without it against
the tree with it; only H20 rows move): the DAPO Qwen3-14B-Base
generation phases on 32 H20 -41..-44 % -> -26..-30 % and their steps -26..-28 % -> -16..-18 %; Qwen2.5-32B
generation -58..-66 % -> -54..-63 % (still short, unexplained); Qwen2.5-14B (~770-token responses) -8 / -3 % ->
-1 / +5 %; verl's one-step-off Qwen2.5-Math-7B H20 generation +43 -> +56 % (split FSDP2) and +24 -> +36 % (Megatron),
rows without a published mean response whose plan already ran long on the default length profile; fully-async
retool 7B -26 -> -18 %. Subset medians: generation 17.9 -> 17.9 %, RL step 14.5 -> 14.5 %, rows without a published
mean 21.5 -> 21.2 % (beyond 50 %: 10 -> 11, the one-step-off FSDP2 row); all rows 10.15 -> 10.16 % (48 -> 49 beyond
50 %).

**vLLM V0 at 320 sequences an engine: the open generation miss, read and not modelled** (checked 2026-12-05;
``benchmarks/step_times.py`` on the tree of 6267e41a, which this note does not change). verl's GRPO-LoRA runs
(``benchmarks/data/published_rl_times_firstcontact_2612d.json`` / ``_2612e.json``, ids ``verldata-*``; eager V0
engines, ``enforce_eager`` and ``VLLM_ATTENTION_BACKEND=XFORMERS``, external launcher, rank-32 adapter on all linears)
plan generation -10 to -36 % short where one engine holds all 320 sequences and -4 to +5 % where four TP-2 engines
hold 80 each. Their logs name the vLLM release (``software.vllm`` of the rows whose log line was read,
``tests/benchmarks/test_step_times_verldata_vllm_release.py``): 0.7.3 for the June GSM8K runs, 0.9.1 for the later
ones. The miss per sequence-step of one engine (generation miss / (sequences an engine x mean response)): 0.7.3 at
TP 2, 55-72 us (1.5B, 3B; the unpinned 0.5B of the same week 70 us); 0.7.3 at TP 8, 136-197 us (14B-72B); 0.9.1 at
TP 2, 121-134 us (0.5B-3B MATH; the unpinned GSM8K + MATH runs 126-162 us); 0.9.1 at TP 2 with 80 sequences an
engine, -76 and +17 us (7B); the unpinned TP-8 MATH runs 212-339 us. So the miss grows with the release, with the
sequences an engine holds faster than in proportion, and at TP 8. Read in both releases' PyPI sdists
(https://pypi.org/project/vllm/, read 2026-12-05) and found not to be it:

- *Serial output processing.* Async output processing is off under ``enforce_eager`` in both
  (``CudaPlatform.is_async_output_supported``, ``vllm/platforms/cuda.py`` l.93-100 @0.7.3, l.89-96 @0.9.1): all of
  V0's host work is serial in both releases, as ``ENGINE_V0_S_PER_SEQUENCE`` already prices it.
- *Detokenization.* None: verl passes ``'detokenize': False`` (the logs print the rollout's ``kwargs: {'n': 5,
  'logprobs': 0, 'max_tokens': 512, 'detokenize': False, ...}``).
- *n = 5.* Both releases fan a request out into ``n`` sequence groups (``ParallelSampleSequenceGroup.add_request``,
  ``vllm/engine/llm_engine.py`` l.565 @0.7.3, l.564 @0.9.1): 320 groups in both.
- *The adapter's punica kernels.* 0.7.3 decodes with ``bgmv_shrink`` / ``bgmv_expand(_slice)``
  (``vllm/lora/punica_wrapper/punica_gpu.py`` l.63, l.95, l.213), whose grid is (split, batch): each token's program
  loads its adapter's whole slice (``vllm/lora/ops/triton_ops/bgmv_shrink.py`` l.42-68, ``bgmv_expand.py`` l.44-79).
  0.9.1 decodes with ``lora_shrink`` / ``lora_expand`` over tiles of ``BLOCK_M`` = 32 tokens
  (``lora_shrink_op.py`` l.163-166). If every token's read reached HBM (an upper bound: a layer's adapter fits in L2),
  0.7.3 would read 22 / 47 / 76 MB a token-step at TP 2 (0.5B / 1.5B / 3B, rank 32) and 131 / 196 / 362 MB at TP 8
  (14B / 32B / 72B): 7-23 and 39-108 us at 3.35 TB/s, and 0.9.1 a 32nd of that. The later release reads less yet
  misses more, and the 0.7.3 bound stays under its own TP-8 miss, so this is not the mechanism. It is not added: its
  size would need a model of L2 reuse.
- *CUDA-graph capture sizes.* Not in play: ``enforce_eager`` is True, so every step runs eager in both releases.
  ``max_num_seqs`` 512 >= 320: no cap.
- *The sampler's passes over the logits* (above): 2.5 us a sequence.

Not found: what in V0's step grows faster than the running sequences (or with TP 8). The next check is a CPU
timing of V0's ``LLMEngine.step`` host path (scheduler, ``ModelInputForGPUBuilder``, ``SamplingMetadata.prepare``,
the sampler's Python output build, the output processor) at 80 and 320 sequences for 0.7.3 and 0.9.1; it needs the
vLLM package, which this tree does not install. The plan's KV capacity at ``gpu_memory_utilization`` 0.1 with the
LoRA slots was not re-checked here.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute import collectives
from trainfit.compute.rates import (  # noqa: F401 - the engine host constants' defaults live with DeviceRates
    ENGINE_S_PER_SEQUENCE,
    ENGINE_S_PER_STEP,
    ENGINE_V0_S_PER_SEQUENCE,
    FRONTEND_CUMULATIVE_S_PER_SEQUENCE,
    FRONTEND_S_PER_SEQUENCE,
    FRONTEND_S_PER_STEP,
    NVLINK_DOMAIN_GPUS,
    SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED,
    VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED,
    DeviceRates,
)
from trainfit.spec.enums import RolloutEngine
from trainfit.spec.model import ModelSpec

GRAPH_KERNEL_GAP_S = 1.3e-6
"""Device seconds between two kernels of a CUDA-graph replayed decode step during which no weight streams (the
next kernel's launch and the previous one's teardown): about 1.3 us per kernel on an H100 even with CUDA graphs
(Spector, Juravsky et al., Hazy Research, "Look Ma, No Bubbles! Designing a Low-Latency Megakernel for
Llama-1B", https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles, 2025-05-27, read 2026-12-02 through
its summary at https://mlops.substack.com/p/one-megakernel-to-rule-llama-1b). Module docstring: "Kernel gaps"."""


FA3_DECODE_TILE_ROWS = 64
"""Query rows of one FlashAttention-3 decode tile on Hopper (compute capability 9.x) at head dim 128: the kernel packs
a KV head's query heads into the tile's M dimension (``pack_gqa``, always on for varlen queries, ``should_pack_gqa``
in hopper/heuristics.h) and the warpgroup MMA computes the whole tile, so a decode token's attention costs
``FA3_DECODE_TILE_ROWS`` query rows per KV head whatever the group size. 64 since vLLM's fork ran decode batches on
one MMA warpgroup (``use_one_mma_wg``: ``seqlen_q x heads/kv_heads <= 64`` at head dim 128 -> ``kBlockM`` 64 in
hopper/tile_size.h ``tile_size_fwd_sm90``; 128 before: vllm-project/flash-attention PR #63, 'reduce wasted compute
(i.e. use kBlockM == 64 instead of 128)', hopper/heuristics.h and hopper/tile_size.h
@13d0fd9cc276cb666afc88373e2d81449acdc749, 2025-04-21). Module docstring: "Padded decode attention"."""


FA3_DECODE_TILE_ROWS_TWO_MMA_WG = 128
"""Query rows of the FlashAttention-3 decode tile on Hopper at head dim 128 before vLLM passed the query and KV head
counts to the kernel's scheduler metadata (vllm-project/vllm PR #16864, https://github.com/vllm-project/vllm/pull/16864,
the vLLM side of vllm-project/flash-attention PR #63): two MMA warpgroups, ``kBlockM`` 128 (hopper/tile_size.h
``tile_size_fwd_sm90`` l.31-32 @e371cc41310682b806dc132b68546235288ffb8b, the fork before PR #63's commit
13d0fd9cc276cb666afc88373e2d81449acdc749). Module docstring: "Padded decode attention"."""


def fa3_decode_query_rows(spec: ModelSpec, *, compute_capability: str | None, one_mma_wg: bool = True) -> int:
    """Query rows per KV head that vLLM's FlashAttention-3 decode kernel computes for one token of context
    (``FA3_DECODE_TILE_ROWS`` when the tile pads the packed query heads: a Hopper card, head dim 128, softmax
    attention without a latent KV, fewer query heads per KV head than the tile holds;
    ``FA3_DECODE_TILE_ROWS_TWO_MMA_WG`` with ``one_mma_wg`` false, a vLLM release before the single-warpgroup decode
    tile); 0 where the padding is not modelled (other architectures run FlashAttention-2 or other backends, other head
    dims other tiles, MLA its own kernels): the step then prices attention at its query heads' FLOPs."""
    if (compute_capability or "").partition(".")[0] != "9" or spec.mla is not None or spec.head_dim != 128:
        return 0
    tile = FA3_DECODE_TILE_ROWS if one_mma_wg else FA3_DECODE_TILE_ROWS_TWO_MMA_WG
    group = spec.num_attention_heads // max(1, spec.num_kv_heads)
    return tile if group < tile else 0


def eager_s_per_kernel_of(rates: DeviceRates, engine: RolloutEngine | str = RolloutEngine.VLLM, *,
                          spec: ModelSpec | None = None, engine_generation: str = "v1") -> float:
    """Host seconds per kernel of an eager decode step of ``engine`` (a ``RolloutEngine``): vLLM and SGLang read
    ``rates``' field for that engine (``vllm_eager_s_per_kernel`` / ``sglang_eager_s_per_kernel``, which a calibration
    may set); unset, the published engine measurement where ``measured_eager_s_per_kernel`` holds it for ``spec`` and
    ``engine_generation`` (module docstring, "The measured eager price, within its scope"), and otherwise, for every
    other engine (transformers ``generate``, DeepSpeed's Hybrid Engine, which no engine calibration measured) and with
    no ``spec``, ``rates.host_s_per_forward_kernel``. Raises ``ValueError`` for a name that is no ``RolloutEngine``."""
    engine = RolloutEngine(engine)
    own = {RolloutEngine.VLLM: rates.vllm_eager_s_per_kernel,
           RolloutEngine.SGLANG: rates.sglang_eager_s_per_kernel}.get(engine)
    if own is not None:
        return own
    measured = None if spec is None else measured_eager_s_per_kernel(spec=spec, engine=engine,
                                                                      engine_generation=engine_generation)
    return rates.host_s_per_forward_kernel if measured is None else measured


def measured_eager_s_per_kernel(*, spec: ModelSpec, engine: RolloutEngine | str,
                                engine_generation: str = "v1") -> float | None:
    """The published host seconds per eager decode kernel of ``engine`` where the measurement covers the step: vLLM's
    V1 engine (``rates.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED``, 25.1 us) or SGLang
    (``rates.SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED``, 27.4 us), for a model whose every decoder layer is the
    measured kind, softmax attention (no latent attention, no linear attention) and a dense MLP (no routed
    experts). None outside that scope: vLLM's V0 engine, another engine, an MoE, MLA or Gated DeltaNet model (module
    docstring, "The measured eager price, within its scope")."""
    engine = RolloutEngine(engine)
    if spec.mla is not None or spec.linear_attention is not None:
        return None
    if spec.moe is not None and spec.moe.num_experts > 1:
        return None
    if engine is RolloutEngine.SGLANG:
        return SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED
    if engine is RolloutEngine.VLLM and str(engine_generation) != "v0":
        return VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED
    return None


def engine_s_per_sequence_for(generation: str = "v1", rates: DeviceRates | None = None) -> float:
    """The engine core's host seconds per running sequence per step for vLLM's engine ``generation`` (v0 / v1):
    ``rates``' fields (a calibration may set them), else the defaults."""
    if str(generation) == "v0":
        return ENGINE_V0_S_PER_SEQUENCE if rates is None else rates.engine_v0_s_per_sequence
    return ENGINE_S_PER_SEQUENCE if rates is None else rates.engine_s_per_sequence


def serial_schedule_step_seconds(*, device_s: float, launch_s: float, host_s: float) -> float:
    """Seconds of one decode step whose engine host work ``host_s`` (scheduling, input preparation, output
    processing) runs between two GPU steps: ``max(device_s, launch_s) + host_s`` (vLLM V1 without async scheduling,
    SGLang with ``--disable-overlap-schedule``; module docstring)."""
    return max(device_s, launch_s) + host_s


def overlap_schedule_step_seconds(*, device_s: float, launch_s: float, host_s: float,
                                  serial_s: float = 0.0) -> float:
    """Seconds of one decode step under SGLang's overlap scheduler: the host schedules and launches step ``n+1`` and
    processes step ``n-1``'s result while the GPU runs step ``n``, so the step is the slower of the device's
    ``device_s`` and the host's ``launch_s + host_s`` (the launch and the scheduler share one Python thread or
    the GIL), plus ``serial_s``, per-step work the overlap does not hide (module docstring, "SGLang's overlap
    scheduler")."""
    return max(device_s, launch_s + host_s) + serial_s


SGLANG_GRAPH_MAX_BS_0_4 = 160
"""SGLang 0.4.0-0.5.2's largest CUDA-graph decode batch on a CUDA GPU above its small-memory threshold and, from
0.4.8, up to 90 GB (``sglang_cuda_graph_max_batch``)."""


def sglang_cuda_graph_max_batch(*, release: tuple[int, int, int] | None, gpu_memory_mib: float,
                                tp: int) -> int | None:
    """The largest decode batch SGLang ``release`` replays as a CUDA graph on a CUDA GPU of ``gpu_memory_mib``
    (``nvidia-smi``'s total) in an engine of ``tp`` ranks when the run sets neither ``cuda_graph_max_bs`` nor
    ``cuda_graph_bs``; a larger batch runs eagerly (``CudaGraphRunner.can_run``: ``batch_size <= self.max_bs``, the
    largest captured). None: not modelled (no release, or one whose defaults were not read: every release before
    0.4.0, 0.5.3, the smaller GPUs from 0.5.4). Read in the wheels
    (https://pypi.org/project/sglang/<release>/, read 2026-12-03):

    - 0.4.0.post2 and 0.4.4: under 25,000 MiB 8 at ``tp`` < 4, else 80; above it 160 (``server_args.py``
      l.189-198 of 0.4.0.post2; the capture list ``[1, 2, 4] + [8 ... 160]`` cut at ``cuda_graph_max_bs``,
      ``model_executor/cuda_graph_runner.py`` l.132-154 of 0.4.0.post2, l.109-145 of 0.4.4).
    - 0.4.8 and 0.5.2: under 35 x 1024 MiB 8 / 80 as above; else the default list, ``[1, 2, 4, 8] + [16 ... 160]``,
      extended to 256 above 90 x 1024 MiB and to 512 above 160,000 MiB (``get_batch_sizes_to_capture``,
      ``cuda_graph_runner.py`` l.140-180 of 0.4.8, l.165-190 of 0.5.2). Releases 0.4.5-0.4.7 are taken as 0.4.8.
    - 0.5.4 and later, 60 GB or more (``server_args.py`` l.700-730 of 0.5.4, l.797-829 of 0.5.6.post2): 256 at
      ``tp`` < 4 and 512 from ``tp`` 4 below 160 GB (H100, H200, H20), 512 above (B200). The smaller GPUs' rows
      differ between 0.5.4 and 0.5.6, and 0.5.3 was not read: None.
    """
    if release is None or release < (0, 4, 0):
        return None
    if release < (0, 5, 3):
        small = 25_000 if release < (0, 4, 5) else 35 * 1024
        if gpu_memory_mib < small:
            return 8 if tp < 4 else 80
        if release < (0, 4, 5):
            return SGLANG_GRAPH_MAX_BS_0_4
        return 512 if gpu_memory_mib > 160_000 else 256 if gpu_memory_mib > 90 * 1024 else SGLANG_GRAPH_MAX_BS_0_4
    if release < (0, 5, 4) or gpu_memory_mib < 60 * 1024:
        return None
    if gpu_memory_mib < 160 * 1024:
        return 256 if tp < 4 else 512
    return 512


DECODE_KERNELS_PER_LAYER = 10
"""Kernels one eager decoder layer launches: input norm, QKV GEMM, rotary, KV-cache write, attention,
O GEMM, fused add+norm, gate/up GEMM, SiLU-and-mul, down GEMM (vLLM's Llama/Qwen layers)."""
LORA_ENGINE_KERNELS_PER_LINEAR = 3
"""Kernels vLLM's punica path adds to every LoRA-wrapped linear of a step when the engine serves an adapter unmerged
(``enable_lora``): ``BaseLinearLayerWithLoRA.apply`` runs the base GEMM, then ``PunicaWrapperGPU.add_lora_linear``
allocates its fp32 rank buffer (``torch.empty``, no kernel) and calls ``add_shrink`` -> ``lora_shrink`` and
``add_expand`` -> ``lora_expand``, one Triton kernel each for all of the linear's packed slices
(vllm-project/vllm vllm/lora/punica_wrapper/punica_gpu.py ``add_lora_linear`` @010c9386c45da59ad29905c19c06e58affe0ab1e),
and ``lora_shrink`` zeroes that buffer first (``output_tensor.zero_()`` before ``_lora_shrink_kernel``,
vllm/lora/ops/triton_ops/lora_shrink_op.py @00bd1493b3e82d6c13c68ee8a0e1c5a96707e190): zero + shrink + expand. The
releases of mid-2025 built the buffer with ``torch.zeros`` in ``add_lora_linear`` instead, the same three kernels.
The count holds for the releases whose punica wrapper calls ``lora_shrink`` / ``lora_expand``, one launch over all
of a linear's packed slices. Older wrappers ran the shrink and the expand per slice: vLLM's punica CUDA path zeroes a
buffer and runs two ``dispatch_bgmv`` kernels for every slice (``add_lora`` / ``add_lora_slice``, vllm-project/vllm
vllm/lora/punica.py @e93b266ee03f3118752f69b52311c13a9f808453), called once per slice of a packed QKV (3) or
gate/up (2) linear by ``add_lora_packed_nslice`` (vllm/lora/layers.py @fb82bf149526911a296c35c90ebae28e58554a8a), so a
dense layer launched 21 such kernels where this count gives 12: on those releases the count is low."""
LORA_ENGINE_ATTENTION_LINEARS = 2
"""LoRA-wrapped linears of a decoder layer's attention in vLLM: the packed ``qkv_proj`` (``MergedQKVParallelLinearWithLoRA``)
and ``o_proj`` (``RowParallelLinearWithLoRA``). vLLM wraps every supported linear of the model once LoRA is enabled,
whichever modules the adapter targets (an untargeted slice runs with zero weights): the GEMMs that
``DECODE_KERNELS_PER_LAYER`` counts, read at vllm-project/vllm vllm/lora/punica_wrapper/punica_gpu.py
@010c9386c45da59ad29905c19c06e58affe0ab1e (one ``add_lora_linear`` per wrapped linear). A lower bound for latent
(MLA) and linear attention: their layers hold more projections than QKV and O (DeepSeek's ``q_a_proj``, ``q_b_proj``,
``kv_a_proj_with_mqa``, ``kv_b_proj``, ``o_proj``: ``memory.params._mla_linears``; a Gated DeltaNet layer's input
projections and ``out_proj``: ``memory.params._linear_attention_linears``), each one ``add_lora_linear`` where vLLM's
model lists it among its LoRA modules, and two are counted."""
LORA_ENGINE_MLP_LINEARS = 2
"""LoRA-wrapped linears of a dense MLP in vLLM: the packed ``gate_up_proj`` (``MergedColumnParallelLinearWithLoRA``) and
``down_proj`` (``RowParallelLinearWithLoRA``), the MLP GEMMs of ``DECODE_KERNELS_PER_LAYER``, each one
``add_lora_linear`` (vllm-project/vllm vllm/lora/punica_wrapper/punica_gpu.py @010c9386c45da59ad29905c19c06e58affe0ab1e)."""
MOE_EXTRA_KERNELS = 4
"""A routed-expert MLP launches 7 kernels where the dense one launches 3: the router GEMM, the top-k selection, then
vLLM's ``fused_experts_impl`` (vllm-project/vllm ``vllm/model_executor/layers/fused_moe/fused_moe.py``
@000d1458098ebf47491dad470d164d443ab18a9c): ``moe_align_block_size``, the w13 ``invoke_fused_moe_kernel``, the
activation, the w2 ``invoke_fused_moe_kernel``, ``moe_sum``. Counted low: a grouped top-k (DeepSeek) in torch
ops launches several."""
SHARED_EXPERT_KERNELS = 4
"""A shared expert beside the routed ones (DeepSeek ``DeepseekV2MoE.shared_experts``, a ``DeepseekV2MLP``:
gate/up GEMM, SiLU-and-mul, down GEMM, vllm ``vllm/model_executor/models/deepseek_v2.py``
@002d6073aa034d4f5545d45021b0e56d1f3c3593) and the add of its output."""
MLA_EXTRA_KERNELS = 3
"""Multi-head latent attention launches 3 more modules than a QKV attention: ``fused_qkv_a_proj``,
``q_a_layernorm``, ``q_b_proj``, ``kv_a_layernorm``, rotary, the attention, ``o_proj`` against QKV, rotary,
attention, O (``MultiHeadLatentAttentionWrapper.forward``, vllm ``vllm/model_executor/layers/mla.py``
@11080c8e655b4c48219dad6c31d956b9eecf0444). Counted low: the absorbed decode's two batched matmuls around the
attention kernel are not counted."""
GDN_EXTRA_KERNELS = 6
"""A Gated DeltaNet layer's eager decode launches 16 kernels where a softmax-attention layer launches
``DECODE_KERNELS_PER_LAYER`` (vllm-project/vllm ``vllm/model_executor/layers/mamba/gdn_linear_attn.py``
@0218d0504d613b57868a2686a88877614ba9a313, ``GatedDeltaNetAttention.forward`` and the packed decode path
``_forward_core_decode_non_spec``, on by default: ``VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE`` "1"): input norm,
``in_proj_qkvz`` GEMM, ``in_proj_ba`` GEMM, ``b.contiguous()`` and ``a.contiguous()`` (halves of one chunk),
``torch.zeros`` of the core output, ``causal_conv1d_update``, ``fused_recurrent_gated_delta_rule_packed_decode``,
the copy of ``z`` (a slice of the qkvz output) that ``reshape(-1, head_v_dim)`` makes, ``RMSNormGated``,
``out_proj`` GEMM, its copy into ``output[:num_tokens]``, then the fused add+norm and the three MLP kernels. It
writes no KV cache and has no rotary. The unpacked decode path (the same file, with speculative decoding or the
variable at 0) adds three ``.contiguous()`` copies of q/k/v and the copy of the core output: 4 more, not counted."""
ACTIVATION_BYTES = 2
"""bf16 hidden states in the tensor-parallel all-reduces."""
FUSED_MOE_UNTUNED_READ_BYTES_PER_S = {"gb200": 3.756e12}
"""Bytes per second at which vLLM's Triton ``fused_moe`` reads bf16 routed experts on a card for which vLLM ships no
tuned tile config, by GPU id (absent: the card's ``hbm_bytes_per_s``).

Why GB200: NeMo RL runs bf16 MoE generation on vLLM's Triton ``fused_moe`` (``select_unquantized_moe_backend`` picks
TRITON on CUDA unless ``VLLM_USE_FLASHINFER_MOE_FP16`` is set, ``vllm/model_executor/layers/fused_moe/oracle/
unquantized.py`` in the vLLM 0.17.1 sdist; NeMo RL sets neither it nor an MoE backend at v0.5.0 / v0.6.0).
``try_get_optimal_moe_config`` looks for ``E=<experts>,N=<intermediate per rank>,device_name=<torch device name>.json``
and otherwise takes ``get_default_config`` (``fused_moe.py``, 0.17.1 lines 1326-1356). NeMo RL v0.5.0 pins vLLM 0.11.2
and v0.6.0 vLLM 0.17.1 (``pyproject.toml`` at tags v0.5.0 / v0.6.0 of NVIDIA-NeMo/RL; the v0.6 performance page was
added on the r0.6.0 branch, 5fb588932bf835506a8a5bac01de4f8c7ab0a065). Neither sdist (PyPI vllm-0.11.2.tar.gz,
vllm-0.17.1.tar.gz, read 2026-12-02) holds a bf16 config for ``NVIDIA_GB200`` for any shape (only fp8 ones), so
Qwen3-30B-A3B (E=128, N=768 at TP 1), Qwen3-235B-A22B (N=192 at TP 8) and DeepSeek-V3 (E=256, N=64 / 128 at TP 32 /
16) all run the default tiles there. 0.11.2's default for ``M <= E`` is ``BLOCK_SIZE_M 16, N 32, K 64, GROUP_SIZE_M
1`` with Triton's default warps and stages.

The rate: vllm-project/vllm PR #31448 (2025-12-28) ran ``benchmarks/kernels/benchmark_moe.py`` on a B200 (the same
Blackwell die and 8 TB/s HBM3e as a GB200 GPU) for E=128, N=768, bf16, with that default config: 39.61, 51.87 and
73.18 us for 1, 2 and 4 tokens. Top-8 of 128 experts touch ``128·(1 − (120/128)^B)`` = 8, 15.5 and 29.1 experts of
3·768·2048·2 B = 9.44 MB each: 1.91, 2.82 and **3.756 TB/s** (47 % of 8 TB/s), the last kept here (the largest
batch published; the kernel time includes ``moe_align_block_size``, the activation and ``moe_sum``, so a lower bound
on the stream rate, which was still rising). The same default tiles on an A100 PCIe 40GB (PR #19049, 2025-06-03:
109.21, 268.89 and 917.45 us at 1, 4 and 64 tokens) reach 44 %, 66 % and 83 % of its 1.555 TB/s: a kernel that keeps
a fixed number of bytes in flight per SM streams at about SMs x bytes in flight / latency (Little's law), enough for
an Ampere or Hopper HBM, not for Blackwell's. On A100's growth from 4 to 64 tokens the B200 rate would reach ~4.8
TB/s at decode batches (60 %); not published, so the measured 3.756 is used. The H100 rows run the same default tiles
for most shapes and are planned within a few percent at ``hbm_bytes_per_s``, so no H100 figure is set.

Not applied: fp8 experts (GB200 has fp8 block configs for several shapes), B200 (vLLM 0.17.1 ships bf16 B200 configs
for some shapes, e.g. E=128,N=768 from the PR above; no B200 MoE row is scored), and vLLM 0.17.1's larger default
tiles (``num_warps`` 4, ``num_stages`` 3-4, ``BLOCK_SIZE_K`` 128 at small ``M``), for which no Blackwell measurement
was found: the same rate is assumed (NeMo RL's v0.6 GB200 rows stayed as far under the plan as the v0.5 ones on
the same configurations without it: Qwen3-235B 64 GPUs -37 / -28 %, 128 GPUs 1-step off -39 / -42 %, DeepSeek-V3 128
GPUs -53 / -50 %).
Not fitted: ``benchmarks/step_times.py`` moved GB200 MoE RL steps from a median |error| of 38 % to 20 % on the fit
half and 44 % to 30 % on the held-out half."""


@dataclass(frozen=True, slots=True)
class TpLink:
    """The link of an engine whose tensor-parallel group spans hosts (None in the step model: one host)."""

    bus_bytes_per_s: float
    """NCCL ring bus bandwidth of the group."""
    nodes: int
    """NCCL nodes the group spans, joined by the NIC (1: one NVLink domain over several hosts)."""
    hosts: int = 1
    """Hosts (operating-system nodes) the group spans: vLLM's custom all-reduce needs one."""
    host_s_per_step: float = 0.0
    """Host seconds each decode step adds for the executor's round trip to the workers on other hosts
    (``engine_hosts.cross_host_s_per_step``; serial with the GPU step, added to the engine core's host work)."""


def tp_link(*, rates: DeviceRates, tp: int, engine_gpus_per_node: int, nic_bytes_per_s: float,
            gpu_id: str = "", framework: str | None = None) -> TpLink | None:
    """The link of a ``tp``-GPU engine whose node gives the engine ``engine_gpus_per_node`` GPUs: None when
    the group fits in one node; NVLink across the hosts of one NVLink domain (``NVLINK_DOMAIN_GPUS``); else
    the NIC-bound ring (module docstring). ``framework`` (the card's preset) picks the executor's per-step round
    trip across hosts (``engine_hosts.cross_host_s_per_step``: vLLM's Ray executor under nemo-rl / openrlhf)."""
    from trainfit.compute.engine_hosts import cross_host_s_per_step

    per_node = max(1, engine_gpus_per_node)
    if tp <= per_node:
        return None
    hosts = -(-tp // per_node)
    host_s = cross_host_s_per_step(framework=framework, hosts=hosts)
    if tp <= NVLINK_DOMAIN_GPUS.get(gpu_id, 0):
        return TpLink(bus_bytes_per_s=rates.intra_node_bus_bytes_per_s, nodes=1, hosts=hosts, host_s_per_step=host_s)
    bus = collectives.ring_bus_bytes_per_s(rates=rates, crosses_nodes=True, nic_bytes_per_s=nic_bytes_per_s,
                                           local_ranks=per_node)
    return TpLink(bus_bytes_per_s=bus, nodes=hosts, hosts=hosts, host_s_per_step=host_s)


_Piece = tuple[float, float, float, float]
"""(smallest bytes, bytes bound, latency s, seconds per byte) of one way to all-reduce a buffer."""


@dataclass(frozen=True, slots=True)
class TpAllReduce:
    """How one engine all-reduces a buffer: the cheapest of the ways valid for its size (module docstring)."""

    pieces: tuple[_Piece, ...] = ()
    kind: str = "none"
    """'custom' (vLLM's custom all-reduce under 8 MiB, NCCL above), 'nccl', 'ring' (a given latency), 'none'."""

    def seconds(self, total_bytes: float) -> float:
        if not self.pieces or total_bytes <= 0:
            return 0.0
        return min(lat + total_bytes * spb for lo, hi, lat, spb in self.pieces if lo <= total_bytes < hi)


def tp_all_reduce(*, rates: DeviceRates, tp: int, link: TpLink | None = None,
                  latency_s: float | None = None, custom_all_reduce: bool = True) -> TpAllReduce:
    """The all-reduce of a ``tp``-GPU engine (module docstring). ``latency_s``: a measured latency replaces the
    model with the ring/Simple formula (``collectives.all_reduce_seconds``): that whole latency plus the wire time.
    ``custom_all_reduce`` False: the engine was built with ``disable_custom_all_reduce=True`` (verl's vLLM rollouts,
    module docstring, "Custom all-reduce off"), so every buffer goes through NCCL's tuner."""
    if tp <= 1:
        return TpAllReduce()
    inf = float("inf")
    bus = rates.intra_node_bus_bytes_per_s if link is None else link.bus_bytes_per_s
    if latency_s is not None:
        fixed = latency_s
        per_byte = collectives.all_reduce_wire_seconds(total_bytes=1.0, ranks=tp, bus_bytes_per_s=bus)
        return TpAllReduce(((0.0, inf, fixed, per_byte),), "ring")
    intra = collectives.IntraLink.of(nvlink=rates.nvlink)
    nodes = 1 if link is None else link.nodes
    custom = (custom_all_reduce and link is None and tp in collectives.CUSTOM_AR_WORLD_SIZES and rates.p2p
              and (tp == 2 or rates.nvlink))
    top = collectives.CUSTOM_AR_MAX_BYTES if custom else 0.0
    pieces = [(top, inf, c.latency_s, 1.0 / c.alg_bytes_per_s)
              for c in collectives.nccl_all_reduce_choices(ranks=tp, nodes=nodes, bus_bytes_per_s=bus,
                                                           intra_link=intra,
                                                           net_step_excess_s=collectives.NCCL_NET_STEP_EXCESS_S)]
    if custom:
        rate = min(collectives.CUSTOM_AR_READ_BYTES_PER_S, bus)
        one_below = top if (tp == 2 or not rates.nvlink) else (512 * 1024 if tp <= 4 else 256 * 1024)
        pieces.append((0.0, one_below, collectives.CUSTOM_AR_ONE_STAGE_LATENCY_S, (tp - 1) / rate))
        if one_below < top:
            pieces.append((one_below, top, collectives.CUSTOM_AR_TWO_STAGE_LATENCY_S, 2 * (tp - 1) / tp / rate))
    return TpAllReduce(tuple(pieces), "custom" if custom else "nccl")


@dataclass(frozen=True, slots=True)
class DecodeStep:
    """One decode step, its parts in seconds (``total_s``: module docstring)."""

    bandwidth_s: float
    compute_s: float
    comm_s: float
    launch_s: float
    engine_s: float
    """The engine core's host work per step, the per-step constant and the per-sequence part (``_StepModel.core``).
    Serial with the GPU step without the overlap scheduler; under it (``overlap_schedule``) the per-step constant
    runs beside the device and adds to ``total_s`` only where the launch plus it exceed the device step, so
    ``engine_s`` is then what the host spends, not what the step pays."""
    frontend_s: float
    """The frontend's host work: part of ``total_s`` when the engine runs in-process, else overlapped."""
    total_s: float
    kernel_gaps_s: float = 0.0
    """Device seconds between the step's kernels, graphed or eager (module docstring, "Kernel gaps"): they stall
    the weight stream, so the step's device time is ``max(bandwidth_s + kernel_gaps_s, compute_s) + comm_s``."""


@dataclass(frozen=True, slots=True)
class _StepModel:
    """Linear coefficients of the step parts in (B sequences, T context tokens)."""

    bw0: float
    bw_ctx: float
    bw_seq: float
    fl_seq: float
    fl_ctx: float
    ar_per_step: int
    """All-reduces per step (two per layer; 0 at tp 1)."""
    ar_bytes_seq: float
    """Bytes each all-reduce carries per running sequence (hidden x bf16)."""
    ar: TpAllReduce
    launch: float
    engine: float
    engine_seq: float = 0.0
    """Engine-core host seconds per running sequence, serial with the GPU in both modes (module docstring)."""
    frontend0: float = 0.0
    """Frontend host seconds per step (module docstring)."""
    frontend_seq: float = 0.0
    """Frontend host seconds per running sequence per step."""
    frontend_serial: bool = False
    """True: the engine runs in-process, the frontend's work adds to the step; False: it overlaps."""
    bw_experts: float = 0.0
    """Seconds to read all routed experts' weights (MoE); ``bw0`` then holds the dense part only."""
    expert_miss: float = 1.0
    """``1 − k/E``: the chance one token leaves a given routed expert untouched."""
    kernel_gaps: float = 0.0
    """Device seconds per step between the step's kernels, the weight stream stalled (``GRAPH_KERNEL_GAP_S`` per
    kernel outside the all-reduces); added to the bandwidth term in ``seconds`` (``parts`` keeps the bytes alone)."""
    overlap_schedule: bool = False
    """True: the engine's per-step host work (``engine``) and the launch run while the GPU runs the previous step
    (SGLang's overlap scheduler, ``overlap_schedule_step_seconds``), the per-sequence ``engine_seq`` stays serial
    (module docstring); False: all of it is serial with the GPU step (``serial_schedule_step_seconds``)."""
    graph_max_batch: float = float("inf")
    """Largest batch the engine replays a CUDA graph for (SGLang's ``cuda_graph_max_bs``,
    ``sglang_cuda_graph_max_batch``); a larger step runs eagerly: ``eager_launch``."""
    eager_launch: float = 0.0
    """Host seconds to launch an eager step's kernels (read above ``graph_max_batch``)."""
    bw0_one_row: float | None = None
    """Seconds to read the weights in a step of one running sequence where that differs from ``bw0`` (bitsandbytes
    4-bit linears before 0.50: ``gemv_4bit`` on the packed weight for one row, dequantise-then-GEMM for more,
    ``compute.bnb_decode``); None: ``bw0`` at every batch."""

    def launch_s(self, b: float) -> float:
        """Host seconds to launch a step of ``b`` sequences: one graph replay up to ``graph_max_batch``, else every
        kernel eagerly."""
        return self.launch if b <= self.graph_max_batch else self.eager_launch

    def gaps_s(self, b: float) -> float:
        """Device seconds between the kernels of a step of ``b`` sequences, graphed or eager (module docstring,
        "Kernel gaps"): an eager step's launch covers them only when it is the slower side, which ``seconds`` takes."""
        return self.kernel_gaps

    def parts(self, b: float, t: float) -> tuple[float, float, float, float]:
        experts = self.bw_experts * (1.0 - self.expert_miss ** max(b, 1.0)) if self.bw_experts else 0.0
        bw0 = self.bw0 if self.bw0_one_row is None or b > 1.0 else self.bw0_one_row
        return (bw0 + experts + self.bw_ctx * t + self.bw_seq * b, self.fl_seq * b + self.fl_ctx * t,
                self.comm(b), self.launch_s(b))

    def comm(self, b: float) -> float:
        """Tensor-parallel all-reduce seconds of a step of ``b`` running sequences."""
        return self.ar_per_step * self.ar.seconds(self.ar_bytes_seq * b) if self.ar_per_step else 0.0

    def frontend(self, b: float) -> float:
        """The frontend's host seconds for a step of ``b`` running sequences that the GPU step does not
        already hold: in-process, the constant and the per-sequence part; multi-process, the per-sequence
        part (which overlaps the GPU step)."""
        per_seq = self.frontend_seq * max(b, 1.0)
        return self.frontend0 + per_seq if self.frontend_serial else per_seq

    def core(self, b: float) -> float:
        """The engine core's host seconds for a step of ``b`` running sequences, serial with the GPU step in
        both modes: the constant ``engine`` and the per-sequence ``engine_seq``."""
        return self.engine + self.engine_seq * max(b, 1.0)

    def seconds(self, b: float, t: float) -> float:
        bw, fl, cm, ln = self.parts(b, t)
        bw += self.gaps_s(b)
        device = (bw if bw > fl else fl) + cm
        if self.overlap_schedule:  # the per-step host work hides, the per-sequence constant stays serial
            gpu = overlap_schedule_step_seconds(device_s=device, launch_s=ln, host_s=self.engine,
                                                serial_s=self.engine_seq * max(b, 1.0))
        else:
            gpu = serial_schedule_step_seconds(device_s=device, launch_s=ln, host_s=self.core(b))
        host = self.frontend(b)
        return gpu + host if self.frontend_serial else (gpu if gpu > host else host)


def _step_model(*, spec, matmul_params, rates, tp, weight_bytes, kv_bytes_per_token, cuda_graphs,
                engine_s_per_step: float | None = None, tp_all_reduce_latency_s, link: TpLink | None = None,
                engine_multiprocess: bool = True, frontend_s_per_step: float | None = None,
                frontend_s_per_sequence: float | None = None,
                engine_s_per_sequence: float | None = None, rank_bytes: float | None = None,
                expert_bytes_per_param: float = ACTIVATION_BYTES,
                linear_flops_per_s: float | None = None, engine_generation: str = "v1",
                cumulative_outputs: bool | None = None, overlap_schedule: bool = False,
                cuda_graph_max_batch: int | None = None,
                eager_s_per_kernel: float | None = None,
                decode_attention_rows: int = 0, engine_lora: bool = False,
                custom_all_reduce: bool = True, one_row_rank_bytes: float | None = None) -> _StepModel:
    """The step model's coefficients; a host constant left None is ``rates``' field of the same name (the defaults
    ``ENGINE_S_PER_STEP`` ... unless a calibration set them; ``engine_s_per_sequence``: ``engine_s_per_sequence_for``).
    ``engine_generation``: vLLM's engine, v0 (one process, its per-sequence host work holds the output processing:
    no separate frontend term) or v1 (module docstring). ``cumulative_outputs``: the V1 frontend streams cumulative
    outputs (None: when ``engine_multiprocess``, ``AsyncLLM``'s default; in-process engines run ``LLM.generate``).
    A quantized engine (``rollout.quantization``) passes the weight bytes one rank reads (``rank_bytes``; None:
    ``rank_weight_bytes``), its routed experts' bytes per weight and the rate of the per-token matmuls
    (``linear_flops_per_s``, a blend of fp8 and bf16 GEMMs; None: the bf16 matmul rate); attention stays bf16.
    ``overlap_schedule``: the engine's host work overlaps the GPU step (SGLang's overlap scheduler, module docstring).
    ``cuda_graph_max_batch``: under ``cuda_graphs`` the largest batch replayed as a graph, a larger one runs eagerly
    (None: every batch; ``sglang_cuda_graph_max_batch``). ``eager_s_per_kernel``: the host's cost per kernel
    of an eager step (None: vLLM's for ``spec``, ``eager_s_per_kernel_of(rates, spec=spec,
    engine_generation=engine_generation)``). ``engine_lora``: the engine serves a LoRA adapter unmerged, its wrapped
    linears' punica kernels launched and gapped like the others (``decode_kernels``). ``custom_all_reduce`` False:
    the engine runs with vLLM's custom all-reduce disabled, every all-reduce through NCCL (``tp_all_reduce``).
    ``one_row_rank_bytes``: the weight bytes one rank reads in a step of a single sequence where the engine's linears
    read otherwise then (bitsandbytes 4-bit before 0.50, ``compute.bnb_decode``); None: ``rank_bytes`` at every batch."""
    if eager_s_per_kernel is None:
        eager_s_per_kernel = eager_s_per_kernel_of(rates, spec=spec, engine_generation=str(engine_generation))
    if engine_s_per_step is None:
        engine_s_per_step = rates.engine_s_per_step
    if frontend_s_per_step is None:
        frontend_s_per_step = rates.frontend_s_per_step
    if frontend_s_per_sequence is None:
        frontend_s_per_sequence = rates.frontend_s_per_sequence
    if engine_s_per_sequence is None:
        engine_s_per_sequence = engine_s_per_sequence_for(engine_generation, rates)
    if str(engine_generation) == "v0":
        frontend_s_per_step = frontend_s_per_sequence = 0.0
        engine_multiprocess = False
    elif engine_multiprocess if cumulative_outputs is None else cumulative_outputs:
        frontend_s_per_sequence += rates.frontend_cumulative_s_per_sequence
    hbm = rates.hbm_bytes_per_s
    flops = rates.matmul_flops_per_s * tp
    lin_flops = (linear_flops_per_s or rates.matmul_flops_per_s) * tp
    n_ar = 2 * spec.num_layers if tp > 1 else 0
    kernels = decode_kernels(spec, tp=tp, engine_lora=engine_lora)
    experts, miss = routed_expert_bytes(spec, weight_bytes=weight_bytes, bytes_per_param=expert_bytes_per_param)
    moe_hbm = fused_moe_read_bytes_per_s(rates, expert_bytes_per_param=expert_bytes_per_param)
    rank = rank_weight_bytes(spec, tp=tp, weight_bytes=weight_bytes) if rank_bytes is None else rank_bytes
    state = linear_state_step_bytes(spec, tp=tp)
    # the decode kernel's query rows: the tile's padded rows per KV head where it pads (``fa3_decode_query_rows``),
    # over every rank's KV heads (vLLM replicates them when ``tp`` exceeds their number: each rank one tile a token)
    attention_query_dim = (max(spec.num_kv_heads, tp) * spec.head_dim
                           * max(decode_attention_rows, spec.num_attention_heads // max(spec.num_kv_heads, tp))
                           if decode_attention_rows else spec.q_dim)
    return _StepModel(
        bw0=(rank - experts / tp) / hbm, bw_experts=experts / tp / moe_hbm, expert_miss=miss, bw_ctx=kv_bytes_per_token / tp / hbm, bw_seq=(kv_bytes_per_token / tp + state) / hbm,
        fl_seq=2 * matmul_params / lin_flops, fl_ctx=4.0 * attention_query_dim * spec.num_full_attention_layers / flops,
        ar_per_step=n_ar, ar_bytes_seq=spec.hidden_size * ACTIVATION_BYTES,
        ar=tp_all_reduce(rates=rates, tp=tp, link=link, latency_s=tp_all_reduce_latency_s,
                         custom_all_reduce=custom_all_reduce),
        launch=(rates.host_s_per_forward_kernel if cuda_graphs
                else eager_s_per_kernel * kernels),
        kernel_gaps=(kernels - n_ar) * GRAPH_KERNEL_GAP_S,
        overlap_schedule=overlap_schedule,
        graph_max_batch=(float(cuda_graph_max_batch) if cuda_graphs and cuda_graph_max_batch is not None
                         else float("inf")),
        eager_launch=eager_s_per_kernel * kernels,
        bw0_one_row=None if one_row_rank_bytes is None else (one_row_rank_bytes - experts / tp) / hbm,
        engine=engine_s_per_step + (link.host_s_per_step if link is not None else 0.0),
        engine_seq=engine_s_per_sequence,
        frontend0=frontend_s_per_step, frontend_seq=frontend_s_per_sequence, frontend_serial=not engine_multiprocess,
    )


def fused_moe_read_bytes_per_s(rates: DeviceRates, *, expert_bytes_per_param: float = ACTIVATION_BYTES) -> float:
    """Bytes per second at which one engine GPU reads its routed experts in a decode step: the card's
    ``hbm_bytes_per_s``, or for bf16 experts on a card vLLM ships no tuned ``fused_moe`` config for the lower
    ``FUSED_MOE_UNTUNED_READ_BYTES_PER_S`` (whichever is lower)."""
    untuned = FUSED_MOE_UNTUNED_READ_BYTES_PER_S.get(rates.gpu_id)
    if untuned is None or expert_bytes_per_param != ACTIVATION_BYTES:
        return rates.hbm_bytes_per_s
    return min(rates.hbm_bytes_per_s, untuned)


def engine_lora_kernels(spec: ModelSpec) -> int:
    """Kernels an engine serving a LoRA adapter unmerged adds to one decode step (``LORA_ENGINE_KERNELS_PER_LINEAR``
    on each LoRA-wrapped linear): the attention's two wrapped linears (QKV, O) on every layer and the MLP's two
    (gate/up, down) on every layer with a dense MLP; a routed-expert MLP's experts are not counted (a lower bound)."""
    moe = spec.moe
    dense_mlp = sum(1 for i in range(spec.num_layers)
                    if moe is None or moe.num_experts <= 1 or not moe.is_moe_layer(i))
    linears = LORA_ENGINE_ATTENTION_LINEARS * spec.num_layers + LORA_ENGINE_MLP_LINEARS * dense_mlp
    return LORA_ENGINE_KERNELS_PER_LINEAR * linears


def decode_kernels(spec: ModelSpec, *, tp: int, engine_lora: bool = False) -> int:
    """Kernels one eager decode step launches: per layer ``DECODE_KERNELS_PER_LAYER``, two all-reduces at
    ``tp`` > 1, ``MLA_EXTRA_KERNELS`` with latent attention; per Gated DeltaNet layer ``GDN_EXTRA_KERNELS``; per
    routed-expert layer ``MOE_EXTRA_KERNELS``, and ``SHARED_EXPERT_KERNELS`` with a shared expert; with
    ``engine_lora`` (the engine runs a LoRA adapter unmerged, vLLM ``enable_lora``) the punica kernels of its
    LoRA-wrapped linears, ``engine_lora_kernels``."""
    per_layer = DECODE_KERNELS_PER_LAYER + (2 if tp > 1 else 0) + (MLA_EXTRA_KERNELS if spec.mla is not None else 0)
    total = spec.num_layers * per_layer + (engine_lora_kernels(spec) if engine_lora else 0)
    if spec.linear_attention is not None:
        total += spec.num_linear_attention_layers * GDN_EXTRA_KERNELS
    moe = spec.moe
    if moe is not None and moe.num_experts > 1:
        moe_layers = sum(1 for i in range(spec.num_layers) if moe.is_moe_layer(i))
        shared = SHARED_EXPERT_KERNELS if moe.shared_expert_intermediate_size else 0
        total += moe_layers * (MOE_EXTRA_KERNELS + shared)
    return total


def linear_state_step_bytes(spec: ModelSpec, *, tp: int) -> float:
    """Bytes one running sequence's linear-attention state moves per decode step on one of ``tp`` ranks: every
    Gated DeltaNet layer reads its recurrent state (``num_value_heads/tp x value_head_dim x key_head_dim``, fp32)
    and writes it back in place, and reads and shifts its conv state (``conv_dim/tp x (conv_kernel_dim - 1)``,
    bf16): twice ``rollout.vllm.linear_state_bytes_per_seq``. vLLM's decode kernel loads ``h0`` from
    ``ssm_state[ssm_state_indices]`` and stores the final state to the same slot (``inplace_final_state``;
    ``fused_recurrent_gated_delta_rule_packed_decode`` / ``fused_sigmoid_gating_delta_rule_update``), and
    ``causal_conv1d_update`` updates ``conv_state`` in place (vllm-project/vllm
    ``vllm/model_executor/layers/mamba/gdn_linear_attn.py`` @0218d0504d613b57868a2686a88877614ba9a313). Qwen3.5-9B
    at tp 1: 24 layers x (32 x 128 x 128 x 4 + 8192 x 3 x 2) B = 51.5 MB held, 103 MB moved per sequence per step,
    about as much as 3,100 tokens of its attention KV. 0 without linear attention."""
    if spec.linear_attention is None or not spec.num_linear_attention_layers:
        return 0.0
    from trainfit.rollout.vllm import linear_state_bytes_per_seq

    return 2.0 * linear_state_bytes_per_seq(spec, tp=tp)


def rank_weight_bytes(spec: ModelSpec, *, tp: int, weight_bytes: float) -> float:
    """Weight bytes one of ``tp`` ranks holds and reads every step: ``weight_bytes`` times the rank's share of
    the parameters as vLLM shards them (``rollout.vllm.weights_per_gpu_params``: norms, router gates, MLA's
    down-projections and KV heads beyond one per rank are replicated on every rank, the rest split by ``tp``)."""
    if tp <= 1:
        return weight_bytes
    from trainfit.memory.params import param_breakdown
    from trainfit.rollout.vllm import weights_per_gpu_params

    return weight_bytes * weights_per_gpu_params(spec, tp=tp) / param_breakdown(spec).total


def routed_expert_bytes(spec: ModelSpec, *, weight_bytes: float,
                        bytes_per_param: float = ACTIVATION_BYTES) -> tuple[float, float]:
    """(bytes of all routed experts at ``bytes_per_param`` (bf16; fp8 with its block scales under
    ``rollout.quantization: fp8``), at most ``weight_bytes``; ``1 − k/E``); (0, 1) for a dense model."""
    moe = spec.moe
    if moe is None or moe.num_experts <= moe.experts_per_token:
        return 0.0, 1.0
    layers = sum(1 for i in range(spec.num_layers) if moe.is_moe_layer(i))
    routed = layers * moe.num_experts * 3 * spec.hidden_size * moe.expert_intermediate_size * bytes_per_param
    return min(routed, weight_bytes), 1.0 - moe.experts_per_token / moe.num_experts


def decode_step_seconds(
    *, spec: ModelSpec, matmul_params: float, rates: DeviceRates, tp: int, batch: float, context_tokens: float,
    weight_bytes: float, kv_bytes_per_token: float, cuda_graphs: bool = True,
    engine_s_per_step: float | None = None, tp_all_reduce_latency_s: float | None = None,
    link: TpLink | None = None, engine_multiprocess: bool = True, engine_s_per_sequence: float | None = None,
    rank_bytes: float | None = None, expert_bytes_per_param: float = ACTIVATION_BYTES,
    linear_flops_per_s: float | None = None, engine_generation: str = "v1", cumulative_outputs: bool | None = None,
    overlap_schedule: bool = False, cuda_graph_max_batch: int | None = None,
    eager_s_per_kernel: float | None = None, decode_attention_rows: int = 0,
) -> DecodeStep:
    """One decode step of ``batch`` sequences holding ``context_tokens`` tokens of KV in all (module docstring);
    ``link``: the tensor-parallel group's link when it spans nodes (``tp_link``); ``engine_multiprocess``:
    False when the engine core runs in the caller's process (the frontend's host work adds to the step). A host
    constant left None is ``rates``' (``_step_model``). ``decode_attention_rows``: query rows per KV head the decode
    attention kernel computes (``fa3_decode_query_rows``; 0: the query heads alone, module docstring "Padded decode
    attention")."""
    m = _step_model(spec=spec, matmul_params=matmul_params, rates=rates, tp=tp, weight_bytes=weight_bytes,
                    kv_bytes_per_token=kv_bytes_per_token, cuda_graphs=cuda_graphs,
                    engine_s_per_step=engine_s_per_step, tp_all_reduce_latency_s=tp_all_reduce_latency_s,
                    link=link, engine_multiprocess=engine_multiprocess, engine_s_per_sequence=engine_s_per_sequence,
                    rank_bytes=rank_bytes, expert_bytes_per_param=expert_bytes_per_param,
                    linear_flops_per_s=linear_flops_per_s, engine_generation=engine_generation,
                    cumulative_outputs=cumulative_outputs, overlap_schedule=overlap_schedule,
                    cuda_graph_max_batch=cuda_graph_max_batch, eager_s_per_kernel=eager_s_per_kernel,
                    decode_attention_rows=decode_attention_rows)
    bw, fl, cm, ln = m.parts(batch, context_tokens)
    return DecodeStep(bandwidth_s=bw, compute_s=fl, comm_s=cm, launch_s=ln, engine_s=m.core(batch),
                      frontend_s=m.frontend(batch), total_s=m.seconds(batch, context_tokens),
                      kernel_gaps_s=m.gaps_s(batch))


def _bound(m: _StepModel, b: float, t: float) -> int:
    """What sets the pace of a step: 0 the weight stream, 1 the FLOPs, 2 the host (launch and host work). Under the
    overlap scheduler only the per-step host work races the device (``overlap_schedule_step_seconds``); the
    per-sequence constant adds to whichever side wins, so it does not decide the bound."""
    bw, fl, _, ln = m.parts(b, t)
    bw += m.gaps_s(b)
    engine = ln + (m.engine if m.overlap_schedule else m.core(b))
    host = engine + m.frontend(b) if m.frontend_serial else max(engine, m.frontend(b))
    return 0 if bw >= fl and bw >= host else 1 if fl >= host else 2


_BOUNDS = ("bandwidth", "compute", "launch")
