"""Refresh the default-plan output shown in README.md (tests/cli/test_readme.py checks it)."""

import io
from contextlib import redirect_stdout
from pathlib import Path

from trainfit.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
MARKER = "Output of `trainfit plan` on the default card:\n\n```\n"

text = (ROOT / "README.md").read_text()
head, rest = text.split(MARKER, 1)
tail = rest.split("```", 1)[1]
buf = io.StringIO()
with redirect_stdout(buf):
    main(["plan"])
(ROOT / "README.md").write_text(head + MARKER + buf.getvalue() + "```" + tail)
print("README updated")
