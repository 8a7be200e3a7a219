"""The embedded default card is parsed once and kept as JSON beside it (cli.common.parse_yaml_kept): the same
value as PyYAML's, never a stale one, never written where bytecode may not be."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import pytest
import yaml

from trainfit.cli import common
from trainfit.cli.common import default_card_dict, parse_yaml_kept


@pytest.fixture
def card(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "card.yaml"
    path.write_text(resources.files("trainfit.cards").joinpath("default.yaml").read_text())
    return path


def _kept(path):
    return path.parent / "__pycache__" / f"{path.name}.json"


def test_default_card_is_pyyamls_value():
    text = resources.files("trainfit.cards").joinpath("default.yaml").read_text()
    assert default_card_dict() == yaml.safe_load(text)
    assert default_card_dict() is not default_card_dict()  # a fresh dict: callers apply their overrides to it


def test_first_parse_keeps_the_value_and_the_next_one_reads_it(card, monkeypatch):
    want = yaml.safe_load(card.read_text())
    assert parse_yaml_kept(card) == want
    kept = json.loads(_kept(card).read_text())
    assert kept == {"yaml": card.read_text(), "value": want}
    monkeypatch.setattr(common, "_parse_yaml", lambda text: pytest.fail("parsed the YAML again"))
    assert common._same(parse_yaml_kept(card), want)


def test_a_changed_card_is_parsed_again_and_kept_anew(card):
    parse_yaml_kept(card)
    card.write_text(card.read_text().replace("seq_len: 2048", "seq_len: 4096"))
    assert parse_yaml_kept(card)["batch"]["seq_len"] == 4096
    assert json.loads(_kept(card).read_text())["value"]["batch"]["seq_len"] == 4096


@pytest.mark.parametrize("junk", ["", "{", "[]", '{"yaml": 1}', '{"value": {}}'])
def test_a_torn_or_foreign_cache_file_is_ignored(card, junk):
    _kept(card).parent.mkdir()
    _kept(card).write_text(junk)
    assert parse_yaml_kept(card) == yaml.safe_load(card.read_text())


def test_nothing_written_without_bytecode_or_when_json_would_change_a_type(card, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    parse_yaml_kept(card)
    assert not _kept(card).exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    card.write_text("a: 2026-12-02\nb: {1: x}\n")  # a date is not JSON; an int key would come back a string
    assert parse_yaml_kept(card) == yaml.safe_load(card.read_text())
    card.write_text("b: {1: x}\n")
    assert parse_yaml_kept(card) == {"b": {1: "x"}}
    assert not _kept(card).exists()


def test_a_read_only_folder_is_left_alone(card):
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    card.parent.chmod(0o555)
    try:
        assert parse_yaml_kept(card) == yaml.safe_load(card.read_text())
        assert not _kept(card).exists()
    finally:
        card.parent.chmod(0o755)


def test_a_cold_default_plan_reads_no_yaml_once_the_card_is_kept():
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = ("import sys, io, contextlib\nfrom trainfit.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['plan', '--json']) == 0\n"
            "print('yaml' in sys.modules)\n")
    runs = [subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
            for _ in range(2)]
    assert runs[1].stdout.strip() == "False"
