"""`trainfit diagnose --log`: what a log may be (a file, a named pipe such as the shell's ``<(...)``, /dev/null,
/dev/stdin) and the one-line refusals (a device, a pipe that sends nothing, more than the read bound)."""

from __future__ import annotations

import os
import time

import pytest

from trainfit.cli import diagnose_cmd
from trainfit.cli.main import main

from fifo_writer import fifo_with_writer  # tests/fifo_writer.py

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of"
       " 79.10 GiB of which 1.20 GiB is free.\n")



def _one_line_error(capsys, argv, message):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("trainfit: error: ") and message in err, err


def test_a_named_pipe_is_read_as_the_log(tmp_path, capsys):
    """Process substitution, ``--log <(grep -A5 OutOfMemory train.log)``: was refused as 'a named pipe'."""
    fifo = tmp_path / "log.fifo"
    t = fifo_with_writer(fifo, OOM.encode())
    assert main(["diagnose", "--log", str(fifo)]) == 0
    t.join()
    out, _ = capsys.readouterr()
    assert "tried to allocate 2.00 GiB on GPU 0 (79.10 GiB total, 1.20 GiB free)" in out


def test_a_named_pipe_past_the_bound_ends_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(diagnose_cmd, "MAX_LOG_CHARS", 1000)
    fifo = tmp_path / "log.fifo"
    t = fifo_with_writer(fifo, b"y\n" * 20_000)  # under the 64 KiB pipe buffer: the writer never waits
    _one_line_error(capsys, ["diagnose", "--log", str(fifo)], f"--log: '{fifo}' is larger than 0 MiB")
    t.join()


def test_a_named_pipe_with_no_writer_ends_in_one_line(tmp_path, capsys):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    _one_line_error(capsys, ["diagnose", "--log", str(fifo)], f"--log: the named pipe '{fifo}' gave nothing to read")
    assert time.monotonic() - start < 5


def test_the_null_device_reads_as_an_empty_log(capsys):
    _one_line_error(capsys, ["diagnose", "--log", os.devnull], f"vLLM KV-cache error or extension build error in '{os.devnull}'")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_another_device_is_refused_by_name(capsys):
    _one_line_error(capsys, ["diagnose", "--log", "/dev/zero"], "--log: '/dev/zero' is a device, not a file")
