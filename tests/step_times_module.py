"""benchmarks/step_times.py (and the other benchmark scripts) as a module, for the tests/benchmarks files; importable because pytest
puts tests/ on sys.path for its conftest. Each test file loads its own copy under its own name, so a test that patches
the harness's globals cannot leak into another file's."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]


def load_benchmark(script: str, name: str) -> ModuleType:
    """A fresh copy of ``benchmarks/<script>`` registered as ``sys.modules[name]`` (dataclasses resolve their
    annotations through sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_step_times(name: str) -> ModuleType:
    """A fresh copy of ``benchmarks/step_times.py`` (``load_benchmark``)."""
    return load_benchmark("step_times.py", name)


def file_id_lists(st: ModuleType, base: Path, path: Path) -> tuple[list[str], list[str]]:
    """The ids the harness ``st`` loads from the data file ``path`` (one of ``base``'s family, picked up by
    ``st.data_files``), in load order with any repeats, and the ids of every other file of that family."""
    assert path in st.data_files(base)
    everything = st.load_entries(base)
    return ([e["id"] for e in everything if e["_file"] == path.name],
            [e["id"] for e in everything if e["_file"] != path.name])


def file_ids(st: ModuleType, base: Path, path: Path) -> tuple[set[str], set[str]]:
    """``file_id_lists`` as sets."""
    loaded, others = file_id_lists(st, base, path)
    return set(loaded), set(others)


def assert_file_loaded_whole(st: ModuleType, base: Path, path: Path, rows: dict, count: int, scored: set[str]) -> None:
    """The harness loads every row of ``path`` once (``rows``: the file's rows by id, ``count`` of them), no other
    file of ``base``'s family has their ids, and the ``scored`` ids are among them."""
    loaded, others = file_id_lists(st, base, path)
    assert sorted(loaded) == sorted(rows) and len(rows) == count
    assert not set(others) & set(rows)
    assert scored <= set(rows)


def sources_cited_outside(path: Path) -> set[str]:
    """Every source path and URL that a benchmarks/data file other than ``path`` cites."""
    cited: set[str] = set()
    for f in sorted((REPO / "benchmarks" / "data").glob("*.json")):
        if f == path:
            continue
        text = f.read_text()
        cited.update(re.findall(r'"path": "([^"]+)"', text))
        cited.update(re.findall(r'"url": "([^"]+)"', text))
    return cited


def assert_cites_only_new_sources(st: ModuleType, base: Path, path: Path, rows: dict, count: int) -> None:
    """Each of the ``count`` rows of ``path`` cites a source (repository and path) of its own that no row of another
    file of ``base``'s family cites."""
    earlier = {(e["source"].get("repo"), e["source"].get("path")) for e in st.load_entries(base)
               if e["_file"] != path.name}
    cited = [(e["source"]["repo"], e["source"]["path"]) for e in rows.values()]
    assert len(set(cited)) == count and not set(cited) & earlier


def assert_first_contact_note(e: dict, *, planned: bool, first_contact: re.Pattern,
                              not_representable: re.Pattern) -> None:
    """An entry's first-contact record: its note opens with the FIRST CONTACT line; a ``planned`` row's note gives
    planned and published seconds and their error (``first_contact``: groups 1-3), the published one the entry's
    figure and the error their ratio to the 0.1 point the note prints; any other row is ``card_cannot_state`` with
    the rule's figure beside the entry's (``not_representable``: group 3)."""
    assert e["note"].startswith("FIRST CONTACT (scored 2026-12-05 before any model change for them). ")
    if planned:
        match = first_contact.search(e["note"])
        assert match and "card_cannot_state" not in e
        planned_s, published = float(match.group(1)), float(match.group(2))
        assert published == pytest.approx(e["measured"]["value"], abs=6e-4)
        # the printed seconds are rounded to ms and the percent to 0.1: agreement within 0.1 point
        assert float(match.group(3)) == pytest.approx((planned_s / published - 1) * 100, abs=0.1)
    else:
        match = not_representable.search(e["note"])
        assert match and e["card_cannot_state"]
        assert float(match.group(3)) == pytest.approx(e["measured"]["value"], abs=6e-3)


def assert_fms_hf_tuning_card(e: dict, card: dict) -> None:
    """What every fms-acceleration benchmark row's card states (fms-hf-tuning on the HF Trainer): one GPU without
    FSDP, more on FSDP1; foreach AdamW; reentrant checkpointing; packed 4,096-token chunks on flash attention; the
    row's scope; LoRA r 16 on q/k/v/o_proj."""
    par = card["parallel"]
    if e["gpus"] == 1:
        assert par["strategy"] == "single"
    else:
        assert (par["strategy"], par["fsdp_version"]) == ("fsdp", "fsdp1")
    assert card["precision"]["optimizer_impl"] == "foreach"
    assert card["loop"] == {"checkpoint_reentrant": True}
    assert card["batch"]["seq_len"] == 4096 and card["attention"] == "flash"
    assert card["scope"] == {"sft_full": "full", "sft_lora": "lora", "sft_qlora": "qlora"}[e["kind"]]
    if card["scope"] != "full":
        assert card["lora"]["rank"] == 16 and card["lora"]["targets"] == ["q_proj", "k_proj", "v_proj", "o_proj"]
