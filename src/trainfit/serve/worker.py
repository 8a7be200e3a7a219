"""What the web API computes, run in a short-lived child process per request.

The planner trusts its caller's numbers: a card with a billion layers or a 10^300 GiB card can
take minutes, gigabytes or raise an arithmetic error. The server therefore plans each request in
a child forked from a single-threaded fork server, under a wall-clock limit and an address-space
limit, so one bad request costs that request, never the server.

Each entry point returns ``(status, payload)``: ``(200, {...})`` or ``(400, {"error": line})``
where the line is the CLI's own message (``trainfit: error: <line>``) for card errors.
"""

from __future__ import annotations

import math
import os
from typing import Any

# imported up front so the fork server holds them and children do not import after forking
from trainfit.catalog.models import catalog_entry, catalog_ids  # noqa: F401
from trainfit.compute.cost import parse_price
from trainfit.errors import CardError, TrainfitError
from trainfit.fit_search import basis_dict, fit_start
from trainfit.plan import make_plan
from trainfit.preflight.checkpoint import checkpoint_sizes  # noqa: F401  (plan_to_dict imports it lazily)
from trainfit.report.html import (chart_model, fit_fragment, fit_notes, fit_ranking_caption, fit_rows, fit_step_label,
                                  fit_svg, plan_fragment, plan_svg, skipped_of)
from trainfit.report.json_report import plan_to_dict
from trainfit.search import GPU_COUNTS, fit
from trainfit.spec.card import RunCard, load_card_dict, resolve_card

DEFAULT_FIT_GPUS = ("rtx4090", "a100-40gb", "a100-80gb", "h100-sxm")
"""The CLI's ``trainfit fit --gpu`` default."""
MAX_FIT_GPU_TYPES = 16
MAX_LAYERS = 1024
"""Most decoder layers an uploaded config may have (the planner walks them one by one)."""
FIT_KEYS = ("card", "gpus", "max_gpus", "prices")


def _catalog_only(name: str, key: str) -> None:
    try:
        catalog_entry(name)
    except TrainfitError:
        import difflib

        near = difflib.get_close_matches(name, catalog_ids(), n=3, cutoff=0.5)
        hint = f"; did you mean: {', '.join(near)}?" if near else "; GET /api/models lists the catalog"
        raise CardError(
            f"{key}: '{name}' is not in the catalog; the web API reads no local paths and no hub, so give a catalog id,"
            f" an uploaded config.json (model: {{config: {{...}}}}) or model: {{params: N}}{hint}"
        ) from None


def _check_config(cfg: dict[str, Any]) -> None:
    from trainfit.catalog.hf_config import decoder_config

    n = decoder_config(cfg).get("num_hidden_layers")
    if isinstance(n, (int, float)) and not isinstance(n, bool) and n > MAX_LAYERS:
        raise CardError(f"model.config.num_hidden_layers: {n} is more layers than the web API plans (at most {MAX_LAYERS})")


def check_sources(card: RunCard) -> None:
    """Models come from the catalog or the request itself: the server reads no files and no network."""
    m = card.model
    if not isinstance(m, str) and m.config is not None:
        _check_config(m.config)
    if isinstance(m, str):
        _catalog_only(m, "model")
    elif m.config is None and m.params is None:
        if m.path is not None:
            raise CardError("model.path: the web API reads no local files; upload the config.json instead (model: {config: {...}})")
        if m.id is not None:
            _catalog_only(m.id, "model.id")
    method = card.method.value
    if method in ("ppo", "grpo") and card.roles.reward_model not in ("rule", "none"):
        _catalog_only(card.roles.reward_model, "roles.reward_model")
    if method == "ppo" and card.roles.critic not in (None, "same_as_actor"):
        _catalog_only(card.roles.critic, "roles.critic")


def card_of(data: Any) -> RunCard:
    """Validate as ``trainfit plan`` does (``spec.card.resolve_card``: presets applied first), then check the model
    sources."""
    card = resolve_card(data)
    check_sources(card)
    return card


def finite(obj: Any) -> Any:
    """JSON has no NaN or infinity: such floats become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def plan_payload(data: Any) -> dict[str, Any]:
    plan = make_plan(card_of(data))
    out = plan_to_dict(plan)
    model = chart_model(plan)
    svg = plan_svg(model)
    out["svg"] = svg
    out["chart"] = model
    out["html"] = plan_fragment(out, model, svg)
    return finite(out)


def fit_payload(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise CardError("fit: the request body must be a JSON object with keys: " + ", ".join(FIT_KEYS))
    unknown = sorted(set(body) - set(FIT_KEYS))
    if unknown:
        raise CardError(f"fit: unknown key '{unknown[0]}'; allowed keys here: {', '.join(FIT_KEYS)}")
    data = body.get("card", {})
    if not isinstance(data, dict):
        raise CardError("card: the file must hold a mapping of keys to values")
    # like a card file given to `trainfit fit` (fit_search.fit_start: what it sets is kept, scope included, its
    # accumulation chosen per row to hold the global batch, its preset filled under it), its hardware section pinned
    data, pinned = fit_start(data, card_file=True, pin_hardware=True)
    if "gpus" in body:
        # the kinds asked for are the kinds searched, as `trainfit fit CARD --gpu` searches them over the card's
        # hardware.gpu, which still names the kind its price and link describe (fit_search.card_price, link_on_kind:
        # a stated interconnect is that kind's nodes, the other kinds plan on their catalog's link); pinned, fit
        # would search the card's kind alone, and apply its link to every kind (link_everywhere)
        pinned = pinned - {"hardware.gpu", "hardware.interconnect"}
    gpus = body.get("gpus", list(DEFAULT_FIT_GPUS))
    if not isinstance(gpus, list) or not gpus or not all(isinstance(g, str) and g.strip() for g in gpus):
        raise CardError("gpus: a non-empty list of GPU catalog ids, e.g. [\"rtx4090\", \"a100-80gb\"]")
    if len(gpus) > MAX_FIT_GPU_TYPES:
        raise CardError(f"gpus: at most {MAX_FIT_GPU_TYPES} GPU types per search, got {len(gpus)}")
    from trainfit.catalog.gpus import resolve_gpu

    ids = list(dict.fromkeys(resolve_gpu(g.strip()).id for g in gpus))
    early_checks(data, ids, frozenset(pinned))
    max_gpus = body.get("max_gpus", 64)
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1:
        raise CardError(f"max_gpus: must be an integer of at least 1 (counts tried: {', '.join(map(str, GPU_COUNTS))}), got {max_gpus!r}")
    prices_in = body.get("prices", {})
    if not isinstance(prices_in, dict) or not all(isinstance(v, str) for v in prices_in.values()):
        raise CardError("prices: an object of GPU id to price text with a currency, e.g. {\"rtx4090\": \"1.98CNY\"}")
    from trainfit.catalog.prices import add_priced_kind

    # as `trainfit fit --price` and trainfit.fit(prices=...): a price for a kind not searched prices nothing, and a
    # second price for one kind ('h100' and 'h100-sxm') would win silently; both refused naming the key
    named_as: dict[str, str] = {}
    prices = {}
    for g, text in prices_in.items():
        where = f"prices[{g[:40]!r}]"  # the price table's key named, not the card's gpu field
        try:
            gid = resolve_gpu(g.strip()).id
        except TrainfitError:
            raise CardError(f"{where}: not a GPU catalog id; allowed: the kinds searched ({', '.join(ids)})") from None
        add_priced_kind(named_as, gid, searched=ids, where=where, search_arg="gpus")
        try:
            prices[gid] = parse_price(text.strip())
        except CardError as exc:
            raise CardError(f"{where}: {str(exc)[:300]}") from None
    result = fit(data, gpus=ids, max_gpus=max_gpus, prices=prices, pinned=frozenset(pinned))
    rows = fit_rows(result)
    svg = fit_svg(rows)
    out = {"evaluated": result.evaluated, "invalid": result.invalid, "seconds": result.seconds, "rows": rows, "svg": svg,
           "card_stack": result.stack.value if result.stack is not None else None, "skipped": skipped_of(result),
           # what a row's step is, as `trainfit fit --json` says it (cli/fit_cmd.py)
           "run_step_unit": result.step_unit.value, "optimizer_steps_per_run_step": result.optimizer_steps_per_step,
           "batch_basis": basis_dict(result)}
    out["html"] = fit_fragment(rows, evaluated=result.evaluated, invalid=result.invalid, seconds=result.seconds, svg=svg,
                               notes=fit_notes(result), step_label=fit_step_label(result),
                               ranking=fit_ranking_caption(result))
    return finite(out)


def early_checks(data: dict[str, Any], gpus: list[str], pinned: frozenset[str]) -> None:
    """What ``trainfit fit`` checks before searching, on the first GPU kind of ``gpus`` that can run the card
    (``fit_search.card_on_a_kind``: an fp8 card whose own GPU is an A100 still searches an H100): the model sources
    and the model options (``plan.check_model_options``). Where every kind refuses the card, the search says why per
    kind; the sources are then checked on the card's own GPU kind, the one card the search may still load."""
    from trainfit.fit_search import card_on_a_kind
    from trainfit.plan import check_model_options

    card = card_on_a_kind(data, gpus, pinned, load=load_card_dict)
    if card is not None:
        check_sources(card)
        check_model_options(card)
        return
    try:
        own = load_card_dict(data)
    except (TrainfitError, ValueError):
        return
    check_sources(own)


ENTRIES = {"plan": plan_payload, "fit": fit_payload}


def call(kind: str, body: Any) -> tuple[int, dict[str, Any]]:
    """Run one entry point; user errors become 400 with the CLI's one line."""
    try:
        return 200, ENTRIES[kind](body)
    except (TrainfitError, ValueError) as exc:  # the CLI prints these as `trainfit: error: <line>`
        return 400, {"error": str(exc) or type(exc).__name__}  # verbatim: the CLI prints the same text
    except MemoryError:
        return 400, {"error": f"{kind}: this card needs more memory to plan than the server allows; a number in it is"
                              " probably far too large"}
    except RecursionError:
        return 400, {"error": f"{kind}: the request is nested too deeply"}
    except (ArithmeticError, TypeError, KeyError, IndexError, AttributeError) as exc:
        # bad input the core did not anticipate: still the request's fault, said in one line
        return 400, {"error": f"{kind}: this card cannot be planned ({type(exc).__name__}: {str(exc).split(chr(10))[0]})"}


def child(kind: str, body: Any, conn: Any, mem_bytes: int | None) -> None:
    """Body of the child process: limit memory, compute, send ``(status, payload)`` back."""
    if mem_bytes:
        try:
            import resource

            with open("/proc/self/statm") as f:
                vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            limit = vm + mem_bytes
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (OSError, ValueError, ImportError):
            pass
    try:
        result = call(kind, body)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which answers 500
        result = (500, {"error": f"internal error: {type(exc).__name__}"})
    try:
        conn.send(result)
    except MemoryError:
        conn.send((400, {"error": f"{kind}: the answer is too large"}))
    finally:
        conn.close()
