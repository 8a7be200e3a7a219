"""Parse the failures besides a CUDA/HIP OOM that `trainfit diagnose` reads from a log: an NCCL watchdog
timeout, vLLM's KV-cache start-up errors and a torch/DeepSpeed C++ extension that failed to build.

Formats, quoted from the code that prints them:

NCCL watchdog timeout (pytorch/pytorch ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`` @
cf1380dfb6c8552c8cdb791a85a89499775ad409: ``operator<<(std::ostream&, const WorkNCCL&)`` and the watchdog's
timeout check)
    ``[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE,
    NumelIn=262144000, NumelOut=262144000, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.``
    (older builds print ``TensorShape=[...]`` in place of ``NumelIn``/``NumelOut``, or no ``SeqNum``.)
vLLM KV cache, no memory left (vLLM 0.34.0 sdist, ``vllm/v1/core/kv_cache_planning.py`` l.106-110,
``_check_enough_kv_cache_memory``; also vllm-project/vllm ``vllm/v1/core/kv_cache_utils.py`` @
bbf906a88ba1a39104884c88c9811a4f968e4659, ``check_enough_kv_cache_memory``)
    ``No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing
    the engine.``
vLLM KV cache, one max-length request does not fit (same function, l.114-126)
    ``To serve at least one request with the model's max seq len (32768), (4.00 GiB KV cache is needed,
    which is larger than the available KV cache memory (1.73 GiB). Based on the available memory, the
    estimated maximum model length is 14160. ...`` (the stored commit spells it ``models's``; the estimate
    sentence is absent when the estimate is 0.)
C++ extension build (torch ``torch/utils/cpp_extension.py`` l.2546 in torch 2.13.0, git
cf30153c4c131c8164ee7798e5022d810682e2cb: ``_run_ninja_build(..., error_prefix=f"Error building extension
'{name}'")``), which DeepSpeed's JIT op loader reaches (deepspeedai/DeepSpeed ``op_builder/builder.py`` @
4904d948f15c35d02602a7beef5cd1392b7ce1e0, ``OpBuilder.jit_load`` -> ``torch.utils.cpp_extension.load``;
deepspeed 0.19.8 ``deepspeed/ops/op_builder/builder.py`` l.568-577 also raises ``Unable to JIT load the
{name} op due to ninja not being installed.``)
    ``RuntimeError: Error building extension 'cpu_adam'``

Pure: no torch. Linear in the log's size (``re`` on fixed leading phrases; the last match wins).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainfit.units import GIB

_NCCL = re.compile(
    r"(?:\[Rank (?P<rank>\d{1,7})\] )?Watchdog caught collective operation timeout: WorkNCCL\("
    r"(?P<fields>(?:[^()\n]|\(ms\)){0,400})\)(?: ran for (?P<ran>\d{1,15}) milliseconds before timing out)?")
_FIELD = re.compile(r"(SeqNum|OpType|NumelIn|NumelOut|Timeout\(ms\))=([^,]{1,200})")
_KV_NONE = re.compile(r"No available memory for the cache blocks")
_KV_LEN = re.compile(
    r"To serve at least one request with the model'?s'?s? max seq len \((?P<len>\d{1,12})\), \((?P<need>\d{1,9}(?:\.\d{1,6})?) GiB"
    r" KV cache is needed, which is larger than the available KV cache memory \((?P<have>-?\d{1,9}(?:\.\d{1,6})?) GiB\)\."
    r"(?: Based on the available memory, the estimated maximum model length is (?P<est>\d{1,12})\.)?")
_KV_AVAILABLE = re.compile(r"Available KV cache memory: (?P<gib>-?\d{1,9}(?:\.\d{1,6})?) GiB")
_EXT = re.compile(r"Error building extension '(?P<name>[A-Za-z0-9_.\-]{1,100})'")
_NINJA = re.compile(r"Unable to JIT load the (?P<name>[A-Za-z0-9_.\-]{1,100}) op due to ninja not being installed")


@dataclass(frozen=True, slots=True)
class NcclTimeout:
    """One NCCL watchdog timeout: the collective, its sequence number and sizes, the timeout and how long it ran."""

    rank: int | None
    op: str
    seq: int | None
    numel_in: int | None
    numel_out: int | None
    timeout_ms: int | None
    ran_ms: int | None
    text: str
    kind: str = "nccl-timeout"


@dataclass(frozen=True, slots=True)
class KvCacheShortage:
    """vLLM refused to start: no KV-cache memory at all (``reason`` 'none'), or less than one request of the
    engine's max model length needs (``reason`` 'max-len')."""

    reason: str
    available_bytes: float | None
    needed_bytes: float | None
    max_model_len: int | None
    estimated_max_len: int | None
    text: str
    kind: str = "vllm-kv-cache"


@dataclass(frozen=True, slots=True)
class ExtensionBuildError:
    """A torch C++/CUDA extension (a DeepSpeed op when the log names DeepSpeed) failed to JIT-build."""

    name: str
    deepspeed: bool
    ninja_missing: bool
    text: str
    kind: str = "extension-build"


Failure = NcclTimeout | KvCacheShortage | ExtensionBuildError


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def _nccl(m: re.Match) -> NcclTimeout:
    fields = dict(_FIELD.findall(m.group("fields")))
    return NcclTimeout(rank=_int(m.group("rank")), op=fields.get("OpType", "unknown").strip(),
                       seq=_int(fields.get("SeqNum")), numel_in=_int(fields.get("NumelIn")),
                       numel_out=_int(fields.get("NumelOut")), timeout_ms=_int(fields.get("Timeout(ms)")),
                       ran_ms=_int(m.group("ran")), text=m.group(0))


def _kv(m: re.Match, text: str) -> KvCacheShortage:
    if m.re is _KV_LEN:
        return KvCacheShortage(reason="max-len", available_bytes=float(m.group("have")) * GIB,
                               needed_bytes=float(m.group("need")) * GIB, max_model_len=int(m.group("len")),
                               estimated_max_len=_int(m.group("est")), text=m.group(0))
    logged = None
    for logged in _KV_AVAILABLE.finditer(text, 0, m.start()):
        pass  # the engine's last 'Available KV cache memory' line before the error
    return KvCacheShortage(reason="none", available_bytes=float(logged.group("gib")) * GIB if logged else None,
                           needed_bytes=None, max_model_len=None, estimated_max_len=None, text=m.group(0))


def _ext(m: re.Match, text: str) -> ExtensionBuildError:
    window = text[max(0, m.start() - 4000):m.end()]
    deepspeed = "deepspeed" in window.lower() or m.re is _NINJA
    return ExtensionBuildError(name=m.group("name"), deepspeed=deepspeed, ninja_missing=m.re is _NINJA, text=m.group(0))


def last_failure(text: str) -> Failure | None:
    """The last NCCL timeout, vLLM KV-cache error or extension build error in ``text``; None when there is none."""
    best: tuple[int, Failure] | None = None
    for pattern in (_NCCL, _KV_NONE, _KV_LEN, _EXT, _NINJA):
        last = None
        for last in pattern.finditer(text):
            pass
        if last is None or (best is not None and last.start() < best[0]):
            continue
        if pattern is _NCCL:
            found: Failure = _nccl(last)
        elif pattern in (_KV_NONE, _KV_LEN):
            found = _kv(last, text)
        else:
            found = _ext(last, text)
        best = (last.start(), found)
    return best[1] if best else None
