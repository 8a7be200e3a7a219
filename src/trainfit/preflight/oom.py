"""Parse CUDA/HIP out-of-memory messages from PyTorch logs, every format since torch 1.x.

Formats (the corpus in tests/preflight/data/oom_messages.json has a real example of each):

old (torch 1.x, 2.0)
    ``CUDA out of memory. Tried to allocate 2.87 GiB (GPU 0; 14.76 GiB total capacity;
    8.77 GiB already allocated; 19.75 MiB free; 13.71 GiB reserved in total by PyTorch)``;
    the earliest say ``4.68 MiB cached`` instead of ``reserved in total by PyTorch``.
new (torch 2.1 on)
    ``CUDA out of memory. Tried to allocate 2.31 GiB. GPU 0 has a total capacity of 23.55 GiB
    of which 1.10 GiB is free. [Process N has X memory in use.] [Including non-PyTorch memory,
    this process has X memory in use.] Of the allocated memory X is allocated by PyTorch, and
    Y is reserved by PyTorch but unallocated.`` (torch 2.1 spells it ``capacty``); ROCm builds
    say ``HIP out of memory``.

The exception prefix varies too: ``RuntimeError``, ``torch.cuda.OutOfMemoryError``,
``torch.OutOfMemoryError``, or none. Sizes are printed by c10's ``format_size``: bytes, KiB,
MiB or GiB with two decimals, so a parsed size is good to about 0.005 of its unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainfit.units import GIB, KIB, MIB

_UNITS = {"bytes": 1, "B": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB, "TiB": 1024 * GIB}
_SIZE = r"(\d+(?:\.\d+)?)\s*(bytes|B|KiB|MiB|GiB|TiB)"
_HEAD = re.compile(r"(?P<backend>CUDA|HIP) out of memory\. Tried to allocate " + _SIZE)
_OLD = re.compile(
    r"\s*\(GPU (?P<gpu>\d+); " + _SIZE + r" total capacity; " + _SIZE + r" already allocated; "
    + _SIZE + r" free; " + _SIZE + r" (?P<kind>reserved in total by PyTorch|cached)"
)
_NEW = re.compile(r"\.?\s*GPU (?P<gpu>\d+) has a total capac(?:i)?ty of " + _SIZE + r" of which " + _SIZE + r" is free")
_PROCESS = re.compile(r"Process \d+ has " + _SIZE + r" memory in use")
_THIS = re.compile(r"this process has " + _SIZE + r" memory in use")
_OF_ALLOC = re.compile(
    r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch, and " + _SIZE + r" is reserved by PyTorch but unallocated"
)
_EXC = re.compile(r"((?:torch\.(?:cuda\.)?)?OutOfMemoryError|RuntimeError)\s*:\s*$")


def size_bytes(number: str, unit: str) -> int:
    return round(float(number) * _UNITS[unit])


@dataclass(frozen=True, slots=True)
class OomMessage:
    """One out-of-memory message. Sizes in bytes; None where the format does not say."""

    backend: str
    """'CUDA' or 'HIP'."""
    format: str
    """'old' (parenthesised, torch 1.x/2.0), 'old-cached' (torch <= 1.3), 'new' (torch >= 2.1) or 'bare'."""
    exception: str | None
    requested_bytes: int
    gpu_index: int | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None
    already_allocated_bytes: int | None = None
    """old format: bytes allocated by tensors."""
    reserved_bytes: int | None = None
    """old format: bytes reserved by the caching allocator."""
    this_process_bytes: int | None = None
    allocated_by_pytorch_bytes: int | None = None
    reserved_unallocated_bytes: int | None = None
    other_processes_bytes: int | None = None
    """Sum of 'Process N has X memory in use' (other processes on the same GPU)."""
    text: str = ""
    start: int = 0
    """Offset of the message in the parsed text."""

    @property
    def fragmentation_bytes(self) -> int | None:
        """Reserved but unallocated memory (cached blocks too small or split)."""
        if self.reserved_unallocated_bytes is not None:
            return self.reserved_unallocated_bytes
        if self.reserved_bytes is not None and self.already_allocated_bytes is not None:
            return max(0, self.reserved_bytes - self.already_allocated_bytes)
        return None


def _exception_before(text: str, start: int) -> str | None:
    line_start = text.rfind("\n", 0, start) + 1
    m = _EXC.search(text[line_start:start])
    return m.group(1) if m else None


def parse_oom(text: str) -> list[OomMessage]:
    """Every OOM message in ``text``, in order. Empty list when there is none."""
    out = []
    heads = list(_HEAD.finditer(text))
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        tail = text[head.end() : min(end, head.end() + 4000)]
        fields: dict = {
            "backend": head.group("backend"),
            "exception": _exception_before(text, head.start()),
            "requested_bytes": size_bytes(head.group(2), head.group(3)),
            "start": head.start(),
        }
        old, new = _OLD.match(tail), _NEW.match(tail)
        if old:
            g = old.groups()
            fields.update(
                format="old-cached" if old.group("kind") == "cached" else "old",
                gpu_index=int(old.group("gpu")),
                total_bytes=size_bytes(g[1], g[2]),
                already_allocated_bytes=size_bytes(g[3], g[4]),
                free_bytes=size_bytes(g[5], g[6]),
                reserved_bytes=size_bytes(g[7], g[8]),
            )
            body_end = old.end()
        elif new:
            g = new.groups()
            fields.update(
                format="new",
                gpu_index=int(new.group("gpu")),
                total_bytes=size_bytes(g[1], g[2]),
                free_bytes=size_bytes(g[3], g[4]),
            )
            body = tail[: _body_end(tail)]
            procs = [size_bytes(n, u) for n, u in _PROCESS.findall(body)]
            if procs:
                fields["other_processes_bytes"] = sum(procs)
            this = _THIS.search(body)
            if this:
                fields["this_process_bytes"] = size_bytes(*this.groups())
            alloc = _OF_ALLOC.search(body)
            if alloc:
                fields["allocated_by_pytorch_bytes"] = size_bytes(alloc.group(1), alloc.group(2))
                fields["reserved_unallocated_bytes"] = size_bytes(alloc.group(3), alloc.group(4))
            body_end = len(body)
        else:
            fields["format"] = "bare"
            body_end = 0
        fields["text"] = text[head.start() : head.end() + body_end].strip()
        out.append(OomMessage(**fields))
    return out


def _body_end(tail: str) -> int:
    """The new format's message ends at the end of its line (or at its documentation link)."""
    ends = [i + len(m) for m in ("environment-variables)", "\n") if (i := tail.find(m)) >= 0]
    return min(ends, default=len(tail))
