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
