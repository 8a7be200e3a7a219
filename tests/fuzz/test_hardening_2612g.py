"""Findings of the fifth review of the December 2026 hardening pass, as explicit cases (each fails without its fix).
As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line, exit code 2,
no traceback and no output file."""

from __future__ import annotations

import os
import threading
import time

import pytest

from fuzzlib import check_run, run_cli


@pytest.fixture
def fifo(tmp_path):
    """A named pipe; for 5 s a writer opens and closes it as soon as a reader waits, so that code reading it
    (without the fix) gets an empty file and fails its assertion instead of hanging the suite."""
    path = tmp_path / "card.fifo"
    os.mkfifo(path)
    stop = threading.Event()

    def release():
        deadline = time.monotonic() + 5
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.02)

    t = threading.Thread(target=release, daemon=True)
    t.start()
    yield path
    stop.set()
    t.join()


# ------------------------------------------------------------------------------------------------
# 1. `trainfit calibrate` read its inputs whole: a named pipe with no writer hung it for ever and /dev/zero
#    grew it to 13 GB of memory in 36 s; a card, --calibration or $TRAINFIT_CALIBRATION that is a pipe or a
#    device was called missing ("no such file") or, from the variable, passed over as no calibration.
def test_calibrate_refuses_a_pipe_without_reading_it(fifo):
    run = run_cli(["calibrate", str(fifo), "--dry-run"])
    check_run(run, codes=(2,))
    assert f"calibrate: '{fifo}' is a named pipe, not a file" in run.stderr, run.stderr


@pytest.mark.parametrize("argv, what", [(["plan", "{fifo}"], "card"), (["export", "{fifo}", "--to", "trl"], "card"),
                                        (["plan", "--calibration", "{fifo}"], "--calibration"),
                                        (["import", "{fifo}", "--from", "deepspeed"], "FILE")])
def test_a_pipe_is_named_not_called_missing(fifo, argv, what):
    run = run_cli([a.format(fifo=fifo) for a in argv])
    check_run(run, codes=(2,))
    assert f"{what}: '{fifo}' is a named pipe, not a file" in run.stderr, run.stderr


@pytest.mark.parametrize("value", ["/dev/zero", "{fifo}"])
def test_the_calibration_variable_naming_a_pipe_or_device_is_refused(monkeypatch, fifo, value):
    monkeypatch.setenv("TRAINFIT_CALIBRATION", value.format(fifo=fifo))
    run = run_cli(["plan"])
    check_run(run, codes=(2,))
    assert "$TRAINFIT_CALIBRATION: '" in run.stderr and ", not a file" in run.stderr, run.stderr


def test_calibrate_refuses_an_input_past_its_bound(tmp_path, monkeypatch):
    from trainfit.calibration import build, file

    monkeypatch.setattr(build, "MAX_INPUT_BYTES", 1000)
    monkeypatch.setattr(file, "MAX_INPUT_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text("[" + "0, " * 2000 + "0]")
    run = run_cli(["calibrate", str(big), "--dry-run"])
    check_run(run, codes=(2,))
    assert "is larger than" in run.stderr, run.stderr
    run = run_cli(["plan", "--calibration", str(big)])
    check_run(run, codes=(2,))
    assert "is larger than" in run.stderr, run.stderr


def test_diagnose_refuses_a_pipe_as_its_log_and_points_to_stdin(fifo):
    """Before: a named pipe read as --log hung until a writer came, /dev/zero never ended."""
    run = run_cli(["diagnose", "--log", str(fifo)])
    check_run(run, codes=(2,))
    assert f"--log: '{fifo}' is a named pipe, not a file; give a log file, or '-' to read stdin" in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# 2. A config.json's tie_word_embeddings was read as Python truth on the gated decoders (Llama, Qwen, Mistral, ...):
#    the text "false" planned a tied head, one vocab x hidden matrix fewer (155.6M of the parameters here), silently.
_CFG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 151936, "head_dim": 128}


@pytest.mark.parametrize("value", ["false", "no", 0])
def test_tie_word_embeddings_that_is_not_a_boolean_is_refused(tmp_path, value):
    import json

    (tmp_path / "config.json").write_text(json.dumps({**_CFG, "tie_word_embeddings": value}))
    run = run_cli(["size", str(tmp_path)])
    check_run(run, codes=(2,))
    assert "config.json field 'tie_word_embeddings' must be true or false" in run.stderr, run.stderr


@pytest.mark.parametrize("value, tied", [(True, True), (False, False), (None, False)])
def test_tie_word_embeddings_booleans_and_null_still_read(value, tied):
    from trainfit.catalog.hf_config import spec_from_hf_config

    assert spec_from_hf_config({**_CFG, "tie_word_embeddings": value}, name="x", source="t").tie_word_embeddings is tied
