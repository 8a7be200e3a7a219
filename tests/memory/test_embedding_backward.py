"""The embedding backward's saved bytes: the layers' shared inputs are gone by then."""

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _at_embedding_backward(model: str, *, ckpt: bool, seq: int) -> float:
    card = {"model": model, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "single", "gradient_checkpointing": ckpt},
            "batch": {"micro_batch_size": 1, "seq_len": seq}, "attention": "eager"}
    backward = next(p for p in make_plan(load_card_dict(card)).phases if p.phase.value == "backward")
    assert backward.at == "embedding backward"
    return backward.components["activations"]


@pytest.mark.parametrize("seq", [257, 384])
@pytest.mark.parametrize("ckpt", [False, True])
def test_gemma2_embedding_backward_keeps_only_its_own_tensors(ckpt, seq):
    # the fake-tensor trace (trainfit trace --model google/gemma-2-9b --layers 2 --seq 257 --attention eager,
    # with and without --ckpt): at embedding_dense_backward the live saved tensors are the token ids (2,056 B)
    # and the scale scalar; neither the rotary cos/sin (263,168 B) nor the two eager masks (264,196 B)
    ids, scale = 8 * seq, 2
    assert _at_embedding_backward("google/gemma-2-9b", ckpt=ckpt, seq=seq) == ids + scale
