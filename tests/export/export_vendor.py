"""Read verl's default Hydra YAML keys and OpenRLHF's argparse flags from the installed package files.

Neither package is imported (both pull Ray, vLLM, flash-attn...): the files come from
``pip install --no-deps --target DIR verl==0.9.1 openrlhf==0.11.2``; set TRAINFIT_EXPORT_VENDOR=DIR,
or have them importable. Without them the tests use the lists recorded in data/ from those
versions (regenerate: ``python tests/export/export_vendor.py DIR``).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).parent / "data"
VERL_VERSION = "0.9.1"
OPENRLHF_VERSION = "0.11.2"
OPENRLHF_SCRIPTS = ("train_ppo_ray", "train_sft", "train_dpo", "train_rm")


def package_dir(name: str) -> Path | None:
    vendor = os.environ.get("TRAINFIT_EXPORT_VENDOR")
    if vendor and (Path(vendor) / name).is_dir():
        return Path(vendor) / name
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def package_version(pkg_dir: Path, dist: str) -> str | None:
    for d in pkg_dir.parent.glob(f"{dist}-*.dist-info"):
        return d.name[len(dist) + 1 : -len(".dist-info")]
    return None


# -- verl -----------------------------------------------------------------------------------------


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out[key] = v
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
    return out


def _compose(config_dir: Path, name: str, choices: dict[str, str] | None = None) -> dict[str, Any]:
    """A tiny Hydra defaults composer: ``group@pkg: file`` entries whose files have no defaults of their own;
    ``choices`` replaces a group's file (a ``group=file`` override on the command line)."""
    root = yaml.safe_load((config_dir / name).read_text())
    out: dict[str, Any] = {}
    for entry in root.pop("defaults", []):
        if entry == "_self_" or not isinstance(entry, dict):
            continue
        ((spec, file),) = entry.items()
        group, _, pkg = spec.partition("@")
        file = (choices or {}).get(group, file)
        sub = yaml.safe_load((config_dir / group / f"{file}.yaml").read_text()) or {}
        sub.pop("defaults", None)
        node = out
        parts = (pkg or group).split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = sub
    for k, v in root.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k].update(v)
        else:
            out[k] = v
    return out


def verl_keys_live(pkg: Path) -> dict[str, dict[str, str]]:
    """{config: {dotted key: kind}} with kind 'dict' for mappings (where ``+key`` may add) else 'value'."""
    cfg_dir = pkg / "trainer" / "config"
    ppo = yaml.safe_load((cfg_dir / "_generated_ppo_trainer.yaml").read_text())
    # ppo_megatron_trainer.yaml: "python3 -m verl.trainer.main_ppo model_engine=megatron", flattened by verl
    mega = yaml.safe_load((cfg_dir / "_generated_ppo_megatron_trainer.yaml").read_text())
    sft = _compose(cfg_dir, "sft_trainer_engine.yaml")
    sft_mega = _compose(cfg_dir, "sft_trainer_engine.yaml", {"engine": "megatron", "optim": "megatron"})
    kind = lambda v: "dict" if isinstance(v, dict) else "value"  # noqa: E731
    return {
        "ppo_trainer.yaml": {k: kind(v) for k, v in flatten(ppo).items()},
        "ppo_megatron_trainer.yaml": {k: kind(v) for k, v in flatten(mega).items()},
        "sft_trainer_engine.yaml": {k: kind(v) for k, v in flatten(sft).items()},
        "sft_trainer_engine.yaml+megatron": {k: kind(v) for k, v in flatten(sft_mega).items()},
        "groups": {g: sorted(f.stem for f in (cfg_dir / g).glob("*.yaml")) for g in ("model_engine", "engine", "optim")},
    }


def verl_keys_recorded() -> dict[str, Any]:
    return json.loads((DATA / f"verl-{VERL_VERSION}-keys.json").read_text())


# -- OpenRLHF -------------------------------------------------------------------------------------


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Name):
        return node.id  # int / float / str
    return ast.literal_eval(node)


def openrlhf_flags_live(pkg: Path, script: str) -> list[dict[str, Any]]:
    """Every ``parser.add_argument`` of ``openrlhf/cli/<script>.py`` as data (f-strings expanded over their loop)."""
    tree = ast.parse((pkg / "cli" / f"{script}.py").read_text())
    loops: dict[int, tuple[str, list[str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Tuple):
            vals = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)]
            for sub in ast.walk(node):
                loops[id(sub)] = (node.target.id, vals)
    specs: list[dict[str, Any]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant):
            names = [first.value]
        elif isinstance(first, ast.JoinedStr) and id(node) in loops:
            var, vals = loops[id(node)]
            names = []
            for val in vals:
                s = ""
                for part in first.values:
                    s += part.value if isinstance(part, ast.Constant) else val
                names.append(s)
        else:
            continue
        kw: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg in ("type", "action", "nargs", "choices"):
                try:
                    kw[k.arg] = _literal(k.value)
                except ValueError:
                    pass
        for n in names:
            specs.append({"flag": n, **kw})
    return specs


def openrlhf_flags_recorded(script: str) -> list[dict[str, Any]]:
    return json.loads((DATA / f"openrlhf-{OPENRLHF_VERSION}-flags.json").read_text())[script]


def argparse_from(specs: list[dict[str, Any]]):
    """An argparse parser that accepts exactly the recorded flags, with their types, actions and choices."""
    import argparse

    p = argparse.ArgumentParser(exit_on_error=False, allow_abbrev=False)
    types = {"int": int, "float": float, "str": str}
    seen = set()
    for s in specs:
        if s["flag"] in seen:
            continue
        seen.add(s["flag"])
        kw: dict[str, Any] = {}
        if "action" in s:
            kw["action"] = s["action"]
        if "type" in s:
            kw["type"] = types.get(s["type"], str)
        if "nargs" in s:
            kw["nargs"] = s["nargs"]
        if "choices" in s:
            kw["choices"] = s["choices"]
        p.add_argument(s["flag"], **kw)
    return p


def record(vendor: Path) -> None:
    verl = vendor / "verl"
    orl = vendor / "openrlhf"
    DATA.mkdir(exist_ok=True)
    v = {
        "source": f"verl {package_version(verl, 'verl')}: verl/trainer/config/_generated_ppo_trainer.yaml "
        "(the flattened ppo_trainer.yaml), _generated_ppo_megatron_trainer.yaml (model_engine=megatron), "
        "sft_trainer_engine.yaml composed with its defaults (and with engine=megatron optim=megatron); groups: the "
        "config files a group=file override may name",
        **verl_keys_live(verl),
    }
    (DATA / f"verl-{VERL_VERSION}-keys.json").write_text(json.dumps(v, indent=1, sort_keys=True) + "\n")
    o = {"source": f"openrlhf {package_version(orl, 'openrlhf')}: openrlhf/cli/<script>.py parser.add_argument calls"}
    for s in OPENRLHF_SCRIPTS:
        o[s] = openrlhf_flags_live(orl, s)
    (DATA / f"openrlhf-{OPENRLHF_VERSION}-flags.json").write_text(json.dumps(o, indent=1) + "\n")


if __name__ == "__main__":
    record(Path(sys.argv[1]))
