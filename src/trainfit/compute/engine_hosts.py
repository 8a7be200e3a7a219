"""What one decode step of a vLLM engine pays when its tensor-parallel group spans hosts: the executor's round trip.

**How the engine drives its workers.** A vLLM engine of more than one GPU runs its workers through an executor; every
decode step the engine core (``EngineCore.step``) hands the step's ``SchedulerOutput`` to the executor and waits for
the ``ModelRunnerOutput`` (the sampled tokens) before it schedules the next step (no async scheduling; module
``decode_step``). NeMo RL runs every engine of more than one GPU on the Ray executor
(``distributed_executor_backend = "ray"`` when TP x PP > 1: NVIDIA-NeMo/RL ``nemo_rl/models/generation/vllm/vllm_worker.py``
line 323 @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 (v0.5.0, vLLM 0.11.2), line 448 @5fb588932bf835506a8a5bac01de4f8c7ab0a065
(v0.6.0, vLLM 0.17.1), line 293 @81aa43dda4765b0429cf31dab44441e4e4383911 (v0.7.0, vLLM 0.20.0); it sets no
``VLLM_USE_RAY_*`` variable at those tags); OpenRLHF does the same (``"uni" if tensor_parallel_size == 1 else "ray"``,
OpenRLHF/OpenRLHF ``openrlhf/trainer/ray/vllm_engine.py`` @3c3be6234e0cb353e76bb8019947db9dfe99fca7). vLLM's Ray
executor is a Ray Compiled Graph: ``RayDistributedExecutor._execute_dag`` calls
``forward_dag.execute((scheduler_output, grammar_output))``, every worker of the first stage reads that input, each
worker's ``execute_model_ray`` returns its ``ModelRunnerOutput`` into a ``MultiOutputNode`` of all workers, and the
core blocks on ``refs[0].get()`` (vllm-project/vllm ``vllm/v1/executor/ray_executor.py`` lines 437-458 and 525-618,
``vllm/v1/executor/ray_utils.py`` lines 83-120, vLLM 0.11.2 sdist https://pypi.org/project/vllm/0.11.2/, read
2026-12-02; vLLM 0.20.0 still selects this executor for ``"ray"`` unless ``VLLM_USE_RAY_V2_EXECUTOR_BACKEND`` is set,
``vllm/v1/executor/abstract.py`` lines 60-66). A compiled graph moves its inputs and outputs through shared memory
between actors of one node, and through Ray's mutable-object push (the writer's raylet sends each write to the
reader's node over gRPC, ``PushMutableObject``) to actors on another node. So every decode step of an engine whose
workers sit on several hosts pays a network round trip through Ray's control plane, where an engine on one host pays
a shared-memory one.

**The cost: Ray's own two-node compiled-graph benchmark.** ``release/microbenchmark/experimental/
compiled_graph_gpu_microbenchmark.py --distributed`` (ray-project/ray) pins a sender actor on the driver's node and
a receiver on a second node; one ``exec_ray_dag_cpu`` execution is driver -> sender (same node), sender -> receiver (a
100 KB tensor, across nodes), receiver -> driver (across nodes). Two published runs on two AWS GPU instances
(``compute_gpu_2x1_aws.yaml``): 681.14 executions/s (ray-project/ray PR #49834, 2025-01-14) and 680.38 /s (PR #49856,
2025-01-15): 1.468 ms an execution. The same library's one-node figure for the smallest graph (driver -> one actor ->
driver, an echo) is 86.7 us (``doc/source/ray-core/compiled-graph/quickstart.rst`` @b2a784ad9d1942ae7c2417e92032124c34f8a78d,
"Execution takes 86.72196418046951 us"). The step of an engine across hosts is taken to pay the difference,
``CROSS_HOST_S_PER_STEP`` = 1.468 - 0.087 = 1.38 ms, on top of what a one-host engine pays (already inside
``decode_step.ENGINE_S_PER_STEP`` and the fitted host constants). Both the leg the two-node execution keeps on one
node and its 100 KB payload stay in the figure, so it is an upper estimate of the network legs on that cluster; the
hosts of a training cluster (400 Gb/s NICs, faster cores) may pay less, an older Ray more. Nothing is fitted to the
benchmark rows.

**What it does not cover.** The figure is one round trip per step whatever the number of hosts (Ray pushes to the
reader nodes in parallel); pipeline-parallel engines (the card has no engine PP) would pay one per stage boundary;
verl's rollout runs ``external_launcher`` (every rank its own engine, no per-step broadcast) or its own ZeroMQ
executor for the async server, neither measured, so verl engines get none. The kernels a small batch runs slower
than ``decode_step``'s bandwidth/compute bound are not modelled here either.

Pure Python: no torch import.
"""

from __future__ import annotations

RAY_CGRAPH_CROSS_NODE_EXECUTIONS_PER_S = 681.1384158112046
"""Ray Compiled Graph executions per second, driver -> local actor -> actor on a second node -> driver, 100 KB
(``exec_ray_dag_cpu`` of ``compiled_graph_gpu_microbenchmark.py --distributed``; ray-project/ray PR #49834,
2025-01-14; a second run 680.38 /s, PR #49856, 2025-01-15)."""
RAY_CGRAPH_LOCAL_EXECUTION_S = 86.72196418046951e-6
"""One Ray Compiled Graph execution of an echo on an actor of the driver's node (ray-project/ray
``doc/source/ray-core/compiled-graph/quickstart.rst`` @b2a784ad9d1942ae7c2417e92032124c34f8a78d)."""
CROSS_HOST_S_PER_STEP = 1.0 / RAY_CGRAPH_CROSS_NODE_EXECUTIONS_PER_S - RAY_CGRAPH_LOCAL_EXECUTION_S
"""What a decode step of a Ray-executor engine across hosts pays beyond one on a single host (module docstring):
~1.38 ms."""
RAY_EXECUTOR_PRESETS = ("nemo-rl", "openrlhf")
"""Frameworks that run an engine of more than one GPU on vLLM's Ray (compiled graph) executor (module docstring)."""


def ray_executor(framework: str | None) -> bool:
    """True when ``framework`` (a card preset) drives a multi-GPU vLLM engine through vLLM's Ray executor."""
    return (framework or "") in RAY_EXECUTOR_PRESETS


def cross_host_s_per_step(*, framework: str | None, hosts: int) -> float:
    """Seconds a decode step of an engine spread over ``hosts`` hosts pays for the executor's round trip across
    hosts: ``CROSS_HOST_S_PER_STEP`` for a Ray-executor framework on more than one host, else 0 (module docstring)."""
    if hosts < 1:
        raise ValueError(f"cross_host_s_per_step: hosts must be >= 1, got {hosts}")
    return CROSS_HOST_S_PER_STEP if hosts > 1 and ray_executor(framework) else 0.0
