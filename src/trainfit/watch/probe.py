"""What a phase measures, on CUDA and on the CPU. Imports torch (the watch loads it lazily).

CUDA (``CudaProbe``): at each phase start the allocator's peak counters are reset
(``torch.cuda.reset_peak_memory_stats``) and a timing event is recorded; at the end
``max_memory_allocated`` / ``max_memory_reserved`` are read (host-side allocator counters: no
synchronisation), NVML's used bytes of the device when ``pynvml`` (nvidia-ml-py) is installed, and
a second event. The device figure is NVML's current use plus the phase's reserved peak over the
reserved bytes now (the allocator's high-water mark, as ``benchmarks/gpu_calibrate.py`` reads
nvidia-smi). Seconds are the events' elapsed time, read once both have completed (never forcing
a synchronisation inside a step).

CPU (``CpuProbe``): PyTorch's own MemTracker (``torch.distributed._tools.mem_tracker``, as
``trainfit.trace.memtrack.FrozenAwareMemTracker`` extends it for frozen parameters) counts every
tensor storage the loop creates plus the model and optimizer it is given; the phase peak is its
peak after resetting the peak to the current bytes at the phase start. Seconds are
``time.perf_counter``.
"""

from __future__ import annotations

import time
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(slots=True)
class Sample:
    """One phase segment: bytes (None when this device kind does not measure them) and seconds
    (None until the CUDA events completed)."""

    allocated_bytes: float | None = None
    reserved_bytes: float | None = None
    device_bytes: float | None = None
    tensor_bytes: float | None = None
    seconds: float | None = None
    _events: Any = None

    def resolve(self, wait: bool) -> bool:
        """Fill ``seconds`` from the CUDA events when they completed (or after waiting, ``wait``)."""
        if self.seconds is not None or self._events is None:
            return True
        start, end = self._events
        if not wait and not end.query():
            return False
        end.synchronize()
        self.seconds = start.elapsed_time(end) / 1e3
        self._events = None
        return True


class CudaProbe:
    kind = "cuda"
    memory_source = "torch.cuda allocator (max_memory_allocated / max_memory_reserved), NVML used bytes"

    def __init__(self, device: Any = None) -> None:
        self.device = torch.device(device or f"cuda:{torch.cuda.current_device()}")
        self._nvml = _nvml_handle(self.device.index or 0)
        if self._nvml is None:
            self.memory_source = "torch.cuda allocator (max_memory_allocated / max_memory_reserved); NVML not installed"

    def open(self, model: Any = None, optimizer: Any = None) -> None:  # noqa: ARG002 - same signature as CpuProbe
        return None

    def close(self) -> None:
        return None

    def capacity_bytes(self) -> float:
        return float(torch.cuda.get_device_properties(self.device).total_memory)

    def begin(self) -> Any:
        torch.cuda.reset_peak_memory_stats(self.device)
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def end(self, start: Any) -> Sample:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        reserved = float(torch.cuda.max_memory_reserved(self.device))
        sample = Sample(allocated_bytes=float(torch.cuda.max_memory_allocated(self.device)), reserved_bytes=reserved,
                        _events=(start, ev))
        if self._nvml is not None:
            import pynvml

            used = pynvml.nvmlDeviceGetMemoryInfo(self._nvml).used
            sample.device_bytes = float(used - torch.cuda.memory_reserved(self.device) + reserved)
        return sample


class CpuProbe:
    kind = "cpu"
    memory_source = "torch MemTracker (tensor storages: parameters, gradients, optimizer states, activations, temporaries)"

    def __init__(self) -> None:
        self.mt = _peak_tracker()
        self._open = False

    def open(self, model: Any = None, optimizer: Any = None) -> None:
        """Track ``model`` and ``optimizer`` (made before the tracker started) and start it."""
        external = [m for m in (model, getattr(optimizer, "optimizer", optimizer)) if m is not None]
        if external:
            self.mt.track_external(*external)
        self.mt.__enter__()
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            self.mt.__exit__(None, None, None)

    def capacity_bytes(self) -> float | None:
        return None

    def step_done(self) -> None:
        """Drop the tracker's per-module snapshots (they grow with every forward call)."""
        self.mt.reset_mod_stats()

    def begin(self) -> Any:
        mt = self.mt
        mt._peak_mem_snap = deepcopy(mt._curr_mem_snap)
        mt._peak_mem = {dev: snap["Total"] for dev, snap in mt._peak_mem_snap.items()}
        return time.perf_counter()

    def end(self, start: Any) -> Sample:
        seconds = time.perf_counter() - start
        peak = float(sum(self.mt._peak_mem.values()))
        return Sample(tensor_bytes=peak, seconds=seconds)

    def exclude(self, *tensors: Any) -> int:
        """Stop counting the storages of ``tensors`` (copies a measuring harness keeps for itself, not part of
        the run): their bytes leave the current total now. Returns the bytes removed. A storage an op later
        touches again (a view of it, an in-place write) is counted again from then on."""
        from torch.distributed._tools.common_utils import get_untyped_storages
        from torch.distributed._tools.mem_tracker import _UpdateType

        mt, removed = self.mt, 0
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                continue
            for st in get_untyped_storages(t):
                winfo, _ = mt._WINFO.pop(st, (None, None))  # the weakref (and its delete callback) goes with it
                if winfo is not None and winfo.mem_consumed > 0:
                    mt._update_snap(_UpdateType.DEL, winfo)
                    removed += winfo.mem_consumed
        return removed


def _no_grad_mod_tracker() -> Any:
    """torch's ``ModTracker`` that registers no gradient hooks on a module's inputs and outputs under
    ``torch.no_grad`` (generation, log-prob passes). Its forward hooks call ``register_multi_grad_hook`` on
    every input that requires grad (torch/distributed/_tools/mod_tracker.py ``_fw_pre_hook``, torch 2.13.0):
    for a leaf (transformers 5.24.0's ``enable_input_require_grads`` hook, installed with gradient
    checkpointing, sets ``requires_grad_(True)`` on the embedding output even under no_grad,
    modeling_utils.py lines 2147-2154 and 3190-3198) the hook's closure holds the leaf's ``AccumulateGrad``
    node, which holds the leaf: a cycle through C++ that Python's collector cannot break, so every
    generation step's embedding output stayed alive and was counted (0.8 MiB over two GRPO steps of the
    acceptance policy; none of them alive in the same run without the tracker). No backward runs through
    a no-grad pass, so the hooks have nothing to track there; the module stack is kept as before."""
    import weakref

    from torch.distributed._tools.mod_tracker import ModTracker

    class NoGradModTracker(ModTracker):
        def _fw_pre_hook(self, mod: Any, input: Any) -> None:  # noqa: A002 - torch's signature
            if torch.is_grad_enabled() or torch._dynamo.eval_frame._is_in_optimized_module():
                return super()._fw_pre_hook(mod, input)
            self._get_append_fn(weakref.ref(mod), self._get_mod_name(mod), False)()
            if self._user_pre_fw_hook is not None:
                self._user_pre_fw_hook(mod, input)
            return None

        def _fw_post_hook(self, mod: Any, input: Any, output: Any) -> None:  # noqa: A002 - torch's signature
            if torch.is_grad_enabled() or torch._dynamo.eval_frame._is_in_optimized_module():
                return super()._fw_post_hook(mod, input, output)
            if self._user_post_fw_hook is not None:
                self._user_post_fw_hook(mod, input, output)
            self._get_pop_fn(weakref.ref(mod), self._get_mod_name(mod), False)()
            return None

    return NoGradModTracker()


def _peak_tracker() -> Any:
    """``FrozenAwareMemTracker`` that keeps totals only. MemTracker's per-module statistics refuse a
    root module called twice in one iteration (generation calls it once per token) and grow with
    every call; the watch needs the device totals alone, so the module hooks only start tracking a
    module's parameters (and gradient hooks) the first time it runs. Its module tracker registers no gradient
    hooks under no_grad (``_no_grad_mod_tracker``)."""
    import weakref

    from trainfit.trace.memtrack import FrozenAwareMemTracker

    class PeakTracker(FrozenAwareMemTracker):
        def __init__(self) -> None:
            super().__init__()
            self._seen: Any = weakref.WeakSet()
            self._mod_tracker = _no_grad_mod_tracker()

        def _pre_fw_hook(self, module: Any, inputs: Any) -> None:
            if module not in self._seen:
                self._seen.add(module)
                self._track_module_params_and_buffers(module, install_grad_hooks=True)

        def _post_fw_hook(self, module: Any, inputs: Any, outputs: Any) -> None:
            return None

        def _pre_bw_hook(self, module: Any, args: Any) -> None:
            return None

        def _post_bw_hook(self, module: Any, args: Any) -> None:
            return None

    return PeakTracker()


class CpuTimeProbe:
    """The CPU without the tracker: phase seconds only (``Watch(..., memory=False)``). MemTracker sees
    every op through a Python dispatch mode, which multiplies a small model's CPU step time
    (``benchmarks/watch_overhead.md``); a CPU run that needs the timings alone skips it."""

    kind = "cpu"
    memory_source = "none (memory=False: phase seconds only)"

    def open(self, model: Any = None, optimizer: Any = None) -> None:  # noqa: ARG002 - same signature as CpuProbe
        return None

    def close(self) -> None:
        return None

    def capacity_bytes(self) -> float | None:
        return None

    def begin(self) -> Any:
        return time.perf_counter()

    def end(self, start: Any) -> Sample:
        return Sample(seconds=time.perf_counter() - start)


def make_probe(device: str | None = None, *, memory: bool = True) -> CudaProbe | CpuProbe | CpuTimeProbe:
    """CUDA when ``device`` says so or (None) when CUDA is available; else the CPU tracker (or, with
    ``memory=False``, phase seconds only). On CUDA the allocator's counters cost nothing: ``memory``
    does not apply there."""
    from trainfit.errors import CardError

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if str(device).startswith("cuda"):
        if not torch.cuda.is_available():
            build = f"built for CUDA {torch.version.cuda}, no GPU visible" if torch.version.cuda else "a CPU-only build"
            raise CardError(f"watch: device {str(device)!r} but torch {torch.__version__} has no CUDA ({build});"
                            f" use device='cpu' or leave device unset")
        return CudaProbe(device)
    if str(device) != "cpu":
        raise CardError(f"watch: device must be 'cuda', 'cuda:<index>', 'cpu' or unset (CUDA when available), got {str(device)[:40]!r}")
    return CpuProbe() if memory else CpuTimeProbe()


def _nvml_handle(index: int) -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - not installed, or no driver: the device figure is then absent
        return None


def versions(device: Any = None) -> dict[str, Any]:
    """Python, torch, CUDA, the training libraries and trainfit, for the record; with CUDA, the GPU's name and
    total memory (``gpu``, ``gpu_total_bytes``): of ``device`` (the CUDA device the watch measures), else of
    the current device. The total tells apart catalog kinds that report one name (``catalog.gpus.gpus_named``:
    the 48 GB RTX 4090 reports 'NVIDIA GeForce RTX 4090'), and the device index keeps a mixed box's record on
    the GPU it measured."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Any] = {"python": platform.python_version(), "torch": str(torch.__version__),
                           "cuda": torch.version.cuda}
    for pkg in ("transformers", "trl", "peft", "accelerate", "deepspeed", "vllm", "trainfit"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    if torch.cuda.is_available():
        dev = device if device is not None and torch.device(device).type == "cuda" else None
        dev = torch.device(dev) if dev is not None else torch.device("cuda", torch.cuda.current_device())
        out["gpu"] = torch.cuda.get_device_name(dev)
        out["gpu_total_bytes"] = int(torch.cuda.get_device_properties(dev).total_memory)
    return out
