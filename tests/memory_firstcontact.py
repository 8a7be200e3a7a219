"""The checks every later first-contact memory set (benchmarks/data/published_memory_points_firstcontact_*.json)
passes: new ids, sources no other memory-point file cites, a cited commit and a first-contact note per point, and
the note's error the arithmetic of its two figures. Each set's test calls them with its own file and id range."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

FIRST_CONTACT = re.compile(
    r"FIRST CONTACT \(scored 2026-12-05 before any model change for them; trainfit at [0-9a-f]{8}\): "
    r"planned (\w+) ([\d.]+) (Gi?B) against the published ([\d.]+) (Gi?B): ([+-]\d+\.\d) %")
RECORDED_ERROR = re.compile(r".*?planned \w+ ([\d.]+) Gi?B against the published ([\d.]+) Gi?B: ([+-]\d+\.\d) %")


def check_ids_are_new_and_unique(published: ModuleType, data: Path, points: list[dict], *, count: int,
                                 ids: range) -> None:
    got = [p["id"] for p in points]
    assert len(got) == len(set(got)) == count and all(i in ids for i in got)
    others = [q["id"] for q in published.points_of_other_files(data)]
    assert not set(got) & set(others)
    assert data in published.MEMORY_POINT_FILES


def check_sources_are_not_reused(published: ModuleType, data: Path, points: list[dict]) -> None:
    """No point cites a repository path another memory-point file cites (the set is out of sample)."""
    def path_of(src: str) -> str:
        return " ".join(src.split(" ")[:2])

    mine = {path_of(p["source"]) for p in points}
    theirs = {path_of(q.get("source", "")) for q in published.points_of_other_files(data)}
    assert not mine & theirs


def check_point_cites_commit_metric_and_first_contact(published: ModuleType, p: dict) -> None:
    assert re.search(r"github\.com/\S+ \S+ @[0-9a-f]{40} \(20\d\d-\d\d-\d\d", p["source"])
    entry = published.POINTS[p["id"]]
    assert entry["card"] is not None, entry.get("unsupported")
    assert p["mem_metric"].startswith(entry["metric"]) and entry["unit"] == p["peak_mem_unit"]
    m = FIRST_CONTACT.match(p["notes"])
    assert m and m.group(1) == entry["metric"] and float(m.group(4)) == p["peak_mem"]
    assert m.group(3) == m.group(5) == p["peak_mem_unit"]
    assert re.search(r"AdamW (foreach|fused):", p["notes"])


def check_first_contact_errors_are_the_recorded_arithmetic(points: list[dict]) -> None:
    """Each note's error is (planned - published) / published of the two figures it prints."""
    for p in points:
        m = RECORDED_ERROR.match(p["notes"])
        assert m, p["id"]
        pred, pub, err = (float(g) for g in m.groups())
        assert abs((pred - pub) / pub * 100 - err) < 0.1, p["id"]
