"""Read verl's default Hydra YAML keys, OpenRLHF's argparse flags and torchtitan's JobConfig fields from the
package files, and NeMo RL's example config keys at a commit.

verl and OpenRLHF are not imported (both pull Ray, vLLM, flash-attn...): the files come from
``pip install --no-deps --target DIR verl==0.9.1 openrlhf==0.11.2 torchtitan==0.2.2`` (torchtitan's config
modules are imported without its package __init__, which pulls the models and triton; its ConfigManager
needs ``tyro``); set TRAINFIT_EXPORT_VENDOR=DIR, or have them importable. NeMo RL is not a package here:
its keys are read from examples/configs at a pinned commit of a clone. Without them the tests use the
lists recorded in data/ from those versions (regenerate: ``python tests/export/export_vendor.py DIR
[NEMO_RL_GIT_DIR]``).
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





# -- torchtitan -----------------------------------------------------------------------------------

TORCHTITAN_VERSION = "0.2.2"


def _torchtitan_modules(pkg: Path):
    """torchtitan's config modules without its package __init__ (which imports the models, triton...)."""
    import types

    saved = {k: sys.modules[k] for k in list(sys.modules) if k == "torchtitan" or k.startswith("torchtitan.")}
    stub = types.ModuleType("torchtitan")
    stub.__path__ = [str(pkg)]
    sys.modules["torchtitan"] = stub
    cfg = types.ModuleType("torchtitan.config")  # its __init__ imports the manager (tyro)
    cfg.__path__ = [str(pkg / "config")]
    sys.modules["torchtitan.config"] = cfg
    try:
        import importlib

        return importlib.import_module("torchtitan.config.job_config"), saved
    except Exception:
        _restore(saved)
        raise


def _restore(saved: dict) -> None:
    for k in [k for k in sys.modules if k == "torchtitan" or k.startswith("torchtitan.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def torchtitan_keys_live(pkg: Path) -> dict[str, dict[str, Any]]:
    """{section.key: {"type": ..., "choices": [...]}} for every field of torchtitan's JobConfig (dataclasses)."""
    import dataclasses
    import typing

    jc, saved = _torchtitan_modules(pkg)
    try:
        out: dict[str, dict[str, Any]] = {}

        def walk(cls: type, prefix: str) -> None:
            hints = typing.get_type_hints(cls)
            for f in dataclasses.fields(cls):
                tp = hints[f.name]
                if dataclasses.is_dataclass(tp):
                    walk(tp, f"{prefix}{f.name}.")
                    continue
                entry: dict[str, Any] = {"type": str(tp).replace("typing.", "")}
                args = [a for a in typing.get_args(tp) if a is not type(None)]
                lits = [a for a in args if typing.get_origin(a) is typing.Literal] or (
                    [tp] if typing.get_origin(tp) is typing.Literal else [])
                if lits:
                    entry["choices"] = [c for lit in lits for c in typing.get_args(lit)]
                out[f"{prefix}{f.name}"] = entry

        walk(jc.JobConfig, "")
        return out
    finally:
        _restore(saved)


def torchtitan_keys_recorded() -> dict[str, Any]:
    return json.loads((DATA / f"torchtitan-{TORCHTITAN_VERSION}-keys.json").read_text())


def torchtitan_parse_live(pkg: Path, toml_path: Path):
    """The JobConfig torchtitan's own ConfigManager builds from the TOML (needs tyro importable)."""
    _, saved = _torchtitan_modules(pkg)
    try:
        import importlib

        manager = importlib.import_module("torchtitan.config.manager")
        return manager.ConfigManager().parse_args(["--job.config_file", str(toml_path)])
    finally:
        _restore(saved)


def record_torchtitan(vendor: Path) -> None:
    pkg = vendor / "torchtitan"
    v = {"source": f"torchtitan {package_version(pkg, 'torchtitan')} (PyPI; pytorch/torchtitan v0.2.2 "
                   "73a0e6979dd10b6b1904098eb3c8f62c18ab87ce): torchtitan/config/job_config.py JobConfig fields, "
                   "Literal choices", "keys": torchtitan_keys_live(pkg)}
    (DATA / f"torchtitan-{TORCHTITAN_VERSION}-keys.json").write_text(json.dumps(v, indent=1, sort_keys=True) + "\n")


# -- NeMo RL --------------------------------------------------------------------------------------

NEMO_RL_COMMIT = "7ea279abfbeb698b092856d0dab61e7cf39bc909"
NEMO_RL_CONFIGS = ("grpo_math_1B.yaml", "sft.yaml")


def nemo_rl_keys_recorded() -> dict[str, Any]:
    return json.loads((DATA / f"nemo-rl-{NEMO_RL_COMMIT[:7]}-keys.json").read_text())


def record_nemo_rl(git_dir: Path) -> None:
    """Flattened keys of the example configs at the commit, read with ``git show`` from a clone's git directory."""
    import subprocess

    out: dict[str, Any] = {"source": f"NVIDIA-NeMo/RL {NEMO_RL_COMMIT}: examples/configs/<name> (dotted keys; 'dict'"
                                     " for mappings)"}
    for name in NEMO_RL_CONFIGS:
        text = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{NEMO_RL_COMMIT}:examples/configs/{name}"],
                              capture_output=True, text=True, check=True).stdout
        cfg = yaml.safe_load(text)
        out[name] = {k: "dict" if isinstance(v, dict) else "value" for k, v in flatten(cfg).items()}
    (DATA / f"nemo-rl-{NEMO_RL_COMMIT[:7]}-keys.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    # python tests/export/export_vendor.py VENDOR_DIR [NEMO_RL_GIT_DIR]
    record(Path(sys.argv[1]))
    if (Path(sys.argv[1]) / "torchtitan").is_dir():
        record_torchtitan(Path(sys.argv[1]))
    if len(sys.argv) > 2:
        record_nemo_rl(Path(sys.argv[2]))
