"""Units. Bytes, FLOPs and seconds are plain ints/floats; names carry the unit.

GiB (2**30) and GB (10**9) are distinct and always labelled. Formatting lives in
``trainfit.report`` only.
"""

GIB = 2**30
"""Bytes in one gibibyte (what torch and nvidia-smi print as 'GiB'/'MiB')."""
GB = 10**9
"""Bytes in one gigabyte (what vendors print on the box)."""
MIB = 2**20
KIB = 2**10

BYTES_PER_DTYPE: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "nf4": 0.5,
    "fp4": 0.5,
}
"""Storage bytes per element, before any quantization metadata."""
