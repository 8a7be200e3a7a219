"""verl overrides against verl's default YAML keys; OpenRLHF flags parsed by OpenRLHF's own argparse definitions.

Live files come from ``pip install --no-deps --target DIR verl==0.9.1 openrlhf==0.11.2`` with
TRAINFIT_EXPORT_VENDOR=DIR (neither package is imported). Without them, the lists recorded in
data/ from those versions are used, and the live check is skipped.
"""

from __future__ import annotations

import pytest
from export_cards import CARDS
from export_vendor import (
    OPENRLHF_SCRIPTS,
    argparse_from,
    openrlhf_flags_live,
    openrlhf_flags_recorded,
    package_dir,
    package_version,
    verl_keys_live,
    verl_keys_recorded,
)

from trainfit.export import ExportError, export, to_openrlhf, to_verl

NAMES = sorted(CARDS)


def _parse(parser, flags: list[str]) -> dict:
    """Parse like OpenRLHF's script would; unknown flags and bad values fail the test instead of exiting."""
    ns, extra = parser.parse_known_args(flags)
    assert not extra, f"not OpenRLHF flags: {extra}"
    return vars(ns)


def _check_override(o: str, keys: dict[str, str], groups: dict[str, list[str]] | None = None) -> None:
    key, _, value = o.partition("=")
    assert value != "", o
    if groups is not None and key in groups:  # a Hydra group choice: model_engine=megatron names a config file
        assert value in groups[key], f"{o}: no {key}/{value}.yaml in verl's config"
        return
    if key.startswith("+"):
        parent = key[1:].rpartition(".")[0]
        assert keys.get(parent) == "dict", f"{o}: '+' adds under {parent}, which is not a mapping in the default YAML"
        assert key[1:] not in keys, f"{o}: key exists; drop the '+'"
    else:
        assert key in keys, f"{o}: not a key of the default YAML"
        assert keys[key] == "value" or value.startswith("{"), f"{o}: {key} is a section"


@pytest.mark.parametrize("name", NAMES)
def test_verl_overrides_are_keys_of_the_recorded_yaml(name):
    card = CARDS[name]()
    if card.method.value in ("dpo", "rm") or card.scope.value == "qlora":
        with pytest.raises(ExportError, match="allowed for --to verl"):
            export(card, "verl")
        return
    e = export(card, "verl")
    rec = verl_keys_recorded()
    keys = rec[e.data["config"]]
    for o in to_verl(card):
        _check_override(o, keys, rec["groups"])


@pytest.fixture(scope="module")
def verl_live():
    pkg = package_dir("verl")
    if pkg is None or not (pkg / "trainer" / "config" / "ppo_trainer.yaml").is_file():
        pytest.skip("verl package files not available (pip install --no-deps --target DIR verl==0.9.1; TRAINFIT_EXPORT_VENDOR=DIR)")
    return pkg


def test_verl_live_yaml_matches_the_recorded_keys(verl_live):
    live = verl_keys_live(verl_live)
    rec = verl_keys_recorded()
    assert f"verl {package_version(verl_live, 'verl')}:" in rec["source"], "installed verl differs from the recorded version"
    for k, v in live.items():
        assert rec[k] == v, f"{k}: the installed verl differs from the recorded keys; re-record"
    for config in ("ppo_trainer.yaml", "ppo_megatron_trainer.yaml", "sft_trainer_engine.yaml", "sft_trainer_engine.yaml+megatron"):
        for name in NAMES:
            card = CARDS[name]()
            if card.method.value in ("dpo", "rm") or card.scope.value == "qlora":
                continue
            e = export(card, "verl")
            if e.data["config"] == config:
                for o in e.data["overrides"]:
                    _check_override(o, live[config], live["groups"])


def test_the_checks_refuse_what_the_targets_lack():
    keys = verl_keys_recorded()["ppo_trainer.yaml"]
    with pytest.raises(AssertionError):
        _check_override("actor_rollout_ref.rollout.no_such_knob=1", keys)
    with pytest.raises(AssertionError):
        _check_override("+actor_rollout_ref.rollout.gpu_memory_utilization=0.5", keys)
    with pytest.raises(AssertionError):
        _check_override("model_engine=megatron_typo", keys, verl_keys_recorded()["groups"])
    mega = verl_keys_recorded()["ppo_megatron_trainer.yaml"]
    with pytest.raises(AssertionError):  # the ref's override_transformer_config is an interpolation, not a mapping
        _check_override("+actor_rollout_ref.ref.megatron.override_transformer_config.fp8=e4m3", mega)
    parser = argparse_from(openrlhf_flags_recorded("train_ppo_ray"))
    with pytest.raises(AssertionError):
        _parse(parser, ["--vllm_gpu_memory_utilization", "0.5"])  # the pre-0.10 flat name
    with pytest.raises(Exception):
        _parse(parser, ["--ds.zero_stage", "three"])


def test_verl_grpo_lora_overrides():
    o = to_verl(CARDS["grpo-lora"]())
    for want in (
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "actor_rollout_ref.rollout.n=8",
        "data.max_prompt_length=512",
        "data.max_response_length=1024",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.model.lora_rank=32",
        "trainer.n_gpus_per_node=8",
        "trainer.nnodes=1",
    ):
        assert want in o


def test_verl_ppo_and_split_notes():
    e = export(CARDS["ppo-full-zero3-2nodes"](), "verl")
    assert "algorithm.kl_ctrl.kl_coef=0.05" in e.data["overrides"]
    assert "actor_rollout_ref.ref.fsdp_config.param_offload=True" in e.data["overrides"]
    assert any("exported as FSDP2" in n for n in e.notes)
    e = export(CARDS["grpo-split-zero3"](), "verl")
    assert any("split" in n for n in e.notes)


def _script(card) -> str:
    return export(card, "openrlhf").data["script"].rsplit(".", 1)[1]


@pytest.mark.parametrize("name", NAMES)
def test_openrlhf_flags_parse_with_the_recorded_argparse(name):
    card = CARDS[name]()
    flags = to_openrlhf(card)
    parser = argparse_from(openrlhf_flags_recorded(_script(card)))
    ns = _parse(parser, flags)
    assert ns["train.micro_batch_size"] == card.batch.micro_batch_size


@pytest.fixture(scope="module")
def openrlhf_live():
    pkg = package_dir("openrlhf")
    if pkg is None or not (pkg / "cli" / "train_ppo_ray.py").is_file():
        pytest.skip("openrlhf package files not available (pip install --no-deps --target DIR openrlhf==0.11.2)")
    return pkg


def test_openrlhf_live_argparse(openrlhf_live):
    for script in OPENRLHF_SCRIPTS:
        assert openrlhf_flags_live(openrlhf_live, script) == openrlhf_flags_recorded(script), f"{script}: re-record"
    for name in NAMES:
        card = CARDS[name]()
        _parse(argparse_from(openrlhf_flags_live(openrlhf_live, _script(card))), to_openrlhf(card))


def test_openrlhf_grpo_lora_flags():
    f = to_openrlhf(CARDS["grpo-lora"]())
    s = " ".join(f)
    for want in ("--rollout.n_samples_per_prompt 8", "--vllm.gpu_memory_utilization 0.4", "--vllm.tensor_parallel_size 2",
                 "--train.colocate_all", "--vllm.enable_sleep", "--ds.zero_stage 3", "--ds.adam_offload",
                 "--actor.gradient_checkpointing_enable", "--ds.lora.rank 32", "--ds.lora.alpha 64", "--algo.kl.init_coef 0.04",
                 "--actor.num_gpus_per_node 8", "--vllm.num_engines 4"):
        assert want in s


def test_openrlhf_zero_buffers():
    """#15: OpenRLHF 0.11 has one flag (--ds.overlap_comm, which also sets contiguous_gradients); its
    bucket sizes are "auto" that deepspeed.initialize drops, so the card's are listed as lost and said."""
    e = export(CARDS["sft-zero2-buckets"](), "openrlhf")
    assert "--ds.overlap_comm" in e.data["flags"]
    assert "deepspeed.overlap_comm" not in e.lost
    assert e.lost["deepspeed.reduce_bucket_size"] == {"card": 200_000_000, "file": 500_000_000}
    assert any(n.startswith("deepspeed.reduce_bucket_size 200000000: OpenRLHF 0.11 has no flag") for n in e.notes)
    z3 = export(CARDS["sft-zero3-buckets"](), "openrlhf")
    assert "--ds.overlap_comm" not in z3.data["flags"]
    assert z3.lost["deepspeed.overlap_comm"] == {"card": False, "file": True}
    assert "deepspeed.stage3_max_live_parameters" in z3.lost
    assert not [k for k in export(CARDS["sft-zero1"](), "openrlhf").lost if k.startswith("deepspeed.")]
