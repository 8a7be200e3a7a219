"""Card dicts addressed by dotted keys (``parallel.strategy``): set, merge and copy. Pure."""

from __future__ import annotations

from typing import Any

from trainfit.errors import CardError


MAX_KEY_LEN = 200
"""Longest dotted key accepted (the longest card key is under 60 characters)."""


def split_dotted(dotted: object) -> list[str]:
    """``"a.b.c"`` as ``["a", "b", "c"]``; refuses an empty part, a non-text or an over-long key (CardError)."""
    if not isinstance(dotted, str):
        raise CardError(f"{str(dotted)[:60]!r}: a card key must be text like parallel.strategy")
    if len(dotted) > MAX_KEY_LEN:
        raise CardError(f"{dotted[:60]}...: key longer than {MAX_KEY_LEN} characters")
    parts = dotted.split(".")
    if any(not p.strip() for p in parts):
        raise CardError(f"'{dotted}': a key has an empty part; write it like parallel.strategy")
    return [p.strip() for p in parts]


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, creating sections; a dict value merges into an existing section.

    Raises:
        CardError: when a parent of the key holds a value, not a section.
    """
    if not isinstance(data, dict):
        raise CardError(f"{dotted}: the card is not a mapping of keys to values")
    node = data
    *parents, leaf = split_dotted(dotted)
    for p in parents:
        nxt = node.get(p)
        if nxt is None:
            nxt = node[p] = {}
        if not isinstance(nxt, dict):
            raise CardError(f"{dotted}: '{p}' is {str(nxt)[:40]!r}, not a section of keys;"
                            f" set '{p}' itself instead, e.g. {p}={{{leaf}: ...}}")
        node = nxt
    if isinstance(value, dict) and isinstance(node.get(leaf), dict):
        node[leaf] = {**node[leaf], **value}
    else:
        node[leaf] = value


def merge_under(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` on top: ``top`` wins, nested sections merge."""
    out = dict(base)
    for k, v in top.items():
        out[k] = merge_under(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def deep_copy(d: Any) -> Any:
    """A copy of nested dicts and lists (card data is JSON-like)."""
    if isinstance(d, dict):
        return {k: deep_copy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [deep_copy(v) for v in d]
    return d


def updated(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with dotted ``changes`` applied, copying only the sections on their paths
    (the rest is shared with ``data``, which is left unchanged)."""
    out = dict(data)
    copied: set[tuple[str, ...]] = set()
    for dotted, value in changes.items():
        node = out
        *parents, leaf = split_dotted(dotted)
        path: tuple[str, ...] = ()
        for p in parents:
            path += (p,)
            nxt = node.get(p)
            if nxt is None:
                nxt = {}
            elif not isinstance(nxt, dict):
                raise CardError(f"{dotted}: '{p}' is not a section")
            elif path not in copied:
                nxt = dict(nxt)
            copied.add(path)
            node[p] = nxt
            node = nxt
        if isinstance(value, dict) and isinstance(node.get(leaf), dict):
            node[leaf] = {**node[leaf], **value}
        else:
            node[leaf] = value
    return out
