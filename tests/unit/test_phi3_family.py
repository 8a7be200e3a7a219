"""Phi-3 (``phi3``, phi-4 too): parameters counted exactly; a plan is refused in one line until the fused layers are
modelled (``catalog.hf_config.PHI3_UNPLANNED``)."""

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.errors import CardError
from trainfit.memory.params import param_breakdown
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


@pytest.mark.parametrize(("model_id", "total"), [
    ("microsoft/Phi-3-mini-4k-instruct", 3_821_079_552),  # the model card's 3.8B
    ("microsoft/phi-4", 14_659_507_200),  # the technical report's 14B (arXiv 2412.08905)
])
def test_counts(model_id, total):
    assert param_breakdown(from_catalog(model_id)).total == total


def test_plan_is_refused_in_one_line():
    card = {"model": "microsoft/Phi-3-mini-4k-instruct", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "batch": {"micro_batch_size": 1, "seq_len": 1024}}
    with pytest.raises(CardError, match="fused qkv_proj and gate_up_proj") as err:
        make_plan(load_card_dict(card))
    assert "\n" not in str(err.value)
