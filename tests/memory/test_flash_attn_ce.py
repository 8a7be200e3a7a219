"""flash-attn's cross-entropy (``loss.kernel: flash_attn``): closed form, allocation order, replay, time, card.

flash-attn's loss is a Triton kernel (flash_attn/ops/triton/cross_entropy.py @0251105a2fb1), which neither the CPU
nor fake tensors can run. The test replays its allocation pattern by hand instead: ``_FlashCE`` below makes exactly
the tensors ``CrossEntropyLoss.forward`` / ``backward`` make (three fp32 per-row outputs, ``save_for_backward(logits,
lse, labels)``, ``dlogits = logits if inplace_backward else torch.empty_like(logits)``) and runs no kernel, under
FakeTensorMode with the trace's ``FastTracker``. This checks the byte terms against that order, not against the
kernel on a GPU."""

from __future__ import annotations

import pytest
from replay_inputs import recorded_plan, replay_gap

from trainfit.catalog.models import resolve_model
from trainfit.compute.inventory import (
    FLASH_CE_BACKWARD_BYTES,
    FLASH_CE_FORWARD_BYTES,
    LOSS_BACKWARD_BYTES,
    LOSS_FORWARD_BYTES,
    step_inventory,
)
from trainfit.memory.logits import FLASH_CE_ROW_SAVED_BYTES, flash_attn_ce_bytes, logits_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import RunCard

ROWS, VOCAB, HIDDEN = 256, 32768, 64
E = ROWS * VOCAB


def test_closed_form_per_logit():
    """2 B per logit at the forward peak and after it, 4 B at the start of backward (2 B in place); the
    kept-output variant leaves the saved logits to ``kept_output``."""
    b = flash_attn_ce_bytes(tokens=ROWS, vocab_size=VOCAB)
    assert b.forward_peak == 2 * E + 12 * ROWS
    assert b.retained == 2 * E + FLASH_CE_ROW_SAVED_BYTES * ROWS
    assert b.backward_peak == 4 * E + 4 * ROWS
    assert flash_attn_ce_bytes(tokens=ROWS, vocab_size=VOCAB, inplace_backward=True).backward_peak == 2 * E + 4 * ROWS
    kept = flash_attn_ce_bytes(tokens=ROWS, vocab_size=VOCAB, logits_kept=True)
    assert (kept.retained, kept.backward_peak) == (4 * ROWS, 2 * E + 4 * ROWS)
    eager = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN)
    assert (eager.forward_peak, eager.backward_peak) == (10 * E, 12 * E)
    routed = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, kernel="flash_attn")
    assert routed == b
    softcap = logits_bytes(micro_batch_size=1, seq_len=ROWS, vocab_size=VOCAB, hidden_size=HIDDEN, kernel="flash_attn",
                           softcap_bytes_per_logit=2)
    assert softcap.backward_peak - b.backward_peak == 2 * E


def _flash_ce_function(torch):
    """An autograd function with the tensors of flash-attn's triton cross-entropy
    (flash_attn.ops.triton.cross_entropy: ``CrossEntropyLoss`` / ``cross_entropy_loss``), no kernel: fp32 losses,
    lse and z-losses per row, the logits saved, and the logits' gradient written into them when
    ``inplace_backward``."""

    class _FlashCE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels, inplace_backward):
            n_rows, _ = logits.shape
            losses = torch.empty(n_rows, dtype=torch.float, device=logits.device)
            lse = torch.empty(n_rows, dtype=torch.float, device=logits.device)
            z_losses = torch.empty(n_rows, dtype=torch.float, device=logits.device)
            ctx.save_for_backward(logits, lse, labels)
            ctx.mark_non_differentiable(z_losses)
            ctx.inplace_backward = inplace_backward
            return losses, z_losses

        @staticmethod
        def backward(ctx, grad_losses, grad_z_losses):
            logits, _lse, _labels = ctx.saved_tensors
            dlogits = logits if ctx.inplace_backward else torch.empty_like(logits)
            return dlogits, None, None

    return _FlashCE


def _emulated_step(*, inplace: bool, kept: bool) -> tuple[int, int, int, int]:
    """(base, forward peak, live after forward, backward peak) bytes of lm_head + llm-foundry's loss with the
    emulated flash-attn function, hidden trained, the head frozen."""
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from trainfit.trace.tracker import FastTracker

    _FlashCE = _flash_ce_function(torch)

    def loss_fn(logits, targets):  # flash_attn.losses.cross_entropy.CrossEntropyLoss(reduction='none') + foundry's mean
        losses, _z = _FlashCE.apply(logits.view(-1, logits.size(-1)), targets.view(-1), inplace)
        return losses.sum() / (targets != -100).sum()

    with FakeTensorMode():
        hidden = torch.empty(1, ROWS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
        weight = torch.empty(VOCAB, HIDDEN, dtype=torch.bfloat16)
        targets = torch.zeros(1, ROWS, dtype=torch.long)
        tr = FastTracker()
        tr.add_existing(hidden, weight, targets)
        with tr:
            base = tr.current
            with tr.phase("forward"):
                out = {"logits": torch.nn.functional.linear(hidden, weight)}
                loss = loss_fn(out["logits"], targets)
                if not kept:
                    out.clear()
            after = tr.current
            with tr.phase("backward"):
                loss.backward()
        return base, tr.phases["forward"].peak_bytes, after, tr.phases["backward"].peak_bytes


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("kept", [False, True])
def test_emulated_allocation_order_matches_the_terms(inplace, kept):
    """The byte terms against the hand-replayed allocation order (module doc), to within the per-row
    temporaries of the mean (a bool per row, scalars) and hidden's gradient."""
    base, fwd, after, bwd = _emulated_step(inplace=inplace, kept=kept)
    b = flash_attn_ce_bytes(tokens=ROWS, vocab_size=VOCAB, inplace_backward=inplace, logits_kept=kept)
    kept_output = 2 * E if kept else 0
    slack = 2 * ROWS + 2 * ROWS * HIDDEN * 2 + 4096
    assert 0 <= fwd - base - b.forward_peak <= slack
    assert 0 <= after - base - (b.retained + kept_output) <= slack
    assert 0 <= bwd - base - (b.backward_peak + kept_output) <= slack


def _card(**loss) -> RunCard:
    return RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                                   "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": loss})


def test_plan_peak_and_replay():
    """A flash_attn card plans 8 B per logit less than the eager loss at the start of backward (12 -> 4), 10 in
    place; its replayed allocation sequence (``alloc_sequence``, flash-attn's order) reaches the planned allocated
    peak to within 0.2% (the replay's op-by-op layers; the eager card's: 0.003%)."""
    e = 2 * 2048 * 151936
    peaks = {}
    for name, loss in (("eager", {}), ("flash", {"kernel": "flash_attn"}),
                       ("inplace", {"kernel": "flash_attn", "inplace_backward": True})):
        plan, rec = recorded_plan(_card(**loss))
        bwd = next(p for p in plan.phases if p.phase.value == "backward")
        peaks[name] = bwd.components["logits"]
        replayed, top = replay_gap(plan, rec)
        assert replayed == pytest.approx(top, rel=2e-3)
    assert peaks["eager"] - peaks["flash"] == pytest.approx(8 * e, rel=1e-3)
    assert peaks["flash"] == pytest.approx(4 * e, rel=1e-3)


def test_time_inventory_reads_the_kernel():
    """The head's memory traffic: 2 / 4 B per logit instead of 14 / 22.5."""
    spec = resolve_model("Qwen/Qwen3-0.6B")
    t = 2 * 2048
    eager = step_inventory(spec, micro_batch_size=2, seq_len=2048)
    fused = step_inventory(spec, micro_batch_size=2, seq_len=2048, fused_cross_entropy=True)
    v = spec.vocab_size
    assert eager.head_forward.memory_bytes - fused.head_forward.memory_bytes == pytest.approx(
        (LOSS_FORWARD_BYTES - FLASH_CE_FORWARD_BYTES) * t * v)
    assert eager.head_backward.memory_bytes - fused.head_backward.memory_bytes == pytest.approx(
        (LOSS_BACKWARD_BYTES - FLASH_CE_BACKWARD_BYTES) * t * v)
    assert make_plan(_card(kernel="flash_attn")).step_seconds < make_plan(_card()).step_seconds


@pytest.mark.parametrize(("data", "message"), [
    ({"loss": {"kernel": "flash_attn", "chunked": True}},
     ("loss.kernel: 'flash_attn' scores the full logits (loss.chunked false); allowed with loss.chunked true: liger,"
      " trl, prime_rl, torchtune")),
    ({"loss": {"inplace_backward": True}},
     "loss.inplace_backward: only read with loss.kernel flash_attn (kernel is 'liger'); allowed with it: false"),
    ({"method": "dpo", "loss": {"kernel": "flash_attn"}},
     ("loss.kernel: flash_attn is a cross-entropy over the labels, read for method sft (and ppo/grpo: verl's actor"
      " log-probs); allowed for dpo: liger,"
      " trl, prime_rl, torchtune")),
    ({"hardware": {"gpus_per_node": 2}, "parallel": {"tensor_parallel": 2}, "loss": {"kernel": "flash_attn"}},
     ("loss.kernel: flash_attn over a vocabulary split by tensor parallel (its process_group path) is not"
      " modelled; allowed with it: parallel.tensor_parallel 1")),
])
def test_refused_in_one_line(data, message):
    with pytest.raises(ValueError) as err:
        RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", **data})
    assert message in str(err.value)


def test_chunked_fix_and_export_note():
    """The preflight's chunked-loss fix switches a flash_attn card to Liger's kernel (a valid card); every export
    says it does not write the kernel."""
    from trainfit.export import export
    from trainfit.preflight.diagnose import _variants

    card = _card(kernel="flash_attn", inplace_backward=True)
    (_, patch), = [v for v in _variants(card) if v[0].startswith("loss.chunked")]
    assert patch == {"loss.chunked": True, "loss.kernel": "liger", "loss.inplace_backward": False,
                     "loss.temperature_copy": False}
    data = card.model_dump(mode="json", exclude_unset=True)
    data["loss"] = {k.split(".")[1]: v for k, v in patch.items()}
    assert RunCard.model_validate(data).loss.chunked
    notes = export(card, "trl").notes
    assert any(n.startswith("loss.kernel flash_attn") and "trl has no switch" in n for n in notes)
    assert not any(n.startswith("loss.kernel") for n in export(_card(), "trl").notes)


def _verl_actor_step(*, inplace: bool, copy: bool = False) -> tuple[int, int, int, int]:
    """(base, forward peak, live after forward, backward peak) bytes of lm_head + verl's remove-padding actor
    log-probs (volcengine/verl verl/workers/actor/dp_actor.py l.110-122 @e0d035cd4a6a5c29835516a58d78710a28e73b18:
    ``output.logits.squeeze(0)``, ``div_(temperature)``, ``logprobs_from_logits``) with the emulated kernel, the head
    trained, a policy loss that sums the log-probs. ``copy``: the engine workers' division into a copy (verl-project/verl
    verl/workers/engine/fsdp/transformer_impl.py l.1343-1352 @bf48903d93e4618531d3bbae96551a889007dd8b, the model
    output bound until ``forward_step`` returns)."""
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from trainfit.trace.tracker import FastTracker

    _FlashCE = _flash_ce_function(torch)

    def forward_micro_batch(hidden, weight, labels):
        output = {"logits": torch.nn.functional.linear(hidden, weight)}  # (1, total_nnz, vocab)
        logits_rmpad = output["logits"].squeeze(0)
        if copy:
            temperature_rmpad = torch.full((ROWS,), 0.7, dtype=torch.float32)
            logits_rmpad = logits_rmpad / temperature_rmpad.clamp(min=1e-8).unsqueeze(-1).to(logits_rmpad.dtype)
        else:
            logits_rmpad.div_(0.7)
        rows = logits_rmpad.reshape(-1, logits_rmpad.shape[-1])  # logprobs_from_logits
        return -_FlashCE.apply(rows, labels.reshape(-1), inplace)[0]

    with FakeTensorMode():
        hidden = torch.empty(1, ROWS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
        weight = torch.empty(VOCAB, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
        labels = torch.zeros(1, ROWS, dtype=torch.long)
        tr = FastTracker()
        tr.add_existing(hidden, weight, labels)
        with tr:
            base = tr.current
            with tr.phase("forward"):
                loss = -forward_micro_batch(hidden, weight, labels).sum()
            after = tr.current
            with tr.phase("backward"):
                loss.backward()
        return base, tr.phases["forward"].peak_bytes, after, tr.phases["backward"].peak_bytes


@pytest.mark.parametrize("inplace", [False, True])
def test_verl_actor_emulated_allocation_order_matches_the_terms(inplace):
    """verl's actor: 2 B per logit through the forward, 8 B at the start of backward (``CopySlices`` of the in-place
    division of the squeezed view) whatever ``inplace_backward`` is; within the per-row temporaries, hidden's and
    the head's gradients."""
    from trainfit.memory.logits import verl_actor_logprob_bytes

    base, fwd, after, bwd = _verl_actor_step(inplace=inplace)
    b = verl_actor_logprob_bytes(tokens=ROWS, vocab_size=VOCAB, inplace_backward=inplace)
    assert b.backward_peak == 8 * E
    slack = 2 * ROWS + 2 * ROWS * HIDDEN * 2 + 2 * VOCAB * HIDDEN + 4096
    assert 0 <= fwd - base - b.forward_peak <= slack
    assert 0 <= after - base - b.retained <= slack
    assert 0 <= bwd - base - b.backward_peak <= slack


def _rl_card(**loss) -> RunCard:
    return RunCard.model_validate({
        "model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "full", "preset": "verl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}, "batch": {"micro_batch_size": 1},
        "rollout": {"prompt_len": 512, "response_len": 1536, "max_tokens_per_micro_batch": 8192}, "loss": loss})


def test_rl_card_plans_verl_actor_log_probs():
    """A GRPO card with loss.kernel flash_attn: the update's logits term is verl's (8 B per logit at the start of
    backward, 2 B in forward) and the log-prob passes hold the bf16 logits and three fp32 per-row outputs; a card
    without the field plans the eager terms as before."""
    from trainfit.memory.logits import verl_logprob_pass_bytes

    flash, eager = make_plan(_rl_card(kernel="flash_attn", inplace_backward=True)), make_plan(_rl_card())
    v = flash.spec.vocab_size

    def comp(plan, phase, name):
        return next(p for g in plan.groups for p in g.phases if p.phase.value == phase).components[name]

    fwd, bwd = comp(flash, "actor_forward", "logits"), comp(flash, "actor_backward", "logits")
    tokens = round(fwd / (2 * v))
    assert fwd == pytest.approx(2 * tokens * v + 12 * tokens)
    assert bwd == pytest.approx(8 * tokens * v)
    assert comp(eager, "actor_backward", "logits") == pytest.approx(12 * tokens * v)
    lp = comp(flash, "old_logprob", "logprob_pass")
    assert lp >= verl_logprob_pass_bytes(tokens=tokens, vocab_size=v)
    assert lp < comp(eager, "old_logprob", "logprob_pass")


@pytest.mark.parametrize("inplace", [False, True])
def test_verl_engine_temperature_copy_matches_the_terms(inplace):
    """verl's engine workers from 51504d84: 4 B per logit in forward (the undivided logits and the copy) and at the
    start of backward (the kernel's gradient and the division's), 2 B after the forward."""
    from trainfit.memory.logits import verl_actor_logprob_bytes

    base, fwd, after, bwd = _verl_actor_step(inplace=inplace, copy=True)
    b = verl_actor_logprob_bytes(tokens=ROWS, vocab_size=VOCAB, inplace_backward=inplace, temperature_copy=True)
    assert b.forward_peak == 4 * E + 12 * ROWS
    slack = 2 * ROWS + 2 * ROWS * HIDDEN * 2 + 2 * VOCAB * HIDDEN + 4096
    assert 0 <= fwd - base - b.forward_peak <= slack
    assert 0 <= after - base - b.retained <= slack
    assert 0 <= bwd - base - b.backward_peak <= slack


def test_temperature_copy_plans_and_refuses():
    """The copy variant plans 4 B per logit at the start of backward (8 in place) and 4 B in a no-grad pass; the
    field is refused without the kernel and for sft."""
    flash = make_plan(_rl_card(kernel="flash_attn", inplace_backward=True))
    copy = make_plan(_rl_card(kernel="flash_attn", inplace_backward=True, temperature_copy=True))

    def comp(plan, phase, name):
        return next(p for g in plan.groups for p in g.phases if p.phase.value == phase).components[name]

    assert comp(copy, "actor_backward", "logits") == pytest.approx(comp(flash, "actor_backward", "logits") / 2)
    assert comp(copy, "actor_forward", "logits") > comp(flash, "actor_forward", "logits")
    assert comp(copy, "old_logprob", "logprob_pass") >= comp(flash, "old_logprob", "logprob_pass")
    with pytest.raises(ValueError, match="loss.temperature_copy: only read with loss.kernel flash_attn"):
        _rl_card(temperature_copy=True)
    with pytest.raises(ValueError, match="loss.temperature_copy: verl's actor division"):
        _card(kernel="flash_attn", temperature_copy=True)


def test_rl_log_prob_passes_time_the_kernel():
    """The no-grad log-prob passes charge the kernel's bytes (2 B per logit instead of the eager loss's 14)."""
    flash, eager = make_plan(_rl_card(kernel="flash_attn", inplace_backward=True)), make_plan(_rl_card())
    assert flash.time_parts["old_logprob"] < eager.time_parts["old_logprob"]
