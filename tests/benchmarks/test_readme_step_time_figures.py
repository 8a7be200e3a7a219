"""The README's published step-time sentence quotes benchmarks/step_times.json as committed: each subset's median
|error| (one decimal), the rule's median on the same points (whole percent) and n. A reviewer found it stale after
rows were added (README 10.4 % against the table's 10.6 %)."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABELS = {
    "SFT full fine-tuning": "SFT full",
    "LoRA/QLoRA": "LoRA / QLoRA",
    "pretraining": "pretrain",
    "RL steps": "RL step",
    "generation": "RL phase: generation",
    "weight sync": "RL phase: weight sync",
    "log-prob passes": "RL phase: log-prob passes",
    "actor update": "RL phase: actor update",
    "all rows": "all rows",
}


def _sentence() -> str:
    text = " ".join(ROOT.joinpath("README.md").read_text().split())
    start = text.index("Published SFT full fine-tuning")
    return text[start:text.index("Points are scored before any change for them.", start)]


@pytest.mark.parametrize("label", LABELS)
def test_readme_quotes_the_committed_table(label):
    head = {h["subset"]: h for h in json.loads(ROOT.joinpath("benchmarks/step_times.json").read_text())["headline"]}
    m = re.search(rf"{re.escape(label)} (\d+\.\d)% \((?:rule )?(\d+)%, n=(\d+)", _sentence())
    assert m, f"README: no '{label} X.X% (rule Y%, n=N)' in the published step-time sentence"
    h = head[LABELS[label]]
    assert float(m.group(1)) == round(h["trainfit"]["median_abs"] * 100, 1)
    assert int(m.group(2)) == round(h["rule_same_points"]["median_abs"] * 100)
    assert int(m.group(3)) == h["trainfit"]["n"]


def test_readme_quotes_the_halves():
    halves = {h["half"]: h for h in json.loads(ROOT.joinpath("benchmarks/step_times.json").read_text())["halves"]}
    m = re.search(r"Fit half (\d+\.\d)%, held-out half (\d+\.\d)%", _sentence())
    assert m
    assert float(m.group(1)) == round(halves["fit half"]["trainfit"]["median_abs"] * 100, 1)
    assert float(m.group(2)) == round(halves["held-out half"]["trainfit"]["median_abs"] * 100, 1)


def _kind(name: str) -> str:
    """training / pref / rl / h200 from a step-time subset or an entry's data file."""
    if name.startswith(("H200", "gpu_raw/")):
        return "h200"
    if name.startswith(("RL", "published_rl")):
        return "rl"
    if name.startswith(("DPO", "published_pref")):
        return "pref"
    return "training"


def _n(value: int) -> str:
    return f"{value:,}"


def test_readme_counts_follow_the_committed_table():
    """README's two count sentences (Accuracy (d) and Benchmarks) against step_times.json: a reviewer found both
    stale (1,384 points, 1,273 entries) after rows were added."""
    table = json.loads(ROOT.joinpath("benchmarks/step_times.json").read_text())
    entries = [e for e in table["entries"] if e["status"] == "mapped"]
    points = [p for p in table["points"] if p["status"] == "mapped"]
    e = {k: sum(_kind(x["file"]) == k for x in entries) for k in ("training", "pref", "rl", "h200")}
    p = {k: sum(_kind(x["subset"]) == k for x in points) for k in ("training", "pref", "rl", "h200")}
    assert len(entries) == table["counts"]["mapped"]["n"]
    published_points = p["training"] + p["pref"] + p["rl"]
    text = " ".join(ROOT.joinpath("README.md").read_text().split())
    assert (f"({_n(published_points)} published points, {_n(p['training'])} training, {_n(p['pref'])} DPO/RM and "
            f"{_n(p['rl'])} RL steps and phases, each cited, and {p['h200']} H200 steps)") in text
    assert (f"{_n(len(entries))} mapped entries ({_n(len(entries) - e['h200'])} published, each cited: "
            f"{_n(e['training'])} training, {_n(e['pref'])} DPO/RM and {_n(e['rl'])} RL runs, whose steps and phases "
            f"give {_n(published_points)} scored points; and {e['h200']} H200 steps)") in text
