"""`trainfit export`'s "to plan the imported file as this card" line runs as printed (docs/export-import.md: the
line "plans the imported file as the card"). A reviewer's card pinned `software: {megatron-core: "0.13"}`: the line
printed `--set software.megatron-core=0.13`, which YAML reads as the number 0.13 and the card refuses (a package
version written as text); every string value YAML would read as another type is now written JSON-quoted."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from trainfit.cli.export_cmd import _value

CARD = """model: Qwen/Qwen3-8B
software: {trl: "0.20", megatron-core: "0.13", transformers: "4.57"}
batch: {packed_rope_loop: true, packed_sample_tokens: 512}
"""


@pytest.mark.parametrize(("value", "written"), [
    ("0.13", '"0.13"'), ("true", '"true"'), ("null", '"null"'), ("8", '"8"'), ("torchrun", "torchrun"),
    (True, "true"), (512, "512"), (None, "null"), ([1, 2], "[1, 2]"),
])
def test_set_value_reads_back_as_the_card_had_it(value, written):
    from trainfit.cli.common import parse_set

    assert _value(value) == written
    assert parse_set(f"k={_value(value)}")[1] == value


def _trainfit(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainfit", *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, COLUMNS="400"), timeout=300)


@pytest.mark.parametrize("target", ["verl", "trl", "deepspeed", "nemo-rl", "accelerate"])
def test_printed_line_plans_the_imported_file_as_the_card(target, tmp_path):
    (tmp_path / "pin2.yaml").write_text(CARD)
    if target == "trl":  # the line names the accelerate config TRL launches with
        assert _trainfit("export", "pin2.yaml", "--to", "accelerate", "--out", "accelerate.yaml", cwd=tmp_path).returncode == 0
    p = _trainfit("export", "pin2.yaml", "--to", target, "--out", "exported", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    line = next(x for x in (p.stdout + p.stderr).splitlines() if "to plan the imported file as this card:" in x)
    argv = shlex.split(line.split("as this card:", 1)[1])
    assert argv[:2] == ["trainfit", "import"] and 'software.megatron-core="0.13"' in argv
    argv = [a if a != "FILE" else "exported" for a in argv[2:]]
    back = _trainfit("import", *argv, "--json", cwd=tmp_path)
    assert back.returncode == 0, back.stderr  # before: software.megatron-core: ... got the number 0.13, exit 2
    read = json.loads(back.stdout)["card"]
    assert read["software"]["megatron-core"] == "0.13"
    assert read["batch"]["packed_rope_loop"] is True
