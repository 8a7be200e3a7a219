"""benchmarks/step_times.py, held-out RL rows of published_rl_times_verl_v1_nemo_aligner_marin.json: verl's PrefixGrouper benchmark
(examples/prefix_grouper/README.md, PR #4368), verl's V1-trainer benchmarks (docs/advance/v1_async_trainer.md and
the PR #7373 description in its merge commit) and NeMo-Aligner's PPO-with-TensorRT-LLM scaling table
(docs/user-guide/rlhf.rst). The file is picked up, its ids are unique across the RL files, every row cites its source
at a commit and quotes its figures, the derived step times follow from the quoted wall clocks, and each row gets the
ledger status its missing inputs call for.

First contact (2026-12-03, before any change): none of the 16 rows is scored. 11 are skipped: the PrefixGrouper
rows publish no batch (prompts per step) or lengths; the Qwen3.5-35B-A3B rows name a model the catalog cannot plan
(a mixture-of-experts decoder with linear-attention layers). 5 are not representable: NeMo-Aligner runs the actor
(with generation and the reference) and the critic + reward server on separate node groups, and the card has one
training pool. The Marin row (added after) was skipped at first contact: 32 rollout GPUs read as GPUs per node (2 of each
node's 8) leave TP 8 no room; with the 4 whole nodes its source states (rollout_nodes) it plans, and trainfit
under-predicts every phase: step 3,906 s vs 32,423 s (-88 %), generation 3,281 vs 19,560 (-83 %), log-prob passes
128 vs 2,197 (-94 %), actor update 461 vs 10,260 (-96 %), weight sync 36 vs 376 (-90 %)."""

from __future__ import annotations

import copy
import json
import re

import pytest
from step_times_module import file_ids, load_step_times

S = load_step_times("trainfit_bench_step_times_rl_verl_v1_nemo_aligner_marin")
DATA = S.RL_DATA.parent / "published_rl_times_verl_v1_nemo_aligner_marin.json"
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
PG = sorted(i for i in ROWS if i.startswith("verl-pr4368-"))
V1 = sorted(i for i in ROWS if i.startswith(("verl-v1trainer-", "verl-pr7373-")))
ALIGNER = sorted(i for i in ROWS if i.startswith("nemoaligner-"))
MARIN = "marin-issue8653-dapo-qwen3-235b-a22b-thinking-h100-96g"


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(S, S.RL_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 17
    assert (len(PG), len(V1), len(ALIGNER)) == (4, 7, 5) and MARIN in ROWS
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_each_row_cites_a_commit_and_quotes_its_step_time(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", src["date"])
    if row_id == MARIN:  # an issue thread: cited by its address
        assert src["url"] == "https://github.com/marin-community/marin/issues/8653"
    else:
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"])
        assert src["repo"] in {"verl-project/verl", "NVIDIA/NeMo-Aligner"}
    assert e["kind"] == "rl_step" and e["measured"]["step_s"] > 0
    if row_id in PG:
        step = e["measured"]["step_s"]
        assert f"{step:.2f}s" in e["quote"]
        for key in ("old_logprob", "actor_update"):
            assert f"{e['measured']['phases_s'][key]:.2f}s" in e["quote"]


@pytest.mark.parametrize("row_id", PG)
def test_prefix_grouper_rows_keep_the_arm_and_context_of_their_column(row_id: str) -> None:
    e = ROWS[row_id]
    arm, ctx = row_id.rsplit("-", 1)[1], row_id.split("-ctx")[1].split("-")[0]
    assert e["train"]["use_prefix_grouper"] is (arm == "pg")
    assert e["data"]["sequence_len_max"] == {"4k": 4096, "8k": 8192}[ctx]
    assert e["data"]["n_per_prompt"] == 4 and e["gpus"] == 4 and e["gpu"] == "h800"
    assert ("No PG column" if arm == "nopg" else "(PG column)") in e["quote"]
    # the PG arm is faster on every timer (the README's speedup column)
    twin = ROWS[row_id.replace("-pg", "-nopg")] if arm == "pg" else e
    assert e["measured"]["step_s"] <= twin["measured"]["step_s"]


@pytest.mark.parametrize("row_id", V1)
def test_v1_trainer_step_times_are_the_wall_clock_over_the_steps(row_id: str) -> None:
    e = ROWS[row_id]
    table_row = e["quote"].rsplit(" / ", 1)[1]
    hours = [float(h) for h in re.findall(r"(\d+\.\d+) h", table_row)]
    if row_id.startswith("verl-pr7373-"):  # | wall clock for 150 steps | **16.43 h** (switch) | 18.80 h (baseline) |
        hours_run, steps = hours[1 if row_id.endswith("-baseline") else 0], 150
    else:  # the page: 150 steps for the three modes, 100 for the switch comparison
        hours_run, steps = hours[0], (100 if "-3n-separate-async-" in row_id else 150)
    assert e["measured"]["step_s"] == pytest.approx(hours_run * 3600 / steps, abs=0.01)
    assert e["data"]["prompts_per_step"] == 64 and e["train"]["ppo_mini_batch_size"] == 16


@pytest.mark.parametrize("row_id", ALIGNER)
def test_aligner_rows_quote_step_time_and_tokens_and_count_both_node_groups(row_id: str) -> None:
    e = ROWS[row_id]
    actor, critic = (int(x) for x in re.search(r"-(\d+)a(\d+)c$", row_id).groups())
    cells = [c.strip() for c in e["quote"].rsplit("/", 1)[1].split("|")[1:-1]]
    assert [int(cells[0]), int(cells[1])] == [actor, critic]
    assert float(cells[2]) == e["data"]["response_len_mean"] and float(cells[3]) == e["measured"]["step_s"]
    assert e["gpus"] == 8 * (actor + critic) and e["rollout"]["role_gpus"]["critic"] == 8 * critic


@pytest.mark.parametrize(("row_id", "reason"), [
    *[(i, "batch is not published") for i in PG],
    *[(i, "Qwen/Qwen3.5-35B-A3B not in the catalog") for i in V1],
])
def test_rows_without_a_plannable_model_or_batch_are_skipped_with_their_reason(row_id: str, reason: str) -> None:
    with pytest.raises(S.Unmapped) as err:
        S.map_rl(ROWS[row_id])
    assert err.value.status == "skipped"
    assert any(reason in r for r in err.value.reasons)


@pytest.mark.parametrize("row_id", ALIGNER)
def test_aligner_rows_are_not_representable_for_their_separate_critic_nodes(row_id: str) -> None:
    with pytest.raises(S.Unmapped) as err:
        S.map_rl(ROWS[row_id])
    assert err.value.status == "not_representable"
    assert "per-role GPU groups" in err.value.reasons[0]


def test_marin_row_converts_the_quoted_hours_to_seconds() -> None:
    e = ROWS[MARIN]
    def seconds(text: str) -> float:
        h, m, sec = (re.search(r"(\d+)h", text), re.search(r"(\d+)m", text), re.search(r"m(\d+)s", text))
        return 3600 * int(h.group(1) if h else 0) + 60 * int(m.group(1) if m else 0) + int(sec.group(1) if sec else 0)
    quoted = dict(re.findall(r"`(\w+)` \| (\w+) \|", e["quote"]))
    ph = e["measured"]["phases_s"]
    assert seconds("9h00m23s") == e["measured"]["step_s"] and "9h00m23s" in e["quote"]
    assert seconds(quoted["generate"]) == ph["generation"] and seconds(quoted["policy_train"]) == ph["actor_update"]
    assert seconds(quoted["fwd_logprobs_values_reward"]) == ph["old_logprob"]
    assert seconds(quoted["sync_weights"]) == ph["weight_sync"]
    assert e["gpus"] == e["rollout"]["rollout_gpus"] + e["rollout"]["train_gpus"] == 96


def test_marin_row_plans_its_engines_on_the_whole_nodes_the_source_states() -> None:
    # '8 policy nodes ... and 4 inference engines at TP 8' on 12 nodes: rollout_nodes 4 reaches the card as whole
    # nodes; read as GPUs per node (32 / 12 -> 2) TP 8 would not fit a node's share and the planner refuses the card
    e = ROWS[MARIN]
    card, notes = S.map_rl(e)
    assert card["rollout"]["nodes"] == 4 and "gpus" not in card["rollout"]
    assert any("the layout the source states" in n for n in notes)
    assert S.plan_card(card).parts.get("time.weight_sync", 0) > 0
    per_node = copy.deepcopy(e)
    del per_node["rollout"]["rollout_nodes"]
    card, _ = S.map_rl(per_node)
    assert card["rollout"]["gpus"] == 2
    with pytest.raises(Exception, match="rollout GPUs per node"):
        S.plan_card(card)


def test_marin_row_decodes_without_cuda_graphs_as_marinskyrl_defaults() -> None:
    # MarinSkyRL's generator.enforce_eager true (the entry's cuda_graphs_source): vLLM's eager decode, several times
    # the CUDA-graph decode of the same card
    e = ROWS[MARIN]
    assert e["rollout"]["cuda_graphs"] is False and "enforce_eager" in e["rollout"]["cuda_graphs_source"]
    card, _ = S.map_rl(e)
    assert card["rollout"]["cuda_graphs"] is False
    eager = S.plan_card(card).parts["time.generation"]
    graphs = S.plan_card({**card, "rollout": {**card["rollout"], "cuda_graphs": True}}).parts["time.generation"]
    assert eager > 2 * graphs
    assert abs(eager / e["measured"]["phases_s"]["generation"] - 1) <= 0.5


def test_marin_row_update_pays_fsdp2_host_side_gradient_accumulation() -> None:
    # FSDP2 CPUOffloadPolicy (cpu_offload on), 64 micro-batches per optimizer step: 63 of them accumulate on the host
    # behind a blocking copy (compute.offload.fsdp2_offload_accumulation_seconds)
    card, _ = S.map_rl(ROWS[MARIN])
    planned = S.plan_card(card)
    assert planned.phase_terms["actor_update"]["offload"] > 300
    fsdp1 = S.plan_card({**card, "parallel": {**card["parallel"], "fsdp_version": "fsdp1"}})
    assert fsdp1.phase_terms["actor_update"]["offload"] < 50


def test_marin_row_syncs_one_tensor_at_a_time_through_the_forks_request_loop() -> None:
    # MarinSkyRL's FSDP broadcast path: one awaited update_named_weights request per entry of the trainer module's
    # state_dict() (compute.sync: _PER_PARAMETER skyrl, FrameworkSync.sends_trainer_state_dict). Under transformers 5
    # Qwen3-235B-A22B's trainer holds per layer q/k/v/o, q_norm, k_norm, the router, experts.gate_up_proj,
    # experts.down_proj and two layer norms (11), 94 layers, plus embed_tokens, norm and lm_head: 94 x 11 + 3 = 1,037
    # tensors, not the checkpoint's 94 x (8 + 3 x 128) + 3 = 36,945. Requests: 1,037 x (4.4 - 1.6) / (443 - 25) s
    # = 1,037 x 6.6986 ms = 6.946 s. Published 376 s: the request loop does not explain it
    from trainfit.catalog.models import from_catalog
    from trainfit.compute.sync import trainer_tensor_count

    e = ROWS[MARIN]
    assert e["rollout"]["weight_sync"] == "per_parameter" and "MarinSkyRL" in e["note"]
    card, _ = S.map_rl(e)
    assert card["rollout"]["weight_sync"] == "per_parameter"
    spec = from_catalog("Qwen/Qwen3-235B-A22B")
    assert trainer_tensor_count(spec, fused_experts=True) == 1037
    assert trainer_tensor_count(spec, fused_experts=False) == 36945
    planned = S.plan_card(card)
    assert planned.phase_terms["weight_sync"]["per_tensor"] == pytest.approx(6.946, abs=0.005)
    # a card that states transformers < 5 (its per-expert modules) sends the checkpoint's 36,945: 247.5 s of requests
    old = {**card, "software": {"transformers": "4.57.1"}}
    assert S.plan_card(old).phase_terms["weight_sync"]["per_tensor"] == pytest.approx(247.48, abs=0.05)
    # the preset's packed-producer path (SkyRL's own trainers) leaves the row at a tenth of the published time too
    packed = copy.deepcopy(e)
    del packed["rollout"]["weight_sync"]
    card, _ = S.map_rl(packed)
    assert S.plan_card(card).parts["time.weight_sync"] < 0.15 * e["measured"]["phases_s"]["weight_sync"]



def test_marin_row_plans_the_published_share_at_the_cap() -> None:
    # '55% of samples hit the 8,192-token cap': rollout.response_clip_ratio 0.55, the exponential's mean 6,166 tokens
    # (compute.response_lengths.clip_ratio_response_mean) where the thinking model's default profile gives 5,264
    e = ROWS[MARIN]
    assert e["data"]["response_clip_ratio"] == 0.55 and "55%" in e["data"]["response_clip_ratio_source"]
    card, notes = S.map_rl(e)
    assert card["rollout"]["response_clip_ratio"] == 0.55 and "length_profile" not in card["rollout"]
    assert S.planned_response_mean(card["rollout"], e["model"]) == pytest.approx(6166.4, abs=0.1)
    with_share = S.plan_card(card).parts["time.generation"]
    rollout = {k: v for k, v in card["rollout"].items() if k != "response_clip_ratio"}
    without = S.plan_card({**card, "rollout": rollout}).parts["time.generation"]
    published = e["measured"]["phases_s"]["generation"]
    assert abs(with_share / published - 1) < abs(without / published - 1)


def test_marin_row_steps_torchs_adamw_on_the_host_one_thread_a_rank() -> None:
    # the fork's torch.optim.AdamW without foreach / fused over FSDP2's host DTensors: the single-tensor loop
    # (train.optimizer_impl for_loop), 3.67e9 bf16 parameters a rank at 3.2 ns = 11.7 s against CPU Adam's 4.4 s
    e = ROWS[MARIN]
    card, _ = S.map_rl(e)
    assert card["precision"]["optimizer_impl"] == "for_loop"
    loop = S.plan_card(card).phase_terms["actor_update"]["offload"]
    fused = S.plan_card({**card, "precision": {**card["precision"], "optimizer_impl": "fused"}})
    assert loop - fused.phase_terms["actor_update"]["offload"] == pytest.approx(11.75 - 4.41, abs=0.1)
