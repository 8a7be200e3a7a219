"""benchmarks/step_times.py, the NeMo RL release of a row (``NEMO_RL_RELEASES``): the rows whose configs are read at
v0.3.0 (the v0.3 blog and its issue #959 reruns) carry ``software.nemo-rl`` 0.3.0 onto the card, so their Megatron
refit gathers as v0.3's ``gather_params`` did (``trainfit.compute.sync.NEMO_RL_V03_GATHER``); the performance-summary
rows carry the release their section heading names (``nemo_rl_summary_release``); other later rows carry none."""

from __future__ import annotations

from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_nemo_rl_release")
ENTRIES = {e["id"]: e for e in S.load_entries(S.RL_DATA) if e["framework"] == "nemo-rl"}


def test_v03_rows_carry_the_release() -> None:
    v03 = [i for i in ENTRIES if i.startswith(("nemorl-v03blog-", "nemorl-issue959-rerun-"))]
    assert len(v03) == 10
    for i in v03:
        card, notes = S.map_rl(ENTRIES[i])
        assert card["software"]["nemo-rl"] == "0.3.0"
        assert any("software.nemo-rl" in n for n in notes)


def test_older_rows_pinned_from_their_citations() -> None:
    """The A4 recipe row reads grpo_math_1B.yaml at v0.3.1 (27d0af945, the v0.3.1 tag; no later release contains
    it); the refit blog's 'NeMo-RL v0.3' row names the release in its table: both plan an older NeMo RL, not the
    newest."""
    want = {"gpurecipes-nemorl-grpo-qwen25-1p5b-b200-8g": "0.3.1",
            "nemorl-refitblog-v03-dsv3-ep64pp8-vllm-tp64-512g": "0.3"}
    for i, release in want.items():
        assert S.nemo_rl_release_of(ENTRIES[i]) == release, i
        card, notes = S.map_rl(ENTRIES[i])
        assert card["software"]["nemo-rl"] == release, i
        assert any("software.nemo-rl" in n for n in notes)
    assert "config_source" not in ENTRIES["nemorl-refitblog-v03-dsv3-ep64pp8-vllm-tp64-512g"]["source"]
    assert "27d0af945b96c5bf9fa928bf45fd1a6ce016632d" in ENTRIES["nemorl-refitblog-v03-dsv3-ep64pp8-vllm-tp64-512g"][
        "nemo_rl_release_source"]


def test_later_rows_carry_no_release() -> None:
    for i in ("nemorl-nccl-reshard-refit-qwen3-4b-h100-dp8-tp8", "nemorl-refit-nccl-dsv3-h100-256t32g-sync"):
        card, _ = S.map_rl(ENTRIES[i])
        assert "nemo-rl" not in (card.get("software") or {})


def test_summary_rows_carry_their_section_release() -> None:
    summary = {i: e for i, e in ENTRIES.items() if (e.get("source") or {}).get("path") == S.NEMO_RL_SUMMARY_PATH}
    assert len(summary) >= 40
    for i, e in summary.items():
        want = {"nemorl-v04-": "0.4.0", "nemorl-v05-": "0.5.0", "nemorl-v06-": "0.6.0"}[i[:11]]
        assert S.nemo_rl_summary_release(e) == want, i
    card, _ = S.map_rl(ENTRIES["nemorl-v05-grpo-llama31-8b-h100-bf16-16g-onpol"])
    assert card["software"]["nemo-rl"] == "0.5.0"


def test_the_v03_megatron_refit_gathers_more() -> None:
    """The 70B Megatron rerun (TP 4, PP 4 over 8 nodes): its refit's PP broadcasts carry TP-whole tensors."""
    e = ENTRIES["nemorl-issue959-rerun-grpo-llama31-70b-megatron-h100-64g"]
    card, _ = S.map_rl(e)
    v03 = S.plan_card(card).phase_terms["weight_sync"]["gather"]
    card["software"] = {}
    bridge = S.plan_card(card).phase_terms["weight_sync"]["gather"]
    assert v03 > 2.5 * bridge


def test_before_07_the_driver_pickles_each_shard_per_worker() -> None:
    """The 70B Megatron rerun (TP 4 x PP 4, 4 data-parallel shards): at v0.3 every shard is pickled for each of its
    16 workers (compute.controller_transfer); a card without the pin plans the newest release's single ray.put."""
    card, _ = S.map_rl(ENTRIES["nemorl-issue959-rerun-grpo-llama31-70b-megatron-h100-64g"])
    v03 = S.plan_card(card).phase_terms
    card["software"] = {}
    newest = S.plan_card(card).phase_terms
    for phase in ("actor_update", "old_logprob", "ref_logprob"):
        assert v03[phase]["controller_transfer"] > 10 * newest[phase]["controller_transfer"] > 0
