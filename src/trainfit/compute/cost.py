"""Money: a price per GPU-hour with its currency, cost per hour for N cards, cost per run.

``cost per hour = price × cards``; ``cost per run = steps × step seconds / 3600 × price × cards``.
A price always carries its currency; one without is refused (``CardError``), never assumed. A price
from the catalog's table (``trainfit.catalog.prices``, ``--price GPU=rtx4090-pro``) names the GPU
kind it is for and applies to that kind only.

The two seed prices (``/work/shared/seeds/000_*.txt``, section 八 "以算家云为例操作演示", as of
2026-10-02): RTX 4090 24GB at 1.98 元/卡时 ("专业版", pro) and 1.24 元/卡时 ("青春版", youth); its
worked example gives 4 cards = 7.92 元/小时 and 8 cards = 15.84 元/小时.

Pure Python: no torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import ceil

from trainfit.errors import CardError

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
    gpu: str | None = None
    """GPU catalog id the price is for; None: a bare amount, for whichever GPU it was given to."""
    id: str = ""
    market: str = ""
    """e.g. cn-rental, cloud-on-demand."""
    provider: str = ""
    as_of: str = ""
    """Date the price was read (YYYY-MM-DD)."""

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


def _presets() -> dict[str, Price]:
    from trainfit.catalog.prices import catalog_price_table

    return {p.id: p for p in catalog_price_table().entries}


def __getattr__(name: str):
    if name == "PRESETS":  # named prices: every entry of the catalog's price table, by id (read on first use)
        return _presets()
    raise AttributeError(name)


def price_preset_ids() -> list[str]:
    """The named prices a card's ``hardware.price_preset`` may give, sorted (the catalog's price table ids)."""
    return sorted(_presets())


def price_preset(name: str) -> Price:
    try:
        return _presets()[name.strip().lower()]
    except KeyError:
        raise CardError(f"price: unknown preset '{name}'; known: {', '.join(sorted(_presets()))}") from None


def for_gpu(price: Price, gpu: str) -> Price:
    """``price`` applied to the GPU kind ``gpu`` (a catalog id): a bare amount takes that kind; a
    catalog or table price for another kind is refused (CardError naming both)."""
    from dataclasses import replace

    if price.gpu is None:
        return replace(price, gpu=gpu)
    if price.gpu != gpu:
        name = price.id or price.label or f"{price.per_gpu_hour:g} {price.currency}"
        raise CardError(f"price '{name}' is for {price.gpu}, not {gpu}; a price applies only to its GPU kind")
    return price


_AMOUNT_FIRST = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([^\d\s./]*)\s*(?:/\s*(?:h|hr|hour|gpu-?h(?:our)?))?\s*$", re.I)
_CODE_FIRST = re.compile(r"^\s*([A-Za-z]{3}|[¥$元])\s*(\d+(?:\.\d+)?)\s*$")


def parse_price(text: str) -> Price:
    """``'1.98CNY'``, ``'1.98 CNY'``, ``'CNY 1.98'``, ``'2.49USD/h'`` or a preset name -> Price.

    A bare number is refused: CardError naming the missing currency.
    """
    if text.strip().lower() in _presets():
        return price_preset(text)
    m = _CODE_FIRST.match(text)
    if m:
        return Price(per_gpu_hour=float(m.group(2)), currency=m.group(1), label=text.strip())
    m = _AMOUNT_FIRST.match(text)
    if not m:
        raise CardError(f"price '{text}': expected an amount and a currency per GPU-hour, e.g. 1.98CNY, or a preset "
                        f"({', '.join(sorted(_presets()))})")
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
