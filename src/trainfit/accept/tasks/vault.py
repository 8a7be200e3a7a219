"""Maintainer tool for ``hidden.sealed``: ``python -m trainfit.accept.tasks.vault open OUT.json`` writes the
hidden tests and reference solutions as plain JSON to edit (keep that file out of the repository);
``... vault close IN.json`` seals it back into the package."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainfit.accept.tasks import seal, sealed_path, unseal


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainfit.accept.tasks.vault")
    ap.add_argument("action", choices=("open", "close"))
    ap.add_argument("json_path", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.action == "open":
            args.json_path.write_text(json.dumps(unseal(sealed_path().read_bytes()), indent=1, sort_keys=True))
        else:
            sealed_path().write_bytes(seal(json.loads(args.json_path.read_text())))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
