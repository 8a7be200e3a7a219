"""benchmarks/peft_v4_moe_targets.py reads the configs and the V4_PEFT table of tests/unit/test_moe_lora_targets.py
from the test file itself, so the table it regenerates (in a transformers 4.57.6 + peft 0.21.2 environment) is the
one the test holds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "peft_v4_moe_targets.py"


def test_the_script_reads_the_tests_own_table():
    from tests.unit import test_moe_lora_targets as t

    spec = importlib.util.spec_from_file_location("peft_v4_moe_targets", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tables = mod.read_test_tables()
    assert tables["V4_PEFT"] == t.V4_PEFT and tables["CFGS"] == t.CFGS
