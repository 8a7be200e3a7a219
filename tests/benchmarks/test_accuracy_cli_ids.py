"""benchmarks/accuracy.py ``--ids``: a bad range is refused by argparse in one error line with exit 2, no traceback."""

from __future__ import annotations

import pytest
from step_times_module import load_benchmark


def _accuracy():
    return load_benchmark("accuracy.py", "trainfit_bench_accuracy_cli")


A = _accuracy()


@pytest.mark.parametrize("text,want", [("830-834", (830, 834)), ("815", (815, 815)), ("0-0", (0, 0))])
def test_good_ranges(text, want):
    assert A.id_range(text) == want


@pytest.mark.parametrize("text", ["abc", "-5", "9-3", "1-", "830-834x", "1-2-3", ""])
def test_bad_ids_exit_2_with_one_error_line(text, capsys):
    with pytest.raises(SystemExit) as exc:
        A.main(["--only", "published", f"--ids={text}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--ids" in errors[0], err
