"""Atomic writes: nothing half-written, one-line user errors, inputs never overwritten."""

from __future__ import annotations

import errno
import os

import pytest

from trainfit.errors import OutputError, TrainfitError
from trainfit.fsio import write_bytes_atomic, write_text_atomic


def test_writes_and_replaces(tmp_path):
    p = tmp_path / "out.txt"
    write_text_atomic(p, "one")
    assert p.read_text() == "one"
    os.chmod(p, 0o640)
    write_text_atomic(p, "two")
    assert p.read_text() == "two"
    assert os.stat(p).st_mode & 0o777 == 0o640
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.txt"]


def test_new_file_gets_umask_permissions(tmp_path):
    p = tmp_path / "new.bin"
    old = os.umask(0o022)
    try:
        write_bytes_atomic(p, b"\x00\x01")
    finally:
        os.umask(old)
    assert p.read_bytes() == b"\x00\x01"
    assert os.stat(p).st_mode & 0o777 == 0o644


def test_directory_target_refused(tmp_path):
    with pytest.raises(OutputError, match="is a directory"):
        write_text_atomic(tmp_path, "x")
    assert list(tmp_path.iterdir()) == []


def test_missing_folder_refused(tmp_path):
    with pytest.raises(OutputError, match="does not exist"):
        write_text_atomic(tmp_path / "nope" / "out.html", "x")
    assert list(tmp_path.iterdir()) == []


def test_input_refused(tmp_path):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    with pytest.raises(OutputError, match="one of the inputs"):
        write_text_atomic(tmp_path / "." / "card.yaml", "x", inputs=[None, card])
    assert card.read_text() == "model: Qwen/Qwen3-0.6B\n"


def test_input_refused_through_symlink(tmp_path):
    card = tmp_path / "card.yaml"
    card.write_text("a: 1\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(card)
    with pytest.raises(OutputError, match="one of the inputs"):
        write_text_atomic(link, "x", inputs=[card])
    assert card.read_text() == "a: 1\n"


def test_full_disk_leaves_nothing_and_keeps_old(tmp_path, monkeypatch):
    p = tmp_path / "out.txt"
    p.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="no space left on device") as info:
        write_text_atomic(p, "new" * 1000)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, TrainfitError)
    assert p.read_text() == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.txt"]


def test_dev_full_is_reported(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with pytest.raises(OutputError, match="no space left"):
        write_text_atomic("/dev/full", "x")
    assert not os.path.isfile("/dev/full")  # a device stays a device: written through, never renamed over


def test_unencodable_text(tmp_path):
    with pytest.raises(OutputError, match="cannot be encoded"):
        write_text_atomic(tmp_path / "o.txt", "\udcff")
    assert list(tmp_path.iterdir()) == []


def test_read_once_refusal_lets_pipes_and_the_null_device_through(tmp_path):
    from trainfit.fsio import read_once_refusal

    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "p")
    assert read_once_refusal(tmp_path / "f") is None
    assert read_once_refusal(tmp_path / "p") is None
    assert read_once_refusal(os.devnull) is None
    if os.path.exists("/dev/zero"):
        assert read_once_refusal("/dev/zero") == "a device"


def test_read_bytes_bounded_stops_one_past_the_bound_and_never_waits_for_a_writer(tmp_path):
    import time

    from trainfit.fsio import read_bytes_bounded

    (tmp_path / "f").write_bytes(b"x" * 100)
    assert read_bytes_bounded(tmp_path / "f", limit_bytes=10) == b"x" * 11
    assert read_bytes_bounded(tmp_path / "f", limit_bytes=100) == b"x" * 100
    os.mkfifo(tmp_path / "p")
    start = time.monotonic()
    assert read_bytes_bounded(tmp_path / "p", limit_bytes=10) == b""
    assert time.monotonic() - start < 5


def _read(path, **kw):
    from trainfit.fsio import read_text_bounded

    args = {"limit_bytes": 10, "what": "--in", "error": TrainfitError, "give": "give a file",
            "too_large_give": "give less", "strict_utf8": True, **kw}
    return read_text_bounded(path, **args)


def test_read_text_bounded_reads_a_file_a_pipe_and_the_null_device(tmp_path):
    import threading
    import time

    (tmp_path / "f").write_text("0123456789")  # exactly the bound
    assert _read(tmp_path / "f") == "0123456789"
    assert _read(os.devnull) == ""
    os.mkfifo(tmp_path / "p")
    fd = os.open(tmp_path / "p", os.O_RDWR)  # a writer present before the reader opens it (Linux)
    os.write(fd, b"abc")  # in the pipe's buffer before the reader opens it, kept there by the open writer

    def close_once_the_reader_has_it_open() -> None:
        # the writer closes only after the reader's descriptor exists: closing earlier would drop the buffered bytes
        # (the pipe's last descriptor gone) and the read would race the thread under load
        target = os.path.realpath(tmp_path / "p")
        while sum(os.path.realpath(f"/proc/self/fd/{n}") == target for n in os.listdir("/proc/self/fd")) < 2:
            time.sleep(0.005)
        os.close(fd)

    t = threading.Thread(target=close_once_the_reader_has_it_open, daemon=True)
    t.start()
    assert _read(tmp_path / "p") == "abc"
    t.join(timeout=10)


@pytest.mark.parametrize(("make", "message"), [
    ("idle_fifo", "--in: the named pipe '{p}' gave nothing to read (no writer); give a file"),
    ("dir", "--in: cannot read '{p}' (Is a directory)"),
    ("big", "--in: '{p}' is larger than 0 MiB; give less"),
    ("missing", "--in: cannot read '{p}' (No such file or directory)"),
    ("latin1", "--in: '{p}' is not UTF-8 text (byte 1); give a file"),
    ("through_file", "--in: cannot read '{p}' (Not a directory)"),
])
def test_read_text_bounded_refuses_in_one_line(tmp_path, make, message):
    import time

    p = tmp_path / "x"
    if make == "idle_fifo":
        os.mkfifo(p)
    elif make == "dir":
        p.mkdir()
    elif make == "big":
        p.write_bytes(b"y" * 11)
    elif make == "latin1":
        p.write_bytes(b"a\xe9")
    elif make == "through_file":
        p.write_text("f")
        p = p / "inner"
    start = time.monotonic()
    with pytest.raises(TrainfitError) as exc:
        _read(p)
    assert str(exc.value) == message.format(p=p)
    assert time.monotonic() - start < 5  # a pipe with no writer is never waited for


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_read_text_bounded_refuses_a_device_by_name_before_reading_it():
    with pytest.raises(TrainfitError, match=r"^--in: '/dev/zero' is a device, not a file; give a file$"):
        _read("/dev/zero", limit_bytes=2**40)  # read, /dev/zero would never end


def test_read_text_bounded_names_a_missing_file_and_replaces_bad_bytes_on_request(tmp_path):
    from trainfit.errors import CardError

    with pytest.raises(CardError, match=r"^calibrate: no such file '.*missing'$"):
        _read(tmp_path / "missing", what="calibrate", error=CardError, name_missing=True)
    (tmp_path / "f").write_bytes(b"a\xe9")
    assert _read(tmp_path / "f", strict_utf8=False) == "a\ufffd"
    with pytest.raises(TrainfitError, match="is larger than 0 MiB"):
        _read(tmp_path / "f", limit_bytes=1, strict_utf8=False)
    long_name = tmp_path / ("n" * 300)
    with pytest.raises(TrainfitError, match=r"^--in: cannot read '.*\.\.\. \(\d+ characters\)' \(file name too long\)$"):
        _read(long_name)
