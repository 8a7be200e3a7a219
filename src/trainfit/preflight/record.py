"""`trainfit record`: the card, completed from the audit, written next to the run.

A record is a run card in its full form (every section, defaults spelled out, so it does not
change when trainfit's defaults do) plus one top-level ``record:`` mapping that the card schema
does not know. ``load_record`` strips ``record:`` and resolves the rest with
``trainfit.spec.card.resolve_card`` (its preset filled, as ``trainfit plan`` reads a card), so a record is also a
card: ``trainfit plan x.record.yaml`` needs only the mapping removed.

It holds the seed's table: model repo, revision and precision; GPU type, memory, count and
topology; Python, PyTorch, training framework and generation engine versions; recipe path,
commit and changes; task kind; training scope; generation settings; checkpoint path, frequency
and resume method.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainfit.errors import CardError, CatalogError, TrainfitError
from trainfit.preflight.audit import NOT_INSTALLED, AuditReport
from trainfit.preflight.shell import run_command
from trainfit.spec.card import RunCard, pin_before, resolve_card
from trainfit.spec.enums import Interconnect, MoeExperts, Scope

RECORD_KEY = "record"
"""The one top-level key a record adds to a card; stripped before validation."""
SOFTWARE_KEYS = ("torch", "transformers", "trl", "peft", "accelerate", "deepspeed", "vllm", "nemo-rl")


def default_record_path(card_path: Path) -> Path:
    """``runs/qwen.yaml`` -> ``runs/qwen.record.yaml``."""
    return card_path.with_name(f"{card_path.stem}.record.yaml")


def card_to_dict(card: RunCard, *, transformers: str | None = None) -> dict[str, Any]:
    """The validated card as plain data that ``load_card_dict`` accepts back and that plans the same.

    Every field is written, so a default comes back as if given; ``parallel.moe_experts`` is therefore written as
    the experts the plan runs (``experts_as_run``) rather than a defaulted ``grouped`` that a transformers < 5 pin
    would refuse once it reads as given. ``transformers``: the version the run has (a record's audited one),
    default the card's own pin."""
    data = card.model_dump(mode="json")
    data["parallel"]["moe_experts"] = experts_as_run(card, transformers=transformers).value
    if card.scope is Scope.FULL:
        data.pop("lora")  # the schema refuses LoRA settings for full scope
    if isinstance(card.model, str):
        data["model"] = {"id": card.model, "revision": None}
    data["precision"]["weights"] = card.weights_dtype.value
    return data


def experts_as_run(card: RunCard, *, transformers: str | None = None) -> MoeExperts:
    """The card's ``parallel.moe_experts`` as ``make_plan`` runs it under transformers ``transformers`` (default: the
    card's ``software.transformers`` pin): a ``grouped`` left at its default resolves to transformers 4.x's per-expert
    loop for the models 4.x builds that way (``plan.resolve.transformers_v4_experts``); a value the card gives, and a
    card the plan refuses or cannot resolve (its model unknown here), keep the card's value."""
    par = card.parallel
    pin = transformers if transformers is not None else card.software.transformers
    if (par.moe_experts is not MoeExperts.GROUPED or "moe_experts" in par.model_fields_set
            or not pin_before(pin, (5, 0))):
        return par.moe_experts
    from trainfit.plan.resolve import card_with, model_spec_of, transformers_v4_experts

    try:
        pinned = card if pin == card.software.transformers else card_with(card, software__transformers=pin)
        return transformers_v4_experts(pinned, model_spec_of(pinned))[0].parallel.moe_experts
    except (TrainfitError, ValueError):  # the plan refuses the card, or its model cannot be resolved here
        return par.moe_experts


def git_state(where: Path, *, timeout_s: float = 10) -> dict[str, Any]:
    """Commit and uncommitted files of the repository holding ``where`` (errors as data)."""
    cwd = where if where.is_dir() else where.parent
    if not cwd.is_dir():
        return {"commit": None, "error": f"no such directory '{cwd}'"}
    head = run_command(["git", "rev-parse", "HEAD"], timeout_s=timeout_s, cwd=str(cwd))
    if not head.ok:
        return {"commit": None, "error": f"git rev-parse HEAD in '{cwd}': {head.error}"}
    status = run_command(["git", "status", "--porcelain", "--", "."], timeout_s=timeout_s, cwd=str(cwd))
    dirty = [ln[3:] for ln in status.stdout.splitlines()] if status.ok else []
    return {"commit": head.stdout.strip(), "dirty_files": dirty, "where": str(cwd)}


def _hardware(card: RunCard, audit: AuditReport, notes: list[str]) -> dict[str, Any]:
    hw = card.hardware.model_dump(mode="json")
    if not audit.gpus:
        notes.append("no GPU found by the audit: hardware kept from the card")
        return hw
    from trainfit.catalog.gpus import resolve_gpu

    first = audit.gpus[0]
    try:
        hw["gpu"], hw["gpu_memory_gib"] = resolve_gpu(first.name).id, None
    except CatalogError:
        hw["gpu"] = "custom"
        hw["gpu_memory_gib"] = round(first.memory_total_bytes / 2**30, 3) if first.memory_total_bytes else None
        notes.append(f"GPU '{first.name}' is not in the catalog: recorded as custom")
    if len({g.name for g in audit.gpus}) > 1:
        notes.append("the machine mixes GPU models: " + ", ".join(sorted({g.name for g in audit.gpus})))
    hw["gpus_per_node"] = len(audit.gpus)
    seen = audited_link(audit)
    stated = card.hardware.interconnect
    if audit.nvlink is False and seen is None:
        notes.append("interconnect: no NV# link and no peer-to-peer matrix, so peer-to-peer is unknown; "
                     + (f"kept from the card ({stated.value})" if stated is not None
                        else "recorded as the catalog's link (null)"))
    elif seen is not None and stated is not None and seen is not stated:
        notes.append(f"hardware.interconnect: card said {stated.value}, the machine has {seen.value} (recorded)")
    link = seen or stated
    if link is not None:
        from trainfit.compute.rates import allowed_links

        try:
            allowed = allowed_links(resolve_gpu(hw["gpu"]))
        except CatalogError:  # a custom card: no catalog link to check against
            allowed = tuple(Interconnect)
        if link in allowed:
            hw["interconnect"] = link.value
        else:
            hw["interconnect"] = None
            notes.append(f"interconnect {link.value} ({'the topology' if seen else 'the card'}): the catalog gives"
                         f" {hw['gpu']} no rate for it; recorded as the catalog's link (null)")
    if audit.host_ram_total_bytes:
        hw["host_ram_gib"] = round(audit.host_ram_total_bytes / 2**30, 2)
    return hw


def audited_link(audit: AuditReport) -> Interconnect | None:
    """The node link the audit saw (``hardware.interconnect``): nvlink when ``nvidia-smi topo -m`` shows NV# links,
    else pcie, or pcie_no_p2p when the peer-to-peer matrix refuses some pair of GPUs (NCCL then stages through host
    memory); None when the topology is unknown, and None without NV# links when peer-to-peer is unknown (no P2P
    matrix: ``topo -p2p r`` failed and no torch probe), since pcie states peer-to-peer (``p2p_link``)."""
    if audit.nvlink is None:
        return None
    if audit.nvlink:
        return Interconnect.NVLINK
    return p2p_link(audit.p2p_matrix, gpus=len(audit.gpus) if audit.gpus else None)


def p2p_link(matrix: Any, *, gpus: int | None) -> Interconnect | None:
    """The PCIe link a peer-to-peer matrix shows among the first ``gpus`` GPUs (all the rows without ``gpus``):
    pcie_no_p2p when any listed pair among them is refused (not OK), even in a matrix short of some pairs; pcie when
    the matrix covers every ``gpus`` x ``gpus`` pair and each reads OK; None otherwise (no matrix, or one that does
    not cover every pair: peer-to-peer unknown)."""
    if not matrix or not all(isinstance(row, (list, tuple)) for row in matrix):
        return None
    m = [list(row) for row in matrix]
    n = gpus if gpus else len(m)
    listed = [(i, j) for i in range(min(n, len(m))) for j in range(min(n, len(m[i]))) if i != j]
    if any(m[i][j] not in ("OK", "X") for i, j in listed):
        return Interconnect.PCIE_NO_P2P
    if len(listed) < n * (n - 1):
        return None
    return Interconnect.PCIE


def build_record(card: RunCard, audit: AuditReport, *, card_path: Path, git: dict[str, Any]) -> dict[str, Any]:
    """The record as plain data (see module docstring)."""
    notes: list[str] = []
    actual = {"python": audit.python_version, **{k: v for k, v in audit.packages.items() if v != NOT_INSTALLED}}
    data = card_to_dict(card, transformers=actual.get("transformers"))
    if (experts := data["parallel"]["moe_experts"]) != card.parallel.moe_experts.value:
        notes.append(f"parallel.moe_experts: {experts} (recorded): transformers {actual.get('transformers')} runs"
                     f" the model's experts as its per-expert loop, not the grouped default")
    software = {k: v for k, v in data["software"].items() if v is not None}
    for key, pin in software.items():
        if key in actual and str(actual[key]) != str(pin):
            notes.append(f"software.{key}: card pinned {pin}, the machine has {actual[key]} (recorded)")
    data["software"] = {**software, **actual}
    data["hardware"] = _hardware(card, audit, notes)
    if git.get("commit"):
        if card.recipe.commit and card.recipe.commit != git["commit"]:
            notes.append(f"recipe.commit: card said {card.recipe.commit}, the repository is at {git['commit']} (recorded)")
        data["recipe"]["commit"] = git["commit"]
    else:
        notes.append(f"recipe.commit: not recorded ({git.get('error')})")
    model = data["model"]
    if isinstance(model, dict) and not model.get("revision") and not model.get("config"):
        notes.append("model.revision is not pinned: the record cannot name the exact weights")
    data[RECORD_KEY] = {
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "card": str(card_path),
        "git": git,
        "gpus": [{"name": g.name, "memory_total_bytes": g.memory_total_bytes, "driver_version": g.driver_version,
                  "compute_cap": g.compute_cap} for g in audit.gpus],
        "driver_version": audit.driver_version,
        "cuda_runtime": audit.cuda_runtime,
        "nccl_version": audit.nccl_version,
        "nvlink": audit.nvlink,
        "topology": audit.topology_text,
        "p2p_matrix": [list(r) for r in audit.p2p_matrix] if audit.p2p_matrix else None,
        LINK_RULE_KEY: "p2p",
        "packages": dict(audit.packages),
        "cpu_cores": audit.cpu_cores,
        "audit_errors": list(audit.errors),
        "notes": notes,
    }
    return data


LINK_RULE_KEY = "interconnect_rule"
"""``record.interconnect_rule``: "p2p" in records whose ``hardware.interconnect`` follows the enum (pcie: peer-to-peer,
pcie_no_p2p: none); records without it wrote pcie for every machine without NV# links (``load_record`` migrates
them)."""
PHASES_KEY = "phases"
"""``record.phases``: planned vs measured per phase (``trainfit.watch.verdict`` documents the rows)."""
STEP_KEY = "step_s"
"""``record.step_s``: measured seconds per optimizer step (what ``trainfit calibrate`` fits time to)."""


def measured_record(card: RunCard, *, rows: list[dict[str, Any]], versions: dict[str, Any],
                    watch: dict[str, Any]) -> dict[str, Any]:
    """A record of a run the watch measured: the full card, then ``record:`` with the versions, the
    watch's settings and verdict, ``phases`` (planned vs measured) and ``step_s`` (the median step)."""
    data = card_to_dict(card)
    step = next((r["measured"].get("seconds") for r in rows if r["phase"] == "step"), None)
    data[RECORD_KEY] = {
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": versions,
        "watch": watch,
        PHASES_KEY: rows,
        **({STEP_KEY: step} if step else {}),
    }
    return data


def add_measured(data: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    """``trainfit record --measured FILE``: the measured record's versions, watch summary, phases and
    step time copied into the record being written (its card must be the same run's)."""
    from trainfit.watch.compare import checked_rows, checked_watch

    rec = measured.get(RECORD_KEY) if isinstance(measured, dict) else None
    if not isinstance(rec, dict) or not isinstance(rec.get(PHASES_KEY), list) or not rec[PHASES_KEY] or not all(
            isinstance(r, dict) and "phase" in r for r in rec[PHASES_KEY]):  # an empty list: compare refuses it too
        raise TrainfitError("record --measured: the file is not a watch record (no record.phases list); "
                            "write one with trainfit.watch(card, record=PATH)")
    # what compare and calibrate read back: checked here, so a record is never written around a bad value
    what = "record --measured"
    checked_rows(rec[PHASES_KEY], what=what)
    checked_watch(rec.get("watch"), what=what)
    if rec.get("versions") is not None and not isinstance(rec["versions"], dict):
        raise CardError(f"{what}: record.versions must be a mapping of package names to versions, got"
                        f" {str(rec['versions'])[:40]!r}")
    step = rec.get(STEP_KEY)
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float)) or not 0 < step < float("inf")):
        raise CardError(f"{what}: record.{STEP_KEY} must be the measured seconds per optimizer step (a positive"
                        f" number), got {step!r}")
    for key in ("versions", "watch", PHASES_KEY, STEP_KEY):
        if key in rec:
            data[RECORD_KEY][key] = rec[key]
    return data


def write_record(data: dict[str, Any], out: Path, *, force: bool, inputs: Iterable[Path | None] = ()) -> None:
    """Write YAML atomically (a failed write leaves ``out`` untouched); TrainfitError (one line) when ``out``
    exists and not ``force``, and OutputError when ``out`` is one of ``inputs`` (even with ``force``)."""
    import yaml

    from trainfit.fsio import check_output_path, write_text_atomic

    inputs = list(inputs)
    check_output_path(out, inputs=inputs, what="record")
    if out.exists() and not force:
        raise TrainfitError(f"record: '{out}' already exists; pass --force to overwrite it")
    write_text_atomic(out, yaml.safe_dump(data, sort_keys=False, allow_unicode=True), inputs=inputs, what="record")


def load_record(path: Path) -> tuple[RunCard, dict[str, Any]]:
    """(the card a record holds, resolved as ``trainfit plan`` resolves it: ``spec.card.resolve_card``, its preset
    filled; its ``record:`` mapping). CardError on a bad record."""
    from trainfit.spec.card import read_card_file

    data = read_card_file(path)
    extra = data.pop(RECORD_KEY, {}) if isinstance(data, dict) else {}
    if not isinstance(extra, dict):
        raise CardError(f"{RECORD_KEY}: must be a mapping (the run record: created_utc, gpus, phases, step_s...),"
                        f" got {str(extra)[:40]!r}")
    if isinstance(data, dict):
        migrate_link(data, extra)
    return resolve_card(data), extra


def migrate_link(data: dict[str, Any], extra: dict[str, Any]) -> None:
    """In place, for every reader of records (``load_record``, ``calibration.records.records_from_data``): a record
    written before ``hardware.interconnect`` distinguished peer-to-peer (no ``record.interconnect_rule``) holds pcie
    for every machine without NV# links; pcie now means peer-to-peer, so the link is re-derived from the record's own
    ``nvlink`` and ``p2p_matrix`` (``p2p_link``, as ``audited_link`` does; null without a matrix), with a note in
    ``record.notes``. CardError when the matrix is neither null nor a list of rows."""
    hw = data.get("hardware")
    if LINK_RULE_KEY in extra or not isinstance(hw, dict) or hw.get("interconnect") != Interconnect.PCIE.value:
        return
    if extra.get("nvlink") is not False:
        return
    gpus = extra.get("gpus")
    matrix = extra.get("p2p_matrix")
    if matrix is not None and not (isinstance(matrix, list) and all(isinstance(row, list) for row in matrix)):
        # p2p_link would iterate a number (TypeError) or read a string or a mapping as 'no matrix recorded'
        raise CardError(f"{RECORD_KEY}.p2p_matrix: a list of rows of 'OK' / 'X' / ... as the audit writes it, or"
                        f" null; got {str(matrix)[:40]!r}")
    link = p2p_link(matrix, gpus=len(gpus) if isinstance(gpus, list) and gpus else None)
    if link is Interconnect.PCIE:
        return
    hw["interconnect"] = link.value if link is not None else None
    notes = extra.get("notes") if isinstance(extra.get("notes"), list) else []
    notes.append("hardware.interconnect: the record predates the peer-to-peer distinction and said pcie; read as "
                 + (f"{link.value} from its P2P matrix" if link is not None
                    else "the catalog's link (null): no P2P matrix recorded"))
    extra["notes"] = notes
