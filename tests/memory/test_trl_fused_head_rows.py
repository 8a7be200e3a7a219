"""TRL 1.16's fused lm_head (``add_fused_lm_head``) scores only the labelled rows on a Triton device and every position
elsewhere (trl/trainer/utils.py l.1640-1648: ``compact = _use_triton(hidden_states.device)``). Run on the installed TRL
with a tiny random Qwen2 (CPU): the rows handed to ``ChunkedLogProbFunction`` are the ones the plan counts
(``methods.roles.logit_positions``: ``response_len + 1`` positions kept, the last ``response_len`` scored, or every
one of the ``s - 1`` shifted positions with ``loss.triton: false``)."""

import pytest

torch = pytest.importorskip("torch")
tu = pytest.importorskip("trl.trainer.utils")

B, PROMPT, COMPLETION = 2, 24, 16
USE_TRITON = tu._use_triton


def _rows_scored(monkeypatch, *, compact: bool) -> int:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, vocab_size=128, max_position_embeddings=128)
    model = Qwen2ForCausalLM(cfg)
    tu.add_fused_lm_head(model, temperature=1.0)
    # compact: as on a cuda / xpu device with Triton; else the installed gate (False on this CPU)
    monkeypatch.setattr(tu, "_use_triton", (lambda device: True) if compact else USE_TRITON)
    seen = []
    real = tu._ChunkedLogProbFunction.apply
    monkeypatch.setattr(tu._ChunkedLogProbFunction, "apply", lambda hidden, *a: seen.append(hidden.shape[0])
                        or real(hidden, *a))
    ids = torch.randint(0, 128, (B, PROMPT + COMPLETION))
    mask = torch.ones_like(ids)
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-COMPLETION] = -100  # TRL 1.16 grpo_trainer.py l.1495-1496
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    assert out.log_probs.shape == (B, PROMPT + COMPLETION - 1)
    return seen[0]


def test_cpu_scores_every_position(monkeypatch):
    assert tu._use_triton(torch.device("cpu")) is False
    assert _rows_scored(monkeypatch, compact=False) == B * (PROMPT + COMPLETION - 1)


def test_triton_device_scores_the_completion(monkeypatch):
    from trainfit.cli.common import default_card_dict
    from trainfit.methods.roles import logit_positions
    from trainfit.spec.card import load_card_dict

    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B", preset="trl")
    d["rollout"] = {"prompts_per_step": 2, "num_generations": 2, "prompt_len": PROMPT, "response_len": COMPLETION}
    keep = logit_positions(load_card_dict(d), seq_len=PROMPT + COMPLETION)
    assert _rows_scored(monkeypatch, compact=True) == B * (keep - 1) == B * COMPLETION
    d["loss"] = {"chunked": True, "kernel": "trl", "triton": False}
    every = logit_positions(load_card_dict(d), seq_len=PROMPT + COMPLETION)
    assert _rows_scored(monkeypatch, compact=False) == B * (every - 1)
