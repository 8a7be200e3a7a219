"""A reward-model plan counts the model it trains: a sequence-classification model drops ``lm_head`` and adds a
``hidden x num_labels`` score head with no bias (transformers ``GenericForSequenceClassification.__init__``:
``self.score = nn.Linear(config.hidden_size, self.num_labels, bias=False)``, huggingface/transformers
src/transformers/modeling_layers.py @9f84789d9a6a13ce7ddf2e57a940db5bb1ea4c50 l.105; ``Qwen3ForSequenceClassification``
is ``GenericForSequenceClassification`` with the Qwen3 base, src/transformers/models/qwen3/modeling_qwen3.py
@000c33fdfde12e1ffafbfcdb3c926df5727a00b6). Parameters, checkpoint, host RAM and the per-GPU weights agree."""

from __future__ import annotations

from trainfit.plan import make_plan
from trainfit.preflight.checkpoint import checkpoint_sizes
from trainfit.spec.card import RunCard

QWEN3_8B_CAUSAL = 8_190_735_360  # Qwen3-8B with its untied lm_head
LM_HEAD = 151_936 * 4_096  # vocab x hidden = 622,329,856
SCORE_HEAD = 4_096 * 1  # hidden x num_labels (1), bias=False
QWEN3_8B_RM = QWEN3_8B_CAUSAL - LM_HEAD + SCORE_HEAD  # 7,568,409,600


def _card(method: str) -> RunCard:
    return RunCard.model_validate({"model": "Qwen/Qwen3-8B", "method": method, "scope": "full",
                                   "hardware": {"gpu": "a100-40gb", "gpus_per_node": 8, "nodes": 1}})


def test_rm_params_are_the_sequence_classification_model():
    plan = make_plan(_card("rm"))
    assert QWEN3_8B_RM == 7_568_409_600
    assert plan.params_total == QWEN3_8B_RM
    assert plan.params_trainable == QWEN3_8B_RM
    assert plan.spec.head_outputs == 1


def test_rm_checkpoint_and_host_load_count_the_same_model():
    card = _card("rm")
    plan = make_plan(card)
    w_bytes = 2  # bf16 weights
    assert checkpoint_sizes(card, plan).weights_only_bytes == QWEN3_8B_RM * w_bytes
    assert plan.host_ram["model_load"] == QWEN3_8B_RM * w_bytes  # rank 0 materialises the bf16 checkpoint once


def test_sft_keeps_the_causal_lm_count():
    plan = make_plan(_card("sft"))
    assert plan.params_total == QWEN3_8B_CAUSAL
    assert plan.spec.head_outputs is None
    assert checkpoint_sizes(_card("sft"), plan).weights_only_bytes == QWEN3_8B_CAUSAL * 2


def test_rm_download_is_the_published_causal_checkpoint():
    """check's disk line: the checkpoints it keeps are the reward model's; what it fetches is the hub repo as
    published, lm_head included."""
    from trainfit.preflight.check import CHECKPOINT_BYTES_PER_PARAM, model_downloads

    card = _card("rm")
    plan = make_plan(card)
    (actor,) = model_downloads(card, plan)
    assert actor.bytes == QWEN3_8B_CAUSAL * CHECKPOINT_BYTES_PER_PARAM
