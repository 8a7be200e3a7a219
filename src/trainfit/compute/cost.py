"""Money: a price per GPU-hour with its currency, cost per hour for N cards, cost per run.

``cost per hour = price × cards``; ``cost per run = steps × step seconds / 3600 × price × cards``.
A price always carries its currency; one without is refused (``CardError``), never assumed.

Presets come from the seed (``/work/shared/seeds/000_*.txt``, section 八 "以算家云为例操作演示",
prices as of 2026-10-02): RTX 4090 24GB at 1.98 元/卡时 ("专业版", pro) and 1.24 元/卡时 ("青春版",
youth); its worked example gives 4 cards = 7.92 元/小时 and 8 cards = 15.84 元/小时.

Pure Python: no torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import ceil

from trainfit.errors import CardError

_SEED = "seed 000, section 八 (suanjiayun.com on-demand price, as of 2026-10-02)"

EXCLUDES = (
    "Compute rental only. Not included: storage (seed: 总成本还取决于…失败重跑和存储使用; "
    "单卡价格…也不包含全部存储等费用), failed reruns (失败重跑), and whether that card count can "
    "actually be had (单卡价格不代表任意多卡组合当前可创建; 实时库存、可选卡数及结算规则可能变化)."
)
"""What every cost figure leaves out, in the seed's own words (section 八)."""

_CURRENCY = re.compile(r"^[A-Z]{3}$")
_ALIASES = {"RMB": "CNY", "元": "CNY", "¥": "CNY", "$": "USD"}


def _currency(code: str | None) -> str:
    text = (code or "").strip()
    text = _ALIASES.get(text, text.upper())
    if not _CURRENCY.match(text):
        raise CardError(
            f"price: currency '{code or ''}' is not a 3-letter code; give one, e.g. 1.98CNY or 2.49USD per GPU-hour"
        )
    return text


@dataclass(frozen=True, kw_only=True, slots=True)
class Price:
    """A rental price for one GPU for one hour."""

    per_gpu_hour: float
    currency: str
    """ISO 4217 code (CNY, USD, EUR...); required."""
    label: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if not self.currency:
            raise CardError(
                f"price {self.per_gpu_hour:g}: no currency; write it with one, e.g. {self.per_gpu_hour:g}CNY"
            )
        object.__setattr__(self, "currency", _currency(self.currency))
        if not self.per_gpu_hour >= 0:
            raise CardError(f"price: must be >= 0 per GPU-hour, got {self.per_gpu_hour}")


@dataclass(frozen=True, slots=True)
class Cost:
    amount: float
    currency: str


PRESETS: dict[str, Price] = {
    "rtx4090-pro": Price(per_gpu_hour=1.98, currency="CNY", label="RTX 4090 24GB 专业版 (pro)", source=_SEED),
    "rtx4090-youth": Price(per_gpu_hour=1.24, currency="CNY", label="RTX 4090 24GB 青春版 (youth)", source=_SEED),
}
"""Named prices: ``--price rtx4090=rtx4090-pro``."""


def price_preset(name: str) -> Price:
    try:
        return PRESETS[name.strip().lower()]
    except KeyError:
        raise CardError(f"price: unknown preset '{name}'; known: {', '.join(sorted(PRESETS))}") from None


_AMOUNT_FIRST = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([^\d\s./]*)\s*(?:/\s*(?:h|hr|hour|gpu-?h(?:our)?))?\s*$", re.I)
_CODE_FIRST = re.compile(r"^\s*([A-Za-z]{3}|[¥$元])\s*(\d+(?:\.\d+)?)\s*$")


def parse_price(text: str) -> Price:
    """``'1.98CNY'``, ``'1.98 CNY'``, ``'CNY 1.98'``, ``'2.49USD/h'`` or a preset name -> Price.

    A bare number is refused: CardError naming the missing currency.
    """
    if text.strip().lower() in PRESETS:
        return price_preset(text)
    m = _CODE_FIRST.match(text)
    if m:
        return Price(per_gpu_hour=float(m.group(2)), currency=m.group(1), label=text.strip())
    m = _AMOUNT_FIRST.match(text)
    if not m:
        raise CardError(f"price '{text}': expected an amount and a currency per GPU-hour, e.g. 1.98CNY, or a preset "
                        f"({', '.join(sorted(PRESETS))})")
    if not m.group(2):
        raise CardError(f"price '{text.strip()}': no currency; write it with one, e.g. {m.group(1)}CNY or {m.group(1)}USD")
    return Price(per_gpu_hour=float(m.group(1)), currency=m.group(2), label=text.strip())


def cost_per_hour(price: Price, *, gpus: int) -> Cost:
    """``price × gpus`` (seed §八: 4 × 1.98 = 7.92 CNY/h, 8 × 1.98 = 15.84 CNY/h)."""
    if gpus < 1:
        raise CardError(f"gpus: must be >= 1, got {gpus}")
    return Cost(price.per_gpu_hour * gpus, price.currency)


def steps_for_tokens(*, tokens: float, tokens_per_step: float) -> int:
    """Optimizer steps to consume ``tokens`` (the last, partial step counts whole)."""
    return ceil(tokens / tokens_per_step)


def run_cost(price: Price, *, gpus: int, steps: int, step_seconds: float) -> Cost:
    """``steps × step_seconds / 3600 × price × gpus``: compute rental only (see ``EXCLUDES``)."""
    hours = steps * step_seconds / 3600
    return Cost(hours * cost_per_hour(price, gpus=gpus).amount, price.currency)
