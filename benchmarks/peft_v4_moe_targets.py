"""Regenerate ``V4_PEFT`` of tests/unit/test_moe_lora_targets.py: PEFT 0.21.2's trainable LoRA parameters on the MoE
models transformers 4.57.6 builds (no target conversion: the experts and the ``nn.Linear`` routers are ordinary
modules, ``trainfit.memory.lora._V4_EXPERT_MODULES``), or None where PEFT raises.

For every ``(family, targets)`` key of the test's ``V4_PEFT``: the test's own tiny config (``CFGS``: 2 layers, hidden
256) built on the meta device with ``AutoModelForCausalLM.from_config``, ``get_peft_model`` with
``LoraConfig(r=16, target_modules=...)`` (``"all-linear"`` or the names), the trainable parameters summed. The configs
and keys are read from the test file itself (its ``B``, ``CFGS``, ``ATTN_V5``, ``ATTN_V4`` and ``V4_PEFT``
assignments, evaluated alone), so this script needs no trainfit install: only torch, transformers 4.57.6 and peft
0.21.2. It prints the table as the test writes it and the keys whose count differs from the test's; exit status 1 when
any differs or when the environment is not transformers 4.x.

An environment for it (never the project's own virtual environment, which holds transformers 5)::

    python -m venv /tmp/v4 && /tmp/v4/bin/pip install transformers==4.57.6 peft==0.21.2 torch==2.13.0
    /tmp/v4/bin/python benchmarks/peft_v4_moe_targets.py

The same environment runs the test's cross-check, ``test_peft_on_meta_with_transformers_4_still_counts_this``, which
skips elsewhere: ``PYTHONPATH=/tmp/v4/lib/python3.11/site-packages:src /tmp/v4/bin/python -m pytest -q -n0
tests/unit/test_moe_lora_targets.py -k transformers_4`` (the project's test dependencies installed there too, or the
project's own site-packages listed after /tmp/v4's).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TEST = Path(__file__).resolve().parents[1] / "tests" / "unit" / "test_moe_lora_targets.py"
NAMES = ("B", "CFGS", "ATTN_V5", "ATTN_V4", "V4_PEFT")


def read_test_tables() -> dict:
    """The test file's configs and its V4_PEFT table, its assignments evaluated with builtins only."""
    tree = ast.parse(TEST.read_text())
    body = [n for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id in NAMES]
    ns: dict = {}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(TEST), "exec"), {"__builtins__": __builtins__}, ns)  # noqa: S102
    return ns


def count(family: str, targets: tuple[str, ...], cfgs: dict) -> int | None:
    import peft
    import torch
    import transformers

    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfgs[family]))
    tm = "all-linear" if targets == ("all-linear",) else list(targets)
    try:
        pm = peft.get_peft_model(model, peft.LoraConfig(r=16, target_modules=tm))
    except ValueError:  # NoMatchingPeftModuleError and "Target module ... is not supported" alike
        return None
    return sum(p.numel() for p in pm.parameters() if p.requires_grad)


def main() -> int:
    import peft
    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")
    if int(transformers.__version__.split(".")[0]) >= 5:
        print("needs transformers 4.x (see the docstring for the environment)")
        return 1
    t = read_test_tables()
    names = {t["ATTN_V5"]: "ATTN_V5", t["ATTN_V4"]: "ATTN_V4", t["ATTN_V4"][:4]: "ATTN_V4[:4]",
             t["ATTN_V4"][:4] + ("w1", "w3", "w2"): 'ATTN_V4[:4] + ("w1", "w3", "w2")'}
    got, differ = {}, []
    for (family, targets), want in t["V4_PEFT"].items():
        got[family, targets] = n = count(family, targets, t["CFGS"])
        if n != want:
            differ.append(f"{family} {targets}: test {want}, measured {n}")
    print("V4_PEFT = {")
    for (family, targets), n in got.items():
        print(f"    ({family!r}, {names.get(targets, repr(targets))}): {n},")
    print("}")
    for line in differ:
        print("differs:", line)
    print(f"{len(got) - len(differ)} of {len(got)} as the test has them")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
