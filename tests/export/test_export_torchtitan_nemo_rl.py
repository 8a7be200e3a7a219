"""torchtitan TOML against torchtitan 0.2.2's JobConfig (its own ConfigManager when the package files and tyro are
here, else the recorded field list); NeMo RL overrides against the keys of the example configs at the pinned commit."""

from __future__ import annotations

import os
import tomllib

import pytest
import yaml
from export_cards import CARDS
from export_vendor import (
    nemo_rl_keys_recorded,
    package_dir,
    torchtitan_keys_recorded,
    torchtitan_parse_live,
)
from hypothesis import HealthCheck, assume, given, settings
from test_roundtrip import cards

from trainfit.errors import TrainfitError
from trainfit.export import ExportError, export, read_back
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict

NAMES = sorted(CARDS)
_PY = {"int": int, "str": str, "bool": bool, "float": (int, float)}


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_torchtitan(cfg: dict, keys: dict) -> None:
    """Every key a JobConfig field, every value of its type and, for a Literal, one of its choices."""
    for key, value in _flat(cfg).items():
        assert key in keys, f"{key}: not a torchtitan 0.2.2 JobConfig field"
        spec = keys[key]
        if "choices" in spec:
            assert value in spec["choices"], f"{key} = {value!r}; allowed: {spec['choices']}"
        else:
            base = spec["type"].removeprefix("<class '").removesuffix("'>").split("|")[0].strip()
            if base in _PY:
                assert isinstance(value, _PY[base]) and not (base == "int" and isinstance(value, bool)), (key, value)
            elif base.startswith("list"):
                assert isinstance(value, list), (key, value)


MODEL_OVERRIDES = {"pipeline_model_parallel_layout", "deallocate_pipeline_outputs", "moe_router_fusion"}
"""Megatron-Core TransformerConfig fields the NeMo RL export sets through megatron_cfg.model_overrides."""


def check_nemo_rl(cfg: dict, keys: dict) -> None:
    """Every key a key of the example config (a mapping where the file writes one); under
    ``policy.megatron_cfg.model_overrides`` (read for every Megatron policy by nemo_rl/models/megatron/setup.py
    setup_model_config @7ea279a, an empty mapping in grpo_math_1B.yaml) only the Megatron-Core fields the export
    writes."""
    for key in _flat({k: v for k, v in cfg.items() if k != "defaults"}):
        if key.startswith("policy.megatron_cfg.model_overrides."):
            assert key.rpartition(".")[2] in MODEL_OVERRIDES, key
            continue
        parts = key.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            assert keys.get(parent) == "dict", f"{key}: {parent} is not a mapping of {cfg['defaults']}"
        assert key in keys, f"{key}: not a key of NeMo RL's {cfg['defaults']}"


def _export(card, target):
    try:
        return export(card, target)
    except ExportError as exc:
        assert f"allowed for --to {target}" in str(exc)
        return None


@pytest.mark.parametrize("name", NAMES)
def test_torchtitan_keys_are_job_config_fields(name):
    e = _export(CARDS[name](), "torchtitan")
    if e is None:
        return
    cfg = tomllib.loads(e.text)
    assert cfg == {k: v for k, v in _nest(e.data["config"]).items()}
    check_torchtitan(cfg, torchtitan_keys_recorded()["keys"])


def _nest(sections: dict) -> dict:
    out: dict = {}
    for name, kv in sections.items():
        node = out
        for part in name.split("."):
            node = node.setdefault(part, {})
        node.update(kv)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_nemo_rl_keys_are_example_keys(name):
    e = _export(CARDS[name](), "nemo-rl")
    if e is None:
        return
    cfg = yaml.safe_load(e.text)
    assert cfg == e.data["config"]
    check_nemo_rl(cfg, nemo_rl_keys_recorded()[cfg["defaults"]])


def test_the_checks_refuse_what_the_targets_lack():
    keys = torchtitan_keys_recorded()["keys"]
    with pytest.raises(AssertionError):
        check_torchtitan({"parallelism": {"ulysses_degree": 2}}, keys)
    with pytest.raises(AssertionError):
        check_torchtitan({"activation_checkpoint": {"mode": "core_attention"}}, keys)
    with pytest.raises(AssertionError):
        check_torchtitan({"parallelism": {"tensor_parallel_degree": "8"}}, keys)
    nkeys = nemo_rl_keys_recorded()["grpo_math_1B.yaml"]
    with pytest.raises(AssertionError):
        check_nemo_rl({"defaults": "grpo_math_1B.yaml", "policy": {"megatron_cfg": {"virtual_pipeline_model_parallel_size": 2}}}, nkeys)
    with pytest.raises(AssertionError):
        check_nemo_rl({"defaults": "grpo_math_1B.yaml", "policy": {"precision": {"x": 1}}}, nkeys)


@pytest.fixture(scope="module")
def torchtitan_live():
    pkg = package_dir("torchtitan")
    if pkg is None or not (pkg / "config" / "job_config.py").is_file():
        pytest.skip("torchtitan package files not available (pip install --no-deps --target DIR torchtitan==0.2.2;"
                    " TRAINFIT_EXPORT_VENDOR=DIR)")
    try:
        import tyro  # noqa: F401
    except ImportError:
        pytest.skip("torchtitan's ConfigManager needs tyro")
    return pkg


def test_torchtitan_config_manager_reads_the_exports(torchtitan_live, tmp_path):
    """torchtitan's own ConfigManager parses every export (it refuses unknown fields) to the values written."""
    seen = 0
    for name in NAMES:
        e = _export(CARDS[name](), "torchtitan")
        if e is None:
            continue
        path = tmp_path / f"{name}.toml"
        path.write_text(e.text)
        jc = torchtitan_parse_live(torchtitan_live, path)
        for key, value in _flat(tomllib.loads(e.text)).items():
            node = jc
            for part in key.split("."):
                node = getattr(node, part)
            assert node == value, (name, key, node, value)
        seen += 1
    assert seen >= 5


def test_torchtitan_refusals():
    with pytest.raises(ExportError, match="allowed for --to torchtitan: sft"):
        export(CARDS["grpo-lora"](), "torchtitan")
    with pytest.raises(ExportError, match="allowed for --to torchtitan: full"):
        export(load_card_dict({"model": "Qwen/Qwen3-0.6B", "scope": "lora"}), "torchtitan")
    with pytest.raises(ExportError, match="no \\[model\\] name/flavor for 'Qwen/Qwen2.5-0.5B'"):
        export(load_card_dict({"model": "Qwen/Qwen2.5-0.5B"}), "torchtitan")


def test_torchtitan_parallel_sections():
    e = export(CARDS["sft-tp2-pp2-vpp2-cp2-fp8-selective"](), "torchtitan")
    cfg = tomllib.loads(e.text)
    par = cfg["parallelism"]
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"], par["context_parallel_degree"]) == (2, 2, 2)
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B" and par["pipeline_parallel_microbatch_size"] == 1
    assert par["data_parallel_shard_degree"] * par["data_parallel_replicate_degree"] == 1
    assert cfg["model"]["converters"] == ["quantize.linear.float8"]
    assert cfg["quantize"]["linear"]["float8"]["recipe_name"] == "tensorwise"
    assert cfg["training"]["local_batch_size"] == 4 and cfg["training"]["global_batch_size"] == 4
    # core_attention is Megatron's: torchtitan writes full checkpointing and says so
    assert cfg["activation_checkpoint"]["mode"] == "full"
    assert "parallel.selective_checkpointing" in e.lost
    assert any(n.startswith("parallel.selective_checkpointing core_attention") for n in e.notes)
    op = export(CARDS["sft-op-selective-fsdp"](), "torchtitan")
    assert tomllib.loads(op.text)["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    assert not [k for k in op.lost if k.startswith("parallel.")]


def test_torchtitan_hsdp_and_grad_op():
    hsdp = tomllib.loads(export(CARDS["sft-hsdp-2nodes"](), "torchtitan").text)["parallelism"]
    assert (hsdp["data_parallel_replicate_degree"], hsdp["data_parallel_shard_degree"]) == (2, 8)
    go = tomllib.loads(export(CARDS["sft-fsdp-grad-op-offload"](), "torchtitan").text)
    assert go["parallelism"]["fsdp_reshard_after_forward"] == "never" and go["training"]["enable_cpu_offload"] is True


def test_torchtitan_import_needs_the_gpu_count():
    with pytest.raises(Exception, match="needs the GPU count"):
        import_text("[parallelism]\ntensor_parallel_degree = 2\n", "torchtitan")
    d = import_text("# launch: torchrun --nnodes=1 --nproc_per_node=8 -m torchtitan.train\n"
                    "[parallelism]\ntensor_parallel_degree = 2\n[training]\nlocal_batch_size = 2\nglobal_batch_size = 16\n",
                    "torchtitan").card
    assert d["parallel"]["tensor_parallel"] == 2 and d["hardware"]["gpus_per_node"] == 8
    assert d["batch"] == {"micro_batch_size": 2, "grad_accum": 2, "seq_len": 2048}
    assert d["parallel"]["gradient_checkpointing"] is True  # torchtitan's default: selective every 2nd layer, read as all


def test_nemo_rl_backends():
    moe = export(CARDS["grpo-30b-a3b-megatron-ep8"](), "nemo-rl").data["config"]
    mc = moe["policy"]["megatron_cfg"]
    assert mc["enabled"] and moe["policy"]["dtensor_cfg"] == {"enabled": False}
    assert mc["expert_model_parallel_size"] == 8 and mc["optimizer"]["optimizer_cpu_offload"] is True
    assert moe["policy"]["generation"]["vllm_cfg"]["tensor_parallel_size"] == 4
    fp8 = export(CARDS["sft-tp2-pp2-vpp2-cp2-fp8-selective"](), "nemo-rl")
    mc = fp8.data["config"]["policy"]["megatron_cfg"]
    assert mc["fp8_cfg"] == {"enabled": True, "fp8": "e4m3", "fp8_recipe": "tensorwise"}
    assert mc["recompute_granularity"] == "selective" and mc["recompute_modules"] == ["core_attn"]
    assert "parallel.virtual_stages" in fp8.lost  # no virtual-pipeline key in NeMo RL's examples
    back = read_back(CARDS["sft-tp2-pp2-vpp2-cp2-fp8-selective"](), fp8)
    assert back.precision.compute.value == "fp8" and back.precision.fp8_recipe.value == "current"
    ul = export(CARDS["sft-8b-ulysses4-64k"](), "nemo-rl")
    dc = ul.data["config"]["policy"]["dtensor_cfg"]
    assert dc["enabled"] and dc["context_parallel_size"] == 4
    assert ul.lost["parallel.context_parallel_kind"] == {"card": "ulysses", "file": "ring"}


def test_nemo_rl_refusals():
    with pytest.raises(ExportError, match="allowed for --to nemo-rl: sft, grpo"):
        export(CARDS["dpo-full-precomputed"](), "nemo-rl")
    with pytest.raises(ExportError, match="allowed for --to nemo-rl: full, lora"):
        export(CARDS["sft-ddp-qlora"](), "nemo-rl")


def test_recorded_sources_name_their_versions():
    assert "torchtitan 0.2.2" in torchtitan_keys_recorded()["source"]
    assert "7ea279abfbeb698b092856d0dab61e7cf39bc909" in nemo_rl_keys_recorded()["source"]


@settings(max_examples=int(os.environ.get("TRAINFIT_KEYS_EXAMPLES", "40")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=cards())
def test_generated_cards_write_only_known_keys(data):
    """verl (FSDP and Megatron), NeMo RL and torchtitan exports of generated cards use only the recorded keys."""
    from export_vendor import verl_keys_recorded
    from test_export_verl_openrlhf import _check_override

    try:
        card = load_card_dict(data)
    except (TrainfitError, ValueError):
        assume(False)
    e = _export(card, "verl")
    if e is not None:
        rec = verl_keys_recorded()
        for o in e.data["overrides"]:
            _check_override(o, rec[e.data["config"]], rec["groups"])
    e = _export(card, "nemo-rl")
    if e is not None:
        check_nemo_rl(e.data["config"], nemo_rl_keys_recorded()[e.data["config"]["defaults"]])
    e = _export(card, "torchtitan")
    if e is not None:
        check_torchtitan(tomllib.loads(e.text), torchtitan_keys_recorded()["keys"])
