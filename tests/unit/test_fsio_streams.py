"""Outputs that are streams, not files: a named pipe and this process's own open files (``/dev/stdout``).

Found in the December 2026 hardening pass:
* ``export --out PIPE`` / ``plan --html PIPE`` with nobody reading the named pipe hung for ever in ``open``
  (after the export's notes were printed); now one line, exit 2: the pipe is opened without blocking (ENXIO: no
  reader) and written blocking once open, so ``--out >(cat)`` still streams.
* That refusal came at the first ENXIO, so ``trainfit ... --out p & consumer < p`` failed whenever trainfit opened
  the pipe before the reader did (a plain ``echo x > p`` waits for its reader). Now the open is retried every
  100 ms, "waiting for a reader on P" is printed once, and the refusal comes only after a bounded wait
  (``trainfit.fsio.PIPE_READER_WAIT_S``, patched small here).
* ``--out /dev/stdout`` with stdout redirected to a file: ``/dev/stdout`` (a link to ``/proc/self/fd/1``) read as
  a regular file, so the atomic write made a temporary file in ``/dev`` and renamed it over the ``/dev/stdout``
  link itself (as root: the machine's ``/dev/stdout`` became a regular file; otherwise "permission denied");
  the redirect got nothing. Now this process's own open files are written through, appended after what the
  command already printed there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trainfit.errors import OutputError
from trainfit.fsio import write_bytes_atomic, write_text_atomic

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def fifo(tmp_path):
    """A named pipe; if something still waits to write into it after 10 s, a reader opens it and drains it, so
    that code that blocks (without the fix) ends and fails its assertion instead of hanging the suite."""
    path = tmp_path / "out.fifo"
    os.mkfifo(path)
    stop = threading.Event()

    def release():
        deadline = time.monotonic() + 10
        while not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        if stop.is_set():
            return
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            end = time.monotonic() + 5
            while time.monotonic() < end:
                try:
                    if os.read(fd, 1 << 16) == b"" and stop.is_set():
                        break
                except BlockingIOError:
                    pass
                time.sleep(0.02)
        finally:
            os.close(fd)

    t = threading.Thread(target=release, daemon=True)
    t.start()
    yield path
    stop.set()
    t.join()


@pytest.fixture
def short_wait(monkeypatch):
    """The bounded wait for a reader, 60 s in use, made 1 s here."""
    import trainfit.fsio

    monkeypatch.setattr(trainfit.fsio, "PIPE_READER_WAIT_S", 1.0)
    return 1.0


def test_a_named_pipe_nobody_reads_is_refused_in_one_line_after_the_bounded_wait(fifo, short_wait, capsys):
    start = time.monotonic()
    with pytest.raises(OutputError) as exc:
        write_text_atomic(fifo, "x" * 10, what="--out")
    took = time.monotonic() - start
    assert short_wait <= took < short_wait + 2.5
    assert str(exc.value) == f"--out: cannot write '{fifo}': a named pipe with no reader"
    assert capsys.readouterr().err == f"waiting for a reader on {fifo}\n"  # once, not once per try


def test_a_reader_that_starts_after_the_writer_gets_the_bytes(tmp_path, short_wait, capsys):
    """``trainfit ... --out p & consumer < p``: trainfit opens first; the reader comes 0.5 s later."""
    path = tmp_path / "late.fifo"
    os.mkfifo(path)
    got = []

    def reader():
        time.sleep(0.5)
        with open(path, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    data = b"z" * (1 << 20)  # more than a pipe's buffer
    write_bytes_atomic(path, data, what="--out")
    t.join(5)
    assert got == [data]
    assert capsys.readouterr().err == f"waiting for a reader on {path}\n"


def test_a_named_pipe_with_a_reader_gets_the_whole_output(tmp_path):
    path = tmp_path / "read.fifo"
    os.mkfifo(path)
    got = []

    def reader():
        with open(path, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    data = b"y" * (1 << 20)  # more than a pipe's buffer: the writes after the open block until read
    while True:
        try:
            write_bytes_atomic(path, data, what="--out")
            break
        except OutputError:  # the reader thread has not opened it yet
            assert time.monotonic() < deadline
            time.sleep(0.02)
    t.join(5)
    assert got == [data]


def test_cli_export_to_a_named_pipe_nobody_reads_ends_in_one_line(fifo, tmp_path, short_wait):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
    from fuzzlib import run_cli

    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n")
    for argv in (["export", str(card), "--to", "deepspeed", "--out", str(fifo)], ["plan", str(card), "--html", str(fifo)]):
        run = run_cli(argv)
        assert run.exc is None and run.rc == 2, run
        assert run.seconds < short_wait + 10, run
        # the one notice that it waits, then the refusal in one line (no traceback)
        assert run.stderr == (f"waiting for a reader on {fifo}\n"
                              f"trainfit: error: --out: cannot write '{fifo}': a named pipe with no reader\n"
                              if argv[0] == "export" else
                              f"waiting for a reader on {fifo}\n"
                              f"trainfit: error: --html: cannot write '{fifo}': a named pipe with no reader\n"), run.stderr


@pytest.mark.parametrize("link_to", ["/proc/self/fd/1", "/dev/stdout"])
def test_a_link_to_this_process_stdout_is_written_through_not_renamed_over(tmp_path, link_to):
    """A link in a folder we own stands in for ``/dev/stdout`` (which the old code renamed over): stdout redirected to
    a file gets what was printed and then the output; the link stays a link."""
    link = tmp_path / "stdout"
    link.symlink_to(link_to)
    redirect = tmp_path / "redirect.txt"
    code = ("import sys; from trainfit.fsio import write_text_atomic; print('before', flush=False); "
            f"write_text_atomic({str(link)!r}, 'the output\\n', what='--out'); print('after')")
    with open(redirect, "w") as out:
        p = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": SRC}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and os.readlink(link) == link_to
    assert redirect.read_text() == "before\nthe output\nafter\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_regular_file_behind_an_ordinary_link_is_still_replaced_atomically(tmp_path):
    """Only this process's open files are written through; any other link is replaced as before (the target a link
    names is not written: the rename never follows it)."""
    target = tmp_path / "target.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_text_atomic(link, "new\n")
    assert target.read_text() == "old\n" and not link.is_symlink() and link.read_text() == "new\n"


@pytest.mark.parametrize("make, reason", [(lambda d: d, "is a directory; give a file path"),
                                          (lambda d: d / "no" / "report.html", "does not exist; create it first")])
def test_the_python_apis_html_writers_refuse_in_one_line(tmp_path, make, reason):
    """``trainfit.report.html.write_plan_html`` (docs/python-api.md) wrote with ``Path.write_text``: a folder ended in
    Python's IsADirectoryError, a missing folder in FileNotFoundError, a named pipe nobody reads hung, and a full
    disk left half a report. It now writes as the CLI's ``--html`` does (``fsio.write_text_atomic``)."""
    import trainfit
    from trainfit.report.html import write_plan_html

    plan = trainfit.plan({"model": "Qwen/Qwen3-0.6B"})
    with pytest.raises(OutputError) as exc:
        write_plan_html(plan, make(tmp_path))
    assert reason in str(exc.value) and "\n" not in str(exc.value)
    out = write_plan_html(plan, tmp_path / "report.html")
    assert out == tmp_path / "report.html" and out.read_text().startswith("<!DOCTYPE html>")
