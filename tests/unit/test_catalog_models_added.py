"""Catalog model entries added together: each one's parameter count against a published figure, and a default plan.

``PUBLISHED`` holds, per entry, a published total (and for MoE the active count) with where it was read and a
tolerance. Exact figures (keras-hub's preset ``params``) must match to the parameter; figures a model card states
to three significant digits get 1 %; the nominal size in a release's name or a README's size column (``70B``,
``1.1B``, ``12B``) gets 5 %, which is what rounding a size label to one or two digits allows. The meta-device
count of each entry equals transformers' (``tests/unit/test_param_counts.py`` covers every catalog id).
"""

import pytest

import trainfit
from trainfit.catalog.models import catalog_entry, from_catalog
from trainfit.errors import CardError
from trainfit.memory.params import active_params, param_breakdown

EXACT, CARD, NOMINAL = 0.0, 0.01, 0.05

KERAS_GEMMA = "github.com/keras-team/keras-hub keras_hub/src/models/gemma/gemma_presets.py @cf8818bc455638d605bc9905b45826abf008e9c1"
PADDLE_CARDS = "github.com/ZHUI/paddlenlp_model_readme {} @40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copy of the model card)"
FASTLLM = ("github.com/ztxz16/fastllm Qwen3-Coder-30B-A3B-Instruct/README.md @f8f04c33abb63f6cd4e45f9427a55949a8ebbb44"
           " (copy of the model card)")
PYTHIA = "github.com/EleutherAI/pythia README.md @a19eecb807ec2c79a39ebf18108816e6ffffc1d5 (Params column, embedding and unembedding included)"
KERAS_GEMMA3 = ("github.com/keras-team/keras-hub keras_hub/src/models/gemma3/gemma3_presets.py"
                " @46f3b4a000be58c092fe2f1acf87d2fb620aefd0")
KERAS_PHI3 = "github.com/keras-team/keras-hub keras_hub/src/models/phi3/phi3_presets.py @96b86859ae924ef50e779a4eb56a30d342c71192"
PHI3_MEDIUM_CARD = ("github.com/YinanWusoymilk/hf-readme training_and_application/readme_files/microsoft_Phi-3-medium-4k-instruct.md"
                    " @1ab39f24f8f9548593ac6304367f31ae3ff45178 (copy of the model card)")
DSV2_CARD = ("github.com/ZHUI/paddlenlp_model_readme deepseek-ai/DeepSeek-V2-Lite/index.md"
             " @0abc042b9d9525304d4e12e12ec7d7f3aaf48cc2 (copy of the model card)")
QWEN15_7B_INDEX = ("github.com/huggingface/transformers examples/pytorch/torchacc/qwen/Qwen1.5-7B/model.safetensors.index.json"
                   " @f092c38c0bf55916e1c78bcf0f800a7f8a54860b (the checkpoint's shard index)")

# id: (published total, tolerance, published active or None, where it was read)
PUBLISHED = {
    "meta-llama/Meta-Llama-3-70B": (70e9, NOMINAL, None, PADDLE_CARDS.format("meta-llama/Meta-Llama-3-70B/index.md") + ": 70B"),
    "mistralai/Mistral-Nemo-Base-2407": (12e9, NOMINAL, None, "the release's nominal size (Mistral NeMo 12B)"),
    "mistralai/Mistral-Small-24B-Instruct-2501": (24e9, NOMINAL, None, "the nominal size in the release's name"),
    "google/gemma-2-2b": (2_614_341_888, EXACT, None, KERAS_GEMMA + " gemma2_2b_en params"),
    "google/gemma-2-27b": (27_227_128_320, EXACT, None, KERAS_GEMMA + " gemma2_27b_en params"),
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": (
        1.1e9, NOMINAL, None, PADDLE_CARDS.format("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T/index.md") + ": a 1.1B Llama model"),
    "HuggingFaceTB/SmolLM2-135M": (135e6, NOMINAL, None, "the nominal size in the release's name"),
    "HuggingFaceTB/SmolLM2-360M": (360e6, NOMINAL, None, "the nominal size in the release's name"),
    "HuggingFaceTB/SmolLM2-1.7B": (1.7e9, NOMINAL, None, "the nominal size in the release's name"),
    "01-ai/Yi-1.5-6B": (6e9, NOMINAL, None, "the nominal size in the release's name"),
    "01-ai/Yi-1.5-34B": (34e9, NOMINAL, None, "the nominal size in the release's name"),
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": (30.5e9, CARD, 3.3e9, FASTLLM + ": 30.5B in total and 3.3B activated"),
    "Qwen/Qwen2.5-Coder-1.5B": (1.54e9, CARD, None, PADDLE_CARDS.format("Qwen/Qwen2.5-Coder-1.5B/index.md") + ": 1.54B"),
    "Qwen/Qwen2.5-Coder-3B": (3.09e9, CARD, None, PADDLE_CARDS.format("Qwen/Qwen2.5-Coder-3B/index.md") + ": 3.09B"),
    "Qwen/Qwen2.5-Coder-14B": (14.7e9, CARD, None, PADDLE_CARDS.format("Qwen/Qwen2.5-Coder-14B/index.md") + ": 14.7B"),
    "Qwen/Qwen2.5-Math-1.5B": (1.5e9, NOMINAL, None, "the nominal size in the release's name"),
    "Qwen/Qwen2-72B": (72e9, NOMINAL, None, PADDLE_CARDS.format("Qwen/Qwen2-72B/index.md") + ": #Params 72B"),
    "Qwen/Qwen1.5-MoE-A2.7B": (14.3e9, CARD, 2.7e9, PADDLE_CARDS.format("Qwen/Qwen1.5-MoE-A2.7B/index.md")
                               + ": 14.3B parameters in total and 2.7B activated"),
    "mistralai/Mistral-7B-v0.1": (7e9, NOMINAL, None, "the nominal size in the release's name"),
    "mistralai/Mistral-7B-Instruct-v0.2": (7e9, NOMINAL, None, "the nominal size in the release's name"),
    "deepseek-ai/deepseek-llm-7b-base": (7e9, NOMINAL, None, "the nominal size in the release's name"),
    "Qwen/Qwen2.5-1.5B-Instruct": (1.54e9, CARD, None, PADDLE_CARDS.format("Qwen/Qwen2.5-1.5B-Instruct/index.md") + ": 1.54B"),
    "Qwen/Qwen2.5-14B-Instruct": (14.7e9, CARD, None, PADDLE_CARDS.format("Qwen/Qwen2.5-14B-Instruct/index.md") + ": 14.7B"),
    "Qwen/Qwen2.5-72B-Instruct": (72.7e9, CARD, None, PADDLE_CARDS.format("Qwen/Qwen2.5-72B-Instruct/index.md") + ": 72.7B"),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": (8e9, NOMINAL, None, "the nominal size in the release's name"),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": (70e9, NOMINAL, None, "the nominal size in the release's name"),
    # its base Qwen2.5-14B's layout, whose instruct sibling's card gives 14.7B (the name's 14B is 5 % under)
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": (14.7e9, CARD, None,
                                                 PADDLE_CARDS.format("Qwen/Qwen2.5-14B-Instruct/index.md") + ": 14.7B"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": (32e9, NOMINAL, None, "the nominal size in the release's name"),
    "Qwen/Qwen2-0.5B": (0.5e9, NOMINAL, None, "the nominal size in the release's name"),
    "Qwen/Qwen2-1.5B": (1.5e9, NOMINAL, None, "the nominal size in the release's name"),
    "EleutherAI/pythia-70m": (70e6, NOMINAL, None, PYTHIA + ": 70M"),
    "EleutherAI/pythia-160m": (160e6, NOMINAL, None, PYTHIA + ": 160M"),
    "EleutherAI/pythia-410m": (410e6, NOMINAL, None, PYTHIA + ": 410M"),
    "EleutherAI/pythia-1b": (1e9, NOMINAL, None, PYTHIA + ": 1B"),
    "EleutherAI/pythia-1.4b": (1.4e9, NOMINAL, None, PYTHIA + ": 1.4B"),
    "EleutherAI/pythia-2.8b": (2.8e9, NOMINAL, None, PYTHIA + ": 2.8B"),
    "EleutherAI/pythia-6.9b": (6.9e9, NOMINAL, None, PYTHIA + ": 6.9B"),
    "EleutherAI/pythia-12b": (12e9, NOMINAL, None, PYTHIA + ": 12B"),
    # Mixtral 8x22B's release figures as tests/unit/test_mixtral_family.py cites them; the base keeps vocab 32000
    "mistralai/Mixtral-8x22B-v0.1": (141e9, CARD, 39e9, "mistral.ai/news/mixtral-8x22b (read 2026-12-03): 141B, 39B active"),
    "google/gemma-3-1b-it": (999_885_952, EXACT, None, KERAS_GEMMA3 + " gemma3_instruct_1b params"),
    "microsoft/Phi-3-medium-4k-instruct": (14e9, NOMINAL, None, PHI3_MEDIUM_CARD + ": 14B parameters"),
    "microsoft/Phi-3-mini-128k-instruct": (3_821_079_552, EXACT, None, KERAS_PHI3 + " phi3_mini_128k_instruct_en params"),
    "Qwen/Qwen1.5-7B": (15_442_649_088 // 2, EXACT, None, QWEN15_7B_INDEX + ": total_size 15,442,649,088 bytes of bf16"),
    # the card's active figures leave the input embedding out (test_deepseek_v2_active_counts_against_the_card)
    "deepseek-ai/DeepSeek-V2-Lite": (15.7e9, CARD, None, DSV2_CARD + ": 15.7B total parameters, of which 2.4B are activated"),
    "deepseek-ai/DeepSeek-V2": (236e9, CARD, None, DSV2_CARD + ": DeepSeek-V2 236B total, 21B activated"),
}

# entries whose sliding window the default card's 2,048 tokens reach: planned past it (SDPA's window mask,
# memory.attention.sdpa_window_masked); refused in one line only with context parallelism (plan.sliding_window_refusal)
WINDOWED = {"google/gemma-3-1b-it": 512, "microsoft/Phi-3-medium-4k-instruct": 2047}

# the card figures that separate a tied from an untied head (the embedding is 0.23-0.78B of these models)
NON_EMBEDDING = {
    "Qwen/Qwen2.5-Coder-1.5B": 1.31e9,
    "Qwen/Qwen2.5-Coder-3B": 2.77e9,
}


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_parameter_count_matches_the_published_figure(model_id):
    published, tol, active, _where = PUBLISHED[model_id]
    spec = from_catalog(model_id)
    total = param_breakdown(spec).total
    assert abs(total / published - 1) <= tol, f"{model_id}: {total:,} vs published {published:,.0f} (tolerance {tol:.0%})"
    if active is not None:
        assert abs(active_params(spec) / active - 1) <= 0.02, f"{model_id}: active {active_params(spec):,} vs {active:,.0f}"


@pytest.mark.parametrize("model_id", sorted(NON_EMBEDDING))
def test_tied_heads_give_the_cards_non_embedding_count(model_id):
    pb = param_breakdown(from_catalog(model_id))
    assert pb.lm_head == 0
    assert abs((pb.total - pb.embedding) / NON_EMBEDDING[model_id] - 1) <= CARD


def test_the_untied_coder_14b_is_larger_by_its_head():
    pb = param_breakdown(from_catalog("Qwen/Qwen2.5-Coder-14B"))
    assert pb.lm_head == pb.embedding == 152064 * 5120


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_default_plan_runs(model_id):
    p = trainfit.plan({"model": model_id})
    assert p.params_total == param_breakdown(from_catalog(model_id)).total
    assert p.step_seconds > 0 and p.peak.device > 0


@pytest.mark.parametrize("model_id", sorted(WINDOWED))
def test_windowed_families_plan_past_their_window_and_refuse_context_parallel_from_it(model_id):
    window = WINDOWED[model_id]
    cp = {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 2}, "parallel": {"context_parallel": 2}}
    with pytest.raises(CardError, match=f"reach {model_id}'s sliding_window {window} with") as err:
        trainfit.plan({"model": model_id, **cp})
    assert "\n" not in str(err.value)
    for seq_len in (window - 1, 2 * window):
        p = trainfit.plan({"model": model_id, "batch": {"seq_len": seq_len}})
        assert p.params_total == param_breakdown(from_catalog(model_id)).total
        assert p.step_seconds > 0 and p.peak.device > 0


@pytest.mark.parametrize(
    "alias",
    ["meta-llama/Meta-Llama-3-70B-Instruct", "google/gemma-2-2b-it", "google/gemma-2-27b-it",
     "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "HuggingFaceTB/SmolLM2-1.7B-Instruct",
     "Qwen/Qwen2.5-Coder-14B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct", "EleutherAI/pythia-1b-deduped",
     "mistralai/Mistral-7B-Instruct-v0.1", "Qwen/Qwen1.5-MoE-A2.7B-Chat"],
)
def test_instruct_and_deduped_variants_resolve_to_the_same_shapes(alias):
    assert catalog_entry(alias)["id"] in PUBLISHED


@pytest.mark.parametrize(("alias", "entry"), [("meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-1B"),
                                              ("meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.2-3B"),
                                              ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B"),
                                              ("google/gemma-2-9b-it", "google/gemma-2-9b"),
                                              ("mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-v0.3")])
def test_instruct_aliases_of_older_entries(alias, entry):
    assert catalog_entry(alias)["id"] == entry


@pytest.mark.parametrize("size", ["1.5B", "14B", "72B"])
def test_qwen25_instruct_differs_from_base_only_in_positions(size):
    base, inst = catalog_entry(f"Qwen/Qwen2.5-{size}")["config"], catalog_entry(f"Qwen/Qwen2.5-{size}-Instruct")["config"]
    assert inst["max_position_embeddings"] == 32768 != base["max_position_embeddings"]
    assert {k: v for k, v in inst.items() if k != "max_position_embeddings"} == {
        k: v for k, v in base.items() if k != "max_position_embeddings"}


@pytest.mark.parametrize("size", ["7b", "13b", "70b"])
def test_llama2_chat_resolves_to_the_base_entry(size):
    assert catalog_entry(f"meta-llama/Llama-2-{size}-chat-hf")["id"] == f"meta-llama/Llama-2-{size}-hf"


def test_mistral_v01_and_v02_differ_only_by_the_window():
    v01, v02 = from_catalog("mistralai/Mistral-7B-v0.1"), from_catalog("mistralai/Mistral-7B-Instruct-v0.2")
    assert v01.sliding_window == 4096 and v02.sliding_window is None
    assert param_breakdown(v01).total == param_breakdown(v02).total


def test_every_new_entry_cites_a_full_commit():
    import re

    for model_id in PUBLISHED:
        assert re.search(r" @[0-9a-f]{40}\b", catalog_entry(model_id)["source"]), model_id


def test_mixtral_8x22b_base_differs_from_instruct_only_in_the_vocabulary():
    base, inst = from_catalog("mistralai/Mixtral-8x22B-v0.1"), from_catalog("mistralai/Mixtral-8x22B-Instruct-v0.1")
    assert (base.vocab_size, inst.vocab_size) == (32000, 32768)
    assert param_breakdown(inst).total - param_breakdown(base).total == 2 * 768 * 6144


def test_phi3_mini_128k_has_the_4k_shapes_and_131072_positions():
    short, long = catalog_entry("microsoft/Phi-3-mini-4k-instruct")["config"], catalog_entry(
        "microsoft/Phi-3-mini-128k-instruct")["config"]
    assert long["max_position_embeddings"] == 131072 and short["max_position_embeddings"] == 4096
    assert param_breakdown(from_catalog("microsoft/Phi-3-mini-128k-instruct")).total == param_breakdown(
        from_catalog("microsoft/Phi-3-mini-4k-instruct")).total


@pytest.mark.parametrize(
    ("model_id", "card_active", "active", "embedding"),
    [("deepseek-ai/DeepSeek-V2-Lite", 2.4e9, 2_661_150_208, 102400 * 2048),
     ("deepseek-ai/DeepSeek-V2", 21e9, 21_375_800_320, 102400 * 5120)],
)
def test_deepseek_v2_active_counts_against_the_card(model_id, card_active, active, embedding):
    # active_params counts the input embedding row lookup's matrix; the card's figure does not. Without it the Lite's
    # 2,451,435,008 is 2.1 % over the card's two-digit 2.4B (10.9 % over with it) and the 236B's 20,851,512,320 is
    # 0.7 % under its 21B (1.8 % over with it)
    spec = from_catalog(model_id)
    pb = param_breakdown(spec)
    assert active_params(spec) == active and pb.embedding == pb.lm_head == embedding
    assert abs((active - embedding) / card_active - 1) <= NOMINAL


@pytest.mark.parametrize("alias", ["deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek-ai/DeepSeek-V2-Chat"])
def test_deepseek_v2_chat_models_resolve_to_the_base_shapes(alias):
    assert catalog_entry(alias)["id"] == alias.removesuffix("-Chat")


def test_deepseek_v2_lite_drops_query_compression_and_v2_keeps_it():
    lite, big = from_catalog("deepseek-ai/DeepSeek-V2-Lite"), from_catalog("deepseek-ai/DeepSeek-V2")
    assert lite.family == big.family == "deepseek_v2"
    assert (lite.mla.q_lora_rank, big.mla.q_lora_rank) == (0, 1536)
    assert (big.moe.n_group, big.moe.topk_group) == (8, 3) and (lite.moe.n_group, lite.moe.topk_group) == (1, 1)
