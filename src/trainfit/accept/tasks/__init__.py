"""The default coding tasks.

Each module holds only what the policy may see: the prompt, the function name and the visible tests.
The hidden tests and the reference solutions (a correct and a wrong ``solution.py``, used only for reward
calibration and the scripted rollouts) are sealed in ``hidden.sealed``, a data file outside any module, and
opened only by trusted code in the grader's process (``load_tasks``). Hidden tests call into the candidate
through the ``candidate`` fixture, so candidate code never runs inside the pytest process.

The seal (SHA-256 counter-mode keystream and an HMAC-SHA256 tag) keeps the answers out of plain sight: a
grep, an ``import`` or a reader of the installed package finds no reference solution or hidden test. Its key
ships with trainfit, so it is not what keeps a candidate out: the sandbox is. The jail never shows this
package's directory (``sandbox._jail_plan`` covers it with an empty mount) nor the grader's directory.
Edit the sealed file with ``python -m trainfit.accept.tasks.vault``.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import json
import re
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_TASK_MODULES = ("clamp", "palindrome", "fizzbuzz", "word_count")
STUB = "def {fn}(*args):\n    raise NotImplementedError\n"
_MAGIC = b"TRAINFIT-SEALED-1\n"
_KEY = hashlib.sha256(b"trainfit.accept.tasks hidden parts, seal v1").digest()
HIDDEN_FIELDS = ("hidden_tests", "correct", "wrong")


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One small Python coding task."""

    name: str
    prompt: str
    files: dict[str, str]
    """Starting workspace: ``solution.py`` (a stub) and ``tests/test_visible.py``."""
    hidden_tests: str
    correct: str
    """A correct ``solution.py``."""
    wrong: str
    """A plausible but wrong ``solution.py`` (passes some hidden tests at most)."""

    @property
    def hidden_names(self) -> list[str]:
        return re.findall(r"^def (test_\w+)\(", self.hidden_tests, flags=re.MULTILINE)


def sealed_path() -> Path:
    """Where the sealed hidden tests and reference solutions are stored."""
    return Path(__file__).resolve().with_name("hidden.sealed")


def _keystream(nonce: bytes, n: int) -> bytes:
    blocks = (hashlib.sha256(_KEY + nonce + i.to_bytes(8, "big")).digest() for i in range((n + 31) // 32))
    return b"".join(blocks)[:n]


def seal(hidden: dict[str, dict[str, str]]) -> bytes:
    """Seal ``{task: {hidden_tests, correct, wrong}}`` into the bytes of ``hidden.sealed``."""
    for name, parts in hidden.items():
        if set(parts) != set(HIDDEN_FIELDS) or not all(isinstance(v, str) for v in parts.values()):
            raise ValueError(f"task {name!r}: needs exactly the string fields {', '.join(HIDDEN_FIELDS)}")
    plain = json.dumps(hidden, indent=1, sort_keys=True).encode()
    nonce = secrets.token_bytes(16)
    body = nonce + bytes(a ^ b for a, b in zip(plain, _keystream(nonce, len(plain))))
    return _MAGIC + hmac.new(_KEY, body, hashlib.sha256).digest() + body


def unseal(blob: bytes) -> dict[str, dict[str, str]]:
    """Open the bytes of ``hidden.sealed``; ``ValueError`` when they are not an intact seal."""
    if not blob.startswith(_MAGIC):
        raise ValueError("not a trainfit sealed task file")
    tag, body = blob[len(_MAGIC):len(_MAGIC) + 32], blob[len(_MAGIC) + 32:]
    if not hmac.compare_digest(tag, hmac.new(_KEY, body, hashlib.sha256).digest()):
        raise ValueError("sealed task file is corrupt (tag mismatch)")
    nonce, cipher = body[:16], body[16:]
    return json.loads(bytes(a ^ b for a, b in zip(cipher, _keystream(nonce, len(cipher)))))


@lru_cache(maxsize=1)
def _hidden() -> dict[str, dict[str, str]]:
    return unseal(sealed_path().read_bytes())


def load_tasks() -> list[Task]:
    out = []
    hidden = _hidden()
    for mod_name in _TASK_MODULES:
        m = importlib.import_module(f"trainfit.accept.tasks.{mod_name}")
        files = {"solution.py": STUB.format(fn=m.FUNCTION), "tests/test_visible.py": m.VISIBLE_TESTS}
        out.append(Task(name=mod_name, prompt=m.PROMPT, files=files, **hidden[mod_name]))
    return out


def split_tasks() -> tuple[list[Task], list[Task]]:
    """(train, held_out): the first two tasks train, the last two measure the baseline."""
    tasks = load_tasks()
    return tasks[:2], tasks[2:]
