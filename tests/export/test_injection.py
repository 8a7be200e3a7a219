"""Exports cannot carry code (#17): newlines, quotes, $(...), backticks and Hydra interpolations in every
string field of a card are written as values. Each exported file parses back to the same values, and
running the scripts (with stub launchers on PATH in a temp dir) runs nothing else."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainfit.export import TARGETS, ExportError, export, read_back
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict

PAYLOADS = [
    "x$(touch MARK)",
    "x`touch MARK`",
    "a'b\"c; touch MARK",
    "n\nimport os; os.system('touch MARK')\n#",
    "k: v\nextra_key: injected",
    "${oc.env:HOME}\\${x}\\",
    "tail\\",
    "\u2028yaml line\x85break\r",
]


def _card(payload: str, method: str):
    d = {
        "name": payload, "notes": payload, "model": payload, "method": method, "scope": "lora",
        "lora": {"targets": [payload, "q_proj"]},
        "checkpoint": {"path": payload},
        "hardware": {"gpus_per_node": 8},
    }
    if method in ("ppo", "grpo"):
        d["roles"] = {"reward_model": payload + "-rm", "kl_coef": 0.04}
        if method == "ppo":
            d["roles"]["critic"] = payload + "-critic"
        d["rollout"] = {"placement": "split", "gpus": 2}
    return load_card_dict(d)


_STUB = """#!/bin/sh
for a in "$@"; do printf '%s\\0' "$a"; done > "$ARGV_OUT"
"""


def _run_script(text: str, tmp_path: Path) -> list[str]:
    """Run the exported shell script with stub launchers; the argv the launcher got."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python3", "torchrun", "deepspeed"):
        p = bin_dir / name
        p.write_text(_STUB)
        p.chmod(0o755)
    script = tmp_path / "run.sh"
    script.write_text(text)
    bash = shutil.which("bash") or "/bin/bash"
    assert subprocess.run([bash, "-n", str(script)], capture_output=True).returncode == 0
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_OUT": str(tmp_path / "argv"), "HOME": str(tmp_path)}
    r = subprocess.run([bash, str(script)], cwd=tmp_path, env=env, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "MARK").exists(), "the script ran injected code"
    raw = (tmp_path / "argv").read_bytes()
    return raw.split(b"\0")[:-1] and [x.decode() for x in raw.split(b"\0")[:-1]]


class _Recorder:
    def __init__(self, name):
        self.name = name

    def __call__(self, **kwargs):
        return (self.name, kwargs)


def _exec_trl(text: str, tmp_path: Path) -> dict:
    """Execute the TRL module with stand-in trl/peft/transformers classes; the names it defines."""
    tree = ast.parse(text)
    allowed_calls = {"SFTConfig", "RewardConfig", "DPOConfig", "GRPOConfig", "TrainingArguments", "LoraConfig",
                     "BitsAndBytesConfig"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name) and node.func.id in allowed_calls, ast.dump(node)
        assert not isinstance(node, (ast.Attribute, ast.Subscript, ast.Lambda, ast.FunctionDef, ast.ClassDef))
    for stmt in tree.body:
        assert isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign)), ast.dump(stmt)

    def fake_import(name, globals=None, locals=None, fromlist=(), level=0):
        assert name in ("trl", "peft", "transformers"), name
        mod = type(sys)(name)
        for n in fromlist or ():
            setattr(mod, n, _Recorder(n))
        return mod

    ns: dict = {"__builtins__": {"__import__": fake_import}}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(tree, "train_config.py", "exec"), ns)
    finally:
        os.chdir(cwd)
    assert not (tmp_path / "MARK").exists()
    return ns


@pytest.mark.parametrize("method", ["grpo", "ppo", "sft"])
@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_no_target_carries_code(payload, method, tmp_path):
    card = _card(payload, method)
    for target in TARGETS:
        try:
            e = export(card, target)
        except ExportError as exc:  # OpenRLHF cannot take a module name argparse would read as a flag
            assert (target == "openrlhf" and "lora.targets" in str(exc)) or (
                target == "torchtitan" and "allowed for --to torchtitan" in str(exc)) or (  # full SFT of known models
                target == "nemo-rl" and method == "ppo" and "allowed for --to nemo-rl" in str(exc)), (target, str(exc))
            continue
        if target == "accelerate":
            assert yaml.safe_load(e.text) == e.data
        elif target == "deepspeed":
            assert json.loads(e.text) == e.data
        elif target == "nemo-rl":
            assert yaml.safe_load(e.text) == e.data["config"]  # the header is comments only
            assert not [ln for ln in e.text.splitlines() if ln.startswith("#") and payload.strip() and payload in ln]
        elif target == "trl":
            ns = _exec_trl(e.text, tmp_path)
            assert ns["model"] == payload
            assert ns["args"][1] == e.data["args"]
            assert ns["peft_config"][1]["target_modules"] == [payload, "q_proj"]
            assert ns["launch"] == e.data["launch"]
        else:
            argv = _run_script(e.text, tmp_path)
            if target == "verl":
                assert argv[argv.index("-m") + 2 :] == e.data["overrides"] or argv[-len(e.data["overrides"]):] == e.data["overrides"]
            else:
                assert argv[-len(e.data["flags"]):] == e.data["flags"]
        back = read_back(card, e)
        if target in ("trl", "verl", "openrlhf", "nemo-rl"):
            assert back.model == payload
            if target != "trl" and card.scope.value != "full":
                assert list(back.lora_targets) == [payload, "q_proj"]
        if target in ("verl", "openrlhf") and method == "ppo":
            assert back.roles.critic == payload + "-critic"
        if target in ("verl", "openrlhf") and method in ("ppo", "grpo"):
            assert back.roles.reward_model == payload + "-rm"


def test_trl_name_newline_cannot_add_a_statement():
    card = _card("n\nimport os; os.system('touch MARK')\n#", "sft")
    text = export(card, "trl").text
    assert "\nimport os" not in text
    assert all(not line.startswith("import os") for line in text.splitlines())


def test_accelerate_name_newline_adds_no_key():
    card = _card("k: v\nextra_key: injected", "sft")
    e = export(card, "accelerate")
    assert "extra_key" not in yaml.safe_load(e.text)


def test_verl_model_id_is_one_hydra_value():
    card = load_card_dict({"model": "x$(touch P)", "method": "grpo"})
    e = export(card, "verl")
    assert "actor_rollout_ref.model.path='x$(touch P)'" in e.data["overrides"]
    assert "'actor_rollout_ref.model.path='\"'\"'x$(touch P)'\"'\"''" in e.text
    assert import_text(e.text, "verl").card["model"] == "x$(touch P)"


def test_nemo_rl_escapes_omegaconf_interpolations():
    """NeMo RL loads its YAML with OmegaConf, which resolves ${...}: a model id must stay a literal."""
    card = load_card_dict({"model": "${oc.env:HOME}\\${x}", "method": "sft"})
    e = export(card, "nemo-rl")
    assert e.data["config"]["policy"]["model_name"] == "\\${oc.env:HOME}\\\\\\${x}"
    assert import_text(e.text, "nemo-rl").card["model"] == "${oc.env:HOME}\\${x}"
    with pytest.raises(Exception, match="interpolation"):
        import_text("defaults: sft.yaml\npolicy:\n  model_name: ${oc.env:HOME}\n", "nemo-rl")


def test_torchtitan_strings_are_toml_literals():
    import tomllib

    card = load_card_dict({"model": "Qwen/Qwen3-0.6B", "name": 'a"b\n[parallelism]\ntensor_parallel_degree = 8 \u2028\U0001f600'})
    e = export(card, "torchtitan")
    cfg = tomllib.loads(e.text)
    assert cfg["job"]["description"] == "trainfit: " + card.name
    assert cfg["parallelism"]["tensor_parallel_degree"] == 1
