"""Parse CUDA/HIP out-of-memory messages and the traceback above them, every format since torch 1.x.

Formats (the corpus in tests/preflight/data/oom_messages.json has a real example of each):

old (torch 1.x, 2.0)
    ``CUDA out of memory. Tried to allocate 2.87 GiB (GPU 0; 14.76 GiB total capacity;
    8.77 GiB already allocated; 19.75 MiB free; 13.71 GiB reserved in total by PyTorch)``;
    the earliest say ``4.68 MiB cached`` instead of ``reserved in total by PyTorch``.
new (torch 2.1 on)
    ``CUDA out of memory. Tried to allocate 2.31 GiB. GPU 0 has a total capacity of 23.55 GiB
    of which 1.10 GiB is free. [Process N has X memory in use.] [Including non-PyTorch memory,
    this process has X memory in use.] Of the allocated memory X is allocated by PyTorch, and
    Y is reserved by PyTorch but unallocated.`` (torch 2.1 spells it ``capacty``; torch 2.8 adds
    ``, with Z allocated in private pools (e.g., CUDA Graphs),`` after the first figure); ROCm
    builds say ``HIP out of memory``.

The exception prefix varies too: ``RuntimeError``, ``torch.cuda.OutOfMemoryError``,
``torch.OutOfMemoryError``, or none. Sizes are printed by c10's ``format_size``: bytes, KiB,
MiB or GiB with two decimals, so a parsed size is good to about 0.005 of its unit.

Cost: linear in the log's size. Messages are found with ``str.find`` on a fixed phrase; each
message's body, its exception prefix and the traceback above it are read from bounded windows
(``BODY_CHARS``, ``PREFIX_CHARS``, ``TRACEBACK_CHARS``), so no step rescans the log.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from trainfit.errors import InputError
from trainfit.units import GIB, KIB, MIB

_UNITS = {"bytes": 1, "B": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB, "TiB": 1024 * GIB}
MAX_SIZE_BYTES = 2**50
"""1 PiB: no GPU of any era holds this much; a printed size above it is not a real allocator message."""
BODY_CHARS = 4000
"""The longest message body read after 'Tried to allocate' (the new format with 8 processes is < 1,000)."""
PREFIX_CHARS = 200
"""How far before a message its exception name is looked for (same line)."""
TRACEBACK_CHARS = 256 * KIB
"""How far before the last message its traceback is looked for."""
TRACEBACK_LINES = 2000

_SIZE = r"(\d{1,1000}(?:\.\d{1,1000})?)\s{0,4}(bytes|B|KiB|MiB|GiB|TiB)"
_GAP = r"\s{1,64}"
"""Whitespace between the words of the head: a pasted message may be wrapped (newline + indent) or double-spaced."""
_HEAD = re.compile(r" out" + _GAP + "of" + _GAP + r"memory\." + _GAP + "Tried" + _GAP + "to" + _GAP + "allocate" + _GAP + _SIZE)
_OLD = re.compile(
    r"\s{0,4}\(GPU (?P<gpu>\d{1,6}); " + _SIZE + r" total capacity; " + _SIZE + r" already allocated; "
    + _SIZE + r" free; " + _SIZE + r" (?P<kind>reserved in total by PyTorch|cached)"
)
_NEW = re.compile(r"\.?\s{0,4}GPU (?P<gpu>\d{1,6}) has a total capac(?:i)?ty of " + _SIZE + r" of which " + _SIZE + r" is free")
_PROCESS = re.compile(r"Process \d{1,12} has " + _SIZE + r" memory in use")
_THIS = re.compile(r"this process has " + _SIZE + r" memory in use")
_OF_ALLOC = re.compile(
    r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch,"
    r"(?: with " + _SIZE + r" allocated in private pools \(e\.g\., CUDA Graphs\),)? and " + _SIZE
    + r" is reserved by PyTorch but unallocated"
)
_EXC = re.compile(r"((?:torch\.(?:cuda\.)?)?OutOfMemoryError|RuntimeError)[ \t]{0,8}:[ \t]{0,8}$")


def size_bytes(number: str, unit: str) -> int:
    """A printed size in bytes. InputError (one line) when it is not finite or past ``MAX_SIZE_BYTES``."""
    value = float(number) * _UNITS[unit]
    if not math.isfinite(value) or value > MAX_SIZE_BYTES:
        shown = number if len(number) <= 24 else number[:12] + "..." + number[-6:]
        raise InputError(f"OOM message: size '{shown} {unit}' is past the bound of {MAX_SIZE_BYTES // GIB // 1024} TiB")
    return round(value)


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
    private_pools_bytes: int | None = None
    """'with X allocated in private pools (e.g., CUDA Graphs)' (torch >= 2.8), part of the allocated bytes."""
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


def _heads(text: str):
    """(message start, backend, size match) of every 'CUDA/HIP out of memory. Tried to allocate <size>'.

    One regex scan with a literal prefix (the engine skips to each ' out' in C); the words after it may be
    separated by any whitespace (a wrapped or double-spaced paste)."""
    for m in _HEAD.finditer(text):
        i = m.start()
        if text.startswith("CUDA", i - 4):
            yield i - 4, "CUDA", m
        elif text.startswith("HIP", i - 3):
            yield i - 3, "HIP", m


def _exception_before(text: str, start: int) -> str | None:
    lo = max(0, start - PREFIX_CHARS)
    line_start = text.rfind("\n", lo, start) + 1 or lo
    m = _EXC.search(text, max(line_start, lo), start)
    return m.group(1) if m else None


def _parse_one(text: str, start: int, backend: str, size: re.Match, end: int) -> OomMessage:
    tail = text[size.end() : min(end, size.end() + BODY_CHARS)]
    fields: dict = {
        "backend": backend,
        "exception": _exception_before(text, start),
        "requested_bytes": size_bytes(size.group(1), size.group(2)),
        "start": start,
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
            if alloc.group(3):
                fields["private_pools_bytes"] = size_bytes(alloc.group(3), alloc.group(4))
            fields["reserved_unallocated_bytes"] = size_bytes(alloc.group(5), alloc.group(6))
        body_end = len(body)
    else:
        fields["format"] = "bare"
        body_end = 0
    fields["text"] = text[start : size.end() + body_end].strip()
    return OomMessage(**fields)


def parse_oom(text: str) -> list[OomMessage]:
    """Every OOM message in ``text``, in order. Empty list when there is none. Linear in ``len(text)``."""
    heads = list(_heads(text))
    return [
        _parse_one(text, start, backend, size, heads[i + 1][0] if i + 1 < len(heads) else len(text))
        for i, (start, backend, size) in enumerate(heads)
    ]


def last_oom(text: str) -> tuple[OomMessage | None, int]:
    """(the last OOM message, how many there are). Parses only the last one: for long logs."""
    count, last = 0, None
    for head in _heads(text):
        count += 1
        last = head
    if last is None:
        return None, 0
    start, backend, size = last
    return _parse_one(text, start, backend, size, len(text)), count


def _body_end(tail: str) -> int:
    """The new format's message ends at the end of its line (or at its documentation link)."""
    ends = [i + len(m) for m in ("environment-variables)", "\n") if (i := tail.find(m)) >= 0]
    return min(ends, default=len(tail))


# ---------------------------------------------------------------------------------------------
# the traceback above a message

@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a Python traceback (or a Ray remote task header, file 'ray')."""

    file: str
    line: int
    function: str
    code: str = ""
    """The source line the traceback printed under the frame ('' when none)."""

    @property
    def path(self) -> str:
        """The file with forward slashes, for matching library paths."""
        return self.file.replace("\\", "/")


_FRAME_PATTERNS = (
    # CPython: File "/x/y.py", line 12, in func
    re.compile(r'File "(?P<file>[^"\n]{1,1000})", line (?P<line>\d{1,9}), in (?P<func>[^\s(]{1,200})'),
    # IPython / Jupyter: File ~/x/y.py:12, in Class.func(self, ...)
    re.compile(r"File (?P<file>[^\s:,]{1,1000}\.py):(?P<line>\d{1,9}), in (?:\w{1,100}\.)?(?P<func>\w{1,200})\("),
    # pytest --tb=short / long: x/y.py:12: in func
    re.compile(r"^\s{0,8}(?P<file>[^\s:]{1,1000}\.py):(?P<line>\d{1,9}): in (?P<func>\w{1,200})"),
    # rich tracebacks: │ /x/y.py:12 in func
    re.compile(r"(?P<file>[^\s│]{1,1000}\.py):(?P<line>\d{1,9}) in (?P<func>\w{1,200})"),
)
_RAY_TASK = re.compile(r"ray::(?P<cls>\w{1,200})\.(?P<func>\w{1,200})\(\)")
_TRACEBACK_HEAD = "Traceback (most recent call last)"
_LINE_TAG = re.compile(r"^\s{0,4}(\[rank\d{1,6}\]:|\([\w.-]{1,100} pid=\d{1,12}(?:, ip=[\d.]{1,40})?\))")
_MARKERS = re.compile(r"^[\s^~\-+|│❱>]*$")
_CHAINED = ("another exception occurred:", "cause of the following exception:")
"""Python's separators between chained tracebacks."""
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]{0,200}(Error|Exception|Interrupt|Exit)(\([\w.]{0,100}\))?: ")


def _frame_of(line: str) -> tuple[re.Match, int] | None:
    for k, pat in enumerate(_FRAME_PATTERNS):
        m = pat.search(line)
        if m:
            return m, k
    return None


def traceback_before(text: str, start: int) -> tuple[Frame, ...]:
    """The frames of the traceback that ends at ``text[start]`` (an OOM message), outermost first.

    Reads at most ``TRACEBACK_CHARS`` / ``TRACEBACK_LINES`` before ``start``. Lines carrying a rank
    or Ray worker tag (``[rank3]:``, ``(WorkerDict pid=12)``) are read only when the message's own
    line has the same tag, so interleaved ranks do not mix. The walk stops at the nearest
    'Traceback (most recent call last)' or Ray task header ('ray::Worker.method()'), which becomes
    the outermost frame.
    """
    lo = max(0, start - TRACEBACK_CHARS)
    line_start = text.rfind("\n", lo, start) + 1 or lo
    msg_line = text[line_start : start]
    tag_m = _LINE_TAG.match(msg_line)
    tag = tag_m.group(1) if tag_m else None
    lines = text[lo:line_start].split("\n")[-TRACEBACK_LINES:]
    frames: list[Frame] = []
    code_below: str = ""
    for raw in reversed(lines):
        m_tag = _LINE_TAG.match(raw)
        if tag is not None and (m_tag is None or m_tag.group(1) != tag):
            continue
        ln = raw[m_tag.end():] if m_tag else raw
        if _TRACEBACK_HEAD in ln or any(c in ln for c in _CHAINED):
            break
        ray = _RAY_TASK.search(ln)
        if ray and "File " not in ln:
            frames.append(Frame("ray", 0, ray.group("func"), f"ray::{ray.group('cls')}.{ray.group('func')}()"))
            break
        found = _frame_of(ln)
        if found is None:
            stripped = ln.strip()
            if frames and _EXCEPTION_LINE.match(stripped):
                break  # an earlier traceback's exception: this one started below it
            if stripped and not _MARKERS.match(stripped) and not code_below.startswith("->"):
                code_below = stripped[:400]
            continue
        m, kind = found
        code = code_below
        if kind == 1 and code.startswith("->"):
            code = code[2:].strip().lstrip("0123456789").strip()
        frames.append(Frame(m.group("file"), int(m.group("line")), m.group("func"), code))
        code_below = ""
    frames.reverse()
    return tuple(frames)
