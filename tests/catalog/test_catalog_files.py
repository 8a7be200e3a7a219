"""A lookup by id reads the one catalog file named after the id, and gives the entry the whole catalog gives."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

import pytest

from trainfit.catalog import gpus, models
from trainfit.errors import CatalogError


def _files(package: str) -> list[str]:
    return sorted(f.name for f in resources.files(package).iterdir() if f.name.endswith(".json"))


def test_every_model_file_is_named_after_its_id():
    ids = models._entries()
    assert len(ids) == len(_files(models._DATA))  # unique ids
    assert sorted(models.entry_file_name(mid) for mid in ids) == _files(models._DATA)


def test_every_gpu_file_is_named_after_its_id():
    ids = gpus._entries()
    assert sorted(f"{gid}.json" for gid in ids) == _files(gpus._DATA)
    assert all(gid == gid.lower() for gid in ids)  # the lookup lower-cases the name it is given


def test_lookups_give_the_catalogs_own_objects():
    for mid, entry in models._entries().items():
        assert models._shared_entry(mid) is entry
        for alias in entry.get("aliases", ()):
            assert models._shared_entry(alias) is models._entries()[models._index()[alias]]
    for gid, spec in gpus._entries().items():
        assert gpus.resolve_gpu(gid) is spec and gpus.resolve_gpu(f" {gid.upper()} ") is spec
        for alias in spec.aliases:
            assert gpus.resolve_gpu(alias) is gpus._entries()[gpus._index()[alias.lower()]]


def test_an_id_reads_one_file():
    # a new process: the caches of this one are filled by other tests
    code = ("from trainfit.catalog import gpus, models; models.resolve_model('Qwen/Qwen3-8B'); gpus.resolve_gpu('a100-40gb');"
            " print(models._load.cache_info().currsize, models._entries.cache_info().currsize,"
            " gpus._load.cache_info().currsize, gpus._entries.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "0", "1", "0"]


def test_names_that_are_not_ids_fall_back_to_the_catalog():
    assert gpus.resolve_gpu("A100 40GB").id == "a100-40gb"  # an alias
    assert models._entry_by_id("Qwen_Qwen3-8B") is None  # a file name is not an id
    assert models._entry_by_id("../gpus/a100-40gb") is None
    assert gpus._spec_by_id("../models/qwen_qwen3-8b") is None
    with pytest.raises(CatalogError, match="not in the GPU catalog"):
        gpus.resolve_gpu("a100-41gb")


def test_catalog_entry_is_a_copy_the_caller_may_edit():
    """catalog_entry hands out a deep copy: editing it, its HF config included, leaves the cached entry (which
    every later lookup and from_catalog read) as the file has it."""
    got = models.catalog_entry("Qwen/Qwen3-8B")
    assert got == models._entries()["Qwen/Qwen3-8B"] and got is not models._entries()["Qwen/Qwen3-8B"]
    layers = got["config"]["num_hidden_layers"]
    got["config"]["num_hidden_layers"] = 1
    got["id"] = "edited"
    again = models.catalog_entry("Qwen/Qwen3-8B")
    assert again["id"] == "Qwen/Qwen3-8B" and again["config"]["num_hidden_layers"] == layers


def test_a_duplicate_id_in_a_folder_is_one_line():
    from trainfit.catalog import files

    with pytest.raises(CatalogError, match="^model catalog: duplicate id 'x'$"):
        files.load_folder(models._DATA, lambda name: {"id": "x"}, lambda e: e["id"], "model catalog")
