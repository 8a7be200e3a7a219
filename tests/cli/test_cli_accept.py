"""`trainfit accept --model`: the help and the check agree that it is a checkpoint folder (holding config.json)."""

from __future__ import annotations

import pytest

from trainfit.cli.main import main


def test_the_help_calls_model_a_checkpoint_folder(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["accept", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "Local checkpoint folder, holding the config.json" in help_text, help_text


@pytest.mark.parametrize("what, message", [("missing", "--model: no such checkpoint folder '"),
                                           ("file", "is not a checkpoint folder (no config.json in it)")])
def test_a_missing_model_or_a_file_is_refused_as_not_a_checkpoint_folder(tmp_path, capsys, what, message):
    model = tmp_path / "config.json"
    if what == "file":
        model.write_text("{}")
    assert main(["accept", "--model", str(model)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "folder or file" not in err, err
