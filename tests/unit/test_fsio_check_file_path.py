"""``trainfit.fsio.check_file_path``: the one refusal of paths that can never be a regular file, shared by
``trainfit watch``'s record path and the calibration file's (``--calibration``, ``$TRAINFIT_CALIBRATION``)."""

from __future__ import annotations

import os
import socket

import pytest

from trainfit.errors import CardError, OutputError
from trainfit.fsio import check_file_path

KW = dict(what="thing", error=CardError, give="a thing file")


def _refusal(path, **kw) -> str:  # noqa: ANN001
    with pytest.raises(CardError) as info:
        check_file_path(path, **(KW | kw))
    return str(info.value)


def test_a_regular_file_and_a_path_not_there_yet_pass(tmp_path):
    (tmp_path / "f.json").write_text("{}")
    assert check_file_path(tmp_path / "f.json", **KW) == tmp_path / "f.json"
    assert check_file_path(str(tmp_path / "new" / "f.json"), **KW) == tmp_path / "new" / "f.json"


def test_must_exist_refuses_a_missing_file_and_a_path_through_a_file_as_missing(tmp_path):
    (tmp_path / "f.json").write_text("{}")
    assert check_file_path(tmp_path / "f.json", **KW, must_exist=True) == tmp_path / "f.json"
    assert _refusal(tmp_path / "x.json", must_exist=True) == f"thing: no such file '{tmp_path / 'x.json'}'"
    assert _refusal(tmp_path / "f.json" / "x", must_exist=True) == f"thing: no such file '{tmp_path / 'f.json' / 'x'}'"


def test_a_folder_is_refused(tmp_path):
    assert _refusal(tmp_path) == f"thing: '{tmp_path}' is a directory; give a thing file"


def test_a_named_pipe_is_refused_by_name_and_never_opened(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)  # no writer: opening it to read would block this test for ever
    assert _refusal(fifo) == f"thing: '{fifo}' is a named pipe, not a file; give a thing file"
    hinted = _refusal(fifo, special_hint=" (later)")
    assert hinted == f"thing: '{fifo}' is a named pipe, not a file; give a thing file (later)"


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        assert _refusal(path) == f"thing: '{path}' is a socket, not a file; give a thing file"


@pytest.mark.parametrize("device", ["/dev/zero", os.devnull])
def test_a_device_is_refused_the_null_device_too(device, tmp_path):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    assert _refusal(device) == f"thing: '{device}' is a device, not a file; give a thing file"
    link = tmp_path / "link"
    os.symlink(device, link)
    assert _refusal(link, must_exist=True) == f"thing: '{link}' is a device, not a file; give a thing file"


def test_a_path_through_a_file_is_refused_naming_the_file(tmp_path):
    (tmp_path / "f").write_text("")
    assert _refusal(tmp_path / "f" / "a" / "b.json") == \
        f"thing: '{tmp_path / 'f' / 'a' / 'b.json'}' passes through the file '{tmp_path / 'f'}'; give a thing file"


@pytest.mark.parametrize("path, reason", [("a\0b", "the path holds a NUL byte"), ("x" * 300, "file name too long")])
def test_a_name_the_os_cannot_look_up_is_refused_with_the_reason(path, reason):
    got = _refusal(path, lookup_verb="use")
    assert got.startswith("thing: cannot use '") and got.endswith(f"' ({reason})")
    assert len(got) < 250  # the name is shortened


def test_walk_parents_looks_every_folder_above_up(tmp_path, monkeypatch):
    import trainfit.fsio as fsio

    bad = tmp_path / "sub"
    real = fsio.lookup_error
    monkeypatch.setattr(fsio, "lookup_error", lambda q: "permission denied" if str(q) == str(bad) else real(q))
    path = bad / "r.yaml"
    assert check_file_path(path, **KW) == path  # the path itself looks up: passes (missing)
    assert _refusal(path, walk_parents=True) == f"thing: cannot read '{path}' (permission denied)"


def test_the_error_type_is_the_callers(tmp_path):
    with pytest.raises(OutputError, match="^record: "):
        check_file_path(tmp_path, what="record", error=OutputError, give="a file path")


def test_watch_and_calibration_refuse_through_it(tmp_path, monkeypatch):
    """Both callers delegate: a refusal the shared function makes reaches their users with their words."""
    import trainfit.fsio as fsio
    from trainfit.calibration.file import find_calibration
    from trainfit.watch.core import _check_record_path

    seen = []
    real = fsio.check_file_path

    def spy(path, **kw):  # noqa: ANN001, ANN003
        seen.append(kw["what"])
        return real(path, **kw)

    monkeypatch.setattr(fsio, "check_file_path", spy)
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="named pipe, not a file; give a file path \\(written when the run ends\\)$"):
        _check_record_path(fifo)
    with pytest.raises(CardError, match="^--calibration: .* named pipe, not a file; give a calibration file"):
        find_calibration(fifo)
    monkeypatch.setenv("TRAINFIT_CALIBRATION", str(fifo))
    with pytest.raises(CardError, match="^\\$TRAINFIT_CALIBRATION: .* named pipe"):
        find_calibration(None)
    monkeypatch.setenv("TRAINFIT_CALIBRATION", os.devnull)
    assert find_calibration(None) is None  # the null device switches a default calibration off, as before
    assert seen == ["record", "--calibration", "$TRAINFIT_CALIBRATION"]
