"""Money: a price per GPU-hour with its currency, cost per hour for N cards, cost per run.

``cost per hour = price × billed cards``; ``cost per run = steps × step seconds / 3600 × price × billed cards``.
A price is for a rentable unit of ``gpus_per_instance`` GPUs (1: single GPUs are rented; 8: a whole 8-GPU
instance such as AWS p5.48xlarge, the only shape its provider rents): each node is its own machine, so a run of
``gpus_per_node`` cards on each of ``nodes`` nodes pays for ``nodes × ceil(gpus_per_node / unit) × unit`` of them,
the idle GPUs of a partly used instance included (``billed_gpus``).
Not modelled: that a run spread over several instances of a unit smaller than a node (e.g. 4 cards as two 2-GPU
instances) has the network between instances where the plan times one node's link; every catalog unit is 1 or a
whole 8-GPU node, which the plan's nodes of 8 match.
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
from trainfit.spec.card import MAX_GPUS_PER_NODE as MAX_GPUS_PER_INSTANCE  # an input bound (spec.card)
from trainfit.spec.card import is_gpu_count

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


def billed_gpus(*, gpus: int, gpus_per_instance: int, nodes: int = 1) -> int:
    """GPUs paid for when ``gpus`` cards on ``nodes`` machines are rented in units of ``gpus_per_instance``: each node
    is its own instance(s), so ``nodes × ceil(gpus_per_node / unit) × unit`` (``gpus_per_node = ceil(gpus / nodes)``).

    A provider that rents whole instances only bills every GPU of each instance the run occupies, used or idle:
    AWS prices p5.48xlarge as one instance (8x H100, 55.04 USD/h in us-east-1); 1 card of it costs what 8 do, and
    2 nodes of 4 cards are two machines (16 GPUs billed), not one."""
    if gpus < 1:
        raise CardError(f"gpus: must be >= 1, got {gpus}")
    if nodes < 1:
        raise CardError(f"nodes: must be >= 1, got {nodes}")
    per_node = ceil(gpus / nodes)
    return nodes * ceil(per_node / gpus_per_instance) * gpus_per_instance


def billing_note(price: Price, *, gpus: int, nodes: int = 1) -> str:
    """One line saying that a run of ``gpus`` cards on ``nodes`` machines pays for idle GPUs of whole instances,
    e.g. "1 of 8 GPUs of p5.48xlarge used: billed for 8", or across nodes "8 of 16 GPUs of p5.48xlarge x 2 used, 4 on
    each of 2 nodes billed apart: billed for 16"; empty where every billed GPU is used."""
    billed = price.billed_gpus(gpus=gpus, nodes=nodes)
    if billed == gpus:
        return ""
    unit = price.gpus_per_instance
    what = price.instance or (f"{price.id} ({unit}-GPU instance)" if price.id else f"one {unit}-GPU instance")
    n = billed // unit
    per_node = "" if nodes == 1 else f", {ceil(gpus / nodes)} on each of {nodes} nodes billed apart"
    return f"{gpus} of {billed} GPUs of {what}{'' if n == 1 else f' x {n}'} used{per_node}: billed for {billed}"


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
    gpus_per_instance: int = 1
    """The rentable unit, in GPUs: 1 where single GPUs are rented; the instance's GPU count where the provider
    rents whole instances only (its page states the shape, e.g. "p5.48xlarge (8x H100)"). A run of N cards pays
    for ``billed_gpus(gpus=N, gpus_per_instance=unit)`` of them."""
    instance: str = ""
    """The instance's name where the provider gives one (``p5.48xlarge``); empty: none given."""

    def __post_init__(self) -> None:
        if not self.currency:
            raise CardError(
                f"price {self.per_gpu_hour:g}: no currency; write it with one, e.g. {self.per_gpu_hour:g}CNY"
            )
        object.__setattr__(self, "currency", _currency(self.currency))
        if not self.per_gpu_hour >= 0:
            raise CardError(f"price: must be >= 0 per GPU-hour, got {self.per_gpu_hour}")
        unit = self.gpus_per_instance
        if not is_gpu_count(unit):
            raise CardError(f"price: gpus_per_instance must be a whole number of GPUs in 1..{MAX_GPUS_PER_INSTANCE}"
                            f" (1: single GPUs are rented), got {str(unit)[:40]!r}")

    def billed_gpus(self, *, gpus: int, nodes: int = 1) -> int:
        """The GPUs a run of ``gpus`` cards on ``nodes`` machines pays for at this price (``billed_gpus``)."""
        return billed_gpus(gpus=gpus, gpus_per_instance=self.gpus_per_instance, nodes=nodes)


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


def cost_per_hour(price: Price, *, gpus: int, nodes: int = 1) -> Cost:
    """``price × billed GPUs`` (seed §八, single cards rented: 4 × 1.98 = 7.92 CNY/h, 8 × 1.98 = 15.84 CNY/h;
    a price for a whole 8-GPU instance bills 8 GPUs for 1 to 8 cards on one node, 8 per node across ``nodes``,
    ``billed_gpus``)."""
    return Cost(price.per_gpu_hour * price.billed_gpus(gpus=gpus, nodes=nodes), price.currency)


def cheapest_billed(prices: tuple[Price, ...] | list[Price], *, gpus: int, nodes: int = 1) -> Price:
    """The entry of ``prices`` (one GPU kind, one currency) that rents ``gpus`` cards cheapest, each billed by its
    unit (``cost_per_hour``); ties: the lower per-GPU price, then the id. E.g. 1 H100 at 2.69 USD (single GPUs)
    beats a 3.99 USD 8-GPU instance (31.92 USD/h); 2 A100s from an 8-GPU instance at 1.99 USD (15.92 USD/h) beat
    one at 2.7447 USD (21.96 USD/h)."""
    if not prices:
        raise CardError("price: no entry to choose from")
    return min(prices, key=lambda p: (cost_per_hour(p, gpus=gpus, nodes=nodes).amount, p.per_gpu_hour, p.id))


def steps_for_tokens(*, tokens: float, tokens_per_step: float) -> int:
    """Optimizer steps to consume ``tokens`` (the last, partial step counts whole)."""
    return ceil(tokens / tokens_per_step)


def run_cost(price: Price, *, gpus: int, steps: int, step_seconds: float, nodes: int = 1) -> Cost:
    """``steps × step_seconds / 3600 × price × billed GPUs``: compute rental only (see ``EXCLUDES``)."""
    hours = steps * step_seconds / 3600
    return Cost(hours * cost_per_hour(price, gpus=gpus, nodes=nodes).amount, price.currency)
