"""Catalog entries cite where their numbers come from: a repository, path and commit, or a URL; never
how a copy was found (tool names, search ids, index notes)."""

import json
import re
from importlib import resources

import pytest

TOOL_NOTES = re.compile(
    r"find_string|find_files|read_file|\bfetch\b|\bgrep\b|file id|search id|\bids?\s+\d{6,}|found via|found in|"
    r"stored (public )?(code|material|test|model)|\bindex\b(?!\.\w)|not exposed|repository not recorded|repo not recorded",
    re.I,
)
REPO_PATH_COMMIT = re.compile(r"\b(?:github\.com|gitlab\.com|gitcode\.com)/[\w.-]+/[\w.-]+ [\w./-]+ @[0-9a-f]{7,40}\b")
URL = re.compile(r"https?://[\w.-]+\.[a-z]{2,}/\S+")


def _catalog(kind):
    root = resources.files(f"trainfit.catalog.data.{kind}")
    return [json.loads(f.read_text()) for f in root.iterdir() if f.name.endswith(".json")]


MODELS = _catalog("models")


@pytest.mark.parametrize("entry", MODELS, ids=[m["id"] for m in MODELS])
def test_model_source_cites_and_never_describes_tooling(entry):
    source = entry["source"]
    assert not TOOL_NOTES.search(source), f"{entry['id']}: the source describes how a copy was found: {TOOL_NOTES.search(source).group(0)!r}"
    assert not TOOL_NOTES.search(entry.get("note", "")), f"{entry['id']}: the note describes how a copy was found"
    if entry.get("verified", True):
        assert REPO_PATH_COMMIT.search(source) or URL.search(source), f"{entry['id']}: no repository+path+commit and no URL"
    else:
        assert source.startswith("UNVERIFIED") or REPO_PATH_COMMIT.search(source) or URL.search(source), entry["id"]


def test_the_seeds_unconfirmed_model_says_so_plainly():
    from trainfit.catalog.models import from_catalog

    (entry,) = [m for m in MODELS if m["id"] == "Qwen/Qwen3.8-27B"]
    assert entry["verified"] is False and entry["source"].startswith("UNVERIFIED: no primary source")
    assert from_catalog("Qwen/Qwen3.8-27B").verified is False


def test_the_patterns_catch_the_old_notes():
    old = ("verbatim config.json dump found in stored public code via find_string('x') -> file id 30247352769 "
           "(index does not expose repo/path)")
    assert TOOL_NOTES.search(old)
    assert not TOOL_NOTES.search("github.com/o/r Qwen/Qwen2.5-Coder-3B/index.md @40a7101e")  # a file named index.md
    assert REPO_PATH_COMMIT.search("github.com/THUDM/slime scripts/models/qwen3-8B.sh @624b824a8 (Megatron args)")
    assert not REPO_PATH_COMMIT.search("gitcode.com/Ascend/MindSpeed-RL configs/model/qwen3_235b_a22b.yaml")


@pytest.mark.parametrize("entry", _catalog("gpus"), ids=lambda e: e["id"])
def test_gpu_source_cites_and_never_describes_tooling(entry):
    assert not TOOL_NOTES.search(entry["source"]), entry["id"]
    assert REPO_PATH_COMMIT.search(entry["source"]) or URL.search(entry["source"]), entry["id"]


MEMORY_TOTAL = re.compile(r"Memory total (\d+) MiB")
REPO_AT_COMMIT = re.compile(r"\b[\w.-]+/[\w.-]+ [\w./-]+@[0-9a-f]{7,40}\b")
GPUS = _catalog("gpus")


@pytest.mark.parametrize("entry", GPUS, ids=lambda e: e["id"])
def test_gpu_memory_total_is_the_stored_bytes_and_is_cited(entry):
    """The memory total a GPU note quotes (the MiB nvidia-smi prints) is the stored memory_bytes, and the note cites
    where that total was printed (repository path@commit, or a URL) right after it: never 'public dumps'."""
    notes = entry.get("notes", "")
    assert "nvidia-smi dump" not in notes, f"{entry['id']}: 'nvidia-smi dumps' cites nothing"
    m = MEMORY_TOTAL.search(notes)
    if m is None:
        return
    assert entry["memory_bytes"] == int(m.group(1)) * 2**20, entry["id"]
    following = notes[m.start():m.start() + 900]
    nxt = MEMORY_TOTAL.search(notes, m.end())
    if nxt is not None:
        following = notes[m.start():min(nxt.start(), m.start() + 900)]
    assert REPO_AT_COMMIT.search(following) or URL.search(following), f"{entry['id']}: the memory total cites nothing"


def test_the_memory_total_pattern_catches_the_old_phrase():
    old = "Memory total 81559 MiB: the total nvidia-smi prints for this card in public nvidia-smi dumps."
    assert not (REPO_AT_COMMIT.search(old) or URL.search(old)) and "nvidia-smi dump" in old
    assert REPO_AT_COMMIT.search("(ECC on: xforcevesa/new-vrwkv README.md@e7a40aa9f4c4b2d06f526f313821f850b96d17ad)")
