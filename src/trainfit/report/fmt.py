"""Number formatting for human output. Always labelled: GiB (2^30) or GB (10^9)."""

from trainfit.units import GB, GIB


def gib(x: float, digits: int = 2) -> str:
    return f"{x / GIB:.{digits}f} GiB"


def gib_num(x: float, digits: int = 2) -> str:
    return f"{x / GIB:.{digits}f}" if x else "-"


def gb(x: float, digits: int = 1) -> str:
    return f"{x / GB:.{digits}f} GB"


def count(n: float) -> str:
    return f"{n:,.0f} ({n / 1e9:.2f}B)"
