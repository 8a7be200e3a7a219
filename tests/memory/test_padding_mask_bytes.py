"""The padding mask's own bytes (``batch.padding`` mask; ``memory.attention.sdpa_padding_masked``).

With an attention mask that holds zeros, transformers 5.24.0 builds one bool (b, 1, s, s) mask per forward
(``masking_utils.sdpa_mask``) and hands it to every layer; each SDPA call converts it to the query's dtype and saves
that copy for backward, and grouped-query k and v are repeated to every head (``use_gqa_in_sdpa`` needs no mask). The
fake-tensor trace (tests/trace/test_padding_mask_grid.py) measures these to the byte; the tests here hold the
estimator to the same arithmetic without torch."""

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.memory.activations import activation_bytes
from trainfit.memory.attention import legacy_sdpa, sdpa_bool_mask_bytes, sdpa_bool_masks, sdpa_padding_masked
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import TrainableSpec

LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 4096,
         "tie_word_embeddings": False}
B, S = 2, 1024


def _spec(**over):
    return spec_from_hf_config(dict(LLAMA, **over), name="padding-mask-test", source="test")


def _act(spec, *, padding_mask, attention=Attention.SDPA, **kw):
    return activation_bytes(spec, micro_batch_size=B, seq_len=S, attention=attention,
                            trainable=TrainableSpec(scope=Scope.FULL), padding_mask=padding_mask, **kw)


def test_every_sdpa_layer_saves_the_mask_copy_and_repeated_kv():
    """GQA (8 heads, 4 KV, head_dim 32): per layer the bf16 mask copy b·s²·2 and k, v widened from 4 to 8 heads."""
    spec = _spec()
    on, off = _act(spec, padding_mask=True), _act(spec, padding_mask=False)
    repeated = 2 * B * S * 2 * (spec.q_dim - spec.kv_dim)
    for a, b in zip(on.per_layer, off.per_layer):
        assert a - b == B * S * S * 2 + repeated
    assert on.embedding == off.embedding and on.checkpointed_per_layer == off.checkpointed_per_layer


def test_multi_head_layers_add_the_mask_alone():
    spec = _spec(num_key_value_heads=8)
    on, off = _act(spec, padding_mask=True), _act(spec, padding_mask=False)
    assert [a - b for a, b in zip(on.per_layer, off.per_layer)] == [B * S * S * 2] * 4


@pytest.mark.parametrize("attention", [Attention.EAGER, Attention.FLASH])
def test_eager_and_flash_take_no_sdpa_mask(attention):
    spec = _spec()
    assert not sdpa_padding_masked(spec, layer=0, attention=attention, padding_mask=True)
    assert _act(spec, padding_mask=True, attention=attention) == _act(spec, padding_mask=False, attention=attention)


def test_one_bool_mask_per_kind_for_checkpointed_layers():
    """One causal mask for a dense model; a model whose windowed layers take the sliding-window mask builds both."""
    dense = _spec()
    assert sdpa_bool_masks(dense, seq_len=S, attention=Attention.SDPA, padding_mask=False) == 0
    assert sdpa_bool_mask_bytes(dense, micro_batch_size=B, seq_len=S, attention=Attention.SDPA,
                                padding_mask=True) == B * S * S
    gemma3 = spec_from_hf_config({"model_type": "gemma3_text", "hidden_size": 256, "intermediate_size": 768,
                                  "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 4,
                                  "head_dim": 32, "vocab_size": 4096, "sliding_window": 4096,
                                  "tie_word_embeddings": True, "query_pre_attn_scalar": 64}, name="g3", source="test")
    # below the window no mask without padding; with it both kinds are built
    assert sdpa_bool_masks(gemma3, seq_len=S, attention=Attention.SDPA, padding_mask=False) == 0
    assert sdpa_bool_masks(gemma3, seq_len=S, attention=Attention.SDPA, padding_mask=True) == 2


def test_a_release_before_4_53_shares_one_float_mask():
    """transformers < 4.53 builds one float mask in ``_update_causal_mask`` and every layer saves that storage: once
    in the embedding's bytes, no per-layer copy (repeated k/v come from the release's own ``repeat_kv``)."""
    spec = _spec()
    legacy = legacy_sdpa("4.49.0")
    on, off = _act(spec, padding_mask=True, hf_sdpa=legacy), _act(spec, padding_mask=False, hf_sdpa=legacy)
    assert on.per_layer == off.per_layer
    assert on.embedding - off.embedding == B * S * S * 2
    assert sdpa_bool_mask_bytes(spec, micro_batch_size=B, seq_len=S, attention=Attention.SDPA, padding_mask=True,
                                copies=legacy) == B * S * S * 2


def _card(**batch):
    return load_card_dict({"model": {"config": LLAMA, "id": "llama"},
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                           "parallel": {"strategy": "single", "gradient_checkpointing": batch.pop("ckpt")},
                           "batch": {"micro_batch_size": B, "seq_len": S, **batch}})


@pytest.mark.parametrize("ckpt", [False, True])
def test_the_plan_moves_by_the_mask(ckpt):
    """The plan's backward peak under the padding mask: + 4 layers' saved copies and repeated k/v without
    checkpointing; + the bool mask under it (the recomputed layer's copy is not at the peak at this size)."""
    spec = _spec()
    on = {p.phase.value: p.tensor_bytes for p in make_plan(_card(padding="mask", ckpt=ckpt)).phases}
    off = {p.phase.value: p.tensor_bytes for p in make_plan(_card(ckpt=ckpt)).phases}
    per_layer = B * S * S * 2 + 2 * B * S * 2 * (spec.q_dim - spec.kv_dim)
    assert on["backward"] - off["backward"] == (B * S * S if ckpt else 4 * per_layer)
    assert on["optimizer_step"] == off["optimizer_step"]



def test_own_layout_families_take_no_padding_term():
    """GPT-NeoX and OPT keep their own attention model (``memory.arch_activations``): neither per-layer copies nor
    the shared bool mask of checkpointed layers (before, the bool mask alone was counted)."""
    from trainfit.catalog.models import from_catalog

    for name in ("EleutherAI/pythia-160m", "facebook/opt-1.3b"):
        spec = from_catalog(name)
        assert not any(sdpa_padding_masked(spec, layer=i, attention=Attention.SDPA, padding_mask=True)
                       for i in range(spec.num_layers))
        assert sdpa_bool_masks(spec, seq_len=S, attention=Attention.SDPA, padding_mask=True) == 0
        assert sdpa_bool_mask_bytes(spec, micro_batch_size=B, seq_len=S, attention=Attention.SDPA,
                                    padding_mask=True) == 0


def test_mask_kinds_one_rule_for_eager_and_sdpa():
    """One kind per windowed / full layer set: 4 full layers 1, a Gemma-3-like mix 2, no layer 0; eager's float masks
    follow the same rule (b 2 x 1024 x 1024 x 2 B = 4 MiB a kind)."""
    from trainfit.memory.attention import eager_mask_bytes, mask_kinds

    spec = _spec()
    assert mask_kinds(spec, layers=range(4)) == 1
    assert mask_kinds(spec, layers=[]) == 0
    assert eager_mask_bytes(spec, micro_batch_size=B, seq_len=S, eager=True) == 4_194_304


def test_a_tensor_parallel_checkpointed_card_holds_the_bool_mask():
    """The per-rank layout path (tensor parallel 2, checkpointed) holds the one bool (b, 1, s, s) mask the masked SDPA
    layers take, as the one-rank path does: b 2 x 1024 x 1024 x 1 B = 2,097,152 B more at the backward peak with the
    padding mask (the recomputed layer's copy not at the peak at this size)."""
    def card(**batch):
        return load_card_dict({"model": {"config": LLAMA, "id": "llama"},
                               "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2},
                               "parallel": {"strategy": "ddp", "tensor_parallel": 2, "gradient_checkpointing": True},
                               "batch": {"micro_batch_size": B, "seq_len": S, **batch}})

    on = {p.phase.value: p.tensor_bytes for p in make_plan(card(padding="mask")).phases}
    off = {p.phase.value: p.tensor_bytes for p in make_plan(card()).phases}
    assert on["backward"] - off["backward"] == 2_097_152
