"""`fit`'s model-parallel layouts: TP within a node and dividing the heads, PP dividing the layers, CP
dividing the sequence (Ulysses the heads too) and only for long sequences, EP dividing the experts and
the data x context ranks, sequence parallel with TP; pinned sizes held; widened only where needed."""

import pytest

from trainfit.fit_search import CP_MIN_SEQ, LAYOUT_KEYS, STACK_KEY, parallel_layouts
from trainfit.plan import model_spec_of
from trainfit.search import fit, layout_text
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Stack

OPEN = frozenset({"model", "method"})


def _sizes(lay):
    k = lay.knobs
    return {n: k.get(LAYOUT_KEYS[n], 1 if n not in ("kind", "sp") else None) for n in LAYOUT_KEYS}


def _card(model, count, seq=2048, **extra):
    per = min(count, 8)
    return {"model": model, "method": "sft", "batch": {"seq_len": seq},
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": per, "nodes": max(1, count // 8)}} | extra


def test_llama_70b_on_16_cards_tp_within_the_node_pp_dividing_the_layers():
    card = _card("meta-llama/Llama-3.1-70B", 16)
    spec = model_spec_of(load_card_dict(card))
    lays = parallel_layouts(card, 16, pinned=OPEN)
    sizes = [_sizes(lay) for lay in lays if lay.knobs]
    assert lays[0].knobs == {}  # the data-parallel layout comes first
    assert all(s["tp"] <= 8 and spec.num_attention_heads % s["tp"] == 0 for s in sizes)
    assert all(spec.num_layers % s["pp"] == 0 and 16 % (s["tp"] * s["pp"]) == 0 for s in sizes)
    assert all(bool(s["sp"]) == (s["tp"] > 1) for s in sizes)  # sequence parallel wherever tensor parallel is
    assert all(s["cp"] == 1 for s in sizes)  # 2k tokens: no context parallel
    assert {"tp": 8, "pp": 2} in [{"tp": s["tp"], "pp": s["pp"]} for s in sizes]
    assert [lay.degree for lay in lays] == sorted(lay.degree for lay in lays)


def test_context_parallel_from_8k_tokens_ulysses_only_where_the_heads_split():
    # Qwen3-0.6B: 16 attention heads, 8 KV heads
    card = _card("Qwen/Qwen3-0.6B", 8, seq=CP_MIN_SEQ)
    got = {(s["tp"], s["pp"], s["cp"], s["kind"]) for s in map(_sizes, parallel_layouts(card, 8, pinned=OPEN))}
    assert (1, 1, 8, "ring") in got and (1, 1, 8, "ulysses") in got
    assert (1, 1, 2, "ulysses") in got and (2, 1, 4, "ulysses") in got
    assert (8, 1, 1, None) in got  # 8 KV heads: tp 8 keeps one per rank
    short = _card("Qwen/Qwen3-0.6B", 8, seq=CP_MIN_SEQ // 2)
    assert all(_sizes(lay)["cp"] == 1 for lay in parallel_layouts(short, 8, pinned=OPEN))


def test_an_odd_sequence_keeps_context_parallel_off_and_a_count_that_splits_nothing_has_only_data_parallel():
    card = _card("Qwen/Qwen3-0.6B", 3, seq=CP_MIN_SEQ + 2)
    lays = parallel_layouts(card, 3, pinned=OPEN)
    # 3 cards: tp 3 does not divide 16 heads, 28 layers do not split in 3, 8194 tokens do not split in 3; the card
    # states no software stack, so data parallel is searched eager and on Megatron-Core
    assert [lay.knobs for lay in lays] == [{}, {STACK_KEY: "megatron"}]


def test_expert_parallel_divides_the_experts_and_the_data_x_context_ranks():
    card = _card("Qwen/Qwen3-30B-A3B", 16)
    spec = model_spec_of(load_card_dict(card))
    lays = parallel_layouts(card, 16, pinned=OPEN)
    eps = [(lay.ep, 16 // lay.degree * _sizes(lay)["cp"]) for lay in lays]
    assert {ep for ep, _ in eps} == {1, 2, 4, 8, 16}
    assert all(spec.moe.num_experts % ep == 0 and dp_cp % ep == 0 for ep, dp_cp in eps)
    dense = parallel_layouts(_card("Qwen/Qwen3-0.6B", 16), 16, pinned=OPEN)
    assert all(lay.ep == 1 for lay in dense)


def test_pinned_sizes_are_held():
    card = _card("meta-llama/Llama-3.1-70B", 16, parallel={"tensor_parallel": 4, "sequence_parallel": False})
    pinned = OPEN | {"parallel.tensor_parallel", "parallel.sequence_parallel"}
    lays = parallel_layouts(card, 16, pinned=pinned)
    assert lays and all(LAYOUT_KEYS["tp"] not in lay.knobs and lay.tp == 4 for lay in lays)
    assert all(LAYOUT_KEYS["sp"] not in lay.knobs for lay in lays)
    # the card's own layout first, on Megatron-Core, whose kernels a tensor-parallel card is timed on
    assert lays[0].knobs == {STACK_KEY: "megatron"} and lays[0].degree == 4
    assert parallel_layouts(card, 2, pinned=pinned) == []  # tp 4 does not fit in 2 cards


def test_a_pinned_tensor_parallel_gets_sequence_parallel_unless_pinned_off():
    card = _card("meta-llama/Llama-3.1-70B", 16, parallel={"tensor_parallel": 8, "pipeline_parallel": 2})
    pinned = OPEN | {"parallel.tensor_parallel", "parallel.pipeline_parallel"}
    lays = parallel_layouts(card, 16, pinned=pinned)
    assert lays[0].knobs == {LAYOUT_KEYS["sp"]: True, STACK_KEY: "megatron"}
    assert parallel_layouts(card, 16, pinned=pinned | {LAYOUT_KEYS["sp"]})[0].knobs == {STACK_KEY: "megatron"}
    eager = pinned | {STACK_KEY}  # a card that states its stack keeps it, on its own sizes
    assert parallel_layouts(card, 16, pinned=eager)[0].own
    assert parallel_layouts(card, 16, pinned=eager)[0].knobs == {LAYOUT_KEYS["sp"]: True}


def test_fit_honours_a_pinned_tensor_parallel_and_names_it():
    base = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "full",
            "batch": {"micro_batch_size": 1, "grad_accum": 2, "seq_len": 1024},
            "parallel": {"tensor_parallel": 2, "sequence_parallel": True}, "hardware": {"gpus_per_node": 2}}
    pinned = frozenset({"model", "method", "scope", "batch.seq_len", "parallel.tensor_parallel",
                        "parallel.sequence_parallel", "precision.optimizer", "loss.chunked", "parallel.offload"})
    result = fit(base, gpus=["a100-40gb"], max_gpus=4, pinned=pinned, workers=1)
    assert {r.gpus for r in result.rows} == {2, 4}  # 1 and 3 cards cannot hold tp 2
    for r in result.rows:
        p = dict(r.parallel)
        assert p["tensor_parallel"] == 2 and p["sequence_parallel"]
        # the card's global batch of 2 sequences (1 x 2 x 1 data-parallel rank of tp 2) is kept
        dp = r.gpus // (p["tensor_parallel"] * p["pipeline_parallel"] * p["context_parallel"])
        assert r.knobs["batch"]["micro_batch_size"] * r.knobs["batch"]["grad_accum"] * dp == 2
        assert layout_text(r.parallel).startswith("tp 2 sp")


def test_fit_searches_model_parallel_layouts_where_data_parallel_fits_too():
    # Qwen3-4B in full at 8k tokens, 4 sequences per step, nothing offloaded: every count is searched over
    # every layout (it used to stop at data parallel where that fit, missing a cheaper tp 2 on 2 x A100)
    base = {"model": "Qwen/Qwen3-4B", "method": "sft", "scope": "full",
            "batch": {"micro_batch_size": 1, "grad_accum": 2, "seq_len": CP_MIN_SEQ}, "hardware": {"gpus_per_node": 2}}
    pinned = frozenset({"model", "method", "scope", "batch.seq_len", "precision.optimizer", "loss.chunked",
                        "parallel.gradient_checkpointing", "parallel.offload"})
    result = fit(base, gpus=["rtx4090", "a100-40gb"], max_gpus=4, pinned=pinned, workers=1)
    by = {(r.gpu, r.gpus): r for r in result.rows}
    # every row on one stack (Megatron-Core: the card states none); tp 2 sp on 2 x A100 was chosen only against
    # eager data-parallel rows, and on Megatron-Core FSDP is faster (3.77 s)
    assert {r.stack for r in result.rows} == {Stack.MEGATRON}
    assert by[("a100-40gb", 2)].fits and layout_text(by[("a100-40gb", 2)].parallel) == "none"
    assert by[("a100-40gb", 3)].fits and layout_text(by[("a100-40gb", 3)].parallel) == "pp 3"  # 4 do not split in 3
    # 24 GB cards: context parallel 2 on 2 cards
    assert by[("rtx4090", 2)].fits and layout_text(by[("rtx4090", 2)].parallel) == "cp 2 ring"


@pytest.mark.parametrize("count", [1, 2, 5, 8, 16, 64])
def test_every_layout_is_one_the_planner_accepts(count):
    from trainfit.plan import make_plan
    from trainfit.spec.dotted import updated

    card = _card("Qwen/Qwen3-0.6B", count, seq=CP_MIN_SEQ)
    for lay in parallel_layouts(card, count, pinned=OPEN):
        make_plan(load_card_dict(updated(card, lay.knobs)))  # raises on a layout the planner refuses


def test_layout_stacks_keep_each_layout_on_the_stack_its_time_stands_for():
    from trainfit.fit_search import layout_stacks

    # open stack: tensor / pipeline parallel on Megatron-Core only, one-replica layouts on both stacks
    assert layout_stacks(fused=True, own=False, open_=True, stated=Stack.EAGER) == [True]
    assert layout_stacks(fused=False, own=True, open_=True, stated=Stack.EAGER) == [False, True]
    # qlora / parameter offload pinned: no Megatron-Core, so no fused layout beyond the card's own sizes
    assert layout_stacks(fused=True, own=False, open_=True, stated=Stack.EAGER, megatron_ok=False) == []
    assert layout_stacks(fused=False, own=True, open_=True, stated=Stack.EAGER, megatron_ok=False) == [False]
    # a stated stack is kept; an eager one searches no fused layout the card did not pin
    assert layout_stacks(fused=True, own=False, open_=False, stated=Stack.EAGER) == []
    assert layout_stacks(fused=True, own=True, open_=False, stated=Stack.EAGER) == [False]
    assert layout_stacks(fused=True, own=False, open_=False, stated=Stack.COMPILE) == [False]
    assert layout_stacks(fused=True, own=False, open_=False, stated=Stack.MEGATRON) == [False]
