"""The acceptance run's plan card says what the run does, and the checks' own copies stay out of the measurement."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")


def test_accept_card_plans_the_optimizer_the_trainer_builds(tmp_path):
    """GRPOTrainer builds the Trainer's default optimizer, torch's fused AdamW for torch >= 2.8 (transformers 5.24.0
    training_args.py lines 806-811, trainer_optimizer.py lines 206-207): the card says fused, so the plan's optimizer
    step holds no param-sized foreach temporary (the 0.53 MiB the run never allocated)."""
    from trl import GRPOConfig

    from trainfit.accept.train import accept_card
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.enums import Phase

    assert GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none").optim == "adamw_torch_fused"
    cfg = {"model_type": "qwen3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 2048,
           "tie_word_embeddings": False}
    card = accept_card(cfg, micro_batch=4, seq_len=255)
    assert card["precision"]["optimizer_impl"] == "fused"
    step = next(p for p in make_plan(load_card_dict(card)).phases if p.phase is Phase.ACTOR_OPTIMIZER_STEP)
    assert step.components.get("optimizer_temporaries", 0.0) == 0.0


def test_unmeasured_excludes_every_tensor_of_a_snapshot():
    """The checks' snapshots (nested mappings of tensors) are handed to the watch's exclude, every tensor once; without
    a watch nothing is called."""
    import torch

    from trainfit.accept.train import Observed, _unmeasured

    seen = []

    class W:
        def exclude(self, *t):
            seen.extend(t)

    snap = {"params": {"a": torch.ones(2), "b": torch.ones(3)}, "gen_logps": torch.ones(1)}
    assert _unmeasured(Observed(watch=W()), snap) is snap
    assert sorted(t.numel() for t in seen) == [1, 2, 3]
    assert _unmeasured(Observed(), snap) is snap


def test_harness_shaped_phase_is_named_not_judged_and_others_still_fail(monkeypatch):
    """A rollout miss is named 'not judged' with its reason and passes; a miss in any other phase still fails."""
    from types import SimpleNamespace

    import trainfit.watch.verdict as verdict
    from trainfit.accept.run import check_plan

    def judged(phase, state):
        return verdict.Judged(phase=phase, memory_field="allocated", planned_memory=1, measured_memory=2,
                              memory_error=1.0, planned_s=None, measured_s=None, time_error=None, verdict=state,
                              reason="")

    def check(rows):
        monkeypatch.setattr(verdict, "judge", lambda *a, **k: (rows, ""))
        monkeypatch.setattr(verdict, "table_lines", lambda *a, **k: [])
        w = SimpleNamespace(steps=[1], probe=None, memory_margin=0.1, time_margin=0.25, replan=lambda c: None,
                            finish=lambda: None, rows=lambda: [])
        return check_plan(SimpleNamespace(watch=w, loss_inputs=[]), None)

    ok = check([judged("rollout", "under"), judged("forward", "ok")])
    assert ok.status == "pass" and ok.evidence.startswith("plan held; not judged: rollout (the harness generates")
    bad = check([judged("rollout", "under"), judged("backward", "over")])
    assert bad.status == "fail" and bad.evidence.startswith("plan off: backward; not judged: rollout")
