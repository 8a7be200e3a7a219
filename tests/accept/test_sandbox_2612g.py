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
