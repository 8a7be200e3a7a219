"""transformers releases before 4.56 copy more in the SDPA path than v5 (``memory.attention.legacy_sdpa``), and
before 4.49 the causal-LM loss takes a shifted fp32 copy of the logits (``memory.logits.hf_loss_copies``).

Measured with the fake-tensor trace run under each release (CPU torch 2.13; transformers 4.52.4, 4.55.4 and
5.24.0 installed side by side; the trace's ``from_config(dtype=...)`` passed as ``torch_dtype`` for 4.x): a 4-layer
model, hidden 256, 8 heads (head_dim 32), b 4 x 512, SDPA, no checkpointing. q-sized tensor = 1 MiB. The traced
peak over 5.24.0's, MiB:

=========================  ==========  ==========
shape (KV heads)           full        LoRA (q, v)
=========================  ==========  ==========
Llama / Qwen2 / Mistral 2  +10.0       +6.0        4.52.4: (2 x 3/4 repeated k/v + o_proj's copied input) x 4
Llama 8 (MHA)              +4.0        0           4.52.4: o_proj's copied input only
Llama 1 (MQA)              +11.0       +7.0        4.52.4: 2 x 7/8 (``.contiguous()`` copies the expand) + 1
Llama 2                    +4.0        0           4.55.4: GQA kept (no mask), o_proj's copy only
=========================  ==========  ==========

The plan with ``software.transformers`` set reproduces every one of them to the byte (and 0 under checkpointing at
this size, where the peak is the step's end); these tests hold the plan to those figures without torch."""

import pytest

from trainfit.accuracy.grid import GridCase
from trainfit.memory.attention import HfSdpaCopies, legacy_sdpa
from trainfit.memory.logits import HfLossCopies, hf_loss_copies, hf_shifted_copy_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

MIB = 2**20
BASE = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 4096, "tie_word_embeddings": False}


@pytest.mark.parametrize(("pin", "expected"), [
    (None, HfSdpaCopies()),
    ("5.24.0", HfSdpaCopies()),
    ("4.56.0", HfSdpaCopies()),
    ("4.55.4", HfSdpaCopies(repeats_kv=False, contiguous=True)),
    ("4.54.1", HfSdpaCopies(repeats_kv=False, contiguous=True)),
    ("4.53.3", HfSdpaCopies(repeats_kv=True, contiguous=True)),
    ("==4.52.4", HfSdpaCopies(repeats_kv=True, contiguous=True, shared_float_mask=True)),
    ("4.48.0", HfSdpaCopies(repeats_kv=True, contiguous=True, shared_float_mask=True)),
    ("4.47.1", HfSdpaCopies(repeats_kv=True, shared_float_mask=True)),
    ("4.45.2", HfSdpaCopies(repeats_kv=True, shared_float_mask=True)),
    ("<4.54", HfSdpaCopies(repeats_kv=True, contiguous=False)),  # which side of 4.48 is unknown: no copy claimed
    ("main", HfSdpaCopies()),
])
def test_release_boundaries(pin, expected):
    assert legacy_sdpa(pin) == expected


def _peak(cfg: dict, *, scope: str, pin: str | None, attention: str = "sdpa", ckpt: bool = False) -> float:
    case = GridCase("legacy_sdpa", seq_len=512, micro_batch_size=4, scope=scope, attention=attention, ckpt=ckpt)
    card = case.card()
    card["model"] = {"config": cfg, "id": "legacy_sdpa"}
    if pin:
        card["software"] = {"transformers": pin}
    plan = make_plan(load_card_dict(card))
    return max(p.tensor_bytes for p in case.planned_phases(plan)) / MIB


@pytest.mark.parametrize(("kv", "pin", "full_mib", "lora_mib"), [
    (2, "4.52.4", 10.0, 6.0),
    (8, "4.52.4", 4.0, 0.0),
    (1, "4.52.4", 11.0, 7.0),
    (2, "4.55.4", 4.0, 0.0),
    (2, "4.56.0", 0.0, 0.0),
])
def test_plan_moves_by_the_traced_difference(kv, pin, full_mib, lora_mib):
    cfg = dict(BASE, num_key_value_heads=kv)
    for scope, mib in (("full", full_mib), ("lora", lora_mib)):
        moved = _peak(cfg, scope=scope, pin=pin) - _peak(cfg, scope=scope, pin=None)
        assert moved == pytest.approx(mib, abs=0.01), (scope, moved)


def test_eager_and_flash_are_unchanged():
    """The copies are ``sdpa_attention_forward``'s: eager attention repeats k/v in every release (already counted) and
    the flash path hands the kernel (b, s, heads, d) tensors without either copy."""
    for attention in ("eager", "flash"):
        assert _peak(BASE, scope="full", pin="4.52.4", attention=attention) == _peak(BASE, scope="full", pin=None,
                                                                                   attention=attention)


@pytest.mark.parametrize(("pin", "family", "expected"), [
    (None, "llama", HfLossCopies()),
    ("4.49.0", "llama", HfLossCopies()),
    ("4.48.0", "llama", HfLossCopies(shifted_copy=True, bf16_dropped=False)),
    ("4.46.0", "qwen2", HfLossCopies(shifted_copy=True, bf16_dropped=False)),
    ("4.45.2", "llama", HfLossCopies(shifted_copy=True, bf16_dropped=True)),
    ("4.47.1", "mistral", HfLossCopies(shifted_copy=True, bf16_dropped=True)),
    ("4.48.0", "mistral", HfLossCopies(shifted_copy=True, bf16_dropped=False)),
])
def test_loss_release_boundaries(pin, family, expected):
    assert hf_loss_copies(pin, family) == expected


@pytest.mark.parametrize(("pin", "traced_mib"), [("4.47.1", 31.86), ("4.45.2", 15.86)])
def test_shifted_copy_moves_the_forward_peak(pin, traced_mib):
    """The fake-tensor trace under each release (Llama GQA as above, vocab 4096, full training, no checkpointing):
    the forward's peak over 5.24.0's, less the 6 MiB of repeated k/v, is the loss's shifted fp32 copy (less the bf16
    logits 4.45's forward frees). The plan counts 4 x 511 x 4096 x 4 B (- 4 x 512 x 4096 x 2 B), within 0.1 MiB."""
    counted = hf_shifted_copy_bytes(micro_batch_size=4, seq_len=512, vocab_size=4096,
                                    copies=hf_loss_copies(pin, "llama")) / MIB
    assert counted == pytest.approx(traced_mib, abs=0.1)
    # and the planned forward phase moves by it plus the repeated k/v
    case = GridCase("legacy_sdpa", seq_len=512, micro_batch_size=4)

    def forward(p):
        card = case.card()
        card["model"] = {"config": BASE, "id": "legacy_sdpa"}
        if p:
            card["software"] = {"transformers": p}
        return {x.phase.value: x.tensor_bytes for x in case.planned_phases(make_plan(load_card_dict(card)))}["forward"]
    assert (forward(pin) - forward(None)) / MIB == pytest.approx(counted + 6.0, abs=0.01)


def test_copy_work_counts_each_copy_once():
    """Llama-3-8B shapes (q 4096, kv 1024, 32/8 heads), bf16: 4.52 repeats k and v (reads 1024, writes 4096 each)
    and copies q and the output; 4.55 copies q, k, v and the output; 4.47 repeats only; an MQA layer before 4.48
    keeps the expand view (no copy)."""
    from trainfit.compute.attention_time import legacy_sdpa_copy_work

    kw = {"q_dim": 4096, "kv_dim": 1024, "num_heads": 32, "num_kv_heads": 8}
    assert legacy_sdpa_copy_work(**kw, repeats_kv=True, contiguous=True) == (2 * 2 * 5120 + 2 * 2 * 2 * 4096, 4)
    assert legacy_sdpa_copy_work(**kw, repeats_kv=False, contiguous=True) == (2 * 2 * 2 * (4096 + 1024), 4)
    assert legacy_sdpa_copy_work(**kw, repeats_kv=True, contiguous=False) == (2 * 2 * 5120, 2)
    assert legacy_sdpa_copy_work(**dict(kw, kv_dim=128, num_kv_heads=1), repeats_kv=True, contiguous=False) == (0.0, 0)
    assert legacy_sdpa_copy_work(**kw, repeats_kv=False, contiguous=False) == (0.0, 0)


def test_step_time_adds_the_copies_and_nothing_unpinned():
    base = {"model": "meta-llama/Llama-3.1-8B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 4096}, "attention": "sdpa",
            # the checkpoint's re-entrancy is pinned: its default follows the transformers pin too (4.x: re-entrant,
            # plan.checkpointing), which is not what this test compares
            "loop": {"checkpoint_reentrant": False}}

    def step_s(pin, attention="sdpa"):
        card = dict(base, attention=attention)
        if pin:
            card["software"] = {"transformers": pin}
        return make_plan(load_card_dict(card)).time.total_s

    v5 = step_s(None)
    assert step_s("4.56.0") == v5
    assert v5 < step_s("4.47.1") < step_s("4.55.4") < step_s("4.52.4") < v5 * 1.02
    assert step_s("4.52.4", attention="flash") == step_s(None, attention="flash")


def test_before_4_53_the_windowed_layers_share_one_float_mask():
    """Mistral GQA, window 256, b 4 x 512, 4 layers, full training, no checkpointing. 5.24.0 (the plan and the trace
    agree, 227.26 MiB): each layer saves its own float copy of the bool mask (4 x 2 MiB). 4.52.4: one float (b, 1, s, s)
    mask for all (2 MiB) and o_proj's copied input (4 x 1 MiB): 2 MiB less. The trace under 4.52.4 reads 223.76 MiB,
    1.5 MiB under the plan: it passes no attention_mask, so its one mask is (1, 1, s, s) expanded, where a batch with
    one (the Trainer's collators) clones it to (b, 1, s, s), as the plan holds."""
    cfg = dict(BASE, model_type="mistral", sliding_window=256)
    assert _peak(cfg, scope="full", pin=None) == pytest.approx(227.26, abs=0.01)
    assert _peak(cfg, scope="full", pin="4.52.4") == pytest.approx(225.26, abs=0.01)
    assert _peak(cfg, scope="full", pin="4.53.3") == pytest.approx(227.26 + 4.0, abs=0.01)  # bool mask, o_proj copy


@pytest.mark.parametrize(("kv", "full_mib", "lora_mib"), [(2, 1.0, 1.0), (8, -8.0, -8.0)])
def test_phi3_fused_projection_under_4_52(kv, full_mib, lora_mib):
    """Phi-3's one qkv_proj (vocab 32064, otherwise the shapes above), 4 layers. The fake-tensor traces, 4.52.4 over
    5.24.0: GQA +1.00 MiB, full and LoRA (k and v repeated to every head, while v, now a copy, no longer keeps
    qkv_proj's output alive through its slice); MHA -8.00 MiB (``v.contiguous()`` copies v, and qkv_proj's whole output
    is freed). The plan moves by the same to the byte in all four (``activations._attention``'s fused branch)."""
    cfg = dict(BASE, model_type="phi3", vocab_size=32064, num_key_value_heads=kv)
    for scope, mib in (("full", full_mib), ("lora", lora_mib)):
        moved = _peak(cfg, scope=scope, pin="4.52.4") - _peak(cfg, scope=scope, pin=None)
        assert moved == pytest.approx(mib, abs=0.01), (scope, moved)


def _grpo_logits_gib(pin: str | None) -> float:
    card = {"model": "meta-llama/Llama-3.1-8B", "method": "grpo", "preset": "trl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "zero3"}, "batch": {"micro_batch_size": 2},
            "rollout": {"prompts_per_step": 16, "num_generations": 8, "prompt_len": 512, "response_len": 1024}}
    if pin:
        card["software"] = {"transformers": pin}
    plan = make_plan(load_card_dict(card))
    return next(p.components["logits"] for g in plan.groups for p in g.phases
                if str(p.phase) == "actor_forward") / 2**30


def test_rl_actor_takes_no_shifted_copy():
    """An RL actor calls the model without labels (its own log-probs): no shifted fp32 copy in any release; before 4.46
    the forward's own ``.float()`` frees the bf16 logits (2 B per logit less), from 4.46 v5's path. TRL's GRPO asks for
    the completion's ``logits_to_keep + 1`` positions only (``methods.roles.logit_positions``; the card's GPU runs the
    fused head's Triton path), and 4.45.2 slices before the upcast (models/llama/modeling_llama.py l.1214
    ``self.lm_head(hidden_states[:, -num_logits_to_keep:, :]).float()``): the dropped logits are those positions'."""
    base = _grpo_logits_gib(None)
    assert _grpo_logits_gib("4.47.1") == pytest.approx(base, abs=1e-9)
    dropped = 2 * 2 * 1025 * 128256 / 2**30  # b 2 x (1024 + 1) kept positions x vocab x 2 B
    assert _grpo_logits_gib("4.45.2") == pytest.approx(base - dropped, rel=1e-9)


def test_rl_copies_without_model_loss():
    assert hf_loss_copies("4.47.1", "llama", model_loss=False) == HfLossCopies()
    assert hf_loss_copies("4.45.2", "llama", model_loss=False) == HfLossCopies(shifted_copy=False, bf16_dropped=True)
    assert hf_shifted_copy_bytes(micro_batch_size=1, seq_len=4, vocab_size=8,
                                 copies=HfLossCopies(bf16_dropped=True)) == -2.0 * 4 * 8


def test_megatron_layers_take_no_transformers_copies():
    """A Megatron-Core card runs its own model with Transformer Engine attention and its vocab-parallel loss: a
    transformers pin changes nothing (``plan.terms.runs_hf_modelling_code``)."""
    def act(pin):
        card = {"model": "meta-llama/Llama-3.1-8B", "method": "sft",
                "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
                "parallel": {"strategy": "zero1", "tensor_parallel": 2, "tensor_parallel_impl": "megatron",
                             "gradient_checkpointing": False},
                "batch": {"micro_batch_size": 1, "seq_len": 4096}, "attention": "sdpa"}
        if pin:
            card["software"] = {"transformers": pin}
        plan = make_plan(load_card_dict(card))
        return [dict(p.components) for g in plan.groups for p in g.phases]
    assert act("4.52.4") == act(None)
    assert act("4.45.2") == act(None)
