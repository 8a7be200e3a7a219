"""Exit codes survive the CLI entry point: a failing check or accept is non-zero."""

from importlib import resources

from trainfit.cli.main import main


def test_check_fails_on_a_machine_without_the_cards_gpus(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here: the card's 8 GPUs are missing
    card = tmp_path / "card.yaml"
    card.write_text(resources.files("trainfit.cards").joinpath("default.yaml").read_text())
    assert main(["check", str(card)]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_plan_exit_code_is_zero(capsys):
    assert main(["plan", "--json"]) == 0


def test_accept_rejects_an_unknown_engine_in_one_line(capsys):
    assert main(["accept", "--engine", "sglang"]) == 2
    err = capsys.readouterr().err
    assert "--engine must be auto, hf or vllm" in err and "Traceback" not in err
