"""trainfit plan vs the fake-tensor trace for the RL passes: allocated peak of each phase within 2%.

What is compared (like with like):

* ``logprob`` (GRPO reference / old-policy log-probs): the plan's ``ref_logprob`` phase holds the
  whole trainer (actor weights, adapter, optimizer states) plus the reference's weights, the
  critic's and reward model's state and the rollout engine (outside ``allocated``). The traced
  process holds one model and runs the pass, so the planned figure is the phase's components
  ``weights + adapter_weights + logprob_pass`` (the actor's bf16 weights stand in for the
  reference's: same model, same bytes; for LoRA the pass runs on the adapter-disabled actor).
* ``value`` (PPO critic values): the traced process holds the critic (scalar head) only, so the
  planned figure is the planner's critic weights (``frozen_weights(critic_spec_of(...))``, which
  ``critic_state`` contains) plus the phase's ``value_pass`` component.
* ``dpo_step``: the traced process holds what the planned one holds (policy, optimizer states,
  the reference copy for scope full with a live reference): every phase's ``allocated`` as is.

The DPO step's logits follow TRL's row-wise bf16 log-softmax (``trainfit.plan.dpo_logits``), not the
SFT cross-entropy.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from trainfit.accuracy.grid import ARCHS, GridCase
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

TOLERANCE = 0.02
@dataclass(frozen=True, slots=True)
class RlCase:
    kind: str  # logprob | value | dpo
    arch: str
    scope: str = "full"
    micro_batch_size: int = 1
    seq_len: int = 512
    reference: str = "gpu"  # gpu | lora_disabled | precomputed (dpo)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.arch}-{self.scope}-b{self.micro_batch_size}-s{self.seq_len}-ref_{self.reference}"

    def card(self) -> dict:
        card = GridCase(self.arch, scope=self.scope, seq_len=self.seq_len, micro_batch_size=self.micro_batch_size).card()
        card["method"] = {"logprob": "grpo", "value": "ppo", "dpo": "dpo"}[self.kind]
        if self.kind == "dpo":
            card["roles"] = {"reference": self.reference}
        else:
            prompt = self.seq_len // 4
            card["rollout"] = {"prompt_len": prompt, "response_len": self.seq_len - prompt,
                               "logprob_micro_batch_size": self.micro_batch_size,
                               "num_generations": 4, "prompts_per_step": 4}
            card["roles"] = {"reference": self.reference, "kl_coef": 0.04}
        return card

    def request(self) -> TraceRequest:
        kind = {"logprob": "logprob", "value": "value", "dpo": "dpo_step"}[self.kind]
        # TRL GRPO's logits_to_keep: the completion's length (the card's response_len, seq_len - seq_len // 4)
        keep = self.seq_len - self.seq_len // 4 if self.kind == "logprob" else 0
        return TraceRequest(hf_config=ARCHS[self.arch], pass_kind=kind, scope=self.scope,
                            micro_batch_size=self.micro_batch_size, seq_len=self.seq_len, logits_to_keep=keep,
                            dpo_reference=self.kind == "dpo" and self.reference != "precomputed")


RL_GRID: tuple[RlCase, ...] = (
    RlCase("logprob", "llama", micro_batch_size=1, seq_len=512),
    RlCase("logprob", "llama", micro_batch_size=4, seq_len=2048),
    RlCase("logprob", "qwen3", micro_batch_size=4, seq_len=512),
    RlCase("logprob", "qwen3", micro_batch_size=1, seq_len=2048),
    RlCase("logprob", "qwen2", scope="lora", micro_batch_size=1, seq_len=2048, reference="lora_disabled"),
    RlCase("value", "llama", micro_batch_size=4, seq_len=512),
    RlCase("value", "qwen3", micro_batch_size=1, seq_len=2048),
    RlCase("value", "qwen2", micro_batch_size=4, seq_len=2048),
    RlCase("dpo", "llama", micro_batch_size=1, seq_len=512, reference="gpu"),
    RlCase("dpo", "qwen3", micro_batch_size=4, seq_len=512, reference="precomputed"),
    RlCase("dpo", "qwen2", scope="lora", micro_batch_size=1, seq_len=2048, reference="lora_disabled"),
)


def planned_phases(case: RlCase) -> dict[str, float]:
    """Bytes the planner gives for what the traced process holds, per traced phase."""
    card = load_card_dict(case.card())
    plan = make_plan(card)
    phases = {p.phase.value: p for p in plan.phases}
    if case.kind == "logprob":
        c = phases["ref_logprob"].components
        return {"logprob": c.get("weights", 0.0) + c.get("adapter_weights", 0.0) + c["logprob_pass"]}
    if case.kind == "value":
        from trainfit.methods.rl import critic_spec_of, frozen_weights

        critic_weights = frozen_weights(critic_spec_of(card, plan.spec), card, divisor=1)
        return {"value": critic_weights + phases["critic_value"].components["value_pass"]}
    return {name: p.tensor_bytes for name, p in phases.items() if name != "load"}


def _params():
    out = []
    for case in RL_GRID:
        phases = {"logprob": ("logprob",), "value": ("value",)}.get(case.kind)
        if phases is None:
            phases = (("ref_logprob",) if case.reference != "precomputed" else ()) + (
                "forward", "backward", "optimizer_step")
        for ph in phases:
            out.append(pytest.param(case, ph, id=f"{case.name}-{ph}"))
    return out


_TRACES: dict[str, object] = {}


def _traced(case: RlCase):
    if case.name not in _TRACES:
        _TRACES[case.name] = trace_step(case.request())
    return _TRACES[case.name]


@pytest.mark.trace
@pytest.mark.parametrize("case,phase", _params())
def test_rl_plan_matches_trace(case, phase):
    traced = _traced(case).phase(phase).peak_bytes
    planned = planned_phases(case)[phase]
    err = (planned - traced) / traced
    assert abs(err) <= TOLERANCE, (
        f"{phase}: plan {planned / 2**20:.3f} MiB, trace {traced / 2**20:.3f} MiB, error {err:+.2%}"
    )


def test_rl_grid_covers_the_required_axes():
    assert len(RL_GRID) >= 8
    assert len({c.arch for c in RL_GRID}) >= 3
    assert {c.kind for c in RL_GRID} == {"logprob", "value", "dpo"}
    for kind in ("logprob", "value"):
        assert {c.micro_batch_size for c in RL_GRID if c.kind == kind} == {1, 4}
        assert {c.seq_len for c in RL_GRID if c.kind == kind} == {512, 2048}
    dpo = [c for c in RL_GRID if c.kind == "dpo"]
    assert {c.reference for c in dpo} == {"gpu", "precomputed", "lora_disabled"}
    assert any(c.scope == "lora" and c.reference == "lora_disabled" for c in dpo)
