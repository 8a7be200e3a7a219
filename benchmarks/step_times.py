"""Time accuracy: trainfit's planner and the 6·N rule of thumb against published and own step times.

    .venv/bin/python benchmarks/step_times.py            # writes step_times.md and step_times.json
    .venv/bin/python benchmarks/step_times.py --check    # exit 1 if either file would change

Inputs (committed, each entry cited): ``benchmarks/data/published_train_times.json`` (SFT full,
LoRA/QLoRA, pretraining), ``benchmarks/data/published_rl_times.json`` (RL steps and phases) and the
project's own H200 steps in ``benchmarks/results/gpu_raw/{default,heldout,heldout2,heldout3,heldout4}.json``.

Every published entry is mapped to the run card a user would write (``map_train`` / ``map_rl``),
validated as the CLI does (preset applied, then ``load_card_dict``) and planned with
``trainfit.plan.make_plan``; the harness reads only the plan's public fields (``step_seconds``,
``tokens_per_step``, ``time_parts``, ``fits`` and, when the plan has it, ``time.bound``), so a new
time model is picked up without touching this file. An entry the card cannot state (tensor, pipeline,
context/Ulysses or expert parallelism, a non-gated MLP, a node-level rollout split), or whose card the
planner refuses as stated (``planner refused: ...``, e.g. pipeline stages that do not divide the layers), or whose
entry names what its run did that no card field states (``card_cannot_state``, cited in the entry), is listed as
*not representable* with its reason and still scored by the rule; an entry without a published
time, a catalog GPU, a model shape, a prompt/response length or with fp8 compute from an unknown recipe (neither the entry
nor ``FP8_RECIPES`` names it) is *skipped* with
its reason; so is an entry whose published rate would need more than the card's sustained matmul rate even at
the least work its setup does (``implausible_rate``). An entry whose cards differ from the catalog's
(``hardware_rates``: a board power limit, a memory variant) is planned with a calibration built from those
published figures (``hardware_calibration``). Nothing is dropped silently.

Conventions
    * Everything is compared in seconds per optimizer step (RL: per RL step or per phase).
      Published tokens/s per GPU -> ``tokens_per_step / (value · gpus)``; tokens/s total ->
      ``tokens_per_step / value``; an RL total time -> ``hours · 3600 / steps``. Error =
      predicted / published − 1: **positive means the prediction is slower than the run**.
    * tokens_per_step = micro-batch × sequence × grad-accum × data-parallel ranks (the card's), or the
      published global batch × sequence for entries the card cannot state.
    * The rule of thumb: ``seconds = 6·N·tokens / (gpus · bf16 dense peak · 0.40)``, N = trainfit's
      ``matmul_params`` (active parameters, input embedding excluded unless tied) when the model
      resolves; else from the entry's ``model_config`` (non-gated MLPs counted by hand); else the
      nominal (active) count of ``NOMINAL_PARAMS`` or the model name. RL step: 6·N per trained token
      (prompts × generations × (prompt + mean response, the max when no mean is published)) plus
      2·N per generated token, all at 40 % of the peak on every GPU of the run (the fp16 peak on a card
      without bf16). Phases:
      generation 2·N per generated token on the rollout GPUs; log-prob 2·N per token per published
      pass and actor update 6·N per token per epoch on the training GPUs; weight sync = bf16 weight
      bytes over one per-direction GPU link (NVLink/2, else PCIe).
    * Fit half / held-out half: ``int(sha1(id).hexdigest(), 16) % 2`` (0: any efficiency constant may
      be fitted on these; 1: report only). Phases of one RL entry share its half.

Pure Python, no torch; the whole run takes a few seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

from trainfit.calibration.engine import VERL_GEN_TIMER_ALSO
from trainfit.methods.unsloth import REFUSED_PRESETS
from trainfit.compute.unsloth_layers import UNSLOTH_PACKED_ATTENTION_SYNCS

TRAIN_DATA = HERE / "data" / "published_train_times.json"
RL_DATA = HERE / "data" / "published_rl_times.json"
PREF_DATA = HERE / "data" / "published_pref_times_firstcontact_2612.json"
"""Published DPO and reward-model step times: training entries with a ``method`` (``dpo`` | ``rm``), scored in their
own subset (``PREF_SUBSET``)."""
PREF_DATA_2612B = HERE / "data" / "published_pref_times_firstcontact_2612b.json"
"""The second set of DPO / reward-model publications (ms-swift example scripts, OpenRLHF issue #354, Unsloth's DPO
and ORPO notebooks), loaded beside ``PREF_DATA`` and scored in the same subset. None of its entries can be planned
(checked 2026-12-05, each entry's ``card_cannot_state``): the example scripts name no GPU, and every run trains on
variable-length pairs (padded to the longest of a batch, padding-free, or packed to an unpublished fill) whose token
counts no source publishes, so the tokens a step runs would be a guess. What would make some of them scorable: the
pairs' measured lengths in each run's template and tokenizer (as ``packed_sample_lengths.json`` measures SFT data),
e.g. the first 309 UltraFeedback train_prefs pairs in Zephyr's template for the T4 DPO notebook."""
PREF_DATA_2612C = HERE / "data" / "published_pref_times_firstcontact_2612c.json"
"""The third set of DPO / reward-model publications (open-instruct's OLMo-core DPO pull requests #1466 and #1467, and
its DeepSpeed vs OLMo-core backend comparison), loaded beside the first two and scored in the same subset. The
planned rows run a fixed padded shape per rank (the packing collator pads each side to max_seq_length), which is
what makes them plannable without the pairs' token counts; each entry's note records its first-contact error.
Checked and not changed (2026-12-05): their -6.9 % is two errors that cancel. open-instruct concatenates the two
padded sides on the sequence axis and calls the model on input_ids alone, so attention is causal over one
32,768-token row, where the DPO card plans two rows of 16,384 (half the attention); planned as one row the same card
reads +31.6 % with full recompute, and the run's --activation_memory_budget 0.1 (the compiler chooses what to save)
is no card checkpointing mode. A card field for the pair's layout (two rows | one concatenated row) and a measured
saved set of the budget mode are the next steps (each entry's ``checked`` gives the numbers)."""
PREF_FILES = (PREF_DATA, PREF_DATA_2612B, PREF_DATA_2612C)
"""Every DPO / reward-model data file, in the order the benchmark loads them (``pref_entries``)."""
PROMPT_LENGTHS = HERE / "data" / "rl_prompt_lengths.json"
"""Measured mean prompt tokens per (dataset, model) as the framework feeds them (``rl_prompt_lengths.py``)."""


def data_files(main: Path) -> list[Path]:
    """``main`` and its per-source companions (``published_train_times_<source>.json``), in name order: one list
    of entries over all of them (each companion holds one publication's rows)."""
    return [main, *sorted(main.parent.glob(f"{main.stem}_*.json"))]


def pref_entries() -> list[dict[str, Any]]:
    """The DPO / reward-model entries of every file in ``PREF_FILES``, each tagged with its file."""
    return [e for f in PREF_FILES for e in load_entries(f)]


def load_entries(main: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for f in data_files(main):
        data = json.loads(f.read_text())
        for e in data.get("entries", data) if isinstance(data, dict) else data:
            check_prompt_mean_source(e)
            entries.append({**e, "_file": f.name})
    return entries


PROMPT_MEAN_ESTIMATE_PREFIX = "estimate:"
"""The one prefix ``data.prompt_len_mean_source`` may take: the entry estimated its mean prompt (``rl_lengths``)."""


def check_prompt_mean_source(e: dict[str, Any]) -> None:
    """Raise ValueError naming the entry when its ``data.prompt_len_mean_source`` does not start with
    ``PROMPT_MEAN_ESTIMATE_PREFIX`` (the field exists only to say how an estimated mean was made)."""
    source = (e.get("data") or {}).get("prompt_len_mean_source")
    if source is not None and not str(source).startswith(PROMPT_MEAN_ESTIMATE_PREFIX):
        raise ValueError(f"{e.get('id', '?')}: data.prompt_len_mean_source must start with"
                         f" {PROMPT_MEAN_ESTIMATE_PREFIX!r}, got {str(source)[:40]!r}")
H200_RAW = HERE / "results" / "gpu_raw"
H200_SETS = ("default", "heldout", "heldout2", "heldout3", "heldout4")
MD_OUT = HERE / "step_times.md"
JSON_OUT = HERE / "step_times.json"

RULE_MFU = 0.40
"""The rule of thumb's model-FLOPs utilisation (a common planning default)."""

MODEL_ALIASES = {
    # same config.json shapes (hidden, intermediate, layers, heads, KV heads, vocab, tying) as the catalog id; a name
    # the catalog holds itself is looked up there first, so it never appears here (tests/benchmarks/test_step_times.py)
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B",
    "meta-llama/Meta-Llama-3-8B-Instruct": "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama/Llama-3.1-70B",
    "Qwen/Qwen2.5-0.5B-Instruct": "Qwen/Qwen2.5-0.5B",
    "Qwen/Qwen2-0.5B-Instruct": "Qwen/Qwen2-0.5B",  # the TRL cookbook GRPO rows (published_rl_times_firstcontact_2612h)
    "weqweasdas/RM-Gemma-2B": "google/gemma-2b",  # a google/gemma-2b with a scalar head (the reward model of a 2612h row)
    "Qwen/Qwen2.5-3B-Instruct": "Qwen/Qwen2.5-3B",  # the catalog lists it among Qwen/Qwen2.5-3B's aliases
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    # the Instruct checkpoints of the same models (same config.json shapes as their base): the Unsloth GRPO notebook rows
    "mistralai/Mistral-7B-Instruct-v0.3": "mistralai/Mistral-7B-v0.3",
    "meta-llama/Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B",
    "meta-llama/Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B",
    "NousResearch/Llama-2-70b-hf": "meta-llama/Llama-2-70b-hf",  # a re-upload of the Meta checkpoint
    "Qwen/Qwen3-4B-Base": "Qwen/Qwen3-4B",  # the base checkpoint of the same model: the Qwen3 model cards list the same
    # shapes (36 layers, 32 query / 8 KV heads, tied embeddings)
    "deepseek-ai/DeepSeek-R1-0528-Qwen3-8B": "Qwen/Qwen3-8B",  # its model card: 'The model architecture of
    # DeepSeek-R1-0528-Qwen3-8B is identical to that of Qwen3-8B' (read 2026-12-05)
}
GPU_ALIASES = {
    # the catalog's a800-80gb (A100-80GB compute and HBM, NVLink 400 GB/s): planned as itself, not as the A100
    "a800": ("a800-80gb", "A800: the catalog's a800-80gb (A100-80GB compute and HBM, NVLink 400 GB/s)"),
    "h800": ("h800", "H800: the catalog's h800 (H100 SXM compute and HBM, NVLink 400 GB/s)"),
}
NOMINAL_PARAMS = {
    # active parameters of models outside the catalog, for the rule only
    "openai/gpt-oss-20b": (3.61e9, "gpt-oss model card (OpenAI, 2025): 20.9B total, 3.61B active"),
    "openai/gpt-oss-120b": (5.13e9, "gpt-oss model card (OpenAI, 2025): 116.8B total, 5.13B active"),
    "deepseek-ai/DeepSeek-V3": (37e9, "DeepSeek-V3 technical report (arXiv 2412.19437): 671B total, 37B activated"),
}
STRATEGIES = {"fsdp": "fsdp", "fsdp1": "fsdp", "fsdp2": "fsdp", "hsdp": "hsdp", "zero1": "zero1", "zero2": "zero2",
              "zero3": "zero3", "ddp": "ddp", "single": "single", "megatron-dist-opt": "zero1", "megatron": "zero1"}
FSDP_VERSIONS = {
    # parallel.fsdp_version of each framework's FSDP at the entries' cited commits (spec/enums.py FsdpVersion)
    "torchtitan": "fsdp2",  # pytorch/torchtitan torchtitan/parallelisms/parallelize_llama.py @04133643 l.233-239
    # fully_shard (the earliest cited commit, 2024-04); torchtitan/distributed/fsdp.py @b5bcd76c l.159
    "torchtune": "fsdp2",  # pytorch/torchtune torchtune/training/_distributed.py @34d70b41 l.620-623 fully_shard
    # (FSDP2 recipes since afd23fd0, 2024-08-11)
    "nemo-automodel": "fsdp2",  # NVIDIA-NeMo/Automodel nemo_automodel/components/distributed/parallelizer.py
    # @01926a5c l.197 / 264, @2861c414 l.473 / 672 fully_shard
    "accelerate-fsdp2": "fsdp2",  # huggingface/accelerate examples/fsdp2/fsdp2_fp8.py @d2e6b031 l.140 fsdp_version=2
    "nemo-rl": "fsdp2",  # policy.dtensor_cfg: FSDP2 through NeMo Automodel (export/nemo_rl.py)
    "fms-fsdp": "fsdp1",  # foundation-model-stack/fms-fsdp main_training.py @ed74fd5d l.9 / 82 FullyShardedDataParallel
    "fsdp_qlora": "fsdp1",  # AnswerDotAI/fsdp_qlora train.py @50efa1ef l.704-715 FSDP(model, ..., use_orig_params=False)
    # (torch.distributed.fsdp FullyShardedDataParallel, l.38)
    "vectorlm": "fsdp1",  # VectorInstitute/vectorlm vectorlm/utils/model_utils.py @9045f08a l.291 FSDP(model, **fsdp_cfg)
    # (torch.distributed.fsdp FullyShardedDataParallel, FULL_SHARD, MixedPrecision bf16, forward_prefetch True)
    "fms-hf-tuning": "fsdp1",  # accelerate 1.0.1 (fms-acceleration scripts/benchmarks/refs/requirements.txt
    # @24bdadb2) wraps with torch.distributed.fsdp FullyShardedDataParallel: accelerate/accelerator.py l.1484,
    # l.1511 ``model = FSDP(model, **kwargs)`` in the accelerate 1.0.1 wheel
    "llm-foundry": "fsdp1",  # Composer's FSDP (llm-foundry @c90b9b31 setup.py mosaicml>=0.23.4,<0.24; mosaicml/composer
    # v0.23.4 @ec8799d3 composer/distributed/dist_strategy.py l.544 FullyShardedDataParallel(...))
    # Megatron-FSDP: parameters are views of its all-gather bucket, gradients of its reduce bucket, so no copy-out /
    # copy-in, as FSDP1's flat parameter (NVIDIA/Megatron-LM @d98e8a64 megatron/core/distributed/fsdp/src/megatron_fsdp/
    # param_and_grad_buffer.py l.1348-1352 ``p.data = get_item_from_bucket(...).view(p.shape)``, l.3114)
    "megatron-bridge": "fsdp1", "nemo": "fsdp1",
    "lit-gpt": "fsdp1",  # jzhang38/TinyLlama pretrain/tinyllama.py @09baa9e9 l.10 / 94 lightning.fabric FSDPStrategy
    # (FullyShardedDataParallel; 2023-09, before torch's fully_shard); OLMo-core entries state fsdp2 (fully_shard:
    # allenai/OLMo-core src/olmo_core/nn/transformer/model.py @4f2c8ef5 l.350-362)
}
"""verl: the entry's ``train.strategy``: fsdp is FullyShardedDataParallel (FSDP1, verl's default), fsdp2 fully_shard
(volcengine/verl verl/workers/fsdp_workers.py @52065c64 l.321 / 335, @2bb42bae l.522 / 536). An entry whose strategy
reads ``fsdp2`` (the torchao rows run torchtitan) is FSDP2 whatever its framework, and one whose strategy reads ``fsdp1``
(the publication names FSDP1, as Liger-Kernel's Hugging Face Trainer benchmarks do) is FSDP1 whatever its framework."""


def fsdp_version_of(framework: str, strategy: str | None) -> tuple[str | None, str | None]:
    """(``parallel.fsdp_version``, note) for an entry's framework and stated strategy; (None, note): the card's
    default (fsdp2) where the framework is not mapped."""
    version = ("fsdp2" if strategy == "fsdp2" else "fsdp1" if strategy == "fsdp1" or framework == "verl"
               else FSDP_VERSIONS.get(framework))
    return version, (f"FSDP API: {version} ({framework})" if version else
                     f"FSDP API of {framework} not mapped: the card's default fsdp2")


FSDP1_NO_SYNC_FRAMEWORKS = {
    # frameworks whose trainer runs accumulating FSDP1 micro-batches under no_sync by default, for entries that name
    # no preset (a preset's own default: plan.fsdp_no_sync)
    "fms-hf-tuning": "the HF Trainer on accelerate 1.0.1 (FSDP_VERSIONS): Accelerator.accumulate enters"
    " model.no_sync() unless sync_each_batch, default False (accelerate 1.0.1 wheel accelerate/accelerator.py"
    " l.990-992, 1101-1113; accelerate/utils/dataclasses.py l.905-906)",
}

FSDP1_ADAPTER_UNIT_FRAMEWORKS = {
    # frameworks that wrap a PEFT model's adapter linears as FSDP1 units of their own (parallel.fsdp_adapter_units)
    "fms-hf-tuning": "fms-hf-tuning sets PEFT's fsdp_auto_wrap_policy for every PEFT run on FSDP (tuning/sft_trainer.py"
    " l.387-390 @b33634c8ce5c85b6d10daa187fd1a069db969b67, l.390-393 at v2.5.0), which makes each lora_A / lora_B"
    " linear its own unit (peft src/peft/utils/other.py l.510-525 @431c0e2d, v0.13.2)",
    "fsdp_qlora": "Answer.AI's train.py wraps the PEFT model (train_type lora / qlora: get_peft_model, l.640-655) with"
    " get_wrapping_policy(custom_policy=False): an _or_policy of the decoder-layer policy and a lambda policy on every"
    " leaf module with a trainable weight, so each lora_A / lora_B is its own unit, under FSDP(limit_all_gathers=True,"
    " use_orig_params=False) (AnswerDotAI/fsdp_qlora train.py l.442-477, l.705-706, l.724-737"
    " @e877dda5026dfd964cccdb92a4532da587cbdae0, the benchmark note's commit; the same policy at"
    " @049515f81026f5009ac9b0cbaa795a7cc995e4ad, 2024-03-19, l.413-426, l.685, l.706-708)",
    "vectorlm": "VectorLM's profiling/benchmark.py passes is_lora_enabled (a lora_peft_config in the config, l.322-358)"
    " to shard_model, whose fsdp_config ORs lora_requires_grad_policy_fn (a leaf module with a trainable weight:"
    " each lora_A / lora_B) with the decoder-layer policy (vectorlm/utils/model_utils.py l.154-169, l.224-233"
    " @9045f08ac1af38c13100cfabdd17412f57dbffd2, the reference-throughput commit); FSDP1 keeps limit_all_gathers at"
    " its default, True since torch 2.1 (FullyShardedDataParallel.__init__; read in the torch 2.13 wheel"
    " torch/distributed/fsdp/fully_sharded_data_parallel.py l.411; the page lists torch 2.2.1)",
}
FMS_ADAPTERS_OUTSIDE_FSDP = (
    "fms-acceleration's fused-ops-and-kernels plugin takes a quantized model's adapters out of FSDP"
    " (get_callbacks_and_ready_for_train: lora_adapters_switch_ddp_from_fsdp puts every lora_A / lora_B in"
    " fsdp_plugin.ignored_modules and all-reduces their gradients in hooks; plugins/fused-ops-and-kernels/src/"
    "fms_acceleration_foak/framework_plugin_fast_kernels.py l.168-190, framework_plugin_fast_quantized_peft.py l.29-39"
    " @fc78b55b65446fbade0306ac2e619a6182bfea47): no adapter units")


def fms_framework_config(e: dict[str, Any]) -> str | None:
    """The fms-acceleration benchmark CSV's ``framework_config`` column (the fourth) of the entry's quoted row."""
    if not e.get("source", {}).get("path", "").startswith("scripts/benchmarks/refs"):
        return None
    cells = e.get("quote", "").split(",")
    return cells[3] if len(cells) > 3 else None


HF_TRAINER_ADAPTER_UNITS_SINCE = (4, 39, 0)
"""The transformers release from which the HF Trainer hands a LoRA model on FSDP PEFT's fsdp_auto_wrap_policy:
Trainer._fsdp_qlora_plugin_updates sets ``fsdp_plugin.auto_wrap_policy = fsdp_auto_wrap_policy(self.model)`` when the
active PEFT config is a LoraConfig, before accelerator.prepare (transformers/trainer.py l.4310-4317 in the 4.39.0
wheel, l.4418-4425 and the call at l.2001 in 4.40.0; absent from 4.38.2; the wheels on PyPI, read 2026-12-05)."""
HF_TRAINER_ADAPTER_UNITS = (
    "the HF Trainer (transformers >= 4.39.0, Trainer._fsdp_qlora_plugin_updates) sets PEFT's fsdp_auto_wrap_policy for"
    " a LoRA model on FSDP, whose lambda policy wraps every leaf module with a trainable weight, so each lora_A /"
    " lora_B linear is its own unit (peft/utils/other.py l.379-418 in the peft 0.10.0 wheel)")


def _release(text: str) -> tuple[int, ...]:
    """'4.40.0' -> (4, 40, 0): the leading numeric fields of a release string."""
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def hf_trainer_wraps_adapters(e: dict[str, Any]) -> bool:
    """Whether the entry's HF Trainer release (``software.value.transformers``, stated and cited by the entry) wraps a
    LoRA model's adapters as FSDP units of their own (``HF_TRAINER_ADAPTER_UNITS_SINCE``); False when not stated."""
    release = ((e.get("software") or {}).get("value") or {}).get("transformers")
    return e["framework"] == "hf-trainer" and bool(release) and _release(release) >= HF_TRAINER_ADAPTER_UNITS_SINCE


def adapter_units_of(e: dict[str, Any], *, scope: str, version: str | None) -> tuple[bool, str | None]:
    """Whether the card states ``parallel.fsdp_adapter_units`` (PEFT adapters as FSDP1 units), with its note."""
    if version != "fsdp1" or scope not in ("lora", "qlora"):
        return False, None
    if hf_trainer_wraps_adapters(e):
        return True, f"parallel.fsdp_adapter_units: {HF_TRAINER_ADAPTER_UNITS}"
    if e["framework"] not in FSDP1_ADAPTER_UNIT_FRAMEWORKS:
        return False, None
    if scope == "qlora" and "foak" in (fms_framework_config(e) or ""):
        return False, FMS_ADAPTERS_OUTSIDE_FSDP
    return True, f"parallel.fsdp_adapter_units: {FSDP1_ADAPTER_UNIT_FRAMEWORKS[e['framework']]}"


CARD_PRESETS = ("trl", "verl", "openrlhf", "nemo-rl", "miles", "slime", "skyrl", "unsloth")  # miles / slime: their weight
# sync (compute.sync MILES_BROADCAST / MILES_COLOCATED, SLIME_SAME), Ray trainer and old log-prob pass; skyrl: its
# colocated offload, log-prob passes and CUDA-IPC sync (methods.presets)
PHASES = ("generation", "weight_sync", "logprob", "actor_update")
PHASE_TITLES = {"generation": "generation", "weight_sync": "weight sync", "logprob": "log-prob passes",
                "actor_update": "actor update"}


class Unmapped(Exception):
    """An entry the harness cannot plan: ``status`` is 'not_representable' or 'skipped'."""

    def __init__(self, status: str, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.status, self.reasons = status, reasons


@dataclass
class Row:
    """One comparison: a published (or measured) time beside trainfit's and the rule's, seconds."""

    id: str
    subset: str
    quantity: str
    """step | generation | weight_sync | logprob | actor_update"""
    model: str
    config: str
    published_s: float | None
    trainfit_s: float | None = None
    rule_s: float | None = None
    bound: str | None = None
    fits: bool | None = None
    status: str = "mapped"
    source: str = ""
    notes: list[str] = field(default_factory=list)
    entry_note: str = ""
    checked: str = ""
    """The entry's ``checked`` text: what was looked into for an outlier and ruled out (rendered in full)."""
    half: int = 0
    parts_used: list[str] = field(default_factory=list)
    assumed_seq_tokens: float | None = None
    """RL rows without a published mean: the packed tokens per sequence the card was planned with."""
    implied_seq_tokens: float | None = None
    """... and the packed tokens per sequence at which trainfit's figure equals the published time."""

    @property
    def error(self) -> float | None:
        return _err(self.trainfit_s, self.published_s)

    @property
    def rule_error(self) -> float | None:
        return _err(self.rule_s, self.published_s)


def _err(pred: float | None, pub: float | None) -> float | None:
    return None if pred is None or not pub else pred / pub - 1


def half_of(point_id: str) -> int:
    """0: fit half, 1: held-out half (deterministic, independent of order and of the data)."""
    return int(hashlib.sha1(point_id.encode()).hexdigest(), 16) % 2


def source_of(entry: dict[str, Any]) -> str:
    s = entry["source"]
    if s.get("url"):
        return s["url"]
    return f"{s['repo']} {s['path']}@{s['commit']}"


# ---------------------------------------------------------------- model, GPU, parallelism

LLM_FOUNDRY_MPT = {
    # llm-foundry's throughput table (scripts/train/benchmarking/README.md) runs
    # scripts/train/yamls/pretrain/mpt-<size>.yaml of github.com/mosaicml/llm-foundry at the commit below
    # (d_model, n_heads, n_layers; all: expansion_ratio 4, vocab_size 50368, attn_config.attn_impl triton or flash)
    # with max_seq_len set to the row's sequence length: the table's NumParams grows with it. The yamls leave the
    # rest to llm-foundry's MPTConfig defaults (llmfoundry/models/mpt/configuration_mpt.py): no_bias false,
    # learned_pos_emb true, attn_config.alibi false, tied embeddings, low_precision_layernorm, resid_pdrop 0.
    # trainfit's parameter count of each mapped config equals the row's NumParams.
    "125m": (768, 12, 12, "5a6e81c1e0411ac0774b0fcf5129f6362309aa79"),
    "350m": (1024, 16, 24, "c90b9b312c644dbde5c9e6eef75c6f1c117d8782"),
    "760m": (1536, 12, 24, "fe15f275b7c153fa98ea121467cf8939ea04d525"),
    "1b": (2048, 16, 24, "495218376830947dce625efabc4d86be7c47cc45"),
    "3b": (2560, 20, 32, "34c28fc9199278b10193e69fb52979043b7dc1bd"),
    "7b": (4096, 32, 32, "34c28fc9199278b10193e69fb52979043b7dc1bd"),
    "13b": (5120, 40, 40, "309f68378c1e5f83dd5ccefd9350196cb1553e43"),
    "30b": (7168, 56, 48, "fe15f275b7c153fa98ea121467cf8939ea04d525"),
    "70b": (8192, 64, 80, "ef9e5a3da336ff8094d628e1b58e11c6493069b0"),
}


LLM_FOUNDRY_DEFAULT_MP = (
    "Composer amp_bf16 with FSDP mixed_precision DEFAULT (the table's Precision and MP Mode columns, which"
    " collect_results.py fills from the run's submitted precision and fsdp_config['mixed_precision'],"
    " mosaicml/llm-foundry scripts/train/benchmarking/collect_results.py l.217-220"
    " @c90b9b312c644dbde5c9e6eef75c6f1c117d8782): fp32 parameter shards gathered as bf16 and gradients reduce-scattered"
    " in fp32 into fp32 shards (precision.weights fp32, grads fp32): get_mixed_precision 'DEFAULT' sets"
    " param_dtype = the autocast dtype, reduce_dtype = torch.float32 (mosaicml/composer"
    " composer/trainer/mosaic_fsdp_utils.py l.75, 94-97 @83a40f5c01046cfb2d1540a1c41c1c505656ee9f v0.17.0;"
    " composer/distributed/mosaic_parallelism.py l.78-81 @6405188805a0054b4551ec49e4919c54c971d0e8), and amp_bf16 is"
    " torch.autocast over the fp32 model (composer/core/precision.py l.62-64 @83a40f5c0104). The table's DEFAULT is"
    " what ran: submit_benchmarks.py's mod_parameters defaults fsdp_config_mixed_precision to 'DEFAULT' (l.321) and"
    " run_config does not pass its --fsdp_config_mixed_precision argument on (l.513-530), so sweep.py's"
    " '--fsdp_config_mixed_precision PURE' never reaches the config (the same at @5e85bd62d4ec9e13353ca95877477602ab538e5b,"
    " the commit that added the Large Scale table: default l.268, no caller passes it)")
"""Why an llm-foundry row run at amp_bf16 / DEFAULT is planned with fp32 weights and fp32 gradients."""


LLM_FOUNDRY_SWEEP_2401 = "sweep.py @5e85bd62d4ec9e13353ca95877477602ab538e5b"
LLM_FOUNDRY_SWEEP_2401_NOTE = (
    "software llm-foundry 0.4.0: the Large Scale table's runs installed llm-foundry's main branch"
    " (scripts/train/benchmarking/submit_benchmarks.py l.401 'git_branch': 'main' @5e85bd62d4ec9e13353ca95877477602ab538e5b,"
    " the commit that added the table, 2024-01-06), whose __version__ was '0.4.0' (llmfoundry/__init__.py l.98) and"
    " whose flash_attn_fn still unpadded q, k and v in every call (llmfoundry/models/layers/attention.py l.280-289);"
    " the padding info moved to once per forward in 6dcc0d84b9cc7e5ba3b3f8148cf8459e298e2ba1 (2024-01-17, v0.5.0)")
"""The entries whose note cites the Jan-2024 sweep (the 'Large Scale, >= 128 GPUs' H100 table): the card's
``software.llm-foundry`` pin (``plan.time.llm_foundry_unpad_syncs``)."""


def llm_foundry_precision(e: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """``precision`` overrides for an llm-foundry table row from its Precision and MP Mode columns (the quote's
    6th and 5th cells from the end: ``... | Precision | MP Mode | Sharding Strategy | Activation Checkpointing |
    Activation CPUOffload | NumParams |``): amp_bf16 / DEFAULT -> weights fp32, grads fp32
    (``LLM_FOUNDRY_DEFAULT_MP``); any other pair (the older tables' bf16 / PURE) is left as the card's default."""
    cells = [c.strip() for c in (e.get("quote") or "").strip().strip("|").split("|")]
    if len(cells) >= 6 and (cells[-6], cells[-5]) == ("amp_bf16", "DEFAULT"):
        return {"weights": "fp32", "grads": "fp32"}, [LLM_FOUNDRY_DEFAULT_MP]
    return {}, []


def llm_foundry_mpt_model(name: str, seq_len: int | None, attention: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The inline MPT config of an llm-foundry benchmark row (``LLM_FOUNDRY_MPT``). ``attention``: the entry's
    ``attention``; "flash" (the row's attn_impl, cited in its note) sets ``attn_config.attn_impl: flash``, the
    unpadded flash_attn_fn (``ModelSpec.unpadded_attention``); unstated or triton rows leave MPTConfig's default."""
    m = re.match(r"llm-foundry/mpt-(\w+)\b", name)
    if not m or m.group(1) not in LLM_FOUNDRY_MPT or not seq_len:
        raise Unmapped("skipped", [f"model {name}: no llm-foundry MPT yaml mapped for it (or no sequence length)"])
    d, heads, layers, commit = LLM_FOUNDRY_MPT[m.group(1)]
    cfg = {"model_type": "mpt", "d_model": d, "n_heads": heads, "n_layers": layers, "expansion_ratio": 4,
           "max_seq_len": int(seq_len), "vocab_size": 50368, "no_bias": False, "learned_pos_emb": True,
           "attn_config": {"alibi": False, **({"attn_impl": "flash"} if attention == "flash" else {})},
           "tie_word_embeddings": True, "resid_pdrop": 0.0}
    return {"id": name, "config": cfg}, [
        f"inline MPT config from mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-{m.group(1)}.yaml@{commit}"
        f" (max_seq_len {seq_len}, MPTConfig defaults: biases, learned positions, tied embeddings)",
        "loss: llm-foundry's default loss_fn fused_crossentropy, flash-attn's CrossEntropyLoss without inplace_backward"
        " (llmfoundry/models/mpt/modeling_mpt.py @c90b9b312c64 l.1295, 1329-1337): loss.kernel flash_attn (bf16 logits,"
        " no fp32 copy; 2 / 4 B per logit)"] + (
        ["attn_config.attn_impl flash (the entry's attention): flash_attn_fn's unpad / pad_input copies"
         " (ModelSpec.unpadded_attention)"] if attention == "flash" else [])


def resolve_model(name: str, config: dict[str, Any] | None, seq_len: int | None = None,
                  attention: str | None = None) -> tuple[Any, list[str]]:
    """The card's ``model`` value for an entry, and notes; Unmapped when neither the catalog nor the
    entry's config gives the shape. ``seq_len``: the entry's sequence length (llm-foundry's MPT rows set
    max_seq_len, and with it the learned position rows, to it)."""
    from trainfit.catalog.models import catalog_ids

    ids = set(catalog_ids())
    if name in ids:
        return name, []
    if name in MODEL_ALIASES:
        return MODEL_ALIASES[name], [f"model {name} planned as {MODEL_ALIASES[name]} (same config shapes)"]
    if name.startswith("llm-foundry/mpt-"):
        return llm_foundry_mpt_model(name, seq_len, attention)
    if config:
        if config.get("gated_mlp") is False or config.get("learned_position_embeddings"):
            raise Unmapped("not_representable", ["non-gated MLP / learned positions in a model_config without a"
                                                 " model_type: the layout (GPT-2, NeoX, MPT...) is not stated"])
        cfg = {k: v for k, v in config.items() if v is not None}
        if "model_type" in cfg:
            return {"id": name, "config": cfg}, [f"inline model_config ({cfg['model_type']} layout, as the entry states)"]
        cfg.setdefault("model_type", "qwen2")
        return {"id": name, "config": cfg}, [
            "inline model_config, Qwen-1 layout read as qwen2 (gated MLP, q/k/v bias; the catalog does the same "
            "for Qwen/Qwen-1_8B)"]
    raise Unmapped("skipped", [f"model {name} not in the catalog and the entry has no model_config"])


def resolve_gpu_id(gpu: str) -> tuple[str, list[str]]:
    from trainfit.catalog.gpus import gpu_ids

    if gpu in GPU_ALIASES:
        gid, note = GPU_ALIASES[gpu]
        return gid, [note]
    if gpu in gpu_ids():
        return gpu, []
    raise Unmapped("skipped", [f"GPU '{gpu}' not in the catalog (no peak FLOP/s or bandwidth)"])


def hardware(gpu_id: str, gpus: int, per_node: int, nodes: int, nic: float | None,
             link: str | None = None) -> tuple[dict, list[str]]:
    """The card's hardware section of an entry; ``link``: the entry's optional ``interconnect`` (the link between a
    node's GPUs its source states, e.g. pcie for two RTX 3090s without their NVLink bridge), passed to the card's
    ``hardware.interconnect`` (unset: the GPU catalog's link)."""
    per_node = min(per_node, gpus)
    nodes = max(1, gpus // per_node)
    if per_node * nodes != gpus:
        raise Unmapped("not_representable", [f"{gpus} GPUs are not whole nodes of {per_node}"])
    hw: dict[str, Any] = {"gpu": gpu_id, "gpus_per_node": per_node, "nodes": nodes}
    notes = []
    if nic:
        hw["nic_gbps_per_gpu"] = nic
    elif nodes > 1:
        notes.append("inter-node network not stated: the card's default NIC")
    if link:
        hw["interconnect"] = link
        notes.append(f"node link: {link}, as the source states (hardware.interconnect)")
    return hw, notes


def host_of(e: dict[str, Any], hw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The entry's host as the card states it (``host``: ``numa_nodes`` -> ``hardware.host_numa_nodes``,
    ``memory_gbps`` -> ``hardware.host_memory_gbps``; each cited in the entry's ``host.source``), and its
    caching allocator (``allocator.value`` -> ``hardware.allocator``, cited in ``allocator.source``)."""
    host = e.get("host") or {}
    notes = []
    if host.get("numa_nodes"):
        hw = {**hw, "host_numa_nodes": int(host["numa_nodes"])}
        notes.append(f"host: {host['numa_nodes']} NUMA nodes (hardware.host_numa_nodes)")
    if host.get("memory_gbps"):
        hw = {**hw, "host_memory_gbps": float(host["memory_gbps"])}
        notes.append(f"host: {host['memory_gbps']} GB/s DRAM (hardware.host_memory_gbps)")
    alloc = e.get("allocator")
    if alloc:
        # the run's PYTORCH_CUDA_ALLOC_CONF as its source states it (``allocator.value``, cited in
        # ``allocator.source``): changes reserved bytes and so the fit verdict, never the time
        hw = {**hw, "allocator": alloc["value"]}
        notes.append(f"allocator: {alloc['value']} (hardware.allocator)")
    return hw, notes


def model_layers(model: Any) -> int | None:
    """Decoder layers of a card's ``model`` value (a catalog id), None for an inline shape."""
    if not isinstance(model, str):
        return None
    from trainfit.catalog.models import resolve_model as catalog_model

    return catalog_model(model).num_layers


def parallel_blockers(dims: dict[str, Any]) -> list[str]:
    """Reasons the card cannot state an entry's parallelism (none left: the card states tp/pp/cp/ep/Ulysses)."""
    cp, ulysses = (dims.get("cp") or 1), (dims.get("sequence_parallel_ulysses") or 1)
    if cp > 1 and ulysses > 1:
        return [f"ring context parallel {cp} together with Ulysses {ulysses}"]
    return []


PIPELINE_OUTPUTS_DEALLOCATED = ("megatron-bridge", "nemo-rl")
"""Frameworks whose pipeline stages free each sent output (the card's ``parallel.pipeline_outputs_deallocated``):
Megatron-Bridge's GPTModelProvider defaults Megatron-Core's deallocate_pipeline_outputs to True
(NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/models/gpt_provider.py l.162 @067f987df03b8355b03192d88d70f1709fedf51a).
NeMo RL's Megatron backend builds its model from that provider since v0.4: ``AutoBridge.from_hf_pretrained(...)
.to_megatron_provider`` saved at import (NVIDIA-NeMo/RL nemo_rl/models/megatron/community_import.py l.36-40, l.90 at
v0.4.0 c751f811217db7df0d4c94abdeaada6626cfc150) and reloaded as ``model_cfg = cfg_from_pretrained.model``
(nemo_rl/models/policy/megatron_policy_worker.py l.537 at v0.4.0; policy/workers/megatron_policy_worker.py l.619 at
v0.5.0 6c7089300fded94abfa49bb9cbf9eb357d862461; nemo_rl/models/megatron/setup.py l.296-325 at v0.6.0
5fb588932bf835506a8a5bac01de4f8c7ab0a065), and no NeMo RL file sets deallocate_pipeline_outputs at those tags; the
Megatron-Bridge they pin keeps the default True (gpt_provider.py l.107 @62f4704b, l.139 @1e9a459b, l.157 @95e5f38f:
the v0.4.0, v0.5.0 and v0.6.0 submodule commits). NeMo RL v0.3 built through NeMo's ``nemo.tron`` and GPTConfig
instead (nemo_rl/models/policy/megatron_policy_worker.py l.58-106, l.443 at v0.3.0
b1c86a816c5e2b4ca41ece193624a38dc62e6fdf), whose default at its pinned NeMo is not checked here: the v0.3 rows state
``pipeline_outputs_deallocated: false`` (Megatron-Core's own default), which an entry's value overrides.
The ``megatron`` entries are left out: that name also covers Megatron-DeepSpeed runs (bigscience) and Megatron-LM
releases older than the option; an entry whose run is a Megatron-LM of 2023-05 or later states
``parallel.pipeline_outputs_deallocated`` itself."""


MOE_LAUNCH_FUSED = ("megatron-bridge",)
"""Frameworks whose MoE recipes fuse Megatron-Core's router or capture it and the dispatcher's preprocessing in CUDA
graphs (the card's ``parallel.moe_launch`` fused; unset, a Megatron-Core card launches them eagerly,
``ParallelSection.resolved_moe_launch``): Megatron-Bridge's performance recipes set ``moe_router_fusion = True`` for
every MoE family (NVIDIA-NeMo/Megatron-Bridge @067f987df03b8355b03192d88d70f1709fedf51a
src/megatron/bridge/perf_recipes/deepseek/common.py l.34, qwen/b200/qwen3_moe.py l.43 and l.203 ``cuda_graph_scope =
["attn", "moe_router", "moe_preprocess"]``, qwen/gb300/qwen3_moe.py l.41, gpt_oss/b200/gpt_oss.py l.29,
gpt_oss/gb300/gpt_oss.py l.184 and l.194-195), and its Qwen3-30B-A3B H100 library recipes too
(src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py l.160 and l.213-214 @6799f099712c961f15cf92d6bd88998f029d672d).
An entry whose recipe sets ``cuda_graph_impl = "none"`` with ``moe_router_fusion = False`` (the gpt-oss H100 library
recipes) states ``moe_launch: eager`` itself, and the entry's value wins. Only the 067f987d perf recipes were read;
the older releases' rows (2509-2606) are keyed on the same framework without their own commit read."""


FORCED_BALANCE_SOURCES = (
    (("NVIDIA-NeMo/Megatron-Bridge", "docs/performance-summary"),
     "Megatron-Bridge's performance tables run the perf recipes with moe_router_force_load_balancing (e.g."
     " src/megatron/bridge/perf_recipes/qwen/h100/qwen3_moe.py @067f987df03b8355b03192d88d70f1709fedf51a), the 25.09"
     " ones token drop at capacity factor 1 padded to capacity (scripts/performance/run_script.py l.101-114"
     " @fa0315ae2684693a666be9d247adf9baf1e30028)"),
    (("NVIDIA-NeMo/Megatron-Bridge", "examples/model_verification_cards", "pretrain_performance"),
     "the verification card's performance item runs the force-balanced performance recipe on mock data"
     " (examples/model_verification_cards/qwen3-30b-a3b/card.yaml @067f987df03b8355b03192d88d70f1709fedf51a)"),
    (("NVIDIA/dgxc-benchmarking",),
     "DGX Cloud's NeMo perf scripts add MegatronTokenDropCallback: capacity factor 1, expert input padded to capacity"
     " (the entry's note cites the script)"),
    (("docs.nvidia.com/nemo-framework",),
     "NeMo 25.02 / 25.04 performance recipes add MegatronTokenDropCallback (capacity factor 1, padded to capacity:"
     " nemo/collections/llm/recipes/mixtral_8x7b.py pretrain_performance_optimizations"
     " @7192a2c944c48ab253f3f711ee52fe2dc986a3bb) on mock data"),
    (("NVIDIA-NeMo/Automodel",),
     "NeMo Automodel's benchmarks route with FakeBalancedGate (nemo_automodel/components/moe/layers.py"
     " @01926a5c443b7979463c73341bf64adf79de638e)"),
    (("InternLM/xtuner", "megatron_moe_benchmark"),
     "XTuner's Megatron benchmark: 'For speed testing, enable moe forced balancing: --moe-router-force-load-balancing'"
     " (docs/en/benchmark/megatron_moe_benchmark.md @4b10fa3ed3e68f921a209c362c6711108f1bed81)"),
    (("yanring/Megatron-MoE-ModelZoo",),
     "Megatron-MoE-ModelZoo's benchmark commands add --moe-router-force-load-balancing"
     " (best_practice/qwen3/run_h100_235b.sh @798dfb503c6884a130fca8638e13da3bd0dd7ce0)"),
)
"""Sources whose MoE runs route balanced by construction (the card's ``parallel.moe_router_load`` balanced): each key's
strings must all occur in the entry's source (repository or URL, path, section)."""
TRAINED_ROUTER_SECTIONS = (
    ("InternLM/xtuner", "megatron_moe_benchmark", "EP Load Imbalance"),
)
"""Sections of a ``FORCED_BALANCE_SOURCES`` source whose rows run without the forced balance: XTuner's "EP Load
Imbalance" rows set --moe-expert-capacity-factor with the router's own choice, against the forced balancing of every
other row of that guide (docs/en/benchmark/megatron_moe_benchmark.md @4b10fa3ed3e68f921a209c362c6711108f1bed81)."""


def forced_balance_reason(e: dict[str, Any]) -> str | None:
    """Why the entry's run routes balanced by construction, or None (a trained router: the card's default)."""
    src = e.get("source") or {}
    where = " ".join(str(src.get(k) or "") for k in ("repo", "url", "path", "section"))
    if any(all(k in where for k in keys) for keys in TRAINED_ROUTER_SECTIONS):
        return None
    return next((why for keys, why in FORCED_BALANCE_SOURCES if all(k in where for k in keys)), None)


def balanced_routing_reason(e: dict[str, Any]) -> str | None:
    """Why the entry is planned ``parallel.moe_router_load`` balanced, or None (trained): a value the entry states
    wins over its source's (``forced_balance_reason``)."""
    stated = (e.get("parallel") or {}).get("moe_router_load")
    if stated is not None:
        return "the entry states it" if stated == "balanced" else None
    return forced_balance_reason(e)


def model_is_moe(model: Any) -> bool:
    """A card's ``model`` value (catalog id or inline ``{"id", "config"}``) has routed experts."""
    if isinstance(model, dict) and model.get("config"):
        from trainfit.catalog.hf_config import spec_from_hf_config

        spec = spec_from_hf_config(model["config"], name=str(model.get("id") or "inline"), source="entry config")
    else:
        from trainfit.catalog.models import resolve_model as catalog_model

        spec = catalog_model(model["id"] if isinstance(model, dict) else model)
    return spec.moe is not None


def model_parallel_section(dims: dict[str, Any], *, num_layers: int | None = None, framework: str = "",
                           shape: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The card's tensor / pipeline / context / expert parallel fields for an entry's parallelism (``num_layers``,
    ``framework``, ``shape``: the entry's inline ``model_config``, to compute a recipe's layer split,
    ``pipeline_layout_of``)."""
    out: dict[str, Any] = {}
    notes: list[str] = []
    tp, pp, ep = dims.get("tp") or 1, dims.get("pp") or 1, dims.get("ep") or 1
    cp, ulysses = dims.get("cp") or 1, dims.get("sequence_parallel_ulysses") or 1
    if tp > 1:
        out["tensor_parallel"] = tp
        if dims.get("sequence_parallel"):
            out["sequence_parallel"] = True
            # Transformer Engine userbuffers overlap of the TP collectives with the GEMMs, where the entry's recipe
            # sets it (Megatron-Core tp_comm_overlap / NeMo ub_tp_comm_overlap; each entry's note cites the file)
            if dims.get("tp_comm_overlap"):
                out["tp_comm_overlap"] = True
    if pp > 1:
        out["pipeline_parallel"] = pp
        if dims.get("pipeline_scatter_gather") and tp > 1:
            # Megatron-LM's scatter/gather pipeline sends, where the entry's note cites the run's commit
            out["pipeline_scatter_gather"] = True
        if dims.get("pipeline_outputs_deallocated", framework in PIPELINE_OUTPUTS_DEALLOCATED):
            # the entry's own value where it states one (its note cites the option's source), else the framework's
            out["pipeline_outputs_deallocated"] = True
        vpp = dims.get("vpp") or dims.get("virtual_stages") or 1
        if vpp > 1:
            out.update(pipeline_schedule="interleaved", virtual_stages=vpp)
        # uneven end stages (Megatron-Core num_layers_in_first/last_pipeline_stage), as the run's recipe sets them
        for src, key in (("num_layers_in_first_pipeline_stage", "pipeline_first_stage_layers"),
                         ("num_layers_in_last_pipeline_stage", "pipeline_last_stage_layers")):
            if dims.get(src):
                out[key] = int(dims[src])
        layout, why = pipeline_layout_of(dims, pp=pp, vpp=vpp, num_layers=num_layers, framework=framework,
                                         shape=shape)
        if layout is not None:
            out["pipeline_layout"] = list(layout)
            notes.append(why)
    # how Megatron-Core's router and dispatcher launch where the entry's recipe states it (cuda_graph_impl "none"
    # with moe_router_fusion False: eager), at any expert parallel: the card's parallel.moe_launch; each entry's
    # note cites the recipe
    if dims.get("moe_launch"):
        out["moe_launch"] = dims["moe_launch"]
    # Megatron-Core's TEGroupedMLP through Transformer Engine's op fuser where the entry's recipe sets
    # use_transformer_engine_op_fuser (the card's parallel.moe_expert_mlp; each entry's note cites the recipe)
    if dims.get("moe_expert_mlp"):
        out["moe_expert_mlp"] = dims["moe_expert_mlp"]
        notes.append(f"parallel.moe_expert_mlp {dims['moe_expert_mlp']}: the recipe sets use_transformer_engine_op_fuser"
                     " (Megatron-Core's fused grouped expert MLP)")
    # the router's load-balancing loss where the entry's command or provider states one (the card's
    # parallel.moe_load_balancing; each entry's note cites it)
    if dims.get("moe_load_balancing"):
        out["moe_load_balancing"] = dims["moe_load_balancing"]
    if ulysses > 1:
        out.update(context_parallel=ulysses, context_parallel_kind="ulysses")
    elif cp > 1 and dims.get("cp_comm_type") == "a2a":
        # Megatron-Core cp_comm_type "a2a": 'Like DeepSpeed Ulysses, scatter attention heads across the CP group,
        # and gather to get full sequence of QKV' (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py
        # l.1030-1040 @d98e8a64ddf34856e74b24714e3bedb2f5a39553): the card's Ulysses kind; the entry's note cites
        # the recipe that sets it
        out.update(context_parallel=cp, context_parallel_kind="ulysses")
        notes.append("context parallel cp_comm_type a2a (Megatron-Core's Ulysses-style all-to-all of heads)"
                     " planned as context_parallel_kind ulysses")
    elif cp > 1:
        out.update(context_parallel=cp, context_parallel_kind="ring")
    if ep > 1:
        out["expert_parallel"] = ep
        # expert tensor parallel as the entry states it (Megatron-Core's expert_tensor_parallel_size; unset there it
        # defaults to tensor_model_parallel_size, so a Megatron entry with TP > 1 should state it from its recipe, e.g.
        # NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py: expert_tensor_parallel_size 1)
        etp = dims.get("etp") or 1
        if etp > 1:
            out["expert_tensor_parallel"] = etp
        # the EP dispatcher where the entry's recipe states it (Megatron-Core moe_token_dispatcher_type flex with the
        # DeepEP / HybridEP backend, or alltoall; Automodel's backend.dispatcher deepep | hybridep): the card's
        # parallel.moe_dispatcher (deepep covers both backends); each entry's note cites the file
        if dims.get("moe_dispatcher"):
            out["moe_dispatcher"] = dims["moe_dispatcher"]
        # Megatron-Core overlap_moe_expert_parallel_comm (Megatron-Bridge moe_a2a_overlap) where the entry's recipe sets
        # it: the card's parallel.moe_comm_overlap; each entry's note cites the file
        if dims.get("moe_comm_overlap"):
            out["moe_comm_overlap"] = True
        # the router's pick where the entry states it (NeMo Automodel's benchmarks run backend.fake_balanced_gate:
        # consecutive experts per token); each entry's note cites the config
        if dims.get("moe_routing"):
            out["moe_routing"] = dims["moe_routing"]
    # the routed experts as transformers < 5 runs them (a Python loop, per-expert ZeRO-3 fetches unless the block is a
    # leaf module) where the entry's framework version says so: parallel.moe_experts / moe_zero3_leaf; each entry's
    # note cites the version and the leaf setting
    if dims.get("moe_experts"):
        out["moe_experts"] = dims["moe_experts"]
    if dims.get("moe_zero3_leaf"):
        out["moe_zero3_leaf"] = True
    # Megatron-Core distributed optimizer overlap_param_gather where the entry's recipe sets it (the card's
    # parallel.overlap_param_gather; each entry's note cites the file)
    if dims.get("overlap_param_gather"):
        out["overlap_param_gather"] = True
    if out:
        notes.insert(0, "model parallel: " + ", ".join(f"{k} {v}" for k, v in out.items() if k != "pipeline_layout"))
    return out, notes


def pipeline_layout_of(dims: dict[str, Any], *, pp: int, vpp: int, num_layers: int | None,
                       framework: str, shape: dict[str, Any] | None = None) -> tuple[tuple[int, ...] | None, str]:
    """``parallel.pipeline_layout`` (decoder layers per virtual stage, stage i on rank i % pp) for a recipe whose split
    is neither even nor Megatron-Core's uneven end stages, and a note; (None, "") otherwise. From the entry's
    ``pipeline_layout`` (the decoder layers of its recipe's pipeline_model_parallel_layout), its
    ``account_for_embedding/loss_in_pipeline_split`` flags (Megatron-Core's rule, memory.pipeline.megatron_layout),
    NeMo Automodel's split when the stages do not divide the layers (memory.pipeline.automodel_layout), or nanotron's
    cost-balanced split of its Llama (memory.pipeline.nanotron_layout; ``shape``: the entry's inline model_config)."""
    from trainfit.memory.pipeline import (
        automodel_layout,
        megatron_layout,
        nanotron_layout,
        stage_layer_counts,
    )

    emb, loss = bool(dims.get("account_for_embedding_in_pipeline_split")), \
        bool(dims.get("account_for_loss_in_pipeline_split"))
    if num_layers is None and shape:
        num_layers = shape.get("num_hidden_layers")
    if dims.get("pipeline_layout"):
        layout, how = tuple(int(n) for n in dims["pipeline_layout"]), "the recipe's pipeline_model_parallel_layout"
    elif num_layers is None:
        return None, ""
    elif emb or loss:
        layout = megatron_layout(num_layers, pp, vpp, embedding=emb, loss=loss)
        how = ("Megatron-Core's split with account_for_" + " / ".join(
            k for k, on in (("embedding_in_pipeline_split", emb), ("loss_in_pipeline_split", loss)) if on)
            + " (embedding and loss one layer each)")
    elif framework == "nanotron" and shape and vpp == 1:
        # nanotron places its pipeline blocks by get_block_compute_costs (a decoder layer 4·heads·(hidden // heads)·hidden
        # + 3·ffn·hidden, the lm_head vocab·hidden): the head's rank takes fewer decoder layers
        h, heads = int(shape["hidden_size"]), int(shape["num_attention_heads"])
        layout = nanotron_layout(num_layers, pp, layer_cost=4 * heads * (h // heads) * h + 3 * int(shape[
            "intermediate_size"]) * h, head_cost=int(shape["vocab_size"]) * h)
        how = ("nanotron's split balanced by its block costs (huggingface/nanotron src/nanotron/models/base.py build_model"
               " l.216-236, src/nanotron/models/llama.py get_block_compute_costs l.913-925"
               " @c252843039cc167ff8d6894b87172af4637eb14b)")
    elif framework in ("nemo-automodel", "automodel") and num_layers % (pp * vpp):
        layout, how = automodel_layout(num_layers, pp, vpp), ("NeMo Automodel's split (the first layers % stages"
                                                              " stages one layer more, stage i on rank i % pp)")
    else:
        return None, ""
    per_rank = stage_layer_counts(sum(layout), pp, layout=layout)
    sizes = sorted(set(layout))
    return layout, (f"pipeline_layout from {how}: {len(layout)} virtual stages of {'/'.join(map(str, sizes))} layers,"
                    f" {list(per_rank)} per rank")


MEGATRON_FRAMEWORKS = ("ms-swift-megatron", "megatron", "megatron-bridge", "nemo")
HF_TRAINER_FRAMEWORKS = ("hf-trainer", "fms-hf-tuning", "trl", "ms-swift-deepspeed")
"""Frameworks whose training loop is transformers' Trainer (fms-hf-tuning through TRL's SFTTrainer, TRL's trainers
subclass it, ms-swift's swift sft), where a model loaded with torch_dtype float16 runs in float16: entries whose
``precision.fp16_source`` plans the card's own ``precision.compute: fp16`` (as do ``DEEPSPEED_FP16_FRAMEWORKS``')."""
DEEPSPEED_FP16_FRAMEWORKS = ("deepspeed-chat",)
"""Frameworks whose own DeepSpeed config turns on fp16 mixed precision (DeepSpeed-Chat's ``get_train_ds_config``:
``"fp16": {"enabled": True, ...}``, deepspeedai/DeepSpeedExamples applications/DeepSpeed-Chat/training/utils/
ds_utils.py l.37-40 @3a77097a7b6ce67b78ea7c05129b90915cfebbb0): the module runs in fp16 with DeepSpeed's fp32 master
copy; an entry's ``precision.fp16_source`` plans the card's ``precision.compute: fp16``, and its
``precision.master_weights`` (with ``master_weights_source``) the card's master copy."""
PREF_METHODS = ("dpo", "rm")
"""The card methods a training entry's ``method`` may name besides the default ``sft``."""
"""Megatron-LM's ``--recompute-granularity selective`` recomputes the attention core only."""


TORCHTITAN_SELECTIVE_AC_OPTION = 2
"""torchtitan's default ``activation_checkpoint.selective_ac_option`` "2" (checkpoint every other layer): pytorch/torchtitan
torchtitan/config_manager.py@041336434916bdc0f88c1f89fda176fd3c2092e4 (the commit of docs/performance.md's
"selective layer" rows), ``default="2",  # 2 = checkpoint every other layer``."""


def fms_fsdp_every_n_layers(also: dict[str, Any] | None) -> int | None:
    """fms-fsdp's "selective" activation checkpointing wraps a share p of the decoder blocks
    (foundation-model-stack/fms-fsdp fms_fsdp/policies/ac_handler.py: ``_count % every_xth_item == 0``
    @5e522b4c4f8a5f080717e714fee7622414dd6b63, ``block_idx * p >= cut_off`` @ed74fd5ddec00e309eac20f478de883464c86526:
    round(p L) evenly spaced blocks, as every round(1/p)-th for p = 1/n). p is not published; the publication's own
    HFU / MFU (torch's FLOP counter with the recompute over the model FLOPs) is (3 + p) / 3 for a recomputed share p
    of the forward, so n = round(1 / (3 (HFU / MFU - 1))). None without both figures."""
    hfu, mfu = (also or {}).get("hfu"), (also or {}).get("mfu")
    if not hfu or not mfu or hfu <= mfu:
        return None
    return max(1, round(1 / (3 * (hfu / mfu - 1))))


MEGATRON_CORE_COMBINE_KEEPS_EXPERT_OUTPUT = {
    "NeMo 25.02 container": "NeMo 25.02 (NVIDIA/NeMo v2.2.0 @7192a2c944c48ab253f3f711ee52fe2dc986a3bb"
    " requirements/manifest.json) pins Megatron-LM 791b70e031dc6905f77e29c25f1e2ac5b8dd4870 (Megatron-Core 0.11.0rc1),"
    " whose MoE combine multiplies the routing probabilities and keeps the expert output",
    "NeMo 25.04 container": "NeMo 25.04 (NVIDIA/NeMo v2.3.0 @2b03b748bb7d28e4e382df3d085078c6146d174e"
    " requirements/manifest.json) pins Megatron-LM 3cdfd613e68e8b734a3b9e28de579daaf81f4503 (Megatron-Core 0.12.0rc4),"
    " whose MoE combine multiplies the routing probabilities and keeps the expert output",
}
"""Containers (an entry's note opens with the name) whose Megatron-Core predates the routing probabilities inside the
experts' SwiGLU (``memory.activations.MEGATRON_PROBS_IN_EXPERTS_SOURCES``). The other Megatron rows run a later one,
the card's default: NVIDIA/dgxc-benchmarking @c5c765f2684f MEGATRON_COMMIT (deepseek_v3/pretraining/setup.sh l.55,
llama4/setup.sh l.57: 7094270c6fa1, 0.12.2; grok1/setup.sh l.56: 64cb6bd7a155, core_v0.12.2), ms-swift's Megatron-SWIFT of
2025-06-19 (the core_r0.12.0 branch, past core_v0.12.2 of 2025-06-10: modelscope/ms-swift
docs/source_en/Instruction/Megatron-SWIFT-Training.md l.25 @0f31a5a9ebe0), Megatron-Bridge 25.11
(@97ad8cc6fb27 3rdparty/Megatron-LM 92c8482e6dcd, 0.16.0rc0), 26.02 (@df0289c180dd: 8f1c2f8ae53b) and the archive
commit @067f987df03b (2a75ac12c54b, 0.20.0)."""


def megatron_recompute_modules_of(value: str) -> list[str] | None:
    """The Megatron-Core ``recompute_modules`` a published ``selective_<module>_<module>...`` setting names (the
    preset's list joined by underscores, e.g. ``selective_mla_up_proj_mlp`` for ``["mla_up_proj", "mlp"]``), read
    greedily against ``spec.enums.RecomputeModule``; None when the rest is not such a list."""
    from trainfit.spec.enums import RecomputeModule

    rest, out = value.removeprefix("selective_"), []
    if rest == value or not rest:
        return None
    names = sorted((m.value for m in RecomputeModule), key=len, reverse=True)
    while rest:
        hit = next((n for n in names if rest == n or rest.startswith(n + "_")), None)
        if hit is None:
            return None
        out.append(hit)
        rest = rest[len(hit) + 1:]
    return out


def checkpointing(value: Any, framework: str, also: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The card's ``parallel`` checkpointing keys for a published setting (``also``: the row's other published
    figures, read for fms-fsdp's share of checkpointed layers)."""
    if value == "selective_layer" and framework == "torchtitan":
        n = TORCHTITAN_SELECTIVE_AC_OPTION
        return ({"gradient_checkpointing": True, "checkpoint_every_n_layers": n},
                [f"torchtitan layer-selective AC: every {n}-th layer (selective_ac_option default '{n}')"])
    if value == "selective_layer" and framework == "fms-fsdp" and (n := fms_fsdp_every_n_layers(also)):
        return ({"gradient_checkpointing": True, "checkpoint_every_n_layers": n},
                [f"fms-fsdp selective AC: every {n}-th layer (p = 1/{n} from the published HFU/MFU"
                 f" {also['hfu']}/{also['mfu']} = (3 + p)/3)"])
    if value in ("full", True):
        return {"gradient_checkpointing": True}, []
    if value in ("none", False):
        return {"gradient_checkpointing": False}, []
    if value == "selective_op" and framework in MEGATRON_FRAMEWORKS:
        return ({"gradient_checkpointing": "selective", "selective_checkpointing": "core_attention"},
                ["Megatron selective recompute planned as core_attention"])
    if value == "selective_mla_up_proj" and framework in MEGATRON_FRAMEWORKS:
        return ({"gradient_checkpointing": "selective", "selective_checkpointing": "mla_up_proj"},
                ["Megatron-Core --recompute-modules mla_up_proj"])
    if value == "selective_layernorm_moe_act" and framework in MEGATRON_FRAMEWORKS:
        return ({"gradient_checkpointing": "selective", "selective_checkpointing": "layernorm_moe_act"},
                ["Megatron-Core --recompute-modules layernorm moe_act"])
    if value == "selective_moe_layernorm" and framework in MEGATRON_FRAMEWORKS:
        return ({"gradient_checkpointing": "selective", "recompute_modules": ["moe", "layernorm"]},
                ["Megatron-Core --recompute-modules moe layernorm"])
    if value == "selective_op":
        return {"gradient_checkpointing": "selective"}, []
    if (framework in MEGATRON_FRAMEWORKS and isinstance(value, str)
            and (modules := megatron_recompute_modules_of(value)) is not None):
        return ({"gradient_checkpointing": "selective", "recompute_modules": modules},
                [f"Megatron-Core --recompute-modules {' '.join(modules)}"])
    if isinstance(value, str) and value.startswith("selective"):
        return {"gradient_checkpointing": False}, [f"selective activation checkpointing ({value}) counted as none"]
    if framework == "ms-swift-deepspeed":
        return {"gradient_checkpointing": True}, ["activation checkpointing not stated: on (ms-swift's default)"]
    return {"gradient_checkpointing": False}, ["activation checkpointing not stated: off"]


FP8_RECIPES = {"torchtitan": "current", "nemo": "delayed", "megatron": "delayed", "megatron-bridge": "current"}
"""torchtitan's float8 converter is torchao tensorwise (dynamic, current) scaling; NeMo / Megatron use
Transformer Engine, whose default recipe is DelayedScaling. Megatron-Bridge's performance recipes run "FP8" as FP8
current scaling (NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/perf_recipes/_common.py
@067f987df03b8355b03192d88d70f1709fedf51a: ``_perf_precision("fp8_cs")`` = ``bf16_with_fp8_current_scaling_mixed``; the
25.11 summary labels the same rows FP8-CS). An entry's ``precision.fp8_recipe`` (delayed | current | blockwise |
mxfp8), when given, wins over this per-framework default; ``precision.compute: fp4`` needs the entry's ``fp4_recipe``."""


BF16_ADAPTER_FRAMEWORKS = ("torchtune", "nemo", "megatron", "automodel", "nemo-automodel", "megatron-bridge",
                           "hf-trainer", "prime-rl", "fsdp_qlora", "vectorlm")
"""Frameworks whose LoRA adapters run their matmuls in bf16. PEFT >= 0.12 keeps the adapters fp32
(``autocast_adapter_dtype``), but the Hugging Face Trainer with ``bf16=True`` runs the forward under
``torch.autocast(bfloat16)``, which casts fp32 linears to bf16 (and PEFT before 0.12 created the adapters in the
base's dtype): the ``hf-trainer`` entries (Qwen-1's finetune.py, 2023, ``--bf16 True``) plan bf16 adapters. prime-rl
creates its LoRA A/B in the base layer's dtype and FSDP2 all-gathers every parameter as bf16
(PrimeIntellect-ai/prime-rl src/prime_rl/trainer/models/layers/lora/multi_linear.py l.86 / 100 and
src/prime_rl/trainer/model.py l.156 ``MixedPrecisionPolicy(param_dtype=torch.bfloat16, ...)``
@d8f290ef0358a804f1912bd29ea1b37cc56894b4). Answer.AI's fsdp_qlora train.py with its default ``--precision bf16`` runs
the model, adapters included, in bf16 without FSDP mixed precision ("This will cast all the model parameters to
``torch.bfloat16`` before training", AnswerDotAI/fsdp_qlora README.md l.128 @50efa1efa0ed1451b466686bc89c07007637ae48). VectorLM
casts the PEFT model, adapters included, to bf16 (``lora_model.bfloat16()``, VectorInstitute/vectorlm
vectorlm/utils/model_utils.py l.69 @9045f08ac1af38c13100cfabdd17412f57dbffd2) and FSDP1 runs MixedPrecision bf16."""


UNSLOTH_FUSED_LORA = (
    "lora.adapter_dtype bf16: Unsloth's fused LoRA autograd functions run every adapter GEMM in the activation dtype."
    " With lora_dropout 0 and bias none (get_peft_model's defaults, unsloth/models/llama.py l.2643-2644) patch_peft_model"
    " routes each decoder layer's MLP, QKV and O through LoRA_MLP / LoRA_QKV / LoRA_W (l.3248-3330); their matmul_lora"
    " multiplies X @ A.to(dtype) and adds it times B.to(dtype) into the base output with out.addmm_ (unsloth/kernels/"
    "utils.py l.1027-1031), and their backwards cast A and B the same way (unsloth/kernels/fast_lora.py l.138-145,"
    " l.443-450, l.614), unslothai/unsloth @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a (2026.1.3): no fp32 copy of the"
    " activations, no fp32 adapter GEMM. PEFT still stores A and B in fp32 (autocast_adapter_dtype); the card's field"
    " states the GEMMs' dtype here, as for BF16_ADAPTER_FRAMEWORKS")
"""Why an Unsloth LoRA / QLoRA training entry without dropout plans ``lora.adapter_dtype: bf16``
(``unsloth_fused_lora``)."""


UNSLOTH_LAYERS = (
    "parallel.unsloth_layers (compile off): FastLanguageModel runs Qwen3 through FastQwen3Model's eager fast forward"
    " (Triton RMSNorm / RoPE, fused LoRA autograd functions; no torch.compile on the layers), its kernels counted from"
    " unslothai/unsloth @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a (trainfit.compute.unsloth_layers); loop."
    "checkpoint_reentrant: use_gradient_checkpointing 'unsloth' is UnslothCheckpointFunction, whose forward runs the"
    " layer under no_grad and whose backward re-runs all of it (unslothai/unsloth-zoo unsloth_zoo/"
    "gradient_checkpointing.py l.497, l.589 @fd50fb1c950594249e54d46066bcae46c888e62f)"
)
"""Why an Unsloth training entry plans ``parallel.unsloth_layers`` and a re-entrant checkpoint (``unsloth_layers_card``)."""
UNSLOTH_PACKED_SYNCS_NOTE = (
    "loop.attention_call_syncs {n}: packed rows carry packed_seq_lengths, and every attention forward reads their max"
    " back with .item() (unsloth/utils/packing.py l.222) and copies them to the host for xFormers' block mask (l.236)"
)


def unsloth_layers_card(e: dict[str, Any], card: dict[str, Any]) -> list[str]:
    """Fill ``card`` (in place) for an Unsloth training entry: Unsloth's own layers, not compile
    (``parallel.unsloth_layers``), its re-entrant offloaded checkpoint, and on packed rows the attention's host
    syncs (``trainfit.compute.unsloth_layers``); the notes that say so."""
    card["parallel"]["compile"] = False
    card["parallel"]["unsloth_layers"] = True
    notes = [UNSLOTH_LAYERS]
    if card["parallel"].get("gradient_checkpointing"):
        card.setdefault("loop", {})["checkpoint_reentrant"] = True
    if e["batch"].get("packed"):
        card.setdefault("loop", {})["attention_call_syncs"] = UNSLOTH_PACKED_ATTENTION_SYNCS
        notes.append(UNSLOTH_PACKED_SYNCS_NOTE.format(n=UNSLOTH_PACKED_ATTENTION_SYNCS))
    return notes


UNSLOTH_FUSED_GROUPS: dict[str, tuple[str, ...]] = {
    "mlp": ("gate_proj", "up_proj", "down_proj"), "qkv": ("q_proj", "k_proj", "v_proj"), "o": ("o_proj",)}
"""The module groups Unsloth's ``patch_peft_model`` moves onto its fused LoRA kernels, each as one unit: LoRA_MLP when
gate, up and down all carry an adapter and none of their base layers has a bias, LoRA_QKV the same for q, k and v,
LoRA_W for o (unslothai/unsloth @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a unsloth/models/llama.py l.3261-3334:
``hasattr(x, "lora_A")`` and ``getattr(x, "base_layer", x).bias is None`` for every member). A group that fails keeps
PEFT's forward, with PEFT's fp32 adapters (Qwen2 / 2.5's q, k and v have a bias: "a bias term (like in Qwen) is
used")."""


def _lora_target_names(lora: dict[str, Any]) -> set[str]:
    targets = lora.get("targets", "all-linear")
    if targets == "all-linear":
        return {m for group in UNSLOTH_FUSED_GROUPS.values() for m in group}
    if targets == "qv":
        return {"q_proj", "v_proj"}
    return set(targets)


def unsloth_peft_path_modules(lora: dict[str, Any], model: Any) -> list[str]:
    """The targeted decoder modules an Unsloth LoRA leaves on PEFT's path (``UNSLOTH_FUSED_GROUPS``): those of a group
    not wholly targeted, or whose base layers have a bias (``model``: the card's model value; its ModelSpec's
    ``attention_bias`` for q/k/v, ``o_proj_bias``, ``mlp_bias``)."""
    if isinstance(model, dict) and model.get("config") is not None:
        from trainfit.catalog.hf_config import spec_from_hf_config

        spec = spec_from_hf_config(model["config"], name=model.get("id") or "inline config", source="entry config")
    else:
        from trainfit.catalog.models import resolve_model as catalog_model

        spec = catalog_model(model["id"] if isinstance(model, dict) and "id" in model else model)
    bias = {"mlp": spec.mlp_bias, "qkv": spec.attention_bias, "o": spec.o_proj_bias}
    targeted = _lora_target_names(lora)
    kept: list[str] = []
    for name, group in UNSLOTH_FUSED_GROUPS.items():
        hit = [m for m in group if m in targeted]
        if hit and (bias[name] or len(hit) < len(group)):
            kept += hit
    return kept


def unsloth_fused_lora(lora: dict[str, Any] | None, framework: str, *, model: Any = None) -> bool:
    """An Unsloth LoRA whose layers take Unsloth's fused LoRA kernels (``UNSLOTH_FUSED_LORA``): dropout 0 (a dropout
    keeps PEFT's own forward, llama.py l.3248; bias ``none`` on every such entry, the default) and every targeted
    module in a group Unsloth patches (``unsloth_peft_path_modules`` empty for ``model``). The card has one
    ``lora.adapter_dtype``, so an entry with any module left on PEFT's path plans them all as PEFT's (fp32), its note
    naming those modules (``unsloth_lora_note``). ``model`` None: the bias is not checked (the entry's model unknown)."""
    if (framework or "").lower() != "unsloth" or not lora or lora.get("dropout"):
        return False
    return model is None or not unsloth_peft_path_modules(lora, model)


def unsloth_lora_note(lora: dict[str, Any] | None, framework: str, *, model: Any) -> str | None:
    """The note of an Unsloth LoRA entry without dropout: ``UNSLOTH_FUSED_LORA`` when every targeted module takes the
    fused kernels, else which modules stay on PEFT's path and why the card keeps fp32 adapters; None otherwise."""
    if (framework or "").lower() != "unsloth" or not lora or lora.get("dropout"):
        return None
    kept = unsloth_peft_path_modules(lora, model)
    if not kept:
        return UNSLOTH_FUSED_LORA
    return (f"lora.adapter_dtype fp32 (PEFT's): Unsloth leaves {', '.join(kept)} on PEFT's path (a base-layer bias or a"
            " group not wholly targeted: unsloth/models/llama.py l.3261-3334 @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a)"
            " and the card states one adapter dtype, so the other targeted modules' fused bf16 GEMMs are planned as"
            " PEFT's too")


TORCHTUNE_NF4 = (
    "lora.dequant torchao: torchtune's QLoRA quantizes the base with torchao's to_nf4 and multiplies with linear_nf4"
    " (pytorch/torchtune torchtune/modules/peft/lora.py l.14, l.95, l.125 @30b8519e86d2094879576e16ab1f8d21a6f6f9f7),"
    " whose dequantisation is PyTorch ops torch.compile traces (pytorch/ao torchao/dtypes/nf4tensor.py l.481, l.557-565"
    " @ff2889540075e8c8d0a2f4b9900da1b9136ae376), not bitsandbytes' dequantize kernel")
"""Why a torchtune QLoRA entry plans ``lora.dequant: torchao``."""


PEFT_METHOD_SCOPES = ("dora", "ia3", "prompt_tuning", "prefix_tuning")
"""PEFT methods other than plain LoRA that a training entry may name (``peft_method.scope``, kind ``sft_lora``): the
card scopes of those names (``spec.card.Scope``), which plan them (``memory.peft_variants``, ``compute.inventory``
``Adapter``)."""


def lora_section(lora: dict[str, Any] | None, framework: str = "", *, model: Any = None) -> dict[str, Any]:
    if not lora:
        return {}
    targets = lora.get("targets", "all-linear")
    if targets == "qv":
        targets = ["q_proj", "v_proj"]
    out = {"rank": lora["rank"], "alpha": lora["alpha"], "targets": targets}
    if lora.get("dropout"):
        out["dropout"] = lora["dropout"]
        if lora.get("dropout_position"):  # NeMo Automodel's default "post": dropout on the adapter's output
            out["dropout_position"] = lora["dropout_position"]
    if lora.get("modules_to_save"):
        # PEFT modules_to_save as the entry's framework sets it (cited in its note): trained in full beside the adapter
        out["modules_to_save"] = list(lora["modules_to_save"])
    if (framework or "").lower() in BF16_ADAPTER_FRAMEWORKS or unsloth_fused_lora(lora, framework, model=model):
        out["adapter_dtype"] = "bf16"
    if lora.get("expert_adapters"):  # prime-rl's unmerged grouped expert adapters where the entry's note cites them
        out["expert_adapters"] = lora["expert_adapters"]
    return out


# ---------------------------------------------------------------- training entries -> cards

FUSED_ATTENTION = ("flash", "flex", "te")
"""Published attention kernels that are one fused kernel outside SDPA (FlashAttention, FlexAttention, Transformer
Engine's fused attention): the card's ``flash``. They run where transformers has no SDPA path (gpt-oss's sinks)."""


MBRIDGE_TE_CROSS_ENTROPY = (
    "loss.kernel te: the performance scripts set cross_entropy_fusion_impl 'te' with GPTModelProvider's"
    " cross_entropy_loss_fusion True, so Megatron-Core runs Transformer Engine's parallel_cross_entropy (memory only):"
    " 25.09 NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/*/*_llm_pretrain.yaml (e.g."
    " qwen3/qwen3_30b_a3b_llm_pretrain.yaml l.17) @v0.1.0rc4; 25.11 scripts/performance/utils/helpers.py l.108 @v0.2.0;"
    " 26.x src/megatron/bridge/perf_recipes/_common.py _benchmark_common(cross_entropy_impl='te') l.31 and l.70"
    " @067f987df03b8355b03192d88d70f1709fedf51a (native only for DeepSeek-V4, GLM-5 and Nemotron-H, none of them"
    " scored here); src/megatron/bridge/models/gpt_provider.py cross_entropy_loss_fusion True (l.180 @v0.2.0)")
"""Why a Megatron-Bridge performance-summary row plans Transformer Engine's cross-entropy (``loss.kernel te``)."""

TE_CUDNN_FRAMEWORKS = ("nemo", "megatron-bridge")
"""Frameworks whose Transformer Engine attention runs cuDNN's fused attention on Hopper: Megatron-Core's
``attention_backend`` auto (NeMo / Megatron-Bridge recipes leave it so: NVIDIA-NeMo/Megatron-Bridge
src/megatron/bridge/recipes/llama/h100/llama3.py l.97 ``cfg.model.attention_backend = None`` "auto selection"
@067f987df03b8355b03192d88d70f1709fedf51a) leaves the choice to TE's ``get_attention_backend``, which, when both
FlashAttention and FusedAttention can run a layer, disables FlashAttention on compute capability 9.0+ "to give
FusedAttention preference on Hopper+ for performance reasons" (NVIDIA/TransformerEngine
transformer_engine/pytorch/attention/dot_product_attention/utils.py l.1647-1653
@d0067d0da6cb01811b8072a7d304f0e00344ce2b; the same choice on sm90 since 32db39288c627e9dd94a9391119619749a008f00,
2023-12-07, in every TE release from v1.2, so in every container these entries name)."""


def attention_kernel_of(e: dict[str, Any], gpu_id: str, notes: list[str]) -> dict[str, str]:
    """The card's ``attention_kernel`` for an entry: the kernel its note cites (``attention_kernel``), cuDNN for
    NeMo / Megatron-Bridge fused attention on Hopper (``TE_CUDNN_FRAMEWORKS``), triton_fa for llm-foundry (its
    ``attn_impl: triton``, ``attention_of``), else unstated (auto)."""
    if e.get("attention_kernel"):
        return {"attention_kernel": e["attention_kernel"]}
    from trainfit.catalog.gpus import resolve_gpu

    cc = resolve_gpu(gpu_id).compute_capability or ""
    if e["framework"] == "llm-foundry" and not e.get("attention"):
        # no attn_impl stated: the tables' --attn_impl default, triton (attention_of), llm-foundry's copy of
        # flash-attention's flash_attn_triton.py on the pre-MLIR Triton fork (compute.attention_time, triton_fa).
        # Rows whose sweep passed --attn_impl flash state attention flash (the flash-attn package): not remapped.
        notes.append("attention_kernel triton_fa: llm-foundry's attn_impl triton (submit_benchmarks.py default"
                     " when its tables were run)")
        return {"attention_kernel": "triton_fa"}
    if e["framework"] in TE_CUDNN_FRAMEWORKS and attention_of(e) == "flash" and cc.startswith("9."):
        notes.append("attention_kernel cudnn: Transformer Engine prefers its cuDNN fused attention on Hopper"
                     " (TE_CUDNN_FRAMEWORKS)")
        return {"attention_kernel": "cudnn"}
    return {}


def attention_of(e: dict[str, Any]) -> str:
    """The card's attention for an entry: eager when published so, flash for a fused kernel named by the entry or
    run by Megatron-Core (Transformer Engine's fused attention), else sdpa."""
    a = (e.get("attention") or "").lower()
    if a == "eager":
        return "eager"
    if a in FUSED_ATTENTION or e["framework"] in MEGATRON_FRAMEWORKS:
        return "flash"
    if e["framework"] == "llm-foundry":
        # every scripts/train/yamls/pretrain/mpt-*.yaml at the LLM_FOUNDRY_MPT commits sets attn_config.attn_impl
        # flash (495218376830, 309f68378c1e, c90b9b312c64) or triton (5a6e81c1e041, 34c28fc91992, fe15f275b7c1,
        # ef9e5a3da336), and scripts/train/benchmarking/submit_benchmarks.py overrides it with --attn_impl, whose
        # default was triton when the tables were run (@300cc5c58 May 2023, @b2a43a147 Oct 2023, @5e85bd62 Jan 2024;
        # flash only from 7f0fdae66, 2024-03-26): llm-foundry's Triton FlashAttention (layers/flash_attn_triton.py on
        # the triton_pre_mlir fork, "only tested on A100"): attention flash, kernel triton_fa (attention_kernel_of).
        # The README's tables came in with b2a43a147 (Oct 2023) or 5e85bd62 (the >= 128-GPU H100 table, whose
        # 1b/3b/7b/70b rows state attention flash: their sweep passed --attn_impl flash).
        # The sweep also sets norm_type low_precision_layernorm (one fused LayerNorm kernel: ModelSpec.layer_norm).
        return "flash"
    return "sdpa"


def train_tokens_per_step(e: dict[str, Any]) -> float:
    """Tokens per optimizer step: global batch × seq when published, else mbs × seq × ga × DP ranks."""
    b, p = e["batch"], e["parallel"]
    if b.get("global_batch_size"):
        return float(b["global_batch_size"] * b["seq_len"])
    model_parallel = (p.get("tp") or 1) * (p.get("pp") or 1) * (p.get("cp") or 1) * (p.get("sequence_parallel_ulysses") or 1)
    dp = max(1, e["gpus"] // model_parallel)
    return float(b["micro_batch_size"] * b["seq_len"] * (b.get("grad_accum") or 1) * dp)


def published_train_seconds(e: dict[str, Any], tokens_per_step: float) -> float:
    """The published figure as seconds per optimizer step."""
    metric, value = e["measured"]["metric"], e["measured"]["value"]
    if metric == "step_s":
        return float(value)
    if metric == "tokens_per_s_per_gpu":
        return tokens_per_step / (value * e["gpus"])
    if metric == "tokens_per_s_total":
        return tokens_per_step / value
    raise Unmapped("skipped", [f"metric '{metric}' has no unambiguous step-time conversion"])


def overlap_param_gather_of(e: dict[str, Any], dp: int) -> str | None:
    """The note when a training entry's framework runs the distributed optimizer's parameter all-gather overlapped
    with the next forward (the card's ``parallel.overlap_param_gather``, ``compute.dist_optimizer``), else None.

    * Megatron-LM's 2024 scaling table: the README states ``--overlap-grad-reduce --overlap-param-gather`` (each
      entry's note quotes it).
    * Megatron-Bridge pretraining: ``_pretrain_common`` builds ``DistributedDataParallelConfig(...,
      overlap_grad_reduce=True, overlap_param_gather=True, ..., use_distributed_optimizer=True)`` and, where the
      performance scripts add a ``CommOverlapConfig``, ``_get_optimizer_overlap_cfgs`` sets both True when
      ``data_parallel_size > 1`` (NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/common.py l.80-88,
      src/megatron/bridge/training/comm_overlap.py l.562-583 @067f987df03b8355b03192d88d70f1709fedf51a). Its SFT
      / LoRA recipes (``_sft_common``: overlap not set, Megatron-Core's default false) are left as they are.
    * NeMo 24.07 (NeMo-Framework-Launcher): ``distributed_fused_adam`` with ``overlap_param_sync: true`` where the
      entry's note states it (Apex's sharded optimizer, its parameter sync overlapped with the forward; planned as
      Megatron's)."""
    if e["parallel"].get("strategy") != "megatron-dist-opt" or dp <= 1:
        return None
    note, fw = e.get("note") or "", e["framework"]
    if fw == "megatron" and "--overlap-param-gather" in note:
        return "distributed optimizer overlap_param_gather (the README's --overlap-param-gather)"
    if fw == "megatron-bridge" and e["kind"] == "pretrain":
        return ("distributed optimizer overlap_param_gather (Megatron-Bridge _pretrain_common and CommOverlapConfig"
                " with data parallel > 1)")
    if fw == "nemo" and "overlap_param_sync true" in note:
        return "distributed_fused_adam overlap_param_sync planned as the distributed optimizer's overlap_param_gather"
    return None


MEGATRON_LM_FP32_GRADS = (
    "fp32 gradient buffer and reduce-scatter (precision.grads fp32): Megatron-LM with --bf16 forces"
    " accumulate_allreduce_grads_in_fp32 (megatron/training/arguments.py l.299-305), passed as"
    " DistributedDataParallelConfig(grad_reduce_in_fp32=...) (megatron/training/training.py l.447), so the"
    " main_grad buffer is fp32 (megatron/core/distributed/distributed_data_parallel.py l.108,"
    " param_and_grad_buffer.py l.366-370) and its buckets are reduce-scattered as they are (l.131-147)"
    " (NVIDIA/Megatron-LM @baf94af3c667248865f23df73b9fb8e2395e6fd0, core_r0.8.0)")
"""Megatron-LM's 2024 (bf16) rows: 4 B per gradient in the buffer and on the wire."""
MS_SWIFT_MEGATRON_FP32_GRADS = (
    "fp32 gradient buffer and reduce-scatter (precision.grads fp32): Megatron-SWIFT passes --bf16 (torch_dtype"
    " bfloat16 from the checkpoint: swift/llm/argument/base_args/model_args.py _init_mixed_precision l.111-123) to"
    " Megatron-LM as argv (swift/megatron/argument/megatron_args.py _args_to_argv l.338-361; modelscope/ms-swift"
    " @8d7c4104b5ed3edd2058575f59e682b5852cba09, no grad-reduce argument there or @0f31a5a9ebe0), and Megatron-LM"
    " core_r0.12.0 sets accumulate_allreduce_grads_in_fp32 for bf16 unless --grad-reduce-in-bf16 or"
    " --main-grads-dtype bf16 (megatron/training/arguments.py l.597-604), passed as grad_reduce_in_fp32"
    " (megatron/training/training.py l.1001) (NVIDIA/Megatron-LM @5cb6dbb3ed04e6fa11a862d90fe898ac2d3ddfad)")
"""ms-swift's Megatron-SWIFT rows (the Qwen2.5-14B and Qwen3-30B-A3B commands set neither flag)."""
NEMO_2407_BF16_GRAD_SYNC = {
    "gpt/h100/5b_fp8_8node.sh": 23, "gpt/h100/20b_fp8_8node.sh": 23, "gpt/h100/175b_fp8_16node.sh": 24,
    "llama/h100/llama2_7b_fp8.sh": 22, "llama/h100/llama2_13b_fp8.sh": 22, "llama/h100/llama2_70b_fp8.sh": 21,
    "llama/h100/llama3_8b_fp8.sh": 22, "llama/h100/llama3_70b_fp8.sh": 21,
}
"""NeMo-Framework-Launcher 24.07 H100 pretraining scripts (examples/training/...) and the line that passes
``+training.model.optim.grad_sync_dtype=bf16`` (@8325688d8345a5513660f0f8390f0482a721c009)."""
NEMO_2407_FP32_GRAD_SYNC = ("nemotron/h100/nemotron_8b_fp8.sh", "nemotron/h100/nemotron_22b_fp8.sh")
"""... and the scripts that leave ``optim.grad_sync_dtype`` unset (their yaml too)."""
NEMO2_PERF_GRAD_REDUCE = {
    "scripts.performance.llm.pretrain_deepseek_v3": (
        "7a8f1cc7bc40a84447c0681a9e4e956a135ae8a2", "fp32",
        "NVIDIA/NeMo scripts/performance/llm/pretrain_deepseek_v3.py l.65 builds pretrain_recipe() without"
        " performance_mode, so the recipe trainer's DistributedDataParallelConfig(grad_reduce_in_fp32=True) and"
        " plugins=bf16_mixed() stand (nemo/collections/llm/recipes/deepseek.py l.77, l.95;"
        " recipes/precision/mixed_precision.py l.35 grad_reduce_in_fp32=True, written into the DDP config by"
        " nemo/lightning/pytorch/strategies/megatron_strategy.py l.423); scripts/performance/utils.py"
        " set_primary_perf_configs sets it False for fp8 only (l.426-437)"),
    "scripts.performance.llm.pretrain_llama4_e128": (
        "7a8f1cc7bc40a84447c0681a9e4e956a135ae8a2", "bf16",
        "NVIDIA/NeMo scripts/performance/llm/pretrain_llama4_e128.py l.60 pretrain_recipe(performance_mode=True):"
        " nemo/collections/llm/recipes/llama4_e128.py pretrain_performance_optimizations l.251"
        " recipe.trainer.plugins.grad_reduce_in_fp32 = False (fp8: the script's l.93-94)"),
    "scripts.performance.llm.pretrain_llama31_405b": (
        "6f2c6fdaffcc0af97a9e2219fcc104e2399627e4", "bf16",
        "NVIDIA/NeMo scripts/performance/llm/pretrain_llama31_405b.py l.65 pretrain_recipe(performance_mode=True):"
        " nemo/collections/llm/recipes/llama31_405b.py pretrain_performance_optimizations l.253"
        " recipe.trainer.plugins.grad_reduce_in_fp32 = False"),
    "scripts.performance.llm.pretrain_grok1_314b": (
        "6f2c6fdaffcc0af97a9e2219fcc104e2399627e4", "bf16",
        "NVIDIA/NeMo scripts/performance/llm/pretrain_grok1_314b.py l.300 pretrain_recipe(performance_mode=True),"
        " its pretrain_performance_optimizations l.221 recipe.trainer.plugins.grad_reduce_in_fp32 = False (fp8:"
        " l.341-342)"),
    "llama3.1/pretrain_llama31.py": (
        "d2b21556f2455b52ad7217f334bb66eaa13c0f83", "bf16",
        "NVIDIA/dgxc-benchmarking llama3.1/pretrain_llama31.py l.73-76 pretrain_recipe(performance_mode=True) (fp8:"
        " l.130-131) @741c886025a7665a1d690c05ff12ac29c1be7252; NVIDIA/NeMo nemo/collections/llm/recipes/"
        "llama3_8b.py l.240 / llama3_70b.py l.246 pretrain_performance_optimizations"
        " recipe.trainer.plugins.grad_reduce_in_fp32 = False"),
    "ft_llama3/llama3_finetune.py": (
        "741c886025a7665a1d690c05ff12ac29c1be7252", "bf16",
        "NVIDIA/dgxc-benchmarking ft_llama3/llama3_finetune.py l.116 recipe.trainer.plugins.grad_reduce_in_fp32 ="
        " False for bf16 and fp8 alike"),
}
"""NeMo 2.0 scripts a DGX Cloud benchmarking entry runs (named in its note, with the commit the note must cite):
(precision.grads, where the script or its recipe sets ``grad_reduce_in_fp32``). bf16_mixed's default is True
(nemo/collections/llm/recipes/precision/mixed_precision.py l.35), so a script that neither applies performance_mode
nor overrides it reduces in fp32."""
VERL_MEGATRON_FP32_GRADS = {
    "04acd09d65900521e8019adefd10308220cb7ee2":
    "verl's Megatron get_model wraps each chunk in Megatron-Core's DistributedDataParallel with"
    " DistributedDataParallelConfig(overlap_grad_reduce=False, use_distributed_optimizer=..., grad_reduce_in_fp32=True)"
    " (volcengine/verl verl/utils/megatron_utils.py l.118-128), the actor's and the critic's alike; no override",
    "503ea75f533f715cf1667551bd375ec9b1e0d5fc":
    "verl's Megatron get_model builds DistributedDataParallelConfig from {grad_reduce_in_fp32: True} updated by"
    " megatron.override_ddp_config (volcengine/verl verl/utils/megatron_utils.py l.134-141), which"
    " verl/trainer/config/actor/megatron_actor.yaml l.80 leaves {} with use_mbridge False (l.87) and the"
    " recipe/one_step_off_policy dapo_7b_math_megatron_*.sh scripts do not set",
    "97eac90487a0c6f7ef38e38d305e8f3fad7c4f0b":
    "use_mbridge True (the script's USE_MBRIDGE) with engine/megatron.yaml's vanilla_mbridge True (l.81): verl"
    " passes override_ddp_config ({}, l.50, not set by the script or fully_async_ppo_megatron_trainer.yaml) to"
    " mbridge's get_model (volcengine/verl verl/utils/megatron_utils.py l.270-275), whose DDP config starts from"
    " {grad_reduce_in_fp32: True} (ISEEKYAN/mbridge mbridge/core/util.py get_model l.194"
    " @20e9ffbbe72ae7b1df83bfe1bc3c11f7382f2612, the head before the script's commit; the script installs the"
    " git head, unpinned, and every mbridge commit since 9981577 of 2025-05-13 starts from True)",
    "b178a3cd56f58b2d502255daba591e92833930a7":
    "use_mbridge=True in the script with engine/megatron.yaml's vanilla_mbridge True (l.81): verl passes"
    " override_ddp_config ({}, l.50) to mbridge's get_model (volcengine/verl verl/utils/megatron_utils.py"
    " l.270-275), whose DDP config starts from {grad_reduce_in_fp32: True} (ISEEKYAN/mbridge mbridge/core/util.py"
    " l.192 at v0.1.13, the version the script names; v0.1.13 takes no ddp_config, so the default stands)",
}
"""verl Megatron commits (the run script's, cited in the entry's note) and why the actor's gradient buffer and its
reduce-scatter are fp32 there. verl 0.9.0.dev makes Megatron-Bridge the default (vanilla_mbridge False,
verl-project/verl 2c62c8be1, 2026-07-09), whose DDP config does not start from True: rows on it are not mapped."""


NEMO_RL_DTENSOR_PRECISION = {
    "27d0af945b96c5bf9fa928bf45fd1a6ce016632d": (
        {"grads": "fp32", "weights": "fp32", "optimizer_impl": "for_loop"},
        "NeMo RL v0.3.1's DTensor policy: fp32 parameter shards computed in bf16 (precision.weights fp32, compute"
        " bf16: the model config loaded with torch_dtype float32, 'Always load the model in float32 to keep master"
        " weights in float32', nemo_rl/models/policy/dtensor_policy_worker.py l.188-192, the meta-device model built"
        " from it l.218-220; fully_shard's MixedPrecisionPolicy(param_dtype=policy.precision 'bfloat16', reduce_dtype"
        " float32), nemo_rl/models/dtensor/parallelize.py l.464-468, l.476-488, param_dtype passed at"
        " dtensor_policy_worker.py l.284), so FSDP2 reduce-scatters the gradients in fp32 into fp32 gradient shards"
        " (precision.grads fp32; v0.3.0 the same; the megatron_cfg grad_reduce_in_fp32 false of the configs applies to"
        " the Megatron policy only), and"
        " for-loop AdamW (precision.optimizer_impl for_loop: examples/configs/grpo_math_1B.yaml l.78-88 sets"
        " torch.optim.AdamW with foreach: False, fused: False, 'when using Dtensor, we need to set foreach and fused to"
        " False', built at dtensor_policy_worker.py l.332-336; torch 2.7.0, pyproject.toml l.24, then runs"
        " _single_tensor_adamw; run_grpo_math.py l.190-193 loads grpo_math_1B.yaml when no --config is given, and"
        " AI-Hypercomputer/gpu-recipes RL/nemoRL/a4/qwen2.5-1.5b/submit_qwen2.5-1.5b.sh l.30-34 @22d106b6 overrides"
        " neither)",
    ),
}
"""NeMo RL commits (the release an entry's note names) and the DTensor (FSDP2) policy's card precision there: its
weights, gradients (and their data-parallel reduce-scatter) and optimizer implementation."""

NEMO_RL_RELEASES = {
    "b1c86a816c5e2b4ca41ece193624a38dc62e6fdf": "0.3.0",  # NVIDIA-NeMo/RL tag v0.3.0
    "27d0af945b96c5bf9fa928bf45fd1a6ce016632d": "0.3.1",  # NVIDIA-NeMo/RL tag v0.3.1
}
"""NeMo RL release of the commit an entry's ``source.config_source`` reads its run's configs at: the card's
``software.nemo-rl`` pin (before 0.4 the Megatron refit runs v0.3's own ``gather_params``,
``trainfit.compute.sync.NEMO_RL_V03_GATHER``; before 0.7 the driver pickles each shard per worker). An entry that
reads no config but whose source names the release (a table row labelled "NeMo-RL v0.3") states it in its own
``nemo_rl_release``, cited in ``nemo_rl_release_source``; that comes first (``nemo_rl_release_of``)."""


def nemo_rl_release_of(e: dict[str, Any]) -> str | None:
    """The NeMo RL release a row ran: the entry's ``nemo_rl_release``, else the release of the commit its
    ``source.config_source`` cites (``NEMO_RL_RELEASES``), else its performance-summary section's
    (``nemo_rl_summary_release``); None when none says."""
    if e.get("nemo_rl_release"):
        return str(e["nemo_rl_release"])
    config = str((e.get("source") or {}).get("config_source") or "")
    return next((v for c, v in NEMO_RL_RELEASES.items() if c in config), None) or nemo_rl_summary_release(e)


NEMO_RL_SUMMARY_PATH = "docs/about/performance-summary.md"


def nemo_rl_summary_release(e: dict[str, Any]) -> str | None:
    """The release a NeMo RL performance-summary row ran: the heading of the table's section names it (NVIDIA-NeMo/RL
    docs/about/performance-summary.md line 46: "## Nemo RL v0.4" @cff17f83bf30c4f9c757b5fe707b2c32db606411, "## Nemo
    RL v0.5" @9dbd9adc95a10f5946cceb36e1d5b31e2429e470, "## NeMo RL v0.6" @aea463dd2dad3c9dd39d92df3a1616647c8ff45a),
    recorded in each entry's ``source.section`` ("NeMo RL v0.5 / H100 BF16"). None for any other entry."""
    src = e.get("source") or {}
    if e.get("framework") != "nemo-rl" or src.get("path") != NEMO_RL_SUMMARY_PATH:
        return None
    m = re.match(r"NeMo RL v(\d+)\.(\d+)\b", str(src.get("section") or ""), flags=re.IGNORECASE)
    return f"{m.group(1)}.{m.group(2)}.0" if m else None


PRIME_RL_SETTINGS_COMMIT = "d8f290ef0358a804f1912bd29ea1b37cc56894b4"
PRIME_RL_GROUPED_LORA_RUNS = ("8dbd955a", "30bf494f")
"""Run commits (a baseline JSON's ``config.commit_sha``) after prime-rl removed MultiLoRALinear's compute-capability
check (PrimeIntellect-ai/prime-rl 53ddafcbeebb530133e0f6b6b68cc9af1938fef6, 2026-01-30, "remove cc check for grouped
mm"; both are its descendants): their adapted linears run grouped GEMMs on every GPU. Before it (the 2026-01-15/16
runs at ``PRIME_RL_SETTINGS_COMMIT``) only compute capability 9 did (multi_linear.py l.57-60 there); other GPUs ran
the per-adapter loop."""
PRIME_RL_LORA_ADAPTERS = 4
"""Adapters per MultiLoRALinear in prime-rl's benchmark: ``--max-concurrent-runs 4`` (benchmarks/scripts/
run_single_benchmark.py l.139-141 @d8f290ef0358a804f1912bd29ea1b37cc56894b4), one adapter slot a run."""


def prime_rl_lora_call_syncs(e: dict[str, Any], gpu_id: str) -> tuple[float, str]:
    """``lora.call_syncs`` of a prime-rl LoRA row, and its note: MultiLoRALinear.forward's host reads per call
    (``compute.inventory.Adapter.call_syncs``). Grouped GEMMs (``_run_lora_grouped_mm``): the ``assert offsets[-1] ==
    x.shape[0]`` and ``repeat_interleave`` without ``output_size``, 2. The per-adapter loop (``_run_lora_for_loop``,
    multi_linear.py l.20-35 @d8f290ef0358a804f1912bd29ea1b37cc56894b4): also every slice bound ``offsets[i]`` read back
    by ``__index__``, 1 for the first adapter and 2 for each other, 2 + (2n - 1) over n adapters.

    Effect (2026-12-04): the 19 prime-rl LoRA rows at S = 16,384 go from a signed median of -21.9 % to -18.4 %, the 16
    at 65,536 from -1.1 % to -0.2 %; full fine-tuning rows do not move (16k -10.7 %, 64k +5.0 %, SFT 8k -26.9 %).

    The rest of the family's short-sequence gap, checked and not modelled (null result, numbers from the plan's
    terms; PrimeIntellect-ai/prime-rl @d8f290ef0358a804f1912bd29ea1b37cc56894b4 unless stated):

    * Micro-batches: 2 per data-parallel rank at every S (``micro_batches`` 2, ``--data.fake.batch-size`` 2 x GPUs,
      benchmarks/scripts/run_single_benchmark.py l.80; FakeDataLoader one S-token ``arange`` sequence each, rl/data.py
      l.32-120), so per-micro-batch fixed work has the same count at 16k and 64k; no packing into more micro-batches.
    * The timer (rl/train.py l.268-447) holds no weight broadcast (before ``step_start_time``, l.222-226), no
      checkpoint (bench mode drops it, rl/config.py l.219-220), no ``torch.cuda.synchronize``; it ends after ``Tensors.compute_stats``
      (utils.py l.265-286: cat, an all-gather, five ``.item()`` and a ``tolist()`` of 2·S·world floats per per-token
      key): tens of milliseconds at most, linear in tokens. FSDP2 reshards after forward (config.py l.170-172; the
      untied head and final norm's unit not, model.py l.200-205), every decoder layer ``torch.compile``'d (``fullgraph`` False) inside
      ``checkpoint_wrapper``: all already in the plan.
    * No split into a per-token and a per-S² error fits: Qwen3-4B RL full 8xH100 FA3 (the LoRA syncs do not apply),
      published minus the plan's attention is 3.46 s at 16k and 10.81 s at 64k against the plan's other terms 3.16 s
      and 13.96 s: the rest would grow 3.1x for 4x the tokens (the plan's 4.4x), or, the rest scaled alike at both
      lengths (1.22x), the attention at 64k would have to run 1.46x the plan's FA3 rate (about 900 TFLOPS forward on an H100, 91 % of its dense peak). The scan is not
      under-priced: RL minus SFT, Qwen3-0.6B full 1xH100 16k, published 0.71 s, planned 0.87 s (scan 0.67 s).
    * Small models on one GPU behave as if host and device barely overlap: Qwen3-0.6B SFT full 1xH100 published 0.623 s
      (8k) and 1.282 s (16k); the plan's host and device seconds added give 0.59 s and 1.16 s (optimizer step aside), overlapped (the plan)
      0.385 s and 0.916 s. The SFT loop's own syncs are three per micro-batch at pass boundaries (sft/train.py l.255
      ``loss[loss_mask]``, l.262 ``torch.isnan``, l.284 ``loss.item()`` in a debug f-string), too few to serialise a
      pass; the host seconds per kernel of compiled layers under FSDP2 and ``checkpoint_wrapper`` are not measured.
    * LoRA minus full fine-tuning, Qwen3-0.6B 1xH100, after the syncs here: published 0.46 s (16k) and 0.98 s (64k),
      planned 0.21 s and 0.58 s. Left out: each graph break splits the layer's compiled graph (three fragments and
      eager ``cumsum`` / ``stack`` / ``eq`` / ``repeat_interleave`` kernels per adapted linear call) and the segments
      between syncs are not alike (``compute.training.synced_seconds`` spreads host and device evenly); with no overlap
      at all in the forward and recompute the plan would add at most the host's 0.32 s.
    * The family as a whole fits a step whose passes do not overlap host and device: each forward, recompute and
      backward priced at its host plus its device seconds (``synced_seconds`` with a sync after every kernel) takes the
      57 scored prime-rl rows from a median |error| of 11.2 % to 5.5 %: the dense S = 16,384 rows to -18 % .. +8 %
      (the Qwen3-30B-A3B rows keep -15 % .. -32 %), the 64k rows up by 1-3 points (to +12 % at most). No mechanism for
      such serialisation was established. A candidate for the transformers models (dense Qwen3 here): transformers'
      flash-attention path reads ``position_ids`` on the host in every attention call (``_is_packed_sequence``
      returns a CUDA bool that ``_flash_attention_forward`` branches on; read in transformers 4.57.6
      modeling_flash_attention_utils.py l.398-411 and l.600-632, and 5.24.0's docstring says it "forces a device sync
      in every layer"; prime-rl's lock pins 4.56.1, uv.lock l.3677-3678 @d8f290ef, not read), a sync and a graph break
      per layer in forward and recompute. Priced as such (``synced_seconds``, host and device spread evenly over a
      layer) it adds a few milliseconds a pass; it would matter only if the host seconds before each layer's first
      kernel (FSDP2's pre-forward hook, the checkpoint wrapper, the compiled graphs' guards) came after the sync,
      which the plan does not resolve. A profile of one prime-rl step on a lent GPU would tell."""
    from trainfit.catalog.gpus import resolve_gpu

    cc = resolve_gpu(gpu_id).compute_capability or ""
    run = ((e.get("measured") or {}).get("also") or {}).get("run_commit_sha") or ""
    grouped = run[:8] in PRIME_RL_GROUPED_LORA_RUNS or cc.split(".")[0] == "9"
    syncs = 2.0 if grouped else 2.0 + 2 * PRIME_RL_LORA_ADAPTERS - 1
    how = "grouped GEMMs" if grouped else f"the per-adapter loop over {PRIME_RL_LORA_ADAPTERS} adapters"
    return syncs, (f"lora.call_syncs {syncs:g}: prime-rl's MultiLoRALinear reads offsets back on the host in every"
                   f" forward call ({how}; compute capability {cc or '?'}; graph breaks under the layers' compile)")


PRIME_RL_FP32_PRECISION = (
    "prime-rl's FSDP2 trainer: fp32 parameter shards computed in bf16 (precision.weights fp32, compute bf16), fp32"
    " gradient shards and reduce-scatter (precision.grads fp32, full fine-tuning): setup_model builds the model in"
    " ModelConfig.optimization_dtype (src/prime_rl/trainer/model.py l.428 on the meta device, l.440 on the CPU;"
    " get_model loads it in that dtype, l.84-142), whose default is float32 (src/prime_rl/trainer/config.py"
    " l.216-221), and setup_fsdp shards it with MixedPrecisionPolicy(param_dtype=torch.bfloat16,"
    " reduce_dtype=reduce_dtype) (model.py l.156), reduce_dtype default float32 (config.py l.223-228); setup_fsdp runs"
    " on one GPU too (model.py l.457, a one-rank mesh); the benchmark command sets neither dtype"
    " (benchmarks/scripts/run_single_benchmark.py build_command l.103-155); LoRA rows keep the fp32 base (their A"
    " and B are created in the base layer's dtype, src/prime_rl/trainer/models/layers/lora/multi_linear.py l.86 / 100)"
    " @d8f290ef0358a804f1912bd29ea1b37cc56894b4")
"""prime-rl rows whose note reads the trainer's settings at ``PRIME_RL_SETTINGS_COMMIT``: the card's precision
(``grad_dtype_of`` for the gradients of full fine-tuning, ``map_train`` for the weights of every row)."""


TORCHTITAN_FP32_PRECISION = (
    "torchtitan's FSDP2 mixed precision: fp32 parameter shards gathered as bf16, gradients reduce-scattered in fp32"
    " into fp32 shards, AdamW states fp32 (precision.weights fp32, grads fp32): the model is built on the meta device"
    " and materialised with to_empty in torch's default float32 (train.py l.110, 164-171), and fully_shard gets"
    " MixedPrecisionPolicy(param_dtype=training.mixed_precision_param, reduce_dtype=training.mixed_precision_reduce)"
    " (torchtitan/parallelisms/parallelize_llama.py l.88-92, 320) with defaults 'bfloat16' / 'float32'"
    " (torchtitan/config_manager.py l.379-392) @9dec370ad26b5f8e9a7333a0e36165018262644b; the same policy hard-coded at"
    " @041336434916bdc0f88c1f89fda176fd3c2092e4 (parallelize_llama.py l.220-221) and the same defaults at"
    " @b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (torchtitan/config/configs.py l.94, 102; torchtitan/distributed/fsdp.py"
    " l.155)")
"""Why a torchtitan row (and a torchao row, which runs torchtitan) is planned with fp32 weights and fp32 gradients."""


PRIME_RL_ONE_RANK_FSDP = (
    "FSDP2 over one rank (the card's fsdp on one GPU): prime-rl's setup_model calls setup_fsdp whatever the world size"
    " (src/prime_rl/trainer/model.py l.457, fully_shard per decoder layer and the root, l.179-216, over the one-rank"
    " dp_shard_cp mesh) @d8f290ef0358a804f1912bd29ea1b37cc56894b4, so each unit's forward hooks run in every forward"
    " and recompute (compute/training.py); no collective, no sharding")
"""The note of a one-GPU prime-rl row planned as fsdp (``map_train``)."""


NANOTRON_FP32_MASTER = (
    "fp32 master weights and fp32 AdamW moments (precision.master_weights fp32): with accumulate_grad_in_fp32 nanotron"
    " wraps the optimizer in OptimizerFromGradientAccumulator (src/nanotron/helpers.py l.361-379), whose"
    " FP32GradientAccumulator copies the parameters the rank steps into one fp32 flat buffer"
    " (src/nanotron/optim/gradient_accumulator.py l.82-100) and hands torch AdamW those fp32 tensors"
    " (src/nanotron/optim/optimizer_from_gradient_accumulator.py l.40-46), at ZeRO-0 as at ZeRO-1 (there over the"
    " rank's shard) (huggingface/nanotron @c252843039cc167ff8d6894b87172af4637eb14b)")
NANOTRON_FP32_GRADS = (
    "fp32 gradient buffer and data-parallel reduce (precision.grads fp32): the Ultra-Scale Playbook sweep's base"
    " config sets optimizer.accumulate_grad_in_fp32: true (huggingface/nanotron examples/config_tiny_llama_bench.yaml"
    " l.55 @67c5ebb6a925cb47026b22013af8bd1bb6c46d93; scripts/scaling_benchmarks.py ACCUMULATE_GRAD_IN_FP32 = True"
    " l.13 @2411b022a75fb7f7561a1bb4166706da5e1b76de), so nanotron builds an FP32GradientAccumulator and a DDP hook (src/nanotron/helpers.py"
    " l.361-365, l.432-433) that adds each bf16 bucket into fp32 buffers and reduce-scatters (ZeRO-1) or all-reduces"
    " (ZeRO-0) those fp32 buffers (src/nanotron/optim/gradient_accumulator.py get_fp32_accum_hook l.317,"
    " l.366-377 @c252843039cc167ff8d6894b87172af4637eb14b)")
"""nanotron rows whose entry note states ACCUMULATE_GRAD_IN_FP32 True (the Ultra-Scale Playbook sweep)."""


def grad_dtype_of(e: dict[str, Any]) -> tuple[str | None, str | None]:
    """``precision.grads`` for a Megatron-family training entry, the dtype its gradient buffer holds and its
    data-parallel reduce-scatter / all-reduce moves (4 B per gradient in fp32), with the note citing the config;
    (None, None) where the source was not checked.

    * Megatron-LM bf16 (the 2024 table, core_r0.8.0): fp32, forced (module constant ``MEGATRON_LM_FP32_GRADS``).
    * Megatron-LM fp16 (2021, torch DDP): fp16 gradients all-reduced, planned as bf16 (2 B).
    * Megatron-Bridge performance tables: bf16, the perf recipes set ``grad_reduce_in_fp32 = False``.
    * Megatron-Bridge entries that state ``precision.grads`` (the canonical recipes of the model verification
      cards, whose recipe line the entry's note cites): that dtype.
    * NeMo 24.07 (Apex ``distributed_fused_adam``): the launcher's ``optim.grad_sync_dtype``, default fp32.
    * NeMo 2.0 DGX Cloud benchmarking scripts (``NEMO2_PERF_GRAD_REDUCE``): bf16 where performance_mode or the
      script sets ``grad_reduce_in_fp32 = False``, fp32 for DeepSeek-V3 (bf16_mixed's True stands).
    * NeMo 2.0 performance scripts with fp8: bf16 (``recipe.trainer.plugins.grad_reduce_in_fp32 = False``).
    * ms-swift Megatron-SWIFT: fp32, Megatron-LM's --bf16 rule (``MS_SWIFT_MEGATRON_FP32_GRADS``).
    * verl Megatron RL rows (``map_rl``): fp32 at the commits of ``VERL_MEGATRON_FP32_GRADS``.
    * nanotron (the Ultra-Scale Playbook sweep): fp32, accumulate_grad_in_fp32 (``NANOTRON_FP32_GRADS``).
    * NeMo RL DTensor (FSDP2) policy: fp32 at the releases of ``NEMO_RL_DTENSOR_PRECISION``, with its weights and
      optimizer (``map_rl``).
    * llm-foundry (Composer FSDP1) rows at amp_bf16 / mixed_precision DEFAULT: fp32, with fp32 weights
      (``llm_foundry_precision``, ``LLM_FOUNDRY_DEFAULT_MP``).
    * prime-rl (its FSDP2 trainer at ``PRIME_RL_SETTINGS_COMMIT``): fp32, reduce_dtype float32 over fp32 parameter
      shards, with fp32 weights (``map_train``, ``PRIME_RL_FP32_PRECISION``).
    * torchtitan (and torchao's training tables, which run torchtitan): fp32, FSDP2 reduce_dtype float32 over fp32
      parameter shards, with fp32 weights (``map_train``, ``TORCHTITAN_FP32_PRECISION``)."""
    fw, note, compute = e["framework"], e.get("note") or "", (e.get("precision") or {}).get("compute")
    if fw == "llm-foundry":
        prec, notes = llm_foundry_precision(e)
        return (prec["grads"], notes[0]) if prec else (None, None)
    if fw == "verl" and (e.get("train") or {}).get("strategy") == "megatron":
        where = next((f"{w} @{c}" for c, w in VERL_MEGATRON_FP32_GRADS.items() if c in note), None)
        return ("fp32", f"fp32 gradient buffer and reduce-scatter (precision.grads fp32): {where}") if where else (None, None)
    if fw == "ms-swift-megatron":
        return "fp32", MS_SWIFT_MEGATRON_FP32_GRADS
    if fw == "nanotron" and "ACCUMULATE_GRAD_IN_FP32 True" in note:
        return "fp32", NANOTRON_FP32_GRADS
    if fw == "prime-rl" and PRIME_RL_SETTINGS_COMMIT in note:
        return "fp32", PRIME_RL_FP32_PRECISION
    if fw == "torchtitan" and not (e.get("precision") or {}).get("weights"):
        return "fp32", TORCHTITAN_FP32_PRECISION
    if fw == "megatron" and compute in ("bf16", "fp8"):  # Megatron-LM FP8 runs with --bf16 (the rule keys on it)
        return "fp32", MEGATRON_LM_FP32_GRADS
    if fw == "megatron" and compute == "fp16":
        return "bf16", ("fp16 gradients all-reduced by torch DDP, planned as bf16 (2 B): accumulate_allreduce_grads_in_fp32"
                        " is off for --fp16 and needs --DDP-impl local (NVIDIA/Megatron-LM megatron/arguments.py l.157-161"
                        " @6985e58938d40ad91ac07b0fddcfad8132e1447e)")
    if fw == "megatron-bridge" and (e.get("precision") or {}).get("grads"):
        # the entry's recipe states its gradient dtype (DistributedDataParallelConfig.grad_reduce_in_fp32, e.g. the
        # canonical SFT recipes' cfg.ddp.grad_reduce_in_fp32 = True): precision.grads, its recipe file, line and
        # commit in precision.grads_source
        grads, where = e["precision"]["grads"], e["precision"].get("grads_source") or "the entry's recipe"
        what = "fp32 gradient buffer and reduce-scatter" if grads == "fp32" else "bf16 gradient reduce-scatter"
        return grads, f"{what} (precision.grads {grads}): grad_reduce_in_fp32 {grads == 'fp32'}, {where}"
    if fw == "megatron-bridge":
        return "bf16", ("bf16 gradient reduce-scatter (precision.grads bf16): the performance recipes set"
                        " grad_reduce_in_fp32 = False, NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/perf_recipes/_common.py"
                        " _benchmark_common l.72-74 and _perf_precision l.122 @067f987df03b8355b03192d88d70f1709fedf51a"
                        " (25.11 scripts: scripts/performance/configs/llama/llama3_llm_pretrain.py l.73-74 and the other"
                        " *_llm_pretrain.py @97ad8cc6fb27a58bb79ff51ce73897c3887aa2c6); the canonical recipes' True"
                        " (src/megatron/bridge/recipes/common.py l.82) does not apply")
    if fw != "nemo":
        return None, None
    for script, (commit, grads, where) in NEMO2_PERF_GRAD_REDUCE.items():
        if script in note and commit in note:
            what = "fp32 gradient buffer and reduce-scatter" if grads == "fp32" else "bf16 gradient reduce"
            return grads, f"{what} (precision.grads {grads}): {where} @{commit}"
    launcher = "NVIDIA/NeMo-Framework-Launcher"
    at = "@8325688d8345a5513660f0f8390f0482a721c009"
    script = re.search(r"examples/training/([\w/]+\.sh)", note)
    if launcher in note and e["kind"] == "pretrain":
        if script and script.group(1) in NEMO_2407_BF16_GRAD_SYNC:
            return "bf16", (f"bf16 gradient sync (precision.grads bf16): {launcher} examples/training/{script.group(1)}"
                            f" l.{NEMO_2407_BF16_GRAD_SYNC[script.group(1)]} passes"
                            f" +training.model.optim.grad_sync_dtype=bf16 {at}")
        if "nemotron_340b" in note:
            return "bf16", (f"bf16 gradient sync (precision.grads bf16): {launcher}"
                            f" launcher_scripts/conf/training/nemotron/nemotron_340b.yaml l.161 grad_sync_dtype: bf16 {at}")
        if script and script.group(1) in NEMO_2407_FP32_GRAD_SYNC:
            return "fp32", (f"fp32 gradient buffer and reduce-scatter (precision.grads fp32): {launcher}"
                            f" examples/training/{script.group(1)} and its yaml set no optim.grad_sync_dtype {at}, NeMo"
                            " passes the optimizer dtype fp32 (NVIDIA/NeMo nemo/collections/nlp/models/language_modeling/"
                            "megatron_base_model.py l.791-792 @8e3d65dcfe3504689bfc5b6e67d502780aacad41) and Apex"
                            " DistributedFusedAdam syncs gradients in it (grad_sync_dtype = dtype, its contiguous grad"
                            " buffers in grad_sync_dtype: NVIDIA/apex apex/contrib/optimizers/distributed_fused_adam.py"
                            " l.574-575, l.1091-1095 @810ffae374a2b9cb4b5c5e28eaeca7d7998fca0c, NeMo 24.07's APEX_TAG)")
        return None, None
    if e["kind"] == "sft_full" and "NeMo 24.07" in note:
        return "bf16", (f"bf16 gradient sync (precision.grads bf16): {launcher} launcher_scripts/conf/peft/llama/sft.yaml"
                        f" l.258 grad_sync_dtype: bf16 {at} (distributed_fused_adam)")
    if "NeMo 2.0" in note and compute == "fp8":
        return "bf16", ("bf16 gradient reduce (precision.grads bf16): the NeMo 2.0 performance scripts set"
                        " recipe.trainer.plugins.grad_reduce_in_fp32 = False with fp8 (NVIDIA/NeMo"
                        " scripts/llm/performance/pretrain_gpt3_175b.py l.78-80 and the other pretrain_*.py"
                        " @7192a2c944c48ab253f3f711ee52fe2dc986a3bb; scripts/performance/utils.py set_primary_perf_configs"
                        " l.351 @2b03b748bb7d28e4e382df3d085078c6146d174e); the recipes' bf16_mixed default True"
                        " (nemo/collections/llm/recipes/precision/mixed_precision.py l.30) does not apply")
    return None, None


PACKED_LENGTHS = HERE / "data" / "packed_sample_lengths.json"
"""Measured tokens per packed SQuAD sample per fine-tuning pipeline and tokenizer (``packed_sample_lengths.py``)."""


def packed_squad(e: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``batch.packed_sample_tokens`` / ``batch.packed_sample_length_cv`` for a fine-tuning row that packs SQuAD
    v1.1 (NeMo 24.07's, NeMo 2.0's ``llm.finetune`` (pipeline nemo-2.0-25.04: the DGX Cloud ft_llama3 rows) and
    Megatron-Bridge's SFT / LoRA tables): the ``PACKED_LENGTHS`` entry measured for the row's framework, model and
    row length (attention then runs per sample: ``cu_seqlens``, Transformer Engine
    ``thd``), else nothing."""
    if e["kind"] not in ("sft_full", "sft_lora") or not e["batch"].get("packed"):
        return {}, []
    doc = json.loads(PACKED_LENGTHS.read_text())
    got = next((x for x in doc["entries"] if x["framework"] == e["framework"] and e["model"] in x["models"]
                and x["pack_tokens"] == e["batch"].get("seq_len")), None)
    if got is None:
        return {}, []
    fields = {"packed_sample_tokens": round(got["mean_tokens"]), "packed_sample_length_cv": got["cv"]}
    note = (f"packed SQuAD v1.1: {got['mean_tokens']} tokens per sample, cv {got['cv']} ({got['pipeline']} template,"
            f" {got['tokenizer']}; measured on the {got['split'].split(' (')[0]} split,"
            " benchmarks/packed_sample_lengths.py): attention per sample")
    return fields, [note]


def packed_published(e: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``batch.packed_sample_tokens`` / ``batch.packed_sample_length_cv`` for a fine-tuning row whose entry names the
    dataset it packs (``batch.packed_dataset``) where a framework publishes that dataset's sample-length statistic
    (``PACKED_LENGTHS``' ``published`` list: ms-swift's LongAlpaca-12k table, Qwen tokenizer, every sample): applied
    at the row lengths the data admits (``pack_tokens``: where max_length drops long samples the statistic must still
    describe, or bound, the rest), else nothing."""
    name = e["batch"].get("packed_dataset")
    if not name or e["kind"] not in ("sft_full", "sft_lora") or not e["batch"].get("packed"):
        return {}, []
    doc = json.loads(PACKED_LENGTHS.read_text())
    got = next((x for x in doc.get("published", []) if x["dataset"] == name and x["framework"] == e["framework"]
                and e["model"] in x["models"]), None)
    row = (got or {}).get("pack_tokens", {}).get(str(e["batch"].get("seq_len")))
    if got is None or row is None or not row["applied"]:
        return {}, []
    src = got["source"]
    fields = {"packed_sample_tokens": round(got["mean_tokens"]), "packed_sample_length_cv": got["cv"]}
    note = (f"packed {name}: {got['mean_tokens']} tokens per sample, cv {got['cv']} (all {got['samples']:,} samples,"
            f" {src['repo']} {src['path']} l.{src['line']} @{src['commit']}; benchmarks/data/packed_sample_lengths.json"
            f" published): attention per sample; {got['packing']}")
    return fields, [note]


FOAK_FAST_LOSS_MISMATCH = (
    "fms-acceleration's fast_loss is not the card's loss: with fast_loss true the plugin keeps its custom-loss rules"
    " (FILTER_MAP, plugins/fused-ops-and-kernels/src/fms_acceleration_foak/framework_plugin_fast_kernels.py l.73-78;"
    " models/mistral.py l.124-128, models/mixtral.py l.101-105), which on transformers >= 4.46 swap the model's loss"
    " for FastForCausalLMLoss (kernels/unsloth/cross_entropy_loss.py l.299-324): logits.float() and the shifted"
    " .contiguous() copy, as transformers' own loss, then Unsloth's Triton cross-entropy (one fused kernel, an fp32"
    " logsumexp per row, the gradient written into the fp32 logits in place, l.192-258), foundation-model-stack/"
    "fms-acceleration @24bdadb228e2d55bc0c69deec034b86a73da6917. No loss setting of the card matches (loss.kernel"
    " flash_attn, the nearest fused cross-entropy, has no fp32 copy): planned with transformers' eager loss, a"
    " mismatch")
"""The loss of the fms-acceleration rows run with the ``foak-fast-kernels`` framework config."""


def fused_kernels_notes(e: dict[str, Any]) -> list[str]:
    """The plan's note for a row whose fused kernels are planned as compile (``plan/time.py fused_kernels``), worded
    by the framework that runs them; fms-acceleration's FOAK rows also record their loss mismatch."""
    fw = e["framework"]
    if fw in MEGATRON_FRAMEWORKS:
        return ["Megatron-Core / Transformer Engine fused kernels (norm + linear, RoPE, SwiGLU, cross-entropy)"
                " planned as compile (plan/time.py fused_kernels)"]
    if fw == "fms-hf-tuning":
        notes = ["fms-acceleration's fused-ops-and-kernels plugin (Triton kernels vendored from Unsloth: RMSNorm,"
                 " RoPE, cross-entropy, or Liger's) planned as compile (plan/time.py fused_kernels)"]
        return notes + ([FOAK_FAST_LOSS_MISMATCH] if "framework_config foak-fast-kernels (" in e.get("note", "")
                        else [])
    if fw == "nemo-automodel":
        return ["Transformer Engine layers (NeMo Automodel backend te: linear, RMSNorm) planned as compile"
                " (plan/time.py fused_kernels)"]
    return [f"{fw}'s fused kernels (the row's fused_kernels) planned as compile (plan/time.py fused_kernels)"]


def map_train(e: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The run card for a published training entry (Unmapped with the reasons otherwise)."""
    blockers = parallel_blockers(e["parallel"]) + ([e["card_cannot_state"]] if e.get("card_cannot_state") else [])
    notes: list[str] = []
    try:
        model, n = resolve_model(e["model"], e.get("model_config"), e["batch"].get("seq_len"), e.get("attention"))
        notes += n
        if e.get("mtp"):
            # the recipe trains the model's multi-token-prediction module (e.g. NVIDIA/NeMo
            # nemo/collections/llm/recipes/deepseek_v3.py pretrain_recipe use_mtp; each entry's note cites it): model.mtp
            model = {**model, "mtp": True} if isinstance(model, dict) else {"id": model, "mtp": True}
            notes.append("model.mtp: the recipe trains the MTP module")
    except Unmapped as u:
        if u.status == "not_representable" or blockers:
            raise Unmapped("not_representable", blockers + u.reasons) from None
        raise
    if blockers:
        raise Unmapped("not_representable", blockers)
    compute = e["precision"]["compute"]
    if compute == "fp16" and e["framework"] in MEGATRON_FRAMEWORKS:
        # Megatron-LM --fp16 (2021 scaling runs): fp16 weights/activations, fp32 main grads and master weights, a
        # loss scale; the same tensor-core rate and byte counts as bf16 mixed precision (the loss scaling is not timed)
        compute = "bf16"
        notes.append("Megatron --fp16 mixed precision planned as bf16 (same tensor-core rate and bytes)")
    fp16_card = (compute == "fp16" and bool(e["precision"].get("fp16_source"))
                 and e["framework"] in HF_TRAINER_FRAMEWORKS + DEEPSPEED_FP16_FRAMEWORKS)
    if fp16_card:
        # the entry's run holds its model in float16 (torch_dtype float16, with or without the Trainer's --fp16 autocast;
        # its precision.fp16_source cites the recipe): the card's own precision.compute fp16
        notes.append(f"precision.compute fp16: {e['precision']['fp16_source']}")
    if compute not in ("bf16", "fp8", "fp4") and not fp16_card or (compute == "fp8" and e["framework"] not in FP8_RECIPES
                                                 and not e["precision"].get("fp8_recipe")):
        raise Unmapped("skipped", [f"{compute} compute not modelled for {e['framework']}"])
    gpu, n = resolve_gpu_id(e["gpu"])
    notes += n
    hw, n = hardware(gpu, e["gpus"], e["gpus_per_node"], e["nodes"], e.get("inter_node_gbps_per_gpu"),
                     e.get("interconnect"))
    notes += n
    hw, n = host_of(e, hw)
    notes += n
    ckpt, n = checkpointing(e.get("activation_checkpointing"), e["framework"], (e.get("measured") or {}).get("also"))
    notes += n
    if (e.get("sac_attention_recomputed") and ckpt.get("gradient_checkpointing") == "selective"
            and ckpt.get("selective_checkpointing", "op") == "op"):
        # the entry cites its framework's SDPA backend order and per-op save list at the run's commit: the attention
        # op it dispatches to is not saved, so the policy re-runs it (card parallel.sac_saves_attention false)
        ckpt = {**ckpt, "sac_saves_attention": False}
        notes.append("parallel.sac_saves_attention false: the per-op policy does not save the attention op the run's"
                     " SDPA dispatches to (the entry's sac_attention_recomputed)")
    if not e["batch"].get("micro_batch_size"):
        # e.g. Megatron-LM's 2024 H100 scaling table: pipeline rows without a published micro-batch (or virtual
        # stages), whose bubble depends on them
        raise Unmapped("skipped", ["micro-batch size not published (with pipeline stages the bubble depends on it)"])
    b = dict(e["batch"])
    dims = e["parallel"]
    # Ulysses ranks split one sequence (DeepSpeed-Ulysses, arXiv:2309.14509 section 3): like ring context parallel
    # they are not data-parallel ranks
    dp = max(1, e["gpus"] // ((dims.get("tp") or 1) * (dims.get("pp") or 1) * (dims.get("cp") or 1)
                              * (dims.get("sequence_parallel_ulysses") or 1)))
    if b.get("global_batch_size") and b.get("micro_batch_size"):
        ga = max(1, round(b["global_batch_size"] / (b["micro_batch_size"] * dp)))
        if ga != (b.get("grad_accum") or 1):
            notes.append(f"grad accumulation {ga} from the global batch {b['global_batch_size']} / (micro-batch"
                         f" {b['micro_batch_size']} x {dp} data-parallel ranks)")
        b["grad_accum"] = ga
    elif not b.get("grad_accum"):
        notes.append("grad accumulation not stated: 1")
    strategy = STRATEGIES[e["parallel"]["strategy"]]
    if e["parallel"]["strategy"] == "megatron-dist-opt":
        notes.append("Megatron distributed optimizer planned as ZeRO-1")
    if strategy == "zero2" and e["framework"] in FSDP_VERSIONS:
        # torch FSDP SHARD_GRAD_OP recorded as zero2 (llm-foundry's table): the card's fsdp_grad_op, not DeepSpeed's
        # ZeRO-2, whose unset overlap_comm would reduce on the compute stream (plan/time.py deepspeed_overlap_comm)
        strategy = "fsdp_grad_op"
        notes.append("FSDP SHARD_GRAD_OP (recorded as zero2) planned as fsdp_grad_op")
    one_rank_fsdp = False
    if hw["gpus_per_node"] * hw["nodes"] == 1:
        if strategy == "fsdp" and e["framework"] == "prime-rl" and PRIME_RL_SETTINGS_COMMIT in (e.get("note") or ""):
            notes.append(PRIME_RL_ONE_RANK_FSDP)  # fully_shard over one rank: its hooks run in every forward
            one_rank_fsdp = True  # and its unsharded units and reduce buffers exist (parallel.fsdp_one_rank)
        elif strategy in ("zero1", "zero2", "zero3") and e.get("deepspeed") is not None:
            # DeepSpeed ZeRO over one rank (the entry's deepspeed section): the engine still keeps fp32 master weights
            # and fp32 AdamW moments beside the compute-dtype parameters, which a single-GPU card does not
            notes.append(f"DeepSpeed {strategy} on one rank (the entry's deepspeed section): planned as {strategy}")
        else:
            strategy = "single"
    overlap_gather = overlap_param_gather_of(e, dp) if strategy == "zero1" else None
    if overlap_gather:
        notes.append(overlap_gather)
    grad_rule = grad_dtype_of(e)
    # nanotron's ZeRO-1 with fp32 accumulation (the Ultra-Scale Playbook sweep) all-reduces after the backward
    reduce_after = strategy == "zero1" and grad_rule[1] == NANOTRON_FP32_GRADS
    if reduce_after:
        from trainfit.compute.collectives import NANOTRON_ZERO1_REDUCE
        notes.append(f"parallel.grad_reduce_after_backward: {NANOTRON_ZERO1_REDUCE}")
    elif e["parallel"].get("grad_reduce_after_backward") and strategy in ("ddp", "zero1", "zero2"):
        # the entry's framework all-reduces the whole gradient once after the backward, cited in
        # parallel.grad_reduce_after_backward_source (DeepSpeed's engine without ZeRO: buffered_allreduce_fallback)
        reduce_after = True
        notes.append("parallel.grad_reduce_after_backward: "
                     + e["parallel"].get("grad_reduce_after_backward_source", "the entry's framework"))
    # ... and, ZeRO-0 or ZeRO-1, adds every micro-batch's bf16 gradients into its fp32 buffer in a pass of its own
    accumulation_pass = grad_rule[1] == NANOTRON_FP32_GRADS
    if accumulation_pass:
        notes.append("parallel.grad_accumulation_pass: nanotron's FP32GradientAccumulator adds each micro-batch's bf16"
                     " gradients into the fp32 buffer, one add_ per parameter after the backward"
                     " (src/nanotron/optim/gradient_accumulator.py l.204-223 @c252843039cc167ff8d6894b87172af4637eb14b)")
    kind = e["kind"]
    scope = {"sft_lora": "lora", "sft_qlora": "qlora"}.get(kind, "full")
    peft_method = e.get("peft_method") or {}
    if kind == "sft_lora" and peft_method.get("scope") in PEFT_METHOD_SCOPES:
        # the entry's PEFT method as its adapter config states it (``peft_method.scope``, cited in the entry's note):
        # the card's scope of that name (DoRA reads the lora section; (IA)^3 and prompt tuning their own sections)
        scope = peft_method["scope"]
        notes.append(f"PEFT method {scope} (the entry's adapter config): card scope {scope}")
    if "Int4" in e["model"]:
        notes.append("GPTQ int4 base planned as bitsandbytes nf4 (QLoRA)")
    mp, n = model_parallel_section(e["parallel"], num_layers=model_layers(model), framework=e["framework"],
                                   shape=e.get("model_config"))
    notes += n
    balanced_why = balanced_routing_reason(e)
    if balanced_why and model_is_moe(model):
        # routed balanced by construction: every EP rank the mean (compute.moe_time.busiest_rank_load_factor not
        # applied); otherwise the card's default, a trained router on real tokens
        mp["moe_router_load"] = "balanced"
        notes.append(f"parallel.moe_router_load balanced: {balanced_why}")
    if e["framework"] == "nanotron":
        # nanotron's tensor-parallel linears, embedding and loss (spec/enums.py TensorParallelImpl: Megatron-Core's in
        # memory, per-op in time), not torch's DTensor plan
        mp["tensor_parallel_impl"] = "nanotron"
        notes.append("tensor_parallel_impl nanotron (TensorParallelColumnLinear saving its input's sequence shard,"
                     " TensorParallelEmbedding, _ShardedCrossEntropy; src/nanotron/parallel/tensor_parallel/"
                     "functional.py l.31-107, 213-216, nn.py l.277-299 @c252843039cc167ff8d6894b87172af4637eb14b)")
    if e["framework"] in MEGATRON_FRAMEWORKS:
        # Megatron-Core's layers and loss (spec/enums.py TensorParallelImpl), not torch's DTensor plan
        mp["tensor_parallel_impl"] = "megatron"
        notes.append("tensor_parallel_impl megatron (Megatron-Core ColumnParallelLinear/RowParallelLinear,"
                     " VocabParallelEmbedding, vocab_parallel_cross_entropy)")
        if "moe_launch" not in mp and e["framework"] in MOE_LAUNCH_FUSED and model_is_moe(model):
            # the framework's MoE recipes fuse the router / graph the dispatcher (MOE_LAUNCH_FUSED cites them)
            mp["moe_launch"] = "fused"
            notes.append("parallel.moe_launch fused: Megatron-Bridge's MoE recipes set moe_router_fusion True"
                         " (and cuda_graph_scope moe_router / moe_preprocess)")
        container = next((c for c in MEGATRON_CORE_COMBINE_KEEPS_EXPERT_OUTPUT if e.get("note", "").startswith(c)), None)
        if container:
            mp["moe_probs_in_experts"] = False
            notes.append(f"moe_probs_in_experts False: {MEGATRON_CORE_COMBINE_KEEPS_EXPERT_OUTPUT[container]}")
    if (e["framework"] == "torchtitan" and not e.get("compile")
            and (dims.get("tp") or 1) * (dims.get("pp") or 1) > 1):
        # torchtitan's DTensor plan shards the model's own nn.Linear layers and runs its nn.RMSNorm, SwiGLU and RoPE as
        # eager ops when compile is off (plan.time.fused_kernels cites the lines): no Transformer Engine kernels
        mp["model_parallel_kernels"] = "eager"
        notes.append("parallel.model_parallel_kernels eager: torchtitan's DTensor plan over the model's own eager"
                     " modules, compile off")
    fused = (e["framework"] in MEGATRON_FRAMEWORKS or bool(e.get("fused_kernels"))) and not e.get("compile")
    if fused:
        notes.extend(fused_kernels_notes(e))
    if strategy in ("fsdp", "hsdp", "fsdp_grad_op"):
        version, n = fsdp_version_of(e["framework"], e["parallel"]["strategy"])
        mp.update({"fsdp_version": version} if version else {})
        notes.append(n)
        if version == "fsdp1" and strategy == "fsdp" and e["framework"] in FSDP1_NO_SYNC_FRAMEWORKS:
            mp["fsdp_no_sync"] = True  # the framework's trainer accumulates under FSDP1 no_sync (plan.fsdp_no_sync)
            notes.append(f"parallel.fsdp_no_sync: {FSDP1_NO_SYNC_FRAMEWORKS[e['framework']]}")
        units, n = adapter_units_of(e, scope=scope, version=version)
        mp.update({"fsdp_adapter_units": True} if units else {})
        notes.extend([n] if n else [])
    method = e.get("method") or "sft"
    if method not in ("sft", *PREF_METHODS):
        raise Unmapped("skipped", [f"method '{method}': allowed sft, {', '.join(PREF_METHODS)}"])
    card: dict[str, Any] = {
        "model": model, "method": method, "scope": scope, "hardware": hw,
        "parallel": {"strategy": strategy, "offload": e["parallel"].get("offload") or "none",
                     **ckpt, "compile": bool(e.get("compile")) or fused, **mp,
                     **({"overlap_param_gather": True} if overlap_gather else {}),
                     **({"grad_reduce_after_backward": True} if reduce_after else {}),
                     **({"fsdp_one_rank": True} if one_rank_fsdp else {}),
                     **({"grad_accumulation_pass": True} if accumulation_pass else {}),
                     # the entry's run streams saved activations to host RAM (torchtune enable_activation_offloading,
                     # cited in its note): parallel.activation_offload
                     **({"activation_offload": True} if e.get("activation_offload") else {}),
                     # Megatron-Core cpu_offloading of the first N layers' activations (cpu_offloading_num_layers,
                     # cpu_offloading_weights false; the entry's note cites the recipe):
                     # parallel.activation_offload_layers
                     **({"activation_offload": True, "activation_offload_layers": int(e["activation_offload_layers"])}
                        if e.get("activation_offload_layers") else {}),
                     # the entry's ZeRO-1 groups and parameter hand-back as its framework's code builds them (cited in
                     # its note; InternEvo's parallel.zero1 and HybridZeroOptimizer.broadcast_params)
                     **{k: e["parallel"][k] for k in ("zero1_shard_size", "zero1_param_sync") if e["parallel"].get(k)}},
        "batch": {"micro_batch_size": b["micro_batch_size"], "seq_len": b["seq_len"],
                  "grad_accum": b.get("grad_accum") or 1},
        "attention": attention_of(e),
        **attention_kernel_of(e, gpu, notes),
        "precision": {"optimizer": e["precision"]["optimizer"],
                      "optimizer_in_backward": bool(e["precision"].get("optimizer_in_backward"))},
    }
    if e["parallel"].get("overlap_comm") is not None:
        # DeepSpeed's zero_optimization.overlap_comm as the entry's config states it (cited in its note); unstated,
        # the card leaves DeepSpeed's default (true at stage 3 only)
        card["deepspeed"] = {"overlap_comm": e["parallel"]["overlap_comm"]}
        notes.append(f"deepspeed.overlap_comm {str(e['parallel']['overlap_comm']).lower()} (the entry's DeepSpeed config)")
    if e.get("deepspeed"):
        # the run's zero_optimization settings as its DeepSpeed JSON states them ("auto": what the HF Trainer fills),
        # cited in the entry's note: the card's deepspeed section (bucket sizes, persistence, overlap_comm)
        card["deepspeed"] = {**card.get("deepspeed", {}), **e["deepspeed"]}
        notes.append("deepspeed: " + ", ".join(f"{k} {v}" for k, v in e["deepspeed"].items() if k != "overlap_comm")
                     + " (the entry's DeepSpeed config)")
    if e["precision"].get("optimizer_impl"):
        # the entry's AdamW implementation (fused | foreach | for_loop | apex_distributed) where its framework's code or
        # config at the run's commit is not the card's fused default; the entry's note cites it
        # (torch.optim.AdamW with neither fused= nor foreach= runs foreach on CUDA tensors: pytorch/pytorch
        # torch/optim/adamw.py adamw() @002d2f0bb40cf08beb74bce80f52ce4f2eda46a0, "we default to foreach and
        # pass False to use_fused")
        impl = e["precision"]["optimizer_impl"]
        card["precision"]["optimizer_impl"] = impl
        notes.append(f"AdamW {impl} (the entry's framework at its commit, cited in its note)")
    if e["precision"].get("weights"):
        # the dtype the trained parameters are held in where the entry's framework code sets it, its file, lines and
        # commit in precision.weights_source (accelerate >= 0.30 under FSDP1 with mixed precision upcasts a bf16-loaded
        # model's FlatParameters to fp32: fp32 shards gathered as bf16, fp32 gradients and AdamW moments)
        card["precision"]["weights"] = e["precision"]["weights"]
        notes.append(f"weights {e['precision']['weights']} (precision.weights): "
                     f"{e['precision'].get('weights_source') or 'the entry recipe'}")
    if e["precision"].get("optimizer_states"):
        # the AdamW moments' dtype where the entry's recipe sets it (Megatron-Core's precision-aware optimizer:
        # OptimizerConfig.exp_avg_dtype / exp_avg_sq_dtype, e.g. bf16 in Megatron-Bridge's DeepSeek-V3 recipe);
        # its file, lines and commit in precision.optimizer_states_source
        states = e["precision"]["optimizer_states"]
        card["precision"]["optimizer_states"] = states
        notes.append(f"AdamW moments {states} (precision.optimizer_states): "
                     f"{e['precision'].get('optimizer_states_source') or 'the entry recipe'}")
        # an entry's stated master copy (NeMo's distributed_fused_adam keeps none when its dtype is the model's) is
        # planned from its optimizer_impl apex_distributed, whose rule gives it (plan.terms.zero_master_states)
    if (e.get("optimizer_steps") or {}).get("value") is False:
        # the entry's timed loop never calls its optimizer's step() (``optimizer_steps.source`` cites the lines), so
        # the lazily built AdamW moments never exist: the card plans SGD at torch's default momentum 0, which keeps no
        # state (memory.optimizer) and prices a memory-bound update in place of the step the run never makes: an
        # over-price the card cannot remove (no 'no optimizer step' setting), 0.070 s a step for the 1-GPU full
        # fine-tuning rows (0.37 % of the planned step), 0.035 s / 0.018 s on 2 / 4 GPUs, 0.0001 s for LoRA
        card["precision"]["optimizer"] = "sgd"
        card["precision"].pop("optimizer_impl", None)
        notes.append("precision.optimizer sgd: the entry's loop never steps its optimizer, so it holds no optimizer"
                     " state (the entry's optimizer_steps)")
    if e["precision"].get("nf4_compute_dtype") and scope == "qlora":
        # the dtype the 4-bit base's GEMMs run in, as the entry's note reads it from the framework's model loading
        # (bitsandbytes' Linear4bit takes an fp32 input's dtype: spec.enums.Nf4ComputeDtype)
        card["precision"]["nf4_compute_dtype"] = e["precision"]["nf4_compute_dtype"]
        notes.append(f"precision.nf4_compute_dtype {e['precision']['nf4_compute_dtype']} (the entry's model loading,"
                     " cited in its note)")
    grads, grads_note = grad_rule if scope == "full" else (None, None)
    if grads:
        card["precision"]["grads"] = grads
        notes.append(grads_note)
    if accumulation_pass and scope == "full":
        # nanotron's FP32GradientAccumulator keeps an fp32 copy of the parameters the rank's optimizer steps (the
        # ZeRO-1 shard, or all of them at ZeRO-0) and hands the optimizer those fp32 copies, so its AdamW moments are
        # fp32 too: precision.master_weights fp32
        card["precision"]["master_weights"] = "fp32"
        notes.append(NANOTRON_FP32_MASTER)
    if fp16_card:
        card["precision"]["compute"] = "fp16"
    if e["precision"].get("master_weights") and e["framework"] in DEEPSPEED_FP16_FRAMEWORKS:
        # the fp32 master copy the entry's optimizer keeps beside fp16 weights (DeepSpeed's FP16_Optimizer), cited in
        # precision.master_weights_source; other frameworks' stated master copy is planned from their optimizer_impl
        # (NeMo's apex_distributed: plan.terms.zero_master_states), not passed through
        card["precision"]["master_weights"] = e["precision"]["master_weights"]
        notes.append(f"master weights {e['precision']['master_weights']} (precision.master_weights): "
                     f"{e['precision'].get('master_weights_source') or 'the entry recipe'}")
    if compute == "fp8":
        recipe = e["precision"].get("fp8_recipe")
        card["precision"].update(compute="fp8", fp8_recipe=recipe or FP8_RECIPES[e["framework"]])
        notes.append(f"fp8: {recipe} scaling (the entry's recipe)" if recipe else
                     f"fp8: {FP8_RECIPES[e['framework']]} scaling ({e['framework']}'s recipe)")
        if e["precision"].get("fp8_params"):  # the entry's config states fp8 primary weights (NeMo fp8_params)
            card["precision"]["fp8_params"] = True
            notes.append("fp8 primary weights: precision.fp8_params (the config's fp8_params: TE fp8_model_init,"
                         " Megatron fp8 parameter all-gather)")
        if e["precision"].get("fp8_all_gather"):  # the command / config sets enable_fsdp_float8_all_gather (cited)
            card["precision"]["fp8_all_gather"] = True
            notes.append("torchao float8 FSDP2 all-gather: precision.fp8_all_gather (the command's"
                         " enable_fsdp_float8_all_gather)")
        if e["precision"].get("fp8_attention"):  # the config sets fp8_dot_product_attention (the entry cites it)
            card["precision"]["fp8_attention"] = True
            notes.append("fp8 attention: precision.fp8_attention (the config's fp8_dot_product_attention: TE fp8_dpa)")
    if e["precision"].get("fp8_activation_input_store"):  # the config sets activation_func_fp8_input_store (cited)
        card["precision"]["fp8_activation_input_store"] = True
        notes.append("fp8 SwiGLU input store: precision.fp8_activation_input_store (the config's"
                     " activation_func_fp8_input_store: the fused SwiGLU keeps fc1's output as float8_e4m3fn)")
    if e["precision"].get("fp8_param_transpose_cache") is False:  # the config disables it under TE 1.x (cited)
        card["precision"]["fp8_param_transpose_cache"] = False
        notes.append("fp8 primary weights' transpose made in each linear's backward and freed:"
                     " precision.fp8_param_transpose_cache false (the config's disable_parameter_transpose_cache: True"
                     " under Transformer Engine 1.x)")
    if compute == "fp4":  # the entry's fp4 recipe (nvfp4), required as on the card
        card["precision"].update(compute="fp4", fp4_recipe=e["precision"].get("fp4_recipe"))
        notes.append(f"fp4: {e['precision'].get('fp4_recipe')} scaling (the entry's recipe)")
        if e["precision"].get("fp4_params"):  # the entry's config states NVFP4 primary weights (fp4_param_gather)
            card["precision"]["fp4_params"] = True
            notes.append("NVFP4 primary weights: precision.fp4_params (the config's fp4_param / fp4_param_gather)")
    for key in ("bf16_first_layers", "bf16_last_layers"):  # the recipe's decoder layers kept bf16 (cited in the entry)
        if compute in ("fp8", "fp4") and e["precision"].get(key):
            card["precision"][key] = e["precision"][key]
            notes.append(f"precision.{key} {e['precision'][key]}: those decoder layers' linears stay bf16")
    if e.get("loss_chunked"):
        # torchtune CEWithChunkedOutputLoss: the output projection and the fp32 upcast in chunks, no full fp32
        # logits; the card's chunked loss (liger's fused kernel) is the nearest it states
        card["loss"] = {"chunked": True}
        if e.get("loss_kernel"):
            # the entry's chunked head by name, read from its framework's code at the run's commit (cited in its
            # note): prime-rl's RL trainer runs its own vocabulary-chunked log-prob head (loss.kernel prime_rl)
            card["loss"]["kernel"] = e["loss_kernel"]
            notes.append(f"chunked log-probs planned as loss.chunked, loss.kernel {e['loss_kernel']} (the entry's head)")
        else:
            notes.append("chunked cross-entropy (the entry's loss computes the logits in chunks) planned as loss.chunked")
    elif e.get("loss_kernel") == "flash_attn":
        # the entry's loss is flash-attn's CrossEntropyLoss over the full logits, as its framework's code at the run's
        # commit builds it (cited in the entry's note; InternEvo's FlashGPTLMLoss: internlm/model/loss.py l.27-33
        # @c18bec9361684189aadf6ffb724f9dfe48288eb0, inplace_backward=True): loss.kernel flash_attn
        card["loss"] = {"kernel": "flash_attn",
                        **({"inplace_backward": True} if e.get("loss_inplace_backward") else {})}
        notes.append("loss.kernel flash_attn" + (", inplace_backward" if e.get("loss_inplace_backward") else "")
                     + " (the entry's loss: flash-attn's CrossEntropyLoss over the full logits)")
    tp_loss = (card.get("parallel") or {}).get("tensor_parallel", 1) > 1 or (
        (card.get("parallel") or {}).get("tensor_parallel_impl") == "megatron")
    if e.get("loss_compiled") and e.get("compile") and not e.get("loss_chunked") and tp_loss:
        # the card plans loss.compiled only without tensor parallel or Megatron-Core's loss (spec/card.py); as the
        # torchtitan importer does (export/importers.py), the eager loss is planned with a note
        notes.append("loss_compiled: the compiled loss-parallel cross-entropy under tensor parallel (or Megatron-Core's"
                     " vocab-parallel loss) is not modelled; planned as the eager loss")
    elif e.get("loss_compiled") and e.get("compile") and not e.get("loss_chunked"):
        # torchtitan from bbb1b616 (2025-04-02) compiles its cross-entropy with training.compile; the entry cites
        # loss.py and the train loop at the run's commit (card loss.compiled, memory.logits.compiled_ce_bytes)
        # OLMo-core compiles its cross_entropy_loss (z-loss included) with TrainerConfig.compile_loss
        # (allenai/OLMo-core src/olmo_core/train/trainer.py l.379-380 @4f2c8ef59f9268b7f3aae0c127b52a45d4c1c706; the
        # entry cites its script's compile_loss=True)
        card["loss"] = {**(card.get("loss") or {}), "compiled": True}
        notes.append("loss.compiled: the run's OLMo-core compiles its loss (TrainerConfig.compile_loss, the entry's"
                     " loss_compiled)" if e["framework"] == "olmo-core" else
                     "loss.compiled: the run's torchtitan compiles the cross-entropy with training.compile (the entry's"
                     " loss_compiled)")
    if e.get("loss_upcast") is not None and e["loss_upcast"]["value"] is False:
        # the model's own cross-entropy on the compute-dtype logits outside autocast, as the entry's source states it
        # (``loss_upcast.value`` -> the card's ``loss.upcast``, cited in ``loss_upcast.source``): memory only
        card["loss"] = {**(card.get("loss") or {}), "upcast": False}
        notes.append("loss.upcast false: the model's own cross-entropy on the compute-dtype logits, no autocast (the"
                     " entry's loss_upcast)")
    if (e["framework"] == "megatron-bridge" and "loss" not in card
            and (e.get("source") or {}).get("path", "").startswith("docs/performance-summary")):
        card["loss"] = {"kernel": "te"}
        notes.append(MBRIDGE_TE_CROSS_ENTROPY)
    if e["framework"] == "llm-foundry":
        # ComposerMPTCausalLM's default loss_fn fused_crossentropy builds flash_attn.losses.cross_entropy.CrossEntropyLoss(
        # ignore_index=-100, reduction='none'), inplace_backward left False (mosaicml/llm-foundry
        # llmfoundry/models/mpt/modeling_mpt.py @c90b9b312c644dbde5c9e6eef75c6f1c117d8782 l.1295, 1329-1337). Composer's
        # trainer holds the model output (its logits) in state.outputs through backward and scores the train metrics on
        # it afterwards (mosaicml/composer composer/trainer/trainer.py @83a40f5c01046cfb2d1540a1c41c1c505656ee9f v0.17.0
        # l.2412, 2477, 2484; the same at @6405188805a0 l.2927, 2991, 3006)
        card["loss"] = {"kernel": "flash_attn"}
        card["loop"] = {"keeps_output_through_backward": True}
        notes.append("Composer keeps state.outputs (the bf16 logits) through backward: loop.keeps_output_through_backward")
        if LLM_FOUNDRY_SWEEP_2401 in (e.get("note") or ""):
            card["software"] = {"llm-foundry": "0.4.0"}
            notes.append(LLM_FOUNDRY_SWEEP_2401_NOTE)
        # the fp32 parameter shards of amp_bf16 / DEFAULT (the fp32 gradients come with grad_dtype_of's rule above)
        card["precision"].update({k: v for k, v in llm_foundry_precision(e)[0].items() if k == "weights"})
    if e.get("loop"):
        # how the entry's training loop holds the model output through backward, as its source states it
        # (``loop.value`` -> the card's ``loop`` section, cited in ``loop.source``): prime-rl's SFT trainer keeps the
        # fp32 copy of the logits its ``forward`` returns (loop.kept_output_dtype fp32)
        card["loop"] = dict(e["loop"]["value"])
        notes.append("loop: " + ", ".join(f"{k} {v}" for k, v in e["loop"]["value"].items()) + " (the entry's loop)")
    if e["framework"] == "fsdp_qlora":
        # Answer.AI's train.py starts its ranks with torch.multiprocessing.spawn, which sets no OMP_NUM_THREADS: each
        # rank's host-side torch ops keep torch's default pool (plan.time.host_one_thread_per_rank)
        card["loop"] = {**card.get("loop", {}), "launcher": "spawn"}
        notes.append("loop.launcher spawn: fsdp_qlora's train.py starts its ranks with mp.spawn (AnswerDotAI/fsdp_qlora"
                     " train.py l.1072 @e877dda5026dfd964cccdb92a4532da587cbdae0), no OMP_NUM_THREADS")
    if e["framework"] == "prime-rl" and PRIME_RL_SETTINGS_COMMIT in (e.get("note") or ""):
        # the fp32 parameter shards FSDP2 casts to bf16 on their way into the all-gather (the fp32 gradients of full
        # fine-tuning come with grad_dtype_of's rule above)
        card["precision"]["weights"] = "fp32"
        if scope != "full":
            notes.append(PRIME_RL_FP32_PRECISION)
    if e["framework"] == "torchtitan" and not e["precision"].get("weights"):
        # torchtitan's fp32 parameter shards FSDP2 casts to bf16 on their way into the all-gather (the fp32 gradients
        # come with grad_dtype_of's rule above, TORCHTITAN_FP32_PRECISION)
        card["precision"]["weights"] = "fp32"
    if e["framework"] == "unsloth":  # Unsloth's own layers, not compile (unsloth_layers_card)
        card_notes = unsloth_layers_card(e, card)
        notes = [n for n in notes if not n.startswith("unsloth's fused kernels")] + card_notes
    if scope in ("lora", "qlora", "dora"):
        card["lora"] = lora_section(e.get("lora"), e.get("framework", ""), model=card["model"]) or {}
        if not e.get("lora"):
            notes.append("LoRA settings not stated: the card's defaults")
        if (unsloth_note := unsloth_lora_note(e.get("lora"), e.get("framework", ""), model=card["model"])):
            notes.append(unsloth_note)
        if e["framework"] == "prime-rl" and scope == "lora" and PRIME_RL_SETTINGS_COMMIT in (e.get("note") or ""):
            card["lora"]["call_syncs"], note = prime_rl_lora_call_syncs(e, gpu)
            notes.append(note)
        if scope == "qlora" and e.get("qlora_dequant"):  # the base's 4-bit kernel the entry's note cites
            card["lora"]["dequant"] = e["qlora_dequant"]
            notes.append(f"lora.dequant {e['qlora_dequant']}")
        elif scope == "qlora" and e.get("framework") == "torchtune":
            card["lora"]["dequant"] = "torchao"
            notes.append(TORCHTUNE_NF4)
        if scope == "qlora" and e.get("prepare_kbit"):  # PEFT's prepare_model_for_kbit_training, where the source calls it
            card["lora"]["prepare_kbit"] = e["prepare_kbit"]["value"]  # spec.enums.KbitPrepare
            notes.append(f"lora.prepare_kbit {card['lora']['prepare_kbit']} ({e['prepare_kbit']['source']})")
    elif scope in ("ia3", "prompt_tuning", "prefix_tuning"):
        card[scope] = dict(peft_method.get(scope) or {})
        notes.append(f"{scope}: " + (", ".join(f"{k} {v}" for k, v in card[scope].items()) or "PEFT's defaults"))
    packed, n = packed_squad(e)
    if not packed:
        packed, n = packed_published(e)
    card["batch"].update(packed)
    notes += n
    if e["batch"].get("packed_sample_tokens") and not packed:
        # the entry's own mean tokens per packed sample (its note cites where it is read): attention per sample
        # (Transformer Engine thd with cu_seqlens), card batch.packed_sample_tokens
        card["batch"]["packed_sample_tokens"] = int(e["batch"]["packed_sample_tokens"])
        notes.append(f"packed rows: {e['batch']['packed_sample_tokens']} tokens per sample (the entry's"
                     f" {e['batch'].get('packed_sample_tokens_source', 'source')}): attention per sample")
    if e["batch"].get("padding"):
        # samples padded to the row with an attention mask that holds zeros (the entry's note cites the collator):
        # card batch.padding (plan.time.padding_mask_attention)
        card["batch"]["padding"] = e["batch"]["padding"]
        notes.append(f"batch.padding {e['batch']['padding']}: samples padded to seq_len with an attention mask")
    if e.get("software"):
        # the releases the entry's source says the run used (``software.value``, cited in ``software.source``): the
        # card's software pins, which the planner reads where a release changes a mechanism (transformers 4.x: HF
        # gradient checkpointing re-entrant, plan.checkpointing.checkpoint_reentrant)
        card["software"] = {**(card.get("software") or {}), **e["software"]["value"]}
        notes.append("software: " + ", ".join(f"{k} {v}" for k, v in e["software"]["value"].items())
                     + " (the entry's software)")
    if e["batch"].get("packed_rope_loop") and card["batch"].get("packed_sample_tokens"):
        # Megatron-Core's unfused thd RoPE loops over the packed samples (apply_rope_fusion False in the entry's
        # recipe, cited in batch.packed_rope_loop_source): card batch.packed_rope_loop
        card["batch"]["packed_rope_loop"] = True
        notes.append("batch.packed_rope_loop: RoPE per packed sample (apply_rope_fusion False: "
                     f"{e['batch'].get('packed_rope_loop_source', 'the entry recipe')})")
    if e.get("reference") is not None:
        # where a DPO entry's reference runs (TRL's precompute_ref_log_probs: precomputed): the card's roles.reference,
        # the same value pref_rule_seconds reads for the rule's reference forward
        card.setdefault("roles", {})["reference"] = entry_reference(e, method)
        notes.append(f"roles.reference {e['reference']} (the entry's reference)")
    if kind == "pretrain":
        notes.append("pretraining planned as full-scope SFT (same step)")
    return card, notes


def entry_reference(e: dict[str, Any], method: str) -> str:
    """A training entry's ``reference``, checked: read for method dpo only, one of ``RefPlacement``'s values."""
    from trainfit.spec.enums import RefPlacement

    ref = e["reference"]
    allowed = [p.value for p in RefPlacement]
    if method != "dpo":
        raise ValueError(f"{e.get('id', '?')}: reference is read for method dpo only (method {method}); drop it")
    if ref not in allowed:
        raise ValueError(f"{e.get('id', '?')}: reference {ref!r} is not allowed; allowed: {', '.join(allowed)}")
    return ref


# ---------------------------------------------------------------- RL entries -> cards

def measured_prompt_mean(dataset: str | None, model: str) -> dict[str, Any] | None:
    """The ``rl_prompt_lengths.json`` entry measured for this dataset and model (the model's chat template and
    tokenizer), or None."""
    if not dataset:
        return None
    doc = json.loads(PROMPT_LENGTHS.read_text())
    return next((x for x in doc["entries"] if x["dataset"] == dataset and x["model"] == model), None)


def capped_prompt_mean(prompt_max: int, sequence_max: int | None,
                       response_mean: float | None) -> tuple[int | None, str | None]:
    """(mean prompt tokens, note) for a run whose framework caps prompt + response at ``sequence_max`` tokens
    (``data.sequence_len_max``), when no mean prompt is published or measured: every sequence ends at the cap at
    the latest, so the mean prompt is at most the cap less the mean response; that bound stands in for the mean as
    the published maximum prompt does otherwise (an upper bound, never fitted). NeMo RL: vLLM ``max_model_len`` =
    ``policy.max_total_sequence_length`` and ``generate`` asserts prompt + response <= max_model_len
    (NVIDIA-NeMo/RL nemo_rl/models/generation/vllm.py l.549, examples/configs/grpo_math_1B.yaml ``max_model_len:
    ${policy.max_total_sequence_length}`` @27d0af945b96c5bf9fa928bf45fd1a6ce016632d). (None, None) when the cap
    or the mean response is not published, or the cap leaves the published maximum standing."""
    if not sequence_max or not response_mean or prompt_max + response_mean <= sequence_max:
        return None, None
    bound = max(1, min(prompt_max, int(sequence_max - response_mean)))
    return bound, (f"prompt mean at most {bound} tokens: prompt + response capped at {sequence_max} tokens less the"
                   f" mean response {response_mean:g} (no mean prompt published; the max {prompt_max} bounds memory)")


def sequence_capped_response(response_max: int, sequence_max: int | None,
                             prompt_mean: float | None) -> tuple[int, str | None]:
    """(longest response, note) for a run whose engine stops a sequence at ``sequence_max`` tokens of prompt +
    response (``data.sequence_len_max``) while its response limit alone would let it run past that: the longest
    response is the cap less its prompt, taken at the card's mean prompt (published, measured, or derived from the
    published tokens/s; the longest sequences' own prompts are not published). vLLM V1 ends a request at
    ``request.num_tokens >= max_model_len or request.num_output_tokens >= request.max_tokens`` (``check_stop``,
    vllm/v1/core/sched/utils.py lines 5-9 of the vLLM 0.9.0 wheel, https://pypi.org/project/vllm/0.9.0/, read
    2026-12-03; the same test in later releases), so with NeMo RL's ``max_new_tokens`` and vLLM ``max_model_len``
    both ``${policy.max_total_sequence_length}`` (NVIDIA-NeMo/RL examples/configs/grpo_math_1B.yaml lines 104 and
    116, grpo_math_8B_megatron.yaml lines 62 and 71 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, v0.3.0; the same in
    the v0.4-v0.6 performance recipes, whose entries cite it) no response reaches ``max_new_tokens``: the longest is
    ``max_total_sequence_length`` less its prompt. ``(response_max, None)`` when the cap is not published or leaves
    ``response_max`` standing."""
    if not sequence_max or not prompt_mean or prompt_mean + response_max <= sequence_max:
        return response_max, None
    capped = max(1, int(sequence_max - round(prompt_mean)))
    return capped, (f"longest response {capped} tokens: prompt + response stop at {sequence_max} tokens (vLLM "
                    f"max_model_len), less the mean prompt {prompt_mean:g} (the response limit {response_max} "
                    "is never reached)")


def throughput_prompt(e: dict[str, Any]) -> int | None:
    """Mean prompt tokens from a published tokens/s/GPU, step time and mean response, for a run that publishes no
    prompt length: tokens/s × GPUs × step / sequences − mean response (the tokens counted are prompt + response);
    None where an input is missing. NeMo RL's E2E tokens/s/GPU, the performance summary's column, is
    ``total_num_tokens / total_step_time / total_num_gpus``: ``total_num_tokens`` the summed ``input_lengths`` (prompt
    + response) of the step's trained batch, ``total_num_gpus`` the whole cluster, generation GPUs included
    (NVIDIA-NeMo/RL nemo_rl/algorithms/utils.py ``print_performance_metrics`` l.572 and l.644-666,
    nemo_rl/algorithms/grpo.py l.1630 (synchronous) and l.2643 (``async_grpo_train``)
    @9dbd9adc95a10f5946cceb36e1d5b31e2429e470; the same at cff17f83bf30c4f9c757b5fe707b2c32db606411 utils.py l.570
    and l.642-664, grpo.py l.2259, and at aea463dd2dad3c9dd39d92df3a1616647c8ff45a /
    7ea279abfbeb698b092856d0dab61e7cf39bc909 utils.py l.716 / l.723 and l.797-799)."""
    d, m = e["data"], e["measured"]
    tput = m.get("throughput") or {}
    if not (d.get("response_len_mean") and m.get("step_s") and tput.get("metric") == "tokens_per_s_per_gpu"
            and d.get("prompts_per_step") and d.get("n_per_prompt")):
        return None
    per_seq = tput["value"] * e["gpus"] * m["step_s"] / (d["prompts_per_step"] * d["n_per_prompt"])
    return max(1, int(round(per_seq - int(round(d["response_len_mean"])))))


def throughput_response(e: dict[str, Any], prompt_tokens: int) -> int | None:
    """Mean response tokens from a published tokens/s/GPU and step time, for a synchronous run that publishes no
    mean response: tokens/s × GPUs × step / sequences − ``prompt_tokens`` (the published mean prompt, else the
    published maximum the harness plans in its place, so the response it gives is a lower bound). verl's
    ``perf/throughput`` is ``sum(global_token_num) / (step time × n_gpus)`` with ``global_token_num`` each
    sequence's attention-mask sum, prompt + response unpadded (verl-project/verl verl/trainer/ppo/metric_utils.py
    ``compute_throughout_metrics`` l.655-687 and verl/trainer/ppo/ray_trainer.py l.1516
    @6a6242f3d8ec7d9f8b4936f4905144707d91fe3b). verl rows only: that count is verl's; another framework's
    tokens/s/GPU under the same metric key may count other tokens or GPUs (NeMo RL's divides by the whole cluster,
    generation GPUs included, ``throughput_prompt``). None where the row is not verl's, an input is missing, the run
    is asynchronous (its step does not hold the generation of the tokens it counts: ``ASYNC_THROUGHPUT_PROMPT``) or
    the tokens leave no response."""
    d, m = e["data"], e["measured"]
    tput = m.get("throughput") or {}
    if (e["framework"] != "verl" or d.get("response_len_mean") or asynchronous(e) or not m.get("step_s")
            or tput.get("metric") != "tokens_per_s_per_gpu" or not d.get("prompts_per_step")
            or not d.get("n_per_prompt")):
        return None
    per_seq = tput["value"] * e["gpus"] * m["step_s"] / (d["prompts_per_step"] * d["n_per_prompt"])
    response = int(round(per_seq - prompt_tokens))
    return response if response >= 1 else None


def asynchronous(e: dict[str, Any]) -> bool:
    """Generation overlaps training (one step off or fully asynchronous)."""
    return (e["rollout"].get("async") or "none") not in ("none", "None")


ASYNC_THROUGHPUT_PROMPT = (
    "An asynchronous run's published tokens/s does not give its prompt length. NeMo RL's performance summary "
    "publishes each of 'G-Average Seq len', 'Tokens/sec/gpu' and 'Total Step time' as its own average over 5 steps "
    "('Because of the averaging, the numbers in the table do not completely match the equation', "
    "docs/about/performance-summary.md @cff17f83bf30c4f9c757b5fe707b2c32db606411 l.70, "
    "@aea463dd2dad3c9dd39d92df3a1616647c8ff45a l.97), so tokens/s × step recovers a step's tokens only where each "
    "step's time moves with its own tokens. The synchronous trainer times the generation of the batch it counts "
    "inside the step (grpo.py ``grpo_train`` l.1222 and l.1292 @9dbd9adc95a10f5946cceb36e1d5b31e2429e470). "
    "``async_grpo_train`` (same commit, l.2340-2575) counts the batch it trains, whose generation the collector "
    "started a step earlier, right after the refit that began the previous step (nemo_rl/algorithms/async_utils.py "
    "``_calculate_target_weights`` l.294-321: weight version v generates for step v + 1; ``_process_batch`` "
    "l.451-514; the performance recipes' ``in_flight_weight_updates: true``): its step holds only what is left of "
    "that generation after the previous step (``exposed_generation``), set by the previous step's length as much as "
    "by its own tokens, and the first step's batch is generated before the loop starts (grpo.py l.2306-2328). Step "
    "time and tokens vary apart, the "
    "product of the two averages is off by their covariance: two percent of a 5,700-token sequence is the "
    "whole prompt. The on-policy rows of the same dataset and model (same prompts, template and tokenizer) give "
    "98-132 tokens over the v0.4-v0.6 tables; this harness takes their median for an asynchronous row.")
"""Why an asynchronous row's prompt comes from its on-policy siblings (``on_policy_prompt``)."""


_RL_ENTRIES: dict[Path, list[dict[str, Any]]] = {}


def on_policy_prompt(e: dict[str, Any]) -> tuple[int, list[tuple[str, int]]] | None:
    """(median prompt tokens, [(id, prompt)]) over the synchronous RL-step rows of ``RL_DATA`` with the entry's
    framework, dataset and model whose prompt is derived from their published tokens/s (``throughput_prompt``);
    None when there are none (``ASYNC_THROUGHPUT_PROMPT``)."""
    if RL_DATA not in _RL_ENTRIES:
        _RL_ENTRIES[RL_DATA] = load_entries(RL_DATA)
    found = []
    for x in _RL_ENTRIES[RL_DATA]:
        d = x["data"]
        if (x["kind"] != "rl_step" or asynchronous(x) or x["framework"] != e["framework"] or x["model"] != e["model"]
                or not d.get("dataset") or d.get("dataset") != e["data"].get("dataset")
                or d.get("prompt_len_mean") or d.get("prompt_len_max")):
            continue
        got = throughput_prompt(x)
        if got is not None:
            found.append((x["id"], got))
    if not found:
        return None
    return int(round(statistics.median(v for _, v in found))), found


def rl_lengths(e: dict[str, Any]) -> tuple[int, int | None, int, int | None, list[str]]:
    """(prompt tokens (the maximum where only that is published), mean prompt tokens or None, max response,
    mean response or None, notes) for an RL entry. The mean prompt is the published one, else the one measured
    for the entry's dataset and model (``PROMPT_LENGTHS``) when the published maximum holds its longest prompt. An
    entry whose ``data.prompt_len_mean`` is an estimate says how in ``data.prompt_len_mean_source`` ("estimate:
    ..."), and the row's notes carry it ("prompt mean N tokens: estimated from ...")."""
    d, m = e["data"], e["measured"]
    notes = []
    resp_max = d.get("response_len_max")
    resp_mean = int(round(d["response_len_mean"])) if d.get("response_len_mean") else None
    prompt = d.get("prompt_len_mean") or d.get("prompt_len_max")
    prompt_mean = None
    # the mean prompt as published, measured, or derived from the published tokens/s (not one bounded by a cap)
    known_prompt = d.get("prompt_len_mean")
    source = str(d.get("prompt_len_mean_source") or "")
    if known_prompt and source.startswith(PROMPT_MEAN_ESTIMATE_PREFIX):
        # a mean the entry estimates rather than copies from the publication says so in the row's notes
        how = source.removeprefix(PROMPT_MEAN_ESTIMATE_PREFIX).strip().removeprefix("from ")
        notes.append(f"prompt mean {int(round(known_prompt))} tokens: estimated from {how}")
    if prompt and not d.get("prompt_len_mean"):
        got = measured_prompt_mean(d.get("dataset"), e["model"])
        if got and got["max_tokens"] <= prompt:
            prompt_mean = known_prompt = int(round(got["mean_tokens"]))
            notes.append(f"prompt mean {prompt_mean} tokens: {got['dataset']} measured ({got['prompts']:,} prompts"
                         " with the recipe's instruction and the model's chat template,"
                         f" benchmarks/rl_prompt_lengths.py; longest {got['max_tokens']}); the published max"
                         f" ({prompt}) bounds memory")
        else:
            prompt_mean, note = capped_prompt_mean(prompt, d.get("sequence_len_max"), d.get("response_len_mean"))
            notes.append(note or f"prompt length: the published max ({prompt}); no mean published"
                         + (f" (measured longest {got['max_tokens']} tokens exceeds it: the run filters or truncates,"
                            " the measured mean is not its mean)" if got else ""))
    derived = throughput_prompt(e) if not prompt else None
    if derived is not None and asynchronous(e):
        got = on_policy_prompt(e)
        if got is not None:
            prompt = known_prompt = got[0]
            notes.append(f"prompt length {prompt}: the median of the same dataset and model's on-policy runs ("
                         + ", ".join(f"{i} {v}" for i, v in got[1]) + "), each derived from its published tokens/s;"
                         f" this asynchronous row's own tokens/s would give {derived}, but its step holds only the rest"
                         " of a generation begun a step earlier, so its time does not move with the tokens it counts"
                         " (ASYNC_THROUGHPUT_PROMPT)")
        else:
            prompt = known_prompt = derived
            notes.append(f"prompt length {prompt} derived from the published tokens/s of an asynchronous run (no"
                         " on-policy run of the same dataset and model): unreliable (ASYNC_THROUGHPUT_PROMPT)")
    elif derived is not None:
        prompt = known_prompt = derived
        notes.append(f"prompt length {prompt} derived from the published tokens/s (tokens/s × GPUs × step "
                     f"/ sequences − mean response), assuming it counts prompt + response")
    if not prompt or not resp_max:
        raise Unmapped("skipped", ["prompt or response length not published"])
    # not a mean prompt bounded by the same cap (capped_prompt_mean): that would give the cap back as the mean response
    capped, note = sequence_capped_response(int(resp_max), d.get("sequence_len_max"), known_prompt)
    if note:
        resp_max = capped
        notes.append(note)
    if resp_mean is None and derived is None:
        got = throughput_response(e, int(known_prompt or prompt))
        if got is not None:
            resp_mean = min(got, int(resp_max))
            notes.append(f"mean response {resp_mean} tokens derived from the published tokens/s (tokens/s × GPUs ×"
                         f" step / sequences − the prompt {int(known_prompt or prompt)}"
                         + ("" if known_prompt else ", its published max: a lower bound on the response") + ")")
    if resp_mean is None:
        notes.append(DEFAULT_RESPONSE_NOTE)
    return int(prompt), prompt_mean, int(resp_max), resp_mean, notes


DEFAULT_RESPONSE_NOTE = "mean response not published: the card's default distribution below the max"
"""``rl_lengths``' note for an entry without a mean response; ``rollout_section`` drops it where it maps a
``length_profile`` or a ``response_clip_ratio``, whose own note says how the mean is set."""


ROLLOUT_TP_DEFAULTS: dict[str, tuple[int, float, str]] = {
    "verl": (2, 0.5, "verl's rollout.tensor_model_parallel_size default 2 beside gpu_memory_utilization 0.5, both"
                     " unchanged since the first release: verl-project/verl verl/trainer/config/ppo_trainer.yaml"
                     " actor_rollout_ref.rollout lines 63 and 58 @30911f133aa300ae9d8e341dba8e63192335705e"
                     " (2024-10-31), lines 294 and 275 @ad33564f849664069394108792fe5f709b9607f0; then"
                     " verl/trainer/config/rollout/rollout.yaml from cccc2ef2c94e747578b75b58eb69625a0dd2f9bf"
                     " (2025-07-08): lines 47 @beb62461003f5ff1652b2dcb8e8b89467c6552dc, 50 and 32"
                     " @ef6eaa05dcd8beb6f02ef352d637af8a17acaf63, 64 and 46 @1dda039b9c6311889a9c9a26040677e1254814f9"
                     " (2026-08-22)"),
    "nemo-rl": (1, 0.6, "NeMo RL's policy.generation.vllm_cfg.tensor_parallel_size default 1 and"
                        " gpu_memory_utilization 0.6 (NVIDIA-NeMo/RL examples/configs/grpo_math_1B.yaml lines 113"
                        " and 115 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, v0.3.0; lines 416 and 419"
                        " @7ea279abfbeb698b092856d0dab61e7cf39bc909, 2026-08-22)"),
}
"""The rollout engine's tensor-parallel size a framework runs when the user does not set it, the share of the card
its engine may fill by default (vLLM's gpu_memory_utilization), and the citation. Only frameworks with a scored
entry that leaves TP unstated and whose default is read from their code; the others (DeepSpeed-Chat's hybrid
engine, whose entries cite their own scripts) keep the half-card rule in ``rollout_tp``."""


ROLLOUT_TP_DEFAULTS_NOT_APPLIED: dict[str, str] = {
    "deepspeed-chat": "DeepSpeed-Chat's --inference_tp_size default is 1 (deepspeedai/DeepSpeedExamples"
                      " applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/main.py lines 221-223"
                      " @e468799f19423d7a045c726ff89a53086bc379fa), not applied: the hybrid engine gathers the whole"
                      " actor on every GPU beside its ZeRO-3 shards and the reference copy, with no memory share to"
                      " check a 1-GPU gather against, and the blog's benchmark settings are not its scripts'",
    "slime": "slime's --rollout-num-gpus-per-engine default is 1 (THUDM/slime slime/utils/arguments.py l.57-60"
             " @8a5397e251e62f965a59a5f9c1662fba8544cd84), not applied: slime sets no --sglang-mem-fraction-static"
             " (SGLang computes its own from the card's memory) and the card's slime preset sets no share, so a"
             " one-GPU engine cannot be checked against the share the card plans",
}
"""Frameworks whose default rollout TP is known but not applied, and why (the note says so)."""


def _half_card_tp(weights_bytes: float, card_bytes: float) -> int:
    """The smallest power of two whose bf16 weight shard is at most half a card."""
    tp = 1
    while weights_bytes / tp > 0.5 * card_bytes and tp < 64:
        tp *= 2
    return tp


def rollout_tp(e: dict[str, Any], model: Any) -> tuple[int, list[str]]:
    """Rollout tensor parallel: published; else the framework's default (``ROLLOUT_TP_DEFAULTS``: a run that left
    TP unset ran it) when the default's bf16 weight shard fits the engine's share of the card (the entry's
    gpu_memory_utilization, else the framework's default one; an engine whose weights exceed its share does not
    start, so a run whose model does not fit the default set its own TP); else the smallest power of two whose bf16
    weight shard is at most half a card (room for the KV cache)."""
    if e["rollout"].get("tp"):
        return int(e["rollout"]["tp"]), []
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.models import from_catalog
    from trainfit.memory.weights import total_params

    gpu = resolve_gpu(GPU_ALIASES.get(e["gpu"], (e["gpu"],))[0])
    weights = 2 * total_params(from_catalog(model)) if isinstance(model, str) else 0
    tp = _half_card_tp(weights, gpu.memory_bytes)
    rule = f"{tp} (smallest power of two holding the bf16 weights in half a card"
    default = ROLLOUT_TP_DEFAULTS.get(e.get("framework") or "")
    if default is None:
        why = ROLLOUT_TP_DEFAULTS_NOT_APPLIED.get(e.get("framework") or "",
                                                  f"no default of {e.get('framework')}'s rollout TP established")
        return tp, [f"rollout TP not published: {rule}; {why})"]
    default_tp, share, source = default
    share = e["rollout"].get("gpu_memory_utilization") or share
    if weights / default_tp <= share * gpu.memory_bytes:
        return default_tp, [f"rollout TP not published: {default_tp}, the framework default ({source})"]
    return tp, [f"rollout TP not published: {rule}; {e['framework']}'s default {default_tp} cannot hold them in"
                f" {share:g} of the card, so the run set its own: {source})"]


def _rl_model(e: dict[str, Any]) -> tuple[Any, list[str]]:
    """The card's model for an RL entry, after the checks that make it not representable or skipped."""
    # as map_train: what the run did that no card field states (cited in the entry)
    blockers = parallel_blockers(e["train"]) + ([e["card_cannot_state"]] if e.get("card_cannot_state") else [])
    if e["framework"] in REFUSED_PRESETS:
        # a framework the card's preset field refuses (trainfit.methods.unsloth): the product's own reason, not the
        # LoRA check below, which would call the row skipped rather than not representable
        blockers.append(f"preset {e['framework']} refused: {REFUSED_PRESETS[e['framework']]}")
    if e["rollout"].get("async") == "fully_async" and e["kind"] != "rl_phase" and e["framework"] != "nemo-rl":
        blockers.append("fully asynchronous trainer whose step consumes require_batches x ppo_mini_batch_size "
                        "prompts with partial rollouts: the published table does not pin the samples per step")
    role_gpus = e["rollout"].get("role_gpus") or {}
    if any(role_gpus.get(k) for k in ("critic", "reference", "reward")):
        # OpenRLHF's Ray placement without colocation: each model on its own GPU group; the card's split placement
        # has one training pool (every GPU the engine does not hold) shared by actor, critic, reference and reward
        blockers.append("per-role GPU groups (" + ", ".join(f"{k} {v}" for k, v in role_gpus.items())
                        + " GPUs): the card has one training pool for actor, critic, reference and reward, so the "
                        "actor would be planned on every non-rollout GPU")
    try:
        model, notes = resolve_model(e["model"], e.get("model_config"))
    except Unmapped as u:
        if blockers:
            raise Unmapped("not_representable", blockers + u.reasons) from None
        raise
    if blockers:
        raise Unmapped("not_representable", blockers)
    # checkpoint-engine's update has no trainer: the engine's fp8 weights are all there is to record
    no_trainer = e["rollout"].get("weight_transport") == "checkpoint_engine"
    if ("fp8" in e["id"] or "FP8" in (e["source"].get("section") or "")) and not (
            e["rollout"].get("quantization") and (e["train"].get("fp8_recipe") or no_trainer)):
        raise Unmapped("skipped", ["fp8 run whose generation and training fp8 settings are not recorded "
                                   "(rollout.quantization, train.fp8_recipe)"])
    if e.get("unscorable"):
        raise Unmapped("skipped", [e["unscorable"]])
    return model, notes


def rollout_section(e: dict[str, Any], model: Any, nodes: int) -> tuple[dict[str, Any], list[str]]:
    """The card's ``rollout`` section for an RL entry."""
    ro, d = e["rollout"], e["data"]
    notes: list[str] = []
    if e["kind"] == "rl_phase":
        prompt, prompt_mean, resp_max, resp_mean = 512, None, 1024, None
        notes.append("phase-only entry: batch and lengths not published (card defaults; the phase compared "
                     "does not depend on them)")
    elif not d.get("prompts_per_step") or not d.get("n_per_prompt"):
        raise Unmapped("skipped", ["prompts per step or generations per prompt not published"])
    else:
        prompt, prompt_mean, resp_max, resp_mean, notes = rl_lengths(e)
    tp, n = rollout_tp(e, model)
    notes += n
    out: dict[str, Any] = {"placement": ro["placement"], "tensor_parallel": tp, "prompt_len": prompt,
                           "response_len": resp_max, "num_iterations": e["train"].get("ppo_epochs") or 1}
    if e["kind"] != "rl_phase":
        out.update(prompts_per_step=d["prompts_per_step"], num_generations=d["n_per_prompt"])
        if d.get("generated_prompts_per_step"):  # DAPO dynamic sampling: whole generation batches, some groups dropped
            out["generated_prompts_per_step"] = d["generated_prompts_per_step"]
            notes.append(f"{d['generated_prompts_per_step']} prompts generated per step, {d['prompts_per_step']} of"
                         f" them trained (rollout.generated_prompts_per_step: at least one generation batch)")
        mini = e["train"].get("ppo_mini_batch_size")
        if mini:
            # NeMo RL counts its train_global_batch_size in sequences; verl/OpenRLHF count prompts
            total = d["prompts_per_step"] * (d["n_per_prompt"] if e["framework"] == "nemo-rl" else 1)
            out["mini_batches"] = max(1, round(total / mini))
            notes.append(f"{out['mini_batches']} optimizer step(s) per rollout batch (mini-batch {mini}"
                         f" {'sequences' if e['framework'] == 'nemo-rl' else 'prompts'})")
    if resp_mean:
        out["response_len_mean"] = min(resp_mean, resp_max)
        # the source's share cut at the cap and the batch's longest response beside the mean (verl's
        # response_length/clip_ratio and response_length/max, quoted in data.response_lengths_source): the length
        # distribution that honours them (compute.response_lengths.fit_published_lengths)
        if d.get("response_clip_ratio") is not None and d.get("response_len_mean"):  # a published mean, not a derived one
            out["response_clip_ratio"] = float(d["response_clip_ratio"])
        if d.get("response_len_batch_max") and d.get("response_len_mean"):
            out["response_len_batch_max"] = int(round(d["response_len_batch_max"]))
        if "response_clip_ratio" in out or "response_len_batch_max" in out:
            notes.append(f"published beside the mean: clip ratio {d.get('response_clip_ratio')}, batch's longest"
                         f" response {d.get('response_len_batch_max')} ({d['response_lengths_source']})")
    if d.get("length_profile") and not resp_mean:  # the task's length profile, as the entry's source states its
        # dataset; a published mean replaces it (the card refuses a profile next to a mean)
        out["length_profile"] = d["length_profile"]
        notes.append(f"mean response not published: rollout.length_profile {d['length_profile']} (the run's "
                     f"dataset, {d.get('dataset')})")
    elif not resp_mean and d.get("response_clip_ratio") is not None:
        # the share of responses cut at the cap, as the entry's source publishes it (data.response_clip_ratio_source
        # quotes it): the exponential shape's mean from that share (compute.response_lengths.clip_ratio_response_mean)
        out["response_clip_ratio"] = float(d["response_clip_ratio"])
        notes.append(f"mean response not published: rollout.response_clip_ratio {d['response_clip_ratio']:g}"
                     f" ({d['response_clip_ratio_source']})")
    elif not resp_mean:
        out.update(checkpoint_length_profile(e["model"], model, notes))
    if "length_profile" in out or "response_clip_ratio" in out:
        notes = [n for n in notes if n != DEFAULT_RESPONSE_NOTE]
    if prompt_mean:
        out["prompt_len_mean"] = prompt_mean
    for key in ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "weight_sync", "weight_transport",
                "trainer_offload", "weight_sync_bucket_mib"):
        if ro.get(key):
            out[key] = ro[key]
    if (ro.get("generation_calls_per_step") or 1) > 1:  # the run's framework generates the step in several calls
        # (rollout.generation_calls: TRL before 0.17 once per gradient-accumulation micro-batch; the entry cites it)
        calls = int(ro["generation_calls_per_step"])
        generated = out.get("generated_prompts_per_step") or out.get("prompts_per_step")
        if not ro.get("generation_calls_source"):
            raise Unmapped("skipped", [f"{calls} generate calls per step without a source for them"
                                       " (rollout.generation_calls_source)"])
        if not generated or generated % calls:
            raise Unmapped("skipped", [f"{calls} generate calls per step do not split the {generated or 'unpublished'}"
                                       " prompts generated per step into equal calls (rollout.generation_calls)"])
        out["generation_calls"] = calls
        notes.append(f"{out['generation_calls']} sequential generate calls per step (rollout.generation_calls):"
                     f" {ro['generation_calls_source']}")
    if ro.get("weight_sync_relays") is not None:  # verl's checkpoint engine's multi_sender as the run set it
        out["weight_sync_relays"] = bool(ro["weight_sync_relays"])  # (compute.sync.verl_broadcast_senders)
    if ro.get("sleep_level") is not None:
        out["sleep_level"] = int(ro["sleep_level"])
    if ro.get("cuda_graphs") is not None:
        out["cuda_graphs"] = bool(ro["cuda_graphs"])
    if ro.get("engine_multiprocess") is not None:  # the run's own engine mode over the preset's (NeMo RL AsyncLLM)
        out["engine_multiprocess"] = bool(ro["engine_multiprocess"])
    if ro.get("vllm_engine"):  # vLLM's engine generation, from the run's cited vLLM version (default v1, vLLM >= 0.8)
        out["vllm_engine"] = ro["vllm_engine"]
    if ro.get("engine_outputs"):  # final_only / cumulative (default: cumulative with a multi-process AsyncLLM)
        out["engine_outputs"] = ro["engine_outputs"]
    if ro.get("quantization"):  # NeMo RL vllm_cfg.precision: fp8 (the entry's fp8_source recipe)
        out["quantization"] = ro["quantization"]
        if ro.get("quantization_bf16_modules"):
            out["quantization_bf16_modules"] = list(ro["quantization_bf16_modules"])
        notes.append(f"vLLM {ro['quantization']} weights (128x128 blocks), KV cache bf16"
                     + (f"; {', '.join(ro['quantization_bf16_modules'])} kept bf16"
                        if ro.get("quantization_bf16_modules") else ""))
    if ro.get("async") == "one_step_off":
        out["async_mode"] = "one_step_off"
    elif ro.get("async") == "fully_async":
        out["async_mode"] = "fully_async"
        notes.append("fully asynchronous trainer planned as the slower of generation and training (partial "
                     "rollouts and staleness not modelled)")
    per_node = e["gpus_per_node"]
    if ro["placement"] == "split" and nodes > 1 and ro.get("rollout_nodes"):
        # the source names the engines' whole nodes itself (rollout_nodes, cited in the entry's quote), whatever the
        # framework's default layout
        out["nodes"] = int(ro["rollout_nodes"])
        notes.append(f"rollout on {out['nodes']} whole node(s) of {per_node} GPUs, training on the other "
                     f"{nodes - out['nodes']} (the layout the source states)")
    elif ro["placement"] == "split" and e["framework"] in ("nemo-rl", "verl", "areal") and nodes > 1 \
            and (ro.get("rollout_gpus") or 0) % per_node == 0:
        # NeMo RL gives a non-colocated engine whole nodes when the cluster has more than one
        # (nemo_rl/algorithms/grpo.py setup: train_nodes -= inference_nodes, inference gpus_per_node must equal
        # the cluster's, NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 lines 420-436); so do verl's
        # disaggregated trainers: a standalone rollout pool of rollout.nnodes x rollout.n_gpus_per_node, the trainer
        # pool of trainer.nnodes x trainer.n_gpus_per_node (volcengine/verl verl/experimental/fully_async_policy/
        # fully_async_main.py create_resource_pool_manager @df340d703292538fafc1439b4aa9f1f226ccadc5, e.g.
        # shell/dapo_7b_math_fsdp2_16_16.sh NNODES_ROLLOUT=2 NNODES_TRAIN=2; verl-project/verl
        # fully_async_trainer.py standalone_gpus = rollout.nnodes * rollout.n_gpus_per_node
        # @040a28659773fd58eac91cc006d255826c6da03a); and AReaL's decoupled allocation (sglang./vllm.d..+d..): the global
        # device mesh split at the generation world size, which must be below a node or a multiple of whole nodes
        # (inclusionAI/AReaL realhf/experiments/common/common.py l.237-251 @aff05c2544fe725af935790d1c710bc6ebe2079f)
        out["nodes"] = ro["rollout_gpus"] // per_node
        notes.append(f"rollout on {out['nodes']} whole node(s) of {per_node} GPUs, training on the other "
                     f"{nodes - out['nodes']} ({ {'nemo-rl': 'NeMo RL', 'areal': 'AReaL'}.get(e['framework'], 'verl')}'s "
                     "multi-node split)")
    elif ro["placement"] == "split":
        out["gpus"] = (ro.get("rollout_gpus") or 0) // nodes
        if nodes > 1:
            notes.append(f"rollout on {ro['rollout_gpus']} whole GPUs planned as {out['gpus']} per node "
                         "(the card splits inside each node)")
    if ro["engine"].startswith("other (DeepSpeed Hybrid Engine)"):
        # DeepSpeed-Chat's generation (compute.hybrid_engine): per_device_generation_batch_size prompts per GPU, the
        # inference TP group's prompts gathered into one static batch per engine
        out["engine"] = "deepspeed_hybrid"
        batch = ro.get("generation_batch_per_gpu") or DSCHAT_GENERATION_BATCH
        out["max_num_seqs"] = int(batch) * tp
        script = re.search(r"training_scripts/(\S+?\.sh)", e.get("note") or "")
        if script and script.group(1) in DSCHAT_TP_GATHER_PARTITION_SIZE:
            out["tp_gather_partition_size"] = DSCHAT_TP_GATHER_PARTITION_SIZE[script.group(1)]
            notes.append(f"--tp_gather_partition_size {out['tp_gather_partition_size']} ({script.group(1)})")
        notes.append(f"DeepSpeed Hybrid Engine: {batch} prompt(s) per GPU per generate call"
                     + ("" if ro.get("generation_batch_per_gpu") else " (not published: DeepSpeed-Chat's default)")
                     + f", inference TP {tp}")
    elif ro["engine"] == "sglang":
        out["engine"] = "sglang"  # rollout.engine sglang: vLLM's generation, SGLang's weight load and memory release
    elif ro["engine"] == "hf" and e["framework"] == "trl" and e.get("trl_version"):
        # TRL without vLLM (use_vllm False): transformers' generate on the trained model (rollout.engine hf), in the
        # generate calls the entry states (rollout.generation_calls: TRL before 0.17 generates inside every
        # gradient-accumulation micro-batch, huggingface/trl trl/trainer/grpo_trainer.py compute_loss l.370-426
        # @49711efab9e0cc3762d3228c9fd5a8064d489503, v0.14.0); the rest of the card: trl_hf_section
        out["engine"] = "hf"
        out["generation_calls"] = int(ro.get("generation_calls") or 1)
        notes.append(f"TRL {e['trl_version']} without vLLM: transformers' generate on the trained model,"
                     f" {out['generation_calls']} generate call(s) per step (rollout.generation_calls)")
    elif ro["engine"] != "vllm":
        notes.append(f"rollout engine {ro['engine']} planned as vLLM")
    return out, notes


def checkpoint_length_profile(published: str, planned: Any, notes: list[str]) -> dict[str, str]:
    """The published checkpoint's length profile, named on the card when the model it is planned as (a
    ``MODEL_ALIASES`` stand-in with the same config shapes, or an inline config) would pick another under ``auto``.

    The planner's ``auto`` rule reads the card's model name (``rl_common.length_profile``, ``profile_for``): a
    stand-in for a checkpoint's shapes is not the checkpoint, and a thinking model's fine-tune of a base model
    (DeepSeek-R1-Distill-Qwen-32B planned with Qwen2.5-32B's shapes) thinks at length where its base does not. The
    harness's own token budgets (``planned_response_mean(rollout, e["model"])``) already read the published name;
    this keeps the planner's generation on the same profile. {} when they agree (nothing on the card)."""
    from trainfit.compute.response_lengths import PROFILES, profile_for

    planned_name = planned if isinstance(planned, str) else (planned or {}).get("id")
    mine, theirs = profile_for(published), profile_for(planned_name)
    if mine == theirs:
        return {}
    name = next(k for k, v in PROFILES.items() if v == mine)
    notes.append(f"mean response not published: rollout.length_profile {name.value}, the profile of {published} "
                 f"(planned with {planned_name}'s shapes, whose name alone would pick {theirs.name})")
    return {"length_profile": name.value}


DSCHAT_GENERATION_BATCH = 16
"""DeepSpeed-Chat step 3's ``--per_device_train_batch_size`` default, the prompts per GPU per generate call
(microsoft/DeepSpeedExamples @e468799f19423d7a045c726ff89a53086bc379fa, the release of 2023-04-11,
applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/main.py; ``--per_device_generation_batch_size`` later)."""


DSCHAT_TP_GATHER_PARTITION_SIZE = {"multi_node/run_66b.sh": 4}
"""``--tp_gather_partition_size`` of the release scripts that set it (same commit and folder as
``DSCHAT_ACTOR_LORA_DIM``); the others keep DeepSpeed-Chat's default 8."""


DSCHAT_ACTOR_LORA_DIM = {"single_node/run_13b.sh": 128, "single_node/run_30b_lora.sh": 128, "multi_node/run_66b.sh": 128}
"""``--actor_lora_dim`` of DeepSpeed-Chat's step-3 release scripts that set it, none with ``--only_optimize_lora``
(microsoft/DeepSpeedExamples @e468799f19423d7a045c726ff89a53086bc379fa applications/DeepSpeed-Chat/training/
step3_rlhf_finetuning/training_scripts/); run_6.7b.sh trains the actor in full. The LoRA layers
(training/utils/module/lora.py ``LinearLayer_LoRA``) set ``weight.requires_grad = False`` only."""


NEMO_RL_KL_PENALTY = 0.01
"""``loss_fn.reference_policy_kl_penalty`` of NVIDIA-NeMo/RL examples/configs/grpo_math_1B.yaml
(@9dbd9adc95a10f5946cceb36e1d5b31e2429e470 line 40, @7ea279abfbeb698b092856d0dab61e7cf39bc909 line 80), which
every GRPO performance recipe inherits (only the DAPO recipe sets 0.0). NeMo RL computes the reference policy's
log-probs every step unless ``grpo.skip_reference_policy_logprobs_calculation`` is set, which no performance
recipe does (``nemo_rl/algorithms/grpo.py`` @9dbd9adc: ``get_reference_policy_logprobs`` after ``get_logprobs``
in the synchronous loop, and unconditionally in the asynchronous one)."""


def planned_response_mean(rollout: dict[str, Any], model_name: str) -> float:
    """The mean response the planner uses for a card's rollout section (``rl_common.response_mean``): the
    published mean, else the exponential of the published share at the cap (``response_clip_ratio``), else the
    default of the section's ``length_profile`` (the model's under ``auto``)."""
    from trainfit.compute.response_lengths import default_response_mean, profile_named

    if rollout.get("response_len_mean"):
        return float(rollout["response_len_mean"])
    if rollout.get("response_clip_ratio") is not None:
        from trainfit.compute.response_lengths import clip_ratio_response_mean

        return clip_ratio_response_mean(response_len_max=rollout["response_len"],
                                        clip_ratio=rollout["response_clip_ratio"])
    profile = profile_named(rollout.get("length_profile"), model_name=model_name)
    return default_response_mean(response_len_max=rollout["response_len"], profile=profile)


def raised_context(model: Any, needed: int) -> tuple[Any, list[str]]:
    """A catalog model whose config.json context is shorter than the run's sequences: the run raised it
    (RoPE scaling / a longer max_position_embeddings, as the DAPO recipes do); plan the same shapes inline."""
    if not isinstance(model, str):
        return model, []
    from trainfit.catalog.models import hf_config_of

    try:
        cfg = dict(hf_config_of(model))
    except Exception:  # noqa: BLE001 - not a catalog id: leave it to the planner
        return model, []
    if (cfg.get("max_position_embeddings") or needed) >= needed:
        return model, []
    cfg["max_position_embeddings"] = needed
    return {"config": cfg}, [f"{model}'s context raised to {needed} tokens as the run did (same shapes)"]


def nemo_rl_cp_padding(e: dict[str, Any], rollout: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """NeMo RL's Megatron sequence packing pads every sequence to a multiple of 2 x CP (ring context parallel, the
    load-balanced causal chunks) times TP where sequence parallel is on (each chunk split again over the TP ranks):
    NVIDIA-NeMo/RL nemo_rl/models/megatron/data.py @9dbd9adc95a10f5946cceb36e1d5b31e2429e470
    _get_pack_sequence_parameters_for_megatron (pad_individual_seqs_to_multiple_of); its context-parallel
    performance recipes set ``policy.make_sequence_length_divisible_by`` to the same TP x 2 x CP
    (@7ea279abfbeb698b092856d0dab61e7cf39bc909 examples/configs/recipes/llm/performance/dapo-deepseek-v3-64n8g.v2.yaml
    lines 41-42, ``${mul:tp, ${mul:2, cp}}``; grpo-qwen3-235b-16n8g.yaml line 20, 8 = TP 2 x 2 x CP 2). The padded
    tokens are computed, so the card's longest sequence (prompt + max response) is rounded up to that multiple
    by lengthening the prompt."""
    tr = e["train"]
    cp, tp = tr.get("cp") or 1, tr.get("tp") or 1
    if e["framework"] != "nemo-rl" or (tr.get("sequence_parallel_ulysses") or 1) > 1:
        return rollout, []
    multiple = (2 * cp if cp > 1 else 1) * (tp if tp > 1 and tr.get("sequence_parallel") else 1)
    if multiple == 1:
        return rollout, []
    longest = rollout["prompt_len"] + rollout["response_len"]
    pad = -longest % multiple
    if not pad:
        return rollout, []
    what = " x ".join(w for w, on in (("TP", tp > 1 and tr.get("sequence_parallel")), ("2 x CP", cp > 1)) if on)
    out = dict(rollout, prompt_len=rollout["prompt_len"] + pad)
    return out, [f"NeMo RL pads sequences to a multiple of {what} = {multiple} (sequence packing):"
                 f" prompt {rollout['prompt_len']} + {pad} padding tokens"]


VERL_FSDP_SIZE = {
    # actor.fsdp_config.fsdp_size in the run script each row's note names (volcengine/verl; the note quotes the line)
    "verl-one-step-off-dapo-qwen25math7b-h20-colocate-fsdp2":
        (2, "recipe/one_step_off_policy/dapo_7b_math_fsdp2_colocate.sh l. 55 @503ea75f533f715cf1667551bd375ec9b1e0d5fc"),
    "verl-one-step-off-dapo-qwen25math7b-h20-async-fsdp2":
        (2, "recipe/one_step_off_policy/dapo_7b_math_fsdp2_4_12.sh l. 62 @503ea75f533f715cf1667551bd375ec9b1e0d5fc"),
    **{f"verl-fully-async-dapo-qwen25math7b-h20-colocate-{n}g":
       (2, f"recipe/fully_async_policy/exp/qwen2-7B-math_{n}/fsdp2_colocate/run.sh l. 56"
           " @94d681dce4911c3ad6abb011a2d03c62d318868d") for n in (32, 64, 128)},
}


def map_rl(e: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The run card for a published RL entry as its fields state it (Unmapped with the reasons otherwise).

    The DeepSpeed-Chat blog's Table 1/2 rows keep their release scripts' batches: the blog's benchmark ran "the
    largest training batch size that [does not] result in an out-of-memory error" (BenckmarkSetting.md), but picking
    the largest power of two the plan fits (tried 2026-12-02 with ``memory.hybrid_engine``) lands on a verdict
    within 1 % of the card (OPT-6.7B on 40 GB misses batch 8 by 0.4 GiB) and moved that row from +21 % to +271 %:
    the rule is too sharp to pin a batch the blog does not publish."""
    tr = e["train"]
    model, notes = _rl_model(e)
    gpu, n = resolve_gpu_id(e["gpu"])
    notes += n
    hw, n = hardware(gpu, e["gpus"], e["gpus_per_node"], e["nodes"], e.get("inter_node_gbps_per_gpu"),
                     e.get("interconnect"))
    notes += n
    rollout, n = rollout_section(e, model, hw["nodes"])
    notes += n
    rollout, n = nemo_rl_cp_padding(e, rollout)
    notes += n
    model, n = raised_context(model, rollout["prompt_len"] + rollout["response_len"])
    notes += n
    method = e["method"]
    if method not in ("grpo", "ppo"):
        notes.append(f"{method.upper()} planned as GRPO")
    parallel: dict[str, Any] = {"offload": tr.get("offload") or "none"}
    if tr.get("strategy"):
        parallel["strategy"] = STRATEGIES[tr["strategy"]]
    else:
        notes.append("training strategy not stated: the preset's, else the card's default")
    if parallel.get("strategy") in ("fsdp", "hsdp"):
        version, n = fsdp_version_of(e["framework"], tr["strategy"])
        parallel.update({"fsdp_version": version} if version else {})
        notes.append(n)
    shard = VERL_FSDP_SIZE.get(e["id"])
    if shard and parallel.get("strategy") == "fsdp":
        # verl create_device_mesh: fsdp_size < world_size builds a (world // fsdp_size, fsdp_size) ddp x fsdp mesh, HSDP
        # (volcengine/verl verl/workers/fsdp_workers.py l. 84-91 @94d681dce4911c3ad6abb011a2d03c62d318868d)
        parallel.update(strategy="hsdp", hsdp_shard_size=shard[0])
        notes.append(f"verl actor.fsdp_config.fsdp_size={shard[0]} ({shard[1]}): HSDP, shard groups of {shard[0]} GPUs")
    if tr.get("strategy") == "megatron":
        notes.append("Megatron-Core planned with ZeRO-1 (its distributed optimizer) over the data-parallel ranks")
        # Megatron-Core's layers and loss, as map_train plans Megatron frameworks (spec/enums.py TensorParallelImpl)
        parallel["tensor_parallel_impl"] = "megatron"
        notes.append("tensor_parallel_impl megatron (Megatron-Core ColumnParallelLinear/RowParallelLinear,"
                     " VocabParallelEmbedding, vocab_parallel_cross_entropy)")
        # as map_train does for Megatron frameworks: Megatron-Core runs Transformer Engine's fused kernels
        # whatever its TP/PP (plan/time.py fused_kernels sees only TP x PP > 1), in the log-prob passes too
        parallel["compile"] = True
        notes.append("Megatron-Core / Transformer Engine fused kernels (norm + linear, RoPE, SwiGLU, cross-entropy)"
                     " planned as compile (plan/time.py fused_kernels)")
    if tr.get("activation_checkpointing") is not None:
        parallel["gradient_checkpointing"] = bool(tr["activation_checkpointing"])
    mp, n = model_parallel_section(tr, framework=e["framework"])
    parallel.update(mp)
    notes += n
    mbs = tr.get("micro_batch_size")
    tokens_per_gpu = tr.get("dynamic_bsz / max_token_len_per_gpu")
    if tokens_per_gpu is True or (not isinstance(tokens_per_gpu, (int, float)) and tokens_per_gpu is not None):
        tokens_per_gpu = None if not tokens_per_gpu else 16384
        notes.append("dynamic batching on, token budget not published: verl's default 16384 per GPU")
    if not mbs and not tokens_per_gpu and e["framework"] == "verl":
        tokens_per_gpu = 16384
        notes.append("verl's dynamic batching assumed (use_dynamic_bsz, ppo_max_token_len_per_gpu 16384, the "
                     "trainer config's default)")
    # packed length the planner uses (rl_common.response_mean: the mean, else the card's length profile);
    # verl multiplies the per-GPU budget by the Ulysses size (dp_actor.py: ppo_max_token_len_per_gpu *
    # ulysses_sequence_parallel_size): one micro-batch spans the sequence-parallel group
    per_seq = (int(rollout.get("prompt_len_mean") or rollout["prompt_len"])
               + int(planned_response_mean(rollout, e["model"])))
    ulysses = tr.get("sequence_parallel_ulysses") or 1
    span = "Ulysses"
    if e["framework"] == "verl" and tr.get("strategy") == "megatron" and (tr.get("cp") or 1) > 1:
        # verl's Megatron actor multiplies the budget by the context-parallel size, log-prob and update passes alike
        # (verl/workers/actor/megatron_actor.py compute_log_prob line 231, update_policy line 816,
        # volcengine/verl @df340d703292538fafc1439b4aa9f1f226ccadc5): a micro-batch spans the CP group
        ulysses, span = int(tr["cp"]), "context-parallel"
    # verl's dynamic batching as the card states it (rollout.max_tokens_per_micro_batch: the per-GPU budget, the
    # micro-batch count the largest rank's, plan.rl_batches.dynamic_micro_batches) where the budget holds the longest
    # sequence, as verl asserts; else (or for other frameworks) the budget as a fixed count of mean-length sequences
    longest = int(rollout["prompt_len"]) + int(rollout["response_len"])
    # AReaL packs the same way (the entry's sequence_packing_source: realhf/api/core/data_api.py split_with_lengths,
    # datapack.ffd_allocate over max_tokens_per_mb: whole sequences without padding, at most the budget per
    # micro-batch, the sequences' count decided by the tokens, not a fixed number of sequences)
    # NeMo RL's dynamic batching (policy.dynamic_batching, train_mb_tokens / logprob_mb_tokens) sorts the sequences by
    # length and closes a micro-batch once its count x its longest (rounded up) sequence would pass the budget
    # (NVIDIA-NeMo/RL nemo_rl/distributed/batched_data_dict.py shard_by_batch_size l.524-592
    # @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf): each micro-batch's padded tensor holds at most the budget, a token
    # budget, not a fixed count of sequences. Planned with verl's semantics (packed, balanced, ceil(tokens / budget)
    # micro-batches): an approximation. NeMo RL sorts each chunk by length (l.340-375 there), strides it over the
    # data-parallel ranks, fills greedily and pads every micro-batch to count x its longest (rounded to
    # sequence_length_round), so a micro-batch holds floor(budget / longest) sequences: at least verl's count, and
    # more padded tokens. Not modelled: the plan carries one mean and spread per length, not the sorted lengths the
    # greedy fill needs; the rows' notes say so.
    budget_packing = (e["framework"] in ("verl", "nemo-rl")
                      or (e["framework"] == "areal" and tr.get("sequence_packing") is True))
    dynamic = (budget_packing and not mbs and bool(tokens_per_gpu) and tr.get("sequence_packing") is not False
               and not tr.get("sequence_packing_tokens") and int(tokens_per_gpu) * ulysses >= longest)
    if dynamic:
        rollout["max_tokens_per_micro_batch"] = int(tokens_per_gpu)
        notes.append(f"dynamic batching: micro-batches of at most {tokens_per_gpu} tokens per GPU"
                     + (f" (x{ulysses} {span} ranks)" if ulysses > 1 else "")
                     + " (rollout.max_tokens_per_micro_batch)")
    elif not mbs and tokens_per_gpu:
        mbs = max(1, int(tokens_per_gpu) * ulysses // per_seq)
        notes.append(f"dynamic batch of {tokens_per_gpu} tokens per GPU"
                     + (f" (x{ulysses} {span} ranks)" if ulysses > 1 else "")
                     + f" planned as {mbs} sequence(s) of {per_seq} tokens per micro-batch"
                     + (f" (the budget is below the longest sequence, {longest} tokens)"
                        if e["framework"] == "verl" and int(tokens_per_gpu) * ulysses < longest else ""))
    lp_tokens = tr.get("log_prob_max_token_len_per_gpu")
    if tr.get("log_prob_micro_batch_size_per_gpu"):
        # fixed log-prob micro-batches (use_dynamic_bsz False): verl's rollout.log_prob_micro_batch_size_per_gpu
        rollout["logprob_micro_batch_size"] = int(tr["log_prob_micro_batch_size_per_gpu"])
        notes.append(f"log-prob micro-batch of {rollout['logprob_micro_batch_size']} sequence(s) per GPU")
    if lp_tokens and dynamic and int(lp_tokens) * ulysses >= longest:
        rollout.pop("logprob_micro_batch_size", None)  # log_prob_use_dynamic_bsz: the budget, not the count
        rollout["logprob_max_tokens_per_micro_batch"] = int(lp_tokens)
        notes.append(f"log-prob dynamic batching: at most {lp_tokens} tokens per GPU"
                     " (rollout.logprob_max_tokens_per_micro_batch)")
    elif lp_tokens:
        rollout["logprob_micro_batch_size"] = max(1, int(lp_tokens) * ulysses // per_seq)
        notes.append(f"log-prob dynamic batch of {lp_tokens} tokens per GPU planned as "
                     f"{rollout['logprob_micro_batch_size']} sequence(s) per micro-batch")
    elif dynamic and not tr.get("log_prob_micro_batch_size_per_gpu"):
        notes.append("log-prob passes: the update's token budget (verl's log_prob_max_token_len_per_gpu default)")
    pack = tr.get("sequence_packing_tokens")
    if tr.get("sequence_packing") is True and not pack:
        # the run's trainer removes padding and packs each micro-batch's sequences (the entry's
        # sequence_packing_source cites it), though its framework has no card preset that says so
        # (rollout.packed_sequences true: mean prompt + mean response per sequence)
        rollout["packed_sequences"] = True
        notes.append("sequences packed without padding (train.sequence_packing; rollout.packed_sequences)")
    if tr.get("sequence_packing") is False:
        # the run's recipe turns packing off (the entry's sequence_packing_source): every sequence padded to the
        # batch's longest in the log-prob and update passes (rollout.packed_sequences false)
        rollout["packed_sequences"] = False
        notes.append("sequence packing off: every sequence padded to the batch's longest (rollout.packed_sequences)")
    elif pack:
        # NeMo RL sequence packing: micro-batches of max_total_sequence_length x (train_micro_batch_size |
        # logprob_batch_size) tokens, filled with whole sequences (modified first-fit decreasing)
        mbs = max(1, int(pack) * int(mbs or 1) // per_seq)
        rollout["logprob_micro_batch_size"] = max(1, int(pack) * int(tr.get("logprob_batch_size") or 1) // per_seq)
        notes.append(f"sequence packing: {mbs} sequence(s) of {per_seq} tokens per training micro-batch, "
                     f"{rollout['logprob_micro_batch_size']} per log-prob micro-batch")
        if e["framework"] == "nemo-rl" and tr.get("strategy") in ("fsdp", "fsdp2"):
            # NeMo RL's DTensor policy pads every packed update row to train_mb_tokens (pack_sequences min_seq_len,
            # trainfit.plan.rl_batches.nemo_rl_dtensor_padded_rows); its log-prob rows are not padded
            rollout["packed_row_tokens"] = int(pack) * int(tr.get("micro_batch_size") or 1)
            notes.append(f"DTensor policy: packed update rows of {rollout['packed_row_tokens']} tokens, each padded to"
                         " that capacity")
        if e["framework"] == "nemo-rl" and tr.get("strategy") == "megatron" and (tr.get("pp") or 1) > 1:
            # the row capacities (train_mb_tokens, logprob_mb_tokens): Megatron pads every packed row to the
            # batch's longest under pipeline parallel (trainfit.plan.rl_batches.pipeline_packed_rows)
            rollout["packed_row_tokens"] = int(pack) * int(tr.get("micro_batch_size") or 1)
            rollout["packed_logprob_row_tokens"] = int(pack) * int(tr.get("logprob_batch_size") or 1)
            notes.append(f"pipeline parallel {tr['pp']}: packed rows of {rollout['packed_row_tokens']} (update) and"
                         f" {rollout['packed_logprob_row_tokens']} (log-prob) tokens, each padded to the longest")
        elif e["framework"] == "nemo-rl" and tr.get("strategy") == "megatron":
            # without pipeline parallel the rows keep their tokens (no padding to the longest), but each micro-batch
            # is still one packed row of at most train_mb_tokens (NVIDIA-NeMo/RL nemo_rl/models/policy/lm_policy.py
            # l.337-345, megatron_policy_worker.py l.815-831 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf): the row
            # capacity bounds the update's memory (plan.walk.rl_packed_row); the time plans the mean-length sequences
            rollout["packed_row_tokens"] = int(pack) * int(tr.get("micro_batch_size") or 1)
            notes.append(f"packed update rows of at most {rollout['packed_row_tokens']} tokens (memory)")
        if e["framework"] == "nemo-rl" and "packed_logprob_row_tokens" not in rollout:
            # the log-prob passes' bins of at most logprob_mb_tokens (lm_policy.py get_logprobs l.208-217
            # @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf), unpadded without pipeline parallel: their memory
            # (methods.rl.rl_groups); the time plans the mean-length sequences
            rollout["packed_logprob_row_tokens"] = int(pack) * int(tr.get("logprob_batch_size") or 1)
    card: dict[str, Any] = {"model": model, "method": "ppo" if method == "ppo" else "grpo", "scope": "full",
                            "hardware": hw, "parallel": parallel,
                            "batch": {"micro_batch_size": mbs or 1}, "rollout": rollout}
    if tr.get("packed_rope_loop") and tr.get("strategy") == "megatron":
        # Megatron-Core's unfused thd RoPE over the packed rollout sequences (apply_rope_fusion False in the run's
        # transformer config, cited in train.packed_rope_loop_source): card batch.packed_rope_loop, each packed
        # sequence one sample (plan.time.rope_loop_samples_of)
        card["batch"]["packed_rope_loop"] = True
        notes.append("batch.packed_rope_loop: RoPE per packed sequence (apply_rope_fusion False: "
                     f"{tr.get('packed_rope_loop_source', 'the entry recipe')})")
    if tr.get("fp4_recipe"):  # Megatron fp4 (NVFP4): the trainer's linears in fp4
        card["precision"] = {"compute": "fp4", "fp4_recipe": tr["fp4_recipe"]}
        notes.append(f"training and log-prob passes in fp4, {tr['fp4_recipe']} scaling")
    elif tr.get("fp8_recipe"):  # Megatron fp8_cfg (the entry's fp8_source recipe): the trainer's linears in fp8
        card["precision"] = {"compute": "fp8", "fp8_recipe": tr["fp8_recipe"]}
        notes.append(f"training and log-prob passes in fp8, {tr['fp8_recipe']} scaling (Megatron fp8_cfg)")
        if tr.get("fp8_params"):  # Megatron fp8_cfg.fp8_param: fp8 primary weights (the entry cites where it is stated)
            card["precision"]["fp8_params"] = True
            notes.append("fp8 primary weights: precision.fp8_params (Megatron fp8_cfg.fp8_param)")
    grads, grads_note = grad_dtype_of(e)
    if grads:
        card.setdefault("precision", {})["grads"] = grads
        notes.append(grads_note)
    if e["framework"] == "nemo-rl" and tr.get("strategy") in ("fsdp", "fsdp2"):
        note = e.get("note") or ""
        dt = next(((p, f"{w} @{c}") for c, (p, w) in NEMO_RL_DTENSOR_PRECISION.items() if c in note), None)
        if dt:
            card["precision"] = {**card.get("precision", {}), **dt[0]}
            notes.append(dt[1])
    if e["framework"] == "nemo-rl" and pack and tr.get("strategy") in ("fsdp", "fsdp2"):
        # dtensor_policy_worker.py l.181-199 @27d0af945b96c5bf9fa928bf45fd1a6ce016632d: sequence packing loads the model
        # with attn_implementation flash_attention_2 (plan.time.nemo_rl_dtensor_packed)
        card["attention"] = "flash"
        notes.append("NeMo RL DTensor sequence packing: flash_attention_2, packed position_ids (a host sync in each "
                     "attention call, plan.time.packed_flash_syncs)")
    if e.get("software"):
        # the releases the entry's source says the run used (``software.value``, cited in ``software.source``), as
        # map_train reads them: the card's software pins (a SkyRL release before its packed CUDA-IPC buffer,
        # compute.sync.SKYRL_IPC_PER_TENSOR)
        card["software"] = {**(card.get("software") or {}), **e["software"]["value"]}
        notes.append("software: " + ", ".join(f"{k} {v}" for k, v in e["software"]["value"].items())
                     + " (the entry's software)")
    if e["framework"] == "verl" and e.get("verl_version"):
        # the verl the row ran, where the entry states it: from 0.9 the FSDP engine exports uncast
        # (compute.sync.VERL_UNCAST_EXPORT_SINCE)
        card.setdefault("software", {})["verl"] = str(e["verl_version"])
        notes.append(f"verl {e['verl_version']} (the entry's verl_version): software.verl")
    if rollout.get("engine") == "sglang" and e["rollout"].get("sglang_version"):
        # the SGLang release the run installed, where the entry cites it: its default CUDA-graph batch limit
        # (compute.decode_step.sglang_cuda_graph_max_batch)
        card.setdefault("software", {})["sglang"] = str(e["rollout"]["sglang_version"])
        notes.append(f"SGLang {e['rollout']['sglang_version']} (the entry's sglang_version): software.sglang")
    release = nemo_rl_release_of(e)
    if e["framework"] == "nemo-rl" and release:
        card.setdefault("software", {})["nemo-rl"] = release
        notes.append(f"NeMo RL {release} (the release the entry's configs are read at, or its performance-summary"
                     " section's): software.nemo-rl")
    if e["framework"] == "nemo-rl" and rollout["placement"] == "colocate":
        # nemo_rl/models/generation/vllm/vllm_generation.py finish_generation: a colocated engine sleeps
        # (vllm_worker.py: llm.sleep(level=1), enable_sleep_mode=True) and wakes every step (@9dbd9adc)
        rollout["sleep_level"] = 1
        notes.append("NeMo RL colocated: vLLM sleep level 1 after every generation, woken for the refit")
    if tr.get("old_logprob_pass") is not None:
        # the run's own old-policy log-prob pass where its framework decides it from the loss (SkyRL: whenever
        # off-policy correction or the loss reads old log-probs; the entry's old_logprob_pass_source cites it)
        rollout["recompute_old_logprobs"] = bool(tr["old_logprob_pass"])
        notes.append("old-policy log-prob pass " + ("every step" if tr["old_logprob_pass"] else "not run")
                     + " (the run's trainer and loss; rollout.recompute_old_logprobs)")
    if method == "dapo":
        card["roles"] = {"kl_coef": 0.0}
        notes.append("DAPO: no KL term, no reference pass")
    elif e["framework"] == "nemo-rl":
        card["roles"] = {"kl_coef": NEMO_RL_KL_PENALTY}
        notes.append(f"NeMo RL's KL penalty {NEMO_RL_KL_PENALTY} (grpo_math_1B.yaml, which the performance recipes "
                     "inherit): a reference log-prob pass every step")
    roles, n = reference_roles(tr, fsdp_reference_offloaded=e["framework"] == "verl" and tr.get("strategy") in ("fsdp", "fsdp2"))
    if roles:
        card["roles"] = {**card.get("roles", {}), **roles}
    notes += n
    if e["framework"] == "unsloth":
        n = unsloth_section(e, card)
        notes += n
    trl_hf = e["framework"] == "trl" and card["rollout"].get("engine") == "hf"
    if trl_hf:
        notes += trl_hf_section(e, card)
    trl_vllm_lora = (e["framework"] == "trl" and bool(tr.get("lora")) and e["rollout"].get("engine") == "vllm"
                     and e.get("trl_version") in TRL_VLLM_LORA_RELEASES)
    if trl_vllm_lora:
        notes += trl_vllm_lora_section(e, card)
    if tr.get("lora") and e["framework"] not in ("verl", "unsloth") and not trl_hf and not trl_vllm_lora:
        # only verl's, Unsloth's and the read TRL releases' LoRA actors are mapped (reference with adapters disabled,
        # engine serving the adapter or merged weights sent): without this the card would plan full fine-tuning
        extra = (f"; TRL with vLLM only at {', '.join(TRL_VLLM_LORA_RELEASES)}" if e["framework"] == "trl" else "")
        raise Unmapped("skipped", [f"train.lora on a {e['framework']} RL entry: only verl's and Unsloth's LoRA actors are mapped"
                                   f"{extra} (adapters, reference and engine path); not planned as full fine-tuning"])
    if tr.get("lora") and e["framework"] == "verl":
        # the actor's LoRA adapters as the run's launch line sets them (actor_rollout_ref.model.lora_rank / lora_alpha
        # / target_modules); verl computes the reference log-probs on the actor with its adapters disabled
        # (verl/workers/fsdp_workers.py compute_ref_log_prob l.723-726 sets meta_info is_lora, compute_log_prob
        # l.680-690 runs under disable_adapter(); verl/trainer/ppo/ray_trainer.py l.322-323 ref_in_actor: no reference
        # worker when lora_rank > 0), verl-project/verl @7dc3ee7476c9af1042636f44bca9e412d1de1a6d (2025-06-18)
        card["scope"] = "lora"
        card["lora"] = lora_section(tr["lora"], e["framework"])
        card["roles"] = {**card.get("roles", {}), "reference": "lora_disabled"}
        notes.append(f"actor LoRA rank {tr['lora']['rank']} alpha {tr['lora']['alpha']} on"
                     f" {tr['lora'].get('targets', 'all-linear')}; reference = the actor with its adapters disabled")
        if e["rollout"].get("layered_summon") is not None:
            # actor_rollout_ref.rollout.layered_summon as the launch line sets it: the adapter handed to vLLM is
            # collected one decoder layer at a time (verl/utils/fsdp_utils.py layered_summon_lora_params, same commit)
            card["rollout"]["layered_summon"] = bool(e["rollout"]["layered_summon"])
            notes.append(f"verl rollout.layered_summon {str(card['rollout']['layered_summon']).lower()}")
    if e["framework"] == "verl" and tr.get("strategy") in ("fsdp", "fsdp2"):
        # verl's FSDP worker builds torch.optim.AdamW without fused= (volcengine/verl verl/workers/fsdp_workers.py
        # _build_model_optimizer @8e7780f5ee2021cc06c248b7cf87cf31200a38fd and @2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1;
        # verl/workers/config/optimizer.py build_optimizer @2bb42bae6078359c3fdc56ba6c7533e76fc05407): torch's default
        # on CUDA tensors, the foreach implementation, over the FSDP flat parameters
        card["precision"] = {**card.get("precision", {}), "optimizer_impl": "foreach"}
        notes.append("verl FSDP actor: torch.optim.AdamW without fused= (the foreach default)")
    if tr.get("optimizer_impl"):
        # the trainer's AdamW implementation where the entry's source code fixes it (train.optimizer_impl_source cites
        # it): e.g. torch.optim.AdamW built without foreach / fused over FSDP2's DTensors, which torch's default sends
        # down the single-tensor path (compute.offload.torch_cpu_adamw_seconds when the step runs on the host)
        card["precision"] = {**card.get("precision", {}), "optimizer_impl": tr["optimizer_impl"]}
        notes.append(f"trainer AdamW {tr['optimizer_impl']} (train.optimizer_impl): {tr['optimizer_impl_source']}")
    if tr.get("weights_dtype"):
        # the trainer's parameter dtype where the entry's source states it (train.weights_dtype_source cites it): verl's
        # VeOmni engine under mixed_precision false loads the model in bf16 and keeps no fp32 copy, so its export
        # gathers bf16 shards (verl-project/verl verl/workers/engine/veomni/transformer_impl.py l.287-293
        # @ce195c95ea3aa9a8b89b00bbe669e854a91d23d1)
        card["precision"] = {**card.get("precision", {}), "weights": tr["weights_dtype"]}
        notes.append(f"trainer weights {tr['weights_dtype']} (train.weights_dtype): {tr['weights_dtype_source']}")
    if e["framework"] == "deepspeed-chat":
        # DeepSpeed-Chat's critic and reward model (OPT-350M for the blog's OPT runs) when the catalog has them
        from trainfit.catalog.models import resolve_model
        from trainfit.errors import TrainfitError

        for key, role in (("critic_model", "critic"), ("reward_model", "reward_model")):
            try:
                resolve_model(e.get(key) or "")
            except TrainfitError:  # a free-text or unknown model: the card's default stays
                continue
            card["roles"] = {**card.get("roles", {}), role: e[key]}
            notes.append(f"{role.replace('_', ' ')}: {e[key]}")
        script = re.search(r"training_scripts/(\S+?\.sh)", e.get("note") or "")
        lora_dim = DSCHAT_ACTOR_LORA_DIM.get(script.group(1)) if script else None
        if lora_dim:
            # convert_linear_layer_to_lora on decoder.layers.* (weights frozen, biases and norms still trained) and,
            # without --only_optimize_lora, the embeddings (and the tied head) trained in full; the reference is a
            # separate ZeRO-3 copy of the model (rlhf_engine.py _init_ref), not the actor with its adapters off
            card["scope"] = "lora"
            # adapters in 16 bits: DeepSpeed's fp16 engine casts the whole module, LoRA layers included
            # (deepspeed/runtime/engine.py _configure_distributed_model: self.module.half(), @47f9f13b)
            card["lora"] = {"rank": lora_dim, "alpha": 1, "targets": "all-linear", "modules_to_save": ["embed_tokens"],
                            "adapter_dtype": "bf16"}
            card["roles"] = {**card.get("roles", {}), "reference": "gpu"}
            notes.append(f"actor LoRA rank {lora_dim} on the decoder layers, embeddings trained ({script.group(1)}:"
                         " --actor_lora_dim, no --only_optimize_lora); reference a separate ZeRO-3 model")
    from trainfit.catalog.gpus import resolve_gpu as _gpu

    if (e["framework"] == "verl" and tr.get("strategy") != "megatron" and "loss" not in card
            and not (tr.get("tp") or 1) > 1 and _gpu(gpu).compute_capability is not None):
        # verl's FSDP actor computes its log-probs with flash-attn's Triton cross-entropy whenever it imports
        # (verl/utils/torch_functional.py l.30-36, 53-72; every verl from the first release, 30911f133aa3, to
        # verl-project/verl 1dda039b9c63), with inplace_backward=True unless the update computes the entropy
        # (verl/workers/actor/dp_actor.py l.118-122, 304-311; entropy_coeff 0 by default, ppo_trainer.yaml l.46,
        # volcengine/verl @e0d035cd4a6a5c29835516a58d78710a28e73b18), and verl's images install flash-attn
        # (docker/Dockerfile.ngc.vllm l.45, Dockerfile.ngc.vllm0.8 l.56-58
        # @e0d035cd4a6a5c29835516a58d78710a28e73b18; docker/Dockerfile.stable.vllm
        # l.90 @1dda039b9c6311889a9c9a26040677e1254814f9); CUDA images only (docker/Dockerfile.rocm
        # @e0d035cd4a6a5c29835516a58d78710a28e73b18 installs
        # none, so ROCm rows keep the eager path). The in-place temperature division (loss.temperature_copy false) is the
        # legacy actor's through HEAD and the engine workers' until 51504d8495fbede9e8126b2dd5972a8b78f8d4ff
        card["loss"] = {"kernel": "flash_attn", "inplace_backward": True}
        notes.append("verl actor log-probs: flash-attn's cross-entropy, inplace_backward (loss.kernel flash_attn)")
    if (e["framework"] == "verl" and tr.get("strategy") != "megatron" and card.get("method") in ("ppo", "grpo")
            and tr.get("remove_padding") is not False):
        # verl's FSDP actor takes the entropy of every packed token's logits in the old-policy log-prob pass
        # (verl/workers/fsdp_workers.py l.606 compute_log_prob(calculate_entropy=True), dp_actor.py l.57-60, l.123-124:
        # torch.compile'd entropy_from_logits on the remove-padding path, volcengine/verl
        # @e0d035cd4a6a5c29835516a58d78710a28e73b18; fsdp_workers.py l.1011-1012 @b178a3cd56f58b2d502255daba591e92833930a7).
        # Rows with use_remove_padding false take it eagerly on the response slice instead (dp_actor.py l.154-155), not
        # planned here
        # (old_policy: verl from #1100, 25b0f2262, 2025-04-17; an entry on an earlier verl states train.logprob_entropy
        # every_pass, citing it: the reference pass takes it too)
        which = tr.get("logprob_entropy") or "old_policy"
        card["loss"] = {**card.get("loss", {}), "logprob_entropy": which}
        notes.append(f"verl log-prob passes: the compiled entropy over the logits in the {which.replace('_', ' ')}"
                     " pass(es) (loss.logprob_entropy)")
    if e["framework"] == "verl" and card.get("method") in ("ppo", "grpo"):
        # verl's legacy fsdp/megatron workers receive every call's batch as a DataProto padded to the maxima; the
        # engine workers (trainer.use_legacy_worker_impl disable: the default from verl-project/verl
        # 63e8a0d1617b209284011e0fcf1796574f372ffd, 2026-03-26, #5604) receive the trainer's calls unpadded
        # (compute.controller_transfer). An entry on a verl from that commit on states train.legacy_workers false
        legacy = tr.get("legacy_workers", True)
        card["rollout"]["controller_padded_batches"] = legacy
        notes.append("verl single controller: " + ("legacy workers, every call's batch padded to the maxima" if legacy
                     else "engine workers (train.legacy_workers false), the trainer's calls unpadded")
                     + " (rollout.controller_padded_batches)")
    if e["framework"] in CARD_PRESETS:
        card["preset"] = e["framework"]
    return card, notes


ACTOR_PASSES = ("old_logprob", "ref_logprob", "actor_update")
CRITIC_PASSES = ("critic_values", "critic_update")


def role_pass_cards(e: dict[str, Any], card: dict[str, Any]) -> list[tuple[tuple[str, ...], dict[str, Any], str]]:
    """Extra cards for passes an entry runs with other sequences or micro-batches than the card plans
    (``rl_passes`` gives every pass the actor's packed length and micro-batch): (the plan phases to take from
    the extra card, the card, a note).

    * ``train.remove_padding`` False (verl ``actor_rollout_ref.model.use_remove_padding``) or
      ``train.critic.remove_padding`` False (``critic.model.use_remove_padding``): the pass computes every
      sequence padded to max prompt + max response, the shape verl's batch has (prompts left-padded to
      ``data.max_prompt_length``, responses padded to ``rollout.response_length``: vllm_rollout_spmd.py
      ``pad_2d_list_to_length``), and dp_actor.py / dp_critic.py ``_forward_micro_batch`` without
      ``use_remove_padding`` run the model on ``input_ids`` of shape (batch, prompt + response)
      (volcengine/verl @8e7780f5ee2021cc06c248b7cf87cf31200a38fd v0.3.0.post0 and
      @2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1). Dynamic batching still counts the real tokens
      (seqlen_balancing.py ``rearrange_micro_batches``: ``attention_mask.sum``), so a micro-batch holds as
      many sequences as packed, each padded. Attention under flash-attention 2 skips the padding (HF
      ``_upad_input``); the padded card counts it (a few percent of a 7B model's work at 1.5k tokens).
    * ``train.critic.micro_batch_size`` / ``max_token_len_per_gpu``: the critic's own micro-batch
      (``critic.ppo_micro_batch_size_per_gpu``, ``forward_micro_batch_size_per_gpu``,
      ``ppo_max_token_len_per_gpu``), which the card cannot state apart from the actor's."""
    tr, d = e["train"], e["data"]
    ro = card["rollout"]
    eff = int(ro.get("prompt_len_mean") or ro["prompt_len"]) + int(planned_response_mean(ro, e["model"]))
    padded_ro = dict(ro, prompt_len=int(d.get("prompt_len_max") or ro["prompt_len"]), prompt_len_mean=None,
                     response_len_mean=ro["response_len"])
    for key in ("response_clip_ratio", "response_len_batch_max"):  # the real lengths' shape; every one padded here
        padded_ro.pop(key, None)
    # a card with verl's token budget (map_rl): the padded and critic cards keep the budget as the count of
    # sequences it holds packed (the real tokens rearrange_micro_batches counts), each then padded or the critic's
    batch = dict(card["batch"])
    budget = padded_ro.pop("max_tokens_per_micro_batch", None)
    lp_budget = padded_ro.pop("logprob_max_tokens_per_micro_batch", None) or (
        budget if padded_ro.get("logprob_micro_batch_size") is None else None)
    cp = int(card["parallel"].get("context_parallel") or 1)
    if budget:
        batch["micro_batch_size"] = max(1, int(budget) * cp // eff)
    if lp_budget:
        padded_ro["logprob_micro_batch_size"] = max(1, int(lp_budget) * cp // eff)
    out = []
    if tr.get("remove_padding") is False:
        note = (f"actor use_remove_padding False: log-prob and update passes on sequences padded to "
                f"{padded_ro['prompt_len']} + {ro['response_len']} tokens (the card's micro-batches"
                + (", the token budget's packed sequence count" if budget else "") + ")")
        out.append((ACTOR_PASSES, dict(card, rollout=padded_ro, batch=batch), note))
    c = tr.get("critic")
    if c and card["method"] == "ppo":
        padded = c.get("remove_padding") is False
        c_ro = dict(padded_ro if padded else ro)
        c_ro.pop("max_tokens_per_micro_batch", None)
        c_ro.pop("logprob_max_tokens_per_micro_batch", None)
        if c.get("max_token_len_per_gpu"):
            mbs = max(1, int(c["max_token_len_per_gpu"]) // eff)
            how = f"dynamic batch of {c['max_token_len_per_gpu']} real tokens per GPU: {mbs} sequence(s)"
        else:
            mbs = int(c.get("micro_batch_size") or batch["micro_batch_size"])
            how = f"micro-batch of {mbs} sequence(s)"
        c_ro["logprob_micro_batch_size"] = mbs
        c_card = dict(card, rollout=c_ro, batch=dict(card["batch"], micro_batch_size=mbs))
        shape = (f"sequences padded to {c_ro['prompt_len']} + {ro['response_len']} tokens" if padded
                 else "packed sequences")
        note = f"critic{' use_remove_padding False' if padded else ''}: values and update on {shape}, {how}"
        out.append((CRITIC_PASSES, c_card, note))
    return out


def apply_role_passes(e: dict[str, Any], card: dict[str, Any], planned: Planned) -> list[str]:
    """Replace the plan's phases for the passes ``role_pass_cards`` re-plans; the step changes by the same
    seconds (the synchronous step is their sum). Returns the notes."""
    notes = []
    for names, extra_card, note in role_pass_cards(e, card):
        extra = plan_card(extra_card)
        delta = 0.0
        for name in names:
            for key in (name, f"time.{name}"):
                if key in planned.parts and key in extra.parts:
                    if key.startswith("time."):
                        delta += extra.parts[key] - planned.parts[key]
                    planned.parts[key] = extra.parts[key]
                    if name in extra.phase_bounds:
                        planned.phase_bounds[name] = extra.phase_bounds[name]
        if planned.step_s is not None:
            planned.step_s += delta
        notes.append(f"{note} ({delta:+.2f} s on the step)")
    return notes


VERL_KL_LOSS_COEF = 0.001
"""verl's KL coefficient when an entry states the KL term without its value: actor.kl_loss_coef and
algorithm.kl_ctrl.kl_coef, both 0.001 (volcengine/verl verl/trainer/config/ppo_trainer.yaml
@8e7780f5ee2021cc06c248b7cf87cf31200a38fd, tag v0.3.0.post0). Only its sign matters to the time."""


TRL_GRPO_BETA_UNTIL_0_19 = 0.04
"""TRL's GRPOConfig ``beta`` default in every release from v0.14.0 to v0.18.0 (huggingface/trl trl/trainer/grpo_config.py:
``default=0.04`` at v0.14.0 49711efab9e0cc3762d3228c9fd5a8064d489503 l.174 ... v0.18.0
ef4b0b225cf04600332a12a2c83f187623312098 l.391; ``default=0.0`` from v0.19.0 5b3ea9dd43b526f188ef8f63ca16bbe977ec8603
l.413, tagged 2025-06-20). A KL term, so TRL runs a reference log-prob pass (with a PEFT model: the adapter disabled)."""

UNSLOTH_RELEASE_DATES = {"2025.2.4": "2025-02-13", "2025.3.8": "2025-03-06", "2025.3.17": "2025-03-19",
                         "2025.4.8": "2025-05-04", "2025.5.4": "2025-05-15", "2025.5.7": "2025-05-21",
                         "2025.5.9": "2025-05-30"}
"""Commit dates of the Unsloth releases the mapped notebook rows print (unslothai/unsloth unsloth/models/_utils.py
``__version__``: 027b5100c7492bce025fe2f03681f440843e4666 2025-02-13, 0a646e40f521c6951893c1936ee19e218430dcd9
2025-03-06, cf949baabaff0c467829514409d71a5a9159efd1 2025-03-19, 84779ee11b84fb883436b5e3c0c69ca8726728eb 2025-05-04,
c5040761d932efae313ca2c2a6ee8cfca4cbf77c 2025-05-15, dd432007181111141a27f6320bcae8de3ce3dbad 2025-05-21, 03965930e79b52d575f0a722ef2b083b1b26d06a 2025-05-30): all before TRL v0.19.0 (2025-06-20), so the TRL
beside them defaulted to beta 0.04 (``TRL_GRPO_BETA_UNTIL_0_19``; Unsloth 2025.3.8 caps trl<=0.15.2, pyproject.toml
l.54 @0a646e40). A release not listed is not mapped (its TRL default is not established)."""


UNSLOTH_ERA_BITSANDBYTES = "<0.50"
"""The bitsandbytes pin a mapped Unsloth QLoRA row is planned with: every release in ``UNSLOTH_RELEASE_DATES`` predates
bitsandbytes 0.50.0 (tag 0.50.0, bitsandbytes-foundation/bitsandbytes, committed 2026-07-24), the first with a fused
short-row ``gemm_4bit``; before it ``matmul_4bit`` dequantises the whole weight for any call of more than one row
(``bitsandbytes/autograd/_functions.py`` l.512-533 and l.462 at the 0.45.2 tag
7aec4a88465440b6466a526fe9bbb30930a04ba4; ``trainfit.compute.bnb_decode``). The notebooks do not print it."""


UNSLOTH_WITHOUT_EFFICIENT_GRPO = frozenset({"2025.2.4"})
"""Mapped Unsloth releases without the efficient GRPO loss (``loss.kernel: unsloth``, the preset's default): unslothai/
unsloth @027b5100c7492bce025fe2f03681f440843e4666 (2025.2.4) has no unsloth/models/rl_replacements.py and no
``UNSLOTH_RETURN_HIDDEN_STATES`` path, which @0a646e40f521c6951893c1936ee19e218430dcd9 (2025.3.8) has
(rl_replacements.py l.205-285; llama.py l.1072-1074); the later mapped releases keep it (assumed, not read each)."""


def unsloth_section(e: dict[str, Any], card: dict[str, Any]) -> list[str]:
    """Fill ``card`` (in place) for an Unsloth GRPO notebook row: ``preset: unsloth`` (one GPU, the engine in process
    on the trainer's one copy of the base weights, serving its adapter: trainfit.methods.unsloth), the QLoRA / LoRA
    adapter as the notebook's get_peft_model sets it, the reference = the actor with its adapter disabled at TRL's
    beta of the run's time (``UNSLOTH_RELEASE_DATES``), fp16 on a card without bf16 (Unsloth picks fp16 where
    ``is_bfloat16_supported()`` is False, as the T4 banners print 'Bfloat16 = FALSE'). Unmapped where a generate call
    count would be guessed: with gradient accumulation above 1 TRL before 0.17 calls vLLM once per micro-batch and
    later releases once per step, and no notebook prints its TRL release."""
    tr = e["train"]
    m = re.search(r"Unsloth (\d{4}\.\d+\.\d+)", e.get("quote") or "")
    release = m.group(1) if m else None
    if release not in UNSLOTH_RELEASE_DATES:
        raise Unmapped("not_representable", [f"Unsloth {release}: the TRL release beside it (beta's default, generate"
                                             " calls per step) is not established"])
    d = e["data"]
    seqs = d["prompts_per_step"] * d["n_per_prompt"]
    if seqs != int(tr.get("micro_batch_size") or 0):
        raise Unmapped("not_representable", [f"{seqs} sequences per step in micro-batches of {tr.get('micro_batch_size')}"
                                             ": gradient accumulation above 1, and the run's TRL release (not"
                                             " printed) decides whether vLLM is called once per micro-batch or per"
                                             " step (rollout.generation_calls)"])
    lora = tr["lora"]
    targets = lora.get("targets", "all-linear")
    if isinstance(targets, str) and "/" in targets:
        targets = [f"{t.removesuffix('_proj')}_proj" for t in targets.split("/")]
    card["preset"] = "unsloth"
    card["scope"] = "qlora" if lora.get("base") == "4-bit" else "lora"
    card["lora"] = {"rank": lora["rank"], "alpha": lora["alpha"], "targets": targets}
    card["roles"] = {**card.get("roles", {}), "reference": "lora_disabled", "kl_coef": TRL_GRPO_BETA_UNTIL_0_19}
    if release in UNSLOTH_WITHOUT_EFFICIENT_GRPO:
        # the release before Unsloth's efficient GRPO loss: TRL's own log-probs over the logits (methods.unsloth 6.)
        card["loss"] = {**card.get("loss", {}), "chunked": False, "kernel": "liger"}
    notes = [f"preset unsloth (Unsloth {release}, {UNSLOTH_RELEASE_DATES[release]}): the engine on the trainer's one"
             " copy of the base weights, the adapter served by the engine (trainfit.methods.unsloth)"
             + ("" if release == "2025.2.4" else "; read at 2025.2.4, assumed unchanged at this release"),
             f"{card['scope']} rank {lora['rank']} alpha {lora['alpha']} on {lora.get('targets')}; reference = the actor"
             f" with its adapter disabled, TRL's default beta {TRL_GRPO_BETA_UNTIL_0_19} (TRL before v0.19.0)"]
    if card["scope"] == "qlora":
        # the bitsandbytes beside the run: every mapped Unsloth release (UNSLOTH_RELEASE_DATES, 2025-02-13 to 2025-05-30)
        # predates bitsandbytes 0.50.0 (2026-07-24, its fused short-row gemm_4bit), so the engine's 4-bit decode
        # dequantises each weight per step of two or more sequences (trainfit.compute.bnb_decode)
        card["software"] = {**card.get("software", {}), "bitsandbytes": UNSLOTH_ERA_BITSANDBYTES}
        notes.append(f"bitsandbytes {UNSLOTH_ERA_BITSANDBYTES}: the Unsloth release ({UNSLOTH_RELEASE_DATES[release]})"
                     " predates bitsandbytes 0.50.0 (2026-07-24), so the engine's 4-bit linears dequantise per call of"
                     " two or more rows (trainfit.compute.bnb_decode)")
    if tr.get("optimizer"):
        # the notebook's GRPOConfig optim (train.optimizer_source quotes the cell): bitsandbytes' 8-bit AdamW, paged or not
        card["precision"] = {**card.get("precision", {}), "optimizer": tr["optimizer"]}
        notes.append(f"optimizer {tr['optimizer']} ({tr['optimizer_source']})")
    from trainfit.catalog.gpus import resolve_gpu

    gpu = resolve_gpu(card["hardware"]["gpu"])
    if not gpu.bf16_dense_flops_per_s:
        card["precision"] = {**card.get("precision", {}), "compute": "fp16",
                             **({"weights": "fp16"} if card["scope"] == "lora" else {})}
        notes.append("fp16 compute (the card has no bf16; Unsloth's notebooks pick fp16 where"
                     " is_bfloat16_supported() is False)")
    return notes


TRL_HF_RELEASES = ("0.14.0.dev0", "0.14.0")
"""TRL releases whose GRPO path without vLLM the harness maps (``trl_hf_section``), read at v0.14.0
(huggingface/trl @49711efab9e0cc3762d3228c9fd5a8064d489503): a later release changes the batch semantics
(per_device_train_batch_size counts completions from #2776), the log-prob passes and the generate calls (#3283)."""

TRL_MAIN_BEFORE_LOGITS_TO_KEEP = "<0.14"
"""The ``software.trl`` pin of a row that ran TRL main as ``0.14.0.dev0`` (PEP 440: before 0.14.0, so ``<0.14`` admits
it): main carried that version from GRPO's landing (huggingface/trl 0f5ffad26e96d1a0eef568be91da956e81b4a11b, #2565,
2025-01-20) to the v0.14.0 release (49711efab9e0cc3762d3228c9fd5a8064d489503, 2025-01-29 16:37:03 +0000), and
``num_logits_to_keep`` entered GRPO only at 801582ec240c46ecd487a72fcc8944f268380830 (#2683, 2025-01-29 17:12:18
+0100, 25 minutes before the release); before it the policy and reference passes compute the logits of every position
(b6a084c46e17ad3439557b2c75703671eb4db151 trl/trainer/grpo_trainer.py l.219-220: ``logits = model(input_ids).logits``,
``logits[:, :-1, :]``; 0f5ffad2 l.214 the same). Every ``0.14.0.dev0`` row here is a huggingface/cookbook notebook
committed before #2683 (3d4d7691 2025-01-22, 34f8cc90 2025-01-26, f806c021 2025-01-29 15:41:19 +0100), so the pin is
before 0.14 and ``trainfit.methods.roles.logit_positions`` keeps the whole sequence (``TRL_LOGITS_TO_KEEP_SINCE``)."""


def trl_hf_section(e: dict[str, Any], card: dict[str, Any]) -> list[str]:
    """Fill ``card`` (in place) for a TRL GRPO row that generates with transformers' ``generate`` (use_vllm False) at a
    release in ``TRL_HF_RELEASES``, as huggingface/trl trl/trainer/grpo_trainer.py @49711efab9e0cc3762d3228c9fd5a8064d489503
    (v0.14.0) runs it: the PEFT adapter from the entry (LoRA on the trained model), the reference = the actor with its
    adapter disabled when the trainer builds the PEFT model from ``peft_config`` (l.206-209, l.450-451), or a frozen
    copy of the PEFT model when a PeftModel is passed without it (l.203-205, ``train.reference_model`` "copy"), at the
    default beta 0.04
    (``TRL_GRPO_BETA_UNTIL_0_19``), the log-probs over the completion positions' full logits (l.430-444:
    ``num_logits_to_keep``, a log_softmax per row: no fused head, ``loss.chunked`` false; a ``0.14.0.dev0`` row ran
    main before it and keeps every position's logits, ``TRL_MAIN_BEFORE_LOGITS_TO_KEEP``), no old-policy pass (one
    iteration), the trainer's gradient checkpointing as the entry states it (the TrainingArguments default is off)."""
    tr = e["train"]
    if e["trl_version"] not in TRL_HF_RELEASES:
        raise Unmapped("not_representable", [f"TRL {e['trl_version']} without vLLM: only {', '.join(TRL_HF_RELEASES)}"
                                             " are read (batch semantics, log-prob passes, generate calls)"])
    notes: list[str] = []
    if tr.get("lora"):
        card["scope"] = "lora"
        card["lora"] = lora_section(tr["lora"], e["framework"])
        # the reference: with peft_config the actor with its adapter disabled (l.206-209, l.450-451); a PeftModel
        # passed as ``model`` without peft_config gets a frozen deep copy (create_reference_model, l.203-205), run as
        # its own model (l.447-449): the entry's train.reference_model "copy"
        copy = tr.get("reference_model") == "copy"
        card["roles"] = {**card.get("roles", {}), "reference": "gpu" if copy else "lora_disabled"}
        # a 0.14.0.dev0 row ran main before v0.14.0: the same two cases at b6a084c4 (TRL_MAIN_BEFORE_LOGITS_TO_KEEP)
        at = ("l.104-107 @b6a084c4", "l.235-238 @b6a084c4") if e["trl_version"] == "0.14.0.dev0" else (
            "l.203-205 @49711efa", "l.447-451 @49711efa")
        notes.append(f"LoRA rank {tr['lora']['rank']} alpha {tr['lora']['alpha']} on {tr['lora'].get('targets')};"
                     + (" reference = a frozen copy of the PEFT model on the GPU (a PeftModel passed without"
                        f" peft_config: create_reference_model, grpo_trainer.py {at[0]})" if copy else
                        f" reference = the actor with its adapter disabled (grpo_trainer.py {at[1]})"))
    card["roles"] = {**card.get("roles", {}), "kl_coef": float(tr.get("kl_coef") or TRL_GRPO_BETA_UNTIL_0_19)}
    if e.get("reward_model"):
        # a reward model among reward_funcs: TRL scores every completion with its forward (grpo_trainer.py l.471-486
        # @49711efa: the prompts and completions re-tokenized with its own tokenizer, right-padded)
        reward = MODEL_ALIASES.get(e["reward_model"], e["reward_model"])
        card["roles"]["reward_model"] = reward
        notes.append(f"reward model {e['reward_model']}" + (f" planned as {reward} (same config shapes, a scalar head)"
                                                           if reward != e["reward_model"] else ""))
        if tr.get("reward_model_dtype"):
            # the dtype the notebook loads it in (train.reward_model_dtype_source cites it): fp32 without torch_dtype
            card["roles"]["reward_model_dtype"] = tr["reward_model_dtype"]
            notes.append(f"reward model weights {tr['reward_model_dtype']} (train.reward_model_dtype):"
                         f" {tr['reward_model_dtype_source']}")
    if tr.get("autocast") is False:
        # no bf16 / fp16 flag: accelerate prepares every model without autocast (train.autocast_source cites it)
        card["precision"] = {**card.get("precision", {}), "autocast": False}
        notes.append(f"no autocast (train.autocast false): {tr['autocast_source']}")
    card["loss"] = {**card.get("loss", {}), "chunked": False}
    card["parallel"]["gradient_checkpointing"] = bool(tr.get("activation_checkpointing"))
    if e["trl_version"] == "0.14.0.dev0":
        # TRL main before #2683: the logits of every position (TRL_MAIN_BEFORE_LOGITS_TO_KEEP)
        card["software"] = {**card.get("software", {}), "trl": TRL_MAIN_BEFORE_LOGITS_TO_KEEP}
        notes.append(f"beta {card['roles']['kl_coef']} (TRL's default before v0.19); TRL main before"
                     " num_logits_to_keep (#2683): log-probs over every position's full logits (software.trl"
                     f" {TRL_MAIN_BEFORE_LOGITS_TO_KEEP}, loss.chunked false, grpo_trainer.py l.219-220 @b6a084c4)")
        return notes
    notes.append(f"beta {card['roles']['kl_coef']} (TRL's default before v0.19); log-probs over the completion"
                 " positions' full logits (loss.chunked false, grpo_trainer.py l.430-444 @49711efa)")
    return notes


TRL_VLLM_LORA_RELEASES = ("0.23.0", "0.23.1")
"""TRL releases whose GRPO path with vLLM on a PEFT model the harness maps (``trl_vllm_lora_section``), read at v0.23.0
(huggingface/trl @6adfd138d895b7ac257c4079eab7d519a0472aaa) and v0.23.1 (@c7a29304e7b46f4d9a356e2caf5a54eb7bc81dc2,
whose trl/trainer/grpo_trainer.py differs from v0.23.0 only in ``get_high_entropy_mask`` and whose grpo_config.py is
unchanged). Other releases stay refused: their sync, reference and log-prob passes are not read here."""


def trl_vllm_lora_section(e: dict[str, Any], card: dict[str, Any]) -> list[str]:
    """Fill ``card`` (in place) for a TRL GRPO row with vLLM on a PEFT LoRA model at a release in
    ``TRL_VLLM_LORA_RELEASES``, as huggingface/trl trl/trainer/grpo_trainer.py @6adfd138d895b7ac257c4079eab7d519a0472aaa
    (v0.23.0) runs it:

    * sync: once per generation batch (``_last_loaded_step``, l.1150-1152) ``_move_model_to_vllm`` merges the adapter
      (``merge_adapter``), loads every base parameter into vLLM one ``load_weights`` call each (colocate; server mode
      one ``update_named_param`` each), names with the peft prefixes stripped and the ``lora_`` tensors skipped, then
      unmerges (l.897-945): scope lora, the trl preset's per-parameter sync, PEFT's merge and unmerge timed by
      ``plan.rl_sync.with_peft_merge`` (``compute.lora_merge``);
    * reference: beta defaults to 0.0 (trl/trainer/grpo_config.py l.479-480, same commit): no reference model
      (grpo_trainer.py l.421-423) and no reference pass; an entry's ``train.kl_coef`` above 0 runs the actor with its
      adapter disabled (l.424-427, l.1410);
    * old-policy pass: with vLLM and ``vllm_importance_sampling_correction`` (default True, grpo_config.py l.601-602)
      over the whole generation batch although num_iterations is 1 (grpo_trainer.py l.1370-1386): the card's
      ``software.trl`` pin keeps the pass (``methods.roles.trl_old_logprob_pass``);
    * log-probs: the model's logits over the completion positions, divided by the temperature, then
      ``selective_log_softmax`` (``_get_per_token_logps_and_entropies`` l.784-843): no fused head, ``loss.chunked``
      false;
    * gradient checkpointing as the entry states it (GRPOConfig's default True, grpo_config.py l.259-260)."""
    tr = e["train"]
    notes: list[str] = []
    card["scope"] = "lora"
    card["lora"] = lora_section(tr["lora"], e["framework"])
    beta = float(tr.get("kl_coef") or 0.0)
    card["roles"] = {**card.get("roles", {}), "kl_coef": beta}
    if beta > 0:
        card["roles"]["reference"] = "lora_disabled"
    card["software"] = {**card.get("software", {}), "trl": str(e["trl_version"])}
    card["loss"] = {**card.get("loss", {}), "chunked": False}
    if tr.get("activation_checkpointing") is not None:
        card["parallel"]["gradient_checkpointing"] = bool(tr["activation_checkpointing"])
    notes.append(f"TRL {e['trl_version']} with vLLM on a PEFT model: LoRA rank {tr['lora']['rank']} alpha"
                 f" {tr['lora']['alpha']} on {tr['lora'].get('targets')}, merged into the base weights, loaded per"
                 " parameter and unmerged every sync (grpo_trainer.py l.897-945 @6adfd138; plan.rl_sync.with_peft_merge)")
    notes.append(f"beta {beta}" + (" (TRL's default from v0.19): no reference pass" if beta == 0 else
                                   ": reference = the actor with its adapter disabled (l.1410)")
                 + "; old-policy pass for vLLM importance-sampling correction (l.1370-1386, software.trl"
                 f" {e['trl_version']}); log-probs over the completion positions' full logits (loss.chunked false)")
    return notes


def reference_roles(tr: dict[str, Any], *, fsdp_reference_offloaded: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The card's ``roles`` for what an entry publishes about the reference model: ``use_kl`` False (verl
    use_kl_loss and use_kl_in_reward both False: no KL term, so no reference pass; True: a KL coefficient above 0,
    the entry's ``kl_coef`` else ``VERL_KL_LOSS_COEF``, so a GRPO card plans the reference pass) and ``ref_param_offload``
    (verl ref.fsdp_config.param_offload: the reference's weights wait in host memory between its passes).
    ``fsdp_reference_offloaded``: the framework keeps the reference on the host whatever the flag says, as
    verl's FSDP workers do (volcengine/verl verl/workers/fsdp_workers.py ``_build_model_optimizer``: FSDP
    ``CPUOffload(offload_params=True)`` for every role but the actor, @8e7780f5ee2021cc06c248b7cf87cf31200a38fd
    v0.3.0.post0, @2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1, and ``CPUOffloadPolicy`` under FSDP2 at
    b178a3cd56f58b2d502255daba591e92833930a7)."""
    if tr.get("use_kl") is False:
        return {"kl_coef": 0.0}, ["no KL term (use_kl_loss and use_kl_in_reward False): no reference pass"]
    roles: dict[str, Any] = {}
    notes: list[str] = []
    if tr.get("use_kl") is True:
        # a GRPO card's KL coefficient defaults to 0 (TRL's beta), which plans no reference pass
        roles["kl_coef"] = float(tr.get("kl_coef") or VERL_KL_LOSS_COEF)
        notes.append(f"KL term on (use_kl_loss or use_kl_in_reward, coefficient {roles['kl_coef']}): "
                     "a reference log-prob pass every step")
    if tr.get("ref_param_offload") is not None:
        where = "cpu" if tr["ref_param_offload"] or fsdp_reference_offloaded else "gpu"
        roles["reference"] = where
        if fsdp_reference_offloaded and not tr["ref_param_offload"]:
            notes.append("reference param_offload False, but verl's FSDP workers wrap the reference with FSDP's own "
                         "CPU offload whatever that flag says (fsdp_workers.py _build_model_optimizer: cpu_offload = "
                         "None if role == 'actor' else CPUOffload(offload_params=True)): reference on the cpu")
        else:
            notes.append(f"reference param_offload {tr['ref_param_offload']}: reference on the {where}")
    return roles, notes


# ---------------------------------------------------------------- validate and plan

def validate(card: dict[str, Any]):  # noqa: ANN201 - a RunCard
    """Validate a card dict as the CLI does: the preset fills what the card leaves open."""
    from trainfit.spec.card import load_card_dict

    if card.get("preset"):
        from trainfit.methods.presets import apply_preset

        card = apply_preset(card, str(card["preset"]))
    return load_card_dict(card)


@dataclass
class Planned:
    step_s: float | None
    tokens_per_step: float | None
    parts: dict[str, float]
    bound: str | None
    fits: bool | None
    phase_bounds: dict[str, str] = field(default_factory=dict)
    phase_terms: dict[str, dict[str, float]] = field(default_factory=dict)
    """Each timed plan phase's named terms (``PhaseTime.terms``, seconds), for a published timer that covers one part
    of a plan phase (``phase_seconds``: ``also`` entries ``phase.term``; ``offload_terms``)."""
    engine_fits: bool = True
    """False when the plan's rollout engine cannot start: its step then has no generation phase
    (``plan.rl_generation.generation_phase``), so neither the step nor the generation phase is scored."""


def hardware_calibration(e: dict[str, Any], gpu_id: str) -> tuple[Any, list[str]]:
    """A calibration for an entry whose cards differ from the catalog's (``hardware_rates``: a board power
    limit below the rating, ``power_limit_w``; a memory variant's datasheet bandwidth, ``hbm_tb_per_s``),
    the way a user would describe such cards to trainfit (``trainfit calibrate``); None otherwise."""
    hr = e.get("hardware_rates")
    if not hr:
        return None, []
    from trainfit.calibration.file import make_calibration
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates, power_limited_rates

    gpu = resolve_gpu(gpu_id)
    hbm = hr.get("hbm_tb_per_s")
    r = power_limited_rates(default_rates(gpu), power_limit_w=hr.get("power_limit_w") or gpu.tdp_w,
                            rated_power_w=gpu.tdp_w, hbm_bytes_per_s=hbm * 1e12 if hbm else None)
    over = {"matmul_flops_per_s": r.matmul_flops_per_s, "hbm_bytes_per_s": r.hbm_bytes_per_s}
    if r.fp8_matmul_flops_per_s:
        over["fp8_matmul_flops_per_s"] = r.fp8_matmul_flops_per_s
    if r.fp8_precise_matmul_flops_per_s:
        over["fp8_precise_matmul_flops_per_s"] = r.fp8_precise_matmul_flops_per_s
    cal = make_calibration({gpu_id: over}, sources=[f"{e['id']}: published hardware"], created="2026-12-01")
    return cal, [r.sources[-1]]


def plan_card(card: dict[str, Any], calibration: Any = None) -> Planned:
    """Plan a card dict; Unmapped('not_representable') when the card or the planner refuses it (a
    TrainfitError: the run as stated is outside what trainfit can plan), 'skipped' when the planner
    raises anything else (a bug, listed against its point)."""
    from trainfit.errors import CardError, TrainfitError
    from trainfit.plan import make_plan

    try:
        run_card = validate(card)
    except CardError as exc:
        raise Unmapped("not_representable", [f"the card refuses it: {exc}"]) from None
    try:
        plan = make_plan(run_card, calibration=calibration) if calibration is not None else make_plan(run_card)
    except TrainfitError as exc:
        raise Unmapped("not_representable", [f"planner refused: {exc}"]) from None
    except Exception as exc:  # noqa: BLE001 - a planner bug is listed against its point, not fatal here
        raise Unmapped("skipped", [f"planner raised {type(exc).__name__}: {exc}"]) from None
    parts = {k: float(v) for k, v in (plan.time_parts or {}).items() if isinstance(v, (int, float))}
    time = getattr(plan, "time", None)
    bound = getattr(time, "bound", None)
    phase_bounds, phase_terms = {}, {}
    for ph in getattr(time, "phases", None) or ():
        name, secs = getattr(ph, "name", None), getattr(ph, "seconds", None)
        if name and isinstance(secs, (int, float)):
            parts[f"time.{name}"] = float(secs)
        if name and getattr(ph, "bound", None):
            phase_bounds[name] = ph.bound
        terms = getattr(ph, "terms", None)
        if name and terms:
            phase_terms[name] = {k: float(v) for k, v in terms.items() if isinstance(v, (int, float))}
    if bound is None and phase_bounds:
        timed = {k: v for k, v in parts.items() if k.startswith("time.") and k[5:] in phase_bounds}
        if timed:
            bound = phase_bounds[max(timed, key=timed.get)[5:]]
    if bound is None and parts:
        bound = "largest part: " + max(parts, key=parts.get)
    fits = getattr(plan, "fits", None)
    engine = getattr(plan, "rollout", None)
    engine_fits = engine is None or bool(getattr(engine, "engine_fits", True))
    return Planned(plan.step_seconds, plan.tokens_per_step, parts, bound, fits, phase_bounds, phase_terms, engine_fits)


def part_phase(key: str) -> str:
    """Which published phase a ``time_parts`` key (or ``time.<phase>``) belongs to."""
    k = key.lower().removeprefix("time.")
    if "weight_sync" in k:
        return "weight_sync"
    if "generation" in k or "rollout" in k:
        return "generation"
    if any(s in k for s in ("logprob", "log_prob", "frozen_forward", "reference", "ref_")):
        return "logprob"
    if k.startswith(("critic", "reward", "value")):
        return "other"
    if k.startswith(("train", "actor")) or k == "offload":
        return "actor_update"
    return "other"


GENERATION_TIMER_SCOPE = {"verl": VERL_GEN_TIMER_ALSO}
"""Plan phases a framework's generation timer also covers, when the entry publishes no separate weight-sync
time, in a synchronous step (the asynchronous trainers time their wait and their sync apart). verl:
``timing_s/gen`` wraps ``generate_sequences``, whose rollout sharding manager gathers the FSDP
state dict, loads it into vLLM and wakes the engine on entry, and puts it to sleep on exit
(volcengine/verl verl/trainer/ppo/ray_trainer.py ``_timer("gen")`` and verl/workers/sharding_manager/fsdp_vllm.py
``__enter__``/``__exit__`` @8e7780f5ee2021cc06c248b7cf87cf31200a38fd v0.3.0.post0 and
@2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1)."""


VERL_FSDP_OFFLOAD_SHARES = {
    "params_and_optimizer": {"actor_update": 0.6, "logprob": 0.2, "generation": 0.2},
    "optimizer": {"actor_update": 1.0},
}
"""Where verl's timers see the trainer state's trips to the host, as shares of the plan's ``state_offload``.
verl's FSDP worker loads and offloads inside the timed calls (volcengine/verl verl/workers/fsdp_workers.py
@8e7780f5ee2021cc06c248b7cf87cf31200a38fd v0.3.0.post0 and @2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1):
``update_actor`` loads and offloads the fp32 parameter shard (4 B per parameter / ranks) and the AdamW moments
(8 B), ``compute_log_prob`` the parameter shard, ``generate_sequences`` loads the parameter shard for the sync
and offloads it inside the sharding manager: 2 x 12 : 2 x 4 : 2 x 4 of the bytes = 0.6 : 0.2 : 0.2 (fsdp_utils.py
``load_fsdp_model_to_gpu`` / ``offload_fsdp_model_to_cpu`` / ``offload_fsdp_optimizer``). With the optimizer alone,
all of it in ``update_actor``. Only the split is read here; the seconds are the plan's. Without an old-policy pass
the plan prices two weights trips (``plan.rl_offload.trainer_state_offload_phase``: ``w = weights * 2``), so
``VERL_FSDP_OFFLOAD_SHARES_NO_OLD_LOGPROB`` splits them the same way without the log-prob timer's."""

VERL_FSDP_OFFLOAD_SHARES_NO_OLD_LOGPROB = {
    "params_and_optimizer": {"actor_update": 0.75, "generation": 0.25},
    "optimizer": {"actor_update": 1.0},
}
"""``VERL_FSDP_OFFLOAD_SHARES`` for a step with no old-policy pass (``methods.roles.old_logprob_pass`` False):
``update_actor``'s trip of the fp32 parameter shard and the AdamW moments and ``generate_sequences``' trip of the
parameter shard, 2 x 12 : 2 x 4 of the bytes = 0.75 : 0.25 (same source as ``VERL_FSDP_OFFLOAD_SHARES``); the
log-prob timer gets none."""


VERL_MEGATRON_OFFLOAD_SHARES = {
    "params_and_optimizer": {"actor_update": 1 / 3, "logprob": 1 / 3, "generation": 1 / 3},
    "optimizer": {"actor_update": 1.0},
}
"""Where verl's timers see a Megatron trainer's state trips (``rollout.trainer_offload``), as shares of the plan's
``state_offload``. verl's Megatron worker loads and offloads inside the timed calls (volcengine/verl
verl/workers/megatron_workers.py @c711dd74172514f33532c3a67016948b054a7d86): ``update_actor`` the weights and the
optimizer state (l.637-642, l.665-670), ``compute_log_prob`` the weights (l.752-754, l.767-769) and
``generate_sequences`` the weights through ``rollout_mode`` (l.580-582 and l.600, l.696): one weights round trip per
call, the optimizer's in the update only (``plan.rl_offload.trainer_state_offload_phase`` prices three weights trips
where the step has an old-policy pass). Split by the weights' trips, a third each: the optimizer state's pinned round
trip (12 B per parameter of the rank's data-parallel shard) is under 2 % of the state offload on the fully-async
Qwen3-30B-A3B card (0.23 of 20.1 s, its weights copied to fresh host pages under its verl pin) and is left with the
weights' split rather than priced apart. With the optimizer alone, all of it in ``update_actor``. Without an
old-policy pass (``methods.roles.old_logprob_pass`` False: the card's ``rollout.recompute_old_logprobs`` false) the
plan prices two weights trips, the update's and the sync's, so ``VERL_MEGATRON_OFFLOAD_SHARES_NO_OLD_LOGPROB`` splits
them a half each and the log-prob timer gets none."""

VERL_MEGATRON_OFFLOAD_SHARES_NO_OLD_LOGPROB = {
    "params_and_optimizer": {"actor_update": 1 / 2, "generation": 1 / 2},
    "optimizer": {"actor_update": 1.0},
}
"""``VERL_MEGATRON_OFFLOAD_SHARES`` for a step with no old-policy pass: the update's and the sync's weights trips,
the two ``plan.rl_offload.trainer_state_offload_phase`` prices then (``w = weights * 2``)."""


VERL_FSDP_OFFLOAD_SHARES_LORA_REFERENCE = {
    "params_and_optimizer": {"actor_update": 0.25, "logprob": 0.5, "generation": 0.25},
}
"""``VERL_FSDP_OFFLOAD_SHARES`` for a LoRA step whose reference pass is the actor with its adapters disabled
(``plan.rl_offload.verl_lora_reference_trip``): the plan's ``state_offload`` then holds four trips of the parameter
shard, one in each of ``generate_sequences`` (the sharding manager), the old-policy and the reference
``compute_log_prob`` calls (both under the log-prob timers) and ``update_actor`` (verl-project/verl
verl/workers/fsdp_workers.py l.604-607, l.632-636, l.683-684, l.715-716, l.723-727, sharding_manager/fsdp_vllm.py
l.159-160, l.192-193 @7dc3ee7476c9af1042636f44bca9e412d1de1a6d): 1 : 2 : 1. The update's optimizer trip holds the
adapter's AdamW moments alone (8 bytes for each of about 81 M adapter parameters for rank 32 on Qwen2.5-7B,
against 2 to 4 bytes for each of 7.6 B parameters in a trip of the shard: 2 to 4 %), left in the split."""

VERL_FSDP_OFFLOAD_SHARES_LORA_REFERENCE_NO_OLD_LOGPROB = {
    "params_and_optimizer": {"actor_update": 1 / 3, "logprob": 1 / 3, "generation": 1 / 3},
}
"""``VERL_FSDP_OFFLOAD_SHARES_LORA_REFERENCE`` for a step with no old-policy pass: the sync's, the reference pass's
and the update's trips, a third each."""


def offload_share(e: dict[str, Any], phase: str, *, old_logprob: bool = True, lora_reference: bool = False) -> float:
    """The share of the plan's ``state_offload`` a published phase's timer covers (``VERL_FSDP_OFFLOAD_SHARES``,
    ``VERL_MEGATRON_OFFLOAD_SHARES``, or the entry's own ``timer_scope``; 0 for other frameworks, whose offload stays
    with the step's other work). ``old_logprob``: the card's step runs the old-policy pass
    (``methods.roles.old_logprob_pass``); without it the trainer's weights make two trips, not three
    (``VERL_MEGATRON_OFFLOAD_SHARES_NO_OLD_LOGPROB``, ``VERL_FSDP_OFFLOAD_SHARES_NO_OLD_LOGPROB``).
    ``lora_reference``: the card's reference pass is the actor's own with its adapters disabled on verl's FSDP worker
    (``plan.rl_offload.verl_lora_reference_trip``), one more weights trip (``VERL_FSDP_OFFLOAD_SHARES_LORA_REFERENCE``).
    A verl FSDP entry that states ``train.offload`` and no ``rollout.trainer_offload`` is read at ``train.offload``:
    the plan prices verl's actor offload from it then (``plan.rl_offload.verl_fsdp_actor_offload``), and verl runs
    it inside the same timed calls."""
    scope = timer_scope(e, phase)
    if scope is not None:
        return float(scope.get("state_offload_share", 0.0))
    mode = (e.get("rollout") or {}).get("trainer_offload")
    fsdp = e["train"].get("strategy") in ("fsdp", "fsdp2")
    if e.get("framework") == "verl" and fsdp and not mode:
        mode = e["train"].get("offload")
    if e.get("framework") != "verl" or not mode:
        return 0.0
    if e["train"].get("strategy") == "megatron":
        shares = VERL_MEGATRON_OFFLOAD_SHARES if old_logprob else VERL_MEGATRON_OFFLOAD_SHARES_NO_OLD_LOGPROB
        return shares.get(mode, {}).get(phase, 0.0)
    if not fsdp:
        return 0.0
    if lora_reference:
        shares = (VERL_FSDP_OFFLOAD_SHARES_LORA_REFERENCE if old_logprob
                  else VERL_FSDP_OFFLOAD_SHARES_LORA_REFERENCE_NO_OLD_LOGPROB)
        if mode in shares:
            return shares[mode].get(phase, 0.0)
    shares = VERL_FSDP_OFFLOAD_SHARES if old_logprob else VERL_FSDP_OFFLOAD_SHARES_NO_OLD_LOGPROB
    return shares.get(mode, {}).get(phase, 0.0)


def offload_terms(e: dict[str, Any], phase: str) -> tuple[str, ...]:
    """The terms of the plan's ``state_offload`` (``to_host``, ``to_device``) a published phase's timer covers, when
    the entry's ``timer_scope`` names them (``state_offload_terms``): a timer that runs one direction of the trip
    (NeMo RL's refit moves the trainer state to the host; the way back runs under other timers). Exclusive of
    ``state_offload_share``."""
    scope = timer_scope(e, phase) or {}
    if "state_offload_terms" in scope and "state_offload_share" in scope:
        raise ValueError(f"{e['id']}: timer_scope.{phase} sets both state_offload_share and state_offload_terms;"
                         " name the terms the timer covers, or a share, not both")
    return tuple(scope.get("state_offload_terms", ()))


def scope_without(e: dict[str, Any], phase: str, planned: Planned) -> tuple[str, ...]:
    """Terms of the plan's own ``phase`` the published timer does not run, where the entry's ``timer_scope`` names
    them (``timer_scope: {phase: {"without": [terms], "why": cited text}}``): e.g. a weight-sync benchmark whose
    receivers copy the tensors and load no engine (``per_tensor``: the engine's load, ``compute.sync``). Each must be a
    term of the plan's phase (``Planned.phase_terms``)."""
    names = tuple((timer_scope(e, phase) or {}).get("without", ()))
    terms = planned.phase_terms.get(phase, {})
    unknown = [t for t in names if t not in terms]
    if unknown:
        raise ValueError(f"{e['id']}: timer_scope.{phase}.without {unknown} are not terms of the plan's {phase}"
                         f" ({', '.join(sorted(terms))})")
    return names


def timer_scope(e: dict[str, Any], phase: str) -> dict[str, Any] | None:
    """What an entry's published timer for ``phase`` covers besides the phase itself, when the entry says so
    (``timer_scope: {phase: {"also": [plan phases], "state_offload_share": x, "why": cited text}}``): e.g. NeMo RL's
    ``prepare_for_generation`` timer, which also offloads the trainer and wakes the engine."""
    return (e.get("timer_scope") or {}).get(phase)


def validation_in_step(e: dict[str, Any], card: dict[str, Any]) -> tuple[float, str] | None:
    """(seconds, note): the share of the run's validation the published mean step carries, when the entry says its
    step timer holds one (``timer_scope: {"step": {"validation": {...}, "why": cited text}}``); None otherwise.

    NeMo RL runs validation inside ``total_step_time`` every ``val_period`` steps (NVIDIA-NeMo/RL
    nemo_rl/algorithms/grpo.py l.1081 and l.1373-1398 @6c7089300fded94abfa49bb9cbf9eb357d862461, v0.5.0): the refit
    the next step would make runs before it (``POLICY_GENERATION_STALE``), then ``validate`` generates one response
    for each of ``max_val_samples // val_batch_size`` batches of ``val_batch_size`` prompts (l.1681-1712), then the
    engine sleeps and the next step wakes it again: one generation of ``prompts`` x ``generations_per_prompt``
    sequences on the step's engines and one more sleep/wake. A mean over ``window_steps`` consecutive steps holds
    ``window_steps / period_steps`` validations whatever steps it starts at only when ``period_steps`` divides it;
    the entry's data must say so (``ValueError`` otherwise: a window that may or may not hold one is not priced).
    The validation is planned as the card's own generation with the prompts and samples replaced (lengths, engine
    and memory unchanged): the validation set's lengths are not published."""
    import copy

    scope = timer_scope(e, "step")
    val = (scope or {}).get("validation")
    if not val:
        return None
    period, window = int(val["period_steps"]), int(val["window_steps"])
    if period < 1 or window < 1 or window % period:
        raise ValueError(f"{e['id']}: validation every {period} steps in a {window}-step mean: the count varies")
    c = copy.deepcopy(card)
    ro = c["rollout"]
    ro.update(prompts_per_step=int(val["prompts"]), num_generations=int(val.get("generations_per_prompt", 1)))
    ro.pop("generated_prompts_per_step", None)
    planned = plan_card(c)
    gen = planned.parts.get("time.generation", 0.0)
    sleep_wake = planned.parts.get("time.sleep_wake", 0.0)
    share = (window // period) / window
    seconds = share * (gen + sleep_wake)
    note = (f"published step also holds validation: {window // period} of every {window} steps validates"
            f" ({val['prompts']} prompts x {val.get('generations_per_prompt', 1)}: generation {gen:.1f} s + sleep/wake"
            f" {sleep_wake:.2f} s), {seconds:.1f} s a step; {scope['why']}")
    return seconds, note


SEPARATE_LOGPROB_TIMERS = frozenset({"verl"})
"""Frameworks that time the old-policy and the reference log-prob passes apart: verl's trainer wraps
``compute_log_prob`` in ``timing_s/old_log_prob`` and ``compute_ref_log_prob`` in ``timing_s/ref``
(verl/trainer/ppo/ray_trainer.py ``fit``, ``marked_timer("old_log_prob", ...)`` and ``marked_timer("ref", ...)``,
volcengine/verl @8fdc4d3f202f41461f4de9f42a637228e342668b l.1227 and l.1264, v0.5.0). An entry of such a framework that publishes one of the two is compared with that
pass of the plan alone; NeMo RL's ``policy_and_reference_logprobs`` is one timer around both (recorded as
``old_logprob``), so its entries keep both passes."""


def logprob_exclude(e: dict[str, Any]) -> tuple[str, ...]:
    """Plan parts a published log-prob figure does not cover: the reference pass when a framework with separate
    timers (``SEPARATE_LOGPROB_TIMERS``) publishes only the old-policy pass, and the reverse."""
    if e["framework"] not in SEPARATE_LOGPROB_TIMERS:
        return ()
    ph = e["measured"]["phases_s"]
    if ph.get("old_logprob") and not ph.get("ref_logprob"):
        return ("time.ref_logprob",)
    if ph.get("ref_logprob") and not ph.get("old_logprob"):
        return ("time.old_logprob",)
    return ()


def phase_seconds(planned: Planned, phase: str, *, also: tuple[str, ...] = (),
                  exclude: tuple[str, ...] = ()) -> tuple[float | None, list[str]]:
    """trainfit's seconds for one published phase: the sum of the parts that belong to it (the plan's
    ``time`` phases when it has them, else ``time_parts``). ``also``: plan phases the published timer
    covers besides its own (``GENERATION_TIMER_SCOPE``), counted in ``phase`` rather than their own; an entry
    ``phase.term`` takes one named term of a timed plan phase (``Planned.phase_terms``, e.g. ``sleep_wake.sleep``:
    a timer that covers the engine's sleep but not its wake), listed as ``time.phase.term``. ``exclude``: parts the
    published timer does not cover (``logprob_exclude``)."""
    timed = [k for k in planned.parts if k.startswith("time.")]
    pool = timed if timed else [k for k in planned.parts if k != "tokens_per_step"]
    keys = [k for k in pool if (part_phase(k) == phase or k.removeprefix("time.") in also) and k not in exclude]
    for a in also:
        name, _, term = a.partition(".")
        if not term or name not in planned.phase_terms:
            continue  # a whole phase (matched above), or one this plan does not have
        if term not in planned.phase_terms[name]:
            raise ValueError(f"timer scope names {a!r}, but the plan's {name} phase has the terms "
                             f"{', '.join(sorted(planned.phase_terms[name]))}")
        keys.append(f"time.{a}")
    if not keys:
        return None, []
    return sum(key_seconds(planned, k) for k in keys), keys


def key_seconds(planned: Planned, key: str) -> float:
    """Seconds of one ``phase_seconds`` key: a part, or ``time.phase.term`` (one term of a timed phase)."""
    if key in planned.parts:
        return planned.parts[key]
    name, term = key.removeprefix("time.").split(".", 1)
    return planned.phase_terms[name][term]


def phase_bound(planned: Planned, keys: list[str]) -> str | None:
    """The dominant bound of the largest part behind a phase (its key when the plan gives no bound)."""
    if not keys:
        return None
    top = max(keys, key=lambda k: key_seconds(planned, k))
    return planned.phase_bounds.get(top.removeprefix("time.").split(".", 1)[0]) or f"largest part: {top}"


# ---------------------------------------------------------------- the rule of thumb

def rule_params(model: str, config: dict[str, Any] | None) -> tuple[float | None, str]:
    """N for the rule: trainfit's matmul parameters when the shape is known, else nominal."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.catalog.models import catalog_ids, from_catalog
    from trainfit.compute.flops import matmul_params
    from trainfit.errors import TrainfitError

    cid = MODEL_ALIASES.get(model, model)
    if cid in catalog_ids():
        return matmul_params(from_catalog(cid)), "matmul (active, no input embedding)"
    if config and config.get("gated_mlp") is False:
        h, i, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
        q = config["num_attention_heads"] * config["head_dim"]
        kv = config["num_key_value_heads"] * config["head_dim"]
        per_layer = h * (2 * q + 2 * kv) + 2 * h * i
        return layers * per_layer + h * config["vocab_size"], "matmul from model_config (non-gated MLP)"
    if config:
        try:
            cfg = {k: v for k, v in config.items() if v is not None}
            cfg.setdefault("model_type", "qwen2")
            return matmul_params(spec_from_hf_config(cfg, name=model, source="entry")), "matmul from model_config"
        except TrainfitError:
            pass
    if model in NOMINAL_PARAMS:
        return NOMINAL_PARAMS[model][0], "nominal active: " + NOMINAL_PARAMS[model][1]
    m = re.search(r"(\d+(?:\.\d+)?)[bB]\b", model.split("/")[-1].replace("_", "."))
    if m:
        return float(m.group(1)) * 1e9, "nominal (from the name)"
    return None, "no parameter count"


def rule_peak(gpu: str) -> float | None:
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu

    gid = GPU_ALIASES.get(gpu, (gpu,))[0]
    return resolve_gpu(gid).bf16_dense_flops_per_s if gid in gpu_ids() else None


def rule_peak_rl(gpu: str) -> float | None:
    """The RL rule's peak: the card's bf16 dense peak, else its fp16 one (a card without bf16, e.g. the T4, runs the
    step in fp16), as ``pref_rule_seconds`` already falls back for the DPO and reward-model rows."""
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu

    gid = GPU_ALIASES.get(gpu, (gpu,))[0]
    if gid not in gpu_ids():
        return None
    g = resolve_gpu(gid)
    return g.bf16_dense_flops_per_s or g.fp16_dense_flops_per_s


def rule_link(gpu: str) -> float | None:
    """Per-direction GPU-to-GPU bandwidth: NVLink/2, else PCIe (bytes/s)."""
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu

    gid = GPU_ALIASES.get(gpu, (gpu,))[0]
    if gid not in gpu_ids():
        return None
    g = resolve_gpu(gid)
    return g.nvlink_bytes_per_s / 2 if g.nvlink and g.nvlink_bytes_per_s else g.pcie_bytes_per_s


def rule_seconds(flops: float, gpus: int, peak: float | None) -> float | None:
    """FLOPs at ``RULE_MFU`` of the bf16 dense peak on ``gpus`` GPUs."""
    if peak is None or not gpus:
        return None
    return flops / (gpus * peak * RULE_MFU)


def rule_train_seconds(n: float | None, tokens: float, gpus: int, peak: float | None) -> float | None:
    return None if n is None else rule_seconds(6 * n * tokens, gpus, peak)


def pref_rule_seconds(method: str, n: float | None, tokens: float, e: dict[str, Any]) -> float | None:
    """The rule for a DPO / reward-model step, counting the tokens the step runs (``tokens``: chosen + rejected):
    6·N per token for the trained model's forward and backward, plus 2·N per token for DPO's reference forward over
    the same pairs (none where the entry states precomputed reference log-probs, ``reference: precomputed``); at
    ``RULE_MFU`` of the card's dense peak, bf16, or fp16 on a card without bf16 (Volta)."""
    if n is None:
        return None
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu

    gid = GPU_ALIASES.get(e["gpu"], (e["gpu"],))[0]
    if gid not in gpu_ids():
        return None
    g = resolve_gpu(gid)
    per_n = 6.0 + (2.0 if method == "dpo" and e.get("reference") != "precomputed" else 0.0)
    return rule_seconds(per_n * n * tokens, e["gpus"], g.bf16_dense_flops_per_s or g.fp16_dense_flops_per_s)


def implausible_rate(e: dict[str, Any], n: float | None, tokens: float, published_s: float) -> str | None:
    """Why a published training rate cannot be what the stated run did, or None: the least matmul work the
    stated setup must do (forward 2·N and input-gradient 2·N per token, 2·N weight gradients for a full
    fine-tune, 2·N more for the forward that full activation checkpointing re-runs; no attention, no
    elementwise kernels, no optimizer) would need more than the card's datasheet dense peak (bf16, or fp8 for
    an fp8 run): more than every tensor core at its rated clock, doing nothing else."""
    if n is None or not published_s:
        return None
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu

    gid = GPU_ALIASES.get(e["gpu"], (e["gpu"],))[0]
    if gid not in gpu_ids():
        return None
    gpu = resolve_gpu(gid)
    fp8 = e["precision"]["compute"] == "fp8" and gpu.fp8_dense_flops_per_s
    fp4 = e["precision"]["compute"] == "fp4" and gpu.fp4_dense_flops_per_s
    peak = (gpu.fp4_dense_flops_per_s if fp4 else gpu.fp8_dense_flops_per_s if fp8
            else gpu.bf16_dense_flops_per_s) or 0.0
    if not peak:
        return None
    per_n = (4.0 if e["kind"] in ("sft_lora", "sft_qlora") else 6.0) + (
        2.0 if e.get("activation_checkpointing") in ("full", True) else 0.0)
    need = per_n * n * tokens / published_s / (peak * e["gpus"])
    if need <= 1.0:
        return None
    recompute = ", the recompute included" if e.get("activation_checkpointing") in ("full", True) else ""
    return (f"implausible: the published rate needs {need:.2%} of the card's datasheet dense peak "
            f"({peak / 1e12:.0f} TFLOP/s) for the least matmul work of the stated setup ({per_n:.0f}·N per token"
            f"{recompute})")


def rl_rule_figures(e: dict[str, Any], n: float | None) -> dict[str, float | None]:
    """The rule for an RL entry's step and phases (None where an input is missing)."""
    d, ro, tr = e["data"], e["rollout"], e["train"]
    peak = rule_peak_rl(e["gpu"])
    out: dict[str, float | None] = {q: None for q in ("step", *PHASES)}
    link = rule_link(e["gpu"])
    total = _total_params(e["model"])
    if total and link:
        out["weight_sync"] = 2 * total / link
    if n is None or not (d.get("prompts_per_step") and d.get("n_per_prompt")):
        return out
    try:
        prompt, prompt_mean, resp_max, resp_mean, _ = rl_lengths(e)
    except Unmapped:
        return out
    resp = resp_mean or resp_max
    seqs = d["prompts_per_step"] * d["n_per_prompt"]
    generated = seqs * resp
    trained = seqs * ((prompt_mean or prompt) + resp)
    gen_gpus = (ro.get("rollout_gpus") if ro["placement"] == "split" else None) or e["gpus"]
    train_gpus = (ro.get("train_gpus") if ro["placement"] == "split" else None) or e["gpus"]
    epochs = tr.get("ppo_epochs") or 1
    out["step"] = rule_seconds(6 * n * trained + 2 * n * generated, e["gpus"], peak)
    out["generation"] = rule_seconds(2 * n * generated, gen_gpus, peak)
    passes = sum(1 for k in ("old_logprob", "ref_logprob") if e["measured"]["phases_s"].get(k))
    out["logprob"] = rule_seconds(2 * n * trained * passes, train_gpus, peak) if passes else None
    out["actor_update"] = rule_seconds(6 * n * trained * epochs, train_gpus, peak)
    return out


def _total_params(model: str) -> float | None:
    from trainfit.catalog.models import catalog_ids, from_catalog
    from trainfit.memory.weights import total_params

    cid = MODEL_ALIASES.get(model, model)
    return float(total_params(from_catalog(cid))) if cid in catalog_ids() else None


# ---------------------------------------------------------------- rows

def _summary(card: dict[str, Any] | None, e: dict[str, Any]) -> str:
    """A short configuration string (from the card when there is one, else from the entry)."""
    if card is None:
        p = e.get("parallel") or e.get("train") or {}
        dims = " ".join(f"{k.upper()}{v}" for k, v in p.items() if k in ("tp", "pp", "cp", "ep") and (v or 1) > 1)
        return f"{e['gpus']}× {e['gpu']}, {p.get('strategy')} {dims}".strip()
    hw, par = card["hardware"], card["parallel"]
    s = f"{hw['gpus_per_node'] * hw['nodes']}× {hw['gpu']}, {par.get('strategy', 'fsdp')}"
    if par.get("offload", "none") != "none":
        s += f" offload {par['offload']}"
    gc = par.get("gradient_checkpointing", True)
    s += (f", SAC {par.get('selective_checkpointing', 'op')}" if gc == "selective" else ", AC" if gc else ", no AC")
    if gc is True and par.get("checkpoint_every_n_layers"):
        s += f" every {par['checkpoint_every_n_layers']} layers"
    if card.get("precision", {}).get("compute") == "fp8":
        s += f", fp8 {card['precision']['fp8_recipe']}"
    elif card.get("precision", {}).get("compute") == "fp4":
        s += f", fp4 {card['precision']['fp4_recipe']}"
    if card["method"] in ("sft", *PREF_METHODS):
        b = card["batch"]
        s += f", {card['method']} pairs" if card["method"] != "sft" else ""
        s += f", {card['scope']}, {b['micro_batch_size']}×{b['seq_len']}×ga{b['grad_accum']}"
        s += ", compile" if par.get("compile") else ""
    else:
        r = card["rollout"]
        s += (f", {card['method']}, {r.get('prompts_per_step', '-')}×{r.get('num_generations', '-')}, "
              f"prompt {r['prompt_len']} resp ≤{r['response_len']}, {r['placement']} TP{r['tensor_parallel']}")
        s += ", 1-step-off" if r.get("async_mode") == "one_step_off" else ""
    return s


def pipeline_flushes(e: dict[str, Any], planned: Planned) -> list[str]:
    """An entry whose pipeline schedule flushes several times per optimizer step
    (``parallel.pipeline_flushes_per_step``: a training loop that calls the schedule once per local batch,
    e.g. NeMo Automodel ``train_ft.py`` ``_run_train_optim_step``: one ``schedule.step`` per local batch,
    global 32 / local 4 = 8 per step, NVIDIA-NeMo/Automodel @01926a5c443b7979463c73341bf64adf79de638e):
    the card runs its micro-batches in one pipeline pass, so each further flush adds the plan's bubble
    again (the same (p - 1) / v idle micro-step slots). Changes ``planned`` in place; returns the notes."""
    flushes = int(e["parallel"].get("pipeline_flushes_per_step") or 1)
    bubble = planned.parts.get("time.pipeline_bubble", planned.parts.get("pipeline_bubble"))
    if flushes <= 1 or not bubble or planned.step_s is None:
        return []
    extra = (flushes - 1) * bubble
    planned.step_s += extra
    note = (f"{flushes} pipeline flushes per step (the schedule runs once per local batch): the plan's "
            f"{bubble:.2f} s bubble {flushes} times (+{extra:.2f} s)")
    return [note]


def train_rows(entries: list[dict[str, Any]], ledger: list[dict[str, Any]]) -> list[Row]:
    subsets = {"sft_full": "SFT full", "sft_lora": "LoRA / QLoRA", "sft_qlora": "LoRA / QLoRA", "pretrain": "pretrain"}
    rows = []
    for e in entries:
        card, notes, status, reasons = None, [], "mapped", []
        try:
            card, notes = map_train(e)
        except Unmapped as u:
            status, reasons = u.status, u.reasons
        method = e.get("method") or "sft"
        pairs = 2 if method in PREF_METHODS else 1  # chosen + rejected: tokens count both sequences of a pair
        tokens = pairs * train_tokens_per_step(e)
        if card is not None:
            b, hw = card["batch"], card["hardware"]
            par = card["parallel"]
            replica = (par.get("tensor_parallel", 1) * par.get("pipeline_parallel", 1)
                       * par.get("context_parallel", 1))
            dp = max(1, hw["gpus_per_node"] * hw["nodes"] // replica)
            tokens = float(pairs * b["micro_batch_size"] * b["seq_len"] * b["grad_accum"] * dp)
        n, how = rule_params(e["model"], e.get("model_config"))
        subset = PREF_SUBSET if method in PREF_METHODS else subsets[e["kind"]]
        try:
            published_s = published_train_seconds(e, tokens)
        except Unmapped:
            if status != "not_representable":
                raise
            # a recorded, unscored entry whose figure is no step time (e.g. a rounded total over unstated steps):
            # in the ledger with its reasons, no row
            ledger.append({"id": e["id"], "file": e.get("_file", TRAIN_DATA.name), "status": status,
                           "reasons": reasons})
            continue
        row = Row(id=e["id"], subset=subset, quantity="step", model=e["model"], config="",
                  published_s=published_s, source=source_of(e), entry_note=e.get("note", ""),
                  checked=e.get("checked", ""), half=half_of(e["id"]))
        row.rule_s = (pref_rule_seconds(method, n, tokens, e) if method in PREF_METHODS
                      else rule_train_seconds(n, tokens, e["gpus"], rule_peak(e["gpu"])))
        why = implausible_rate(e, n, tokens, row.published_s) if card is not None else None
        if why:
            card, status, reasons = None, "skipped", [why]
        if card is not None:
            try:
                cal, hw_notes = hardware_calibration(e, card["hardware"]["gpu"])
                notes += hw_notes
                planned = plan_card(card, cal)
                notes += pipeline_flushes(e, planned)
                row.trainfit_s, row.bound, row.fits = planned.step_s, planned.bound, planned.fits
                if planned.step_s is None:
                    notes.append("no time: the plan has no step time")
                if planned.tokens_per_step and abs(planned.tokens_per_step / tokens - 1) > 1e-9:
                    notes.append(f"plan counts {planned.tokens_per_step:,.0f} tokens per step, the entry {tokens:,.0f}")
            except Unmapped as u:
                card, status, reasons = None, u.status, u.reasons
        row.config, row.notes, row.status = _summary(card, e), notes + [f"rule N: {how}"], status
        if status != "mapped":
            row.notes = reasons + row.notes
        ledger.append({"id": e["id"], "file": e.get("_file", TRAIN_DATA.name), "status": status, "reasons": reasons})
        rows.append(row)
    return rows


def published_rl_seconds(e: dict[str, Any]) -> tuple[float | None, str]:
    m = e["measured"]
    if m.get("step_s"):
        return float(m["step_s"]), ""
    t = m.get("total_time") or {}
    if t.get("value") and t.get("steps"):
        factor = {"h": 3600.0, "min": 60.0, "s": 1.0}[t.get("unit", "h")]
        return t["value"] * factor / t["steps"], f"step = total time / {t['steps']} steps (mean, with overheads)"
    tokens = nemo_rl_step_tokens(e)
    tput = m.get("throughput") or {}
    if tokens and tput.get("metric") == "tokens_per_s_per_gpu" and tput.get("value"):
        return (tokens / (float(tput["value"]) * e["gpus"]),
                f"step = {tokens:,.0f} tokens a step (prompts × generations × (mean prompt + mean response), the entry's"
                f" lengths) / ({tput['value']} tokens/s/GPU × {e['gpus']} GPUs): NeMo RL's E2E tokens/s/GPU"
                " (NEMO_RL_E2E_TOKENS)")
    return None, ""


NEMO_RL_E2E_TOKENS = (
    "NeMo RL's E2E tokens/s/GPU is total_num_tokens / total_step_time / total_num_gpus, total_num_tokens the summed "
    "input_lengths (prompt + response) of the step's trained batch and total_num_gpus the whole cluster, generation "
    "GPUs included (the code ``throughput_prompt`` cites), in the synchronous and the asynchronous trainer alike: a "
    "row that publishes that figure and no step time has step = its batch's tokens / (figure × GPUs). The tokens are "
    "the entry's prompts × generations × (mean prompt + mean response), so the published step is only as good as the "
    "lengths the entry states (each such entry says where they come from).")
"""Why a NeMo RL row with a published E2E tokens/s/GPU and no step time is scored (``published_rl_seconds``)."""


def nemo_rl_step_tokens(e: dict[str, Any]) -> float | None:
    """Prompt + response tokens of a NeMo RL RL-step row's batch from its stated means (``NEMO_RL_E2E_TOKENS``); None
    for another framework, another kind of row or a row without both means."""
    d = e["data"]
    if (e.get("framework") != "nemo-rl" or e.get("kind") != "rl_step" or not d.get("prompt_len_mean")
            or not d.get("response_len_mean") or not d.get("prompts_per_step") or not d.get("n_per_prompt")):
        return None
    return float(d["prompts_per_step"] * d["n_per_prompt"] * (d["prompt_len_mean"] + d["response_len_mean"]))


def rl_rows(entries: list[dict[str, Any]], ledger: list[dict[str, Any]]) -> list[Row]:
    rows = []
    for e in entries:
        card, notes, status, reasons, planned = None, [], "mapped", [], None
        try:
            card, notes = map_rl(e)
            planned = plan_card(card)
            notes += apply_role_passes(e, card, planned)
        except Unmapped as u:
            card, status, reasons = None, u.status, u.reasons
        n, how = rule_params(e["model"], e.get("model_config"))
        rule = rl_rule_figures(e, n)
        step_s, step_note = published_rl_seconds(e)
        published = {"step": step_s} if e["kind"] == "rl_step" else {}
        ph = e["measured"]["phases_s"]
        published.update({
            "generation": ph.get("generation"), "weight_sync": ph.get("weight_sync"),
            "logprob": (ph.get("old_logprob") or 0) + (ph.get("ref_logprob") or 0) or None,
            "actor_update": ph.get("actor_update"),
        })
        published = {q: v for q, v in published.items() if v}
        if not published:
            status = "skipped" if status == "mapped" else status
            reasons = reasons + ["no per-step or per-phase time published (total time without a step count)"]
        summary = _summary(card, e)
        for q, pub in published.items():
            subset = "RL step" if q == "step" else f"RL phase: {PHASE_TITLES[q]}"
            if q != "weight_sync" and not e["data"].get("response_len_mean") and e["kind"] != "rl_phase":
                subset = ASSUMED_MEAN  # the step's work scales with the mean response: not scored with the rest
            row = Row(id=e["id"], subset=subset, quantity=q,
                      model=e["model"], config=summary, published_s=pub, rule_s=rule.get(q), status=status,
                      source=source_of(e), entry_note=e.get("note", ""), checked=e.get("checked", ""),
                      half=half_of(e["id"]))
            row.notes = (reasons if status != "mapped" else []) + list(notes) + [f"rule N: {how}"]
            if q == "step" and step_note:
                row.notes.append(step_note)
            layout_refused = status == "not_representable"
            if planned is None and q == "generation" and layout_refused:
                gen_only = generation_only_plan(e)
                if gen_only is not None:
                    planned_gen, gen_notes = gen_only
                    row.status = "mapped"
                    row.notes = gen_notes + [f"rule N: {how}"]
                    if planned_gen.engine_fits:
                        row.trainfit_s, row.parts_used = phase_seconds(planned_gen, q)
                        row.bound = phase_bound(planned_gen, row.parts_used)
                    else:  # the reduced training layout's memory verdict is not the run's; the engine's is
                        row.fits = False
                        row.notes.insert(0, ENGINE_DOES_NOT_FIT)
            if planned is not None and q in ("step", "generation") and not planned.engine_fits:
                # a published run started its engine: a fit miss of the memory model, listed with its verdict
                # (``fits`` False, no trainfit figure, so outside the medians), not a run the card cannot state
                row.fits = planned.fits
                row.notes.insert(0, ENGINE_DOES_NOT_FIT)
            elif planned is not None:
                row.fits = planned.fits
                if q == "step":
                    row.trainfit_s, row.bound = planned.step_s, planned.bound
                    validation = validation_in_step(e, card)
                    if validation is not None and row.trainfit_s is not None:
                        row.trainfit_s += validation[0]
                        row.notes.append(validation[1])
                else:
                    also = ()
                    if q == "generation" and not ph.get("weight_sync") and e["rollout"].get("async") in (None, "none"):
                        also = GENERATION_TIMER_SCOPE.get(e["framework"], ())
                    if (scope := timer_scope(e, q)) is not None:
                        also = tuple(scope.get("also", ()))
                        row.notes.append(f"published {q} timer {'also covers' if 'without' not in scope else 'runs'}:"
                                         f" {scope['why']}")
                    exclude = tuple(k for k in (logprob_exclude(e) if q == "logprob" else ()) if k in planned.parts)
                    if exclude:
                        row.notes.append(f"published log-prob timer covers one pass ({e['framework']} times the"
                                         f" old-policy and reference passes apart): {', '.join(exclude)} left out")
                    row.trainfit_s, row.parts_used = phase_seconds(planned, q, also=also, exclude=exclude)
                    without = scope_without(e, q, planned)
                    if without and row.trainfit_s is not None:
                        part = sum(planned.phase_terms[q][t] for t in without)
                        row.trainfit_s -= part
                        row.notes.append(f"the published {q} timer does not run the plan's {', '.join(without)} "
                                         f"({part:.2f} s), left out")
                    from trainfit.methods.roles import old_logprob_pass

                    from trainfit.plan.rl_offload import verl_lora_reference_trip

                    valid = validate(card)
                    share = offload_share(e, q, old_logprob=old_logprob_pass(valid),
                                          lora_reference=verl_lora_reference_trip(valid))
                    moved = planned.parts.get("time.state_offload")
                    if share and moved and row.trainfit_s is not None:
                        row.trainfit_s += share * moved
                        row.parts_used = row.parts_used + ["time.state_offload"]
                        row.notes.append(f"{share:.0%} of the plan's trainer state offload ({moved:.2f} s) in this "
                                         "phase: the framework moves the state inside the timed call")
                    terms = offload_terms(e, q)
                    offload = planned.phase_terms.get("state_offload", {})
                    if terms and offload and row.trainfit_s is not None:
                        unknown = [t for t in terms if t not in offload]
                        if unknown:
                            raise ValueError(f"{e['id']}: timer_scope.{q}.state_offload_terms {unknown} are not terms"
                                             f" of the plan's state_offload ({', '.join(sorted(offload))})")
                        part = sum(offload[t] for t in terms)
                        row.trainfit_s += part
                        row.parts_used = row.parts_used + ["time.state_offload"]
                        row.notes.append(f"the plan's trainer state offload, {' + '.join(terms)} ({part:.2f} s of "
                                         f"{moved:.2f} s), in this phase: the timed call moves the state one way")
                    row.bound = phase_bound(planned, row.parts_used)
                    if row.trainfit_s is None:
                        row.notes.append("no trainfit figure for this phase in the plan")
                    elif subset == ASSUMED_MEAN and q in ("actor_update", "logprob"):
                        ro = card["rollout"]
                        row.assumed_seq_tokens = float((ro.get("prompt_len_mean") or ro["prompt_len"])
                                                       + planned_response_mean(ro, e["model"]))
                        row.implied_seq_tokens = implied_sequence_tokens(e, q, pub)
            rows.append(row)
        ledger.append({"id": e["id"], "file": e.get("_file", RL_DATA.name), "status": status, "reasons": reasons})
    return rows


ENGINE_DOES_NOT_FIT = "the plan's rollout engine does not fit: its step has no generation time"
"""Note of a step or generation row whose plan's rollout engine cannot start (``Planned.engine_fits`` False):
the row stays mapped with ``fits`` False and no trainfit figure."""


def generation_only_plan(e: dict[str, Any]) -> tuple[Planned, list[str]] | None:
    """(plan, notes) for the generation phase of an entry whose training layout the card or the planner refuses
    (pipeline stages that do not divide the layers), else None. The
    generation phase is planned from the rollout section, the hardware and the model alone (``rl_generation.
    generation_phase``: the engine's tensor parallel, its memory budget, the lengths); the training layout
    does not enter it, so the entry is re-mapped with that layout reduced to its tensor parallel (no
    pipeline, expert or context parallel) and only the generation phase of that plan is scored."""
    import copy

    x = copy.deepcopy(e)
    x["train"].update(pp=1, ep=1, cp=1)
    try:
        card, notes = map_rl(x)
        planned = plan_card(card)
    except Unmapped:
        return None
    tr = e["train"]
    return planned, notes + [
        f"generation phase only: the training layout (TP {tr.get('tp')}, PP {tr.get('pp')}, EP {tr.get('ep')},"
        f" CP {tr.get('cp')}) is refused by the card or the planner and does not enter the generation phase; planned with TP"
        f" {tr.get('tp')} alone on the training side"]


IMPLIED_PROMPT = 16
"""Prompt tokens of the implied-length plans (a multiple of the Ulysses / context-parallel sizes)."""


def implied_sequence_tokens(e: dict[str, Any], quantity: str, published: float) -> float | None:
    """The packed length per sequence (prompt + response tokens) at which trainfit's ``quantity`` equals
    the published seconds: the entry re-mapped with every sequence at that length (prompt
    ``IMPLIED_PROMPT`` tokens, the rest response; maxima, batch and token budgets unchanged, so dynamic
    batching re-packs), by bisection on a log scale between 64 tokens and prompt + max response. None
    when trainfit is slower than published even at 64 tokens, faster at the maximum, or the card is
    refused. A diagnostic of what the missing mean would have to be, not a fit: nothing is tuned."""
    import copy

    def seconds(length: float) -> float | None:
        x = copy.deepcopy(e)
        x["data"]["prompt_len_mean"] = IMPLIED_PROMPT
        x["data"]["response_len_mean"] = max(1.0, length - IMPLIED_PROMPT)
        for key in ("response_clip_ratio", "response_len_batch_max"):  # published beside the real mean, not this one
            x["data"].pop(key, None)
        try:
            card, _ = map_rl(x)
            return phase_seconds(plan_card(card), quantity)[0]
        except Unmapped:
            return None

    lo, hi = 64.0, float(IMPLIED_PROMPT + e["data"]["response_len_max"])
    s_lo, s_hi = seconds(lo), seconds(hi)
    if s_lo is None or s_hi is None or not s_lo <= published <= s_hi:
        return None
    for _ in range(24):
        mid = (lo * hi) ** 0.5
        s_mid = seconds(mid)
        if s_mid is None:
            return None
        lo, hi = (mid, hi) if s_mid < published else (lo, mid)
        if hi / lo < 1.005:
            break
    return (lo * hi) ** 0.5


ROUTING = HERE / "results" / "random_init_routing.json"
"""The routed experts a randomly initialised model's tokens reach, per layer, built on CPU as the H200 harnesses build
their models (``benchmarks/random_init_routing.py``), independently of the measured timings."""
RANDOM_ROUTER_CASES = {
    "h200-loop-v4: Qwen3-30B-A3B-L8 lora b1x512": "loop_v4_b1x512",
    "h200-loop-v4: Qwen3-30B-A3B-L8 lora b1x2048": "loop_v4_b1x2048",
    "h200-heldout4: Qwen/Qwen3-30B-A3B lora sdpa ckpt b1x2048 fused experts loop": "heldout4_eager_b1x2048",
}
"""The H200 rows whose per-expert loop runs only the hit experts, and their case in ``ROUTING``."""


def random_router_note(config: dict[str, Any]) -> list[str]:
    """The note of an H200 MoE row: its router has random weights (the harness's normal(0, 0.02) matrices), so the
    experts a layer's tokens pick are not spread as a trained, load-balanced router spreads them; the plan assumes
    they are, unless the row's card states the share (``random_router_hits``). Empty for a dense model."""
    if not any(config.get(k) for k in ("num_experts", "num_local_experts", "n_routed_experts")):
        return []
    return ["random-weight router: the measured step's tokens pick fewer experts than a trained, load-balanced"
            " router's in deeper layers (Qwen3-30B-A3B at 2,048 tokens: 128, 78, 69, 46 experts hit in its first four"
            " layers, 22 to 37 past the fifth, benchmarks/results/random_init_routing.json); the plan assumes every"
            " expert gets its share unless the card states parallel.moe_experts_hit. A grouped"
            " GEMM barely notices; a per-expert loop runs (and syncs) only the experts hit"]


def random_router_hits(pid: str, card: dict[str, Any]) -> list[str]:
    """Sets ``parallel.moe_experts_hit`` on the card of a per-expert-loop row measured on random weights
    (``RANDOM_ROUTER_CASES``) to the mean share of experts hit that ``benchmarks/random_init_routing.py`` built for
    its config, token count and initialisation (``ROUTING``, the mean over its seeds); returns the row's note. Other
    rows: the card unchanged, no note."""
    name = RANDOM_ROUTER_CASES.get(pid)
    if name is None:
        return []
    case = json.loads(ROUTING.read_text())["cases"][name]
    card.setdefault("parallel", {})["moe_experts_hit"] = case["mean_share"]
    lo, hi = case["share_range"]
    return [f"parallel.moe_experts_hit {case['mean_share']:g}: the share of the {case['experts']} experts a layer's"
            f" {case['tokens']:,} tokens reach, mean over {case['layers']} layers and {len(case['seeds'])} draws of"
            f" the harness's random weights ({lo:g}-{hi:g}), built on CPU by benchmarks/random_init_routing.py"
            f" (benchmarks/results/random_init_routing.json), not from this row's timing"]


def h200_rows(ledger: list[dict[str, Any]]) -> list[Row]:
    """The project's own one-GPU H200 training steps, planned with ``gpu_calibrate report``'s card, and its
    no-grad log-prob passes (quantity ``logprob``, ``h200_logprob_row``)."""
    from trainfit.accuracy.gpu import card_dict, label
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.compute.flops import matmul_params

    peak = rule_peak("h200")
    rows = []
    for name in H200_SETS:
        raw = json.loads((H200_RAW / f"{name}.json").read_text())
        for case in raw["cases"]:
            pid = f"h200-{name}: {label(case)}"
            m = case.get("measured") or {}
            if case["pass_kind"] == "logprob" and m.get("step_s"):
                rows.append(h200_logprob_row(case, name, ledger))
                continue
            if case["pass_kind"] != "train_step" or not m.get("step_s"):
                why = "no step time" if case["pass_kind"] in ("train_step", "logprob") else (
                    f"pass kind {case['pass_kind']}, not scored")
                ledger.append({"id": pid, "file": f"gpu_raw/{name}.json", "status": "skipped", "reasons": [why]})
                continue
            card = card_dict(case)
            hits_note = random_router_hits(pid, card)
            tokens = case["micro_batch_size"] * case["seq_len"]
            n = matmul_params(spec_from_hf_config(case["config"], name=case["model"], source="gpu_raw"))
            row = Row(id=pid, subset=f"H200 {name}", quantity="step", model=case["model"],
                      config=f"1× h200, {case['scope']}, {case['attention']}{', AC' if case['ckpt'] else ''}, "
                             f"{case['micro_batch_size']}×{case['seq_len']}, AdamW {case['optimizer_impl']}",
                      published_s=float(m["step_s"]), rule_s=rule_train_seconds(n, tokens, 1, peak),
                      source=f"benchmarks/results/gpu_raw/{name}.json", half=half_of(pid),
                      notes=[*random_router_note(case["config"]), *hits_note,
                             "rule N: matmul (active, no input embedding)"])
            try:
                planned = plan_card(card)
                row.trainfit_s, row.bound, row.fits = planned.step_s, planned.bound, planned.fits
            except Unmapped as u:
                row.status, row.notes = u.status, u.reasons + row.notes
            ledger.append({"id": pid, "file": f"gpu_raw/{name}.json", "status": row.status,
                           "reasons": [] if row.status == "mapped" else row.notes[:1]})
            rows.append(row)
    return rows


H200_LOOP_V4 = H200_RAW / "loop_v4.json"
"""transformers 4.57's per-expert MoE loop on one H200 (``benchmarks/gpu_loop_v4.py``, device call
``benchmarks/gpu_run_loop_v4.sh``): catalog MoE models cut to a few layers at full width."""


def h200_loop_v4_rows(ledger: list[dict[str, Any]]) -> list[Row]:
    """The measured transformers < 5 expert-loop steps (``gpu_loop_v4.py``), planned with its ``card_of`` (the
    truncated config inline, ``parallel.moe_experts: loop``); subset ``H200 loop (transformers 4.57)``."""
    import importlib.util

    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.compute.flops import matmul_params

    spec_ = importlib.util.spec_from_file_location("gpu_loop_v4", HERE / "gpu_loop_v4.py")
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    raw = json.loads(H200_LOOP_V4.read_text())
    peak = rule_peak("h200")
    rows = []
    for case in raw["cases"]:
        m = case.get("measured") or {}
        pid = f"h200-loop-v4: {case['name']} {case['scope']} b{case['mbs']}x{case['seq']}"
        if not m.get("step_s"):
            ledger.append({"id": pid, "file": "gpu_raw/loop_v4.json", "status": "skipped",
                           "reasons": [case.get("error") or "not measured (the call's time ran out)"]})
            continue
        n = matmul_params(spec_from_hf_config(case["config"], name=case["name"], source="gpu_raw"))
        tokens = case["mbs"] * case["seq"]
        row = Row(id=pid, subset=H200_LOOP_SUBSET, quantity="step", model=case["model"],
                  config=f"1× h200, {case['scope']}, sdpa, AC, {case['mbs']}×{case['seq']}, {case['config']['num_hidden_layers']}"
                         " layers, per-expert loop (transformers 4.57.6), AdamW fused",
                  published_s=float(m["step_s"]), rule_s=rule_train_seconds(n, tokens, 1, peak),
                  source="benchmarks/results/gpu_raw/loop_v4.json", half=half_of(pid),
                  notes=[*random_router_note(case["config"]), "rule N: matmul (active, no input embedding)"])
        card = mod.card_of(case, case["config"])
        row.notes[-1:-1] = random_router_hits(pid, card)
        try:
            planned = plan_card(card)
            row.trainfit_s, row.bound, row.fits = planned.step_s, planned.bound, planned.fits
        except Unmapped as u:
            row.status, row.notes = u.status, u.reasons + row.notes
        ledger.append({"id": pid, "file": "gpu_raw/loop_v4.json", "status": row.status,
                       "reasons": [] if row.status == "mapped" else row.notes[:1]})
        rows.append(row)
    return rows


def h200_logprob_row(case: dict[str, Any], name: str, ledger: list[dict[str, Any]]) -> Row:
    """A measured H200 log-prob pass (``gpu_calibrate.py measure_case``: ``torch.no_grad()``, the model's bf16
    logits, ``/ temperature`` and TRL's row-wise ``selective_log_softmax``; one micro-batch) beside the planner's
    forward-only pass (``compute.training.forward_only_time``, what ``plan.rl_passes`` plans each log-prob pass with)
    on one H200 at the catalog's default rates. Rule: 2·N per token."""
    from trainfit.accuracy.gpu import label
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.compute.flops import matmul_params
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import forward_only_time

    pid = f"h200-{name}: {label(case)} logprob"
    spec = spec_from_hf_config(case["config"], name=case["model"], source="gpu_raw")
    tokens = case["micro_batch_size"] * case["seq_len"]
    peak = rule_peak("h200")
    n = matmul_params(spec)
    t = forward_only_time(spec, rates=default_rates(resolve_gpu("h200")), micro_batch_size=case["micro_batch_size"],
                          seq_len=case["seq_len"], micro_steps=1, eager_attention=case["attention"] == "eager")
    row = Row(id=pid, subset=f"H200 {name}", quantity="logprob", model=case["model"],
              config=f"1× h200, {case['scope']}, {case['attention']}, {case['micro_batch_size']}×{case['seq_len']}, "
                     "no-grad log-prob pass", published_s=float(case["measured"]["step_s"]),
              rule_s=rule_seconds(2.0 * n * tokens, 1, peak), trainfit_s=t.seconds, bound=t.bound,
              source=f"benchmarks/results/gpu_raw/{name}.json", half=half_of(pid),
              notes=["rule N: matmul (active, no input embedding)"])
    ledger.append({"id": pid, "file": f"gpu_raw/{name}.json", "status": row.status, "reasons": []})
    return row


# ---------------------------------------------------------------- summaries

def stats(errors: list[float]) -> dict[str, Any]:
    if not errors:
        return {"n": 0, "median_abs": None, "worst": None}
    return {"n": len(errors), "median_abs": statistics.median(abs(x) for x in errors),
            "worst": max(errors, key=abs)}


ASSUMED_MEAN = "RL, mean response not published (default length profile)"
H200_LOOP_SUBSET = "H200 loop (transformers 4.57)"
PREF_SUBSET = "DPO / RM"
SUBSETS = ("SFT full", "LoRA / QLoRA", "pretrain", "RL step", *(f"RL phase: {PHASE_TITLES[p]}" for p in PHASES),
           ASSUMED_MEAN, *(f"H200 {s}" for s in H200_SETS), H200_LOOP_SUBSET, PREF_SUBSET)


def headline(rows: list[Row]) -> list[dict[str, Any]]:
    """Per subset: trainfit and the rule on the same points (those with a trainfit figure), and the rule
    on every point with a published time (mapped or not)."""
    groups = {s: [r for r in rows if r.subset == s] for s in SUBSETS}
    groups["all published training (SFT, LoRA, pretrain)"] = [
        r for r in rows if r.subset in ("SFT full", "LoRA / QLoRA", "pretrain")]
    groups["all rows"] = rows
    out = []
    for name, rs in groups.items():
        both = [r for r in rs if r.error is not None]
        out.append({"subset": name, "trainfit": stats([r.error for r in both]),
                    "rule_same_points": stats([r.rule_error for r in both if r.rule_error is not None]),
                    "rule_all_points": stats([r.rule_error for r in rs if r.rule_error is not None])})
    return out


def halves(rows: list[Row]) -> list[dict[str, Any]]:
    out = []
    for h, title in ((0, "fit half"), (1, "held-out half")):
        rs = [r for r in rows if r.half == h and r.error is not None]
        out.append({"half": title, "trainfit": stats([r.error for r in rs]),
                    "rule_same_points": stats([r.rule_error for r in rs if r.rule_error is not None])})
    return out


def publication_of(source: str) -> str:
    """A row's publication: its source without the commit (``repo path``, or the URL)."""
    return source.split("@", 1)[0].strip() or "(own measurement)"


def by_publication(rows: list[Row]) -> list[dict[str, Any]]:
    """trainfit and the rule per publication (every row with a trainfit figure), largest first: one table's
    figures are the out-of-sample check for the others' mechanisms (the Ultra-Scale table's network rate partly
    in-sample: ``ultrascale_network_check.py``)."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.error is not None:
            groups.setdefault(publication_of(r.source), []).append(r)
    out = [{"publication": k, "trainfit": stats([r.error for r in rs]),
            "rule_same_points": stats([r.rule_error for r in rs if r.rule_error is not None])}
           for k, rs in groups.items()]
    return sorted(out, key=lambda g: (-g["trainfit"]["n"], g["publication"]))


def reason_kind(reason: str) -> str:
    """A reason with its particulars removed, for counting. Only the harness's own catalog misses (``resolve_model``:
    'model <name> not in the catalog ...', ``resolve_gpu``: "GPU '<name>' not in the catalog ...") collapse to
    their kind; any other reason that mentions the catalog (an entry's own ``card_cannot_state``) counts verbatim."""
    if "not in the catalog" in reason and reason.startswith(("model ", "GPU ")):
        return reason.split(" ", 1)[0] + " not in the catalog" + (
            " and no model_config in the entry" if reason.startswith("model ") else "")
    m = re.match(r"(tensor|pipeline|context|expert|Ulysses sequence) parallel \d+$", reason)
    if m:
        return f"{m.group(1)} parallel > 1"
    return reason.split(": rollout.")[0] if reason.startswith("the card refuses") else reason


def counts(ledger: list[dict[str, Any]]) -> dict[str, Any]:
    """Entries by status, and how often each kind of reason occurs (every reason of an entry, once)."""
    out: dict[str, Any] = {}
    for status in ("mapped", "not_representable", "skipped"):
        items = [x for x in ledger if x["status"] == status]
        reasons: dict[str, int] = {}
        for x in items:
            for kind in dict.fromkeys(reason_kind(r) for r in x["reasons"]):
                reasons[kind] = reasons.get(kind, 0) + 1
        out[status] = {"n": len(items), "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))}
    return out


def build() -> dict[str, Any]:
    ledger: list[dict[str, Any]] = []
    rows = train_rows(load_entries(TRAIN_DATA), ledger)
    rows += train_rows(pref_entries(), ledger)
    rows += rl_rows(load_entries(RL_DATA), ledger)
    rows += h200_rows(ledger)
    rows += h200_loop_v4_rows(ledger)
    return {"rows": rows, "ledger": ledger, "headline": headline(rows), "halves": halves(rows),
            "by_publication": by_publication(rows), "counts": counts(ledger), "fit_misses": fit_misses(rows)}


def fit_misses(rows: list[Row]) -> list[dict[str, Any]]:
    """Mapped rows whose plan does not fit in memory although the published run ran: failed fit verdicts.
    ``timed`` False where the plan has no figure for the row (its rollout engine cannot start), so the row
    is outside the medians but still counted here.

    The misses by cause (2026-12-05, 89 points, 76 distinct entries; planned peak / the card's CUDA total, what the
    plan's ``fits`` compares; "engine": the rollout engine cannot start either). Flipped on that date: the six MLPerf
    v5.0 Llama-2-70B LoRA B200 / GB200 rows whose run config sets FP8_ACT=1 (Megatron-Core's fp8 SwiGLU input store,
    ``precision.fp8_activation_input_store``: 192.6 -> 157.6 GiB, fits 178.4 / 185.0); then (98 -> 92 -> 89) the
    v4.1 H200 row and the two v4.0 L40S rows, whose yaml sets ``disable_parameter_transpose_cache: True`` on
    Transformer Engine 1.x (``precision.fp8_param_transpose_cache`` false: each fp8 primary weight's transpose made in
    its linear's backward and freed, memory/fp8.py; the H200 row also reads FP8_ACTIVATION=True into
    ``activation_func_fp8_input_store``, its yaml l.105): H200 194.5 -> 113.7 / 139.8 GiB, L40S 55.3 -> 39.4 /
    44.5 GiB. Later the same day (93 -> 91 -> 89): the two MLPerf v5.0 MI325X rows of AMD's recipe (the same flag on
    ROCm's TE 1.9 fork) and two universal-llm-trainer RTX Pro 6000 rows (their own loss on bf16 logits, no fp32 copy);
    both below.

    * Synthetic weight-sync rows (22; one phase timed on a placeholder training batch; their memory verdict is not the
      published run's, skip): ckptengine-broadcast-* (6; +56 % .. +602 %, engine), slime-blog-weight-sync-* (1),
      skyrl-pr334-megatron-weight-sync-* (2, +82 %), miles-p2p-weight-sync-* (2: glm5 +2 %, kimi-k2 engine only),
      verl-weight-sync-qwen3-* (4, +62 % / +880 %), verl7291-weight-sync-* (7, +0.1 GiB .. +59 %).
    * MLPerf Llama-2-70B LoRA, rest (10 after 2026-12-05). The four Dell v5.0 H200 / H200-NVL rows (fp8_params, TP 1, CP 2 a2a):
      194.5 / 139.8 GiB, +54.7 GiB (+39 %), 128.5 GiB of it weights with their transposes. Open, with what was read:
      in mlcommons/training_results_v5.0 @0fdc28f013256aea84fa36fdaf1e0fa46094b18c
      Dell/benchmarks/llama2_70b_lora/implementations/nemo/ (the files named below),
      the image is nvcr.io/nvidia/pytorch:25.04-py3 (Dockerfile.x86_64 l.15, TE_REVISION=SKIP: the image's
      Transformer Engine 2.x), whose forward keeps the transpose on the weight whenever the input needs a gradient,
      a frozen LoRA base weight included (TE v2.2 module/linear.py l.190-196, module/base.py l.990-996,
      tensor/float8_tensor.py l.425-460; nothing in Megatron-Core 25.04-alpha.rc1's distributed-optimizer path drops
      it), and train.py l.222 sets disable_parameter_transpose_cache=False (TE 2.x keeps an fp8 primary weight's
      transpose either way); their configs set FP8_ACTIVATION=True but the yaml reads FP8_ACT (l.46), cpu_offloading
      CPU_OFFLOADING default False (conf/megatron_gpt_peft_tuning_config.yaml l.53), no recompute, no CUDA graphs: no card field is missing. Their result logs'
      SYSJSON names 'PyTorch Dell Release 24.09' with cuDNN 9.4.0.58 (the 24.09 stack), not the Dockerfile's 25.04:
      which Transformer Engine actually ran is the open question (TE 1.11 builds no transpose cache for weights made
      under the recipe's torch.no_grad() fp8_model_init, custom_llama.py l.66, base.py l.887-893 @v1.11; TE 1.10 fills
      it on the first micro-batch when is_first_microbatch is passed, linear.py l.960-977). Not changed without it.
      MI325X, AMD's recipe (8 mapped rows, 2026-12-05: +1.0 GiB, 257.0 of 256.0 GiB, +0.4 %; the peak is the forward at
      the loss, 128.5 GiB of fp8 weights with their transposes beside 122.9 GiB of activations). Flipped (93 -> 91):
      the two v5.0 rows (AMD, Supermicro), whose yaml l.95 sets disable_parameter_transpose_cache: True on ROCm's TE 1.9
      fork (te_v1.9_mlperf_llama2; read at its release base ifu_release_v1.9 @fc5bb05726ccb24f278e591b312f27cf92e72697:
      module/linear.py l.990-1000 fills the transpose cache only when is_first_microbatch is truthy, l.469-470 the
      dgrad GEMM reads a transpose made per call, no HIP-only path; ROCm/Megatron-LM
      megatron/core/extensions/transformer_engine.py l.204-207 @2b855bafe238ab0949d49609131d2da87fb09000 passes None
      under the flag): precision.fp8_param_transpose_cache false, 64.2 GiB of weights, step time unchanged. Open: the
      six v5.1 rows (AMD, Supermicro, ASUS, MiTAC, MangoBoost x2: mlcommons/training_results_v5.1
      @441d65f4445cd59687466533fd9f55399136e7a4, every one builds ROCm/TransformerEngine
      d0ef413b5bfe9ea33b1c8626e99fb46967a60712 with NeMo v2.3.0). Their yaml sets the same flag (l.96), but that TE
      commit was not readable here and its version is unknown; ROCm's TE 2.x keeps TN-only fp8 GEMMs on HIP
      (transformer_engine/pytorch/utils.py is_non_tn_fp8_gemm_supported: '(not IS_HIP_EXTENSION) and ...', read at
      07f3c6a5fb0586e9cf0f267ff40a19e3601bdcd6), and under TE 2.x the forward keeps the weight's column-wise copy
      whenever the input needs a gradient (the Dell rows above), so the flag is not stated for them. The lead for the
      next reader: every v5.1 MI325X config exports ENABLE_TRANSPOSE_CACHE=0 (AMD's config_MI325X_1x8x1.sh l.76),
      which nothing under the implementation's src/ reads, so a dependency does; ROCm's TE 2.x has a ROCm-only
      keep_fp8_weight_transpose_cache on Linear / LayerNormLinear / LayerNormMLP that drops the weight's column-wise
      copy (https://github.com/ROCm/TransformerEngine/pull/218, opened 2025-06-26, merged; wired into Megatron by
      https://github.com/ROCm/Megatron-LM/pull/86, opened 2025-08-05, merged; both read 2026-12-05). Whether
      bc0be960c2f1fb2c4a57ecd7dec6235c79f85412 / d0ef413 carry it and read that variable was not readable here (the
      snapshots held end 2024-10): with it cited, these six rows would state fp8_param_transpose_cache false as the
      v5.0 rows do (the card's validator reads the field as TE 1.x's; a TE 2.x reading needs its note). Checked and not
      the cause: the catalog's capacity (256 GiB, ROCm's specification table; memory_total_basis spec, no published
      torch or rocm-smi total for this card); recompute (no ACG/ACM/ACL line in either round's MI325X config, the
      yaml's default null); PYTORCH_HIP_ALLOC_CONF (not set in config_MI325X_1x8x1.sh or runtime_tunables.sh of either
      round). The yaml's fp8_activation_input_store key (l.93 v5.0, l.94 v5.1) is not Megatron-Core's
      activation_func_fp8_input_store (ROCm/Megatron-LM transformer_config.py l.84 at the snapshot above), so
      FP8_ACTIVATION=True is not read through it.
    * universal-llm-trainer gpu_test (8 -> 6 on 2026-12-05, 1 GPU). What ran (the entries' notes): pure bf16 weights,
      gradients and AdamW moments (bit bfloat16, amp_training False), 2 x 8,192 tokens, every layer re-entrantly
      checkpointed; the page's 'Model type: torch.bfloat16' is what the cards already plan. The loss: each wrapper calls
      the HF model without labels and scores output.logits[:, :-1, :].reshape(...) with its own nn.CrossEntropyLoss
      outside autocast (src/models/*.py l.84, l.89-99 @aefdc4a4982c8e9e186d4169aa5b902db1067a52), and transformers
      4.49.0 upcasts only inside its own loss (modeling_llama.py l.857-863): the rows now state loss_upcast false
      (loss.upcast false, memory.logits.compute_dtype_ce_bytes; Llama-3.1-8B logits 19.6 -> 11.7 GiB at the forward
      peak). Flipped: Llama-3.1-8B full and Gemma-2-9B LoRA on the RTX Pro 6000. Open (6): the full 8B rows on H100 /
      A100 (Llama-3.1 x2, Qwen3 x1) peak at the foreach AdamW step, allocated 74.9 GiB (bf16 weights, gradients and
      foreach temporaries 15.0 GiB each, moments 29.9 GiB) against the published 78 / 80 GiB, and miss on the
      allocator replay's reserved 83.1 GiB (+4.6 GiB on the H100's 79.2): which reading the page's 'peak' is
      (nvidia-smi or max_memory_reserved) and how much the caching allocator holds beyond the optimizer step's
      allocations on that run are not published. Gemma-2-9B LoRA on H100 / A100 (+8.5 GiB after the change) peaks in
      the backward at 60.3 GiB allocated, 87.0 GiB reserved, against 60 GiB published: the reserved gap (the 256k-vocab
      softcapped logits' 7.8 GiB transients at the loss) is the candidate, not read further; Gemma-2-9B QLoRA on the
      Pro 6000 (fp32 model) likewise.
    * NeMo Automodel 1-GPU LoRA at 2 x 4096 (2): llama3 8B +10.2 GiB (+13 %), qwen2.5 7B +2.2 GiB (+3 %). It does
      run without recompute: examples/llm_benchmark/llama3_1/llama3_1_8b_peft_benchmark.yaml
      @e05319ebf6f74ebfe3bb6621f5416c008661ff6f has no activation_checkpointing key under distributed (strategy
      fsdp2); it sets peft.use_triton: true with dropout 0.1, so Automodel's Triton LoRA kernels (what they save
      for the backward, against PEFT's per-op set the card plans) are the candidate, not yet read.
    * DeepSpeed-Chat PPO (3): OPT-175B +89 GiB (rollout), 30B +10.8 GiB (rollout), 6.7B +18.6 GiB: the hybrid
      engine's inference-time layout and ZeRO-3 gather are the candidates.
    * Unsloth GRPO notebooks on a T4 (4): +0.2 .. +2.5 GiB (1-17 %): Unsloth's offloaded gradient checkpointing and
      vLLM's shared pool are the candidates.
    * fms-acceleration Mistral-7B full, batch 8 (3): +1.9 / +3.0 GiB (A100, 2-4 %), +3.7 GiB (L40, 8 %) at the
      optimizer step.
    * torchtune on RTX 4090 (2): 2 x LoRA FSDP +22.7 GiB (+96 %: activation offloading / the recipe's defaults
      unread), 4 x full FSDP +0.1 GiB.
    * Pretraining (14): gpt-oss-120b / -20b (Automodel, Megatron-Bridge: +8 .. +29 GiB), DeepSeek-V3 MXFP8 on GB200 /
      GB300 (6: +4.9 / +10.6 GiB, 3-4 %), Nemotron-4 340B fp8 +10.2 GiB, flash-attention GPT-3 355M +20.2 GiB,
      torchtitan Llama-2-13B no AC +2.9 GiB, torchtitan PR 1690 Qwen3-32B +0.3 / +0.6 GiB.
    * RL steps (10) and one LoRA row: rocm-blog verl DeepSeek-7B +39 GiB, verl PR 6660 Qwen3.5-27B +25 GiB
      (rollout), verl PR 1629 TP2 +22.6 GiB / TP2PP2 +2 GiB (rollout), verl Megatron practice 7B +10.6 GiB (old log-prob), SkyRL L4 0.5B
      +8 GiB (2), verl issue 7412 4090-48GB +2.3 GiB, TRL cookbook +1.1 GiB, AReaL +1.0 GiB; ms-swift QwQ-32B LoRA
      ZeRO-3 offload Ulysses +8.5 GiB."""
    return [{"id": r.id, "quantity": r.quantity, "timed": r.trainfit_s is not None}
            for r in rows if r.status == "mapped" and r.fits is False]


# ---------------------------------------------------------------- rendering

def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.0%}"


def _abs_pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _secs(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _stat_cells(s: dict[str, Any]) -> str:
    return f"{s['n']} | {_abs_pct(s['median_abs'])} | {_pct(s['worst'])}"


def _worst(rows: list[Row], k: int = 10) -> list[Row]:
    return sorted((r for r in rows if r.error is not None), key=lambda r: (-abs(r.error), r.id, r.quantity))[:k]


_INTRO = [
    "# Step-time accuracy: trainfit and the 6·N rule against published and own step times",
    "",
    "Regenerate: `.venv/bin/python benchmarks/step_times.py` (`--check`: exit 1 if this file or "
    "`step_times.json` would change). Every published entry of `benchmarks/data/published_train_times.json` "
    "and `benchmarks/data/published_rl_times.json` is mapped to a run card, validated like the CLI and "
    "planned with `trainfit.plan.make_plan`; the H200 rows are the project's own one-GPU steps "
    "(`benchmarks/results/gpu_raw/`, the cards of `gpu_calibrate.py report`) and its no-grad log-prob passes "
    "(quantity `logprob`: the planner's forward-only pass, as each RL log-prob pass is planned).",
    "",
    "Error = predicted / published − 1 in **seconds per step** (or per phase): positive = predicted slower "
    f"than the run. Rule of thumb: `6·N·tokens / (gpus · bf16 dense peak · {RULE_MFU:.2f})`, N = trainfit's "
    "matmul parameters (active, input embedding excluded unless tied) or the nominal active count where the "
    "catalog has no shape; RL step adds 2·N per generated token (trained tokens: prompt + mean response, "
    "the max where no mean is published), all at 40 % on every GPU; generation phase 2·N per generated "
    "token on the rollout GPUs; log-prob 2·N per token per published pass; actor update 6·N per token per "
    "epoch on the training GPUs; weight sync = bf16 weight bytes over one per-direction link (NVLink/2, "
    "else PCIe). The bound column is the plan's dominant bound where it exposes one, else its largest "
    "time part.",
]
_SECTIONS = (("Published SFT, LoRA/QLoRA and pretraining steps", ("SFT full", "LoRA / QLoRA", "pretrain")),
             ("Published RL steps", ("RL step", ASSUMED_MEAN)),
             ("Published RL phases", tuple(f"RL phase: {PHASE_TITLES[p]}" for p in PHASES)),
             ("The project's own H200 steps", (*(f"H200 {s}" for s in H200_SETS), H200_LOOP_SUBSET)))


def render_md(res: dict[str, Any]) -> str:
    rows: list[Row] = res["rows"]
    lines = [*_INTRO, "", *_headline_lines(res)]
    for title, subsets in _SECTIONS:
        rs = [r for r in rows if r.subset in subsets and r.status == "mapped"]
        lines += ["", f"## {title}", "", *_point_table(rs)]
    lines += _implied_lines(rows)
    lines += _unmapped_lines(res)
    lines += ["", "## What the model does not know", "",
              "Generated from the worst 10 rows: the mapping's own notes (what the card could not say) and "
              "the source's note (what the run did).", ""]
    for r in _worst(rows):
        mine = "; ".join(x for x in r.notes if not x.startswith("rule N"))
        src = r.entry_note if len(r.entry_note) <= 400 else r.entry_note[:400].rsplit(" ", 1)[0] + " …"
        lines.append(f"- **{r.id}** ({r.quantity}, {_pct(r.error)}; rule {_pct(r.rule_error)}; "
                     f"{r.bound or 'no bound'}): {mine or 'no mapping approximations'}."
                     + (f" Source: {_cell(src)}" if src else ""))
    checked = [r for r in rows if r.checked and r.error is not None]
    if checked:
        lines += ["", "Outliers whose entry records what was checked and ruled out (the entry's `checked`):", ""]
        lines += [f"- **{r.id}** ({r.quantity}, {_pct(r.error)}; {r.subset}): {_cell(r.checked)}" for r in
                  sorted(checked, key=lambda r: (-abs(r.error), r.id, r.quantity))]
    return "\n".join(lines) + "\n"


def _headline_lines(res: dict[str, Any]) -> list[str]:
    c = res["counts"]
    lines = [f"Entries: **{c['mapped']['n']} mapped**, **{c['not_representable']['n']} not representable "
             f"yet** (scored by the rule only), **{c['skipped']['n']} skipped** (reasons below).", "",
             "## Headline", ""]
    misses = res["fit_misses"]
    if misses:
        untimed = [m for m in misses if not m["timed"]]
        listed = (": " + ", ".join(f"{m['id']} ({m['quantity']})" for m in untimed)) if untimed else ""
        lines += [f"Failed fit verdicts: **{len(misses)}** mapped rows whose plan does not fit in memory although "
                  f"the run ran ({len(untimed)} without a trainfit figure, the plan's rollout engine cannot "
                  f"start{listed}).", ""]
    lines += ["trainfit and the rule on the same points (those with a trainfit figure); the last three columns: "
              "the rule on every point with a published time, mapped or not.", "",
              "| subset | n | trainfit median abs | trainfit worst | n | rule median abs | rule worst "
              "| n (rule, all) | rule median abs, all | rule worst, all |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for h in res["headline"]:
        lines.append(f"| {h['subset']} | {_stat_cells(h['trainfit'])} | {_stat_cells(h['rule_same_points'])} "
                     f"| {_stat_cells(h['rule_all_points'])} |")
    lines += ["", "Fit half / held-out half (`int(sha1(id).hexdigest(), 16) % 2`; every row with a trainfit "
              "figure; efficiency constants may be fitted on the fit half only):", "",
              "| half | n | trainfit median abs | trainfit worst | n | rule median abs | rule worst |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for h in res["halves"]:
        lines.append(f"| {h['half']} | {_stat_cells(h['trainfit'])} | {_stat_cells(h['rule_same_points'])} |")
    lines += ["", "By publication (every quantity with a trainfit figure; each table is an out-of-sample check of "
              "the mechanisms the others shaped, except huggingface/nanotron docs/benchmark_summary.svg's network: "
              "its 249 Gb/s comes from the sweep's all-reduce readings, but choosing their high group over the low "
              "one rested on two of its scored cells' step-time errors, so that table's network is partly in-sample; "
              "benchmarks/ultrascale_network_check.py):", "",
              "| publication | n | trainfit median abs | trainfit worst | n | rule median abs | rule worst |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for g in res["by_publication"]:
        lines.append(f"| {_cell(g['publication'])} | {_stat_cells(g['trainfit'])} "
                     f"| {_stat_cells(g['rule_same_points'])} |")
    lines += ["", "Worst 10 (trainfit):", "", "| id | quantity | published s | trainfit s | error | rule error |",
              "|---|---|---:|---:|---:|---:|"]
    for r in _worst(res["rows"]):
        lines.append(f"| {r.id} | {r.quantity} | {_secs(r.published_s)} | {_secs(r.trainfit_s)} "
                     f"| {_pct(r.error)} | {_pct(r.rule_error)} |")
    return lines


def _implied_lines(rows: list[Row]) -> list[str]:
    rs = [r for r in rows if r.assumed_seq_tokens is not None]
    if not rs:
        return []
    lines = ["", "## RL rows without a published mean: the sequence length the published phase implies", "",
             ("verl, OpenRLHF and NeMo RL remove padding and pack sequences up to a token budget, so the actor "
             "update and the log-prob passes cost the tokens actually generated (prompt + response), not the "
             "maximum. Where the mean response is not published the card plans the published prompt maximum "
             "+ the mean of the model's default length profile (compute/response_lengths.py) per sequence. "
             "The last columns give the packed length per sequence (prompt + response) "
             "at which trainfit's figure equals the published time: the entry re-planned with every sequence "
             "at that length, batch, maxima and token budgets unchanged (bisection; `-` when no length in "
             "[64, max] matches). Nothing is fitted: it says what the missing mean would have to be."), "",
             "| id | quantity | published s | trainfit s | tokens/seq planned | tokens/seq implied | planned / implied |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rs:
        imp = r.implied_seq_tokens
        lines.append(f"| {r.id} | {r.quantity} | {_secs(r.published_s)} | {_secs(r.trainfit_s)} "
                     f"| {r.assumed_seq_tokens:,.0f} | {'-' if imp is None else f'{imp:,.0f}'} "
                     f"| {'-' if imp is None else f'{r.assumed_seq_tokens / imp:.1f}×'} |")
    return lines


def _unmapped_lines(res: dict[str, Any]) -> list[str]:
    rows: list[Row] = res["rows"]
    lines = ["", "## Not representable yet (the rule only)", "",
             "The card cannot state these runs (tensor / pipeline / context / Ulysses / expert parallelism, "
             "non-gated MLPs, node-level rollout splits, fully asynchronous trainers); they are not planned.", "",
             "| id | quantity | model | config | published s | rule s | rule error | reason | source |",
             "|---|---|---|---|---:|---:|---:|---|---|"]
    for r in (r for r in rows if r.status == "not_representable"):
        lines.append(f"| {r.id} | {r.quantity} | {r.model} | {_cell(r.config)} | {_secs(r.published_s)} "
                     f"| {_secs(r.rule_s)} | {_pct(r.rule_error)} | {_cell(r.notes[0])} | {r.source} |")
    lines += ["", "## Skipped", "",
              "Entries with a published time (the rule where it has a parameter count and a catalog GPU):", "",
              "| id | quantity | model | published s | rule s | rule error | reason | source |",
              "|---|---|---|---:|---:|---:|---|---|"]
    for r in (r for r in rows if r.status == "skipped"):
        lines.append(f"| {r.id} | {r.quantity} | {r.model} | {_secs(r.published_s)} | {_secs(r.rule_s)} "
                     f"| {_pct(r.rule_error)} | {_cell(r.notes[0])} | {r.source} |")
    with_rows = {r.id for r in rows}
    lines += ["", "Entries without a comparable time:", "", "| id | file | reason |", "|---|---|---|"]
    for x in res["ledger"]:
        if x["status"] != "mapped" and x["id"] not in with_rows:
            lines.append(f"| {x['id']} | {x['file']} | {_cell('; '.join(x['reasons']))} |")
    lines += ["", "Reasons, counted (entries with each kind of reason; an entry can have several):", ""]
    for status in ("not_representable", "skipped"):
        for reason, k in res["counts"][status]["reasons"].items():
            lines.append(f"- {status.replace('_', ' ')}: {k} × {_cell(reason)}")
    return lines


def _point_table(rs: list[Row]) -> list[str]:
    out = ["| id | quantity | model | config | published s | trainfit s | error | rule s | rule error | bound "
           "| source | note |", "|---|---|---|---|---:|---:|---:|---:|---:|---|---|---|"]
    for r in rs:
        note = "; ".join(x for x in r.notes if not x.startswith("rule N"))
        if r.fits is False:
            timed = "time still planned" if r.trainfit_s is not None else "no time planned"
            note = (f"does not fit in memory ({timed}); " + note).rstrip("; ")
        out.append(f"| {r.id} | {r.quantity} | {r.model} | {_cell(r.config)} | {_secs(r.published_s)} "
                   f"| {_secs(r.trainfit_s)} | {_pct(r.error)} | {_secs(r.rule_s)} | {_pct(r.rule_error)} "
                   f"| {r.bound or '-'} | {r.source} | {_cell(note)} |")
    return out


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_round(v) for v in x]
    return x


def render_json(res: dict[str, Any]) -> str:
    points = []
    for r in res["rows"]:
        d = asdict(r)
        d.pop("entry_note")
        d.pop("checked")
        d.update(error=r.error, rule_error=r.rule_error)
        points.append(d)
    out = {"schema": 1, "generated_by": "benchmarks/step_times.py", "error": "predicted / published - 1, seconds",
           "rule_mfu": RULE_MFU, "split": "int(sha1(id).hexdigest(), 16) % 2: 0 fit half, 1 held-out half",
           "counts": res["counts"], "fit_misses": res["fit_misses"], "headline": res["headline"],
           "halves": res["halves"],
           "by_publication": res["by_publication"], "points": points, "entries": res["ledger"]}
    return json.dumps(_round(out), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if step_times.md or step_times.json would change")
    ap.add_argument("--out", type=Path, default=None, help="write step_times.md/.json into this directory instead")
    args = ap.parse_args(argv)
    md_out, json_out = (MD_OUT, JSON_OUT) if args.out is None else (args.out / MD_OUT.name, args.out / JSON_OUT.name)
    res = build()
    md, js = render_md(res), render_json(res)
    if args.check:
        stale = [p.name for p, text in ((MD_OUT, md), (JSON_OUT, js)) if not p.is_file() or p.read_text() != text]
        if stale:
            print(f"stale: {', '.join(stale)} (run .venv/bin/python benchmarks/step_times.py)", file=sys.stderr)
            return 1
        print("step_times.md and step_times.json are up to date")
        return 0
    md_out.parent.mkdir(parents=True, exist_ok=True)
    md_out.write_text(md)
    json_out.write_text(js)
    for h in res["headline"]:
        t, r = h["trainfit"], h["rule_same_points"]
        print(f"{h['subset']:<48} n={t['n']:<3} trainfit {_abs_pct(t['median_abs']):>5} worst {_pct(t['worst']):>6}"
              f"   rule {_abs_pct(r['median_abs']):>5} worst {_pct(r['worst']):>6}")
    print(f"wrote {md_out} and {json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
