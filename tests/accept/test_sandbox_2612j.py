"""The candidate's memory as a whole (eighth review of the December hardening pass).

Before: ``Limits.address_space_bytes`` was each process's RLIMIT_AS and ``max_processes`` bounded the processes, so a
candidate that forked held up to ``max_processes`` x ``address_space_bytes`` at once (16 GiB under the default
limits, 900 MiB under a 256 MiB limit when this was found); a few such candidates graded side by side could push the
host into its OOM killer and take the grader with them. Now each process gets its share of the budget."""

import os
from pathlib import Path

import pytest

from trainfit.accept import sandbox

REASON = sandbox.sandbox_status()
needs_jail = pytest.mark.skipif(REASON is not None, reason=f"no jail on this machine: {REASON}")
_MIB = 1 << 20

_HOLDER = '''
import posix, time
def held(n, mib):
    """Fork n children that each touch mib MiB and hold it; the MiB held at once by all of them."""
    r, w = posix.pipe()
    kids = 0
    for _ in range(n):
        try:
            pid = posix.fork()
        except OSError:
            break
        if pid == 0:
            try:
                b = bytearray(mib << 20)
                for i in range(0, len(b), 4096):
                    b[i] = 1
                posix.write(w, b"x")
            except MemoryError:
                posix.write(w, b"m")
            time.sleep(3)
            posix._exit(0)
        kids += 1
    got = b""
    while len(got) < kids:
        got += posix.read(r, 64)
    return {"kids": kids, "held_mib": got.count(b"x") * mib}
'''


def _candidate(tmp_path: Path, limits: sandbox.Limits) -> sandbox.Candidate:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text(_HOLDER)
    for p in (tmp_path, ws):
        os.chmod(p, 0o755)
    os.chmod(ws / "solution.py", 0o644)
    return sandbox.Candidate(ws, limits)


@needs_jail
def test_forked_processes_together_hold_no_more_than_the_address_space_budget(tmp_path):
    limits = sandbox.Limits(call_timeout_s=20.0, address_space_bytes=384 * _MIB, max_processes=4)
    c = _candidate(tmp_path, limits)
    try:
        got = c.call("held", 3, 150)
    finally:
        c.close()
    assert got["kids"] == 3, got  # the children ran: the bound, not a failed fork, is what is tested
    assert got["held_mib"] * _MIB <= limits.address_space_bytes, got


@needs_jail
def test_each_process_still_holds_its_share(tmp_path):
    """The share is usable: three children of a 384 MiB, 4-process budget each hold 40 MiB."""
    c = _candidate(tmp_path, sandbox.Limits(call_timeout_s=20.0, address_space_bytes=384 * _MIB, max_processes=4))
    try:
        assert c.call("held", 3, 40) == {"kids": 3, "held_mib": 120}
    finally:
        c.close()


@pytest.mark.parametrize("limits, field", [(dict(max_processes=0), "max_processes"),
                                           (dict(address_space_bytes=64 * _MIB, max_processes=16), "address_space_bytes")])
def test_limits_that_leave_a_process_too_little_are_refused(limits, field):
    with pytest.raises(ValueError, match=f"Limits.{field}"):
        sandbox.Limits(**limits)
