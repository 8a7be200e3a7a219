"""benchmarks/step_times.py: the card's ``attention_kernel`` per entry. prime-rl's rows state the kernel their
baseline file names (flash_attention_2 -> fa2, flash_attention_3 -> fa3, flash_attention_4 -> fa4); NeMo / Megatron-Bridge rows on Hopper run
Transformer Engine's cuDNN fused attention (``TE_CUDNN_FRAMEWORKS``); llm-foundry rows without a stated attn_impl
ran its ``--attn_impl`` default, triton (``triton_fa``); the Transformer Engine tutorial's HF baseline rows
(``te-llama-``) load the model with ``_attn_implementation 'flash_attention_2'`` (fa2) and its TE rows run TE's cuDNN
fused attention (cudnn); every other entry leaves it unstated (auto)."""

from __future__ import annotations

from step_times_module import load_step_times

st = load_step_times("trainfit_bench_step_times_attention_kernel")


def _entries():
    return st.load_entries(st.TRAIN_DATA)


def test_prime_rl_rows_state_the_kernel_of_their_baseline_file():
    rows = [e for e in _entries() if e["framework"] == "prime-rl"]
    assert len(rows) >= 40
    kernels = {"flash_attention_2": "fa2", "flash_attention_3": "fa3", "flash_attention_4": "fa4"}
    for e in rows:
        named = [k for k in kernels if k in e["source"]["path"]]
        assert len(named) == 1, e["id"]
        want = kernels[named[0]]
        assert e["attention_kernel"] == want, e["id"]
        try:
            card, _ = st.map_train(e)
        except st.Unmapped:
            continue
        assert card["attention_kernel"] == want


def test_te_frameworks_on_hopper_run_cudnn():
    e = {"framework": "nemo", "attention": None}
    notes: list[str] = []
    assert st.attention_kernel_of(e, "h100-sxm", notes) == {"attention_kernel": "cudnn"}
    assert notes and "cuDNN" in notes[0]
    assert st.attention_kernel_of({"framework": "megatron-bridge"}, "h200", []) == {"attention_kernel": "cudnn"}
    # no cuDNN rate on Blackwell was read, and other frameworks are not remapped
    assert st.attention_kernel_of({"framework": "megatron-bridge"}, "b200", []) == {}
    assert st.attention_kernel_of({"framework": "megatron"}, "h100-sxm", []) == {}
    assert st.attention_kernel_of({"framework": "torchtitan"}, "h100-sxm", []) == {}
    # a kernel an entry states wins
    assert st.attention_kernel_of({"framework": "nemo", "attention_kernel": "fa3"}, "h100-sxm", []) == {
        "attention_kernel": "fa3"}


def test_only_those_rows_state_a_kernel():
    stated = {}
    for e in _entries():
        try:
            card, _ = st.map_train(e)
        except st.Unmapped:
            continue
        if "attention_kernel" in card:
            stated[e["id"]] = card["attention_kernel"]
    assert set(stated.values()) <= {"fa2", "fa3", "fa4", "cudnn", "triton_fa", "fa1"}
    for i, k in stated.items():
        assert ((i.startswith("primerl-") and k in ("fa2", "fa3", "fa4")) or k == "cudnn"
                or (i.startswith("foundry-") and k == "triton_fa")
                or (i.startswith("te-llama-tutorial-") and "-hf-" in i and k == "fa2")
                # FlagPerf's Megatron rows off Hopper (TE on sm80, FlagScale's flash-attn) and flash-attn 0.2.2's GPT
                or (i.startswith("flagperf-") and k == "fa2")
                or (i.startswith("flash-attn-training-") and k == "fa1")
                # EasyContext's flash-attn ring / data-parallel runs and ms-swift's --attn_impl flash_attn / fa3 scripts
                or (i.startswith(("easycontext-", "msswift-")) and k in ("fa2", "fa3"))
                # the small-ablation throughput scripts: --attn_implementation flash_attention_3 on Hopper, train.py's
                # flash_attention_2 default on the L40S
                or (i.startswith("scicom-throughput-") and k in ("fa2", "fa3"))), i


def test_llm_foundry_rows_without_attn_impl_run_triton():
    """submit_benchmarks.py's --attn_impl default was triton when the README tables were run (step_times
    ``attention_of``); rows whose sweep passed --attn_impl flash state attention flash and keep the default rates."""
    notes: list[str] = []
    assert st.attention_kernel_of({"framework": "llm-foundry"}, "a100-80gb", notes) == {"attention_kernel": "triton_fa"}
    assert notes and "attn_impl triton" in notes[0]
    assert st.attention_kernel_of({"framework": "llm-foundry", "attention": "flash"}, "h100-sxm", []) == {}
    rows = [e for e in _entries() if e["framework"] == "llm-foundry"]
    assert len(rows) >= 50
    for e in rows:
        card, _ = st.map_train(e)
        assert card.get("attention_kernel") == (None if e.get("attention") else "triton_fa"), e["id"]
