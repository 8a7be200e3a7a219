"""`fit` screens its candidates without the allocator replay and replays only those that can rank first
in their (GPU kind, count) (``fit_search._settle``): the rows it returns are those of replaying every
candidate, and each is what `trainfit plan` gives for its configuration."""

import json

import pytest

from trainfit import fit_search
from trainfit.calibration import make_calibration
from trainfit.cli.main import main
from trainfit.memory import alloc_sequence, stream_pools
from trainfit.objective import Goal, Objective
from trainfit.search import _evaluate, fit
from trainfit.spec.dotted import deep_copy, set_dotted

FUZZ = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "precision": {}}
"""The release fuzz's slow case (benchmarks/fuzz_release.md): 288 candidates, 176 distinct replays."""


def _spy(monkeypatch) -> dict[str, int]:
    """Counts the allocator replays (``alloc_sequence.replayed_overhead`` calls) and the replanned rows
    whose fit verdict the replay turned."""
    seen = {"replays": 0, "replanned": 0, "flipped": 0}
    replay, replan = alloc_sequence.replayed_overhead, fit_search._replayed

    def counted(*a, **k):
        seen["replays"] += 1
        return replay(*a, **k)

    def watched(row, base, cal):
        new = replan(row, base, cal)
        seen["replanned"] += 1
        seen["flipped"] += new.fits != row.fits
        return new

    def counted_fsdp(*a, **k):
        seen["replays"] += 1
        return replay_fsdp(*a, **k)

    def counted_zero(*a, **k):
        seen["replays"] += 1
        return replay_zero(*a, **k)

    replay_fsdp, replay_zero = stream_pools.fsdp_replayed_overhead, stream_pools.zero_replayed_overhead
    monkeypatch.setattr(alloc_sequence, "replayed_overhead", counted)
    monkeypatch.setattr(stream_pools, "fsdp_replayed_overhead", counted_fsdp)  # FSDP's per-stream replay
    monkeypatch.setattr(stream_pools, "zero_replayed_overhead", counted_zero)  # DeepSpeed ZeRO's per-stream replay
    monkeypatch.setattr(fit_search, "_replayed", watched)
    return seen


CASES = [
    # a cell whose fastest candidates fit on the floor but not replayed (the verdict flips); up to 2 cards: on one
    # the flip was a one-GPU optimizer offload under strategy single, which fit no longer generates (no framework
    # offloads there: spec.card.offload_strategy_refusal)
    pytest.param({"model": "Qwen/Qwen3-4B", "method": "sft", "scope": "full", "batch": {"seq_len": 4096},
                  "loss": {"chunked": True}, "parallel": {"gradient_checkpointing": True}}, ["rtx4090"], 2,
                 {"model", "method", "scope", "batch.seq_len", "loss.chunked", "parallel.gradient_checkpointing",
                  "precision.optimizer", "parallel.tensor_parallel_impl"}, Objective.TIME, 1, id="flips"),
    # nothing fits: the closest attempt (smallest replayed peak) of each count
    pytest.param({"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "full", "parallel": {"offload": "none"}},
                 ["rtx4090"], 1, {"model", "method", "scope", "parallel.offload", "loss.chunked", "precision.optimizer"},
                 Objective.COST, 0, id="closest"),
    # two GPU kinds and data-parallel counts (DDP rows replay too)
    pytest.param({"model": "Qwen/Qwen3-0.6B", "method": "sft", "batch": {"seq_len": 2048}}, ["rtx4090", "a100-40gb"],
                 2, {"model", "method", "batch.seq_len", "scope", "loss.chunked", "precision.optimizer",
                     "parallel.gradient_checkpointing"}, Objective.COST, 0, id="kinds"),
]


CALIBRATED = make_calibration({"rtx4090": {"reserved_replay_scale": {"default/single": 1.6}, "fragmentation_share": 0.2}},
                              created="2026-12-01")
"""Memory constants that move the replayed (and the share's) reserved figures."""


@pytest.mark.parametrize("data, gpus, max_gpus, pinned, objective, flips, calibration",
                         [pytest.param(*c.values, None, id=c.id) for c in CASES]
                         + [pytest.param(*CASES[0].values, CALIBRATED, id="flips-calibrated")])
def test_screened_fit_equals_replaying_every_candidate(data, gpus, max_gpus, pinned, objective, flips, calibration,
                                                        monkeypatch):
    seen = _spy(monkeypatch)
    goal = Goal(objective=objective)
    kw = dict(gpus=gpus, max_gpus=max_gpus, pinned=frozenset(pinned), workers=1, goal=goal, calibration=calibration)
    screened = fit(data, **kw)
    fast = dict(seen)
    full = fit(data, **kw, screen=False)
    assert screened.rows == full.rows and screened.evaluated == full.evaluated
    # the time-first screen refuses what the memory walk refuses (zero2 with parameter offload) too
    assert screened.invalid == full.invalid
    assert not any(r.floor for r in screened.rows)
    assert fast["flipped"] >= (flips if calibration is None else 0)  # the case exercises what it is named for
    # the screen replays a few rows per (kind, count), the reference every candidate that has a replay
    assert fast["replays"] == fast["replanned"] <= 4 * len(screened.rows) < seen["replays"] - fast["replays"]


def test_floor_rows_bound_the_replayed_rows():
    """The screen's premise: planned without the replay, a row that would replay is marked ``floor``, its
    peak is never above the replayed one and it fits wherever the replayed one does; every other
    field, and every row without a replay, is the replayed plan's."""
    base = {"model": "Qwen/Qwen3-1.7B", "method": "sft", "hardware": {"gpu": "rtx4090", "gpus_per_node": 2}}
    keys = ["parallel.strategy", "scope", "parallel.gradient_checkpointing", "batch.micro_batch_size", "loss.chunked"]
    combos = [(s, sc, ck, m, ch) for s in ("ddp", "fsdp", "single") for sc in ("full", "lora") for ck in (True, False)
              for m in (1, 4) for ch in (False, True)]
    floor, _ = _evaluate(base, keys, combos, floor=True)
    exact, _ = _evaluate(base, keys, combos)
    assert len(floor) == len(exact) == len(combos)
    marked = 0
    for lo, hi in zip(floor, exact):
        assert not hi.floor
        if not lo.floor:
            assert lo == hi
            continue
        marked += 1
        assert lo.peak_device_bytes <= hi.peak_device_bytes and (lo.fits or not hi.fits)
        for f in ("knobs", "gpus", "gpu", "step_seconds", "host_ram_bytes", "tokens_per_s", "cost_per_hour", "parallel"):
            assert getattr(lo, f) == getattr(hi, f), f
    # the plain data-parallel steps (32 of the 48) replay; on some the floor fits where the replay does not
    assert marked >= 32 and any(lo.fits != hi.fits for lo, hi in zip(floor, exact))


def _plan_json(card: dict, tmp_path, capsys) -> dict:
    path = tmp_path / "row.json"
    path.write_text(json.dumps(card))
    assert main(["plan", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("text, argv", [
    ("model: Qwen/Qwen2.5-7B\nmethod: sft\nprecision: {}\n",
     ["--gpu", "h100", "--max-gpus", "1", "--set", "model=Qwen/Qwen3-0.6B"]),  # the release fuzz's slow case
    ("model: Qwen/Qwen3-4B\nmethod: sft\nscope: full\nbatch: {seq_len: 4096}\nloss: {chunked: true}\n",
     ["--gpu", "rtx4090", "--max-gpus", "1", "--objective", "time", "--set", "precision.optimizer=adamw"]),
    ("model: Qwen/Qwen3-0.6B\nmethod: sft\nscope: full\n",
     ["--gpu", "rtx4090,a100-40gb", "--max-gpus", "2", "--set", "loss.chunked=false",
      "--set", "parallel.gradient_checkpointing=true"]),
])
def test_every_fit_row_is_the_plan_of_its_configuration(text, argv, tmp_path, capsys):
    card = tmp_path / "card.yaml"
    card.write_text(text)
    assert main(["fit", str(card), *argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows
    import yaml

    from trainfit.cli.common import parse_set

    base = yaml.safe_load(text)
    for i, k in enumerate(argv):
        if k == "--set":
            set_dotted(base, *parse_set(argv[i + 1]))
    for r in rows:
        data = deep_copy(base)
        for key, value in r["knobs"].items():
            set_dotted(data, key, value)
        set_dotted(data, "hardware", {"gpu": r["gpu"], "gpus_per_node": min(r["gpus"], 8), "nodes": max(1, r["gpus"] // 8)})
        plan = _plan_json(data, tmp_path, capsys)
        got = {"fits": r["fits"], "phase": r["peak_phase"], "step": r["step_seconds"], "host": r["host_ram_bytes"]}
        want = {"fits": plan["fits"], "phase": plan["peak_phase"], "step": plan["step_seconds"],
                "host": plan["host_ram_bytes"]}
        assert got == want, r["knobs"]
        # fit's JSON rounds the byte figures as plan's does: equal to the byte
        assert r["peak_gpu_bytes"] == plan["peak_gpu_bytes"]["device"], r["knobs"]
        assert r["headroom_bytes"] == plan["headroom_bytes"], r["knobs"]


def test_the_release_fuzz_case_replays_only_its_row(monkeypatch):
    seen = _spy(monkeypatch)
    # the eager stack pinned (the case predates fit_search.layout_stacks; on Megatron-Core nothing is replayed)
    pinned = frozenset({"model", "method", "precision", "parallel.tensor_parallel_impl"})
    result = fit(FUZZ, gpus=["h100-sxm"], max_gpus=1, pinned=pinned, workers=1)
    assert result.evaluated == 288 and len(result.rows) == 1 and result.rows[0].fits
    assert seen["replays"] == 1  # was 176: one per distinct per-GPU step among the candidates
