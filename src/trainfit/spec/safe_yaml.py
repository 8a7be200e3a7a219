"""Bounded YAML/JSON loading for user files (cards, --set values, calibration inputs).

A card is a few kilobytes. These limits refuse, in milliseconds, what no card needs:
more than ``MAX_BYTES`` of text, more than ``MAX_ALIASES`` aliases, more than ``MAX_NODES``
values once aliases are expanded (a "billion laughs" bomb is a few hundred bytes that expand
to billions of values), or nesting deeper than ``MAX_DEPTH``. Each refusal is one ``InputError``
line naming the file and the limit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from trainfit.errors import InputError

MAX_BYTES = 2**20
"""Largest card/config file read, bytes (1 MiB; a card with an inline config.json is ~10 KB)."""
MAX_ALIASES = 256
"""YAML aliases (``*name``) per document."""
MAX_NODES = 20_000
"""Scalars, lists and mappings per document, counting each alias as the whole subtree it names."""
MAX_DEPTH = 64
"""Nesting of lists and mappings."""
MAX_KEYS = 1000
"""Keys in one mapping (a card section has under 50, a config.json under 200)."""


class YamlSyntaxError(InputError):
    """The text is not YAML at all (as opposed to YAML past a limit)."""


def read_text_limited(path: Path, *, what: str, max_bytes: int = MAX_BYTES) -> str:
    """The file's text, refusing a missing file, a folder, more than ``max_bytes`` or invalid UTF-8."""
    from trainfit.fsio import _short, lookup_error, special_file

    p = Path(path)
    reason = lookup_error(p)
    if reason is not None:
        raise InputError(f"{what}: cannot read '{_short(str(path))}' ({reason})")
    shown = _short(str(path))
    if p.is_dir():
        raise InputError(f"{what}: '{shown}' is a directory; give a file")
    kind = special_file(p)
    if kind is not None:
        raise InputError(f"{what}: '{shown}' is {kind}, not a file; give a file")
    if not p.is_file():
        raise InputError(f"{what}: no such file '{shown}'")
    try:
        with open(p, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"{what}: cannot read '{shown}' ({exc.strerror or type(exc).__name__})") from exc
    if len(raw) > max_bytes:
        raise InputError(f"{what}: '{shown}' is larger than {max_bytes // 2**20} MiB; this is not a card")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what}: '{shown}' is not UTF-8 text (byte {exc.start})") from exc


def _loader_class():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _check_events(text: str) -> None:
    """One pass over the parser's events (libyaml when present), before any node is built:
    stops at the first limit passed, so a bomb or a million-item list is refused in milliseconds."""
    import yaml

    nodes = aliases = 0
    items: list[int] = []  # per open mapping/list: keys+values (mapping) or items (list) so far
    is_map: list[bool] = []
    node_events = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent, yaml.AliasEvent)
    for event in yaml.parse(text, Loader=_loader_class()):
        if isinstance(event, node_events):
            if items:
                items[-1] += 1
                if items[-1] > (2 * MAX_KEYS if is_map[-1] else MAX_NODES):
                    raise InputError(f"a mapping with more than {MAX_KEYS:,} keys; this is not a card")
            if isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise InputError(f"more than {MAX_ALIASES} YAML aliases")
                continue
            nodes += 1
            if nodes > MAX_NODES:
                raise InputError(f"more than {MAX_NODES:,} values; this is not a card")
            if not isinstance(event, yaml.ScalarEvent):
                items.append(0)
                is_map.append(isinstance(event, yaml.MappingStartEvent))
                if len(items) > MAX_DEPTH:
                    raise InputError(f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            items.pop()
            is_map.pop()


def _expanded_size(root) -> int:
    """Values in the document with aliases expanded; memoised on the node graph, so linear in the text.

    Raises InputError past ``MAX_NODES`` or ``MAX_DEPTH`` (and on a recursive alias)."""
    import yaml

    memo: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node, depth: int) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        if depth > MAX_DEPTH:
            raise InputError(f"nested deeper than {MAX_DEPTH} levels")
        if key in on_path:
            raise InputError("a YAML alias refers to itself (recursive structure)")
        total = 1
        if isinstance(node, yaml.MappingNode):
            on_path.add(key)
            for k, v in node.value:
                total += size(k, depth + 1) + size(v, depth + 1)
                if total > MAX_NODES:
                    break
            on_path.discard(key)
        elif isinstance(node, yaml.SequenceNode):
            on_path.add(key)
            for v in node.value:
                total += size(v, depth + 1)
                if total > MAX_NODES:
                    break
            on_path.discard(key)
        if total > MAX_NODES:
            raise InputError(f"more than {MAX_NODES:,} values once aliases are expanded (a YAML alias bomb?)")
        memo[key] = total
        return total

    return size(root, 0)


def _check_unique_keys(root) -> None:
    """Refuse a mapping that gives one key twice. YAML requires unique keys (YAML 1.2.2 section 3.2.1.1,
    https://yaml.org/spec/1.2.2/#3211-nodes: "the content of a mapping node is an unordered set of key/value node
    pairs, with the restriction that each of the keys is unique"); PyYAML keeps the last value instead, so one of
    the two values the file gives would be dropped without a word. Merge keys (``<<``) are not checked."""
    import yaml

    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict[tuple[str, str], int] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    ident = (k.tag, k.value)
                    if ident in keys:
                        line = k.start_mark.line + 1
                        where = f"on line {line}" if line == keys[ident] else f"on lines {keys[ident]} and {line}"
                        raise InputError(f"key '{str(k.value)[:60]}' is given twice in one mapping ({where}); give it"
                                         " once")
                    keys[ident] = k.start_mark.line + 1
                stack.extend((k, v))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def load_yaml_limited(text: str, *, what: str, unique_keys: bool = False) -> Any:
    """Parse one YAML document under the limits above; every failure is one ``InputError`` line. ``unique_keys``:
    refuse a key given twice in one mapping (trainfit's own files; importers read a file as its framework does)."""
    import yaml

    if len(text) > MAX_BYTES:
        raise InputError(f"{what}: more than {MAX_BYTES // 2**20} MiB of YAML; this is not a card")
    loader = None
    try:
        _check_events(text)
        loader = _loader_class()(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        if unique_keys:
            _check_unique_keys(node)
        return loader.construct_document(node)
    except InputError as exc:
        raise InputError(f"{what}: {exc}") from None
    except RecursionError:
        raise InputError(f"{what}: nested too deeply to read (limit {MAX_DEPTH} levels)") from None
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise YamlSyntaxError(f"{what}: not valid YAML ({first}{where})") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp out of range
        raise YamlSyntaxError(f"{what}: not valid YAML ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    finally:
        if loader is not None:
            loader.dispose()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


class _DuplicateKey(ValueError):
    """A JSON object naming a key twice."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:  # RFC 8259 section 4: "The names within an object SHOULD be unique"; json keeps the last
            raise _DuplicateKey(f"key '{k[:60]}' is given twice in one object; give it once")
        out[k] = v
    return out


def _duplicate_at(text: str) -> str | None:
    """The duplicate-key message with the character offset of the object holding it, found by json's pure-Python
    scanner (run only once a key was found twice); None if that fails."""
    from json import decoder, scanner

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):  # noqa: ANN001
        pairs, end = decoder.JSONObject(s_and_end, strict, scan_once, None, list, memo)
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(f"key '{k[:60]}' is given twice in one object (the object at character"
                                    f" {s_and_end[1] - 1}); give it once")
            seen.add(k)
        return dict(pairs), end

    dec = json.JSONDecoder()
    dec.parse_object = parse_object
    dec.scan_once = scanner.py_make_scanner(dec)
    try:
        dec.decode(text)
    except _DuplicateKey as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return None
    return None


def load_json_limited(text: str, *, what: str, unique_keys: bool = False) -> Any:
    """Parse JSON under the size and depth limits, refusing NaN and Infinity (and numbers that overflow to them);
    ``unique_keys``: refuse a key given twice in one object (trainfit's own files)."""
    if len(text) > MAX_BYTES:
        raise InputError(f"{what}: more than {MAX_BYTES // 2**20} MiB of JSON")

    def finite(s: str) -> float:
        v = float(s)
        if not math.isfinite(v):
            raise ValueError(f"{s[:20]} is out of range")
        return v

    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_float=finite,
                          object_pairs_hook=_unique_pairs if unique_keys else None)
    except RecursionError:
        raise InputError(f"{what}: nested too deeply to read (limit {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except _DuplicateKey as exc:  # valid JSON that trainfit's own files refuse: not called invalid
        raise InputError(f"{what}: {_duplicate_at(text) or exc}") from None
    except ValueError as exc:
        raise InputError(f"{what}: not valid JSON ({exc})") from None
    _check_depth(data, what=what)
    return data


def _check_depth(data: Any, *, what: str) -> None:
    stack = [(data, 0)]
    seen = 0
    while stack:
        v, d = stack.pop()
        seen += 1
        if d > MAX_DEPTH:
            raise InputError(f"{what}: nested deeper than {MAX_DEPTH} levels")
        if seen > MAX_NODES:
            raise InputError(f"{what}: more than {MAX_NODES:,} values")
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)


def load_mapping_file(path: Path, *, what: str) -> dict[str, Any]:
    """A YAML or JSON file that must hold a mapping with string keys.

    ``.json`` is read as JSON; every other suffix (``.yaml``, ``.yml``, none, ``.txt``...) as YAML,
    of which JSON is a subset. An empty file is an empty mapping."""
    text = read_text_limited(path, what=what)
    if Path(path).suffix.lower() == ".json":
        data = load_json_limited(text, what=f"{what}: '{path}'", unique_keys=True)
    else:
        data = load_yaml_limited(text, what=f"{what}: '{path}'", unique_keys=True)
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
            type(data), type(data).__name__)
        raise InputError(f"{what}: '{path}' holds {kind}, not a mapping of keys to values (e.g. 'model: Qwen/Qwen3-8B')")
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise InputError(f"{what}: '{path}' has a key that is not text: {bad[0]!r}")
    return data
