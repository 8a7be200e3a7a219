"""Read a launch config back into card data: ``trainfit import FILE --from TARGET``.

The inverse of ``trainfit.export``: each reader takes the text that exporter writes (and the
same kind of file written by hand) and returns card data for ``load_card_dict``. Nothing in the
file is executed: YAML through ``yaml.safe_load``, JSON through ``json.loads``, the TRL Python
module through ``ast`` (literal values only), shell scripts through ``shlex`` (no shell runs).

What a file does not say is left to the card's defaults; what it says that a card has no field
for is returned as a note. A framework behaviour that is fixed (not a setting) is written as the
card value it amounts to: DeepSpeed's fp32 master weights and optimizer states, TRL's and
OpenRLHF's per-parameter weight sync, verl's bucketed sync and its vLLM sleep level.
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass, field
from typing import Any

from trainfit.errors import InputError
from trainfit.export.common import TARGETS, hydra_unquote
from trainfit.spec.dotted import merge_under, set_dotted

MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Imported:
    """Card data read from a launch config, and what the file holds that a card cannot say."""

    target: str
    card: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    required: dict[str, str] = field(default_factory=dict)
    """Card fields the file names but the shell fills in when the script runs (``model: $MODEL_PATH``): card key ->
    the file's key and word. Left out of ``card``; ``trainfit import`` refuses the card unless ``--set``/``--base``
    gives them (``missing_required``)."""
    left_open: dict[str, str] = field(default_factory=dict)
    """Card fields whose file key is absent or "auto" (the Hugging Face Trainer fills it from its own arguments): card
    key -> the file's key and what it holds. Left out of ``card`` so that ``--base`` or ``--set`` fills them, else the
    card default; ``left_open_notes`` says which value was taken."""


def left_open_notes(imported: Imported, data: dict[str, Any], card: Any, *, set_keys: frozenset[str] = frozenset()) -> list[str]:
    """One note per ``Imported.left_open`` field: the file's key, and the value the card took for it, from ``--set``
    (``set_keys``), the ``--base`` card (present in ``data``) or the card default (read off the validated ``card``)."""
    notes = []
    for key, why in imported.left_open.items():
        node = _dotted_get(data, key)
        value: Any = card
        for part in key.split("."):
            value = getattr(value, part, None)
        shown = getattr(value, "value", value)
        took = ("from --set" if key in set_keys else "from the --base card" if node is not None
                else "is the card default")
        notes.append(f"{why}: left open by the file; {key} {shown} {took}")
    return notes


def _dotted_get(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def missing_required(imported: Imported, data: dict[str, Any]) -> None:
    """Refuse, in one line, a card that still lacks a field the file left to the shell (``Imported.required``) after
    ``--base`` and ``--set`` were applied to ``data``."""
    for key, why in imported.required.items():
        node: Any = data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            raise _bad(imported.target, f"{why}: pass --set {key}=ID or write the value")


def _bad(target: str, why: str) -> InputError:
    return InputError(f"--from {target}: {why}")


def _offload_device(target: str, key: str, v: Any, *, read: bool = True) -> bool:
    """Whether a DeepSpeed offload ``device`` offloads to host memory: ``cpu`` yes, ``none`` (or absent) no. DeepSpeed
    also takes ``nvme`` (ZeRO-Infinity: the states paged to NVMe through host buffers), which the card has no field
    for: refused when ``read``. The names are ``OffloadDeviceEnum``'s values, compared as written (deepspeedai/DeepSpeed
    deepspeed/runtime/zero/offload_config.py l.14-18 @cf44300453eb0af79ed84ed8f1cb49d57478bd76, v0.19.5): 'CPU' is
    refused there and here. ``read`` False (a setting DeepSpeed ignores at this stage): only checked."""
    if v is None or v == "none":
        return False
    if v == "cpu":
        return read
    if v == "nvme":
        if read:
            raise _bad(target, f"{key}: nvme (ZeRO-Infinity's NVMe offload) has no card field; allowed: none, cpu")
        return False
    raise _bad(target, f"{key}: {str(v)[:40]!r}; allowed: none, cpu (DeepSpeed also takes nvme)")


_HF_AUTO_TARGETS = ("deepspeed", "trl")
"""Importers whose files the Hugging Face Trainer reads, filling 'auto' values (``HfTrainerDeepSpeedConfig``)."""


def _num(target: str, key: str, v: Any, kind: type = int) -> Any:
    """A number from the file, refused in one line when it is not one."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and isinstance(v, float) and not v.is_integer()):
        given = v  # echoed as the file has it (the message said 'got None' for every refusal)
        try:
            v = kind(str(v)) if not isinstance(v, bool) else None
        except (TypeError, ValueError):
            v = None
        if v is None:
            # the Trainer fills 'auto' in a DeepSpeed JSON or its own arguments; verl's or accelerate's 'auto' is no
            # such value
            hint = ("; 'auto' is filled in by the Hugging Face Trainer at run time: write the number"
                    if given == "auto" and target in _HF_AUTO_TARGETS else "")
            shown = "null" if given is None else repr(str(given)[:60])
            raise _bad(target, f"{key}: expected a number, got {shown}{hint}")
    return kind(v)


UNTYPED_YAML_TARGETS = ("verl", "nemo-rl")
"""Importers whose framework loads its YAML into an untyped OmegaConf tree and reads plain values: NeMo RL's
``load_config`` is ``OmegaConf.load`` with no structured schema (NVIDIA-NeMo/RL nemo_rl/utils/config.py l.51-100
@7ea279abfbeb698b092856d0dab61e7cf39bc909), Hydra overrides are applied to that tree (``parse_hydra_overrides``) and
examples/run_grpo.py l.87-94 turns it into plain containers (``OmegaConf.to_container``); the TypedDict configs are
not checked at run time. No ``BooleanNode`` converts the value: a quoted 'no' or a ``key=off`` override stays text and
is true where the code tests it. verl is read the same way: its FSDP workers read the switches from the Hydra
DictConfig of ppo_trainer.yaml (untyped YAML plus overrides) and test their truth, e.g. ``enable_gradient_checkpointing=
self.config.model.get("enable_gradient_checkpointing", False)`` then ``if enable_gradient_checkpointing:``
(volcengine/verl verl/workers/fsdp_workers.py l.797 and l.439 @b178a3cd56f58b2d502255daba591e92833930a7); the typed
``HFModelConfig`` (verl/workers/config/model.py l.113, converted through ``OmegaConf.structured``, where a BooleanNode
would apply) is not what that path reads, so ``=yes`` or ``=Off`` stays text there. Read here: YAML booleans, or the
integers 0 and 1 by their truth; text refused."""
VERL_ESTIMATORS = ("gae", "grpo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "opo",
                   "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized", "optimal_token_baseline",
                   "tir_optimal_token_baseline")
"""verl's ``algorithm.adv_estimator`` names: ``AdvantageEstimator`` (volcengine/verl verl/trainer/ppo/core_algos.py
l.88-109 @b178a3cd56f58b2d502255daba591e92833930a7); only gae builds a critic unless ``critic.enable`` is set."""
PYTHON_CALL_TARGETS = ("trl",)
"""Importers that read a Python script calling the config class directly (``SFTConfig(...)``, ``GRPOConfig(...)``):
no argument parser is involved (transformers' ``HfArgumentParser.string_to_bool`` converts command-line text only), the
dataclass stores the value as given and the trainer tests its truth (``if args.gradient_checkpointing:``), so
``gradient_checkpointing='0'`` is kept as '0' and is true. Read here: ``True``/``False``, or the integers 0 and 1 by
their truth; text refused, never read as the reverse of the run."""


def _switch(target: str, key: str, v: Any, default: bool) -> bool:
    """A switch from the file, read as the target framework's own parser reads it (``UNTYPED_YAML_TARGETS``,
    ``PYTHON_CALL_TARGETS``; other targets: true or false, YAML/JSON booleans or their text), ``default`` when absent or
    null; anything that parser refuses (a float, a list, 'abc') refused in one line naming the key and the allowed
    values, never read by its truthiness."""
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    if target in UNTYPED_YAML_TARGETS:
        if isinstance(v, int) and v in (0, 1):
            return v == 1
        raise _bad(target, f"{key}: expected true or false, got {str(v)[:40]!r}; {'NeMo RL' if target == 'nemo-rl' else target} loads the YAML"
                           " untyped and tests the value's truth (text such as 'no' is true); write true or false")
    if target in PYTHON_CALL_TARGETS:
        if isinstance(v, int) and v in (0, 1):
            return v == 1
        raise _bad(target, f"{key}: expected True or False, got {str(v)[:40]!r}; the config class (SFTConfig(...), GRPOConfig(...)) stores the"
                           " value as given and tests its truth; write True or False")
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise _bad(target, f"{key}: expected true or false, got {str(v)[:40]!r}; allowed: true, false")


def _ratio(total: int, part: int) -> int | None:
    return total // part if part > 0 and total % part == 0 and total >= part else None


# -- accelerate / DeepSpeed -----------------------------------------------------------------------

_DS_STRATEGY = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
_COMPUTE = {"bf16": "bf16", "fp16": "fp16", "no": "fp32", "fp32": "fp32"}


def _deepspeed_precision(d: dict[str, Any], stage: int, compute: str) -> None:
    """DeepSpeed's bf16/fp16 optimizer keeps fp32 master weights and fp32 optimizer states for its
    ZeRO partition (deepspeed/runtime/bf16_optimizer.py, fp16/fused_optimizer.py)."""
    if stage >= 1 and compute in ("bf16", "fp16"):
        set_dotted(d, "precision.master_weights", "fp32")
        set_dotted(d, "precision.optimizer_states", "fp32")


_ZERO_COUNTS = ("reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size", "stage3_max_live_parameters",
                "stage3_max_reuse_distance", "stage3_param_persistence_threshold", "sub_group_size")
_ZERO_SWITCHES = ("overlap_comm", "contiguous_gradients")


def _zero_settings(t: str, zero: dict[str, Any], d: dict[str, Any]) -> None:
    """``zero_optimization`` bucket sizes and switches into the card's ``deepspeed`` section: an element
    count (5e8 as JSON writes it) or "auto", kept as written (the HF Trainer fills "auto")."""
    for k in _ZERO_COUNTS:
        if k not in zero:
            continue
        v = zero[k]
        if isinstance(v, str) and v.strip().lower() == "auto":
            set_dotted(d, f"deepspeed.{k}", "auto")
            continue
        n = _num(t, f"zero_optimization.{k}", v, float) if not isinstance(v, str) else None
        if n is None or not n.is_integer() or not 0 <= n <= 1e13:
            raise _bad(t, f"zero_optimization.{k}: {v!r}; allowed: auto or an element count from 0 to 1e13")
        set_dotted(d, f"deepspeed.{k}", int(n))
    for k in _ZERO_SWITCHES:
        if k in zero and zero[k] is not None:
            if not isinstance(zero[k], bool):
                raise _bad(t, f"zero_optimization.{k}: {zero[k]!r}; allowed: true, false")
            set_dotted(d, f"deepspeed.{k}", zero[k])


_DEPRECATED_OFFLOAD = {"cpu_offload": "offload_optimizer", "cpu_offload_param": "offload_param"}
"""DeepSpeed's deprecated ZeRO switches and the block each still turns on: ``cpu_offload: true`` is
``offload_optimizer: {device: cpu}``, ``cpu_offload_param: true`` is ``offload_param: {device: cpu}``, and giving a
switch with its block is refused (deepspeedai/DeepSpeed deepspeed/runtime/zero/config.py l.181-213 and
runtime/config_utils.py ``_process_deprecated_field`` l.60-90 @cf44300453eb0af79ed84ed8f1cb49d57478bd76, v0.19.5)."""


def _zero_offload(t: str, zero: dict[str, Any], stage: int, notes: list[str],
                  keys: tuple[str, str] = ("zero_optimization.offload_optimizer.device",
                                           "zero_optimization.offload_param.device")) -> str:
    """The card's ``parallel.offload`` from ``zero_optimization``. ``offload_param`` acts at ZeRO stage 3 only: the
    engine passes ``offload_param_config`` in its stage-3 branches alone (deepspeedai/DeepSpeed deepspeed/runtime/
    engine.py l.2389-2409 and l.2457 @cf44300453eb0af79ed84ed8f1cb49d57478bd76, v0.19.5; config.py: "Valid only with
    stage 3"), so below it the block is checked and said, not planned. ``keys``: the file's names of the two devices."""
    blocks: dict[str, Any] = {}
    for old, new in _DEPRECATED_OFFLOAD.items():
        v = zero.get(old)
        if v is not None and not isinstance(v, bool):
            raise _bad(t, f"zero_optimization.{old}: {str(v)[:40]!r}; allowed: true, false")
        if v is not None and zero.get(new) is not None:
            raise _bad(t, f"zero_optimization.{old} and zero_optimization.{new}: give one; DeepSpeed refuses both"
                          f" ({old} is the deprecated form of {new})")
        blocks[new] = {"device": "cpu"} if v else zero.get(new)
    for name, block in blocks.items():
        if block is not None and not isinstance(block, dict):
            raise _bad(t, f"zero_optimization.{name}: expected an object")
    opt, par = blocks["offload_optimizer"] or {}, blocks["offload_param"] or {}
    off = "optimizer" if _offload_device(t, keys[0], opt.get("device", "none")) else "none"
    ratio = opt.get("ratio")
    if ratio is not None:
        # DeepSpeedZeroOffloadOptimizerConfig.ratio: Field(1.0, ge=0.0, le=1.0), "Percentage of offloaded optimizer
        # states to CPU Adam. Only valid with ZeRO Stage 3." (deepspeedai/DeepSpeed deepspeed/runtime/zero/
        # offload_config.py, tag v0.19.8): a partial offload keeps the rest on the GPU, which the card does not plan
        where = keys[0].rsplit(".", 1)[0] + ".ratio"
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
            raise _bad(t, f"{where}: {str(ratio)[:40]!r}; allowed: a share from 0 to 1 (DeepSpeed refuses others)")
        if off != "none" and ratio < 1:
            notes.append(f"{where} {ratio:g}: DeepSpeed offloads that share of the optimizer states and keeps the rest"
                         f" ({1 - ratio:.0%}) on the GPU; the card plans them all on the host, so the GPU memory is"
                         " planned low")
    param_here = _offload_device(t, keys[1], par.get("device", "none"), read=stage == 3)
    if stage == 0 and off != "none":
        # offload_optimizer is "Valid with stage 1, 2, and 3" (deepspeed/runtime/zero/offload_config.py l.52-53
        # @1978617c691b2c992a17902975187ef8d61176fa): stage 0 builds no ZeRO optimizer to offload
        notes.append(f"{keys[0]} {str(opt.get('device'))[:40]}: DeepSpeed offloads the optimizer from ZeRO stage 1; at"
                     " ZeRO stage 0 it is ignored and not planned")
        off = "none"
    if stage == 3 and param_here:
        off = "params_and_optimizer"
    elif stage != 3 and par.get("device", "none") != "none":
        notes.append(f"{keys[1]} {str(par['device'])[:40]}: DeepSpeed offloads parameters at ZeRO stage 3 only; at stage"
                     f" {stage} it is ignored and not planned")
    return off


_HF_AUTO = "auto"
"""The Hugging Face Trainer's placeholder in a DeepSpeed JSON: ``HfTrainerDeepSpeedConfig.fill_match`` replaces a value
equal to "auto" by the Trainer's own argument (huggingface/transformers src/transformers/integrations/deepspeed.py
l.119-121 @02348331baea70aaedce3b76c18481b2b441fe2d): train_micro_batch_size_per_gpu from per_device_train_batch_size,
gradient_accumulation_steps from gradient_accumulation_steps, train_batch_size from their product x world size
(l.140-156), fp16.enabled and bf16.enabled from its fp16 and bf16 arguments (l.185-196). Compared as written, as
there."""
_DS_BATCH_FILLED_FROM = {"train_micro_batch_size_per_gpu": "per_device_train_batch_size",
                         "gradient_accumulation_steps": "gradient_accumulation_steps"}


def _ds_batch_key(cfg: dict[str, Any], key: str, card_key: str, d: dict[str, Any], left_open: dict[str, str]) -> int | None:
    """A DeepSpeed batch key into ``card_key``; absent or "auto": left open (``Imported.left_open``), None returned."""
    if key not in cfg:
        left_open[card_key] = f"{key} absent"
        return None
    if cfg[key] == _HF_AUTO:
        left_open[card_key] = f"{key} 'auto' (the Hugging Face Trainer fills it from {_DS_BATCH_FILLED_FROM[key]})"
        return None
    n = _num("deepspeed", key, cfg[key])
    set_dotted(d, card_key, n)
    return n


def read_deepspeed(text: str) -> Imported:
    t = "deepspeed"
    from trainfit.spec.safe_yaml import load_json_limited

    # DeepSpeed refuses a key given twice ("Duplicate keys in DeepSpeed config", runtime/config_utils.py
    # dict_raise_error_on_duplicate_keys, the object_pairs_hook of DeepSpeedConfig's json.load, tag v0.19.8)
    cfg = load_json_limited(text, what="--from deepspeed", unique_keys=True)
    if not isinstance(cfg, dict):
        raise _bad(t, "the file must hold a JSON object")
    d: dict[str, Any] = {}
    notes: list[str] = []
    left_open: dict[str, str] = {}
    mb = _ds_batch_key(cfg, "train_micro_batch_size_per_gpu", "batch.micro_batch_size", d, left_open)
    ga = _ds_batch_key(cfg, "gradient_accumulation_steps", "batch.grad_accum", d, left_open)
    zero = cfg.get("zero_optimization") or {}
    if not isinstance(zero, dict):
        raise _bad(t, "zero_optimization: expected an object")
    stage = _num(t, "zero_optimization.stage", zero.get("stage", 0))
    if stage not in _DS_STRATEGY:
        raise _bad(t, f"zero_optimization.stage: {stage} is not a ZeRO stage; allowed: 0, 1, 2, 3")
    strategy = _DS_STRATEGY[stage]
    world = None
    if "train_batch_size" in cfg and cfg["train_batch_size"] != _HF_AUTO:
        total = _num(t, "train_batch_size", cfg["train_batch_size"])
        if mb is None or ga is None:
            notes.append(f"train_batch_size {total}: the GPU count is left open (micro-batch x accumulation is not"
                         " stated in the file); the --base card or the card default gives it")
        else:
            world = _ratio(total, mb * ga)
            if world is None:
                notes.append("train_batch_size is not a multiple of micro-batch x accumulation; GPU count left at the card default")
    hpz = zero.get("zero_hpz_partition_size")
    if stage == 3 and hpz and _num(t, "zero_hpz_partition_size", hpz) > 1:
        strategy = "hsdp"
        per_node = _num(t, "zero_hpz_partition_size", hpz)
        if world is not None and world % per_node == 0:
            set_dotted(d, "hardware.gpus_per_node", per_node)
            set_dotted(d, "hardware.nodes", world // per_node)
    elif world is not None:
        set_dotted(d, "hardware.gpus_per_node", world)
        set_dotted(d, "hardware.nodes", 1)
        notes.append("hardware: a DeepSpeed config holds the world size only; read as one node (--set hardware.nodes=N)")
    set_dotted(d, "parallel.strategy", strategy)
    set_dotted(d, "parallel.offload", _zero_offload(t, zero, stage, notes))
    _zero_settings(t, zero, d)
    compute: str | None = "fp32"
    if all(isinstance(cfg.get(k), dict) and cfg[k].get("enabled") is True for k in ("bf16", "fp16")):
        # DeepSpeedConfig: assert not (fp16 and bf16 enabled), 'bfloat16 and fp16 modes cannot be simultaneously
        # enabled' (deepspeed/runtime/config.py, tag v0.19.8)
        raise _bad(t, "bf16.enabled and fp16.enabled are both true; DeepSpeed refuses both at once; allowed: one of them")
    enabled = {k: cfg[k].get("enabled") for k in ("bf16", "fp16") if isinstance(cfg.get(k), dict)}
    if enabled.get("bf16") is True:
        compute = "bf16"
    elif enabled.get("fp16") is True:
        compute = "fp16"
    elif _HF_AUTO in enabled.values():
        # the Trainer fills bf16.enabled / fp16.enabled from its bf16 / fp16 arguments: the file leaves the precision
        # open ("auto" was read as true, i.e. bf16, whatever the Trainer was given)
        compute = None
        said = " and ".join(f"{k}.enabled" for k, v in enabled.items() if v == _HF_AUTO)
        left_open["precision.compute"] = f"{said} 'auto' (the Hugging Face Trainer fills it from its bf16 / fp16 arguments)"
    elif any(enabled.values()):
        compute = "bf16" if enabled.get("bf16") else "fp16"
    if compute is not None:
        set_dotted(d, "precision.compute", compute)
    # an open precision is written with DeepSpeed's fp32 masters and states: the 16-bit runs the Trainer fills it for
    _deepspeed_precision(d, stage, compute or "bf16")
    tpc = cfg.get("tensor_parallel")
    if isinstance(tpc, dict) and tpc.get("autotp_size"):
        tp = _num(t, "tensor_parallel.autotp_size", tpc["autotp_size"])
        if tp > 1:
            set_dotted(d, "parallel.tensor_parallel", tp)
    gad = (cfg.get("data_types") or {}).get("grad_accum_dtype") if isinstance(cfg.get("data_types"), dict) else None
    if gad:
        if gad not in ("fp32", "bf16", "fp16"):
            raise _bad(t, f"data_types.grad_accum_dtype: {gad!r}; allowed: fp32, bf16, fp16")
        set_dotted(d, "precision.grads", gad)
    if "optimizer" in cfg:
        notes.append("optimizer: a DeepSpeed optimizer block has no card field; the card's optimizer is AdamW unless set")
    return Imported(t, d, notes, left_open=left_open)


_ACCELERATE_KEYS = frozenset({
    # BaseConfig, and the two old keys its process_config converts (fp16, dynamo_backend)
    "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug", "fp16", "dynamo_backend",
    # ClusterConfig
    "num_processes", "machine_rank", "num_machines", "gpu_ids", "main_process_ip", "main_process_port",
    "rdzv_backend", "same_network", "main_training_function", "enable_cpu_affinity", "fp8_config",
    "deepspeed_config", "fsdp_config", "parallelism_config", "megatron_lm_config", "mpirun_config",
    "downcast_bf16", "tpu_name", "tpu_zone", "tpu_use_cluster", "tpu_use_sudo", "command_file", "commands",
    "tpu_vm", "tpu_env", "dynamo_config",
    # ClusterConfig fields of earlier releases (config_args.py @002dd35a68fd5d11953d1749dbd3e50a88db3062)
    "tp_config", "ipex_config",
})
"""Top-level keys ``accelerate launch --config_file`` loads for a local machine: the fields of ``BaseConfig`` and
``ClusterConfig`` (huggingface/accelerate src/accelerate/commands/config/config_args.py l.76-81, l.179-217
@16cb6eb80dd9aa8b4df1a63ef57863e455d53b83). ``process_config`` refuses a file without ``distributed_type``
(l.109-110), so ``trainfit import`` does too, instead of planning a card of defaults for a file accelerate would not
run (a DeepSpeed JSON given as ``--from accelerate``). Its ``from_yaml_file`` also refuses a key it has no field for
(l.154-159), but a newer accelerate adds fields: such a key is listed in a note as not read. The old keys ``fp16``
and ``dynamo_backend`` are converted as ``process_config`` converts them (l.113-119): ``fp16: true`` is
``mixed_precision: fp16`` unless mixed_precision is given, ``dynamo_backend: X`` is ``dynamo_config: {dynamo_backend:
X}`` (``{}`` for NO)."""


def read_accelerate(text: str) -> Imported:
    from trainfit.spec.safe_yaml import load_yaml_limited

    t = "accelerate"
    cfg = load_yaml_limited(text, what="--from accelerate")
    if not isinstance(cfg, dict):
        raise _bad(t, "the file must hold a mapping")
    unknown = sorted(str(k) for k in cfg if k not in _ACCELERATE_KEYS)
    listed = f"{', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}"[:200]
    if "distributed_type" not in cfg:
        raise _bad(t, "distributed_type: missing; accelerate refuses a config file without it; allowed: NO,"
                      " MULTI_GPU, DEEPSPEED, FSDP" + (f" (keys {listed}: is this an accelerate config? a DeepSpeed"
                                                       " JSON imports with --from deepspeed)" if unknown else ""))
    d: dict[str, Any] = {}
    notes: list[str] = []
    if unknown:  # a key a newer accelerate added, or a typo: said, not read (this reader knows the keys above)
        notes.append(f"key{'s' if len(unknown) > 1 else ''} {listed}: not an accelerate config key this reader knows;"
                     " not read")
    cfg = dict(cfg)
    if "mixed_precision" not in cfg:  # process_config: the old fp16 switch is mixed_precision fp16
        cfg["mixed_precision"] = "fp16" if _switch(t, "fp16", cfg.get("fp16"), False) else "no"
    cfg.pop("fp16", None)
    if "dynamo_backend" in cfg:  # process_config: the old key becomes dynamo_config
        backend = cfg.pop("dynamo_backend")
        cfg["dynamo_config"] = {} if str(backend).upper() == "NO" else {"dynamo_backend": backend}
    machines = _num(t, "num_machines", cfg.get("num_machines", 1))
    procs = _num(t, "num_processes", cfg.get("num_processes", 1))
    if machines < 1 or procs < 1:
        raise _bad(t, "num_machines and num_processes must be at least 1")
    per_node = _ratio(procs, machines)
    if per_node is None:
        raise _bad(t, f"num_processes {procs} is not a multiple of num_machines {machines}")
    set_dotted(d, "hardware.nodes", machines)
    set_dotted(d, "hardware.gpus_per_node", per_node)
    mp = str(cfg.get("mixed_precision", "no"))
    if mp not in _COMPUTE:
        raise _bad(t, f"mixed_precision: {mp!r}; allowed: no, bf16, fp16")
    compute = _COMPUTE[mp]
    set_dotted(d, "precision.compute", compute)
    dist = str(cfg.get("distributed_type", "NO"))
    if dist == "NO":
        set_dotted(d, "parallel.strategy", "single")
    elif dist == "MULTI_GPU":
        set_dotted(d, "parallel.strategy", "ddp")
    elif dist == "DEEPSPEED":
        ds = cfg.get("deepspeed_config") or {}
        if not isinstance(ds, dict):
            raise _bad(t, "deepspeed_config: expected a mapping")
        if ds.get("deepspeed_config_file"):
            notes.append("deepspeed_config.deepspeed_config_file: import that JSON with --from deepspeed")
        stage = _num(t, "deepspeed_config.zero_stage", ds.get("zero_stage", 0))
        if stage not in _DS_STRATEGY:
            raise _bad(t, f"deepspeed_config.zero_stage: {stage}; allowed: 0, 1, 2, 3")
        set_dotted(d, "parallel.strategy", _DS_STRATEGY[stage])
        # accelerate's DeepSpeedPlugin writes both devices into zero_optimization; DeepSpeed reads them as above
        set_dotted(d, "parallel.offload", _zero_offload(t, {
            "offload_optimizer": {"device": ds.get("offload_optimizer_device", "none")},
            "offload_param": {"device": ds.get("offload_param_device", "none")}}, stage, notes,
            ("deepspeed_config.offload_optimizer_device", "deepspeed_config.offload_param_device")))
        if "gradient_accumulation_steps" in ds:
            set_dotted(d, "batch.grad_accum", _num(t, "gradient_accumulation_steps", ds["gradient_accumulation_steps"]))
        _deepspeed_precision(d, stage, compute)
    elif dist == "FSDP":
        fc = cfg.get("fsdp_config") or {}
        if not isinstance(fc, dict):
            raise _bad(t, "fsdp_config: expected a mapping")
        version = _num(t, "fsdp_config.fsdp_version", fc.get("fsdp_version", 1))
        if version == 2:
            strategy = "fsdp" if _switch(t, "fsdp_reshard_after_forward", fc.get("fsdp_reshard_after_forward"), True) else "fsdp_grad_op"
            pc = cfg.get("parallelism_config") or {}
            if isinstance(pc, dict) and _num(t, "parallelism_config.parallelism_config_dp_replicate_size",
                                             pc.get("parallelism_config_dp_replicate_size", 1)) > 1:
                strategy = "hsdp"  # accelerate/parallelism_config.py: dp_replicate_size > 1 and dp_shard_size > 1
                shard = pc.get("parallelism_config_dp_shard_size")
                if shard is not None:
                    shard = _num(t, "parallelism_config.parallelism_config_dp_shard_size", shard)
                if shard is not None and shard != per_node:
                    # the shard dimension of the (dp_replicate, dp_shard) mesh: the card's HSDP shard group
                    set_dotted(d, "parallel.hsdp_shard_size", shard)
        else:
            ss = str(fc.get("fsdp_sharding_strategy", "FULL_SHARD"))
            strategy = {"FULL_SHARD": "fsdp", "1": "fsdp", "SHARD_GRAD_OP": "fsdp_grad_op", "2": "fsdp_grad_op",
                        "HYBRID_SHARD": "hsdp", "4": "hsdp", "NO_SHARD": "ddp", "3": "ddp"}.get(ss)
            if strategy is None:
                raise _bad(t, f"fsdp_config.fsdp_sharding_strategy: {ss!r}; allowed: FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, NO_SHARD")
        set_dotted(d, "parallel.strategy", strategy)
        if strategy != "ddp":
            set_dotted(d, "parallel.fsdp_version", "fsdp2" if version == 2 else "fsdp1")
        set_dotted(d, "parallel.offload", "params_and_optimizer" if _switch(t, "fsdp_offload_params", fc.get("fsdp_offload_params"), False) else "none")
        gc = _switch(t, "fsdp_activation_checkpointing", fc.get("fsdp_activation_checkpointing"), False)
        set_dotted(d, "parallel.gradient_checkpointing", gc)
        if _switch(t, "fsdp_activation_checkpointing_offload", fc.get("fsdp_activation_checkpointing_offload"), False):
            set_dotted(d, "parallel.activation_offload", True)
    else:
        raise _bad(t, f"distributed_type: {dist!r}; allowed: NO, MULTI_GPU, DEEPSPEED, FSDP")
    if isinstance(cfg.get("dynamo_config"), dict) and str(cfg["dynamo_config"].get("dynamo_backend", "NO")).upper() != "NO":
        set_dotted(d, "parallel.compile", True)
    return Imported(t, d, notes)


# -- TRL ------------------------------------------------------------------------------------------

_TRL_METHOD = {"SFTConfig": "sft", "RewardConfig": "rm", "DPOConfig": "dpo", "GRPOConfig": "grpo", "TrainingArguments": "ppo"}
_TRL_OPTIM = {
    "adamw_torch_fused": ("adamw", "fused"), "adamw_torch": ("adamw", "foreach"), "adamw_8bit": ("adamw_8bit", None),
    "paged_adamw_32bit": ("paged_adamw", None), "paged_adamw_8bit": ("paged_adamw_8bit", None), "sgd": ("sgd", None),
    "adafactor": ("adafactor", None),
}
_HF_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
_HF_ATTN = {"sdpa": "sdpa", "flash_attention_2": "flash", "eager": "eager"}


def _literal(node: ast.AST, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise _bad("trl", f"{where}: not a literal value (line {getattr(node, 'lineno', '?')})") from None


class _ConfigArgs(dict):
    """A TRL config's literal keyword values, and the keys whose value is not a literal (``unread``: key -> line).
    Such a key is listed in a note as not read; reading it (``in``, ``[]``, ``get``: every read of ``read_trl``, so a
    key the plan needs) refuses the file naming it, as a non-literal value always did."""

    def __init__(self, values: dict[str, Any], *, unread: dict[str, int]) -> None:
        super().__init__(values)
        self.unread = unread

    def _refuse_unread(self, key: object) -> None:
        if key in self.unread:
            raise _bad("trl", f"args.{key}: not a literal value (line {self.unread[key]}); the plan reads it")

    def __contains__(self, key: object) -> bool:
        self._refuse_unread(key)
        return super().__contains__(key)

    def __getitem__(self, key: str) -> Any:
        self._refuse_unread(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._refuse_unread(key)
        return super().get(key, default)


def _config_kwargs(node: ast.Call) -> _ConfigArgs:
    """The config call's keyword values (``_call_kwargs``); a value that is not a literal (``args.x.replace(...)``,
    a name) is kept out and its key listed in ``unread`` instead of refusing the file (``_ConfigArgs``)."""
    unread: dict[str, int] = {}
    literal = []
    for kw in node.keywords:
        if kw.arg is not None and kw.arg != "model_init_kwargs":
            try:
                ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError):
                unread[kw.arg] = getattr(kw.value, "lineno", node.lineno)
                continue
        literal.append(kw)
    return _ConfigArgs(_call_kwargs(ast.Call(func=node.func, args=[], keywords=literal), "args"), unread=unread)


def _call_kwargs(node: ast.Call, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise _bad("trl", f"{where}: **kwargs are not read")
        if kw.arg == "model_init_kwargs" and isinstance(kw.value, ast.Dict):
            inner: dict[str, Any] = {}
            for k, v in zip(kw.value.keys, kw.value.values):
                if k is None:
                    raise _bad("trl", f"{where}.model_init_kwargs: ** is not read")
                key = _literal(k, where)
                inner[key] = v if key == "quantization_config" else _literal(v, f"{where}.model_init_kwargs.{key}")
            out[kw.arg] = inner
        else:
            out[kw.arg] = _literal(kw.value, f"{where}.{kw.arg}")
    return out


_TRL_TRAINER_CONFIG = {"SFTTrainer": "SFTConfig", "DPOTrainer": "DPOConfig", "GRPOTrainer": "GRPOConfig",
                       "RewardTrainer": "RewardConfig"}
"""TRL's trainer classes and the config class each takes as ``args=`` (and builds with its defaults when none is
passed: ``if args is None: ... args = SFTConfig(f"{model_name}-SFT")``, huggingface/trl trl/trainer/sft_trainer.py
l.925-928, grpo_trainer.py l.326-329 @f2cd57710ae345ea6428ae95363267fcf38a3dc8, and alike for the others)."""


def _call_name(node: ast.AST) -> str | None:
    """``X`` of a call ``X(...)`` or ``m.X(...)`` (``trl.SFTConfig(...)``), else None."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else None


def _shown(stmt: ast.stmt) -> str:
    """A statement not read, as a note lists it: its first line, cut to 40 characters, ``X(...)`` for a config."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        name = _call_name(stmt.value)
        if name in _TRL_METHOD or name in ("LoraConfig",) or name in _TRL_TRAINER_CONFIG:
            return f"{stmt.targets[0].id} = {name}(...)"
    try:
        text = ast.unparse(stmt).splitlines()[0]
    except Exception:  # an AST unparse cannot render: named by its kind
        text = type(stmt).__name__
    return text if len(text) <= 40 else text[:39] + "..."


_TRL_LITERALS = ("quantization", "launch", "vllm_serve")
"""The ``NAME = literal`` settings the TRL exporter writes beside the config (the 4-bit config, the launch lines)."""


def _main_guard(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` is ``if __name__ == "__main__":`` (either side of the ``==``)."""
    if not (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1
            and isinstance(stmt.test.ops[0], ast.Eq)):
        return False
    sides = (stmt.test.left, stmt.test.comparators[0])
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _script_statements(tree: ast.Module) -> list[ast.stmt]:
    """The statements a TRL script runs, read without running it: the top level, with the body of its
    ``if __name__ == "__main__":`` block in place of the block and, in place of a top-level function that block
    calls (``main()``), that function's body (TRL's docs write the script so: huggingface/trl
    docs/source/grpo_trainer.md l.380-391 @f2cd57710ae345ea6428ae95363267fcf38a3dc8, ``training_args =
    GRPOConfig(...)`` and ``trainer = GRPOTrainer(...)`` inside ``def main():``, run under ``if __name__ ==
    "__main__": main()``). Other functions, classes and nested blocks are not entered (listed as not read)."""
    guards = [st for st in tree.body if _main_guard(st)]
    called = {c.func.id for g in guards for c in ast.walk(g)
              if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    out: list[ast.stmt] = []
    for st in tree.body:
        if _main_guard(st):
            out.extend(x for x in st.body if not (isinstance(x, ast.Expr) and isinstance(x.value, ast.Call)
                                                  and isinstance(x.value.func, ast.Name)
                                                  and x.value.func.id in called and not x.value.args
                                                  and not x.value.keywords
                                                  and any(isinstance(d, ast.FunctionDef) and d.name == x.value.func.id
                                                          for d in tree.body)))
        elif isinstance(st, ast.FunctionDef) and st.name in called:
            out.extend(st.body)
        else:
            out.append(st)
    return out


def _parse_trl(text: str) -> dict[str, Any]:
    """The TRL script's config, model, LoRA config and literal settings, read through ``ast`` (nothing runs).

    The config is the ``SFTConfig`` / ``DPOConfig`` / ``GRPOConfig`` / ``RewardConfig`` / ``TrainingArguments`` call
    assigned to any name, or written inline as the trainer call's ``args=``; with several, the one the trainer call
    passes as ``args=``; with a trainer call and none, the trainer's default config (TRL's docs' quick start, huggingface/
    trl docs/source/sft_trainer.md l.17-26 @f2cd57710ae345ea6428ae95363267fcf38a3dc8). The model is the trainer's
    ``model=`` (or first positional argument) when it is a string literal or a name bound to one, else a top-level
    ``model = '...'``. ``NAME = literal`` assignments are kept by name (``quantization``, ``launch``, ``vllm_serve``);
    every other top-level statement is skipped and listed under ``not_read`` (its line and first 40 characters).
    The statements read are the top level's and those of its ``if __name__ == "__main__":`` block and of the function
    that block calls (``_script_statements``). A config keyword value that is not a literal is listed as not read,
    and refused when the plan reads that key (``_ConfigArgs``); the LoRA config's values must be literals."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise _bad("trl", f"not Python (line {exc.lineno}: {exc.msg})") from None
    except (MemoryError, RecursionError):  # CPython's parser stack overflows on deep nesting (a chain of unary ops)
        raise _bad("trl", "nested too deeply to read (the Python parser's stack overflowed)") from None
    literals: dict[str, Any] = {}
    configs: dict[str, ast.Assign] = {}
    loras: dict[str, ast.Assign] = {}
    trainers: list[ast.Call] = []
    not_read: list[ast.stmt] = []
    for stmt in _script_statements(tree):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        ):
            continue
        one_name = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
        called = _call_name(value) if value is not None else None
        if called in _TRL_TRAINER_CONFIG:
            trainers.append(value)  # type: ignore[arg-type]
        elif one_name and called in _TRL_METHOD:
            configs[stmt.targets[0].id] = stmt  # type: ignore[union-attr]
        elif one_name and called == "LoraConfig":
            loras[stmt.targets[0].id] = stmt  # type: ignore[union-attr]
        elif one_name and value is not None and not isinstance(value, ast.Call):
            name = stmt.targets[0].id  # type: ignore[union-attr]
            try:
                literals[name] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                not_read.append(stmt)
                continue
            if name not in _TRL_LITERALS and name != "model":
                not_read.append(stmt)
        else:
            not_read.append(stmt)
    if len(trainers) > 1:
        raise _bad("trl", f"several trainer calls (lines {', '.join(str(c.lineno) for c in trainers)}); give one")
    trainer = trainers[0] if trainers else None
    kw = {k.arg: k.value for k in trainer.keywords if k.arg} if trainer is not None else {}
    found: dict[str, Any] = {}
    notes: list[str] = []
    config: ast.Call | None = None
    used: set[str] = set()
    passed = kw.get("args")
    tname = _call_name(trainer) if trainer is not None else None
    if isinstance(passed, ast.Name):
        if passed.id not in configs:
            raise _bad("trl", f"args={passed.id}: no {passed.id} = <TRL config>(...) assignment at the top level;"
                              f" allowed configs: {', '.join(_TRL_METHOD)}")
        config, used = configs[passed.id].value, {passed.id}  # type: ignore[assignment]
    elif passed is not None:
        if _call_name(passed) not in _TRL_METHOD:
            raise _bad("trl", f"args: {_call_name(passed) or 'the value'} is not a TRL config; allowed: {', '.join(_TRL_METHOD)}")
        config = passed  # type: ignore[assignment]
    elif len(configs) == 1:
        (name, stmt), = configs.items()
        config, used = stmt.value, {name}  # type: ignore[assignment]
    elif configs:
        listed = ", ".join(f"{n} line {a.lineno}" for n, a in configs.items())
        raise _bad("trl", f"several TRL configs ({listed}) and no trainer call passes one as args=; pass the one"
                          " the run uses as args= to the trainer")
    elif tname is not None:
        notes.append(f"no config passed to {tname}: TRL's {_TRL_TRAINER_CONFIG[tname]} defaults")
        found["config_class"], found["args"] = _TRL_TRAINER_CONFIG[tname], {}
    else:
        raise _bad("trl", f"no TRL config: no '<name> = <config>(...)' assignment and no trainer call; allowed configs:"
                          f" {', '.join(_TRL_METHOD)}")
    if config is not None:
        found["config_class"] = _call_name(config)
        found["args"] = _config_kwargs(config)
        if found["args"].unread:
            notes.append("not read: " + ", ".join(f"args.{k} (line {n}, not a literal value)"
                                                  for k, n in found["args"].unread.items()))
    if tname is not None and found["config_class"] != "TrainingArguments" and _TRL_TRAINER_CONFIG[tname] != found["config_class"]:
        raise _bad("trl", f"{tname} is passed a {found['config_class']}; it takes a {_TRL_TRAINER_CONFIG[tname]}")
    not_read += [a for n, a in configs.items() if n not in used]
    lora = kw.get("peft_config")
    if isinstance(lora, ast.Name) and lora.id in loras:
        lora, _ = loras.pop(lora.id).value, None
    elif lora is None and len(loras) == 1:
        lora = next(iter(loras.values())).value
        loras.clear()
    if lora is not None:
        if _call_name(lora) != "LoraConfig":
            raise _bad("trl", "peft_config: only a LoraConfig(...) with literal values is read")
        found["peft"] = _call_kwargs(lora, "peft_config")  # type: ignore[arg-type]
    not_read += list(loras.values())
    model = kw.get("model", trainer.args[0] if trainer is not None and trainer.args else None)
    if isinstance(model, ast.Constant) and isinstance(model.value, str):
        found["model"] = model.value
    elif isinstance(model, ast.Name) and isinstance(literals.get(model.id), str):
        found["model"] = literals[model.id]
    elif model is not None:
        notes.append(f"model={_shown(ast.Expr(model))}: not a string literal; the model is not read (--set model=ID)")
    if model is None and "model" in literals:
        found["model"] = literals["model"]
    for name in _TRL_LITERALS:
        if name in literals:
            found[name] = literals[name]
    if not_read:
        items = sorted(not_read, key=lambda st: st.lineno)
        listed = ", ".join(f"line {st.lineno} {_shown(st)}" for st in items[:8]) + (" ..." if len(items) > 8 else "")
        notes.append(f"not read (nothing in the file is run): {listed}")
    found["_notes"] = notes
    return found


def _devices(cmd: str) -> tuple[int | None, list[str]]:
    """(number of CUDA_VISIBLE_DEVICES, argv) of a launch line."""
    argv = shlex.split(cmd)
    n = None
    if argv and argv[0].startswith("CUDA_VISIBLE_DEVICES="):
        ids = argv.pop(0).split("=", 1)[1]
        n = len([x for x in ids.split(",") if x])
    return n, argv


def _flag(argv: list[str], name: str) -> str | None:
    for i, tok in enumerate(argv):
        if tok == name and i + 1 < len(argv):
            return argv[i + 1]
        if tok.startswith(name + "="):
            return tok.split("=", 1)[1]
    return None


def read_trl(text: str, companion: Imported | None = None) -> Imported:
    from trainfit.export.trl import trl_weight_sync
    from trainfit.spec.enums import Scope, Strategy

    t = "trl"
    f = _parse_trl(text)
    d: dict[str, Any] = dict(companion.card) if companion else {}
    notes: list[str] = list(companion.notes) if companion else [
        "parallel and hardware: in the accelerate.yaml the launch line names (import it with --with accelerate.yaml)"
    ]
    notes += f.pop("_notes")
    cls = f["config_class"]
    method = _TRL_METHOD[cls]
    if cls == "TrainingArguments":
        notes.append("TrainingArguments: read as PPO (trainfit exports PPO for TRL as the shared TrainingArguments)")
    set_dotted(d, "method", method)
    if "model" in f:
        if not isinstance(f["model"], str):
            raise _bad(t, "model: expected a string")
        d["model"] = f["model"]
    a = f["args"]
    if "per_device_train_batch_size" in a:
        set_dotted(d, "batch.micro_batch_size", _num(t, "per_device_train_batch_size", a["per_device_train_batch_size"]))
    if "gradient_accumulation_steps" in a:
        set_dotted(d, "batch.grad_accum", _num(t, "gradient_accumulation_steps", a["gradient_accumulation_steps"]))
    # under FSDP the exporter turns the trainer's checkpointing off (accelerate's fsdp_activation_checkpointing does it)
    fsdp_ckpt = companion is not None and (d.get("parallel") or {}).get("strategy") in ("fsdp", "fsdp_grad_op", "hsdp")
    if "gradient_checkpointing" in a and not (fsdp_ckpt and a["gradient_checkpointing"] is False):
        set_dotted(d, "parallel.gradient_checkpointing", _switch(t, "gradient_checkpointing", a["gradient_checkpointing"], False))
    compute = "bf16" if _switch(t, "bf16", a.get("bf16"), False) else "fp16" if _switch(t, "fp16", a.get("fp16"), False) else "fp32"
    set_dotted(d, "precision.compute", compute)
    if "optim" in a:
        o = _TRL_OPTIM.get(str(a["optim"]))
        if o is None:
            raise _bad(t, f"args.optim: {a['optim']!r} has no card optimizer; allowed: {', '.join(_TRL_OPTIM)}")
        set_dotted(d, "precision.optimizer", o[0])
        if o[1]:
            set_dotted(d, "precision.optimizer_impl", o[1])
    if _switch(t, "torch_compile", a.get("torch_compile"), False):
        set_dotted(d, "parallel.compile", True)
    if _switch(t, "use_liger_kernel", a.get("use_liger_kernel"), False):
        set_dotted(d, "loss.chunked", True)
    if _switch(t, "activation_offloading", a.get("activation_offloading"), False):
        set_dotted(d, "parallel.activation_offload", True)
    if "output_dir" in a and a["output_dir"] != "./checkpoints":
        set_dotted(d, "checkpoint.path", str(a["output_dir"]))
    for src, dst in (("save_steps", "checkpoint.every_steps"), ("save_total_limit", "checkpoint.keep")):
        if isinstance(a.get(src), int) and not isinstance(a.get(src), bool) and a[src] >= 1:
            set_dotted(d, dst, a[src])
    mik = a.get("model_init_kwargs") or {}
    quant = f.get("quantization")
    if "max_length" in a and method in ("sft", "rm", "dpo"):
        set_dotted(d, "batch.seq_len", _num(t, "max_length", a["max_length"]))
    if _switch(t, "packing", a.get("packing"), False) and method == "sft":  # SFTConfig packing: rows are packs of samples (per-sample attention)
        notes.append("packing: rows are packs of whole samples, but the mean tokens per sample is the data's; planned"
                     " as one sequence per row until batch.packed_sample_tokens is set (e.g. --set"
                     " batch.packed_sample_tokens=N)")
    if method == "dpo":
        if "beta" in a:
            set_dotted(d, "roles.kl_coef", _num(t, "beta", a["beta"], float))
        if _switch(t, "precompute_ref_log_probs", a.get("precompute_ref_log_probs"), False):
            set_dotted(d, "roles.reference", "precomputed")
    peft = f.get("peft")
    scope = "full"
    if peft:
        scope = "qlora" if quant else "lora"
        lora: dict[str, Any] = {}
        for src, dst in (("r", "rank"), ("lora_alpha", "alpha"), ("lora_dropout", "dropout"), ("target_modules", "targets")):
            if src in peft:
                lora[dst] = peft[src]
        if quant and "bnb_4bit_use_double_quant" in quant:
            lora["double_quant"] = _switch(t, "bnb_4bit_use_double_quant", quant["bnb_4bit_use_double_quant"], False)
        d["lora"] = lora
    elif quant:
        raise _bad(t, "quantization without peft_config: a 4-bit base needs a LoRA adapter (scope qlora)")
    d["scope"] = scope
    if quant:
        if quant.get("bnb_4bit_quant_type", "nf4") != "nf4" or not quant.get("load_in_4bit"):
            raise _bad(t, "quantization: only 4-bit nf4 (QLoRA) is a card setting")
        if mik.get("dtype") not in (None, quant.get("bnb_4bit_quant_storage", mik.get("dtype"))):
            notes.append("quantization.bnb_4bit_quant_storage differs from the model dtype: FSDP cannot shard the 4-bit base")
    elif "dtype" in mik:
        w = _HF_DTYPE.get(str(mik["dtype"]))
        if w is None:
            raise _bad(t, f"model_init_kwargs.dtype: {mik['dtype']!r}; allowed: {', '.join(_HF_DTYPE)}")
        set_dotted(d, "precision.weights", w)
    if "attn_implementation" in mik:
        at = _HF_ATTN.get(str(mik["attn_implementation"]))
        if at is None:
            raise _bad(t, f"model_init_kwargs.attn_implementation: {mik['attn_implementation']!r}; allowed: {', '.join(_HF_ATTN)}")
        d["attention"] = at
    if method == "grpo":
        ro: dict[str, Any] = {}
        ng = _num(t, "num_generations", a.get("num_generations", 8))
        ro["num_generations"] = ng
        if "max_completion_length" in a:
            ro["response_len"] = _num(t, "max_completion_length", a["max_completion_length"])
        if "generation_batch_size" in a:
            gbs = _num(t, "generation_batch_size", a["generation_batch_size"])
            ro["prompts_per_step"] = max(1, gbs // ng)
            ro.update(_trl_mini_batches(t, a, d, gbs, notes))
        elif "steps_per_generation" in a:
            ro.update(_trl_generation_calls(t, a, d, ng, notes))
        if "beta" in a:
            set_dotted(d, "roles.kl_coef", _num(t, "beta", a["beta"], float))
        if "num_iterations" in a:
            ro["num_iterations"] = _num(t, "num_iterations", a["num_iterations"])
        if _switch(t, "use_vllm", a.get("use_vllm"), False):
            ro["engine"] = "vllm"
            if "vllm_max_model_length" in a and "response_len" in ro:
                ro["prompt_len"] = max(1, _num(t, "vllm_max_model_length", a["vllm_max_model_length"]) - ro["response_len"])
            if a.get("vllm_mode", "colocate") == "colocate":
                ro["placement"] = "colocate"
                for src, dst, k in (("vllm_gpu_memory_utilization", "gpu_memory_utilization", float),
                                    ("vllm_tensor_parallel_size", "tensor_parallel", int)):
                    if src in a:
                        ro[dst] = _num(t, src, a[src], k)
                ro["sleep_level"] = 2 if _switch(t, "vllm_enable_sleep_mode", a.get("vllm_enable_sleep_mode"), False) else 0
            else:
                ro["placement"] = "split"
                serve = f.get("vllm_serve")
                if isinstance(serve, str):
                    n, argv = _devices(serve)
                    if n:
                        ro["gpus"] = n
                    for flag, dst, k in (("--tensor_parallel_size", "tensor_parallel", int),
                                         ("--gpu_memory_utilization", "gpu_memory_utilization", float)):
                        v = _flag(argv, flag)
                        if v is not None:
                            ro[dst] = _num(t, flag, v, k)
                launch = f.get("launch")
                if isinstance(launch, str) and "gpus" in ro:
                    n, _ = _devices(launch)
                    if n:
                        set_dotted(d, "hardware.gpus_per_node", n + ro["gpus"])
        else:
            ro["engine"] = "hf"
        scope_e, strategy = Scope(scope), Strategy((d.get("parallel") or {}).get("strategy", "fsdp"))
        ro["weight_sync"] = trl_weight_sync(scope_e, strategy).value
        set_dotted(d, "rollout", ro)
        notes.append(_prompt_mean_note(ro.get("prompt_len")))
    _adapter_units_as_framework(t, d, notes)
    # the --with DeepSpeed JSON's "auto" keys the Trainer fills from these arguments: open only where they are silent
    left_open = {k: why for k, why in (companion.left_open if companion else {}).items() if _dotted_get(d, k) is None}
    return Imported(t, d, notes, left_open=left_open)


def _trl_mini_batches(t: str, a: dict[str, Any], d: dict[str, Any], gbs: int, notes: list[str]) -> dict[str, int]:
    """``rollout.mini_batches`` of a GRPOConfig with ``generation_batch_size``: one generation batch is gbs /
    (per_device_train_batch_size x processes) micro-batches and the optimizer steps every gradient_accumulation_steps
    of them (huggingface/trl trl/trainer/grpo_config.py l.1077-1091 @f2cd57710ae345ea6428ae95363267fcf38a3dc8). The
    processes are the companion accelerate.yaml's; without it, left at the card's."""
    ga = _num(t, "gradient_accumulation_steps", a.get("gradient_accumulation_steps", 1))
    mbs = _num(t, "per_device_train_batch_size", a.get("per_device_train_batch_size", 8))
    hw = d.get("hardware") or {}
    if not (hw.get("gpus_per_node") and hw.get("nodes")):
        notes.append("generation_batch_size: the optimizer steps per generation batch need the training processes"
                     " (import with --with accelerate.yaml); rollout.mini_batches left at the card's")
        return {}
    steps = _ratio(gbs, mbs * hw["gpus_per_node"] * hw["nodes"] * ga)
    if steps is None:
        notes.append(f"generation_batch_size {gbs} is not a whole number of optimizer steps of"
                     f" gradient_accumulation_steps {ga} x per_device_train_batch_size {mbs} x processes;"
                     " rollout.mini_batches left at the card's")
        return {}
    return {"mini_batches": steps}


def _trl_generation_calls(t: str, a: dict[str, Any], d: dict[str, Any], ng: int, notes: list[str]) -> dict[str, int]:
    """``rollout.prompts_per_step`` and ``generation_calls`` of a TRL (>= 0.18) GRPOConfig that sets
    ``steps_per_generation``: TRL generates once every ``steps_per_generation`` micro-batches and steps the optimizer
    every ``gradient_accumulation_steps`` (huggingface/trl trl/trainer/grpo_config.py __post_init__ l.505-529
    @ef4b0b225cf04600332a12a2c83f187623312098, v0.18.0), so an optimizer step of ``gradient_accumulation_steps`` micro-
    batches of ``per_device_train_batch_size`` x processes completions is ``gradient_accumulation_steps /
    steps_per_generation`` calls. The processes are the companion accelerate.yaml's; without it, left at the card's."""
    spg = _num(t, "steps_per_generation", a["steps_per_generation"])
    ga = _num(t, "gradient_accumulation_steps", a.get("gradient_accumulation_steps", 1))
    mbs = _num(t, "per_device_train_batch_size", a.get("per_device_train_batch_size", 8))
    if spg < 1:
        raise _bad(t, f"steps_per_generation: {spg}; allowed: 1 or more")
    hw = d.get("hardware") or {}
    if not (hw.get("gpus_per_node") and hw.get("nodes")):
        notes.append("steps_per_generation: the prompts per step need the training processes (import with --with"
                     " accelerate.yaml); rollout.prompts_per_step and generation_calls left at the card's")
        return {}
    procs = hw["gpus_per_node"] * hw["nodes"]  # the accelerate.yaml's num_processes: the training GPUs
    out = {"prompts_per_step": max(1, mbs * procs * max(ga, spg) // ng)}
    if ga > spg and ga % spg == 0 and out["prompts_per_step"] % (ga // spg) == 0:
        out["generation_calls"] = ga // spg
    elif ga > spg:
        notes.append(f"steps_per_generation {spg} does not divide gradient_accumulation_steps {ga} into equal"
                     " calls: rollout.generation_calls left at 1")
    return out


ADAPTER_UNITS_READ = {
    "trl": "TRL's trainers are the HF Trainer, which wraps each lora_A / lora_B of a PEFT model as an FSDP1 unit of"
    " its own (PEFT's fsdp_auto_wrap_policy; spec.card.ADAPTER_UNIT_PRESETS cites the lines)",
    "verl": "verl's FSDP engine wraps each lora_A / lora_B as an FSDP1 unit of its own (get_fsdp_wrap_policy"
    " is_lora with wrap_policy.min_num_params 0; spec.card.ADAPTER_UNIT_PRESETS cites the lines)",
}
"""Why a TRL or verl file's FSDP1 LoRA / QLoRA run reads back with ``parallel.fsdp_adapter_units: true``."""


def _adapter_units_as_framework(t: str, d: dict[str, Any], notes: list[str]) -> None:
    """``parallel.fsdp_adapter_units: true`` on a LoRA / QLoRA card read from a ``t`` file that shards with FSDP1
    (strategy fsdp or hsdp, fsdp_version fsdp1): the framework wraps the adapters so (``ADAPTER_UNITS_READ``)."""
    par = d.get("parallel") or {}
    if (d.get("scope") in ("lora", "qlora") and par.get("strategy", "fsdp") in ("fsdp", "hsdp")
            and par.get("fsdp_version") == "fsdp1"):
        set_dotted(d, "parallel.fsdp_adapter_units", True)
        notes.append(f"parallel.fsdp_adapter_units true: {ADAPTER_UNITS_READ[t]}")


# -- verl -----------------------------------------------------------------------------------------


HYDRA_LIST_DEPTH = 64
"""Deepest list an override value may nest (as ``spec.safe_yaml.MAX_DEPTH`` for YAML and JSON files): the reader
below recurses once per level, and 3,000 nested brackets escaped as a RecursionError."""


def _hydra_scalar(v: str, *, key: str = "", depth: int = 0) -> Any:
    """One override value as Hydra's lexer reads it: true / false / null in any case (BOOL, NULL:
    facebookresearch/hydra hydra/grammar/OverrideLexer.g4 l.53-57 @048399369016cbeb9466300bebbc2249e1c8b945);
    Python's 'None' is no keyword there but a plain string, which verl's switches read as true."""
    q = hydra_unquote(v)
    if q is not None:
        return q
    if v.startswith("[") and v.endswith("]"):
        if depth >= HYDRA_LIST_DEPTH:
            raise _bad("verl", f"{key}: a list nested deeper than {HYDRA_LIST_DEPTH} levels")
        return [_hydra_scalar(x, key=key, depth=depth + 1) for x in _split_list(v[1:-1])]
    if v.lower() == "true":
        return True
    if v.lower() == "false":
        return False
    if v.lower() == "null":
        return None
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def _split_list(s: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    i, quoted = 0, False
    while i < len(s):
        c = s[i]
        if quoted and c == "\\" and i + 1 < len(s):
            cur.append(s[i : i + 2])
            i += 2
            continue
        if c == "'":
            quoted = not quoted
        if c == "," and not quoted:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if cur or out:
        out.append("".join(cur).strip())
    return [x for x in out if x != ""]


class ShellExpanded(str):
    """A word of a launch script that the shell expands when the script runs: it holds a variable (``$HOME``,
    ``${X}``), a command substitution (``$(...)``, backticks) or another ``$`` form outside single quotes
    (POSIX Shell Command Language, 2.2 Quoting and 2.6 Word Expansions,
    https://pubs.opengroup.org/onlinepubs/9799919799/utilities/V3_chap02.html). ``trainfit import`` runs nothing,
    so what the run reads there is unknown: a reader that takes such a value refuses it (``_checked_read``)."""

    __slots__ = ()


_DOLLAR, _BACKTICK = "\ue000", "\ue001"
"""Stand-ins (Unicode private use) for an expanding ``$`` and backtick while ``shlex`` splits the words."""


def _mark_expansions(text: str) -> str:
    """``text`` with each ``$`` that starts an expansion and each backtick, outside single quotes and not escaped,
    replaced by a stand-in; comments (``#`` at a word's start) are left as they are."""
    out: list[str] = []
    i, n, quote = 0, len(text), ""
    while i < n:
        c = text[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\" and i + 1 < n:
            out.append(text[i:i + 2])
            i += 2
            continue
        elif c == "#" and not quote and (i == 0 or text[i - 1] in " \t\r\n"):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(text[i:end])
            i = end
            continue
        elif c in "'\"" and (not quote or c == quote):
            quote = "" if quote else c
        elif c == "`":
            c = _BACKTICK
        elif c == "$" and i + 1 < n and (text[i + 1].isalnum() or text[i + 1] in "_({@*#?$!-" or (
                text[i + 1] in "'\"" and quote != '"')):
            # inside double quotes a $ before a quote is literal ("cost$", "$"): $'...' and $"..." are quoting forms
            # only outside them (GNU Bash manual 3.1.2.3-3.1.2.5, https://www.gnu.org/software/bash/manual/bash.html#Quoting)
            c = _DOLLAR
        out.append(c)
        i += 1
    return "".join(out)


def _shell_argv(text: str, target: str) -> list[str]:
    """The script's words as ``shlex`` splits them (POSIX quoting, ``#`` comments; nothing runs); a word the shell
    would expand is a ``ShellExpanded``."""
    try:
        lex = shlex.shlex(_mark_expansions(text), posix=True, punctuation_chars=False)
        lex.whitespace_split = True
        lex.commenters = "#"
        words = [tok for tok in lex if tok != "\n"]
    except ValueError as exc:
        raise _bad(target, f"not a shell command line ({exc})") from None
    argv: list[str] = []
    for w in words:
        plain = w.replace(_DOLLAR, "$").replace(_BACKTICK, "`")
        argv.append(ShellExpanded(plain) if plain != w else plain)
    return argv


def _expanded_why(key: str, word: str) -> str:
    return (f"{key}: {word[:80]!r} is expanded by the shell when the script runs (a variable, $(...) or backticks);"
            " trainfit import runs nothing, so the value is unknown")


def _expanded_refusal(target: str, key: str, word: str) -> InputError:
    return _bad(target, f"{_expanded_why(key, word)}: write the value itself")


class _CheckedRead(dict):
    """Keys read from a launch script: reading one whose value the shell expands (``expanded``: key -> word) is
    refused in one line, never taken as the literal text; testing that a key is present is not."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target
        self.expanded: dict[str, str] = {}
        self.extra_expanded: list[str] = []
        self.undotted: set[str] = set()

    def _check(self, key: Any) -> None:
        if key in self.expanded:
            raise _expanded_refusal(self.target, str(key), self.expanded[key])

    def get(self, key: Any, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def name_or_required(self, key: Any, card_key: str, required: dict[str, str]) -> Any:
        """The value of a key naming a model: an expanded one is not refused here but recorded in ``required`` under
        ``card_key`` (``--set`` can give it) and read as None; the expanded word is returned as a ``ShellExpanded``
        so that two keys holding the same word (``$MODEL_PATH`` for actor and critic) can be told equal."""
        if key in self.expanded:
            required[card_key] = _expanded_why(str(key), self.expanded[key])
            return ShellExpanded(self.expanded[key])
        return super().get(key)


def read_verl(text: str) -> Imported:
    from trainfit.export.verl import verl_sleep_level
    from trainfit.spec.card import RunCard
    from trainfit.spec.enums import Scope

    t = "verl"
    argv = _shell_argv(text, t)
    o = _CheckedRead(t)
    sft = any("verl.trainer.sft_trainer" in a for a in argv)
    if not sft and not any("verl.trainer.main_ppo" in a for a in argv):
        raise _bad(t, "expected 'python3 -m verl.trainer.main_ppo' or '-m verl.trainer.sft_trainer' overrides")
    for tok in argv:
        if "=" not in tok or tok.startswith("-"):
            continue
        key, _, value = tok.partition("=")
        o[key.lstrip("+")] = _hydra_scalar(value, key=key.lstrip("+"))
        if isinstance(tok, ShellExpanded):
            o.expanded[key.lstrip("+")] = value
        else:
            o.expanded.pop(key.lstrip("+"), None)
    d: dict[str, Any] = {}
    notes: list[str] = []
    P = "model" if sft else "actor_rollout_ref.model"

    def get(k: str, default: Any = None) -> Any:
        return o.get(k, default)

    def flag(k: str, default: bool = False) -> bool:
        return _switch(t, k, get(k), default)

    required: dict[str, str] = {}
    actor_path = o.name_or_required(f"{P}.path", "model", required)
    if actor_path is not None and not isinstance(actor_path, ShellExpanded):
        d["model"] = str(actor_path)
    set_dotted(d, "parallel.gradient_checkpointing", flag(f"{P}.enable_gradient_checkpointing", True))
    if flag(f"{P}.enable_activation_offload"):
        set_dotted(d, "parallel.activation_offload", True)
    if flag(f"{P}.use_fused_kernels"):
        set_dotted(d, "loss.chunked", True)
    attn = get(f"{P}.override_config.attn_implementation")
    d["attention"] = _HF_ATTN.get(str(attn), "flash") if attn is not None else "flash"
    scope = "full"
    if _num(t, "lora.rank", get(f"{P}.lora.rank", 0)) > 0:  # the Megatron engine's LoRA (model.lora.*)
        from trainfit.export.verl import HF_FROM_MEGATRON_LORA

        scope = "lora"
        lora = {"rank": _num(t, "lora.rank", get(f"{P}.lora.rank")),
                "alpha": _num(t, "lora.alpha", get(f"{P}.lora.alpha", 32), float),
                "dropout": _num(t, "lora.dropout", get(f"{P}.lora.dropout", 0.0), float)}
        mods = get(f"{P}.lora.target_modules")
        if mods is not None:
            mods = mods if isinstance(mods, list) else [mods]
            if sorted(mods) != sorted(HF_FROM_MEGATRON_LORA):
                bad = [m for m in mods if m not in HF_FROM_MEGATRON_LORA]
                if bad:
                    raise _bad(t, f"{P}.lora.target_modules: {bad[0]!r}; allowed: {', '.join(HF_FROM_MEGATRON_LORA)}")
                lora["targets"] = [h for m in mods for h in HF_FROM_MEGATRON_LORA[m]]
        d["lora"] = lora
    elif _num(t, "lora_rank", get(f"{P}.lora_rank", 0)) > 0:
        scope = "lora"
        lora = {"rank": _num(t, "lora_rank", get(f"{P}.lora_rank"))}
        if get(f"{P}.lora_alpha") is not None:
            lora["alpha"] = _num(t, "lora_alpha", get(f"{P}.lora_alpha"), float)
        if get(f"{P}.target_modules") is not None:
            lora["targets"] = get(f"{P}.target_modules")
        d["lora"] = lora
    d["scope"] = scope
    mega = get("model_engine") == "megatron" or get("engine") == "megatron" or (
        not sft and get("actor_rollout_ref.actor.strategy") == "megatron")
    E = ("engine" if sft else "actor_rollout_ref.actor.megatron") if mega else (
        "engine" if sft else "actor_rollout_ref.actor.fsdp_config")
    strategy = "fsdp"
    if get(f"{E}.reshard_after_forward") is False:
        strategy = "fsdp_grad_op"
    if get(f"{E}.fsdp_size") not in (None, -1):
        strategy = "hsdp"
    off = "params_and_optimizer" if flag(f"{E}.param_offload") else "optimizer" if flag(f"{E}.optimizer_offload") else "none"
    set_dotted(d, "parallel.offload", off)
    if mega:
        strategy = _verl_megatron(t, E, get, d, notes)
    else:
        set_dotted(d, "precision.weights", "bf16" if get(f"{E}.model_dtype") == "bf16" else "fp32")
        set_dotted(d, "precision.compute", "bf16")
        sp = get(f"{E}.ulysses_sequence_parallel_size")
        if sp is None and not sft:
            sp = get("actor_rollout_ref.actor.ulysses_sequence_parallel_size")  # deprecated spelling (dp_actor.yaml)
        if sp is not None and _num(t, f"{E}.ulysses_sequence_parallel_size", sp) > 1:
            set_dotted(d, "parallel.context_parallel", _num(t, f"{E}.ulysses_sequence_parallel_size", sp))
            set_dotted(d, "parallel.context_parallel_kind", "ulysses")
    set_dotted(d, "parallel.strategy", strategy)
    # verl's strategy fsdp (its default: trainer/config/actor/dp_actor.yaml l.26, engine/fsdp.yaml l.75) wraps in
    # FullyShardedDataParallel (FSDP1), fsdp2 in fully_shard (verl-project/verl @1dda039b9c6311889a9c9a26040677e1254814f9
    # verl/workers/engine/fsdp/transformer_impl.py l.404 / 431)
    engine_key = "engine.strategy" if sft else "actor_rollout_ref.actor.strategy"
    engine = get(engine_key) or "fsdp"
    if engine not in ("fsdp", "fsdp2", "megatron"):  # anything else was planned as verl's default FSDP1, silently
        raise _bad(t, f"{engine_key}: {str(engine)[:40]!r}; allowed: fsdp, fsdp2, megatron")
    if not mega and engine in ("fsdp", "fsdp2"):
        set_dotted(d, "parallel.fsdp_version", "fsdp1" if engine == "fsdp" else "fsdp2")
    opt_base = "optim" if sft else "actor_rollout_ref.actor.optim"
    name = get(f"{opt_base}.optimizer")
    if name is not None:
        opt = {"AdamW": "adamw", "AdamW8bit": "adamw_8bit", "PagedAdamW32bit": "paged_adamw",
               "PagedAdamW8bit": "paged_adamw_8bit", "SGD": "sgd"}.get(str(name))
        if mega:  # Megatron's optimizer names (optim/megatron.yaml)
            opt = {"adam": "adamw", "sgd": "sgd"}.get(str(name))
        if opt is None:
            raise _bad(t, f"{opt_base}.optimizer: {name!r} has no card optimizer")
        set_dotted(d, "precision.optimizer", opt)
    gpn = _num(t, "trainer.n_gpus_per_node", get("trainer.n_gpus_per_node", 8))
    nodes = _num(t, "trainer.nnodes", get("trainer.nnodes", 1))
    set_dotted(d, "hardware.gpus_per_node", gpn)
    set_dotted(d, "hardware.nodes", nodes)
    if strategy == "hsdp":
        # verl/workers/fsdp_workers.py create_device_mesh (volcengine/verl @94d681dce4911c3ad6abb011a2d03c62d318868d
        # l. 84-91): fsdp_size >= world_size is a 1-D mesh (FULL_SHARD over all ranks), else a
        # (world_size // fsdp_size, fsdp_size) ddp x fsdp mesh, HSDP with fsdp_size-rank shard groups
        size = _num(t, f"{E}.fsdp_size", get(f"{E}.fsdp_size"))
        if size >= gpn * nodes:
            set_dotted(d, "parallel.strategy", "fsdp")
            strategy = "fsdp"
        elif size != gpn:
            set_dotted(d, "parallel.hsdp_shard_size", size)
    if strategy == "ddp" and gpn * nodes == 1:
        set_dotted(d, "parallel.strategy", "single")
    par = d.get("parallel", {})
    mp = par.get("tensor_parallel", 1) * par.get("pipeline_parallel", 1) * par.get("context_parallel", 1)
    world = gpn * nodes
    if world % mp:
        raise _bad(t, f"tensor x pipeline x context parallel = {mp} does not divide the {world} GPUs")
    world //= mp  # data-parallel ranks: the batch sizes count sequences over these
    if sft:
        d["method"] = "sft"
        mb = _num(t, "data.micro_batch_size_per_gpu", get("data.micro_batch_size_per_gpu", 1))
        set_dotted(d, "batch.micro_batch_size", mb)
        if get("data.train_batch_size") is not None:
            ga = _ratio(_num(t, "data.train_batch_size", get("data.train_batch_size")), mb * world)
            if ga is None:
                notes.append("data.train_batch_size is not a multiple of micro-batch x GPUs; batch.grad_accum left at 1")
            else:
                set_dotted(d, "batch.grad_accum", ga)
        if get("data.max_length") is not None:
            set_dotted(d, "batch.seq_len", _num(t, "data.max_length", get("data.max_length")))
        if not mega and not get(f"{E}.wrap_policy.min_num_params", 0):  # get_fsdp_wrap_policy's LoRA policy needs 0
            _adapter_units_as_framework(t, d, notes)
        return Imported(t, d, notes, required)
    A = "actor_rollout_ref"
    estimator = get("algorithm.adv_estimator", "gae")
    if not isinstance(estimator, str) or estimator not in VERL_ESTIMATORS:
        # get_adv_estimator_fn raises for a name no estimator registered (core_algos.py @b178a3cd, l.136)
        raise _bad(t, f"algorithm.adv_estimator: {str(estimator)[:40]!r}; allowed: one of {', '.join(VERL_ESTIMATORS)}")
    # verl builds a critic when critic.enable says so, else only for gae (need_critic, verl/trainer/ppo/utils.py
    # l.86-97 @b178a3cd56f58b2d502255daba591e92833930a7)
    critic = flag("critic.enable", estimator == "gae")
    d["method"] = "ppo" if critic else "grpo"
    if estimator not in ("gae", "grpo") or critic != (estimator == "gae"):
        notes.append(f"algorithm.adv_estimator {estimator}" + (" with critic.enable" if critic != (estimator == "gae") else "")
                     + (": a critic, planned as ppo" if critic else ": critic-free like grpo; planned as grpo (no critic,"
                        f" {A}.rollout.n generations per prompt)"))
    ro: dict[str, Any] = {"engine": "vllm", "placement": "colocate"}
    if get(f"{A}.model.use_remove_padding") is not None:
        # stated, it is written: the verl preset's packing habit (plan.rl_batches.PACKING_PRESETS, from verl's
        # default use_remove_padding: True, verl/trainer/config/model/hf_model.yaml l.40
        # @1dda039b9c6311889a9c9a26040677e1254814f9) must not override a file that turns it off
        ro["packed_sequences"] = flag(f"{A}.model.use_remove_padding")
    engine = get(f"{A}.rollout.name", "vllm")
    if engine == "sglang":  # rollout.engine sglang (spec.enums.RolloutEngine)
        ro["engine"] = "sglang"
    elif engine != "vllm":
        notes.append(f"{A}.rollout.name {engine}: planned as vLLM")
    for src, dst, k in (("data.train_batch_size", "prompts_per_step", int), ("data.max_prompt_length", "prompt_len", int),
                        ("data.max_response_length", "response_len", int), (f"{A}.rollout.n", "num_generations", int),
                        (f"{A}.rollout.gpu_memory_utilization", "gpu_memory_utilization", float),
                        (f"{A}.rollout.tensor_model_parallel_size", "tensor_parallel", int),
                        (f"{A}.rollout.max_num_seqs", "max_num_seqs", int),
                        (f"{A}.rollout.max_num_batched_tokens", "max_num_batched_tokens", int),
                        (f"{A}.rollout.log_prob_micro_batch_size_per_gpu", "logprob_micro_batch_size", int),
                        (f"{A}.actor.ppo_epochs", "num_iterations", int)):
        v = get(src)
        if v is not None:
            ro[dst] = _num(t, src, v, k)
    # verl defaults (rollout.yaml): gpu_memory_utilization 0.5, tensor_model_parallel_size 2, free_cache_engine True
    ro.setdefault("gpu_memory_utilization", 0.5)
    ro.setdefault("tensor_parallel", 2)
    ro["cuda_graphs"] = not flag(f"{A}.rollout.enforce_eager")
    quant = get(f"{A}.rollout.quantization")
    if quant not in (None, "fp8"):  # verl RolloutConfig.quantization: fp8 | torchao
        raise _bad(t, f"{A}.rollout.quantization: {quant!r}; allowed: fp8 (vLLM 128x128-block fp8), or unset")
    if quant == "fp8":
        ro["quantization"] = "fp8"
    if flag(f"{A}.rollout.layered_summon"):  # verl refuses it under the default dummy load (export.verl)
        fmt = get(f"{A}.rollout.load_format", "dummy")
        if fmt != "safetensors":
            raise _bad(t, f"{A}.rollout.layered_summon: True needs the base weights preloaded in vLLM, and"
                          f" {A}.rollout.load_format is {fmt!r}; allowed with it: safetensors")
        ro["layered_summon"] = True
    free = flag(f"{A}.rollout.free_cache_engine", True)
    ro["sleep_level"] = verl_sleep_level(RunCard(scope=Scope(scope)), free)
    ro["weight_sync"] = "bucketed"
    mb_bytes = get(f"{A}.rollout.checkpoint_engine.update_weights_bucket_megabytes", 2048)
    if mb_bytes != 1024:
        notes.append(
            f"{A}.rollout.checkpoint_engine.update_weights_bucket_megabytes {mb_bytes}: planned with trainfit's 1024 MiB bucket"
        )
    mb = _num(t, "ppo_micro_batch_size_per_gpu", get(f"{A}.actor.ppo_micro_batch_size_per_gpu", 1))
    set_dotted(d, "batch.micro_batch_size", mb)
    # verl's dynamic batching (ppo_trainer.yaml l.37-38, l.81-82 @e0d035cd4a6a5c29835516a58d78710a28e73b18: the
    # budget 16384 by default; the log-prob passes follow the actor's switch and budget unless set)
    dyn = flag(f"{A}.actor.use_dynamic_bsz")
    if dyn:
        ro["max_tokens_per_micro_batch"] = _num(t, "ppo_max_token_len_per_gpu",
                                                get(f"{A}.actor.ppo_max_token_len_per_gpu", 16384))
    if flag(f"{A}.rollout.log_prob_use_dynamic_bsz", dyn):
        lp_tokens = get(f"{A}.rollout.log_prob_max_token_len_per_gpu")
        ro.pop("logprob_micro_batch_size", None)
        if lp_tokens is not None or not dyn:
            ro["logprob_max_tokens_per_micro_batch"] = _num(
                t, "log_prob_max_token_len_per_gpu", lp_tokens if lp_tokens is not None
                else get(f"{A}.actor.ppo_max_token_len_per_gpu", 16384))
    elif dyn and "logprob_micro_batch_size" not in ro:
        ro["logprob_micro_batch_size"] = mb  # fixed log-prob micro-batches: the card's default is the update's
    mini = get(f"{A}.actor.ppo_mini_batch_size")
    ng = ro.get("num_generations", 8)
    if mini is not None:
        mini = _num(t, "ppo_mini_batch_size", mini)
        ga = _ratio(mini * ng, mb * world)
        if ga is None:
            notes.append("ppo_mini_batch_size x n is not a multiple of micro-batch x GPUs; batch.grad_accum left at 1")
        else:
            set_dotted(d, "batch.grad_accum", ga)
        steps = _ratio(ro.get("prompts_per_step", 16), mini)
        if steps:
            ro["mini_batches"] = steps
    if d["method"] == "grpo":
        kl = _num(t, "kl_loss_coef", get(f"{A}.actor.kl_loss_coef", 0.001), float) if flag(f"{A}.actor.use_kl_loss") else 0.0
    else:
        kl = _num(t, "kl_coef", get("algorithm.kl_ctrl.kl_coef", 0.001), float) if flag("algorithm.use_kl_in_reward") else 0.0
    set_dotted(d, "roles.kl_coef", kl)
    if kl > 0:
        if scope != "full":
            ref = "lora_disabled"  # verl runs the reference as the actor with its adapter disabled (ref_in_actor)
        else:
            ref_off = flag(f"{A}.ref.megatron.param_offload") if mega else flag(f"{A}.ref.fsdp_config.param_offload")
            ref = "cpu" if ref_off else "gpu"
        set_dotted(d, "roles.reference", ref)
    else:
        set_dotted(d, "roles.reference", "none")
    critic_path = o.name_or_required("critic.model.path", "roles.critic", required) if d["method"] == "ppo" else None
    if critic_path is not None:
        if isinstance(critic_path, ShellExpanded) and critic_path == actor_path:
            # the same expanded word as the actor's path: the same model whatever the shell fills in
            required.pop("roles.critic")
            set_dotted(d, "roles.critic", "same_as_actor")
        elif not isinstance(critic_path, ShellExpanded):
            c = str(critic_path)
            set_dotted(d, "roles.critic", "same_as_actor" if c == d.get("model") else c)
    if flag("reward.reward_model.enable"):
        rm_path = o.name_or_required("reward.reward_model.model_path", "roles.reward_model", required)
        if rm_path is not None and not isinstance(rm_path, ShellExpanded):
            set_dotted(d, "roles.reward_model", str(rm_path))
    has_critic = d.get("roles", {}).get("critic") is not None
    critic_dyn = flag("critic.use_dynamic_bsz", dyn)  # verl: ${actor.use_dynamic_bsz} unless set
    if has_critic and critic_dyn != dyn:
        notes.append(f"critic.use_dynamic_bsz {critic_dyn}: the card has one dynamic-batching switch, the actor's"
                     f" ({dyn}); the critic is planned " + ("with the actor's micro-batches of sequences" if not dyn
                                                            else "under its token budget"))
    if has_critic and dyn:
        # verl's critic has its own budget, 32768 by default (ppo_trainer.yaml l.159-161
        # @e0d035cd4a6a5c29835516a58d78710a28e73b18, _generated_ppo_trainer.yaml l.446-448
        # @b178a3cd56f58b2d502255daba591e92833930a7), its values pass critic.forward_max_token_len_per_gpu (default:
        # the critic's budget), read as rollout.critic_max_tokens_per_micro_batch unless both are what the card's
        # null plans (the actor's update budget and the log-prob budget); it packs only with
        # critic.model.use_remove_padding (off by default for the FSDP critic, _generated_ppo_trainer.yaml l.432)
        stated = get("critic.ppo_max_token_len_per_gpu") is not None
        critic_budget = _num(t, "critic.ppo_max_token_len_per_gpu", get("critic.ppo_max_token_len_per_gpu", 32768))
        forward = get("critic.forward_max_token_len_per_gpu")
        forward = critic_budget if forward is None else _num(t, "critic.forward_max_token_len_per_gpu", forward)
        lp_now = ro.get("logprob_max_tokens_per_micro_batch", ro["max_tokens_per_micro_batch"]
                        if "logprob_micro_batch_size" not in ro else None)
        if critic_budget != ro["max_tokens_per_micro_batch"] or forward != lp_now:
            ro["critic_max_tokens_per_micro_batch"] = critic_budget
            if not stated:
                notes.append(f"critic.ppo_max_token_len_per_gpu {critic_budget} (verl's default, not stated): read as"
                             " rollout.critic_max_tokens_per_micro_batch")
            if forward != critic_budget:
                notes.append(f"critic.forward_max_token_len_per_gpu {forward}: the card has one critic budget; the"
                             f" values pass is planned with critic.ppo_max_token_len_per_gpu {critic_budget}")
        if not mega and not get("critic.model.use_remove_padding", False):
            notes.append("critic.model.use_remove_padding false: verl's critic pads its micro-batches; the card plans"
                         " them packed as the actor's")
    if not mega and not flag(f"{P}.use_fused_kernels"):
        # verl's FSDP actor computes its log-probs with flash-attn's cross_entropy_loss whenever flash-attn imports,
        # in place while entropy_coeff is 0 (export.common.verl_flash_attn_logprobs); no key switches it. Whether the
        # temperature is divided into a copy (loss.temperature_copy) depends on the verl version, not a key
        entropy = _num(t, "entropy_coeff", get(f"{A}.actor.entropy_coeff", 0), float)
        set_dotted(d, "loss.kernel", "flash_attn")
        set_dotted(d, "loss.inplace_backward", entropy == 0)
        notes.append("loss.kernel flash_attn: verl's FSDP actor computes its log-probs with flash-attn's"
                     " cross_entropy_loss when flash-attn is installed (no key)"
                     + ("" if entropy == 0 else "; entropy_coeff != 0: not in place"))
    set_dotted(d, "rollout", ro)
    notes.append(_prompt_mean_note(ro.get("prompt_len")))
    if not mega and not get(f"{E}.wrap_policy.min_num_params", 0):  # get_fsdp_wrap_policy's LoRA policy needs 0
        _adapter_units_as_framework(t, d, notes)
    return Imported(t, d, notes, required)


def _nemo_rl_load_balancing(t: str, where: str, value: Any, model: str | None, par: dict[str, Any],
                            notes: list[str]) -> None:
    """The card's ``parallel.moe_load_balancing`` from NeMo RL's first-class
    ``megatron_cfg.moe_router_load_balancing_type`` where the file sets it: ``_apply_moe_config`` writes it onto the
    model config after ``model_overrides`` are merged (nemo_rl/models/megatron/setup.py l.670, l.676, l.908-910
    @7ea279abfbeb698b092856d0dab61e7cf39bc909). Unset, the card leaves it unstated (the examples' own values:
    grpo_math_1B.yaml l.227 'none', sft.yaml l.159 'aux_loss', at that commit, are not assumed). A catalog model
    without experts has no router: the key is noted, not read."""
    if value is None:
        return
    from trainfit.spec.enums import MoeLoadBalancing

    allowed = [m.value for m in MoeLoadBalancing]
    if value not in allowed:
        raise _bad(t, f"{where}.moe_router_load_balancing_type: {value!r}; allowed: {', '.join(allowed)}")
    if model is not None:
        from trainfit.catalog.models import catalog_ids, from_catalog

        if model in catalog_ids() and from_catalog(model).moe is None:
            notes.append(f"{where}.moe_router_load_balancing_type {value}: {model} has no routed experts; not read")
            return
    par["moe_load_balancing"] = value


def _megatron_extras(t: str, where: str, get: Any, par: dict[str, Any], model: str | None,
                     notes: list[str]) -> None:
    """The Megatron-Core-only card ``parallel`` keys from a TransformerConfig-like mapping (verl's
    override_transformer_config, NeMo RL's megatron_cfg and its model_overrides): every Megatron-Core run is
    tensor_parallel_impl megatron; ``pipeline_model_parallel_layout``, ``moe_token_dispatcher_type`` /
    ``moe_enable_deepep``, ``overlap_moe_expert_parallel_comm``, ``tp_comm_overlap`` and
    ``moe_router_force_load_balancing`` (``moe_router_load`` balanced) are read back. The flags take booleans only
    (1 / 0 are refused, not read as true / false). ``model`` a catalog model without experts: the force-balance key is
    noted, not read (it has no router)."""
    from trainfit.export.parallel import dispatcher_from_megatron, layout_from_megatron

    par["tensor_parallel_impl"] = "megatron"
    layout = get("pipeline_model_parallel_layout")
    try:
        if layout is not None:
            par["pipeline_layout"] = list(layout_from_megatron(layout, f"{where}.pipeline_model_parallel_layout"))
        par["moe_dispatcher"] = dispatcher_from_megatron(get("moe_token_dispatcher_type"), get("moe_enable_deepep"),
                                                         f"{where}.moe_token_dispatcher_type")
    except ValueError as exc:
        raise _bad(t, str(exc)) from None
    for key, card_key in (("overlap_moe_expert_parallel_comm", "moe_comm_overlap"),
                          ("tp_comm_overlap", "tp_comm_overlap")):
        v = get(key)
        if not (v is None or isinstance(v, bool)):  # by type: 1 == True and 0 == False would pass a membership test
            raise _bad(t, f"{where}.{key}: {v!r}; allowed: true, false")
        if v:
            par[card_key] = True
    # Megatron-Core's benchmarking switch: random router logits, every rank the mean load (the card's
    # parallel.moe_router_load balanced; NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py
    # moe_router_force_load_balancing @d12f6c8c9aff51e166d872fd70151687a8e3f375)
    v = get("moe_router_force_load_balancing")
    if not (v is None or isinstance(v, bool)):
        raise _bad(t, f"{where}.moe_router_force_load_balancing: {v!r}; allowed: true, false")
    if v and model is not None:
        from trainfit.catalog.models import catalog_ids, from_catalog

        if model in catalog_ids() and from_catalog(model).moe is None:
            notes.append(f"{where}.moe_router_force_load_balancing {v}: {model} has no routed experts; not read")
            return
    if v:
        par["moe_router_load"] = "balanced"


def _verl_megatron(t: str, M: str, get: Any, d: dict[str, Any], notes: list[str]) -> str:
    """The card's parallel and precision keys from one verl ``megatron`` section (defaults: verl 0.9.1
    ``engine/megatron.yaml``); returns the strategy."""

    def flag(k: str, default: bool = False) -> bool:
        return _switch(t, k, get(k), default)

    from trainfit.export.parallel import (
        FP8_RECIPE_FROM_MEGATRON,
        checkpointing_from_megatron,
        launch_from_megatron,
        megatron_precision,
    )

    def size(key: str, default: Any) -> int:
        v = get(f"{M}.{key}", default)
        return default if v is None else _num(t, f"{M}.{key}", v)

    tp = size("tensor_model_parallel_size", 1)
    vpp = size("virtual_pipeline_model_parallel_size", 1)
    par: dict[str, Any] = {
        "tensor_parallel": tp, "pipeline_parallel": size("pipeline_model_parallel_size", 1),
        "context_parallel": size("context_parallel_size", 1), "expert_parallel": size("expert_model_parallel_size", 1),
        "expert_tensor_parallel": size("expert_tensor_parallel_size", tp),  # null: the same as TP
        "sequence_parallel": flag(f"{M}.sequence_parallel", True) and tp > 1,  # verl turns it off at TP 1
        "virtual_stages": vpp, "pipeline_schedule": "interleaved" if vpp > 1 else "1f1b",
    }
    for key, field in (("num_layers_in_first_pipeline_stage", "pipeline_first_stage_layers"),
                       ("num_layers_in_last_pipeline_stage", "pipeline_last_stage_layers")):
        n = get(f"{M}.override_transformer_config.{key}")
        if n is not None:
            par[field] = _num(t, f"{M}.override_transformer_config.{key}", n)
    _megatron_extras(t, f"{M}.override_transformer_config", lambda k: get(f"{M}.override_transformer_config.{k}"), par,
                     d.get("model"), notes)
    # deallocate_pipeline_outputs / moe_router_fusion as the file sets them; unset, Megatron-Core's defaults (both
    # false): verl's config converter leaves deallocate_pipeline_outputs commented out
    # (verl/models/mcore/config_converter.py l.374 @1dda039b6c6311889a9c9a26040677e1254814f9)
    try:
        launch_from_megatron(f"{M}.override_transformer_config", lambda k: get(f"{M}.override_transformer_config.{k}"),
                             pipeline_parallel=par["pipeline_parallel"], deallocated_default=False, par=par)
    except ValueError as exc:
        raise _bad(t, str(exc)) from None
    comm = get(f"{M}.override_transformer_config.cp_comm_type")
    if comm not in (None, "p2p", "a2a"):
        raise _bad(t, f"{M}.override_transformer_config.cp_comm_type: {comm!r}; allowed: p2p (ring), a2a (Ulysses)")
    par["context_parallel_kind"] = "ulysses" if comm == "a2a" else "ring"
    par.update(checkpointing_from_megatron(get(f"{M}.override_transformer_config.recompute_granularity")))
    mods = get(f"{M}.override_transformer_config.recompute_modules")
    if par["selective_checkpointing"] == "core_attention" and mods not in (None, ["core_attn"]):
        notes.append(f"{M}.override_transformer_config.recompute_modules {mods}: planned as [core_attn]")
    for k, v in par.items():
        set_dotted(d, f"parallel.{k}", v)
    dtype = get(f"{M}.dtype", "bfloat16")
    if dtype not in ("bfloat16", "float16"):
        raise _bad(t, f"{M}.dtype: {dtype!r}; allowed: bfloat16, float16")
    compute = "fp16" if dtype == "float16" else "bf16"
    # override_ddp_config is merged last into Megatron-Core's DistributedDataParallelConfig: grad_reduce_in_fp32
    # defaults to True on verl's own and mbridge's path (verl b178a3cd verl/utils/megatron_utils.py l.139-145;
    # ISEEKYAN/mbridge @0ae572a4 mbridge/core/util.py), to Megatron-Bridge's False with vanilla_mbridge false
    D = f"{M}.override_ddp_config"
    bridge = get(f"{M}.use_mbridge", True) is not False and get(f"{M}.vanilla_mbridge", True) is False
    ddp = {k: get(f"{D}.{k}") for k in ("grad_reduce_in_fp32", "overlap_param_gather")}
    for k, v in ddp.items():
        if v not in (None, True, False):
            raise _bad(t, f"{D}.{k}: {v!r}; allowed: true, false")
    fp32 = (not bridge) if ddp["grad_reduce_in_fp32"] is None else ddp["grad_reduce_in_fp32"]
    for k, v in megatron_precision(compute, grad_reduce_in_fp32=fp32).items():
        set_dotted(d, f"precision.{k}", v)
    fp8 = get(f"{M}.override_transformer_config.fp8")
    if fp8 not in (None, False):
        recipe = get(f"{M}.override_transformer_config.fp8_recipe", "delayed")
        if recipe not in FP8_RECIPE_FROM_MEGATRON:
            raise _bad(t, f"{M}.override_transformer_config.fp8_recipe: {recipe!r}; allowed: {', '.join(FP8_RECIPE_FROM_MEGATRON)}")
        compute = "fp8"
        set_dotted(d, "precision.fp8_recipe", FP8_RECIPE_FROM_MEGATRON[recipe].value)
        if get(f"{M}.override_transformer_config.fp8_param", False) not in (None, False, "False", "false"):
            set_dotted(d, "precision.fp8_params", True)  # TransformerConfig.fp8_param: fp8 primary weights
        if get(f"{M}.override_transformer_config.fp8_dot_product_attention", False) not in (None, False, "False",
                                                                                          "false"):
            set_dotted(d, "precision.fp8_attention", True)  # TE fp8_dpa (export.parallel.megatron_fp8)
    set_dotted(d, "precision.compute", compute)
    strategy = ("fsdp" if flag(f"{M}.use_megatron_fsdp") else
                "zero1" if flag(f"{M}.use_distributed_optimizer", True) else "ddp")
    _overlap_param_gather(t, D, ddp["overlap_param_gather"], strategy, d, notes)
    return strategy


def _overlap_param_gather(t: str, where: str, v: Any, strategy: str, d: dict[str, Any], notes: list[str]) -> None:
    """The card's ``parallel.overlap_param_gather`` from a Megatron-Core DDP config's ``overlap_param_gather``: a
    setting of the distributed optimizer (card strategy zero1); under Megatron FSDP it is said and not planned."""
    if v not in (None, True, False):
        raise _bad(t, f"{where}.overlap_param_gather: {v!r}; allowed: true, false")
    if v and strategy == "zero1":
        set_dotted(d, "parallel.overlap_param_gather", True)
    elif v and strategy == "fsdp":
        notes.append(f"{where}.overlap_param_gather: Megatron FSDP's parameter prefetch; planned as the card's fsdp"
                     " (parallel.overlap_param_gather is the distributed optimizer's, strategy zero1)")


def _prompt_mean_note(prompt_len: Any) -> str:
    """The import note for an RL file: the mean prompt is the data's (``rollout.prompt_len_mean``)."""
    longest = f"{prompt_len} tokens" if prompt_len is not None else "rollout.prompt_len"
    return (f"rollout.prompt_len_mean: the mean prompt length is the data's, not a setting of the file; planned with"
            f" every prompt at the longest ({longest}) until it is set (e.g. --set rollout.prompt_len_mean=N)")


# -- OpenRLHF -------------------------------------------------------------------------------------

OPENRLHF_ESTIMATORS = ("gae", "reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo")
"""``--algo.advantage.estimator``'s choices (OpenRLHF/OpenRLHF openrlhf/cli/train_ppo_ray.py l.477-482
@3c3be6234e0cb353e76bb8019947db9dfe99fca7); named when a list is refused."""

_ORLHF_SCRIPT = {"train_sft": "sft", "train_dpo": "dpo", "train_rm": "rm", "train_ppo_ray": "ppo"}


def _openrlhf_flags(argv: list[str]) -> _CheckedRead:
    """The script's dotted flags and the words after each; an expanded word that starts a flag's value makes that
    flag's value unknown (``expanded``), one anywhere else is listed in ``extra_expanded``. An undotted option after
    the ``openrlhf.cli.*`` module (OpenRLHF's spelling before its 0.11 grouped flags) is listed in ``undotted`` and
    ends the flag before it: its words are not that flag's values."""
    out = _CheckedRead("openrlhf")
    cur: str | None = None
    after_module = False
    for tok in argv:
        if str(tok).startswith("openrlhf.cli."):
            after_module = True
        if tok.startswith("--") and "." not in tok.split("=", 1)[0]:
            if after_module:
                out.undotted.add(tok.split("=", 1)[0])
            cur = None
        elif tok.startswith("--") and "." in tok.split("=", 1)[0]:
            if "=" in tok:
                k, v = tok.split("=", 1)
                out[k] = [v]
                out.expanded.pop(k, None)
                if isinstance(tok, ShellExpanded):
                    out.expanded[k] = v
                cur = None
            else:
                out[tok] = []
                out.expanded.pop(tok, None)
                cur = tok
        elif isinstance(tok, ShellExpanded) and (cur is None or dict.__getitem__(out, cur)):
            # a word the shell expands that is not a flag's first value (a trailing ``$EXTRA_ARGS``): what it holds
            # is unknown, so it is said and not read; blamed on the flag before it, ``--ds.zero_stage 2 $EXTRA_ARGS``
            # was refused as an expanded zero stage
            out.extra_expanded.append(tok)
            cur = None
        elif cur is not None:
            dict.__getitem__(out, cur).append(tok)
            if isinstance(tok, ShellExpanded):
                out.expanded[cur] = tok
    return out


_OPENRLHF_GPU_MEMORY_UTILIZATION_DEFAULT = 0.95
"""``--vllm.gpu_memory_utilization`` ``default=0.95`` (OpenRLHF/OpenRLHF openrlhf/cli/train_ppo_ray.py l.250-254
@3c3be6234e0cb353e76bb8019947db9dfe99fca7), used by every engine whatever the placement (l.56-76)."""


def read_openrlhf(text: str) -> Imported:
    t = "openrlhf"
    argv = _shell_argv(text, t)
    script = next((a.rsplit(".", 1)[1] for a in argv if a.startswith("openrlhf.cli.")), None)
    if script not in _ORLHF_SCRIPT:
        raise _bad(t, "expected an openrlhf.cli.train_sft|train_dpo|train_rm|train_ppo_ray command")
    fl = _openrlhf_flags(argv)

    def one(k: str, kind: type = str, default: Any = None) -> Any:
        v = fl.get(k)
        if v is None:
            return default
        if not v:  # the flag with nothing after it: never the default in place of what the script meant to give
            raise _bad(t, f"{k}: the flag has no value")
        return v[0] if kind is str else _num(t, k, v[0], kind)

    d: dict[str, Any] = {}
    notes: list[str] = []
    method = _ORLHF_SCRIPT[script]
    rl = method == "ppo"
    estimator = fl.get("--algo.advantage.estimator")
    if estimator is not None and (len(estimator) > 1 or any(c in estimator[0] for c in "[],")):
        # OpenRLHF's parser takes one name of six (``type=str``, no nargs, ``choices``: OpenRLHF/OpenRLHF
        # openrlhf/cli/train_ppo_ray.py l.477-482 @3c3be6234e0cb353e76bb8019947db9dfe99fca7): a list is refused there;
        # read here as its first item or as an unknown name (ppo), it planned a method the run never had
        raise _bad(t, f"--algo.advantage.estimator: {' '.join(estimator)[:60]!r} is a list; allowed: one of"
                      f" {', '.join(OPENRLHF_ESTIMATORS)}")
    est = one("--algo.advantage.estimator")
    if est is not None and est not in OPENRLHF_ESTIMATORS:
        # argparse ``choices`` compares the name as written (case-sensitive, fixed list: train_ppo_ray.py l.477-482
        # @3c3be6234e0cb353e76bb8019947db9dfe99fca7); 'GAE' or 'foo' stops the run at parsing
        raise _bad(t, f"--algo.advantage.estimator: {str(est)[:40]!r}; allowed: one of {', '.join(OPENRLHF_ESTIMATORS)}")
    if rl and est is not None and est != "gae":
        # only gae trains a critic: OpenRLHF drops critic_pretrain for every other estimator ("if
        # args.advantage_estimator not in ['gae']: args.critic_pretrain = None", openrlhf/cli/train_ppo_ray.py
        # @3c3be6234e0cb353e76bb8019947db9dfe99fca7); group_norm is GRPO, the others are planned as it (no critic,
        # n samples per prompt), their advantage arithmetic being negligible beside the passes
        method = "grpo"
        if est != "group_norm":
            notes.append(f"--algo.advantage.estimator {est}: critic-free like group_norm; planned as grpo (no critic,"
                         " --rollout.n_samples_per_prompt generations per prompt)")
    d["method"] = method
    required: dict[str, str] = {}

    def named(k: str, card_key: str) -> Any:
        """A model name: an expanded one is recorded as required (``--set`` gives it), not refused."""
        return fl.name_or_required(k, card_key, required) if k in fl.expanded else one(k)

    if fl.extra_expanded:
        words = " ".join(fl.extra_expanded)
        notes.append(f"{words[:60]!r}: expanded by the shell when the script runs; the arguments it holds are not read")
    undotted = sorted(fl.undotted)
    if undotted:
        # the script's own options are dotted (--ds.zero_stage, --actor.model_name_or_path, --train.micro_batch_size:
        # openrlhf/cli/train_ppo_ray.py @3c3be6234e0cb353e76bb8019947db9dfe99fca7); OpenRLHF before them spelled the
        # same settings undotted (--zero_stage, --pretrain, --micro_train_batch_size): such a script's card would
        # otherwise carry the defaults in place of what it gave, with nothing said
        listed = ", ".join(undotted[:12]) + (f" and {len(undotted) - 12} more" if len(undotted) > 12 else "")
        notes.append(f"not read: {listed} (undotted options, as OpenRLHF spelled them before its 0.11 grouped flags such"
                     " as --ds.zero_stage); the card keeps its defaults for them: --set the fields they meant")
    model = named("--actor.model_name_or_path", "model") if rl else named("--model.model_name_or_path", "model")
    if model is not None and not isinstance(model, ShellExpanded):
        d["model"] = model
    stage = one("--ds.zero_stage", int, 2)
    if stage not in _DS_STRATEGY:
        raise _bad(t, f"--ds.zero_stage {stage}; allowed: 0, 1, 2, 3")
    strategy = _DS_STRATEGY[stage]
    if stage == 3 and "--ds.zpg" in fl:
        strategy = "hsdp"
    set_dotted(d, "parallel.strategy", strategy)
    adam_offload = "--ds.adam_offload" in fl
    if adam_offload and stage == 0:
        # OpenRLHF's get_train_ds_config writes offload_optimizer, "Valid with stage 1, 2, and 3"
        # (deepspeed/runtime/zero/offload_config.py l.52-53 @1978617c691b2c992a17902975187ef8d61176fa)
        notes.append("--ds.adam_offload: DeepSpeed offloads the optimizer from ZeRO stage 1; at --ds.zero_stage 0 it"
                     " is ignored and not planned")
        adam_offload = False
    set_dotted(d, "parallel.offload", "optimizer" if adam_offload else "none")
    if "--ds.overlap_comm" in fl:  # openrlhf/utils/deepspeed/deepspeed_utils.py get_train_ds_config sets both
        set_dotted(d, "deepspeed.overlap_comm", True)
        set_dotted(d, "deepspeed.contiguous_gradients", True)
    gc_flag = "--actor.gradient_checkpointing_enable" if rl else "--model.gradient_checkpointing_enable"
    set_dotted(d, "parallel.gradient_checkpointing", gc_flag in fl)
    compute = one("--ds.param_dtype", str, "bf16")
    if compute not in ("bf16", "fp16"):
        raise _bad(t, f"--ds.param_dtype {compute!r}; allowed: bf16, fp16")
    set_dotted(d, "precision.compute", compute)
    _deepspeed_precision(d, stage, compute)
    attn = one("--ds.attn_implementation")
    if attn is not None:
        if attn not in _HF_ATTN:
            raise _bad(t, f"--ds.attn_implementation {attn!r}; allowed: {', '.join(_HF_ATTN)}")
        d["attention"] = _HF_ATTN[attn]
    if "--ds.use_liger_kernel" in fl:
        set_dotted(d, "loss.chunked", True)
    ring = one("--ds.ring_attn_size", int, 1)
    tp = one("--ds.tensor_parallel_size", int, 1)
    if ring < 1 or tp < 1:
        raise _bad(t, "--ds.ring_attn_size and --ds.tensor_parallel_size must be at least 1")
    if ring > 1:
        set_dotted(d, "parallel.context_parallel", ring)
        set_dotted(d, "parallel.context_parallel_kind", "ring")
    if "--ds.packing_samples" in fl and method in ("sft", "rm", "dpo"):
        notes.append("--ds.packing_samples: rows are packs of whole samples, but the mean tokens per sample is the"
                     " data's; planned as one sequence per row until batch.packed_sample_tokens is set (e.g. --set"
                     " batch.packed_sample_tokens=N)")
    if tp > 1:
        set_dotted(d, "parallel.tensor_parallel", tp)
    scope = "full"
    if "--ds.lora.rank" in fl and one("--ds.lora.rank", int, 0) > 0:
        scope = "qlora" if "--ds.load_in_4bit" in fl else "lora"
        lora: dict[str, Any] = {"rank": one("--ds.lora.rank", int)}
        if "--ds.lora.alpha" in fl:
            lora["alpha"] = one("--ds.lora.alpha", float)
        if fl.get("--ds.lora.target_modules"):
            tm = fl["--ds.lora.target_modules"]
            lora["targets"] = tm[0] if tm == ["all-linear"] else tm
        if "--ds.lora.dropout" in fl:
            lora["dropout"] = one("--ds.lora.dropout", float)
        d["lora"] = lora
    d["scope"] = scope
    mb = one("--train.micro_batch_size", int, 1)
    set_dotted(d, "batch.micro_batch_size", mb)
    if not rl:
        nodes = _num(t, "--num_nodes", _flag(argv, "--num_nodes") or 1)
        gpn = _num(t, "--num_gpus", _flag(argv, "--num_gpus") or 8)
        set_dotted(d, "hardware.nodes", nodes)
        set_dotted(d, "hardware.gpus_per_node", gpn)
        train_world = nodes * gpn
        if "--data.max_len" in fl:
            set_dotted(d, "batch.seq_len", one("--data.max_len", int))
        if method == "dpo":
            if "--model.beta" in fl:
                set_dotted(d, "roles.kl_coef", one("--model.beta", float))
            set_dotted(d, "roles.reference", "cpu" if "--ref.offload" in fl else "gpu")
    else:
        nodes = one("--actor.num_nodes", int, 1)
        per_node = one("--actor.num_gpus_per_node", int, 8)
        ro: dict[str, Any] = {"weight_sync": "per_parameter"}
        engines = one("--vllm.num_engines", int, 0)
        if engines == 0:
            ro["engine"] = "hf"
            gpn = per_node
        else:
            ro["engine"] = "vllm"
            tp = one("--vllm.tensor_parallel_size", int, 1)
            ro["tensor_parallel"] = tp
            if "--vllm.gpu_memory_utilization" in fl:
                ro["gpu_memory_utilization"] = one("--vllm.gpu_memory_utilization", float)
            else:
                # argparse default=0.95, handed to create_vllm_engines unchanged with or without --train.colocate_all
                # (OpenRLHF/OpenRLHF openrlhf/cli/train_ppo_ray.py l.56-76, l.250-254 @3c3be6234e0cb353e76bb8019947db9dfe99fca7);
                # unset, the card would take TRL's budget (written explicitly: the preset's hybrid 0.5 is not the split default)
                ro["gpu_memory_utilization"] = _OPENRLHF_GPU_MEMORY_UTILIZATION_DEFAULT
                notes.append(f"--vllm.gpu_memory_utilization not given: OpenRLHF's argparse default"
                             f" {_OPENRLHF_GPU_MEMORY_UTILIZATION_DEFAULT:g}, split or colocate_all (train_ppo_ray.py"
                             " l.250-254 @3c3be6234e0cb353e76bb8019947db9dfe99fca7)")
            if "--train.colocate_all" in fl:
                ro["placement"] = "colocate"
                gpn = per_node
                ro["sleep_level"] = 1 if "--vllm.enable_sleep" in fl else 0
            else:
                ro["placement"] = "split"
                rollout_gpus = _ratio(engines * tp, nodes)
                if rollout_gpus is None:
                    raise _bad(t, "--vllm.num_engines x tensor_parallel_size is not a multiple of --actor.num_nodes")
                ro["gpus"] = rollout_gpus
                gpn = per_node + rollout_gpus
        set_dotted(d, "hardware.nodes", nodes)
        set_dotted(d, "hardware.gpus_per_node", gpn)
        train_world = nodes * per_node
        for flag, dst in (("--rollout.batch_size", "prompts_per_step"), ("--rollout.n_samples_per_prompt", "num_generations"),
                          ("--rollout.max_new_tokens", "response_len"), ("--rollout.micro_batch_size", "logprob_micro_batch_size")):
            if flag in fl:
                ro[dst] = one(flag, int)
        if "--data.max_len" in fl and "response_len" in ro:
            ro["prompt_len"] = max(1, one("--data.max_len", int) - ro["response_len"])
        set_dotted(d, "rollout", ro)
        notes.append(_prompt_mean_note(ro.get("prompt_len")))
        kl = one("--algo.kl.init_coef", float, 0.0)
        set_dotted(d, "roles.kl_coef", kl)
        if "--ref.num_nodes" in fl or "--ref.num_gpus_per_node" in fl:
            set_dotted(d, "roles.reference", "cpu" if "--ref.offload" in fl else "gpu")
        else:
            set_dotted(d, "roles.reference", "none")
        critic = named("--critic.model_name_or_path", "roles.critic") if method == "ppo" else None
        if isinstance(critic, ShellExpanded) and critic == model:
            required.pop("roles.critic")  # the actor's expanded word: the same model whatever the shell fills in
            set_dotted(d, "roles.critic", "same_as_actor")
        elif critic is not None and not isinstance(critic, ShellExpanded):
            set_dotted(d, "roles.critic", "same_as_actor" if critic == model else critic)
        rm = named("--reward.model_name_or_path", "roles.reward_model")
        if rm is None:
            set_dotted(d, "roles.reward_model", "rule")
        elif not isinstance(rm, ShellExpanded):
            set_dotted(d, "roles.reward_model", rm)
    if "--train.batch_size" in fl:
        # openrlhf/utils/deepspeed/deepspeed.py: the batch counts sequences over the dp ranks of the (dp, sp, tp) mesh
        ga = _ratio(one("--train.batch_size", int), mb * max(1, train_world // (ring * tp)))
        if ga is None:
            notes.append("--train.batch_size is not a multiple of micro-batch x training GPUs; batch.grad_accum left at 1")
        else:
            set_dotted(d, "batch.grad_accum", ga)
        ro = d.get("rollout")
        if isinstance(ro, dict) and "prompts_per_step" in ro and "num_generations" in ro:
            # OpenRLHF takes rollout.batch_size x n_samples_per_prompt / train.batch_size optimizer steps per rollout
            # batch (openrlhf/trainer/ppo_trainer.py l.72-78 @3c3be6234e0cb353e76bb8019947db9dfe99fca7)
            steps = _ratio(ro["prompts_per_step"] * ro["num_generations"], one("--train.batch_size", int))
            if steps:
                ro["mini_batches"] = steps
            else:
                notes.append("--train.batch_size does not divide --rollout.batch_size x n_samples_per_prompt;"
                             " rollout.mini_batches left at the card's")
    return Imported(t, d, notes, required)


# -- torchtitan -----------------------------------------------------------------------------------


def read_torchtitan(text: str) -> Imported:
    """A torchtitan 0.2.2 TOML job config (``trainfit.export.torchtitan``); the GPU count from the degrees and the
    node count from a ``# launch: torchrun --nnodes=N --nproc_per_node=G`` comment when there is one."""
    import tomllib

    from trainfit.export.torchtitan import FLAVORS, IMPL_FROM

    t = "torchtitan"
    try:
        cfg = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer past Python's 4,300-digit conversion limit
        raise _bad(t, f"not TOML ({str(exc)[:200]})") from None
    except RecursionError:  # tomllib parses arrays and inline tables recursively
        raise _bad(t, "nested too deeply to read (TOML arrays or inline tables)") from None
    d: dict[str, Any] = {"method": "sft", "scope": "full"}
    notes: list[str] = []

    def sec(name: str) -> dict[str, Any]:
        node: Any = cfg
        for part in name.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            raise _bad(t, f"[{name}]: expected a table")
        return node

    def num(section: str, key: str, default: int) -> int:
        v = sec(section).get(key, default)
        return _num(t, f"{section}.{key}", v)

    model, par, tr = sec("model"), sec("parallelism"), sec("training")
    name, flavor = model.get("name", "llama3"), model.get("flavor", "debugmodel")
    assets = str(model.get("hf_assets_path", "")).rstrip("/").rsplit("/", 1)[-1]
    ids = [i for i, nf in FLAVORS.items() if nf == (name, flavor)]
    by_path = [i for i in ids if i.rsplit("/", 1)[-1] == assets]
    if by_path or ids:
        d["model"] = (by_path or ids)[0]
    else:
        notes.append(f"model {name} {flavor}: no Hugging Face id known for this torchtitan flavor; the card's model is left as is")
    replicate = num("parallelism", "data_parallel_replicate_degree", 1)
    shard = num("parallelism", "data_parallel_shard_degree", -1)
    tp = num("parallelism", "tensor_parallel_degree", 1)
    pp = num("parallelism", "pipeline_parallel_degree", 1)
    cp = num("parallelism", "context_parallel_degree", 1)
    ep = num("parallelism", "expert_parallel_degree", 1)
    etp = num("parallelism", "expert_tensor_parallel_degree", 1)
    if min(replicate, tp, pp, cp, ep, etp) < 1 or shard == 0 or shard < -1:
        raise _bad(t, "[parallelism] degrees must be at least 1 (data_parallel_shard_degree: -1 for the leftover ranks)")
    nodes, per_node = None, None
    for line in text.splitlines():
        if line.startswith("# launch:"):
            argv = shlex.split(line.partition(":")[2])
            n, g = _flag(argv, "--nnodes"), _flag(argv, "--nproc_per_node")
            nodes = _num(t, "--nnodes", n) if n is not None else None
            per_node = _num(t, "--nproc_per_node", g) if g is not None else None
    if shard == -1:
        if nodes is None or per_node is None:
            raise _bad(t, "data_parallel_shard_degree -1 (the leftover ranks) needs the GPU count: a '# launch: torchrun"
                          " --nnodes=N --nproc_per_node=G' line, or explicit degrees")
        rest = _ratio(nodes * per_node, replicate * tp * pp * cp)
        if rest is None:
            raise _bad(t, "the GPUs do not split into the [parallelism] degrees")
        shard = rest
    world = replicate * shard * tp * pp * cp
    if nodes is None:
        nodes = 1
        notes.append("hardware: no '# launch:' line; read as one node of all the GPUs the degrees name")
    if world % nodes:
        raise _bad(t, f"the degrees name {world} GPUs, not a multiple of --nnodes {nodes}")
    if per_node is not None and per_node * nodes != world:
        notes.append(f"# launch: {per_node * nodes} GPUs, but the [parallelism] degrees multiply to {world}; read the degrees")
    set_dotted(d, "hardware.nodes", nodes)
    set_dotted(d, "hardware.gpus_per_node", world // nodes)
    dp = replicate * shard
    strategy, hsdp_shard_size = "fsdp", None
    if world == 1:
        strategy = "single"
    elif shard == 1 and replicate > 1:
        strategy = "ddp"
    elif replicate > 1:
        strategy = "hsdp"
        # torchtitan's FSDP mesh is dp_shard x cp, replicated dp_replicate times: the card's HSDP shard group
        hsdp_shard_size = shard * cp if shard * cp != min(world // nodes, dp * cp) else None
    elif par.get("fsdp_reshard_after_forward", "default") == "never":
        strategy = "fsdp_grad_op"
    p: dict[str, Any] = {"strategy": strategy, "tensor_parallel": tp, "sequence_parallel": tp > 1, "pipeline_parallel": pp,
                         "context_parallel": cp, "context_parallel_kind": "ring", "expert_parallel": ep,
                         "expert_tensor_parallel": etp}
    if hsdp_shard_size is not None:
        p["hsdp_shard_size"] = hsdp_shard_size
    sched = str(par.get("pipeline_parallel_schedule", "1F1B"))
    fqns = par.get("module_fqns_per_model_part")
    if pp > 1:
        if fqns is not None:  # the modules of every model part: the card's pipeline_layout (and its virtual stages)
            from trainfit.export.torchtitan import layout_from_fqns

            try:
                p["pipeline_layout"] = list(layout_from_fqns(fqns))
            except ValueError as exc:
                raise _bad(t, str(exc)) from None
            if len(fqns) % pp:
                raise _bad(t, f"parallelism.module_fqns_per_model_part: {len(fqns)} model parts do not split over"
                              f" pipeline_parallel_degree {pp}")
        if sched == "Interleaved1F1B":
            v = len(fqns) // pp if fqns is not None else 2
            p["pipeline_schedule"], p["virtual_stages"] = "interleaved", v
            if par.get("pipeline_parallel_layers_per_stage") is not None and fqns is None:
                notes.append("pipeline_parallel_layers_per_stage: read as 2 stages per rank (torchtitan's default)")
        elif sched != "1F1B":
            notes.append(f"pipeline_parallel_schedule {sched}: planned as 1F1B")
    elif fqns is not None:
        notes.append("parallelism.module_fqns_per_model_part: only read with pipeline_parallel_degree > 1")
    backend = par.get("expert_parallel_comm_backend", "standard")
    if backend not in ("standard", "deepep"):
        raise _bad(t, f"parallelism.expert_parallel_comm_backend: {backend!r}; allowed: standard, deepep")
    if backend == "deepep":
        p["moe_dispatcher"] = "deepep"
    ac = sec("activation_checkpoint")
    mode = ac.get("mode", "selective")
    if mode == "full":
        p["gradient_checkpointing"], p["selective_checkpointing"] = True, "none"
    elif mode == "none":
        p["gradient_checkpointing"], p["selective_checkpointing"] = False, "none"
    elif mode == "selective":
        option = str(ac.get("selective_ac_option", "2")).strip()
        if option == "op":
            p["gradient_checkpointing"], p["selective_checkpointing"] = False, "op"
        elif not option.isdigit():
            raise _bad(t, f"activation_checkpoint.selective_ac_option: {option!r}; allowed: op or an integer"
                          " (checkpoint every n-th layer)")
        else:
            # torchtitan: layer k (from 1) is wrapped when ``not ac_freq or k % ac_freq == 0`` (0 and 1: all layers)
            p["gradient_checkpointing"], p["selective_checkpointing"] = True, "none"
            n = int(option)
            split = max(p.get(k, 1) for k in ("tensor_parallel", "context_parallel", "pipeline_parallel",
                                               "expert_parallel"))
            if n > 1 and split == 1:
                p["checkpoint_every_n_layers"] = n
            elif n > 1:
                notes.append(f"activation_checkpoint selective_ac_option {option}: every n-th layer is checkpointed;"
                             " a card with tensor, context, pipeline or expert parallel checkpoints all layers or"
                             " none (read as all)")
    else:
        raise _bad(t, f"activation_checkpoint.mode: {mode!r}; allowed: selective, full, none")
    p["offload"] = "params_and_optimizer" if tr.get("enable_cpu_offload") else "none"
    comp = sec("compile")
    # torchtitan compiles ``compile.components``, default ["model", "loss"] (v0.2.2 torchtitan/config/job_config.py
    # l.721-727; the loss: torchtitan/components/loss.py l.33-35): the model is parallel.compile, the loss loss.compiled
    components = comp.get("components", ["model", "loss"]) if comp.get("enable") else []
    if comp.get("enable") and "components" not in comp:
        # torchtitan before bbb1b616 (2025-04-02) had no compile.components and compiled the model alone
        notes.append("compile.components absent: read as torchtitan's default [\"model\", \"loss\"] (a config from"
                     " before torchtitan bbb1b616, 2025-04-02, compiled the model alone and ran the eager loss)")
    if "model" in components:
        p["compile"] = True
    if "loss" in components and p.get("tensor_parallel", 1) == 1:
        set_dotted(d, "loss.compiled", True)
    elif "loss" in components:
        notes.append("compile.components loss: the compiled loss-parallel cross-entropy under tensor parallel is not"
                     " modelled; planned as the eager loss")
    for k, v in p.items():
        set_dotted(d, f"parallel.{k}", v)
    dtype = tr.get("dtype", "float32")
    mpp = tr.get("mixed_precision_param", "bfloat16")
    if dtype not in ("float32", "bfloat16") or mpp not in ("float32", "bfloat16"):
        raise _bad(t, "training.dtype and mixed_precision_param: allowed: float32, bfloat16")
    set_dotted(d, "precision.weights", "fp32" if dtype == "float32" else "bf16")
    set_dotted(d, "precision.compute", "fp32" if mpp == "float32" and dtype == "float32" else "bf16")
    if "quantize.linear.float8" in (model.get("converters") or []):
        recipe = sec("quantize.linear.float8").get("recipe_name")
        if recipe != "tensorwise":
            raise _bad(t, f"quantize.linear.float8.recipe_name: {recipe!r}; a card's fp8 recipe here: tensorwise (current)")
        set_dotted(d, "precision.compute", "fp8")
        set_dotted(d, "precision.fp8_recipe", "current")
        if sec("quantize.linear.float8").get("enable_fsdp_float8_all_gather") and p.get("strategy") in (
                "fsdp", "fsdp_grad_op", "hsdp"):  # torchao's float8 all-gather applies to the FSDP-sharded weights
            set_dotted(d, "precision.fp8_all_gather", True)
    opt = sec("optimizer")
    if opt.get("name", "AdamW") not in ("AdamW", "Adam"):
        raise _bad(t, f"optimizer.name: {opt.get('name')!r}; allowed: Adam, AdamW")
    impl = opt.get("implementation", "fused")
    if impl not in IMPL_FROM:
        raise _bad(t, f"optimizer.implementation: {impl!r}; allowed: {', '.join(IMPL_FROM)}")
    set_dotted(d, "precision.optimizer", "adamw")
    set_dotted(d, "precision.optimizer_impl", IMPL_FROM[impl].value)
    if opt.get("early_step_in_backward"):
        set_dotted(d, "precision.optimizer_in_backward", True)
    d["attention"] = "sdpa"
    local = num("training", "local_batch_size", 8)
    glob = num("training", "global_batch_size", -1)
    if pp > 1:
        mb = num("parallelism", "pipeline_parallel_microbatch_size", 1)
        per_step = _ratio(local, mb)
        if per_step is None:
            raise _bad(t, "training.local_batch_size is not a multiple of pipeline_parallel_microbatch_size")
    else:
        mb, per_step = local, 1
    accum = 1 if glob == -1 else _ratio(glob, local * dp)
    if accum is None:
        raise _bad(t, f"training.global_batch_size {glob} is not a multiple of local_batch_size x data parallel ({local * dp})")
    set_dotted(d, "batch.micro_batch_size", mb)
    set_dotted(d, "batch.grad_accum", per_step * accum)
    set_dotted(d, "batch.seq_len", num("training", "seq_len", 2048))
    return Imported(t, d, notes)


# -- NeMo RL --------------------------------------------------------------------------------------


def read_nemo_rl(text: str) -> Imported:
    """A NeMo RL override config (``trainfit.export.nemo_rl``): ``defaults:`` names the example (grpo_math_1B.yaml:
    GRPO, sft.yaml: SFT); keys it leaves out take that example's values at NVIDIA-NeMo/RL 7ea279a."""
    from trainfit.export.parallel import FP8_RECIPE_FROM_MEGATRON, launch_from_megatron, megatron_precision
    from trainfit.spec.safe_yaml import load_yaml_limited

    t = "nemo-rl"
    # OmegaConf.load refuses a key given twice in one mapping ("found duplicate key", the mapping constructor of
    # get_yaml_loader, omry/omegaconf omegaconf/_utils.py @189a9bf3b9017f8970f338415be995b419238826): so does this
    cfg = load_yaml_limited(text, what="--from nemo-rl", unique_keys=True)
    if not isinstance(cfg, dict):
        raise _bad(t, "the file must hold a mapping")
    base = str(cfg.get("defaults", "")).rsplit("/", 1)[-1]
    if base.startswith("grpo"):
        method = "grpo"
    elif base.startswith("sft"):
        method = "sft"
    else:
        raise _bad(t, f"defaults: {cfg.get('defaults')!r}; allowed: grpo_math_1B.yaml (GRPO), sft.yaml (SFT)")

    def get(path: str, default: Any = None) -> Any:
        node: Any = cfg
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return default if node is None else node

    def flag(k: str, default: bool = False) -> bool:
        return _switch(t, k, get(k), default)

    from trainfit.export.common import omegaconf_unescape

    def text_value(key: str, v: Any) -> str:
        u = omegaconf_unescape(str(v))
        if u is None:
            raise _bad(t, f"{key}: {str(v)[:60]!r} is an OmegaConf interpolation; trainfit reads literal values only")
        return u

    d: dict[str, Any] = {"method": method}
    notes: list[str] = []
    if get("policy.model_name") is not None:
        d["model"] = text_value("policy.model_name", get("policy.model_name"))
    gpn = _num(t, "cluster.gpus_per_node", get("cluster.gpus_per_node", 1))
    nodes = _num(t, "cluster.num_nodes", get("cluster.num_nodes", 1))
    set_dotted(d, "hardware.gpus_per_node", gpn)
    set_dotted(d, "hardware.nodes", nodes)
    prec = get("policy.precision", "bfloat16")
    compute = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(prec))
    if compute is None:
        raise _bad(t, f"policy.precision: {prec!r}; allowed: bfloat16, float16, float32")
    mega = flag("policy.megatron_cfg.enabled")
    par: dict[str, Any] = {}
    scope, lora = "full", None
    if mega:
        M = "policy.megatron_cfg"

        def size(k: str) -> int:
            return _num(t, f"{M}.{k}", get(f"{M}.{k}", 1))

        tp = size("tensor_model_parallel_size")
        par = {"tensor_parallel": tp, "pipeline_parallel": size("pipeline_model_parallel_size"),
               "context_parallel": size("context_parallel_size"), "expert_parallel": size("expert_model_parallel_size"),
               "expert_tensor_parallel": size("expert_tensor_parallel_size"),
               "sequence_parallel": flag(f"{M}.sequence_parallel") and tp > 1}
        for key, field in (("num_layers_in_first_pipeline_stage", "pipeline_first_stage_layers"),
                           ("num_layers_in_last_pipeline_stage", "pipeline_last_stage_layers")):
            if get(f"{M}.{key}") is not None:
                par[field] = _num(t, f"{M}.{key}", get(f"{M}.{key}"))
        overrides = get(f"{M}.model_overrides") or {}
        if not isinstance(overrides, dict):
            raise _bad(t, f"{M}.model_overrides: a mapping of Megatron Bridge model fields")

        def mega_key(k: str) -> Any:  # a first-class megatron_cfg key, else a model override
            v = get(f"{M}.{k}")
            v = overrides.get(k) if v is None else v
            return text_value(f"{M}.{k}", v) if isinstance(v, str) else v

        _megatron_extras(t, M, mega_key, par, d.get("model"), notes)
        _nemo_rl_load_balancing(t, M, get(f"{M}.moe_router_load_balancing_type"), d.get("model"), par, notes)
        # NeMo RL builds its model with Megatron-Bridge's AutoBridge and overrides neither key unless the file does
        # (nemo_rl/models/megatron/setup.py l.608-609, l.662-670 @7ea279abfbeb698b092856d0dab61e7cf39bc909): the
        # provider's deallocate_pipeline_outputs True (Megatron-Bridge src/megatron/bridge/models/gpt_provider.py
        # l.162 @067f987df03b8355b03192d88d70f1709fedf51a), Megatron-Core's moe_router_fusion False (eager)
        try:
            launch_from_megatron(M, mega_key, pipeline_parallel=par["pipeline_parallel"], deallocated_default=True,
                                 par=par)
        except ValueError as exc:
            raise _bad(t, str(exc)) from None
        gc = flag(f"{M}.activation_checkpointing")
        gran = get(f"{M}.recompute_granularity", "full")
        par["gradient_checkpointing"] = gc and gran == "full"
        par["selective_checkpointing"] = "core_attention" if gc and gran == "selective" else "none"
        if gc and gran == "selective" and get(f"{M}.recompute_modules") not in (None, ["core_attn"]):
            notes.append(f"{M}.recompute_modules {get(f'{M}.recompute_modules')}: planned as [core_attn]")
        custom_fsdp = flag(f"{M}.distributed_data_parallel_config.use_custom_fsdp")
        dist = flag(f"{M}.optimizer.use_distributed_optimizer", True)
        par["strategy"] = "fsdp" if custom_fsdp else "zero1" if dist else ("ddp" if gpn * nodes > 1 else "single")
        par["offload"] = "optimizer" if flag(f"{M}.optimizer.optimizer_cpu_offload") else "none"
        # Megatron-Core DistributedDataParallelConfig (nemo_rl/models/megatron/setup.py l.1380-1430); unset keys take
        # the example's values (grpo_math_1B.yaml l.301-304, sft.yaml l.226-229: grad_reduce_in_fp32 false,
        # overlap_param_gather true)
        D = f"{M}.distributed_data_parallel_config"
        fp32 = get(f"{D}.grad_reduce_in_fp32", False)
        if fp32 not in (True, False):
            raise _bad(t, f"{D}.grad_reduce_in_fp32: {fp32!r}; allowed: true, false")
        for k, v in megatron_precision(compute, grad_reduce_in_fp32=fp32).items():
            set_dotted(d, f"precision.{k}", v)
        opg = get(f"{D}.overlap_param_gather", True if par["strategy"] == "zero1" else None)
        _overlap_param_gather(t, D, opg, par["strategy"], d, notes)
        d["attention"] = "flash"  # Megatron-Core's Transformer Engine attention (flash / fused kernels)
        if flag(f"{M}.fp8_cfg.enabled"):
            recipe = get(f"{M}.fp8_cfg.fp8_recipe", "blockwise")
            if recipe not in FP8_RECIPE_FROM_MEGATRON:
                raise _bad(t, f"{M}.fp8_cfg.fp8_recipe: {recipe!r}; allowed: {', '.join(FP8_RECIPE_FROM_MEGATRON)}")
            compute = "fp8"
            set_dotted(d, "precision.fp8_recipe", FP8_RECIPE_FROM_MEGATRON[recipe].value)
            if flag(f"{M}.fp8_cfg.fp8_param"):  # fp8 primary weights
                set_dotted(d, "precision.fp8_params", True)
        if flag(f"{M}.peft.enabled"):
            scope = "lora"
            lora = {"rank": _num(t, "peft.dim", get(f"{M}.peft.dim", 8)), "alpha": _num(t, "peft.alpha", get(f"{M}.peft.alpha", 32), float),
                    "dropout": _num(t, "peft.dropout", get(f"{M}.peft.dropout", 0.0), float),
                    "targets": [text_value("peft.target_modules", x) for x in get(f"{M}.peft.target_modules") or []]
                    or "all-linear"}
    else:
        D = "policy.dtensor_cfg"
        tp = _num(t, f"{D}.tensor_parallel_size", get(f"{D}.tensor_parallel_size", 1))
        par = {"strategy": "fsdp", "tensor_parallel": tp, "context_parallel": _num(t, f"{D}.context_parallel_size",
                                                                              get(f"{D}.context_parallel_size", 1)),
               "sequence_parallel": flag(f"{D}.sequence_parallel") and tp > 1,
               "gradient_checkpointing": flag(f"{D}.activation_checkpointing"),
               "offload": "params_and_optimizer" if flag(f"{D}.cpu_offload") else "none"}
        # nemo_rl/models/automodel/setup.py: loaded in float32 (master weights), computed in policy.precision
        set_dotted(d, "precision.weights", "fp32")
        if flag(f"{D}.lora_cfg.enabled"):
            scope = "lora"
            L = f"{D}.lora_cfg"
            lora = {"rank": _num(t, "lora_cfg.dim", get(f"{L}.dim", 8)), "alpha": _num(t, "lora_cfg.alpha", get(f"{L}.alpha", 32), float),
                    "dropout": _num(t, "lora_cfg.dropout", get(f"{L}.dropout", 0.0), float),
                    "targets": "all-linear" if get(f"{L}.match_all_linear", True) else
                    [text_value("lora_cfg.target_modules", x) for x in get(f"{L}.target_modules") or []]}
    par["context_parallel_kind"] = "ring"
    for k, v in par.items():
        set_dotted(d, f"parallel.{k}", v)
    set_dotted(d, "precision.compute", compute)
    d["scope"] = scope
    if lora is not None:
        d["lora"] = lora
    mb = _num(t, "policy.train_micro_batch_size", get("policy.train_micro_batch_size", 4 if method == "grpo" else 1))
    gbs = _num(t, "policy.train_global_batch_size", get("policy.train_global_batch_size", 512 if method == "grpo" else 32))
    set_dotted(d, "batch.micro_batch_size", mb)
    mp = par["tensor_parallel"] * par.get("pipeline_parallel", 1) * par["context_parallel"]
    dp = _ratio(gpn * nodes, mp)
    total = _num(t, "policy.max_total_sequence_length",
                 get("policy.max_total_sequence_length", 512 if method == "grpo" else 1024))
    if method == "sft":
        set_dotted(d, "batch.seq_len", total)
        if get("policy.sequence_packing.enabled", False):
            notes.append("policy.sequence_packing.enabled: rows are packs of whole samples, but the mean tokens per"
                         " sample is the data's; planned as one sequence per row until batch.packed_sample_tokens is"
                         " set (e.g. --set batch.packed_sample_tokens=N)")
    ro: dict[str, Any] = {}
    if method == "grpo":
        pps = _num(t, "grpo.num_prompts_per_step", get("grpo.num_prompts_per_step", 32))
        ng = _num(t, "grpo.num_generations_per_prompt", get("grpo.num_generations_per_prompt", 16))
        resp = _num(t, "policy.generation.max_new_tokens", get("policy.generation.max_new_tokens", total))
        ro = {"engine": "vllm", "prompts_per_step": pps, "num_generations": ng, "response_len": resp,
              "prompt_len": max(1, total - resp), "weight_sync": "bucketed",
              "engine_multiprocess": False,  # VLLM_ENABLE_V1_MULTIPROCESSING=0 (nemo_rl .../vllm/vllm_worker.py)
              "logprob_micro_batch_size": _num(t, "policy.logprob_batch_size", get("policy.logprob_batch_size", mb)),
              "tensor_parallel": _num(t, "vllm_cfg.tensor_parallel_size", get("policy.generation.vllm_cfg.tensor_parallel_size", 1)),
              "gpu_memory_utilization": _num(t, "vllm_cfg.gpu_memory_utilization",
                                             get("policy.generation.vllm_cfg.gpu_memory_utilization", 0.6), float),
              "cuda_graphs": not flag("policy.generation.vllm_cfg.enforce_eager")}
        if get("policy.sequence_packing.enabled") is not None:
            # stated, it is written: the nemo-rl preset's packing habit (plan.rl_batches.PACKING_PRESETS) must not
            # override a file that turns sequence packing off
            ro["packed_sequences"] = flag("policy.sequence_packing.enabled")
        if str(get("policy.generation.vllm_cfg.precision", "")).lower() == "fp8":  # vLLM fp8 weights (init_fp8)
            ro["quantization"] = "fp8"
            kept = get("policy.generation.vllm_cfg.quantization_ignored_layer_kws")
            if kept:
                ro["quantization_bf16_modules"] = [str(k) for k in kept]
        if get("policy.generation.colocated.enabled", True):
            ro["placement"] = "colocate"
        else:
            ro["placement"] = "split"
            g = get("policy.generation.colocated.resources.gpus_per_node")
            if g is None:
                raise _bad(t, "policy.generation.colocated.resources.gpus_per_node: a non-colocated run needs it on one node")
            ro["gpus"] = _num(t, "colocated.resources.gpus_per_node", g)
            dp = _ratio((gpn - ro["gpus"]) * nodes, mp)
        steps = _ratio(pps * ng, gbs)
        if steps:
            ro["mini_batches"] = steps
        kl = _num(t, "loss_fn.reference_policy_kl_penalty", get("loss_fn.reference_policy_kl_penalty", 0.01), float)
        set_dotted(d, "roles.kl_coef", kl)
        # the reference waits in pinned host memory and is swapped into the policy for its pass (use_reference_model)
        set_dotted(d, "roles.reference", "host_swap" if kl > 0 else "none")
        set_dotted(d, "rollout", ro)
        notes.append(_prompt_mean_note(ro["prompt_len"]))
    if dp is None:
        raise _bad(t, f"tensor x pipeline x context parallel = {mp} does not divide the training GPUs")
    ga = _ratio(gbs, mb * dp)
    if ga is None:
        notes.append("policy.train_global_batch_size is not a multiple of micro-batch x data parallel; batch.grad_accum left at 1")
    else:
        set_dotted(d, "batch.grad_accum", ga)
    return Imported(t, d, notes)


# -- entry point ----------------------------------------------------------------------------------

_READERS = {"accelerate": read_accelerate, "deepspeed": read_deepspeed, "verl": read_verl, "openrlhf": read_openrlhf,
            "torchtitan": read_torchtitan, "nemo-rl": read_nemo_rl}


FRAMEWORK_PRESETS = {"verl": "verl", "openrlhf": "openrlhf", "nemo-rl": "nemo-rl"}
"""--from target -> the preset of the framework whose launch the file is: the card carries it, so the plan is that
framework's (sync path, packing, accumulation, controller) and not TRL's fallback (``plan.assumptions``: no preset plans
TRL's sync). The preset fills only what the card leaves open (``methods.presets.apply_preset``: the card's values win),
and each reader writes every value the file states, so a stated value is kept explicit over the preset's default.
Not set: accelerate and DeepSpeed files (launch settings; they do not say which training script runs), torchtitan (no
preset: trainfit plans its SFT as it plans a card without one), TRL (its config file names TRL, but the trl preset
fills gradient checkpointing and the fused lm_head where a TRL file is silent, which the importer leaves to the card's
defaults; planned as TRL either way, the fallback of a card without a preset)."""


_LAUNCH_ONLY_NOTE = ("preset: none set: a{an} {key} file does not say which training script it launches; the card is"
                     " planned without a framework preset (TRL's sync for an RL run): add --set preset=trl,"
                     " llamafactory-z2, llamafactory-z3, ms-swift-zero2 or ms-swift-zero3 for the script it runs")


def _with_framework_preset(key: str, imported: Imported) -> Imported:
    name = FRAMEWORK_PRESETS.get(key)
    if name is None:
        if key in ("accelerate", "deepspeed"):
            imported.notes.append(_LAUNCH_ONLY_NOTE.format(an="n" if key == "accelerate" else "", key=key))
        return imported
    imported.card["preset"] = name
    imported.notes.append(f"preset: {name}: the file is {name}'s launch, so the card is planned as {name} (its weight"
                          " sync, packing, accumulation); the preset fills only what the file leaves open, and every"
                          " value the file states is written in the card and wins")
    return imported


def import_text(text: str, target: str, *, companion: tuple[str, str] | None = None) -> Imported:
    """Card data from a launch config's text. ``companion``: (target, text) of the accelerate or
    DeepSpeed file a TRL config is launched with (its parallel and hardware settings). A verl, OpenRLHF or NeMo RL
    file's card carries that framework's preset (``FRAMEWORK_PRESETS``)."""
    key = target.strip().lower()
    if key not in TARGETS:
        raise InputError(f"--from: '{target}' is not a target; allowed: {', '.join(TARGETS)}")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise _bad(key, f"the file is over {MAX_BYTES // (1024 * 1024)} MiB; a launch config is a few KiB")
    if companion is not None:
        ck, ctext = companion
        if key != "trl" or ck not in ("accelerate", "deepspeed"):
            raise InputError("--with: an accelerate (.yaml) or DeepSpeed (.json) file, and only with --from trl")
        return read_trl(text, _READERS[ck](ctext))
    if key == "trl":
        return read_trl(text)
    return _with_framework_preset(key, _READERS[key](text))


def over(base: dict[str, Any], imported: Imported) -> dict[str, Any]:
    """``base`` card data with the imported settings on top."""
    return merge_under(base, imported.card)
