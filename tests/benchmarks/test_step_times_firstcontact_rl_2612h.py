"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612h.json: GRPO runs that
generate with transformers' ``generate`` (TRL without vLLM), the first such rows the harness plans. Each row cites a
notebook saved with the outputs of its own run at a commit; its step is the progress bar's elapsed time over the steps
it ran, its batch the one its step count confirms, and its note records the first-contact error.

The harness maps a TRL row without vLLM only at a release whose GRPO path was read (``TRL_HF_RELEASES``, v0.14.0:
huggingface/trl trl/trainer/grpo_trainer.py @49711efab9e0cc3762d3228c9fd5a8064d489503): generate inside every
gradient-accumulation micro-batch (compute_loss l.370-426), the reference = the actor with its adapter disabled
(l.447-451), log-probs over the completion positions' full logits (l.430-444).

First contact (2026-12-05): the three mapped rows -8.2, -8.6 and -12.3 % (the rule -99.3, -94.7, -93.0 %); four rows
not representable (rule -98.6, -88.2, -73.6, -95.4 %); one more mapped row scored later (below, "Open"). Every mapped step is launch-bound generation (16 generate calls of 64
or 32 eager decode steps: about 95 % of the planned step), and the three misses are about the same in seconds
(3.6-4.2 s a step) across 64 and 512 sequences. One model change followed: the sampled decode step's ops outside the
decoder layers (static_generation.HF_SAMPLE_STEP_OPS, counted at transformers 4.47.1: 62 where the greedy OPT loop's
28 stood): -3.3, -4.0 and -8.5 % after it; no other row moves (no other mapped row generates with engine hf). Later
the same day the SDPA mask check was counted (2 ops a step, transformers 4.47.1 modeling_attn_mask_utils.py l.284;
``sdpa_check_s``): -3.4 -> -3.1, -4.0 -> -3.7, -8.5 -> -8.2 and the interrupted row -56.3 -> -56.2 %.

Checked and not changed (2026-12-05): (1) the response lengths: the plan decodes to the caps (64, 32), as the Qwen2-0.5B
completions of a <think> format at these caps do; (2) the prefill has no launch floor (its one forward is priced by
FLOPs or the weight read), but the plan also counts max_new_tokens decode steps where generate runs max_new_tokens - 1
after the prefill, so the two cancel to within one step a call; (3) pricing the decode step like the training
inventory's no-grad forward (about 38 ops a layer at 27.7 us, rates.nograd_forward_host_s_per_kernel) in place of
decode_step's 10 ops a layer at 65 us would make the step faster (about 36 ms against 39 ms a step), away from the
runs; (4) the reward functions on the host (math_verify in one row only, the regex rewards in the others) cannot
explain a miss the reward-model-free, math_verify-free row shares. What is left (-3 to -9 %) is the eager host's speed:
the runs are Colab A100 hosts, the eager prices are the H200 reference host's, and no per-host factor is carried
(rates.nograd_forward_host_s_per_kernel docstring).

Open (2026-12-05): the notebook's first version (trl-lib/tldr prompts up to 512 tokens, 2 generate calls of 8 x 2
completions of at most 16 tokens, RM-Gemma-2B rewards), scored after the change above, is planned at 2.42 s against
5.55 s (-56.3 %). In seconds every cookbook row misses by 1.5-3.1 s a step, whatever its calls (16 or 2), sequences
(64 to 512) and lengths, which reads like a per-optimizer-step cost the plan lacks; that TRL (main of 2025-01-21,
b6a084c46) also computes the logits over every prompt position (``model(input_ids).logits``) and its reference is a
deep copy, neither of which costs seconds on an A100 at these shapes. A candidate, read but not modelled (the card
has no reward-model dtype): this run sets no bf16 (the reward-model rows B/C set bf16=True), and its RM-Gemma-2B is
loaded without torch_dtype (float32). accelerate wraps a prepared model's forward in autocast only under mixed
precision (huggingface/accelerate src/accelerate/accelerator.py ``prepare_model`` l.1402-1413 @v1.3.0, before the
evaluation_mode branch at l.1453), so here the reward model runs its GEMMs in float32, and torch leaves TF32 off for
matmuls by default (torch.backends.cuda.matmul.allow_tf32 False since PyTorch 1.12,
https://pytorch.org/docs/stable/notes/cuda.html, read 2026-12-05): about 2 x 2.0e9 x 16 x 520 = 33 TFLOP a call at
the A100's 19.5 TFLOP/s fp32 peak, some 2 s a call and 4 s a step where the plan has 0.39 s in 16 bits. It would
carry this row from -56 % to about +14 % at 520 padded tokens (less with shorter posts), and move no other (the other reward-model row ran under bf16 autocast).
A card field for the reward model's dtype (and the fp32 GEMM rate without TF32) is what it needs.

Closed (2026-12-05): the card states it (roles.reward_model_dtype fp32, precision.autocast false; precision.tf32 stays
false, PyTorch's default), read at accelerate v1.3.0 (bdd70d5d) prepare_model l.1402-1413 and TRL v0.14.0 (49711efa)
l.218-222 (a reward model given by id is loaded with model_init_kwargs) and l.353-355 (prepared with
evaluation_mode). The row's reward forward then prices fp32 GEMMs at the A100's 19.5 TFLOP/s: 2.28 s (-58.9 %, the
step after the completion-only logits change) -> 5.68 s (+2.3 %); no other row moves (the rmgemma2b-numina row states
fp32 weights too, under bf16=True autocast: memory only)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612h.json"
RUNS = {
    # id: (commit, steps the progress bar counts, its elapsed time, prompts an optimizer step, prompts a micro-batch,
    #      rows of the training split the notebook loads)
    "cookbook-grpo-trl014-qwen2-05b-lora-numina-a100-40gb-1g":
        ("b9f6d1437dea4da6d56ba5f180a568e70122e8f8", 226, "2:53:55", 16, 1, "train[:5%]"),
    "cookbook-grpo-trl014dev-qwen2-05b-lora-numina-a100-40gb-1g":
        ("f806c0213e2377ac7a19a98e448b2d6a563d946a", 56, "45:33", 128, 8, "train[:10%]"),
    # three epochs of the 10 % split: 3 x 56 steps
    "cookbook-grpo-trl014dev-qwen2-05b-lora-rmgemma2b-numina-a100-40gb-1g":
        ("34f8cc90420c787d8b0c0a55cc06efb222cb786a", 168, "1:22:29", 128, 8, "train[:10%]"),
}
EPOCHS = {"cookbook-grpo-trl014dev-qwen2-05b-lora-rmgemma2b-numina-a100-40gb-1g": 3}
REFUSED = {
    # id: (source repo, commit, steps, elapsed, a phrase of the reason it is not representable)
    "cookbook-grpo-advreward-qwen25-3b-qlora-gsm8k-h100nvl-2g":
        ("huggingface/cookbook", "72a5d4350191a68feb02036e4de2bcea4a862698", 100, "2:09:34", "device_map='auto'"),
    "trl-nb-grpo-qwen2-7b-qlora-numina-t4-1g":
        ("huggingface/trl", "7f8fbf04c343d2b29cec2cbc7fc4861b40bf30ca", 500, "13:05:04", "TRL release is not printed"),
    "unsloth-nb-grpo-ministral3-3b-lora-sudoku-t4-1g":
        ("unslothai/notebooks", "fc876d51b973c1bf0058ed85e47602cfb4bac185", 200, "2:05:09", "fast_inference False"),
    "cookbook-grpo-vlm-qwen25vl-3b-lora-mmr1-a100-40gb-1g":
        ("huggingface/cookbook", "c695d7ed7aed8e66a52653fcdca4e5ee410c2e6a", 307, "1:50:01", "vision-language model"),
}
RULE_ONLY = re.compile(
    r"FIRST CONTACT \(scored 2026-12-05 before any model change for them; benchmarks/step_times\.py on the tree of"
    r" [0-9a-f]{8}\): step not_representable, no trainfit figure; the 6N rule ([+-]\d+\.\d) % \((\d+\.\d\d) s\)\.")
NUMINA_TIR_TRAIN_ROWS = 72441  # AI-MO/NuminaMath-TIR's train split; 5 % of it printed as 'num_rows: 3622' in the TRL notebooks
FIRST_CONTACT = re.compile(
    r"FIRST CONTACT \(scored 2026-12-05 before any model change for them; benchmarks/step_times\.py on the tree of"
    r" [0-9a-f]{8}[^)]*\): trainfit (\d+\.\d\d) s against (\d+\.\d\d) s on the step, error ([+-]\d+\.\d) %; the 6N"
    r" rule ([+-]\d+\.\d) % \((\d+\.\d\d) s\)\.")
AFTER_FP32_RM = re.compile(
    r"AFTER THE FP32 REWARD MODEL \(2026-12-05; [^)]*\): trainfit (\d+\.\d\d) s against (\d+\.\d\d) s on the step,"
    r" error ([+-]\d+\.\d) %\.")
AFTER_SAMPLING = re.compile(
    r"AFTER THE SAMPLING LOOP \(2026-12-05; [^)]*\): trainfit (\d+\.\d\d) s against (\d+\.\d\d) s on the step,"
    r" error ([+-]\d+\.\d) %\.")
st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612h")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def sdpa_check_s(e: dict) -> float:
    """Seconds the SDPA mask check (static_generation.HF_SAMPLE_STEP_OPS "sdpa_ignore_causal_mask_check": eq and all,
    transformers 4.47.1 modeling_attn_mask_utils.py l.284) adds to a row after its notes' figures were recorded: its 2
    ops in every decode step of every generate call, at the eager host price."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute import decode_step, static_generation
    from trainfit.compute.rates import default_rates

    eager_s = decode_step.eager_s_per_kernel_of(default_rates(resolve_gpu(e["gpu"])), "hf")
    ops = static_generation.HF_SAMPLE_STEP_OPS["sdpa_ignore_causal_mask_check"]
    return e["rollout"]["generation_calls"] * e["data"]["response_len_max"] * ops * eager_s


def seconds(clock: str) -> int:
    parts = [int(x) for x in clock.split(":")]
    return parts[0] * 3600 + parts[1] * 60 + parts[2] if len(parts) == 3 else parts[0] * 60 + parts[1]


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, len(RUNS) + len(REFUSED) + 1, set(RUNS) | {INTERRUPTED})


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_cites_its_notebook_and_its_step_is_the_elapsed_time_over_the_steps(row_id: str) -> None:
    e = ROWS[row_id]
    commit, steps, clock, prompts, per_micro, split = RUNS[row_id]
    src = e["source"]
    assert src["repo"] == "huggingface/cookbook" and src["commit"] == commit and src["read"] == "2026-12-05"
    assert f"[{steps}/{steps} {clock}," in e["quote"] and split in e["quote"] and "'gpuType': 'A100'" in e["quote"]
    assert e["measured"]["step_s"] == pytest.approx(seconds(clock) / steps, abs=1e-3)
    # the step count is the split's prompts over (prompts a micro-batch x 16 micro-batches a step), floored
    split_rows = NUMINA_TIR_TRAIN_ROWS * int(re.search(r"(\d+)%", split).group(1)) // 100
    assert EPOCHS.get(row_id, 1) * (split_rows // prompts) == steps and prompts == per_micro * 16
    assert (e["data"]["prompts_per_step"], e["data"]["n_per_prompt"]) == (prompts, 4)
    assert e["train"]["micro_batch_size"] == per_micro * 4 and e["rollout"]["generation_calls"] == 16
    assert e["rollout"]["engine"] == "hf" and e["framework"] == "trl" and e["gpus"] == 1


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_maps_to_trl_without_vllm_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = st.map_rl(e)
    ro = card["rollout"]
    assert card["preset"] == "trl" and card["scope"] == "lora" and card["model"] == "Qwen/Qwen2-0.5B"
    assert (ro["engine"], ro["generation_calls"]) == ("hf", 16)
    # the notebook loads RM-Gemma-2B without torch_dtype: float32 weights (its bf16=True autocasts the forward)
    reward = {"reward_model": "google/gemma-2b", "reward_model_dtype": "fp32"} if e["reward_model"] else {}
    # the notebook passes its own PeftModel without peft_config: TRL's reference is a frozen copy (l.203-205)
    assert e["train"]["reference_model"] == "copy" and "GRPOTrainer(model=model" in e["train"]["reference_model_source"]
    assert card["roles"] == {"reference": "gpu", "kl_coef": st.TRL_GRPO_BETA_UNTIL_0_19, **reward}
    assert card["loss"]["chunked"] is False and card["parallel"]["gradient_checkpointing"] is False
    assert card["lora"] == {"rank": 8, "alpha": 32, "targets": ["q_proj", "v_proj"], "dropout": 0.1}
    match = FIRST_CONTACT.search(e["note"])
    assert len(FIRST_CONTACT.findall(e["note"])) == 1 and match
    assert float(match.group(2)) == pytest.approx(e["measured"]["step_s"], abs=0.006)
    (row,) = st.rl_rows([e], [])
    assert row.status == "mapped" and row.rule_s == pytest.approx(float(match.group(5)), abs=0.006)
    # one model change since first contact: the sampled decode step's loop ops (HF_SAMPLE_STEP_KERNELS)
    after = AFTER_SAMPLING.search(e["note"])
    assert after and float(after.group(2)) == pytest.approx(e["measured"]["step_s"], abs=0.006)
    # and two changes after the note was written: the SDPA mask check (sdpa_check_s) and, on the v0.14.0 row only,
    # the completion-only logits of num_logits_to_keep (roles.TRL_LOGITS_TO_KEEP_SINCE; the 0.14.0.dev0 rows ran main
    # before it, st.TRL_MAIN_BEFORE_LOGITS_TO_KEEP), recorded when every TRL row was planned over every position
    full = copy.deepcopy(card)
    full["software"] = {**full.get("software", {}), "trl": st.TRL_MAIN_BEFORE_LOGITS_TO_KEEP}
    keep_saving_s = st.plan_card(full).step_s - st.plan_card(card).step_s
    assert (keep_saving_s > 0.01) == (e["trl_version"] == "0.14.0")
    assert row.trainfit_s == pytest.approx(float(after.group(1)) + sdpa_check_s(e) - keep_saving_s, abs=0.006)
    assert row.trainfit_s > float(match.group(1))  # the loop's ops only add host time to a launch-bound decode


INTERRUPTED = "cookbook-grpo-trl014dev-qwen2-05b-lora-rmgemma2b-tldr-a100-40gb-1g"
TLDR_TRAIN_ROWS = 116722  # trl-lib/tldr's train split


def test_the_interrupted_run_row_is_its_bar_over_the_steps_run_and_records_its_first_contact() -> None:
    """The notebook's first version saved the bar of a run it stopped at step 357 of 2187 (3 epochs of 729 steps: the
    10 % split's prompts over 8 prompts x 2 micro-batches); scored after the sampled-loop change; its fp32 reward
    model run without autocast (roles.reward_model_dtype, precision.autocast) is the one change since."""
    e = ROWS[INTERRUPTED]
    assert e["source"]["commit"] == "3d4d7691b962af21f054d6013cb06a4c95cd14bd" and "[ 357/2187 33:01 <" in e["quote"]
    assert e["measured"]["step_s"] == pytest.approx(seconds("33:01") / 357, abs=1e-3)
    assert 3 * ((TLDR_TRAIN_ROWS // 10) // (8 * 2)) == 2187
    card, _ = st.map_rl(e)
    assert (card["rollout"]["generation_calls"], card["rollout"]["prompts_per_step"]) == (2, 16)
    assert card["roles"]["reward_model"] == "google/gemma-2b" and card["roles"]["reference"] == "gpu"
    match = FIRST_CONTACT.search(e["note"])
    assert match and "after the sampled-loop change" in e["note"] and not AFTER_SAMPLING.search(e["note"])
    assert card["roles"]["reward_model_dtype"] == "fp32" and card["precision"]["autocast"] is False
    after = AFTER_FP32_RM.search(e["note"])
    assert after and float(after.group(2)) == pytest.approx(e["measured"]["step_s"], abs=0.006)
    (row,) = st.rl_rows([e], [])
    assert row.trainfit_s == pytest.approx(float(after.group(1)), abs=0.006)
    assert (row.trainfit_s / e["measured"]["step_s"] - 1) * 100 == pytest.approx(float(after.group(3)), abs=0.06)


def test_the_fp32_reward_model_without_autocast_is_what_moves_the_interrupted_run() -> None:
    """The notebook's first version loads RM-Gemma-2B without torch_dtype (float32) and sets no bf16: its reward
    forward runs fp32 GEMMs (2 x 2.5e9 params x 32 sequences x up to 528 tokens a step at 19.5 TFLOP/s). Under autocast
    (bf16=True, as the notebook's later versions set) the same fp32 weights run 16-bit GEMMs: the step is seconds
    shorter, and the other rows, which set bf16=True or have no reward model, do not move."""
    e = copy.deepcopy(ROWS[INTERRUPTED])
    (fp32,) = st.rl_rows([e], [])
    e["train"]["autocast"] = True
    (cast,) = st.rl_rows([e], [])
    assert fp32.trainfit_s - cast.trainfit_s > 3.0
    other = copy.deepcopy(ROWS["cookbook-grpo-trl014dev-qwen2-05b-lora-rmgemma2b-numina-a100-40gb-1g"])
    assert other["train"]["reward_model_dtype"] == "fp32" and "bf16=True" in other["train"]["reward_model_dtype_source"]
    (under_autocast,) = st.rl_rows([other], [])
    other["train"].pop("reward_model_dtype")
    (sixteen,) = st.rl_rows([other], [])
    assert under_autocast.trainfit_s == pytest.approx(sixteen.trainfit_s, rel=1e-12)


def test_a_trl_release_not_read_is_not_representable() -> None:
    """A later TRL counts per_device_train_batch_size in completions and generates once per effective batch: a row at
    a release outside TRL_HF_RELEASES is refused, not planned with v0.14.0's semantics."""
    e = copy.deepcopy(ROWS["cookbook-grpo-trl014-qwen2-05b-lora-numina-a100-40gb-1g"])
    e["trl_version"] = "0.23.1"
    with pytest.raises(st.Unmapped) as info:
        st.map_rl(e)
    assert info.value.status == "not_representable" and "0.14.0" in info.value.reasons[0]


def test_without_the_generate_calls_the_step_is_shorter() -> None:
    """The 16 generate calls a step (TRL v0.14.0 generates inside every micro-batch) each wait for their longest
    completion: one call for the step's 64 sequences would be planned shorter."""
    e = copy.deepcopy(ROWS["cookbook-grpo-trl014-qwen2-05b-lora-numina-a100-40gb-1g"])
    (sixteen,) = st.rl_rows([e], [])
    e["rollout"]["generation_calls"] = 1
    (one,) = st.rl_rows([e], [])
    assert one.trainfit_s < 0.5 * sixteen.trainfit_s


@pytest.mark.parametrize("row_id", sorted(REFUSED))
def test_refused_row_cites_its_notebook_and_records_the_rule_at_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    repo, commit, steps, clock, reason = REFUSED[row_id]
    assert (e["source"]["repo"], e["source"]["commit"]) == (repo, commit) and f"[{steps}/{steps} {clock}," in e["quote"]
    assert e["measured"]["step_s"] == pytest.approx(seconds(clock) / steps, abs=1e-3)
    with pytest.raises(st.Unmapped) as info:
        st.map_rl(e)
    assert info.value.status == "not_representable" and any(reason in r for r in info.value.reasons)
    match = RULE_ONLY.search(e["note"])
    assert match and len(RULE_ONLY.findall(e["note"])) == 1
    (row,) = st.rl_rows([e], [])
    assert row.rule_s == pytest.approx(float(match.group(2)), abs=0.006)


def test_the_reward_model_forward_is_in_the_step() -> None:
    """The reward-model row's RM-Gemma-2B scores every completion (a Gemma-2B forward): without it the step is shorter."""
    e = copy.deepcopy(ROWS["cookbook-grpo-trl014dev-qwen2-05b-lora-rmgemma2b-numina-a100-40gb-1g"])
    (with_rm,) = st.rl_rows([e], [])
    e["reward_model"] = None
    (without,) = st.rl_rows([e], [])
    assert without.trainfit_s < with_rm.trainfit_s


def test_the_sampled_loop_prices_its_ops_outside_the_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL generates with do_sample: each decode step runs transformers' sampling loop, the mask, rotary table, final
    norm and stopping checks outside the layers (static_generation.HF_SAMPLE_STEP_OPS, 64 ops at transformers 4.47.1),
    each at the eager host price on a launch-bound step; with the greedy OPT loop's 28 the step is shorter by the
    difference times the decode steps."""
    from trainfit.compute import decode_step, static_generation
    from trainfit.compute.hybrid_engine import HF_GREEDY_STEP_KERNELS

    assert static_generation.HF_SAMPLE_STEP_KERNELS == sum(static_generation.HF_SAMPLE_STEP_OPS.values()) == 64
    e = ROWS["cookbook-grpo-trl014-qwen2-05b-lora-numina-a100-40gb-1g"]
    (sampled,) = st.rl_rows([e], [])
    monkeypatch.setattr(static_generation, "HF_SAMPLE_STEP_KERNELS", HF_GREEDY_STEP_KERNELS)
    (greedy,) = st.rl_rows([e], [])
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates

    eager_s = decode_step.eager_s_per_kernel_of(default_rates(resolve_gpu("a100-40gb")), "hf")
    # 16 calls of 64 decode steps, each (64 - 28) ops more at the eager price
    expected = 16 * 64 * (64 - HF_GREEDY_STEP_KERNELS) * eager_s
    assert sampled.trainfit_s - greedy.trainfit_s == pytest.approx(expected, rel=0.02)


DEV_ROWS = sorted(i for i, e in ROWS.items() if e.get("trl_version") == "0.14.0.dev0")


@pytest.mark.parametrize("row_id", DEV_ROWS)
def test_a_trl_main_row_saved_before_num_logits_to_keep_plans_every_position(row_id: str) -> None:
    """TRL main before huggingface/trl 801582ec240c46ecd487a72fcc8944f268380830 (#2683, committed 2025-01-29 17:12:18
    +0100) computes the logits of every position (b6a084c46e17ad3439557b2c75703671eb4db151 trl/trainer/grpo_trainer.py
    l.219: ``logits = model(input_ids).logits``); each 0.14.0.dev0 notebook was committed before it (the 2025-01-29
    one, f806c021, at 15:41:19 +0100), so the harness pins TRL before 0.14 and the plan keeps every position."""
    from trainfit.methods.roles import logit_positions
    from trainfit.spec.card import load_card_dict

    e = ROWS[row_id]
    assert e["source"]["date"] <= "2025-01-29"
    card, notes = st.map_rl(e)
    assert card["software"]["trl"] == st.TRL_MAIN_BEFORE_LOGITS_TO_KEEP
    parsed = load_card_dict(card)
    seq_len = parsed.rollout.prompt_len + parsed.rollout.response_len
    assert logit_positions(parsed, seq_len=seq_len) == seq_len
    assert not any("@49711efa" in n for n in notes)  # v0.14.0 code these runs did not execute
    assert any("create_reference_model, grpo_trainer.py l.104-107 @b6a084c4" in n for n in notes)
    assert any("l.219" in n and "b6a084c4" in n for n in notes)


def test_the_v0_14_0_row_keeps_the_completion_logits_only() -> None:
    """The v0.14.0 row (49711efa, after #2683) asks for the completion's logits only (grpo_trainer.py l.430-444)."""
    from trainfit.methods.roles import logit_positions
    from trainfit.spec.card import load_card_dict

    card, notes = st.map_rl(ROWS["cookbook-grpo-trl014-qwen2-05b-lora-numina-a100-40gb-1g"])
    assert "trl" not in (card.get("software") or {})
    parsed = load_card_dict(card)
    assert logit_positions(parsed, seq_len=192) == parsed.rollout.response_len + 1
    assert any("l.430-444 @49711efa" in n for n in notes)
