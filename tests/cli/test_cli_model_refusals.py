"""MoE-only card options on a dense model: ``fit`` and ``export`` refuse them with ``plan``'s one line (exit 2),
before any search, instead of an empty table or a written config."""

import json

import pytest

from trainfit.cli.main import main

GROUPED = ["--set", "scope=lora", "--set", "lora.expert_adapters=grouped"]
FUSED = ["--set", "parallel.tensor_parallel_impl=megatron", "--set", "parallel.moe_launch=fused"]
GROUPED_LINE = ("lora.expert_adapters: 'grouped' prices the adapters of routed experts; Qwen/Qwen3-8B is dense;"
                " allowed for it: merged")
FUSED_LINE = ("parallel.moe_launch: 'fused' describes an MoE router and dispatcher; Qwen/Qwen3-8B is dense;"
              " allowed for it: null")


def _refusal(argv, capsys) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    # under --json the refusal is also {"error": line} on stdout (tests/cli/test_cli_json_errors.py), else nothing
    assert out == ("" if "--json" not in argv else json.dumps({"error": err.strip()[len("trainfit: error: "):]}) + "\n")
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("sets, line", [(GROUPED, GROUPED_LINE), (FUSED, FUSED_LINE)], ids=["grouped", "fused"])
def test_fit_export_and_plan_refuse_moe_options_on_a_dense_model_alike(sets, line, capsys):
    planned = _refusal(["plan", *sets], capsys)
    assert planned.endswith(line)
    assert _refusal(["fit", *sets], capsys) == planned  # before: exit 0, an empty table of 25,152 configurations
    assert _refusal(["fit", "--json", *sets], capsys) == planned
    for target in ("trl", "accelerate"):
        assert _refusal(["export", "--to", target, *sets], capsys) == planned  # before: exit 0, a written config


def test_moe_options_on_an_moe_model_still_export(capsys):
    rc = main(["export", "--to", "trl", "--set", "model=Qwen/Qwen3-30B-A3B", *GROUPED])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "lora.expert_adapters grouped" in err  # the target's note on what it cannot express
