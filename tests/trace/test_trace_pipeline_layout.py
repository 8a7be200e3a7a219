"""`trainfit trace` honours the card's pipeline split: ``parallel.pipeline_layout`` (and the uneven first/last
stages) reach the traced stage's depth instead of the even split."""

import pytest

pytest.importorskip("torch")

from trainfit.trace.api import TraceRequest, TraceUnsupported, trace_step

pytestmark = pytest.mark.trace

DEEP = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
        "tie_word_embeddings": False}


@pytest.mark.parametrize(("stage", "depth"), [(0, 2), (1, 4)])
def test_layout_sets_the_traced_stage_depth(stage, depth):
    r = trace_step(TraceRequest(hf_config=DEEP, seq_len=64, pipeline_parallel=2, micro_batches=2,
                                pipeline_stage=stage, pipeline_layout=(2, 4)))
    assert r.layers_traced == (depth,)


@pytest.mark.parametrize(("layout", "why"), [((2, 3), "hold 5 decoder layers, the model has 6"),
                                             ((6, 0), "holds no decoder layer"),
                                             ((1, 2, 3), "one stage per rank")])
def test_layout_refused_in_one_line(layout, why):
    with pytest.raises(TraceUnsupported, match=why):
        trace_step(TraceRequest(hf_config=DEEP, seq_len=64, pipeline_parallel=2, pipeline_layout=layout))


def test_card_layout_reaches_the_request():
    from trainfit.cli.trace_cmd import trace_request_kwargs
    from trainfit.spec.card import load_card_dict

    card = load_card_dict({"model": {"config": DEEP}, "hardware": {"gpus_per_node": 2},
                           "parallel": {"strategy": "single", "pipeline_parallel": 2, "pipeline_layout": [2, 4]},
                           "batch": {"grad_accum": 2, "seq_len": 64}})
    kw = trace_request_kwargs(card, DEEP)
    assert kw["pipeline_layout"] == (2, 4) and kw["pipeline_parallel"] == 2
    first = load_card_dict({"model": {"config": DEEP}, "hardware": {"gpus_per_node": 2},
                            "parallel": {"strategy": "single", "pipeline_parallel": 2,
                                         "pipeline_first_stage_layers": 2}, "batch": {"seq_len": 64}})
    assert trace_request_kwargs(first, DEEP)["pipeline_first_stage_layers"] == 2
