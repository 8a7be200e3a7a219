"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612g.json: verl GPG runs of
Qwen2-7B-Instruct on one node of 8 A100-class GPUs, the two logs verl's docs/algo/baseline.md links for its GPG rows
(diqiuzhuanzhuan/verldata run_logs/qwen2-7b_math.log, FSDP, GSM8K + MATH; run_logs/qwen2-7b_math_megatron.log, Megatron
TP 2 x PP 2, GSM8K). GPG changes the advantage and the loss, not the passes: the cards are verl GRPO cards without a
reference. The FSDP log gives two rows, an early step of short responses and a late one whose responses reach the cap
on half the samples. Every row cites its log at a commit and quotes its step line, its step is the step timer of a step
that neither validated nor saved, and its note records the first-contact error. The GPU (the logs name none) was
checked after first contact: the tests at the end pin the evidence for an 80 GB A100-class card (the run fork's
get_device_flops and the logged MFU; the reserved and allocated peaks, which count the sleeping vLLM pool).

Read for this file and not used (2026-12-05): NVIDIA/dgxc-benchmarking's RL-free recipes (see the 2612l file); the verl
issues #3277 and #2060 (configs without the GPU or without the timers in the readable text); the verl-project/verl
docs' other tables (scores only: docs/algo/entropy.md, docs/algo/ppo.md); the char_count and ReTool tutorial logs
found with verl timers (toy models on unnamed GPUs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit
import trainfit.catalog.gpus

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612g.json"
COMMIT = "42e31cd07ea08b66e709a74e9aed2bd740589c34"
RUNS = {
    # id: (log, step, timing_s/gen, old_log_prob, update_actor, reward, adv, step timer), as the step line prints them
    "gpg-verldata-qwen2-7b-gsm8k-math-fsdp-a100-8g-step2":
        ("run_logs/qwen2-7b_math.log", 2, 69.534, 32.910, 134.132, 1.184, 0.179, 238.206),
    "gpg-verldata-qwen2-7b-gsm8k-math-fsdp-a100-8g-step209":
        ("run_logs/qwen2-7b_math.log", 209, 139.032, 52.427, 199.417, 2.087, 0.222, 393.436),
    "gpg-verldata-qwen2-7b-gsm8k-megatron-tp2pp2-a100-8g-step2":
        ("run_logs/qwen2-7b_math_megatron.log", 2, 50.878, 53.377, 112.319, 1.248, 0.182, 218.277),
}
FIRST_CONTACT = re.compile(
    r"FIRST CONTACT \(scored 2026-12-05 before any model change for them; benchmarks/step_times\.py on the tree of"
    r" [0-9a-f]{8}\): step [+-]\d+\.\d % \((\d+\.\d\d) s planned against (\d+\.\d\d) s\); generation [+-]\d+\.\d %.*;"
    r" log-prob pass \(old policy; no reference\) [+-]\d+\.\d %.*; actor update [+-]\d+\.\d %.*; the 6N rule"
    r" [+-]\d+\.\d % on the step")

st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612g")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, 3, set(RUNS))


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_cites_its_log_and_its_figures_are_the_step_line(row_id: str) -> None:
    e = ROWS[row_id]
    log, step, gen, old, update, reward, adv, total = RUNS[row_id]
    src = e["source"]
    assert (src["repo"], src["path"], src["commit"], src["read"]) == ("diqiuzhuanzhuan/verldata", log, COMMIT, "2026-12-05")
    assert f"step:{step} - " in e["quote"] and f"the step:{step} metric line" in src["section"]
    for key, value in (("gen", gen), ("old_log_prob", old), ("update_actor", update), ("step", total)):
        assert f"timing_s/{key}:{value:.3f}" in e["quote"]
    ph = e["measured"]["phases_s"]
    assert (ph["generation"], ph["old_logprob"], ph["actor_update"], ph["reward"], ph["other"]) == (gen, old, update, reward, adv)
    assert ph["ref_logprob"] is None and e["measured"]["step_s"] == total
    # a step that neither validated nor saved: the step timer is its phases (the timers the trainer nests in it)
    assert total == pytest.approx(gen + old + update + reward + adv, abs=0.3)
    assert "use_kl_loss=False" in e["quote"] and "algorithm.use_kl_in_reward=False" in e["quote"]
    assert f"response_length/mean:{e['data']['response_len_mean']:.3f}" in e["quote"]
    assert f"prompt_length/mean:{e['data']['prompt_len_mean']:.3f}" in e["quote"]


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_records_its_first_contact_and_the_harness_still_gives_it(row_id: str) -> None:
    e = ROWS[row_id]
    match = FIRST_CONTACT.search(e["note"])
    assert e["note"].count("FIRST CONTACT") == 1 and match
    assert float(match.group(2)) == pytest.approx(e["measured"]["step_s"], abs=0.006)
    # what changed since first contact, undone here, on the Megatron row: Megatron-Core's unfused thd RoPE
    # (train.packed_rope_loop, plan.rl_passes) and the recompute the run never ran (activation_checkpointing true ->
    # false, the entry's checked text); without them the harness still gives the first-contact figure
    train = {k: v for k, v in e["train"].items() if k not in ("packed_rope_loop", "packed_rope_loop_source")}
    if "megatron" in row_id:
        assert e["train"]["activation_checkpointing"] is False and "recompute_granularity=None" in e["checked"]
        train["activation_checkpointing"] = True
    assert (train != e["train"]) is ("megatron" in row_id)
    step_row = next(r for r in st.rl_rows([{**e, "train": train}], []) if r.quantity == "step")
    assert step_row.status == "mapped" and step_row.trainfit_s == pytest.approx(float(match.group(1)), abs=0.006)


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_maps_to_a_verl_grpo_card_without_a_reference(row_id: str) -> None:
    e = ROWS[row_id]
    card, notes = st.map_rl(e)
    st.validate(card)
    ro = card["rollout"]
    assert card["preset"] == "verl" and card["method"] == "grpo" and card["roles"]["kl_coef"] == 0.0
    assert any("no reference pass" in n for n in notes)
    assert (ro["prompts_per_step"], ro["num_generations"], ro["mini_batches"], ro["tensor_parallel"]) == (1024, 5, 4, 2)
    assert ro["placement"] == "colocate" and ro["cuda_graphs"] is False and ro["vllm_engine"] == "v1"
    assert card["hardware"] == {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 1}
    if "megatron" in row_id:
        par = card["parallel"]
        assert (par["tensor_parallel"], par["pipeline_parallel"], par["sequence_parallel"]) == (2, 2, True)
        assert card["batch"]["micro_batch_size"] == 4
        assert par["gradient_checkpointing"] is False  # the logged recompute_granularity=None
    else:
        assert (card["parallel"]["strategy"], card["parallel"]["fsdp_version"]) == ("fsdp", "fsdp1")
        assert card["batch"]["micro_batch_size"] == 16 and card["parallel"]["offload"] == "none"


def test_the_gpu_class_is_the_one_verls_logged_mfu_implies() -> None:
    """verl's perf/mfu/actor = FLOPs (6 x its parameter count a token, embeddings and lm_head included, plus 12 x the
    sum of squared lengths x head_dim x heads x layers) / (update time x GPUs x get_device_flops()); at step 2 of the
    FSDP run the logged 0.269 needs a device of about 312 TFLOP/s (A100 / A800), not 989 (H100) or 148 (H20)."""
    h, i, layers, heads, kv, hd, vocab = 3584, 18944, 28, 28, 4, 128, 152064
    dense = (3 * h * i + h * (2 * heads * hd + 2 * kv * hd)) * layers + 2 * vocab * h
    tokens, update_s, sequences = 1939128, 134.132, 5120
    mean_len = tokens / sequences
    flops = 6 * dense * tokens + 12 * sequences * mean_len**2 * hd * heads * layers  # the squared sum at its floor
    peak = flops / (update_s * 8) / 0.269
    assert 290e12 < peak < 330e12
    assert "perf/mfu/actor:0.269" in ROWS["gpg-verldata-qwen2-7b-gsm8k-math-fsdp-a100-8g-step2"]["quote"]


@pytest.mark.parametrize(("row_id", "policy_s"), [
    ("gpg-verldata-qwen2-7b-gsm8k-math-fsdp-a100-8g-step2", "133.3-134.6 s of the 134.13 s"),
    ("gpg-verldata-qwen2-7b-gsm8k-math-fsdp-a100-8g-step209", "197.8-201.8 s of 199.42 s"),
])
def test_the_fsdp_updates_missing_time_lies_inside_update_policy(row_id: str, policy_s: str) -> None:
    """verl's perf/mfu/actor is its FlopsCounter over ``update_policy``'s own Timer (volcengine/verl
    verl/workers/fsdp_workers.py l.612-617 @d815db5ad87ba2b11f20ba3a4a040ad31cadbfbd; the Qwen2 count at
    verl/utils/flops_counter.py l.84-115): at the 312e12 the test above pins, each FSDP step's logged MFU and tokens
    put ``update_policy`` within 1.5 % of the whole ``update_actor`` timer, the range both entries' checked text
    states (the squared-length sum between its floor and a length cv of 1). So the update's step-independent miss is
    inside ``update_policy``, not in the worker wrapper or the batch's transfer (plan/rl_passes.py's null result)."""
    e = ROWS[row_id]
    mfu = float(re.search(r"perf/mfu/actor:(\d\.\d+)", e["quote"]).group(1))
    tokens = float(re.search(r"perf/total_num_tokens:(\d+)\.000", e["quote"]).group(1))
    timer_s = e["measured"]["phases_s"]["actor_update"]
    h, i, layers, heads, kv, hd, vocab = 3584, 18944, 28, 28, 4, 128, 152064
    dense = (3 * h * i + h * (2 * heads * hd + 2 * kv * hd)) * layers + 2 * vocab * h
    sequences = 5120
    floor_sq = sequences * (tokens / sequences) ** 2
    low, high = ((6 * dense * tokens + 12 * sq * hd * heads * layers) / (mfu * 312e12 * 8)
                 for sq in (floor_sq, 2 * floor_sq))
    assert low < timer_s < high and high - low < 0.025 * timer_s
    assert f"{low:.1f}-{high:.1f} s" in policy_s
    assert policy_s in " ".join(e["checked"].split()) and "the fixed part lies inside update_policy" in e["checked"]


# The GPU check (2026-12-05, after first contact): the run's code is the author's fork at FORK (the commit adding the
# actor.use_gpg_loss option both launch commands set); its get_device_flops is verl/utils/flops_counter.py l.22-53 there.
FORK = "diqiuzhuanzhuan/verl at 9bc2e8e20d8e9a71202744401354d139f77faf92"
DEVICE_FLOPS = {"A100 / A800": 312e12, "H100 / H800 / H200 / GH200": 989e12, "H20": 148e12, "MI300X": 1336e12}
GIB = 2**30
ENGINE_FRACTION = 0.6  # actor_rollout_ref.rollout.gpu_memory_utilization=0.6 in both launch commands
PARAMS = 7.62e9  # "Qwen2ForCausalLM contains 7.62B parameters" (the FSDP log's model print)


def _logged(row_id: str, name: str) -> float:
    return float(re.search(rf"{re.escape(name)}:(\d+\.\d+)", ROWS[row_id]["quote"]).group(1))


def _achieved_flops_per_gpu(row_id: str) -> float:
    """verl's Qwen2 count (verl/utils/flops_counter.py l.84-115 at d815db5 and at the fork commit) over the update's
    timer and 8 GPUs, with the squared-length sum at its floor (every sequence at the mean length)."""
    h, i, layers, heads, kv, hd, vocab = 3584, 18944, 28, 28, 4, 128, 152064
    dense = (3 * h * i + h * (2 * heads * hd + 2 * kv * hd)) * layers + 2 * vocab * h
    tokens, sequences = _logged(row_id, "perf/total_num_tokens"), 5120
    flops = 6 * dense * tokens + 12 * sequences * (tokens / sequences) ** 2 * hd * heads * layers
    return flops / (ROWS[row_id]["measured"]["phases_s"]["actor_update"] * 8)


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_each_runs_logged_mfu_names_an_a100_class_device(row_id: str) -> None:
    """get_device_flops starts from float('inf') (l.34 at the fork commit): a device name it does not know (a B200
    then) logs MFU 0, never a 312e12 default. Only 'A100' / 'A800' map to 312e12 (l.40); 'GH200 ...' holds 'H200' and
    maps to 989e12 (l.38). Both runs' logged MFU needs about 306-310 TFLOP/s; every other table entry misses by over
    a third. The entries' checked text states the peak and the alternatives' MFU."""
    mfu = _logged(row_id, "perf/mfu/actor")
    achieved = _achieved_flops_per_gpu(row_id)
    peak = achieved / mfu
    assert 300e12 < peak < 320e12
    for name, flops in DEVICE_FLOPS.items():
        if name != "A100 / A800":
            assert abs(achieved / flops - mfu) > mfu / 3, name
    checked = " ".join(ROWS[row_id]["checked"].split())
    stated = checked[checked.index("gives a peak of"):checked.index("So ", checked.index("gives a peak of"))]
    assert f"{peak / 1e12:.1f}" in stated and f"{achieved / 989e12:.3f}" in stated and f"{achieved / 148e12:.3f}" in stated
    assert FORK in checked and "float('inf')" in checked and "never a default of 312e12" in checked
    assert "the gpu field stays a100-80gb" in checked and ROWS[row_id]["gpu"] == "a100-80gb"


FSDP_ROWS = sorted(r for r in RUNS if "fsdp" in r)


def test_the_reserved_figure_is_over_the_card_because_the_sleeping_pool_counts() -> None:
    """vLLM's sleep releases the engine's physical memory while torch's counters keep it (vllm issues 17117 and
    33625, the latter 199 GB reserved on a 140 GB H200 under verl): max_memory_reserved is at most the pool (at most
    gpu_memory_utilization of the card) plus the card, 1.6 x the card. The logged 113.596 GiB needs a card of 71.0 GiB
    or more: an 80 GB A100 passes, a 40 GB one does not."""
    reserved = max(_logged(r, "perf/max_memory_reserved_gb") for r in FSDP_ROWS)
    assert reserved == 113.596
    a100_80 = trainfit.catalog.gpus.resolve_gpu("a100-80gb").usable_memory_bytes / GIB
    a100_40 = trainfit.catalog.gpus.resolve_gpu("a100-40gb").usable_memory_bytes / GIB
    assert reserved > a100_80  # the open lead: more than the card holds
    assert reserved <= (1 + ENGINE_FRACTION) * a100_80 and reserved > (1 + ENGINE_FRACTION) * a100_40
    checked = " ".join(ROWS[FSDP_ROWS[0]]["checked"].split())
    assert f"a card of at least {reserved / (1 + ENGINE_FRACTION):.1f} GiB" in checked
    assert "https://github.com/vllm-project/vllm/issues/17117" in checked
    assert "https://github.com/vllm-project/vllm/issues/33625" in checked


def test_the_allocated_figure_rules_out_an_h200_and_admits_an_a100_80gb() -> None:
    """max_memory_allocated counts the sleeping pool too. An engine sized to 0.6 of an H200, less at most 10 GiB in
    use at its start-up, plus the actor's fp32 shard, gradients and AdamW moments at an optimizer step (16 bytes a
    parameter over 8 ranks) is over 88 GiB: above both logged peaks (66.088, 76.664). On an A100 80GB that floor is
    51.7 GiB, under both. The actor's own reserved memory at step 2 (the logged figure less the pool) leaves 17.6-27.6
    GiB of the card free, so step 2's fixed excess is not allocator retries at the limit."""
    allocated = [_logged(r, "perf/max_memory_allocated_gb") for r in FSDP_ROWS]
    assert sorted(allocated) == [66.088, 76.664]
    states = PARAMS * 16 / 8 / GIB

    def floor(gpu: str) -> float:
        return ENGINE_FRACTION * trainfit.catalog.gpus.resolve_gpu(gpu).usable_memory_bytes / GIB - 10 + states

    assert floor("h200") > 88 > max(allocated)
    assert floor("a100-80gb") < min(allocated)
    card = trainfit.catalog.gpus.resolve_gpu("a100-80gb").usable_memory_bytes / GIB
    pool_max = ENGINE_FRACTION * card
    step2 = "gpg-verldata-qwen2-7b-gsm8k-math-fsdp-a100-8g-step2"
    own = _logged(step2, "perf/max_memory_reserved_gb") - pool_max, _logged(step2, "perf/max_memory_reserved_gb") - pool_max + 10
    checked = " ".join(ROWS[step2]["checked"].split())
    assert f"{own[0]:.1f}-{own[1]:.1f} GiB at step 2" in checked
    assert f"{card - own[1]:.1f}-{card - own[0]:.1f} GiB under the card" in checked
    assert f"the same floor is {floor('a100-80gb'):.1f} GiB" in checked


def test_the_time_models_note_on_these_rows_closes_the_reserved_memory_lead() -> None:
    """plan/rl_passes.py's null result on these rows left the over-the-card reserved figure as an open lead; its
    paragraph now records the mechanism (the sleeping pool torch still counts) and the step-2 headroom the test above
    computes, so the next reader does not reopen it."""
    import trainfit.plan.rl_passes as rl_passes

    doc = " ".join(rl_passes.__doc__.split())
    assert "A lead left open" not in doc
    assert "vllm-project/vllm issues 17117 and 33625" in doc
    assert "51.7-61.7 GiB at step 2" in doc and "17.6-27.6 GiB under it" in doc
    assert "not caching-allocator retries at the card's limit" in doc
