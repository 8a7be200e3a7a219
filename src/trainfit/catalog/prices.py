"""Price table: rental prices per GPU-hour, per GPU kind, currency and market, each dated and sourced.

The catalog's table is ``data/prices/prices.json``; ``--price-table FILE`` reads a user's own in the same
shape (JSON or YAML)::

    entries:
      - {id: my-4090, gpu: rtx4090, per_gpu_hour: 1.5, currency: CNY, market: cn-rental,
         source: "https://...", as_of: "2026-11-30"}

``gpu`` is a GPU catalog id or alias (resolved to its id): a price applies to that kind only.
``gpus_per_instance`` is the rentable unit (a positive whole number; default 1, single GPUs rented): a provider
that rents whole 8-GPU instances only states 8, and a run of N cards is billed ``ceil(N / 8) × 8`` GPUs
(``compute.cost.billed_gpus``); ``instance`` optionally names the instance (``p5.48xlarge``). Every catalog
entry states its unit from its own source.
``currency`` is an ISO 4217 code; ``id`` defaults to ``<gpu>-<n>``. Prices in different currencies are
never compared without an exchange rate (``exchange_rates``).

Pure Python: no torch import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainfit.errors import CardError

if TYPE_CHECKING:
    from trainfit.compute.cost import Price

_DATA = "trainfit.catalog.data.prices"
_FIELDS = ("id", "gpu", "per_gpu_hour", "currency", "market", "provider", "label", "source", "as_of", "via", "notes",
           "gpus_per_instance", "instance")


@dataclass(frozen=True, slots=True)
class PriceTable:
    entries: tuple[Price, ...]
    origin: str
    """Where the table came from (the catalog, or the user's file path)."""

    def candidates(self, gpu: str, *, market: str | None = None) -> tuple[Price, ...]:
        """Every entry for the GPU kind ``gpu`` (catalog id), in ``market`` when given, by id; () if none. Entries
        in more than one currency are refused (no exchange rate compares them)."""
        rows = sorted((p for p in self.entries if p.gpu == gpu and (market is None or p.market == market)),
                      key=lambda p: p.id)
        if len({p.currency for p in rows}) > 1:
            curs = ", ".join(sorted({p.currency for p in rows}))
            raise CardError(f"price table {self.origin}: {gpu} is priced in {curs}; pick one with --price {gpu}=<entry id>"
                            " or --market")
        return tuple(rows)

    def for_gpu(self, gpu: str, *, market: str | None = None, gpus: int = 1) -> Price | None:
        """The entry that rents ``gpus`` cards of the kind ``gpu`` (catalog id) cheapest, each billed by its unit
        (``compute.cost.cheapest_billed``), in ``market`` when given; None if none."""
        from trainfit.compute.cost import cheapest_billed

        rows = self.candidates(gpu, market=market)
        return cheapest_billed(rows, gpus=gpus) if rows else None

    @property
    def markets(self) -> tuple[str, ...]:
        return tuple(sorted({p.market for p in self.entries if p.market}))


def _entry(raw: Any, n: int, origin: str) -> Price:
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.cost import Price
    from trainfit.errors import TrainfitError

    where = f"price table {origin}: entry {n}"
    if not isinstance(raw, dict):
        raise CardError(f"{where}: expected a mapping with gpu, per_gpu_hour and currency")
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise CardError(f"{where}: unknown field '{unknown[0]}'; allowed: {', '.join(_FIELDS)}")
    for key in ("gpu", "per_gpu_hour", "currency"):
        if raw.get(key) in (None, ""):
            raise CardError(f"{where}: '{key}' is required (gpu, per_gpu_hour, currency)")
    amount = raw["per_gpu_hour"]
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        raise CardError(f"{where}: per_gpu_hour must be a number, got {amount!r}")
    from trainfit.compute.cost import MAX_GPUS_PER_INSTANCE
    from trainfit.spec.card import is_gpu_count

    unit = raw.get("gpus_per_instance", 1)
    if not is_gpu_count(unit):
        raise CardError(f"{where}: gpus_per_instance must be a whole number of GPUs in 1..{MAX_GPUS_PER_INSTANCE}"
                        f" (the rentable unit; 1: single GPUs are rented), got {str(unit)[:40]!r}")
    try:
        gpu = resolve_gpu(str(raw["gpu"])).id
    except TrainfitError as exc:
        raise CardError(f"{where}: gpu: {exc}") from None
    return Price(
        per_gpu_hour=float(amount), currency=str(raw["currency"]), gpu=gpu,
        id=str(raw.get("id") or f"{gpu}-{n}").strip().lower(), market=str(raw.get("market") or ""),
        provider=str(raw.get("provider") or ""), label=str(raw.get("label") or ""),
        source=str(raw.get("source") or ""), as_of=str(raw.get("as_of") or ""),
        gpus_per_instance=unit, instance=str(raw.get("instance") or ""),
    )


def price_table_of(data: Any, *, origin: str) -> PriceTable:
    """A validated table from parsed JSON/YAML: ``{entries: [...]}`` or a bare list of entries."""
    rows = data.get("entries") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not rows:
        raise CardError(f"price table {origin}: expected 'entries', a non-empty list of prices")
    entries = tuple(_entry(r, i, origin) for i, r in enumerate(rows))
    ids = [p.id for p in entries]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise CardError(f"price table {origin}: id '{dup}' appears twice")
    return PriceTable(entries, origin)


@lru_cache(maxsize=1)
def catalog_price_table() -> PriceTable:
    text = resources.files(_DATA).joinpath("prices.json").read_text(encoding="utf-8")
    return price_table_of(json.loads(text), origin="catalog")


def load_price_table(path: Path | str, *, what: str = "--price-table") -> PriceTable:
    """The user's table from a JSON or YAML file (CardError, one line naming the file, on a bad file); ``what``
    names the argument in that line (``trainfit.fit``'s ``price_table``).

    Read through the bounded loader: at most 1 MiB of UTF-8 text, no YAML alias bombs, no NaN/Infinity."""
    import re

    from trainfit.errors import InputError
    from trainfit.spec.safe_yaml import load_json_limited, load_yaml_limited, read_text_limited

    p = Path(path)
    try:
        text = read_text_limited(p, what=what)
    except InputError as exc:
        raise CardError(str(exc)) from None
    where = f"{what}: '{p}'"
    try:
        if p.suffix.lower() == ".json":
            data = load_json_limited(text, what=where, unique_keys=True)
        else:
            data = load_yaml_limited(text, what=where, unique_keys=True)
    except InputError as exc:
        detail = str(exc).removeprefix(f"{where}: ")
        syntax = re.fullmatch(r"not valid (?:JSON|YAML) \((.*)\)", detail)
        if syntax:
            raise CardError(f"{where} is not valid JSON/YAML: {syntax.group(1)}") from None
        raise CardError(f"{where}: {detail}") from None
    return price_table_of(data, origin=str(p))


def rate_ok(value: float) -> bool:
    """A rate and its way back (1 / rate) are both finite and > 0: inf (or 1e400) makes the way back 0, a subnormal
    such as 1e-320 makes it inf."""
    return 0 < value < float("inf") and 0 < 1.0 / value < float("inf")


def add_rate(out: dict[tuple[str, str], float], given: dict[tuple[str, str], float], a: str, b: str, value: float, *,
             where: str) -> None:
    """Add 1 ``a`` = ``value`` ``b`` to ``out`` (and the way back), remembering the rates as given in ``given``; a
    second rate for the same pair, or a reverse pair that is not its reciprocal (relative 1e-9), is refused in one line
    naming ``where`` (the flag or argument and the item) and the rate it contradicts."""
    if (a, b) in given:
        raise CardError(f"{where}: a second rate for {a}:{b} (already {a}:{b}={given[(a, b)]:g}); give each pair once")
    if (b, a) in given:
        back = 1.0 / given[(b, a)]
        if abs(value - back) > 1e-9 * max(abs(value), abs(back)):
            raise CardError(f"{where}: contradicts {b}:{a}={given[(b, a)]:g} (its reverse is {a}:{b}={back:g});"
                            " give one direction, or the reciprocal")
    given[(a, b)] = value
    out[(a, b)] = value
    out.setdefault((b, a), 1.0 / value)


def add_priced_kind(given: dict[str, str], gpu_id: str, *, searched: tuple[str, ...] | list[str], where: str,
                    search_arg: str) -> None:
    """Record that ``where`` (the flag or argument and the item) prices the GPU kind ``gpu_id`` in ``given`` (GPU id ->
    the ``where`` that priced it). A price for a kind not ``searched`` would price nothing, and a second price for one
    kind (``h100`` and ``h100-sxm`` are one) would win silently: both refused in one line naming ``where``;
    ``search_arg``: the flag or argument that lists the searched kinds."""
    if gpu_id not in searched:
        raise CardError(f"{where}: {gpu_id} is not among the GPU kinds searched ({', '.join(searched)}); add it to"
                        f" {search_arg} or drop this price")
    if gpu_id in given:
        raise CardError(f"{where}: a second price for {gpu_id} (already {given[gpu_id]}); give one per GPU kind")
    given[gpu_id] = where


def named_price(table: PriceTable | None, text: str) -> Price | None:
    """The entry of ``table`` whose id is ``text`` (a price-table id such as ``rtx4090-pro``), or None."""
    if table is None:
        return None
    return next((p for p in table.entries if p.id == text.strip().lower()), None)


def exchange_rates(items: list[str], *, flag: str = "--fx") -> dict[tuple[str, str], float]:
    """``['USD:CNY=7.2']`` -> ``{('USD', 'CNY'): 7.2, ('CNY', 'USD'): 1/7.2}`` (1 USD = 7.2 CNY); a pair given twice,
    or with a reverse that is not its reciprocal, is refused (``add_rate``)."""
    from trainfit.compute.cost import _currency

    out: dict[tuple[str, str], float] = {}
    given: dict[tuple[str, str], float] = {}
    for item in items:
        pair, _, rate = str(item).partition("=")
        a, _, b = pair.partition(":")
        try:
            value = float(rate)
        except ValueError:
            value = -1.0
        if not a or not b or not rate_ok(value):
            raise CardError(f"{flag}: expected FROM:TO=RATE with 3-letter codes, e.g. USD:CNY=7.2, got '{item}'; the rate"
                            " and its reverse (1/rate) must be finite and > 0")
        a, b = _currency(a), _currency(b)
        if a == b:  # a rate of a currency to itself is 1: any other is a contradiction, never used
            raise CardError(f"{flag}: FROM and TO are both {a} in '{item}'; give two currencies, e.g. USD:CNY=7.2")
        add_rate(out, given, a, b, value, where=f"{flag}: '{item}'")
    return out
