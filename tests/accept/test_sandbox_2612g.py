"""Sandbox escapes found by the December hardening pass, one regression test each."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from trainfit.accept import sandbox
from trainfit.accept.tasks import sealed_path

REASON = sandbox.sandbox_status()
needs_jail = pytest.mark.skipif(REASON is not None, reason=f"no jail on this machine: {REASON}")


def _readable(tree: Path) -> None:
    for p in [tree, *tree.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


@pytest.fixture
def prefix(monkeypatch):
    """A read-only tree the jail shows (as the interpreter's prefix is), holding a second installed trainfit.

    Made beside the source tree, not under /tmp: the jail covers /tmp with its own empty tmpfs."""
    import trainfit

    root = Path(tempfile.mkdtemp(prefix=".jail-prefix-", dir=Path(trainfit.__file__).resolve().parents[2]))
    monkeypatch.setattr(sandbox, "_SYSTEM_DIRS", (*sandbox._SYSTEM_DIRS, str(root)))
    sandbox._jail_plan.cache_clear()
    try:
        yield root
    finally:
        sandbox._jail_plan.cache_clear()
        shutil.rmtree(root, ignore_errors=True)


@needs_jail
@pytest.mark.parametrize("site", ["lib/python3.11/site-packages/trainfit",
                                  "local/lib/python3.11/dist-packages/trainfit",
                                  "lib/python3.11/site-packages/trainfit-0.1.0-py3.11.egg/trainfit"])
def test_a_second_installed_copy_of_the_sealed_tasks_is_covered(prefix, site, tmp_path):
    """Before: only the imported package was covered, so a copy pip-installed into the interpreter's prefix
    (the grader running from a checkout) showed its hidden.sealed, which opens with the key every copy ships:
    the candidate read [2342] bytes of hidden tests and reference solutions."""
    tasks = prefix / site / "accept" / "tasks"
    tasks.mkdir(parents=True)
    shutil.copy(sealed_path(), tasks / "hidden.sealed")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text(
        "import glob\n"
        "def look(root):\n"
        "    return sorted(glob.glob(root + '/**/hidden.sealed', recursive=True))\n")
    _readable(prefix)
    _readable(tmp_path)
    assert str((prefix / site).resolve()) in sandbox._jail_plan().masks
    c = sandbox.Candidate(ws, sandbox.Limits(call_timeout_s=20))
    try:
        assert c.call("look", str(prefix)) == []
    finally:
        c.close()


def test_installed_copies_are_found_through_links_and_not_elsewhere(tmp_path):
    site = tmp_path / "lib/python3.12/site-packages"
    (site / "other" / "trainfit").mkdir(parents=True)  # not a package of this site directory
    (tmp_path / "elsewhere" / "trainfit").mkdir(parents=True)
    (site / "trainfit").symlink_to(tmp_path / "elsewhere" / "trainfit")
    assert sandbox._installed_copies((str(tmp_path),)) == {str((tmp_path / "elsewhere" / "trainfit").resolve())}


def _candidate(tmp_path, source, **limits):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text(source)
    _readable(tmp_path)
    return sandbox.Candidate(ws, sandbox.Limits(**limits))


@needs_jail
def test_a_reply_started_and_never_finished_times_out_with_the_call(tmp_path):
    """Before: the timeout covered only the reply's first byte; a candidate that wrote part of a line and slept
    held the call for 60 s (and a grading until the whole run's timeout)."""
    import time

    c = _candidate(tmp_path, "import posix, time\n"
                             "def f(*a):\n"
                             "    posix.write(4, b'{\"ok\": true, \"value\": ')\n"
                             "    time.sleep(60)\n", call_timeout_s=1.0)
    t0 = time.monotonic()
    try:
        with pytest.raises(sandbox.CandidateError, match="timed out after 1.0 s"):
            c.call("f")
        assert time.monotonic() - t0 < 10
    finally:
        c.close()


@needs_jail
@pytest.mark.parametrize("pad", [0, sandbox.MAX_REPLY_BYTES])
def test_no_call_reads_a_reply_written_before_its_request(tmp_path, pad):
    """Before: a reply longer than 1 MiB was cut at 1 MiB and its tail, or a second line written at once, was read
    as the reply to the next call: the candidate answered a request it had not yet received."""
    c = _candidate(tmp_path, "import posix\n"
                             "def f(*a):\n"
                             f"    posix.write(4, b'x' * {pad} + b'\\n' * (not {pad}) + b'{{\"ok\": true, \"value\": 42}}\\n')\n"
                             "    return 0\n", call_timeout_s=10.0)
    try:
        with pytest.raises(sandbox.CandidateError, match="not one line"):
            c.call("f")
        with pytest.raises(sandbox.CandidateError, match="gone"):
            c.call("g")
    finally:
        c.close()


@needs_jail
def test_a_reply_nested_past_the_parsers_depth_is_the_candidates_error(tmp_path):
    """Before: the parser's RecursionError escaped ``call`` instead of ``CandidateError``."""
    c = _candidate(tmp_path, "import posix\n"
                             "def f(*a):\n"
                             "    posix.write(4, b'[' * 200000 + b'\\n')\n"
                             "    posix._exit(0)\n", call_timeout_s=10.0)
    try:
        with pytest.raises(sandbox.CandidateError):
            c.call("f")
    finally:
        c.close()
