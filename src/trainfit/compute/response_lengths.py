"""RL response lengths as a distribution, not a mean: the step waits for its longest sequence.

Response lengths (``ResponseShape``): ``exponential`` (truncated at ``response_len_max``) is the
default when a mean is given. RL response lengths are right-skewed, with a clipped tail: many
responses are short, a few run long, and the ones that would run past the limit are cut at it
(verl logs ``response_length/clip_ratio``, the share cut at the maximum; DAPO, Yu et al. 2025, §3.4,
discusses these truncated samples). A truncated exponential has exactly that shape: its mass at the
maximum is ``exp(−(max−1)/θ)``, with ``θ`` solved so the mean is ``response_len_mean`` (a response
has at least one token: ``1 + min(Exp(θ), max − 1)``). ``uniform`` is uniform on
``[2·mean − max, max]`` (mean >= (max+1)/2); ``fixed`` gives every response ``response_len_mean``
tokens (``response_len_max`` when no mean is given, the default then).

Pure Python: no torch import.
"""

from __future__ import annotations

from math import exp, expm1, log

from trainfit.errors import CardError
from trainfit.spec.enums import ResponseShape

DEFAULT_QUANTILES = 64


def response_length_groups(
    *, shape: ResponseShape | str | None, response_len_max: float, response_len_mean: float | None,
    sequences: int, quantiles: int = DEFAULT_QUANTILES,
) -> tuple[tuple[float, float], ...]:
    """``(length, share)`` groups standing for ``sequences`` draws, shares summing to 1.

    Bins of equal probability, the top one split into 1, 1, 2, 4, ... sequences (from the top) so
    the longest of ``sequences`` is its own group; each group's length is the conditional mean of
    its bin, so the shares average exactly to the distribution's mean.
    """
    kind, mean, theta = _shape(shape, response_len_max, response_len_mean)
    if kind is ResponseShape.FIXED:
        return ((mean, 1.0),)
    edges = _bin_edges(sequences, quantiles)
    groups = []
    top = response_len_max - 1  # lengths are 1 (the first token) + a draw on [0, max − 1]
    for p0, p1 in zip(edges, edges[1:]):
        if kind is ResponseShape.UNIFORM:
            lo = 2 * mean - response_len_max
            length = lo + (response_len_max - lo) * (p0 + p1) / 2
        else:
            length = 1 + (_exp_integral(p1, theta, top) - _exp_integral(p0, theta, top)) / (p1 - p0)
        groups.append((min(length, response_len_max), p1 - p0))
    return tuple(groups)


def _shape(shape, response_len_max, response_len_mean) -> tuple[ResponseShape, float, float]:
    if response_len_max < 1:
        raise CardError(f"response_len_max: must be >= 1, got {response_len_max}")
    if response_len_mean is not None and not 1 <= response_len_mean <= response_len_max:
        raise CardError(f"response_len_mean: must be within [1, response_len_max={response_len_max}], "
                        f"got {response_len_mean}")
    if shape == "exponential-truncated":
        shape = ResponseShape.EXPONENTIAL
    try:
        kind = ResponseShape(shape) if shape is not None else (
            ResponseShape.FIXED if response_len_mean is None else ResponseShape.EXPONENTIAL)
    except ValueError:
        raise CardError(f"response length shape: one of exponential-truncated, uniform, fixed; "
                        f"got {shape!r}") from None
    if kind is ResponseShape.FIXED:
        return kind, float(response_len_mean or response_len_max), 0.0
    mean = (response_len_max + 1) / 2 if response_len_mean is None else float(response_len_mean)
    if kind is ResponseShape.UNIFORM:
        if mean < (response_len_max + 1) / 2:
            raise CardError(f"uniform response lengths up to {response_len_max} cannot have mean {mean} < (max+1)/2; "
                            "use exponential-truncated")
        return kind, mean, 0.0
    if mean >= response_len_max - 1e-6 * response_len_max or mean <= 1 + 1e-9:
        return ResponseShape.FIXED, mean, 0.0
    return kind, mean, _solve_theta(mean - 1, response_len_max - 1)


def _solve_theta(mean: float, cap: float) -> float:
    """θ with θ·(1 − exp(−cap/θ)) = mean (increasing in θ), by bisection on log θ."""
    lo, hi = log(mean), log(mean) + 40.0
    for _ in range(80):
        mid = (lo + hi) / 2
        t = exp(mid)
        if t * -expm1(-cap / t) < mean:
            lo = mid
        else:
            hi = mid
    return exp((lo + hi) / 2)


def _exp_integral(p: float, theta: float, cap: float) -> float:
    """∫₀ᵖ min(−θ·ln(1−q), cap) dq."""
    p_cap = -expm1(-cap / theta)
    q = min(p, p_cap)
    below = theta * (q + (1 - q) * log(1 - q)) if q < 1 else theta * q
    return below + cap * max(0.0, p - p_cap)


def _bin_edges(sequences: int, quantiles: int) -> list[float]:
    if sequences <= quantiles:
        return [i / sequences for i in range(sequences + 1)]
    edges = [i / quantiles for i in range(quantiles)]
    top = []  # ranks from the top: 1, 2, 4, ... sequences, stopping at one bin
    k = 1
    while k < sequences / quantiles:
        top.append(1 - k / sequences)
        k *= 2
    return edges + sorted(top) + [1.0]


# ------------------------------------------------------------------------------------------------
