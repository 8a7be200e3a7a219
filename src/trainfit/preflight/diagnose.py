"""`trainfit diagnose`: a symptom -> what to check first and which way to go (the seed's table);
a CUDA OOM message + a card -> which planned tensor failed and which one-variable fixes fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.preflight.oom import OomMessage, parse_oom
from trainfit.spec.card import RunCard, load_card_dict
from trainfit.units import MIB

ONE_VARIABLE_ADVICE = (
    "change one main variable at a time, and record peak memory, phase times and task results before and after"
)
MATCH_REL_TOLERANCE = 0.02
MATCH_ABS_TOLERANCE_BYTES = 12 * MIB
"""The allocator rounds large blocks to 2 MiB and the message prints two decimals (0.005 GiB ~ 5 MiB)."""


@dataclass(frozen=True, slots=True)
class Symptom:
    key: str
    name: str
    seed: str
    """The seed's wording (Chinese), for traceability."""
    check_first: tuple[str, ...]
    direction: str


SYMPTOMS: dict[str, Symptom] = {s.key: s for s in (
    Symptom("oom-load", "OOM while loading", "加载阶段 OOM", ("weight precision", "duplicate copies of the model", "actual sharding"),
            "solve load capacity first: the weights must fit before anything else is worth measuring"),
    Symptom("oom-backward", "OOM in backward", "反向阶段 OOM", ("micro-batch size", "trajectory/sequence length", "activations"),
            "reduce the micro-batch, then verify activation (gradient) checkpointing is really on"),
    Symptom("oom-generation", "OOM during generation", "生成阶段 OOM", ("candidate concurrency", "generation length", "KV cache"),
            "lower the number of sequences generated at once"),
    Symptom("low-gpu-util", "low GPU utilisation", "GPU 利用率低", ("communication", "tool execution", "CPU", "data loading"),
            "time each phase separately (generation, reward/tools, forward/backward, optimizer, sync)"),
    Symptom("identical-rewards", "identical rewards within a group", "同组奖励全相同", ("task difficulty", "the test runner", "the reward function"),
            "check whether the relative learning signal is missing: identical rewards give zero advantage"),
    Symptom("no-change-after-update", "generation unchanged after an update", "更新后生成无变化", ("weight sync", "adapter version"),
            "check what the generation side has actually loaded"),
    Symptom("wrong-after-resume", "wrong results after resume", "恢复后结果异常", ("optimizer", "scheduler", "random state", "data position"),
            "use the framework's full resume mechanism; a final adapter is for deployment and usually cannot resume exactly"),
)}


@dataclass(frozen=True, slots=True)
class Match:
    label: str
    phase: str | None
    bytes: float
    relative_error: float
    matches: bool


@dataclass(frozen=True, slots=True)
class Fix:
    change: str
    peak_before_bytes: float
    peak_after_bytes: float
    capacity_bytes: float


@dataclass(frozen=True, slots=True)
class Diagnosis:
    symptom: Symptom | None
    oom: OomMessage | None = None
    phase_hint: str | None = None
    matches: tuple[Match, ...] = ()
    fixes: tuple[Fix, ...] = ()
    notes: tuple[str, ...] = ()
    advice: str = ONE_VARIABLE_ADVICE
    extra: dict[str, Any] = field(default_factory=dict)


def card_notes(symptom: Symptom, card: RunCard) -> list[str]:
    """The card's own settings behind a symptom's 'check first' items."""
    g, b = card.generation, card.batch
    notes = {
        "oom-load": [f"weights stored as {card.weights_dtype.value}; strategy {card.parallel.strategy.value} on {card.world_size} GPU(s)"],
        "oom-backward": [f"micro_batch_size {b.micro_batch_size}, seq_len {b.seq_len}, gradient_checkpointing {card.parallel.gradient_checkpointing}"],
        "oom-generation": [f"{g.num_generations} candidates per prompt, max_completion_len {g.max_completion_len}, concurrency {g.concurrency or 'unset (engine default)'}"],
        "low-gpu-util": [f"{card.world_size} GPU(s), interconnect {card.hardware.interconnect or 'from the GPU catalog'}, task {card.task.kind.value}"],
        "identical-rewards": [f"{g.num_generations} candidates per prompt; with 1 there is no group to compare"] if g.num_generations < 2 else [],
        "wrong-after-resume": ["the card resumes from an adapter only: that cannot resume training exactly"]
        if card.checkpoint.resume == "adapter_only" else [f"checkpoint resume method: {card.checkpoint.resume}"],
    }
    return notes.get(symptom.key, [])


def _phase_hint(text: str) -> str | None:
    """Which phase a traceback died in, from the frames before the OOM message."""
    low = text.lower()
    for phase, needles in (
        ("generation", ("generate(", "vllm", "sampling", "rollout")),
        ("optimizer_step", ("optimizer.step", "optim/adamw", "_multi_tensor_adam", "_fused_adamw")),
        ("backward", (".backward(", "torch/autograd", "run_backward", "backward_")),
        ("load", ("from_pretrained", "load_state_dict", "_load_pretrained_model", "to(device")),
        ("forward", ("forward(", "cross_entropy", "log_softmax")),
    ):
        if any(n in low for n in needles):
            return phase
    return None


def candidates(card: RunCard, plan) -> list[tuple[str, str | None, float]]:
    """(label, phase, bytes) of single tensors and planned components an allocation could be."""
    spec, b, s = plan.spec, card.batch.micro_batch_size, card.batch.seq_len
    vocab = getattr(spec, "head_outputs", None) or spec.vocab_size
    tokens = b * s
    act = 4 if card.precision.compute.value == "fp32" else 2
    wbytes = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "nf4": 0.5}[card.weights_dtype.value]
    out: list[tuple[str, str | None, float]] = []
    if not card.loss.chunked:
        out += [
            ("fp32 logits of one micro-batch (4·b·s·V: upcast, log-softmax output or its gradient)", "backward", 4.0 * tokens * vocab),
            ("bf16 logits of one micro-batch (2·b·s·V: lm_head output or its gradient)", "forward", 2.0 * tokens * vocab),
        ]
    out += [
        ("one MLP intermediate activation (b·s·intermediate)", "forward", float(act * tokens * spec.intermediate_size)),
        ("one hidden-state tensor (b·s·hidden)", "forward", float(act * tokens * spec.hidden_size)),
        ("the embedding matrix in the weights dtype", "load", wbytes * spec.vocab_size * spec.hidden_size),
        ("the embedding matrix in fp32 (an optimizer state or master copy)", "optimizer_step", 4.0 * spec.vocab_size * spec.hidden_size),
    ]
    if card.attention.value == "eager":
        out.append(("eager attention scores of one layer (b·heads·s·s)", "forward", float(act * b * spec.num_attention_heads * s * s)))
    for ph in plan.phases:
        for name, value in ph.components.items():
            out.append((f"all of '{name}' in {ph.phase.value} (plan component)", ph.phase.value, float(value)))
    return [c for c in out if c[2] > 0]


def match_allocation(requested: float, card: RunCard, plan, *, phase_hint: str | None = None, top: int = 3) -> list[Match]:
    """The nearest candidates to a failed allocation, best first (within tolerance, hinted phase first)."""
    found = []
    for label, phase, size in candidates(card, plan):
        err = abs(size - requested) / requested
        ok = abs(size - requested) <= max(MATCH_REL_TOLERANCE * requested, MATCH_ABS_TOLERANCE_BYTES)
        found.append(Match(label, phase, size, err, ok))
    found.sort(key=lambda m: (not m.matches, m.phase != phase_hint if m.matches else False, m.relative_error))
    return found[:top]


def _variants(card: RunCard) -> list[tuple[str, dict[str, Any]]]:
    """One-variable changes worth re-planning."""
    b, p = card.batch, card.parallel
    out = []
    if b.micro_batch_size > 1:
        half = b.micro_batch_size // 2
        ga = b.grad_accum * b.micro_batch_size // half
        out.append((f"batch.micro_batch_size {b.micro_batch_size} -> {half} (grad_accum {b.grad_accum} -> {ga} keeps the global batch)",
                    {"batch.micro_batch_size": half, "batch.grad_accum": ga}))
    if not p.gradient_checkpointing:
        out.append(("parallel.gradient_checkpointing -> true", {"parallel.gradient_checkpointing": True}))
    if not card.loss.chunked:
        out.append(("loss.chunked -> true (fused linear cross-entropy, no full logits)", {"loss.chunked": True}))
    if card.attention.value == "eager":
        out.append(("attention -> flash", {"attention": "flash"}))
    if card.scope.value == "full":
        out.append(("scope -> lora", {"scope": "lora"}))
    elif card.scope.value == "lora":
        out.append(("scope -> qlora", {"scope": "qlora", "precision.weights": None}))
    if card.world_size > 1 and p.strategy.value in ("single", "ddp", "zero1", "zero2", "fsdp_grad_op"):
        out.append((f"parallel.strategy {p.strategy.value} -> fsdp (shard weights too)", {"parallel.strategy": "fsdp"}))
    if p.offload.value == "none":
        out.append(("parallel.offload -> optimizer", {"parallel.offload": "optimizer"}))
    elif p.offload.value == "optimizer":
        out.append(("parallel.offload -> params_and_optimizer", {"parallel.offload": "params_and_optimizer"}))
    if card.precision.optimizer.value == "adamw":
        out.append(("precision.optimizer -> adamw_8bit", {"precision.optimizer": "adamw_8bit"}))
    return out


def confirmed_fixes(card: RunCard, plan) -> list[Fix]:
    """Re-plan the card once per variant; keep only those the planner says fit."""
    from trainfit.plan import make_plan
    from trainfit.preflight.record import card_to_dict

    fixes = []
    for change, patch in _variants(card):
        data = card_to_dict(card)
        for dotted, value in patch.items():
            node = data
            *parents, last = dotted.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        try:
            new = make_plan(load_card_dict(data))
        except (TrainfitError, ValueError):
            continue
        if new.fits:
            fixes.append(Fix(change, plan.peak.device, new.peak.device, new.capacity_bytes))
    return fixes


def diagnose_symptom(key: str, card: RunCard | None = None) -> Diagnosis:
    if key not in SYMPTOMS:
        raise TrainfitError(f"diagnose: unknown symptom '{key}'; allowed: {', '.join(SYMPTOMS)}")
    symptom = SYMPTOMS[key]
    notes: list[str] = card_notes(symptom, card) if card is not None else []
    fixes: list[Fix] = []
    if card is not None and key in ("oom-load", "oom-backward"):
        from trainfit.plan import make_plan

        plan = make_plan(card)
        fixes = confirmed_fixes(card, plan)
        notes.append(_plan_note(plan))
    return Diagnosis(symptom, fixes=tuple(fixes), notes=tuple(notes))


def _plan_note(plan) -> str:
    peak = plan.peak
    verdict = "fits" if plan.fits else "does not fit"
    return f"plan: peak {peak.device / 2**30:.2f} GiB in {peak.phase.value} of {plan.capacity_bytes / 2**30:.2f} GiB: {verdict}"


_SYMPTOM_OF_PHASE = {"load": "oom-load", "generation": "oom-generation", "backward": "oom-backward", "forward": "oom-backward"}


def diagnose_log(text: str, card: RunCard | None = None, *, source: str = "the log") -> Diagnosis:
    """Diagnose the last OOM message in ``text``. TrainfitError when there is none."""
    messages = parse_oom(text)
    if not messages:
        raise TrainfitError(f"diagnose: no CUDA/HIP out-of-memory message in {source}")
    oom = messages[-1]
    hint = _phase_hint(text[max(0, oom.start - 6000) : oom.start]) if oom.start else None
    symptom = SYMPTOMS.get(_SYMPTOM_OF_PHASE.get(hint or "", ""), None)
    notes = _message_notes(oom)
    matches: list[Match] = []
    fixes: list[Fix] = []
    if card is not None:
        from trainfit.plan import make_plan

        plan = make_plan(card)
        notes.append(_plan_note(plan))
        if oom.total_bytes and abs(oom.total_bytes - plan.gpu.usable_memory_bytes) > 0.05 * oom.total_bytes:
            notes.append(
                f"the log's GPU has {oom.total_bytes / 2**30:.2f} GiB but the card plans for "
                f"{plan.gpu.name} ({plan.gpu.usable_memory_bytes / 2**30:.2f} GiB): is this the card's run?"
            )
        matches = match_allocation(oom.requested_bytes, card, plan, phase_hint=hint)
        fixes = confirmed_fixes(card, plan)
        if symptom is not None:
            notes += card_notes(symptom, card)
    return Diagnosis(symptom, oom=oom, phase_hint=hint, matches=tuple(matches), fixes=tuple(fixes), notes=tuple(notes),
                     extra={"messages_found": len(messages)})


def _message_notes(oom: OomMessage) -> list[str]:
    g = lambda x: f"{x / 2**30:.2f} GiB"  # noqa: E731
    notes = []
    if oom.other_processes_bytes:
        notes.append(f"other processes hold {g(oom.other_processes_bytes)} on GPU {oom.gpu_index}: a colocated engine or a stale job")
    frag = oom.fragmentation_bytes
    if frag is not None and frag >= oom.requested_bytes:
        notes.append(f"{g(frag)} reserved but unallocated >= the request: fragmentation; try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    if oom.total_bytes and oom.requested_bytes > oom.total_bytes:
        notes.append("the single request is larger than the whole GPU: shrink that tensor (batch, length, chunking), no setting frees enough")
    return notes
