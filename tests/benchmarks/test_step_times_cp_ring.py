"""benchmarks/step_times.py: Transformer Engine's ring context-parallel glue (compute.cp_ring) in the NeMo 24.03
long-sequence Llama-2-7B rows (published_train_times_nemo_dgxc_2403_2409.json): it is planned for the Megatron-Core ring rows
only, and lengthens their step by the bytes it moves."""

from __future__ import annotations

from step_times_module import load_step_times

from trainfit.plan.time import te_ring_context_parallel_of

st = load_step_times("trainfit_bench_step_times_cp_ring")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
CP32 = "nemo2403-h100-llama2-7b-longseq-1024k-tp8-pp1-cp32-1024g"
CP1 = "nemo2403-h100-llama2-7b-longseq-16k-tp2-pp1-cp1-16g"


def _card(row_id: str, **parallel):
    card, _ = st.map_train(ENTRIES[row_id])
    card = {**card, "parallel": {**card["parallel"], **parallel}}
    return card


def test_ring_size_is_the_cards_context_parallel_on_megatron_ring_only() -> None:
    validate = st.validate
    assert te_ring_context_parallel_of(validate(_card(CP32)), eager=False) == 32
    assert te_ring_context_parallel_of(validate(_card(CP32)), eager=True) == 1
    assert te_ring_context_parallel_of(validate(_card(CP1)), eager=False) == 1
    assert te_ring_context_parallel_of(validate(_card(CP32, context_parallel_kind="ulysses")), eager=False) == 1


def test_cp32_row_step_is_longer_than_the_attention_alone_and_closer_to_published() -> None:
    p = st.plan_card(_card(CP32))
    att = sum(t.get("attention", 0.0) for t in p.phase_terms.values())
    mem = sum(t.get("memory_bound", 0.0) for t in p.phase_terms.values())
    # the glue: about 4.2 GB forward and 13 GB backward per layer and micro-step at 32K tokens x 512 q / kv
    # elements per rank, 32 layers, at the H100's memory rate: 0.1-0.4 s (the memory-bound term was 0.1 s without it)
    assert 0.2 < mem < 0.6
    assert p.step_s / 12.906 - 1 > -0.23 and att > 7.0
