"""accelerate and DeepSpeed exports, loaded by the real libraries (accelerate 1.15, deepspeed 0.19.8)."""

from __future__ import annotations

import pytest
import yaml
from export_cards import CARDS

from trainfit.export import export, to_accelerate, to_deepspeed
from trainfit.export.common import train_world

accelerate = pytest.importorskip("accelerate")

NAMES = sorted(CARDS)


def _launch_args(path):
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    parser = launch_command_parser()
    args = parser.parse_args(["--config_file", str(path), "train.py"])
    args, defaults, mp_from_config = _validate_launch_command(args)
    # what accelerate.commands.launch.launch_command does before the DeepSpeed launcher
    fields = list(defaults.deepspeed_config.keys()) + (["mixed_precision"] if mp_from_config else [])
    args.deepspeed_fields_from_accelerate_config = ",".join(fields)
    return parser, args, defaults


@pytest.mark.parametrize("name", NAMES)
def test_accelerate_config_loads_and_launches(name, tmp_path, monkeypatch):
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file

    card = CARDS[name]()
    path = tmp_path / "accelerate.yaml"
    path.write_text(to_accelerate(card))
    cfg = load_config_from_file(str(path))  # refuses unknown top-level keys
    assert isinstance(cfg, ClusterConfig)
    assert cfg.num_machines == card.hardware.nodes
    assert cfg.mixed_precision == "bf16"
    data = yaml.safe_load(path.read_text())
    dist = cfg.distributed_type.value
    s = card.parallel.strategy.value
    expected = {"fsdp": "FSDP", "fsdp_grad_op": "FSDP", "hsdp": "FSDP", "zero1": "DEEPSPEED", "zero2": "DEEPSPEED",
                "zero3": "DEEPSPEED", "ddp": "MULTI_GPU", "single": "NO"}[s]
    assert dist == expected
    if dist != "NO":
        assert cfg.num_processes == train_world(card)

    # every plugin key is an `accelerate launch` flag (the launcher copies them onto its args unchecked)
    parser, args, _ = _launch_args(path)
    dests = {a.dest for a in parser._actions}
    for section in ("fsdp_config", "deepspeed_config"):
        for key in data.get(section, {}):
            assert key in dests, f"{section}.{key} is not an accelerate launch option"

    if dist == "FSDP":
        from accelerate.utils import FullyShardedDataParallelPlugin
        from accelerate.utils.launch import prepare_multi_gpu_env

        env = prepare_multi_gpu_env(args)
        for k, v in env.items():
            if k.startswith(("FSDP_", "ACCELERATE_")):
                monkeypatch.setenv(k, v)
        # FSDP1 syncs module states from the current CUDA device; this machine has none
        monkeypatch.setenv("FSDP_SYNC_MODULE_STATES", "false")
        monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "false")
        plugin = FullyShardedDataParallelPlugin()
        fc = data["fsdp_config"]
        assert plugin.fsdp_version == fc["fsdp_version"]
        co = plugin.cpu_offload
        offloaded = co.offload_params if hasattr(co, "offload_params") else type(co).__name__ == "CPUOffloadPolicy"
        assert offloaded == (card.parallel.offload.value == "params_and_optimizer")
        assert plugin.activation_checkpointing == card.parallel.gradient_checkpointing
        if s == "hsdp" and fc["fsdp_version"] == 2:  # FSDP2 HSDP: the parallelism config's replicate x shard mesh
            assert plugin.reshard_after_forward is True
            assert (env["PARALLELISM_CONFIG_DP_REPLICATE_SIZE"], env["PARALLELISM_CONFIG_DP_SHARD_SIZE"]) == (
                str(card.hardware.nodes), str(cfg.num_processes // card.hardware.nodes))
        elif s == "hsdp":
            assert plugin.sharding_strategy.name == "HYBRID_SHARD"
        else:
            assert plugin.reshard_after_forward is (s == "fsdp")
    if dist == "DEEPSPEED":
        pytest.importorskip("deepspeed")
        from accelerate.utils import DeepSpeedPlugin
        from accelerate.utils.launch import prepare_deepspeed_cmd_env

        _, env = prepare_deepspeed_cmd_env(args)
        for k, v in env.items():
            if k.startswith("ACCELERATE_"):
                monkeypatch.setenv(k, v)
        plugin = DeepSpeedPlugin()
        assert plugin.zero_stage == {"zero1": 1, "zero2": 2, "zero3": 3}[s]
        assert plugin.gradient_accumulation_steps == card.batch.grad_accum
        off = card.parallel.offload.value
        assert plugin.offload_optimizer_device == ("none" if off == "none" else "cpu")
        assert plugin.offload_param_device == ("cpu" if off == "params_and_optimizer" and s == "zero3" else "none")


def test_accelerate_notes_say_what_fsdp_cannot():
    e = export(CARDS["grpo-lora"](), "accelerate")
    assert any("optimizer-only offload" in n for n in e.notes)
    assert any(n.startswith("scope lora") for n in e.notes)


@pytest.fixture(scope="module")
def deepspeed():
    return pytest.importorskip("deepspeed")


@pytest.mark.parametrize("name", NAMES)
def test_deepspeed_config_validates(name, deepspeed, monkeypatch):
    import deepspeed.runtime.config as ds_config
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    card = CARDS[name]()
    cfg = to_deepspeed(card)
    zero = DeepSpeedZeroConfig(**cfg["zero_optimization"])  # pydantic: unknown keys are refused
    s = card.parallel.strategy.value
    assert int(zero.stage) == {"zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3, "hsdp": 3, "fsdp_grad_op": 2}.get(s, 0)
    off = card.parallel.offload.value
    if off != "none" and zero.stage > 0:
        assert zero.offload_optimizer is not None and zero.offload_optimizer.device == "cpu"
    if off == "params_and_optimizer" and zero.stage == 3:
        assert zero.offload_param is not None and zero.offload_param.device == "cpu"
    # the whole config, with the world size the card trains on (no process group here)
    world = train_world(card)
    monkeypatch.setattr(ds_config.dist, "get_rank", lambda *a, **k: 0)
    monkeypatch.setattr(ds_config.dist, "get_world_size", lambda *a, **k: world)
    full = ds_config.DeepSpeedConfig(cfg)
    assert full.train_batch_size == card.batch.micro_batch_size * card.batch.grad_accum * world
    assert full.gradient_accumulation_steps == card.batch.grad_accum
    assert full.gradient_clipping == 1.0
    assert full.bfloat16_config.enabled if hasattr(full, "bfloat16_config") else full.bfloat16_enabled
    assert full.zero_optimization_stage == zero.stage


def test_deepspeed_notes_for_mapped_strategies():
    e = export(CARDS["default-sft-fsdp"](), "deepspeed")
    assert e.data["zero_optimization"]["stage"] == 3
    assert any("exported as ZeRO-3" in n for n in e.notes)
    e = export(CARDS["sft-zero2-8bit"](), "deepspeed")
    assert any("adamw_8bit" in n for n in e.notes)


@pytest.mark.parametrize("name", ["sft-zero3-buckets", "sft-zero2-buckets"])
def test_deepspeed_takes_the_cards_zero_buffers(name, deepspeed):
    """#15: DeepSpeed reads the card's bucket sizes and limits from the export; "auto" is left for the
    HF Trainer (DeepSpeed alone drops it and keeps its default)."""
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    from trainfit.memory.deepspeed import DEFAULTS

    card = CARDS[name]()
    e = export(card, "deepspeed")
    zero = DeepSpeedZeroConfig(**e.data["zero_optimization"])
    ds = card.deepspeed
    stage = int(zero.stage)
    attrs = {"reduce_bucket_size": "reduce_bucket_size", "allgather_bucket_size": "allgather_bucket_size"}
    if stage == 3:
        attrs.update(stage3_prefetch_bucket_size="prefetch_bucket_size", stage3_max_live_parameters="max_live_parameters",
                     stage3_max_reuse_distance="max_reuse_distance", sub_group_size="sub_group_size",
                     stage3_param_persistence_threshold="param_persistence_threshold")
    for key, attr in attrs.items():
        want = DEFAULTS[key] if getattr(ds, key) == "auto" else getattr(ds, key)
        assert getattr(zero, attr) == want, key
        assert e.data["zero_optimization"][key] == getattr(ds, key)
    assert zero.overlap_comm is (stage == 3 if ds.overlap_comm is None else ds.overlap_comm)
    assert zero.contiguous_gradients is ds.contiguous_gradients
    if stage < 3:
        assert "stage3_prefetch_bucket_size" not in e.data["zero_optimization"]
    assert not [k for k in e.lost if k.startswith("deepspeed.")]
    assert any('written as "auto"' in n for n in e.notes) is ("auto" in ds.model_dump().values())
    # accelerate's plugin has no such settings: lost, and said
    a = export(card, "accelerate")
    changed = {k for k in a.lost if k.startswith("deepspeed.")}
    assert "deepspeed.reduce_bucket_size" in changed
    said = [n for n in a.notes if "accelerate's deepspeed_config has no ZeRO bucket settings" in n]
    assert len(said) == 1 and all(k in said[0] for k in changed)


def test_deepspeed_overlap_comm_unset_is_deepspeeds_default():
    """An unset overlap_comm is written as DeepSpeed resolves it (stage 3 only), not always true."""
    assert to_deepspeed(CARDS["sft-zero1"]())["zero_optimization"]["overlap_comm"] is False
    assert to_deepspeed(CARDS["sft-zero3-offload"]())["zero_optimization"]["overlap_comm"] is True


def test_deepspeed_import_refuses_a_bad_bucket_size():
    from trainfit.errors import InputError
    from trainfit.export.importers import import_text

    with pytest.raises(InputError, match="zero_optimization.reduce_bucket_size"):
        import_text('{"zero_optimization": {"stage": 2, "reduce_bucket_size": "big"}}', "deepspeed")
    with pytest.raises(InputError, match="zero_optimization.overlap_comm"):
        import_text('{"zero_optimization": {"stage": 2, "overlap_comm": "yes"}}', "deepspeed")
    got = import_text('{"zero_optimization": {"stage": 3, "reduce_bucket_size": 5e7, "sub_group_size": "auto"}}', "deepspeed")
    assert got.card["deepspeed"] == {"reduce_bucket_size": 50_000_000, "sub_group_size": "auto"}
