"""ATen ops, module calls and host seconds of one Megatron-Core MoE layer, forward and backward, on this CPU.

Why: ``compute.moe_time`` / ``compute.inventory`` charge a Megatron-Core MoE layer's host as an op count times the
per-op host rates of ``compute.rates`` (the router, the token dispatcher's pre- and post-processing, permute and
unpermute, the expert GEMMs). This counts what Megatron-Core itself dispatches for one MoE layer with the settings of
the Megatron-Core MoE rows, so the plan's count can be checked against it (the per-op rates are not measured here).

Setup: megatron-core (the ``megatron.core`` wheel from PyPI, the version printed; 0.14.0 is the source of
NVIDIA/Megatron-LM core_v0.14.0 23e00ed0963c35382dfe8a5a94fb3cda4d21e133) and torch CPU in a separate virtual
environment; one gloo process per expert-parallel rank (``--ep 1,2``: EP 1 and EP 2, TP = PP = 1),
``use_cpu_initialization``. A ``TransformerLayer`` from ``get_gpt_layer_local_spec(num_experts,
moe_grouped_gemm=False)`` (no Transformer Engine; the routed experts are ``SequentialMLP``), hidden 64, expert width
32, fp32, 256 tokens, ``moe_permute_fusion`` False, ``moe_router_fusion`` False, router settings of the rows
(``CONFIGS``). Stand-ins where a CPU-only build differs from a GPU run, none of them an ATen op there: CUDA streams
and events are no-ops; ``maybe_move_tensor_to_cpu`` copies each split-size tensor once and hands numpy on, as on a
GPU (on a CPU build it returns the tensor, and the dispatcher's Python arithmetic on it would dispatch ops a GPU run
does not); ``all_to_all_single`` gets its split sizes as lists; megatron-core 0.14.0's router GEMM reads an unbound
``te_general_gemm`` without Transformer Engine, set to None.

Counting: a ``TorchDispatchMode`` counts the non-view ATen ops (views separately; the convention of
``benchmarks/host_fwd_bwd_cpu.py``) of one ``MoELayer`` call (the layer's ``mlp``; its attention is not run) by
region: ``router`` (``TopKRouter.forward``: gating GEMM, score function, top-k, load-balancing loss), ``preprocess``
(``dispatch_preprocess``: the per-expert counts, with EP their all-gather and the split-size copies, and the
permute), ``dispatch`` (``token_dispatch``: the all-to-alls), ``postprocess`` (``dispatch_postprocess``: the sort by
local expert), ``experts``, ``combine_pre`` (``combine_preprocess``: the unsort), ``combine`` (``token_combine`` +
``combine_postprocess``: the all-to-all back and the unpermute); the rest of ``MoELayer.forward`` as
``moe_other``. Backward ops are attributed to the region whose forward created the autograd node being run
(``torch._C._current_autograd_node``; nodes of an ``autograd.Function`` found by walking each region's outputs'
graph); weight-gradient accumulation is ``accumulate``. Module calls: a global forward pre-hook, by region.

Timing: host seconds of one ``MoELayer`` forward (grad mode), of each region's forward, and of the backward of the
output's sum, on this CPU (shared; best of ``ROUNDS`` rounds of ``CALLS`` calls, one thread): with hidden 64 the
kernels' own time is small, but the expert loop's ops do compute here; the per-op figure is this CPU's, not a GPU
host's.

Usage (the virtual environment with megatron-core and torch CPU)::

    ROUNDS=7 CALLS=3 /work/venvs/mcore/bin/python benchmarks/mcore_moe_layer_ops_cpu.py --ep 1,2 \\
        --json benchmarks/results/mcore_moe_layer_ops_cpu.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import time
from collections import Counter, defaultdict

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "7"))
CALLS = int(os.environ.get("CALLS", "5"))
TOKENS = int(os.environ.get("TOKENS", "256"))
HIDDEN, EXPERT_WIDTH, HEADS = 64, 32, 4

# (name, num_experts, top_k, load balancing, aux coeff, dispatcher, force balance, score function, extra config)
CONFIGS = (
    ("qwen3-moe aux_loss alltoall", 128, 8, "aux_loss", 1e-3, "alltoall", False, "softmax", {}),
    ("qwen3-moe aux_loss alltoall force-balanced", 128, 8, "aux_loss", 1e-3, "alltoall", True, "softmax", {}),
    ("qwen3-moe none alltoall", 128, 8, "none", 0.0, "alltoall", False, "softmax", {}),
    ("qwen3-moe aux_loss allgather", 128, 8, "aux_loss", 1e-3, "allgather", False, "softmax", {}),
    ("gpt-oss-20b none alltoall", 32, 4, "none", 0.0, "alltoall", False, "softmax", {}),
    ("gpt-oss-120b none alltoall", 128, 4, "none", 0.0, "alltoall", False, "softmax", {}),
    ("deepseek-v3 seq_aux_loss sigmoid group-limited", 256, 8, "seq_aux_loss", 1e-4, "alltoall", False, "sigmoid",
     dict(moe_router_num_groups=8, moe_router_group_topk=4, moe_router_topk_scaling_factor=2.5,
          moe_router_enable_expert_bias=True, moe_router_pre_softmax=False)),
    ("deepseek-v3 none sigmoid group-limited", 256, 8, "none", 0.0, "alltoall", False, "sigmoid",
     dict(moe_router_num_groups=8, moe_router_group_topk=4, moe_router_topk_scaling_factor=2.5,
          moe_router_enable_expert_bias=True, moe_router_pre_softmax=False)),
)
REGIONS = ("router", "preprocess", "dispatch", "postprocess", "experts", "combine_pre", "combine")


class _CudaStub:
    """No-op stand-ins for the CUDA stream / event calls of the token dispatcher on a CPU-only build."""

    class Stream:
        def wait_stream(self, other) -> None:  # noqa: ANN001
            pass

        def record_event(self):  # noqa: ANN201
            return _CudaStub.Event()

        def synchronize(self) -> None:
            pass

    class Event:
        def synchronize(self) -> None:
            pass

        def record(self, *a) -> None:  # noqa: ANN002
            pass


def _patch_cuda() -> None:
    stream = _CudaStub.Stream()
    torch.cuda.Stream = lambda *a, **k: _CudaStub.Stream()  # type: ignore[assignment]
    torch.cuda.current_stream = lambda *a, **k: stream  # type: ignore[assignment]
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()  # type: ignore[assignment]
    torch.cuda.Event = lambda *a, **k: _CudaStub.Event()  # type: ignore[assignment]
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]
    torch.Tensor.record_stream = lambda self, s: None  # type: ignore[assignment]
    # megatron-core 0.14.0's router GEMM reads ``te_general_gemm`` unconditionally; without Transformer Engine the
    # name is never bound (moe_utils.py ``RouterGatingLinearFunction.forward``): None takes its torch path
    from megatron.core.transformer.moe import moe_utils
    # its split sizes are numpy arrays, which this torch's ``all_to_all_single`` binding refuses: lists instead
    import torch.distributed as dist
    a2a = dist.all_to_all_single

    def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, *a, **k):  # noqa: A002, ANN001, ANN002, ANN003, ANN202
        as_list = (lambda v: None if v is None else [int(x) for x in v])
        return a2a(output, input, as_list(output_split_sizes), as_list(input_split_sizes), *a, **k)

    dist.all_to_all_single = all_to_all_single

    # On a GPU ``maybe_move_tensor_to_cpu`` copies each split-size tensor to the host (one copy op) and hands numpy
    # arrays on; on a CPU build it returns the tensor untouched and the dispatcher's later Python arithmetic on it
    # would dispatch ops a GPU run does not: copy as on a GPU instead (moe_utils.py ``maybe_move_tensor_to_cpu``)
    def maybe_move_tensor_to_cpu(tensor, as_numpy=False, record_stream=False):  # noqa: ANN001, ANN202
        if torch.is_tensor(tensor):
            tensor = tensor.to(torch.device("cpu"), copy=True)
            if as_numpy:
                tensor = tensor.numpy()
        return tensor

    from megatron.core.transformer.moe import token_dispatcher
    moe_utils.maybe_move_tensor_to_cpu = maybe_move_tensor_to_cpu
    token_dispatcher.maybe_move_tensor_to_cpu = maybe_move_tensor_to_cpu
    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None


class Recorder(TorchDispatchMode):
    """Non-view / view op counts per region, forward and backward; region of every autograd node seen."""

    def __init__(self) -> None:
        super().__init__()
        self.region = "other"
        self.phase = "forward"
        self.ops: Counter = Counter()
        self.views: Counter = Counter()
        self.names: dict = defaultdict(Counter)
        self.node_region: dict = {}

    def _where(self) -> str:
        if self.phase == "forward":
            return self.region
        node = torch._C._current_autograd_node()
        if node is None:
            return "unattributed"
        if type(node).__name__ == "AccumulateGrad":
            return "accumulate"
        return self.node_region.get(node, "unattributed")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        where = self._where()
        key = (self.phase, where)
        (self.views if func.is_view else self.ops)[key] += 1
        if not func.is_view:
            self.names[key][func.__name__] += 1
        if self.phase == "forward":
            for t in torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                    self.node_region.setdefault(t.grad_fn, where)
        return out

    def tag_graph(self, outputs, region: str) -> None:  # noqa: ANN001
        """Tag the untagged autograd nodes reachable from a region's outputs (an ``autograd.Function``'s node)."""
        stack = [t.grad_fn for t in torch.utils._pytree.tree_leaves(outputs)
                 if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while stack:
            n = stack.pop()
            if n is None or n in self.node_region or type(n).__name__ == "AccumulateGrad":
                continue
            self.node_region[n] = region
            stack.extend(f for f, _ in n.next_functions)


def _wrap(obj, attr: str, region: str, rec: Recorder, region_s: Counter) -> None:  # noqa: ANN001
    fn = getattr(obj, attr)

    def wrapped(*a, **k):  # noqa: ANN002, ANN003, ANN202
        prev, rec.region = rec.region, region
        t0 = time.perf_counter()
        try:
            out = fn(*a, **k)
        finally:
            rec.region = prev
            region_s[region] += time.perf_counter() - t0
        if rec.phase == "forward":
            rec.tag_graph(out, region)
        return out

    setattr(obj, attr, wrapped)


def build(cfg_row) -> tuple:  # noqa: ANN001
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    _, experts, top_k, lb, coeff, dispatcher, force, score, extra = cfg_row
    config = TransformerConfig(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=HEADS, ffn_hidden_size=4 * HIDDEN,
        num_moe_experts=experts, moe_ffn_hidden_size=EXPERT_WIDTH, moe_router_topk=top_k,
        moe_router_load_balancing_type=lb, moe_aux_loss_coeff=coeff, moe_token_dispatcher_type=dispatcher,
        moe_router_force_load_balancing=force, moe_router_score_function=score, moe_grouped_gemm=False,
        moe_permute_fusion=False, moe_router_dtype="fp32", gated_linear_unit=True,
        activation_func=torch.nn.functional.silu, add_bias_linear=False, normalization="RMSNorm",
        use_cpu_initialization=True, params_dtype=torch.float32, bias_dropout_fusion=False,
        masked_softmax_fusion=False, apply_rope_fusion=False, gradient_accumulation_fusion=False,
        persist_layer_norm=False, hidden_dropout=0.0, attention_dropout=0.0, **extra)
    spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False, normalization="RMSNorm")
    layer = build_module(spec, config=config, layer_number=1)
    layer.train()
    return layer, config


def run_config(cfg_row) -> dict:  # noqa: ANN001
    from megatron.core.transformer.moe.moe_utils import clear_aux_losses_tracker

    torch.manual_seed(0)
    layer, config = build(cfg_row)
    moe = layer.mlp
    rec = Recorder()
    region_s: Counter = Counter()  # forward host seconds per region, summed over a round
    _wrap(moe.router, "forward", "router", rec, region_s)
    td = moe.token_dispatcher
    for attr, region in (("dispatch_preprocess", "preprocess"), ("token_dispatch", "dispatch"),
                         ("dispatch_postprocess", "postprocess"), ("combine_preprocess", "combine_pre"),
                         ("token_combine", "combine"), ("combine_postprocess", "combine")):
        _wrap(td, attr, region, rec, region_s)
    _wrap(moe.experts, "forward", "experts", rec, region_s)
    _wrap(moe, "forward", "moe_other", rec, region_s)

    module_calls: Counter = Counter()

    def pre_hook(mod, args):  # noqa: ANN001, ANN202
        module_calls[rec.region] += 1

    handle = torch.nn.modules.module.register_module_forward_pre_hook(pre_hook)
    x = torch.randn(TOKENS, 1, HIDDEN, requires_grad=True)
    # a warm-up call first (lazy state, first-touch)
    out, _ = moe(x)
    out.float().sum().backward()
    clear_aux_losses_tracker()
    rec.ops.clear(), rec.views.clear(), rec.names.clear(), rec.node_region.clear(), module_calls.clear()
    with rec:
        rec.phase = "forward"
        out, _ = moe(x)
        rec.phase = "backward"
        out.float().sum().backward()
    handle.remove()
    clear_aux_losses_tracker()

    # host seconds per MoELayer call, forward and backward, no counting mode
    fwd_best = bwd_best = float("inf")
    region_best: dict = {}
    for _ in range(ROUNDS):
        f = b = 0.0
        region_s.clear()
        for _ in range(CALLS):
            t0 = time.perf_counter()
            out, _ = moe(x)
            t1 = time.perf_counter()
            out.float().sum().backward()
            t2 = time.perf_counter()
            f, b = f + t1 - t0, b + t2 - t1
            clear_aux_losses_tracker()
        fwd_best, bwd_best = min(fwd_best, f / CALLS), min(bwd_best, b / CALLS)
        for g, secs in region_s.items():  # forward host seconds per region (moe_other: the whole MoELayer.forward)
            region_best[g] = min(region_best.get(g, float("inf")), secs / CALLS)
    regions = REGIONS + ("moe_other", "accumulate", "unattributed")
    table = {ph: {r: dict(ops=rec.ops[(ph, r)], views=rec.views[(ph, r)],
                          top=dict(rec.names[(ph, r)].most_common(12)))
                  for r in regions if rec.ops[(ph, r)] or rec.views[(ph, r)]}
             for ph in ("forward", "backward")}
    n_fwd = sum(rec.ops[("forward", r)] for r in regions)
    n_bwd = sum(rec.ops[("backward", r)] for r in regions)
    return dict(config=cfg_row[0], num_experts=cfg_row[1], top_k=cfg_row[2], load_balancing=cfg_row[3],
                aux_loss_coeff=cfg_row[4], dispatcher=cfg_row[5], force_load_balancing=cfg_row[6],
                score_function=cfg_row[7], extra={k: v for k, v in cfg_row[8].items()}, tokens=TOKENS,
                ops=table, module_calls=dict(module_calls), forward_ops=n_fwd, backward_ops=n_bwd,
                forward_host_s=fwd_best, backward_host_s=bwd_best, forward_region_host_s=region_best,
                forward_us_per_op=1e6 * fwd_best / max(1, n_fwd), backward_us_per_op=1e6 * bwd_best / max(1, n_bwd))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _worker(rank: int, ep: int, port: int, queue) -> None:  # noqa: ANN001
    """One rank of a gloo group of ``ep`` processes (EP = world size, TP = PP = 1); rank 0 reports."""
    torch.set_num_threads(1)
    _patch_cuda()
    import torch.distributed as dist

    from megatron.core import parallel_state

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=ep)
    parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=ep)
    out = []
    for c in CONFIGS:
        r = run_config(c)
        r["expert_parallel"] = ep
        out.append(r)
    if rank == 0:
        queue.put(out)
    dist.barrier()
    dist.destroy_process_group()


def _print(results: list[dict]) -> None:
    cols = REGIONS + ("moe_other", "accumulate", "unattributed")
    head = f"{'config':48s} {'ep':>2s} {'phase':8s} " + " ".join(f"{r[:11]:>11s}" for r in cols)
    for r in results:
        print()
        print(head)
        for ph in ("forward", "backward"):
            cells = [r["ops"][ph].get(g, {}).get("ops", 0) for g in cols]
            print(f"{r['config']:48s} {r['expert_parallel']:2d} {ph:8s} " + " ".join(f"{c:11d}" for c in cells))
        print(f"  module calls {r['module_calls']}; non-view ops fwd {r['forward_ops']} bwd {r['backward_ops']}; "
              f"host fwd {1e3 * r['forward_host_s']:.2f} ms ({r['forward_us_per_op']:.1f} us/op), "
              f"bwd {1e3 * r['backward_host_s']:.2f} ms ({r['backward_us_per_op']:.1f} us/op)")
        print("  forward views by region: " + ", ".join(
            f"{g} {r['ops']['forward'][g]['views']}" for g in REGIONS if r["ops"]["forward"].get(g)))
        reg = r["forward_region_host_s"]
        print("  forward host us per non-view op by region: " + ", ".join(
            f"{g} {1e6 * reg[g] / r['ops']['forward'][g]['ops']:.1f}" for g in REGIONS
            if g in reg and r["ops"]["forward"].get(g, {}).get("ops")))
        for ph in ("forward", "backward"):
            for g in ("router", "preprocess", "dispatch", "postprocess", "combine_pre", "combine", "moe_other"):
                top = r["ops"][ph].get(g, {}).get("top")
                if top:
                    print(f"    {ph} {g}: {top}")


def main() -> None:
    import torch.multiprocessing as mp
    from importlib.metadata import version

    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--ep", default="1,2", help="expert-parallel sizes (one gloo process per rank)")
    args = ap.parse_args()
    results = []
    for i, ep in enumerate(int(e) for e in args.ep.split(",")):
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        mp.start_processes(_worker, args=(ep, 29517 + i, queue), nprocs=ep, join=True, start_method="spawn")
        results += queue.get()
    meta = dict(megatron_core=version("megatron-core"), torch=torch.__version__, python=platform.python_version(),
                cpu=_cpu_model(), cpus=os.cpu_count(), threads=1, date=datetime.date.today().isoformat(),
                rounds=ROUNDS, calls=CALLS, tokens=TOKENS, hidden=HIDDEN, expert_width=EXPERT_WIDTH)
    print(json.dumps(meta))
    _print(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, results=results), f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
