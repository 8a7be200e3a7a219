"""An engine that serves the actor's LoRA adapter unmerged (verl with a LoRA actor and vLLM) receives only the
adapter after the first sync (verl-project/verl verl/workers/sharding_manager/fsdp_vllm.py update_params l.253-265
@7dc3ee7476c9af1042636f44bca9e412d1de1a6d): the weight-sync phase moves the adapter's bytes, the trainer holds one
gathered decoder layer under rollout.layered_summon (the whole actor without it), and the engine holds its adapter
slots beside its weights."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.memory.engine_lora import engine_lora_slot_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(*, rank: int = 32, layered: bool | None = True, preset: str = "verl", scope: str = "lora",
          strategy: str = "fsdp", fsdp_version: str | None = "fsdp1") -> dict:
    parallel = {"strategy": strategy} | ({"fsdp_version": fsdp_version} if fsdp_version else {})
    card = {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": scope, "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2, "nodes": 1},
            "parallel": parallel, "batch": {"micro_batch_size": 8},
            "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                        "response_len_mean": 200, "cuda_graphs": False}}
    if layered is not None:
        card["rollout"]["layered_summon"] = layered
    if scope == "lora":
        card["lora"] = {"rank": rank, "alpha": 32}
    return card


def _plan(card: dict):
    return make_plan(load_card_dict(card))


def _sync(plan):
    return next(ph for ph in plan.time.phases if ph.name == "weight_sync")


def _sync_buffer(plan) -> float:
    return max(ph.components.get("weight_sync_buffer", 0.0) for g in plan.groups for ph in g.phases)


def _not_served(monkeypatch) -> None:
    monkeypatch.setattr("trainfit.plan.rl_generation.engine_serves_adapter", lambda card: False)


def test_sync_moves_the_adapter_not_the_merged_weights(monkeypatch) -> None:
    served = _sync(_plan(_card()))
    # the adapter's transfer grows with its rank; the merged-weight sync does not depend on it
    assert _sync(_plan(_card(rank=64))).terms["transfer"] == pytest.approx(2 * served.terms["transfer"], rel=0.02)
    _not_served(monkeypatch)
    merged = _sync(_plan(_card()))
    # no CUDA-IPC bucket of merged tensors: the adapter goes through host memory (.cpu(), then add_lora)
    assert served.terms["per_tensor"] == 0.0 < merged.terms["per_tensor"]
    assert _sync(_plan(_card(rank=64))).terms["transfer"] == pytest.approx(merged.terms["transfer"])


def test_trainer_holds_one_layer_under_layered_summon_the_actor_without(monkeypatch) -> None:
    layered = _sync_buffer(_plan(_card(layered=True)))
    whole = _sync_buffer(_plan(_card(layered=False)))
    # Qwen2.5-0.5B: 24 decoder layers in fp32
    assert 20 * layered < whole
    _not_served(monkeypatch)
    merged = _sync_buffer(_plan(_card()))  # the merged bf16 copy the plan held before
    assert layered < 0.1 * merged


def test_engine_holds_its_adapter_slots(monkeypatch) -> None:
    from trainfit.catalog.models import resolve_model

    served = _plan(_card()).rollout.engine_weights_bytes
    _not_served(monkeypatch)
    plain = _plan(_card()).rollout.engine_weights_bytes
    slots = engine_lora_slot_bytes(resolve_model("Qwen/Qwen2.5-0.5B"), max_lora_rank=32, max_loras=1, tp=1)
    assert served - plain == pytest.approx(slots)


def test_layered_summon_is_verl_lora_only() -> None:
    with pytest.raises(CardError, match="rollout.layered_summon"):
        load_card_dict(_card(preset="trl"))
    with pytest.raises(CardError, match="rollout.layered_summon"):
        load_card_dict(_card(scope="full"))
    load_card_dict(_card(preset="trl", layered=False))


def _adapter_bytes(card: dict) -> float:
    from trainfit.catalog.models import resolve_model
    from trainfit.memory.lora import lora_trainable_params
    from trainfit.plan.resolve import trainable_spec
    from trainfit.units import BYTES_PER_DTYPE

    c = load_card_dict(card)
    return lora_trainable_params(resolve_model(c.model), trainable_spec(c).lora) * BYTES_PER_DTYPE[c.weights_dtype.value]


@pytest.mark.parametrize("layered", [False, True])
def test_fsdp2_gathers_the_adapter_alone_in_memory_and_time(layered: bool) -> None:
    """FSDP2 (the card's default): FSDP.summon_full_params leaves fully_shard's DTensors sharded and each adapter tensor
    is gathered by full_tensor() (verl-project/verl verl/utils/fsdp_utils.py collect_lora_params
    @8a694930275061f52ebd538c906ef8819af56dbd): the spike and the gathered bytes are the adapter's, not the decoder's."""
    fsdp1 = _plan(_card(layered=layered))
    fsdp2 = _plan(_card(layered=layered, fsdp_version=None))
    adapter = _adapter_bytes(_card())
    assert _sync_buffer(fsdp2) == pytest.approx(adapter / 24 if layered else adapter)
    assert _sync_buffer(fsdp2) < 0.1 * _sync_buffer(fsdp1)
    assert 0.0 < _sync(fsdp2).terms["gather"] < 0.5 * _sync(fsdp1).terms["gather"]


@pytest.mark.parametrize("strategy", ["ddp", "zero2"])
def test_an_unsharded_actor_gathers_nothing_in_memory_and_time(strategy: str) -> None:
    plan = _plan(_card(layered=False, strategy=strategy, fsdp_version=None))
    assert _sync_buffer(plan) == 0.0
    assert _sync(plan).terms["gather"] == 0.0


def test_verl_lora_rollout_takes_no_full_weight_transport() -> None:
    """verl's LoRA actor hands vLLM its adapter (add_lora); a checkpoint engine refits full weights, so the memory's
    adapter summon and the time's full refit cannot both hold: the card refuses the pair in one line."""
    card = _card(layered=False)
    card["rollout"]["weight_transport"] = "checkpoint_engine"
    with pytest.raises(CardError, match=r"rollout.weight_transport: checkpoint_engine .*allowed with preset verl,"
                                        r" scope lora and engine vllm: framework"):
        load_card_dict(card)
    card["rollout"]["weight_transport"] = "framework"
    load_card_dict(card)


def test_verl_lora_rollout_refuses_qlora() -> None:
    """verl's FSDP workers load no 4-bit base (no load_in_4bit / BitsAndBytesConfig in verl/workers at
    7dc3ee74 or 1dda039b): scope qlora with verl's vLLM rollout is refused in one line naming the field."""
    with pytest.raises(CardError, match=r"^scope: qlora .*allowed with preset verl and engine vllm: full, lora$"):
        load_card_dict(_card(scope="qlora", layered=None))
    load_card_dict(_card(scope="qlora", layered=None, preset="trl"))
