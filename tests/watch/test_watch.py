"""trainfit.watch inside real loops on the CPU: a tiny transformers Trainer, TRL's GRPOTrainer and a
custom loop, measured by PyTorch's MemTracker (no mocked numbers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from watch_support import BATCH, SEQ, VOCAB, tiny_card
from trainfit.watch.verdict import forecast, judge, trend

pytest.importorskip("transformers")


def test_import_trainfit_and_watch_do_not_import_torch():
    code = ("import sys, trainfit; w = trainfit.watch; assert callable(w) and w.watch; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def _trainer_run(tmp_path, model, steps=3):
    import torch
    from datasets import Dataset
    from transformers import Trainer, TrainerCallback, TrainingArguments

    seen = []

    class Capture(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            seen.append(dict(logs or {}))

    ids = torch.randint(0, VOCAB, (8, SEQ), generator=torch.Generator().manual_seed(0))
    ds = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    import trainfit

    w = trainfit.watch(tiny_card())  # the one line of the issue: callbacks=[trainfit.watch(card)]
    assert isinstance(w, TrainerCallback)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=BATCH, max_steps=steps, use_cpu=True,
                             report_to="none", logging_steps=1, save_strategy="no", disable_tqdm=True,
                             optim="adamw_torch")
    Trainer(model=model, args=args, train_dataset=ds, callbacks=[Capture(), w]).train()
    return w, seen


@pytest.fixture(scope="module")
def trainer_run(tmp_path_factory):
    """One 3-step Trainer run under the watch, shared by the tests that read its record."""
    from watch_support import build_tiny_model

    tmp = tmp_path_factory.mktemp("trainer")
    w, seen = _trainer_run(tmp, build_tiny_model())
    return tmp, w, seen


def test_trainer_callback_writes_planned_vs_measured(trainer_run):
    tmp_path, w, seen = trainer_run
    path = tmp_path / "trainfit.record.yaml"
    data = yaml.safe_load(path.read_text())
    rows = {r["phase"]: r for r in data["record"]["phases"]}
    assert {"forward", "backward", "optimizer_step", "step"} <= set(rows)
    for name in ("forward", "backward", "optimizer_step"):
        m, p = rows[name]["measured"], rows[name]["planned"]
        assert m["steps"] == 3 and m["tensor_bytes"] > 0 and m["seconds"] > 0 and p["tensor_bytes"] > 0
    # the plan's tensor bytes of this tiny fp32 run are within 12% of what MemTracker counted
    for name in ("forward", "backward"):
        err = rows[name]["measured"]["tensor_bytes"] / rows[name]["planned"]["tensor_bytes"] - 1
        assert abs(err) < 0.12, (name, err)
    assert rows["forward"]["measured"]["tokens"] == BATCH * SEQ
    assert data["record"]["watch"]["device"] == "cpu" and data["record"]["versions"]["torch"]
    assert data["record"]["step_s"] > 0
    # metrics reach the other callbacks' on_log (what report_to integrations read)
    assert any("trainfit/forward/tensor_gib" in logs for logs in seen)
    assert "verdict:" in w.summary()


def _compare(capsys, *args):
    from trainfit.cli.main import main

    rc = main(["compare", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_compare_prints_the_table_and_verdict(trainer_run, capsys):
    """`trainfit compare` on the record the Trainer run wrote (and refusing a file that is not one)."""
    import json

    rec = trainer_run[0] / "trainfit.record.yaml"
    capsys.readouterr()
    rc, out, _ = _compare(capsys, rec)
    lines = out.splitlines()
    assert rc in (0, 1)
    assert lines[1].split()[:3] == ["phase", "plan", "tensors"]
    assert any(ln.startswith("forward ") for ln in lines) and any(ln.startswith("verdict: plan ") for ln in lines)
    assert (rc == 1) == any("verdict: plan off" in ln for ln in lines)
    rc, out, _ = _compare(capsys, rec, "--json")
    data = json.loads(out)
    assert data["device"] == "cpu" and {p["phase"] for p in data["phases"]} >= {"forward", "backward", "optimizer_step"}
    rc, out, err = _compare(capsys, Path(__file__))
    assert rc == 2 and len(err.strip().splitlines()) == 1


def test_grpo_trainer_records_planned_vs_measured_for_every_phase(tmp_path):
    """TRL's GRPOTrainer with a reference model (beta > 0) and each generation reused for two updates
    (num_iterations 2: old-policy log-probs), the card saying the same: generation, reward, the
    reference and old-policy log-prob passes, forward, backward and optimizer step each have a planned
    and a measured figure; the HF engine runs no weight sync, which the record says ('not measured')."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from trainfit.accept.tiny import save_default
    from trainfit.accept.train import accept_card
    from trainfit.watch import watch
    from trainfit.watch.verdict import judge

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    d = save_default(tmp_path / "model")
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    card = accept_card(model.config.to_dict(), micro_batch=2, seq_len=64)
    card["roles"] = {"kl_coef": 0.04}
    card["rollout"]["num_iterations"] = 2
    w = watch(card, record=tmp_path / "grpo.record.yaml")
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", per_device_train_batch_size=2,
                      num_generations=2, max_steps=2, max_completion_length=8, logging_steps=1, save_strategy="no",
                      disable_tqdm=True, beta=0.04, num_iterations=2, bf16=False)
    trainer = GRPOTrainer(model=model, processing_class=tok, args=args,
                          reward_funcs=[lambda completions, **k: [float(len(c)) for c in completions]],
                          train_dataset=Dataset.from_list([{"prompt": "def add(a, b):"}] * 8), callbacks=[w])
    trainer.train()
    rows = {r["phase"]: r for r in yaml.safe_load((tmp_path / "grpo.record.yaml").read_text())["record"]["phases"]}
    every = ("rollout", "logprob", "reward", "forward", "backward", "optimizer_step")
    for name in every:
        assert rows[name]["planned"]["tensor_bytes"] > 0 and rows[name]["measured"]["tensor_bytes"] > 0, name
        assert rows[name]["measured"]["seconds"] > 0, name
    assert rows["logprob"]["plan_phases"] == ["ref_logprob", "old_logprob"]
    assert rows["reward"]["plan_phases"] == ["ref_logprob without logprob_pass"]
    assert rows["forward"]["plan_phases"] == ["actor_forward"] and rows["forward"]["measured"]["steps"] == 2
    assert rows["rollout"]["measured"]["tokens"] == 2 * 8  # two completions of 8 tokens, one generation
    assert rows["rollout"]["planned"]["seconds"] > 0 and rows["logprob"]["planned"]["seconds"] > 0
    assert rows["update"]["planned"]["seconds"] > 0 and rows["step"]["measured"]["seconds"] > 0
    assert rows["weight_sync"]["measured"] == {} and rows["weight_sync"]["planned"]["tensor_bytes"] > 0
    judged = {j.phase: j for j in judge(list(rows.values()), device="cpu")[0]}
    assert all(judged[n].verdict in ("ok", "over", "under") for n in every)
    assert (judged["weight_sync"].verdict, judged["weight_sync"].reason) == ("n/a", "not measured")


def test_context_manager_custom_loop_and_forecast(tiny_model):
    import torch

    from trainfit.watch import watch

    opt = torch.optim.AdamW(tiny_model.parameters(), lr=1e-3, foreach=True)
    kept = []
    with watch(tiny_card(), model=tiny_model, optimizer=opt, horizon_steps=1e9, device="cpu") as w:
        for step in range(6):
            ids = torch.randint(0, VOCAB, (BATCH, SEQ))
            with w.phase("rollout", tokens=BATCH * SEQ):
                kept.append(torch.ones(2**20 * (step + 1)))  # a cache that grows 4 MiB more each step
            w.phase("forward")
            loss = tiny_model(input_ids=ids, labels=ids).loss
            w.phase("backward")
            loss.backward()
            w.phase("optimizer_step")
            opt.step()
            opt.zero_grad(set_to_none=True)
            w.step()
    rows = {r["phase"]: r for r in w.rows()}
    assert rows["forward"]["measured"]["steps"] == 6 and rows["rollout"]["measured"]["tokens"] == BATCH * SEQ
    # the cache stays alive, so every phase's peak grows; the rollout's forecast is among them
    assert any("of rollout grows" in f and "reaches the capacity" in f for f in w.forecasts), w.forecasts
    assert not any("rollout" in x for x in w.warnings)  # an SFT plan has no rollout to exceed


def test_judge_and_forecast_are_plain_arithmetic():
    g = 2.0**30
    rows = [{"phase": "forward", "planned": {"reserved_bytes": 100.0 * g, "seconds": 1.0},
             "measured": {"reserved_bytes": 115.0 * g, "seconds": 1.1}},
            {"phase": "backward", "planned": {"reserved_bytes": 100.0 * g, "seconds": 1.0},
             "measured": {"reserved_bytes": 95.0 * g, "seconds": 1.5}}]
    judged, verdict = judge(rows, device="cuda", memory_margin=0.1, time_margin=0.3)
    assert [j.verdict for j in judged] == ["over", "over"] and verdict == "plan off: forward, backward"
    # a few MiB over a tiny plan is within one allocator segment: not off however large the fraction
    tiny = [{"phase": "optimizer_step", "planned": {"reserved_bytes": 2.7 * 2**20}, "measured": {"reserved_bytes": 4.2 * 2**20}}]
    assert judge(tiny, device="cuda", memory_margin=0.1, time_margin=0.3)[0][0].verdict == "ok"
    assert judge(rows, device="cuda", memory_margin=0.2, time_margin=0.6)[1] == "plan held"
    assert trend([1, 2, 3, 4]) == pytest.approx(1.0)
    f = forecast([5e9, 10e9, 11e9, 12e9, 13e9], quantity="reserved", phase="rollout", step=5, capacity=20e9,
                 horizon_steps=100)
    assert f is not None and f.steps_left == pytest.approx(7.0) and f.at_step == 12
    # a jump in the first steps (optimizer states) then flat is no trend
    assert forecast([5e9, 9e9, 9e9, 9e9, 9e9], quantity="reserved", phase="x", step=5, capacity=20e9,
                    horizon_steps=100) is None
    assert forecast([10e9] * 5, quantity="reserved", phase="x", step=5, capacity=20e9, horizon_steps=100) is None


def test_wrap_nests_phases_like_the_openrlhf_recipe(tiny_model):
    """docs/watch.md's OpenRLHF recipe on a stand-in trainer object: the step method is the forward,
    the backward and optimizer calls inside it are their own phases, the step ends when it returns."""
    import torch

    from trainfit.watch.core import Watch

    opt = torch.optim.AdamW(tiny_model.parameters(), lr=1e-3, foreach=True)

    class Strategy:
        def backward(self, loss):
            loss.backward()

        def optimizer_step(self):
            opt.step()
            opt.zero_grad(set_to_none=True)

    class Trainer:
        strategy = Strategy()

        def training_step(self, ids):
            loss = tiny_model(input_ids=ids, labels=ids).loss
            self.strategy.backward(loss)
            self.strategy.optimizer_step()

    t = Trainer()
    w = Watch(tiny_card(), device="cpu", model=tiny_model, optimizer=opt).start()
    assert w.wrap(t, "training_step", "forward", step=True) and w.wrap(t.strategy, "backward", "backward")
    assert w.wrap(t.strategy, "optimizer_step", "optimizer_step") and not w.wrap(t, "no_such_method", "x")
    for _ in range(3):
        t.training_step(torch.randint(0, VOCAB, (BATCH, SEQ)))
    w.finish()
    rows = {r["phase"]: r["measured"] for r in w.rows()}
    assert all(rows[p]["steps"] == 3 and rows[p]["tensor_bytes"] > 0 for p in ("forward", "backward", "optimizer_step"))
    assert "training_step" not in vars(t) and "backward" not in vars(t.strategy)  # put back by finish


def test_memory_false_times_the_phases_without_the_tracker(tiny_model):
    """watch(card, memory=False) on the CPU: no MemTracker (no tensor bytes), phase seconds only,
    judged 'n/a' (time is not judged on the CPU), and the dispatch mode is never entered."""
    import torch
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    from trainfit.watch.core import Watch

    opt = torch.optim.AdamW(tiny_model.parameters(), lr=1e-3, foreach=True)
    w = Watch(tiny_card(), device="cpu", model=tiny_model, optimizer=opt, memory=False).start()
    for _ in range(2):
        ids = torch.randint(0, VOCAB, (BATCH, SEQ))
        w.phase("forward")
        loss = tiny_model(input_ids=ids, labels=ids).loss
        assert _get_current_dispatch_mode() is None
        w.phase("backward")
        loss.backward()
        w.phase("optimizer_step")
        opt.step()
        w.step()
    w.finish()
    rows = {r["phase"]: r for r in w.rows()}
    assert all(rows[p]["measured"]["seconds"] > 0 and "tensor_bytes" not in rows[p]["measured"]
               for p in ("forward", "backward", "optimizer_step"))
    judged = judge(list(rows.values()), device="cpu")[0]
    assert {j.verdict for j in judged} == {"n/a"} and "memory=False" in w.to_record()["record"]["watch"]["memory_source"]
