"""Accuracy benchmark, part (b): trainfit and its peers against published peak-memory measurements.

The measurements live outside the repository (``<repo>/../shared/reference/measured_points.json``,
38 points with model, method, precision, GPUs, batch, metric, unit, source and a trust note).
This module holds an explicit, reviewed mapping from each point id to the run card a user would
write for that run (``POINTS``), and scores trainfit and the peer estimators on them.

Nothing here is fitted: the measured values are read at run time and never copied into the repo.
Points found for issue 15 are kept in the repository with their sources, in the same shape:
``benchmarks/data/published_deepspeed_points.json`` (ids 101+: DeepSpeed ZeRO out-of-memory and fit reports,
and ms-swift's ZeRO benchmark) and ``benchmarks/data/published_memory_points.json`` (ids 201+: framework
docs and tutorials). Every one of them is scored like the reference points (counted in the medians).

A mapping departs from what the source prints only where the printed setting is ruled out by the
measurement itself (e.g. point 14: the weight shard plus the checkpointed inputs at the printed length
exceed the measured peak) or the source is silent; each such point is flagged ``ambiguous`` and its
notes give the arithmetic, and ``tests/unit/test_published_mapping.py`` re-checks that arithmetic.

Decisions that apply to many points (each point's ``notes`` repeats what applies to it)
--------------------------------------------------------------------------------------

Metric, like with like
    ``allocated`` is compared with ``plan.peak.allocated``, ``reserved`` with
    ``plan.peak.reserved``, ``device`` (nvidia-smi) with ``plan.peak.device``.

    * "peak active" (torchtune's 2024-11 "Optimization flags" table) -> allocated. torchtune's
      ``training.get_memory_stats`` logs ``peak_memory_active`` = ``memory_stats()["active_bytes.all.peak"]``,
      ``peak_memory_alloc`` = ``max_memory_allocated`` and ``peak_memory_reserved`` =
      ``max_memory_reserved``, each / 1024**3 (GiB). Active and allocated count the same live
      blocks (active also counts blocks freed but still in use by a stream: slightly above).
    * "torchtune peak (unspecified)" in the 2024-09 README table (points 1-8) -> allocated: the
      same logging code; the later table of the same README labels its column "Peak Memory Active".
    * The 2024-05 README table (points 9-15): the reference marks 9-10 "likely reserved", and PR
      #961 reproduced 20.2 GB *allocated* for the row printed as 24.1 GB -> the table is read as
      reserved; the whole table is treated alike (one logging call produced it), so 11-15 too.
    * The 2024-04 README/tutorial figures (points 16-21): the tutorials name "peak memory
      reserved" (``max_memory_reserved``) -> reserved for all of them.
    * Point 31 (llama3 tutorial "peak memory usage"): the README of the same weeks calls the same
      runs "peak allocated" -> allocated.
    * PEFT method-comparison JSON (43-49): ``accelerator_memory_reserved_99th`` -> reserved.

Units
    "GiB" -> 2**30, "GB" -> 10**9. Point 8 is printed "GB" in a table whose other rows are GiB
    and produced by code dividing by 1024**3 -> GiB.

Precision
    torchtune trains in pure bf16: ``weights: bf16``, ``master_weights: none``,
    ``optimizer_states: same_as_weights`` (AdamW moments in bf16). torch AdamW in the 2024-09+
    torchtune configs is ``fused: True`` -> ``optimizer_impl: fused``; the 2024-04/05 llama2
    configs did not set it (assumed) -> torch's default on CUDA, ``foreach``. The PEFT
    method-comparison runs call ``torch.optim.AdamW`` with defaults -> ``foreach``.
    bnb ``PagedAdamW8bit`` -> ``paged_adamw_8bit``; bnb ``AdamW8bit`` -> ``adamw_8bit``.
    bnb ``PagedAdamW`` (32-bit) -> ``adamw`` with ``optimizer_states: fp32``: bitsandbytes' 32-bit
    optimizers keep fp32 states whatever the parameter dtype; trainfit has no paged 32-bit AdamW.
    Paging is not modelled by trainfit at all: bnb allocates paged states with
    ``cudaMallocManaged``, outside torch's caching allocator, so torch's allocated/active/reserved
    never count them -- trainfit counts them as device tensors. This is a known limitation, kept
    visible in the errors rather than mapped away.

Features recorded, not modelled
    ``compile`` -> ``parallel.compile: true``: trainfit models torchtune's per-layer compiled decoder
    layers where the compiled rules were measured (dense full training and LoRA; not QLoRA, DoRA, MoE) and
    the compiled per-chunk loss. Packing changes no per-GPU term -> nothing.

Sequence lengths
    Variable-length data is mapped to the length that sets the *peak*: every metric here is a
    maximum (or a 99th percentile) over the steps, and batches are padded to their longest
    sample, so the longest batches decide it. Alpaca "<=512" -> 512 (``max_seq_len`` 512
    truncates, and alpaca-cleaned has samples beyond 512 tokens); MetaMathQA "<=768" -> 768.
    Both are upper bounds for a typical step; such points are flagged ``approx_seq``.

Hardware
    Catalog ids where the GPU is in the catalog. "RTX A6000 48GB" is not: ``gpu: custom,
    gpu_memory_gib: 47.99`` (49,140 MiB as nvidia-smi reports it). "single GPU" / "RTX 4090 /
    A100" (unknown card): the card only changes the fit verdict, never the predicted bytes.

Peers get the same points as case dicts (``peers.py`` format) and are called once each with the
whole list (``*_many``). A peer figure is one number per GPU; it is compared with the same measured
value as trainfit's like-for-like figure. llm-analysis refuses a case that does not fit the
registered card; to get its figure it is given a nominal 1 TiB card and its verdict is then taken
against the real card, like every other peer's.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30
GB = 10**9

# --------------------------------------------------------------------------------------------
# shared card fragments (plain dicts: the same keys a YAML card would hold)
# --------------------------------------------------------------------------------------------

_TT_PURE_BF16 = {"weights": "bf16", "compute": "bf16", "master_weights": "none",
                 "optimizer": "adamw", "optimizer_states": "same_as_weights", "optimizer_impl": "fused"}
"""torchtune: pure bf16, torch AdamW(fused=True), bf16 moments."""
_TT_PURE_BF16_FOREACH = dict(_TT_PURE_BF16, optimizer_impl="foreach")
"""torchtune 2024-04/05 llama2 configs: AdamW without ``fused`` (assumed) -> foreach."""
_TT_QLORA = {"compute": "bf16", "optimizer": "adamw", "optimizer_states": "same_as_weights", "optimizer_impl": "fused"}
_TT_NF4_NOTE = ("lora.dequant torchao: torchtune's QLoRA quantizes the base with torchao's to_nf4 and multiplies "
                "with linear_nf4 (pytorch/torchtune torchtune/modules/peft/lora.py l.14, l.95, l.125 "
                "@30b8519e86d2094879576e16ab1f8d21a6f6f9f7), torchao's NF4Tensor dequantised by PyTorch ops "
                "(pytorch/ao torchao/dtypes/nf4tensor.py l.481, l.557-565 @ff2889540075e8c8d0a2f4b9900da1b9136ae376), "
                "not bitsandbytes' Linear4bit, so bitsandbytes' dequantise buffers are not planned")
"""Why the torchtune QLoRA points of the llama3_1 configs plan ``lora.dequant: torchao`` (the step-time harness's
``TORCHTUNE_NF4`` reads the same lines)."""
_PEFT_BF16_FOREACH = {"weights": "bf16", "compute": "bf16", "master_weights": "none",
                      "optimizer": "adamw", "optimizer_states": "same_as_weights", "optimizer_impl": "foreach"}


def _peft_l40s_card(scope: str, **section: dict) -> dict:
    """A PEFT method_comparison MetaMathQA run (L40S, bs 4, max_seq_length 768, no AC, bf16 model without
    AMP, torch AdamW foreach); ``section``: the scope's own card section (lora, prompt_tuning). Every scored result
    file records ``meta_info.package_info`` ``transformers-version`` 5.13.1 (``torch-version`` 2.13.0+cu130)
    (huggingface/peft method_comparison/MetaMathQA/results/*--llama-3.2-3B-*.json
    @5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40, the ten files of points 43-49 and 501-505): v5's attention and loss
    paths (``memory.attention.legacy_sdpa``: nothing more copied). The loop keeps the model output through backward:
    ``outputs = model(**batch, ...)``, ``loss = outputs.loss``, ``grad_scaler.scale(loss).backward()`` (run.py l.279-281
    at that commit) -> ``loop.keeps_output_through_backward`` (the bf16 logits, 2 B per logit)."""
    return {"model": "meta-llama/Llama-3.2-3B", "scope": scope, **section, "precision": _PEFT_BF16_FOREACH,
            "software": {"transformers": "5.13.1"}, "loop": {"keeps_output_through_backward": True},
            "hardware": {"gpu": "l40s", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": 4, "seq_len": 768}}


def _tt_tutorial_lora_card(*, rank: int, alpha: int, targets: list[str]) -> dict:
    """torchtune's lora_finetune tutorial runs (points 17, 18, 201, 202): 7B_lora_single_device on one GPU,
    bf16 adapters with the builders' dropout, pure bf16 with foreach AdamW, checkpointing, 2 x 512 tokens."""
    return {
        "model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
        "lora": {"rank": rank, "alpha": alpha, "adapter_dtype": "bf16", "dropout": _TT_LORA_DROPOUT_2024,
                 "targets": targets},
        "precision": _TT_PURE_BF16_FOREACH,
        "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
        "parallel": {"strategy": "single", "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 2, "seq_len": 512},
    }

_ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]
_MLP = ["gate_proj", "up_proj", "down_proj"]

A6000 = {"gpu": "custom", "gpu_memory_gib": 47.99, "gpus_per_node": 1}
"""RTX A6000: 48 GB GDDR6, 49,140 MiB in nvidia-smi = 47.99 GiB; not in the GPU catalog."""

_TT_LORA_NOTE = ("torchtune LoRA keeps adapters in bf16 and does not upcast the adapter input: "
                 "lora.adapter_dtype bf16")
_TT_LORA_DROPOUT_2024 = 0.05
"""torchtune's llama2 / llama3 LoRA builders of 2024-04/05 default ``lora_dropout=0.05`` (torchtune/models/llama2/
_model_builders.py @fef3ed10d and @0217d44c2: lora_llama2_7b, qlora_llama2_7b, lora_llama2_70b; llama3's
lora_llama3_8b passes 0.05), and no config of those commits overrides it outside DPO; from 2024-09 the builders
and configs say 0.0."""
_TT_LORA_DROPOUT_NOTE = ("LoRA dropout 0.05: the builders' default at that commit (recorded on the card; the memory "
                         "model does not count dropout's saved output and mask yet)")
_A6000_AC_NOTE = ("the README gives the A6000 and the RTX 4090 rows the same settings (bs 2, packed 2048, "
                  "compile), and a configuration uses the same bytes on either card, yet the A6000 row is about "
                  "twice the 4090 row; the documented knob that moves memory by that much is activation "
                  "checkpointing, and the 4090 row needs it to fit in 24 GB while the 48 GB A6000 does not -> "
                  "off. Still an inference, hence ambiguous.")
_TT_CHUNKED_NOTE = ("torchtune CEWithChunkedOutputLoss (loss.kernel: torchtune): the output projection is split "
                    "into 8 chunks and each chunk is upcast to fp32 in the loss, but every bf16 logit chunk is alive "
                    "at once (2 B/logit)")

# --------------------------------------------------------------------------------------------
# the mapping: point id -> card (or the reason it cannot be planned), metric, unit, notes
# --------------------------------------------------------------------------------------------

POINTS: dict[int, dict[str, Any]] = {
    # ---- torchtune README @30b8519e8 (2024-09-24), llama3.1 table: bs 2, packed 2048, compile on
    1: {
        "card": {
            "model": "meta-llama/Llama-3.1-8B", "scope": "full",
            "precision": dict(_TT_PURE_BF16, optimizer="paged_adamw_8bit", optimizer_in_backward=True),
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "8B_full_single_device.yaml: bnb PagedAdamW8bit + optimizer_in_bwd, AC on, compile, chunked CE. Metric unspecified -> allocated (torchtune logs active/alloc). "
                 "Paged 8-bit states live in cudaMallocManaged memory outside the torch allocator: torch's "
                 "peak never counts them, trainfit does. " + _TT_CHUNKED_NOTE,
    },
    2: {
        "card": {
            "model": "meta-llama/Llama-3.1-8B", "scope": "full",
            "precision": dict(_TT_PURE_BF16, optimizer="paged_adamw_8bit", optimizer_in_backward=True),
            "hardware": A6000,
            "parallel": {"strategy": "single", "gradient_checkpointing": False, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB", "ambiguous": True,
        "notes": "AMBIGUOUS: A6000 row settings undocumented. Optimizer: the default single-device config "
                 "(PagedAdamW8bit + optimizer_in_bwd). grad_ckpt -> False: " + _A6000_AC_NOTE + " A6000 not in the "
                 "catalog: custom 47.99 GiB. Paged states not counted by torch (see point 1). " + _TT_CHUNKED_NOTE,
    },
    3: {
        "card": {
            "model": "meta-llama/Llama-3.1-8B", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "targets": ["q_proj", "v_proj"]},
            "precision": _TT_PURE_BF16,
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "8B_lora_single_device: r8/a16 on q,v, AdamW fused, AC, compile, chunked CE. "
                 "Metric unspecified -> allocated. " + _TT_LORA_NOTE + ". " + _TT_CHUNKED_NOTE,
    },
    4: {
        "card": {
            "model": "meta-llama/Llama-3.1-8B", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "targets": ["q_proj", "v_proj"]},
            "precision": _TT_PURE_BF16,
            "hardware": A6000,
            "parallel": {"strategy": "single", "gradient_checkpointing": False, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB", "ambiguous": True,
        "notes": "AMBIGUOUS: A6000 row settings undocumented; grad_ckpt -> False: " + _A6000_AC_NOTE + " "
                 "A6000: custom 47.99 GiB. "
                 + _TT_LORA_NOTE + ". " + _TT_CHUNKED_NOTE,
    },
    5: {
        "card": {
            "model": "meta-llama/Llama-3.1-8B", "scope": "qlora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "targets": _ATTN + _MLP, "dequant": "torchao"},
            "precision": _TT_QLORA,
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "8B_qlora_single_device: torchao NF4 base (planned as NF4 + double quant; same "
                 "~0.5 B/param), r8 on q,k,v,o + MLP, AdamW fused, AC, compile. Chunked CE "
                 "assumed (all llama3_1 configs at that commit use CEWithChunkedOutputLoss). "
                 + _TT_LORA_NOTE + ". " + _TT_CHUNKED_NOTE + ". " + _TT_NF4_NOTE,
    },
    6: {
        "card": {
            "model": "meta-llama/Llama-3.1-70B", "scope": "full",
            "precision": _TT_PURE_BF16,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "offload": "params_and_optimizer",
                         "gradient_checkpointing": True, "compile": True, "fsdp_shard_embeddings": True},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "70B_full.yaml also sets custom_sharded_layers: ['tok_embeddings', 'output'] (read at torchtune "
                 "0031bfb080bd35ec533c412df883cf2bf7bf7fe4) -> parallel.fsdp_shard_embeddings: the embedding and the head "
                 "are FSDP units of their own, not in the root unit. "
                 "70B_full.yaml: FSDP full_shard with fsdp_cpu_offload (params, grads, optimizer on CPU) -> "
                 "offload params_and_optimizer. '** uses CPU offload with fused optimizer' read as "
                 "AdamW(fused=True) stepping on the CPU; optimizer_in_backward left off (full_finetune_distributed "
                 "had no optimizer_in_bwd then; under param offload trainfit keeps no GPU gradients either way). "
                 "Chunked CE assumed. " + _TT_CHUNKED_NOTE,
    },
    7: {
        "card": {
            "model": "meta-llama/Llama-3.1-70B", "scope": "lora",
            "lora": {"rank": 16, "alpha": 32, "adapter_dtype": "bf16", "targets": ["q_proj", "k_proj", "v_proj"]},
            "precision": _TT_PURE_BF16,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "70B_lora: FSDP full_shard 8xA100, r16/a32 on q,k,v, AdamW fused, AC. Chunked CE assumed. "
                 + _TT_LORA_NOTE + ". " + _TT_CHUNKED_NOTE,
    },
    8: {
        "card": {
            "model": {"params": 405_853_388_800, "reference": "meta-llama/Llama-3.1-70B"}, "scope": "qlora",
            "lora": {"rank": 16, "alpha": 32, "adapter_dtype": "bf16", "targets": _ATTN + _MLP, "dequant": "torchao"},
            "precision": _TT_QLORA,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB", "ambiguous": True,
        "notes": "LIMITATION: Llama-3.1-405B is not in the model catalog; given as a bare count (405,853,388,800) "
                 "with the Llama-3.1-70B reference shape, so base weights are exact but activations, LoRA "
                 "adapter sizes and FSDP units use 70B's shape (h 8192, 80 layers vs 16384, 126): "
                 "underestimate of those terms. Unit printed 'GB' but the table's other rows are GiB and the "
                 "logger divides by 1024**3 -> GiB. bs 2 per the README (config default 1). Chunked CE assumed. "
                 + _TT_NF4_NOTE,
    },
    # ---- torchtune README @0217d44c2 (2024-05-09): bs 4, seq 2048 (70B rows 4096)
    9: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "qlora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "dropout": _TT_LORA_DROPOUT_2024, "targets": _ATTN + _MLP},
            "precision": dict(_TT_QLORA, optimizer_impl="foreach"),
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True},
            "batch": {"micro_batch_size": 4, "seq_len": 2048},
            "software": {"torchao": "0.1"},
        },
        "metric": "reserved", "unit": "GB",
        "notes": "QLoRA r8 all attn + MLP, 1x4090, AC, torch.compile (QLoRA layers: the compiled rules are not measured, planned eager). Metric: "
                 "reference says 'likely reserved' -> reserved. Full (non-chunked) CE at that commit. "
                 "AdamW without fused (assumed) -> foreach. torchtune @0217d44c2 pins torchao==0.1 "
                 "(pyproject.toml): its NF4 load reserve is planned (below this step's peak). " + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    10: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "dropout": _TT_LORA_DROPOUT_2024, "targets": ["q_proj", "v_proj"]},
            "precision": _TT_PURE_BF16_FOREACH,
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 4, "seq_len": 2048},
        },
        "metric": "reserved", "unit": "GB",
        "notes": "LoRA r8 q,v, 1x4090, AC. Metric: reference says 'likely reserved' -> reserved. "
                 "AdamW foreach (assumed). " + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    11: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "dropout": _TT_LORA_DROPOUT_2024, "targets": ["q_proj", "v_proj"]},
            "precision": _TT_PURE_BF16_FOREACH,
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 2},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 4, "seq_len": 2048},
        },
        "metric": "reserved", "unit": "GB", "ambiguous": True,
        "notes": "AMBIGUOUS: grad_ckpt: the 7B_lora.yaml default at that commit is False (override not "
                 "documented) -> True, because the run cannot have had it off: without checkpointing a "
                 "layer saves ~34 bytes per hidden unit per token (Korthikanti et al. 2022, 34sbh with flash "
                 "attention), 34 x 4096 x (4 x 2048) x 32 layers = 34 GiB, over a 24 GB card; the run trained on 2x4090 at 16.2 GB, below the 1-GPU "
                 "checkpointed run of the same table (point 10, 21.3 GB) by 5.1 GB, most of the 6.7 GB of bf16 "
                 "weights that sharding over two GPUs takes off each. FSDP full_shard on 2x4090. Metric: same table as 9-10 -> reserved. "
                 + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    12: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "full",
            "precision": dict(_TT_PURE_BF16_FOREACH, optimizer="paged_adamw", optimizer_in_backward=True),
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 4, "seq_len": 2048},
        },
        "metric": "reserved", "unit": "GB", "ambiguous": True,
        "notes": "AMBIGUOUS: the figure is disputed by the project itself: PR #961 (2024-05-10, "
                 "github.com/pytorch/torchtune/pull/961) could not reproduce 24.1 GB with every input padded to "
                 "2048 and measured 20.2 GB allocated ('similar for reserved'), a maintainer 22.3 GB on an A100; "
                 "the PR was closed without a corrected table. The 4x4090 full row (point 13) prints the same "
                 "24.1 GB. bnb PagedAdamW (32-bit) + optimizer_in_bwd -> paged_adamw (fp32 states, even for bf16 params) "
                 "+ optimizer_in_backward. The states are paged (cudaMallocManaged, outside torch's allocator, "
                 "evicted to host under pressure), so trainfit keeps them out of allocated/reserved. "
                 "Metric: same table as 9-10 -> reserved; PR #961 reproduced 20.2 GB allocated.",
    },
    13: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "full",
            "precision": _TT_PURE_BF16_FOREACH,
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 4},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 4, "seq_len": 2048},
        },
        "metric": "reserved", "unit": "GB",
        "notes": "Full FT pure bf16, AdamW bf16 states (foreach assumed: no fused flag in the 2024-05 config), "
                 "FSDP full_shard 4x4090, AC. Metric: same table as 9-10 -> reserved.",
    },
    14: {
        "card": {
            "model": "meta-llama/Llama-2-70b-hf", "scope": "lora",
            "lora": {"rank": 16, "alpha": 32, "adapter_dtype": "bf16", "dropout": _TT_LORA_DROPOUT_2024, "targets": ["q_proj", "k_proj", "v_proj"]},
            "precision": _TT_PURE_BF16_FOREACH,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 4, "seq_len": 512},
        },
        "metric": "reserved", "unit": "GB", "ambiguous": True, "approx_seq": True,
        "notes": "AMBIGUOUS: the table row says 'Seq Length = 4096', which the measured 26.4 GB rules out: "
                 "with checkpointing every layer keeps its input, 80 x (4 x 4096 x 8192 x 2 B) = 21.5 GB, and "
                 "the FSDP shard of the bf16 weights is 69e9 x 2 B / 8 = 17.2 GB, together 38.7 GB > 26.4 GB "
                 "before any other term. The run config at that commit (recipes/configs/llama2/70B_lora.yaml "
                 "@0217d44c2) trains on torchtune.datasets.alpaca_dataset, whose max_seq_len defaults to 512 "
                 "(torchtune/datasets/_alpaca.py @0217d44c2) -> seq 512, the longest padded alpaca batch "
                 "(approx-seq). 70B LoRA r16 q,k,v, FSDP 8xA100, bs 4, AC. Metric: same table as 9-10 -> "
                 "reserved. " + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    15: {
        "card": {
            "model": "meta-llama/Llama-2-70b-hf", "scope": "full",
            "precision": dict(_TT_PURE_BF16_FOREACH, optimizer="paged_adamw"),
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 4, "seq_len": 4096},
        },
        "metric": "reserved", "unit": "GB", "ambiguous": True,
        "notes": "AMBIGUOUS: no 70B full config existed at that commit; settings undocumented. bnb PagedAdamW "
                 "(32-bit) -> paged_adamw (fp32 states in CUDA managed memory, outside allocated/reserved). FSDP 8xA100, AC assumed on. "
                 "Metric: same table as 9-10 -> reserved.",
    },
    # ---- torchtune README @fef3ed10d + tutorials (2024-04): alpaca, max_seq_len 512, bs 2
    16: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "qlora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "dropout": _TT_LORA_DROPOUT_2024, "targets": _ATTN + _MLP},
            "precision": dict(_TT_QLORA, optimizer_impl="foreach"),
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 2, "seq_len": 512},
            "software": {"torchao": "0.1"},
        },
        "metric": "reserved", "unit": "GB", "approx_seq": True,
        "notes": "Alpaca unpacked, max_seq_len 512 -> seq 512 (the longest padded batch sets a run-wide "
                 "max_memory_reserved; an upper bound for typical steps). GPU 'RTX 4090 / A100' -> rtx4090 "
                 "(the README row). Metric: max_memory_reserved -> reserved. torchtune @fef3ed10d pins "
                 "torchao==0.1 (pyproject.toml): its NF4 quantization's load-time reserved is planned "
                 "(memory/nf4_load.py; the source's 'model-init reserved 9.13 GB' is that). "
                 + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    17: {
        "card": _tt_tutorial_lora_card(rank=8, alpha=16, targets=["q_proj", "v_proj"]),
        "metric": "reserved", "unit": "GB", "approx_seq": True,
        "notes": "Alpaca <=512 -> 512 (longest batch sets the peak). 'single GPU' unknown -> a100-80gb (only "
                 "the verdict depends on it). Metric: max_memory_reserved -> reserved. " + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    18: {
        "card": _tt_tutorial_lora_card(rank=64, alpha=128, targets=_ATTN + _MLP),
        "metric": "reserved", "unit": "GB", "approx_seq": True,
        "notes": "LIMITATION: targets include the output projection (lm_head), which trainfit's LoRA cannot "
                 "target; mapped to q,k,v,o + MLP (the lm_head adapter is ~2.3M params, negligible). Alpaca "
                 "<=512 -> 512. 'single GPU' -> a100-80gb. Metric: tutorial tables are peak reserved -> reserved. "
                 + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    19: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "full",
            "precision": dict(_TT_PURE_BF16_FOREACH, optimizer="paged_adamw", optimizer_in_backward=True),
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 2, "seq_len": 512},
        },
        "metric": "reserved", "unit": "GB", "approx_seq": True,
        "notes": "bnb PagedAdamW (32-bit) + optimizer_in_bwd -> adamw fp32 states + optimizer_in_backward; "
                 "paged_adamw: fp32 states in CUDA managed memory, outside torch's allocated/reserved. "
                 "Alpaca <=512 -> 512. Metric: this source's tables are peak reserved -> reserved.",
    },
    20: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "full",
            "precision": _TT_PURE_BF16_FOREACH,
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 4},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 2, "seq_len": 512},
        },
        "metric": "reserved", "unit": "GB", "approx_seq": True,
        "notes": "Full FT pure bf16 AdamW (foreach assumed), FSDP 4x4090, AC. Alpaca <=512 -> 512. Metric: this "
                 "source's tables are peak reserved -> reserved.",
    },
    21: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "dropout": _TT_LORA_DROPOUT_2024, "targets": ["q_proj", "v_proj"]},
            "precision": _TT_PURE_BF16_FOREACH,
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 2},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": 2, "seq_len": 512},
        },
        "metric": "reserved", "unit": "GB", "approx_seq": True,
        "notes": "LoRA r8 q,v, FSDP 2x4090, no AC. Alpaca <=512 -> 512. Metric: this source's tables are peak "
                 "reserved -> reserved. " + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE + ". Unexplained by the "
                 "step (planned about 30% under): the likely cause is model initialisation, which trainfit does not "
                 "plan. At this commit the recipe did not yet set TORCH_NCCL_AVOID_RECORD_STREAMS=1 (added a week "
                 "later, pytorch/torchtune commit bec7babec, PR #843, whose description says FSDP1's "
                 "sync_module_states broadcast otherwise holds GPU memory through recordStream during init); the "
                 "recipe resets the peak statistics after init, which keeps the cached segments in reserved. The "
                 "unsharded bf16 7B (12.55 GiB) plus rank 0's shard (6.27 GiB) is about 18.8 GiB against 19.51 "
                 "measured; the same recipe after the fix reads point 11. Consistent, not measured",
    },
    # ---- torchtune README 'Optimization flags' (2024-11): Llama-3.2-3B, bs 2, seq 4096, A100, cumulative
    22: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "full", "precision": _TT_PURE_BF16,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": 2, "seq_len": 4096},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "Baseline + packing: AdamW fused, no AC, no compile, plain CE. 'Peak Memory Active' -> allocated.",
    },
    23: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "full", "precision": _TT_PURE_BF16,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 4096},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "+ torch.compile: torchtune compiles each decoder layer (planned with the compiled layers' saved "
                 "set; the measured drop 60.0 -> 51.0 GiB); the recipe drops compile_loss's return value, so the "
                 "plain CE stays eager. Peak active -> allocated.",
    },
    24: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "full", "precision": _TT_PURE_BF16,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 4096}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "+ chunked CE (cumulative: compile on). Peak active -> allocated. " + _TT_CHUNKED_NOTE,
    },
    25: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "full", "precision": _TT_PURE_BF16,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 4096}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "+ activation checkpointing (cumulative: compile, chunked CE). Peak active -> allocated. "
                 + _TT_CHUNKED_NOTE,
    },
    26: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "full",
            "precision": dict(_TT_PURE_BF16, optimizer_in_backward=True),
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True},
            "batch": {"micro_batch_size": 2, "seq_len": 4096}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "+ optimizer_in_bwd (cumulative: compile, chunked CE, AC). Peak active -> allocated. "
                 + _TT_CHUNKED_NOTE,
    },
    27: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "full",
            "precision": dict(_TT_PURE_BF16, optimizer_in_backward=True),
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True,
                         "activation_offload": True},
            "batch": {"micro_batch_size": 2, "seq_len": 4096}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "+ activation offloading (cumulative: compile, chunked CE, AC, optimizer_in_bwd). Peak active "
                 "-> allocated. " + _TT_CHUNKED_NOTE,
    },
    28: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "full",
            "precision": dict(_TT_PURE_BF16, optimizer="adamw_8bit", optimizer_in_backward=True),
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True,
                         "activation_offload": True},
            "batch": {"micro_batch_size": 2, "seq_len": 4096}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB", "ambiguous": True,
        "notes": "AMBIGUOUS: the row says '8-bit AdamW' and the text 'AdamW8bit' without a package. At the commit "
                 "that added the table (1814feb17) no torchtune config or doc uses bitsandbytes.optim.AdamW8bit; "
                 "the linked tutorial (docs/source/tutorials/memory_optimizations.rst lines 168-196) names "
                 "torchao.prototype.low_bit_optim.AdamW8bit (a tensor-subclass optimizer whose step is "
                 "torch.compile'd, not modelled by trainfit) and bitsandbytes' PagedAdamW8bit (paged: its states "
                 "would not count in torch's active bytes at all, which the measured 17.6 GiB rules out). Mapped to "
                 "bnb AdamW8bit (not paged: states are torch-visible; the same 2 B/param + block absmax as "
                 "torchao's, but not its step's temporaries) (cumulative: compile, chunked CE, AC, "
                 "optimizer_in_bwd, activation offloading). Peak active -> allocated. " + _TT_CHUNKED_NOTE,
    },
    29: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "lora",
            "lora": {"rank": 64, "alpha": 128, "adapter_dtype": "bf16", "targets": ["q_proj", "v_proj", "o_proj"] + _MLP},
            "precision": _TT_PURE_BF16,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True,
                         "activation_offload": True},
            "batch": {"micro_batch_size": 2, "seq_len": 4096}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "LoRA r64/a128 on q,v,o + MLP (torchtune output_proj = o_proj), AdamW fused, packed, compile "
                 "(LoRA layers compiled), chunked CE, AC, activation offloading. Peak active -> allocated. "
                 + _TT_LORA_NOTE + ". " + _TT_CHUNKED_NOTE,
    },
    30: {
        "card": {
            "model": "meta-llama/Llama-3.2-3B", "scope": "qlora",
            "lora": {"rank": 64, "alpha": 128, "adapter_dtype": "bf16", "targets": ["q_proj", "v_proj", "o_proj"] + _MLP,
                     "dequant": "torchao"},
            "precision": _TT_QLORA,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "compile": True,
                         "activation_offload": True},
            "batch": {"micro_batch_size": 2, "seq_len": 4096}, "loss": {"chunked": True, "kernel": "torchtune"},
        },
        "metric": "allocated", "unit": "GiB",
        "notes": "QLoRA (torchao NF4) r64 on q,v,o + MLP, same flags as 29. Peak active -> allocated. "
                 + _TT_LORA_NOTE + ". " + _TT_CHUNKED_NOTE + ". " + _TT_NF4_NOTE,
    },
    # ---- torchtune llama3 tutorial (2024-04/05)
    31: {
        "card": {
            "model": "meta-llama/Llama-3.1-8B", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "dropout": _TT_LORA_DROPOUT_2024, "targets": ["q_proj", "v_proj"]},
            "precision": _TT_PURE_BF16_FOREACH,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 2, "seq_len": 512},
        },
        "metric": "allocated", "unit": "GB", "approx_seq": True, "ambiguous": True,
        "notes": "LIMITATION: Meta-Llama-3-8B-Instruct is not in the catalog; mapped to meta-llama/Llama-3.1-8B, "
                 "the same architecture (32 layers, h 4096, 128,256 vocab, GQA 8) - identical memory terms. "
                 "Alpaca default (<=512) -> 512. 'single GPU' -> a100-80gb. Metric 'peak memory usage' "
                 "unspecified; the README of the same weeks calls it 'peak allocated' -> allocated. Plain CE "
                 "(logits dominate at 128k vocab). " + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    # ---- PEFT method_comparison MetaMathQA (L40S, bs 4, max_seq_length 768, no AC, bf16 model, no AMP)
    43: {
        "card": _peft_l40s_card("full"),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "Full FT, model bf16 without AMP (AdamW states bf16), torch.optim.AdamW defaults -> foreach. "
                 "Variable length <=768 -> 768 (99th pct of reserved is set by the longest padded batches; "
                 "reserved is sticky between empty_cache calls). Metric reserved (99th pct over train steps) "
                 "-> reserved. The training loop keeps `outputs` (logits) alive through backward: "
                 "loop.keeps_output_through_backward.",
    },
    44: {
        "card": _peft_l40s_card("lora", lora={"rank": 32, "alpha": 64, "targets": ["q_proj", "v_proj"]}),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "PEFT LoRA r32/a64 q,v (fp32 adapters: PEFT autocast_adapter_dtype, trainfit's default), AdamW "
                 "foreach, no AC. <=768 -> 768. Metric reserved 99th pct -> reserved. Loop holds logits through "
                 "backward (loop.keeps_output_through_backward; see 43).",
    },
    45: {
        "card": _peft_l40s_card("lora", lora={"rank": 64, "alpha": 128, "targets": ["q_proj", "v_proj"]}),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "PEFT LoRA r64/a128 q,v, as 44.",
    },
    46: {
        "card": _peft_l40s_card("dora", lora={"rank": 32, "alpha": 64, "targets": ["q_proj", "v_proj"]}),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "PEFT DoRA (use_dora: true) r32/a64 q,v (experiments/lora/llama-3.2-3B-rank32-dora/adapter_config.json: "
                 "target_modules null -> PEFT's llama default q_proj, v_proj), fp32 adapters and magnitudes, AdamW "
                 "foreach, no AC. <=768 -> 768. Metric reserved 99th pct -> reserved. As 44 plus DoRA's magnitude "
                 "vectors and the base / lora_B outputs each DoRA module saves (trainfit.memory.peft_variants).",
    },
    47: {
        "card": _peft_l40s_card("lora", lora={"rank": 10, "alpha": 8, "targets": _MLP}),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "PEFT LoRA r10 on gate,up,down; lora_alpha not given -> PEFT default 8 (alpha does not change "
                 "memory). <=768 -> 768. Metric reserved 99th pct -> reserved.",
    },
    48: {
        "card": _peft_l40s_card("ia3"),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "PEFT IA3 default (experiments/ia3/llama-3.2-3B-default/adapter_config.json: target_modules and "
                 "feedforward_modules null -> PEFT's llama defaults k_proj, v_proj, down_proj / down_proj; trainfit's "
                 "default too), fp32 vectors (286,720), AdamW foreach, no AC. <=768 -> 768. Metric reserved 99th "
                 "pct -> reserved.",
    },
    49: {
        "card": _peft_l40s_card("prompt_tuning", prompt_tuning={"num_virtual_tokens": 200}),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "PEFT prompt tuning, num_virtual_tokens 200, random init (results/prompt_tuning--llama-3.2-3B-default"
                 ".json peft_config; num_trainable_params 614,400 = 200 x 3072), AdamW foreach, no AC. <=768 -> 768 "
                 "real tokens, 968 through the model. Metric reserved 99th pct -> reserved.",
    },
}

# ---- DeepSpeed ZeRO out-of-memory and fit reports (benchmarks/data/published_deepspeed_points.json, sources there)

_BAICHUAN2_13B = {
    "model_type": "llama", "hidden_size": 5120, "intermediate_size": 13696, "num_hidden_layers": 40,
    "num_attention_heads": 40, "num_key_value_heads": 40, "vocab_size": 125696, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu",
}
"""Baichuan2-13B's config.json shapes (W_pack = q, k, v fused: the same bytes as three projections; ALiBi
instead of RoPE changes no parameter): 13,896,668,160 parameters."""
_LF_Z2_2023 = {"reduce_bucket_size": 500_000_000, "allgather_bucket_size": 500_000_000, "overlap_comm": False,
               "contiguous_gradients": True}
"""LLaMA-Factory's README ZeRO-2 example of 2023 (and examples/deepspeed/ds_z2_config.json since)."""
_LF_Z3 = {"reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
          "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1_000_000_000,
          "stage3_max_reuse_distance": 1_000_000_000, "sub_group_size": 1_000_000_000, "overlap_comm": False}
"""LLaMA-Factory examples/deepspeed/ds_z3_config.json."""

POINTS.update({
    101: {
        "card": {
            "model": {"config": _BAICHUAN2_13B}, "scope": "full",
            "precision": {"optimizer_impl": "fused"},
            "hardware": {"gpu": "a800-80gb", "gpus_per_node": 4},
            "parallel": {"strategy": "zero2", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 1536}, "deepspeed": _LF_Z2_2023,
        },
        "metric": "allocated", "unit": "GiB", "at_failure": True,
        "notes": "OOM report: measured = already allocated + the failing request (77.65 + 12.94 GiB), the allocation "
                 "the step needed. DeepSpeed bf16 keeps fp32 master partitions and fp32 AdamW states whatever the "
                 "card's precision says; the optimizer (HF default fused AdamW) has no temporaries.",
    },
    102: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "full",
            "precision": {"weights": "fp16", "compute": "fp16", "optimizer_impl": "for_loop"},
            "hardware": {"gpu": "v100-sxm2-32gb", "gpus_per_node": 8},
            "parallel": {"strategy": "zero2", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 1024}, "deepspeed": _LF_Z2_2023,
        },
        "metric": "allocated", "unit": "GiB", "at_failure": True, "approx_seq": True,
        "notes": "OOM report (28.28 + 3.14 GiB). LLaMA-7B has Llama-2-7B's shapes (6.74 B parameters; the 4k context "
                 "changes nothing here). The traceback's line is torch's single-tensor AdamW -> optimizer_impl "
                 "for_loop over the one flat fp32 partition DeepSpeed steps. Sequence length not given: 1024.",
    },
    103: {
        "card": {
            "model": "meta-llama/Llama-2-7b-hf", "scope": "full",
            "precision": {"weights": "fp16", "compute": "fp16", "optimizer_impl": "for_loop"},
            "hardware": {"gpu": "v100-sxm2-32gb", "gpus_per_node": 8},
            "parallel": {"strategy": "zero3", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 1024}, "deepspeed": _LF_Z3,
        },
        "metric": "allocated", "unit": "GiB", "approx_seq": True,
        "notes": "Fit report only (the same run trains with ZeRO-3): scored on the verdict.",
    },
    **{pid: {
        "card": {
            "model": "meta-llama/Llama-3.1-8B", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "targets": "all-linear"},
            "hardware": {"gpu": "l20", "gpus_per_node": 4},
            "parallel": {"strategy": "zero3", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": mbs, "seq_len": 15000, "grad_accum": 8}, "deepspeed": _LF_Z3,
            "software": {"transformers": "4.46.1"},
        },
        "metric": "allocated", "unit": "GiB", "approx_seq": True,
        "notes": f"Fit report only (batch {mbs}: {'trains' if mbs == 1 else 'out of memory'}); the longest samples "
                 "(the 15,000-token cutoff) set the peak. Instruct = the base model's shapes. transformers 4.46.1: the "
                 "issue's System Info ('Transformers version: 4.46.1', PyTorch 2.3.1+cu118; "
                 "https://github.com/hiyouga/LlamaFactory/issues/6531, read 2026-12-03): SDPA repeats k/v and the "
                 "loss shifts an fp32 copy of the logits (memory.attention.legacy_sdpa, memory.logits.hf_loss_copies).",
    } for pid, mbs in ((104, 1), (105, 2))},
})

_SWIFT_Z2 = {"reduce_bucket_size": 200_000_000, "allgather_bucket_size": 200_000_000, "overlap_comm": True,
             "contiguous_gradients": True}
"""ms-swift swift/llm/ds_config/zero2.json @9d297f99a."""
_SWIFT_Z3 = {"reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
             "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1_000_000_000,
             "stage3_max_reuse_distance": 1_000_000_000, "sub_group_size": 1_000_000_000, "overlap_comm": True}
"""ms-swift swift/llm/ds_config/zero3.json @9d297f99a."""


def _swift_full(model: str, gpus: int, strategy: str, grad_accum: int) -> dict[str, Any]:
    """ms-swift ``swift sft --train_type full --torch_dtype bfloat16`` with packing to 8192, batch 1, GC on (its
    default), flash attention, under DeepSpeed; the HF Trainer's default optimizer then was adamw_torch (torch
    AdamW, foreach on CUDA), which DeepSpeed steps on its fp32 partition."""
    return {
        "model": model, "scope": "full", "precision": {"optimizer_impl": "foreach"},
        "hardware": {"gpu": "a800-80gb", "gpus_per_node": 8, "nodes": gpus // 8},
        "parallel": {"strategy": strategy, "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": grad_accum},
        "deepspeed": _SWIFT_Z2 if strategy == "zero2" else _SWIFT_Z3,
    }


POINTS.update({
    106: {
        "card": _swift_full("Qwen/Qwen2.5-14B", 8, "zero2", 2),
        "metric": "reserved", "unit": "GiB",
        "notes": "Fit report only (ms-swift's benchmark: trained; the printed 80 on an 80 GB card is the card full). "
                 "Packing fills every row to max_length 8192 -> seq 8192. Reserved from the per-stream ZeRO-2 replay "
                 "(stream_pools.zero_step_sequence): the step's 6.88 GiB flat fp32 blocks and the two gradient partitions "
                 "of the accumulation on the reduction stream leave 20.5 GiB beyond allocated, past the card; whole free segments "
                 "(released before an allocation fails) bring it to the room: the card full, as printed.",
    },
    107: {
        "card": _swift_full("Qwen/Qwen2.5-14B", 8, "zero3", 2),
        "metric": "reserved", "unit": "GiB", "ambiguous": True,
        "notes": "AMBIGUOUS metric: the table prints 'GB' without naming the metric; ms-swift's training log, the "
                 "likely source, prints memory(GiB) = torch.cuda.max_memory_reserved / 2**30 -> reserved, GiB. "
                 "Packing -> seq 8192. Reserved from the per-stream ZeRO-3 replay (stream_pools.zero_step_sequence): most "
                 "of its 15.9 GiB beyond allocated is the first step's AdamW states (3.73 / 3.15 GiB per fp32 sub-group) "
                 "landing in the loss's cached fp32 logits blocks (4.64 GiB), so the next forward's logits take new "
                 "segments; reads high (+9%) where the fitted share read -9.9%.",
    },
    108: {
        "card": _swift_full("Qwen/Qwen3-30B-A3B-Base", 16, "zero2", 1),
        "metric": "reserved", "unit": "GiB", "ambiguous": True,
        "notes": "OOM report (no figure). AMBIGUOUS settings: the swift sft command is not shown; batch 1, packing to "
                 "8192 and global batch 16 (grad accum 1 on 16 GPUs) from the Megatron command it is compared with.",
    },
    109: {
        "card": _swift_full("Qwen/Qwen3-30B-A3B-Base", 16, "zero3", 1),
        "metric": "reserved", "unit": "GiB", "ambiguous": True,
        "notes": "Fit report only (trained; 16 * 80GiB printed: the card full). AMBIGUOUS settings as point 108.",
    },
})

# ---- further published memory points (benchmarks/data/published_memory_points.json, sources there)

POINTS.update({
    201: {
        "card": _tt_tutorial_lora_card(rank=8, alpha=16, targets=_ATTN + _MLP),
        "metric": "reserved", "unit": "GB", "approx_seq": True,
        "notes": "torchtune lora_finetune tutorial (same table as points 17-18): 7B_lora_single_device with LoRA "
                 "r8/a16 on every layer. LIMITATION: the output projection (lm_head) adapter cannot be targeted "
                 "(mapped to q,k,v,o + MLP; r8 x (4096 + 32000) = 0.3M parameters, negligible). Alpaca <=512 -> "
                 "512. 'single GPU' -> a100-80gb (only the verdict depends on it). Metric: peak reserved -> "
                 "reserved. AdamW without fused (config of that commit) -> foreach. " + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
    202: {
        "card": _tt_tutorial_lora_card(rank=64, alpha=128, targets=["q_proj", "v_proj"]),
        "metric": "reserved", "unit": "GB", "approx_seq": True,
        "notes": "torchtune lora_finetune tutorial (same table as points 17-18): 7B_lora_single_device with LoRA "
                 "r64/a128 on q,v. Alpaca <=512 -> 512. 'single GPU' -> a100-80gb. Metric: peak reserved -> "
                 "reserved. AdamW foreach (config of that commit). " + _TT_LORA_NOTE + ". " + _TT_LORA_DROPOUT_NOTE,
    },
})

_TT_KEPT_LOGITS_LOOP = {"keeps_output_through_backward": True, "kept_output_dtype": "fp32"}
"""torchtune's recipes of 2024-04/05 keep the fp32 logits through backward. The model returns fp32 logits
(``output = self.output(h).float()``, torchtune/modules/transformer.py l.210 at both commits below), the loop rebinds
``logits = logits[..., :-1, :].contiguous()`` and ``logits.transpose(1, 2)`` for ``CrossEntropyLoss`` and only then
calls ``loss.backward()``, so the shifted fp32 copy stays bound through the whole backward (pytorch/torchtune
@fef3ed10dc9efe9e35b118e4397e84c680c0a737 recipes/lora_finetune_single_device.py l.447-468,
full_finetune_single_device.py l.403-430, lora_finetune_distributed.py l.537-560, full_finetune_distributed.py
l.440-465; @0217d44c2e1e372b34628767745c1f6538086a81 lora_finetune_single_device.py l.460-469,
full_finetune_single_device.py l.416-426, lora_finetune_distributed.py l.553-563, full_finetune_distributed.py
l.478-488). torchtune dropped it (``del logits``, "free logits otherwise it peaks backward memory") from
lora_finetune_distributed.py on 2024-06-04 (commit cb3ed29d7fd2a80e09c44c7d6fd2cac3075861c4, PR #1046) and from
lora_finetune_single_device.py, full_finetune_single_device.py and full_finetune_distributed.py on 2024-07-28 (commit
8a98fbaa34d229362affded73afb9a2807b52223, PR #1235, which did not touch lora_finetune_distributed.py): both after every
point below and before points 1-8 and 22-30.
Planned as ``loop.kept_output_dtype: fp32`` (4 B per logit through backward, the loss on that copy). Not planned: the
copy holds s - 1 positions (the plan: s), and ``log_softmax`` over dim 1 of the transposed view makes a contiguous
4 B-per-logit copy for its forward only."""
_TT_KEPT_LOGITS_POINTS = (9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 31, 201, 202)
"""The torchtune points measured with those recipes (2024-04 and 2024-05 README tables and tutorials)."""
for _pid in _TT_KEPT_LOGITS_POINTS:
    POINTS[_pid]["card"]["loop"] = dict(_TT_KEPT_LOGITS_LOOP)
    POINTS[_pid]["notes"] += (" Loop: the recipe keeps the shifted fp32 logits bound through backward (del logits came"
                              " in 2024-06 to lora_finetune_distributed, 2024-07 to the other recipes)"
                              " -> loop.keeps_output_through_backward, kept_output_dtype fp32.")

# ---- PEFT method_comparison MetaMathQA, more runs of the harness of points 43-49 (published_memory_points_qwen_torchao_peft.json)

POINTS.update({
    501: {
        "card": _peft_l40s_card("lora", lora={"rank": 64, "alpha": 64, "targets": ["q_proj", "v_proj"]}),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "PEFT LoRA r64 q,v with use_rslora (scaling alpha / sqrt(r): no memory term), fp32 adapters, AdamW "
                 "foreach, no AC: the card of point 45. <=768 -> 768. Metric reserved 99th pct -> reserved.",
    },
    502: {
        "card": _peft_l40s_card("ia3", ia3={"targets": ["q_proj", "k_proj", "v_proj", "o_proj"] + _MLP, "feedforward": _MLP}),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": "PEFT IA3 on every block linear (target_modules q,k,v,o,gate,up,down; feedforward_modules gate,up,down: "
                 "their inputs are scaled), fp32 vectors (630,784), AdamW foreach, no AC. <=768 -> 768. Metric reserved "
                 "99th pct -> reserved.",
    },
    **{pid: {
        "card": _peft_l40s_card("prompt_tuning", prompt_tuning={"num_virtual_tokens": 200}),
        "metric": "reserved", "unit": "GiB", "approx_seq": True,
        "notes": f"PEFT prompt tuning, 200 virtual tokens ({init}), the card of point 49. <=768 -> "
                 "768 real tokens, 968 through the model. Metric reserved 99th pct -> reserved.",
    } for pid, init in ((505, "initialised from sampled vocabulary embeddings"),)},
})

# ---- ms-swift ``swift sft`` example runs (published_memory_points_ms_swift.json ids 711-724, sources there; the
# Megatron-SWIFT points 701-710 and 725-726 carry or name a step-time entry and are mapped by _train_entry_mappings)

_SWIFT_Z3_HEAD = {"reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                  "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1_000_000_000,
                  "stage3_max_reuse_distance": 1_000_000_000, "sub_group_size": 1_000_000_000, "overlap_comm": False,
                  "contiguous_gradients": True}
"""modelscope/ms-swift swift/config/zero3.json@3602360a562313afbf2ef6065fdf61f271a2c5b9."""
_SWIFT_LORA = {"rank": 8, "alpha": 32, "targets": "all-linear", "dropout": 0.05}
"""ms-swift's LoRA defaults and the examples' flags: lora_rank 8, lora_alpha 32, target_modules all-linear, lora_dropout
0.05 (modelscope/ms-swift swift/arguments/tuner_args.py@3602360a562313afbf2ef6065fdf61f271a2c5b9 l.126-135); PEFT's fp32
adapters (lora_dtype None)."""
_SWIFT_SFT_NOTE = ("ms-swift swift sft: HF Trainer on a bf16 checkpoint (torch_dtype bfloat16), gradient checkpointing on "
                   "(modelscope/ms-swift swift/trainers/arguments.py@3602360a562313afbf2ef6065fdf61f271a2c5b9 l.134), the model's own "
                   "loss, batch 1. GPU not stated: "
                   "a100-80gb (capacity only). Figure: the script's header comment, read as the log's memory(GiB) "
                   "(max_memory_reserved); AMBIGUOUS, the header does not say how it was read")
_SWIFT_DATA_STATS = ("ms-swift's dataset table (docs/source_en/Instruction/Supported-models-and-datasets.md "
                     "@3602360a562313afbf2ef6065fdf61f271a2c5b9, 'Statistic (token)': every sample encoded with the "
                     "Qwen2.5 tokenizer and template, scripts/utils/run_dataset_info.py l.63-74) gives the longest sample: "
                     "AI-ModelScope/alpaca-gpt4-data-en 607 tokens, alpaca-gpt4-data-zh 544, swift/self-cognition 131")
_SWIFT_SC_NOTE = ("swift/self-cognition only, batch 1: its longest sample, 131 tokens, an upper bound on the sampled rows "
                  "(approx_seq); " + _SWIFT_DATA_STATS)
_SWIFT_ALPACA_NOTE = ("alpaca-gpt4 zh/en #500 each + self-cognition #500, batch 1 (no padding): the longest sample of the "
                      "three, 607 tokens, an upper bound on the sampled rows (approx_seq; max_length 2048 never truncates); "
                      + _SWIFT_DATA_STATS)


def _swift_sft_card(model: str, *, scope: str = "lora", gpus: int = 1, strategy: str = "single", seq: int = 2048,
                    **extra: Any) -> dict[str, Any]:
    """A ms-swift ``swift sft`` example run: bf16 checkpoint, batch 1, gradient checkpointing, on ``gpus`` GPUs."""
    card = {"model": model, "scope": scope,
            "precision": {"weights": "bf16", "compute": "bf16", "master_weights": "none", "optimizer": "adamw",
                          "optimizer_states": "same_as_weights", "optimizer_impl": "foreach"},
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": gpus},
            "parallel": {"strategy": strategy, "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": seq}}
    if scope in ("lora", "qlora", "dora"):
        card["lora"] = dict(_SWIFT_LORA)
    if scope == "full" and strategy.startswith("zero"):
        # DeepSpeed's bf16 engine keeps fp32 master weights and states (trainfit's defaults for full under ZeRO)
        card["precision"] = {"optimizer": "adamw", "optimizer_impl": "foreach"}
    for k, v in extra.items():
        card[k] = {**card.get(k, {}), **v} if isinstance(v, dict) else v
    return card


POINTS.update({
    711: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", seq=607), "metric": "reserved", "unit": "GiB",
          "approx_seq": True, "ambiguous": True, "notes": "examples/train/lora_sft.sh: LoRA on one GPU. " + _SWIFT_ALPACA_NOTE
          + ". " + _SWIFT_SFT_NOTE},
    712: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", attention="flash"), "metric": "reserved", "unit": "GiB",
          "ambiguous": True, "notes": "examples/train/packing/llm.sh: LoRA with packing to max_length 2048 and "
          "flash_attn -> seq 2048. " + _SWIFT_SFT_NOTE},
    713: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", scope="qlora", seq=607,
                                  precision={"weights": "nf4", "master_weights": "none"}),
          "metric": "reserved", "unit": "GiB", "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/qlora/bnb/train.sh: bnb nf4 with double quant, bf16 compute. " + _SWIFT_ALPACA_NOTE
          + ". " + _SWIFT_SFT_NOTE},
    714: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", gpus=2, strategy="zero2", seq=131, deepspeed=_SWIFT_Z2),
          "metric": "reserved", "unit": "GiB", "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/multi-gpu/deepspeed/train_zero2.sh, measured at or before ms-swift b40f31df7 "
          "(2024-12-05), whose swift/llm/ds_config/zero2.json equals a3731f998's and sets overlap_comm true "
          "(_SWIFT_Z2: the same zero_optimization block). "
          + _SWIFT_SC_NOTE + ". " + _SWIFT_SFT_NOTE},
    715: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", gpus=2, strategy="zero3", seq=131, deepspeed=_SWIFT_Z3),
          "metric": "reserved", "unit": "GiB", "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/multi-gpu/deepspeed/train_zero3.sh, measured at or before ms-swift b40f31df7 "
          "(2024-12-05), whose swift/llm/ds_config/zero3.json equals a3731f998's and sets overlap_comm true "
          "(_SWIFT_Z3: the same zero_optimization block). "
          + _SWIFT_SC_NOTE + ". " + _SWIFT_SFT_NOTE},
    716: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", gpus=2, strategy="ddp", seq=131),
          "metric": "reserved", "unit": "GiB", "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/multi-gpu/ddp/train.sh (non-reentrant checkpointing). FIT VERDICT ONLY: the header's "
          "27.5GiB * 2 was written in the same commit as the sequence-parallel example's identical header "
          "(LongAlpaca-12k at max_length 10000, Ulysses 2) and is no measurement of this run; the point's notes give "
          "the evidence (this card plans 14.92 GiB reserved, the sequence-parallel card 26.33). " + _SWIFT_SC_NOTE
          + ". " + _SWIFT_SFT_NOTE},
    717: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", gpus=2, strategy="fsdp", seq=131,
                                  parallel={"fsdp_version": "fsdp2"}),
          "metric": "reserved", "unit": "GiB", "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/multi-gpu/fsdp2_lora/train.sh with fsdp2.json (fsdp_version 2, full shard, "
          "activation checkpointing by FSDP although --gradient_checkpointing false). " + _SWIFT_SC_NOTE + ". "
          + _SWIFT_SFT_NOTE},
    718: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", scope="dora", seq=131),
          "metric": "reserved", "unit": "GiB", "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/tuners/dora/train.sh: --use_dora true. " + _SWIFT_SC_NOTE + ". " + _SWIFT_SFT_NOTE},
    719: {"card": _swift_sft_card("Qwen/Qwen3-8B"), "metric": "reserved", "unit": "GiB", "approx_seq": True,
          "ambiguous": True, "notes": "Qwen3-Best-Practice.md self-cognition LoRA on one GPU; max_length 2048 -> 2048 "
          "(upper bound). " + _SWIFT_SFT_NOTE},
    720: {"card": _swift_sft_card("Qwen/Qwen3-8B", scope="full", gpus=4, strategy="zero3", seq=8192,
                                  deepspeed=_SWIFT_Z3_HEAD, attention="flash",
                                  loss={"chunked": True, "kernel": "liger"}),
          "metric": "reserved", "unit": "GiB", "ambiguous": True,
          "notes": "Qwen3-Best-Practice.md multi-GPU full fine-tune: ZeRO-3 on 4 GPUs, packing to 8192, "
          "--use_liger_kernel true (fused linear cross-entropy -> loss.chunked liger), flash_attn. " + _SWIFT_SFT_NOTE},
    721: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", seq=131), "metric": "reserved", "unit": "GiB",
          "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/streaming/lazy_tokenize.sh: LoRA on one GPU (lazy tokenization: no memory term). "
          + _SWIFT_SC_NOTE + ". " + _SWIFT_SFT_NOTE},
    722: {"card": _swift_sft_card("Qwen/Qwen2.5-3B", scope="full", seq=8192, attention="flash",
                                  loss={"chunked": True, "kernel": "liger"}),
          "metric": "reserved", "unit": "GiB", "ambiguous": True,
          "notes": "examples/train/agent/qwen2_5.sh: full fine-tune on one GPU without DeepSpeed: the bf16 checkpoint's "
          "parameters train in bf16 and torch AdamW keeps its states in the parameters' dtype (pure bf16); packing to "
          "8192, --use_liger_kernel true -> loss.chunked liger, flash_attn. " + _SWIFT_SFT_NOTE},
    723: {"card": _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", scope="full", seq=607), "metric": "reserved", "unit": "GiB",
          "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/full/train.sh: full fine-tune on one GPU without DeepSpeed (pure bf16 as point 722). "
          + _SWIFT_ALPACA_NOTE + ". " + _SWIFT_SFT_NOTE},
    724: {"card": _swift_sft_card("Qwen/Qwen3-8B", loss={"chunked": True, "kernel": "liger"}), "metric": "reserved",
          "unit": "GiB", "approx_seq": True, "ambiguous": True,
          "notes": "examples/train/think_model/deepseek_r1.sh: DeepSeek-R1-0528-Qwen3-8B (Qwen3-8B's shapes) LoRA on one "
          "GPU, --use_liger_kernel true -> loss.chunked liger; max_length 2048 -> 2048 (upper bound). " + _SWIFT_SFT_NOTE},
})

# ---- Lit-GPT's resource tables (published_memory_points_litgpt.json ids 801+, sources there)
#
# Lightning-AI/litgpt finetune/lora.py @8641822b3249bb94f068c254aa5d13decbc9f0a0 (the commit tutorials/resource-tables.md
# names): LoRA r 8, alpha 16, dropout 0.05 on the query and value rows of the fused qkv only (l.46-54); precision
# bf16-true converts the whole model, adapters included, to bf16 (Fabric's HalfPrecision); torch.optim.AdamW with its
# defaults (foreach on CUDA), or bitsandbytes' 32-bit PagedAdamW under a bnb quantisation (l.138-143); one GPU: no
# activation checkpointing; several: Fabric's FSDPStrategy (torch FSDP1, full shard) with activation checkpointing of
# every Block (l.77-90). The loss: the lm_head runs in 128-token chunks that are all kept (``lm_head_chunk_size=128``,
# l.216) and lit_gpt/utils.py chunked_cross_entropy (l.238-277) scores each bf16 chunk with F.cross_entropy, no fp32
# copy (loss.upcast false; the chunks together hold the full logits). Attention: torch SDPA (lit_gpt/model.py).

_LITGPT_LORA = {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"], "dropout": 0.05, "adapter_dtype": "bf16"}
_LITGPT_SEQ = {"meta-llama/Llama-2-7b-hf": 1304, "meta-llama/Llama-2-13b-hf": 1304}
"""Alpaca's longest sample per tokenizer (tutorials/resource-tables.md l.21-26 @0cc02afa1dca7434418cf612690da13d38d294fd)."""
_LITGPT_UNSUPPORTED = {
    "microsoft/phi-1_5": "phi: its lm_head carries a bias that ModelSpec has no field for (catalog.hf_config REFUSED_FAMILIES)",
    "stabilityai/stablelm-base-alpha-3b": "scope lora is not planned for gpt_neox models (fused query_key_value has no "
                                          "LoRA target name in trainfit yet)",
    "tiiuae/falcon-40b": "Falcon layers have no activation model (catalog.hf_config COUNTED_FAMILIES: unplanned)",
}


def _litgpt_card(model: str, *, mbs: int, gpus: int, quant: str | None, mixed: bool = False) -> dict[str, Any]:
    """A Lit-GPT finetune/lora.py run of the resource tables (A100-SXM4-40GB)."""
    lora = dict(_LITGPT_LORA, adapter_dtype="fp32") if mixed else dict(_LITGPT_LORA)
    prec: dict[str, Any] = {"weights": "bf16", "compute": "bf16", "master_weights": "none", "optimizer": "adamw",
                            "optimizer_states": "same_as_weights", "optimizer_impl": "foreach"}
    if quant:
        lora["double_quant"] = quant.endswith("-dq")
        prec.update(weights="nf4", optimizer="paged_adamw", optimizer_states="fp32")
        card_software = {"bitsandbytes": "0.41.1"}  # the table's environment (resource-tables.md l.13)
    else:
        card_software = {}
    if mixed:  # bf16-mixed: fp32 model (adapters and AdamW states fp32), bf16 autocast
        prec.update(weights="fp32", optimizer_states="fp32")
    card: dict[str, Any] = {
        "model": model, "scope": "qlora" if quant else "lora", "lora": lora, "precision": prec,
        "hardware": {"gpu": "a100-40gb", "gpus_per_node": gpus},
        # FSDP: every accumulating micro-batch inside fabric.no_backward_sync -> FSDP1 no_sync (l.214-215)
        "parallel": ({"strategy": "single", "gradient_checkpointing": False} if gpus == 1 else
                     {"strategy": "fsdp", "fsdp_version": "fsdp1", "gradient_checkpointing": True, "fsdp_no_sync": True}),
        # batch_size 128 over micro-batches of mbs on each device: gradient_accumulation_iters = 128 // mbs (l.40-42)
        "batch": {"micro_batch_size": mbs, "seq_len": _LITGPT_SEQ[model], "grad_accum": 128 // mbs},
    }
    if card_software:
        card["software"] = card_software
    if not mixed:  # bf16-true: the bf16 chunks scored as they are; under autocast cross_entropy runs in fp32
        card["loss"] = {"upcast": False}
    # the loop keeps the lm_head's output chunks bound through backward: logits = model(input_ids,
    # lm_head_chunk_size=128); loss = chunked_cross_entropy(logits, ...); fabric.backward(loss / ...) (l.216-220), the
    # list only rebound by the next micro-batch's forward -> the compute-dtype logits alive from the loss to the end of
    # backward
    card["loop"] = {"keeps_output_through_backward": True}
    return card


def _litgpt_mappings() -> dict[int, dict[str, Any]]:
    """POINTS entries of the Lit-GPT points: their card, or why trainfit cannot plan the model.

    What is left after the two mechanisms these rows exposed (``memory.fsdp_no_sync``, ``memory.bnb_saved_input``) and
    the loop's logits kept through backward (``loop.keeps_output_through_backward``, 2 B per logit, ``_litgpt_card``):
    the one-GPU bf16 LoRA rows stay 4-7 % low (#811 -4.3 %, #814 -6.4 %, #816 -3.9 %: about 0.9 GB per 1304-token
    sample of Llama-2-7B, ~22 kB per token per layer). The QLoRA rows, ~10 % low with the kept inputs in the layers'
    saved sets, are +1.9 to +2.6 % once the previous micro-batch's inputs, which MatMul4Bit keeps as ctx attributes and
    the loop's still-bound output keeps alive, are counted at the next loss (``bnb_saved_input.graph_held_input_bytes``);
    their peak is then that loss, not the backward. Measured on this CPU (torch
    2.13.0, saved_tensors_hooks, storages deduplicated, parameters excluded) with Lit-GPT's own lit_gpt/lora.py and
    model.py of 8641822 on a 256-wide Llama layer (4 heads, I 688, LoRA r8 on q,v, no dropout, 512 tokens, bf16): a
    layer saves 9,820 B per token where trainfit's transformers/PEFT layer saves 8,792 B (+4h bytes, h = 256). Two
    Lit-GPT details make the difference: LoRAQKVLinear.zero_pad's ``index_copy`` saves its source, the q and v
    adapter outputs (h values each per token, 4h bytes), and ``v.reshape`` of the permuted fused qkv output is a
    view, so SDPA's saved v keeps the whole (q, k, v) projection output alive (6h instead of 2h); against them
    Lit-GPT's RMSNorm saves its bf16 input (2h) where transformers saves an fp32 copy (4h), and its one dropout on
    the shared q/v input (PEFT: one per module) adds 1h bytes with dropout 0.05 where PEFT's two add 4h (CUDA's bool
    masks). Net, with dropout: about +1h bytes per token per layer, ~0.17 GB per Llama-2-7B sample, a sixth of the
    shortfall; the rest is not found. Not modelled: trainfit has no Lit-GPT layer (its LoRA terms are PEFT's on
    transformers' modules). Lit-GPT's RoPE makes fp32 temporaries (fp32 cos/sin rebuilt outside the bf16 init
    context) that no op saves, and its attention output is a view of SDPA's, as in transformers. Lit-GPT quantises
    the lm_head too (Fabric's BitsandbytesPrecision replaces every nn.Linear; lightning @71aed751
    src/lightning/fabric/plugins/precision/bitsandbytes.py l.268-284), -0.2 GB for Llama-2-7B, not modelled either.
    Fit verdicts of the OOM cells: #815 (7B, one GPU, micro-batch 4) is planned at 40.58 GB allocated (41.3 GB
    device) on a 42.9 GB card, so as fitting, a wrong verdict: the same per-sample shortfall. #833 (13B, 2 GPUs,
    micro-batch 1, FSDP1 no_sync) was also planned as fitting (41.25 GB allocated) while the in-flight unit gradient
    was the adapters' only; with the whole flat parameter's gradient in flight beside the held no_sync gradients
    (``memory.fsdp_no_sync``; +0.63 GB, one 13B layer in bf16) it is planned at 41.89 GB and no longer fits: the
    verdict is right.

    No step-time rows: the tables' 'Time 1k iterations' covers 1,000 micro-batches of Alpaca samples padded per batch
    to their longest (tokens not stated) and is the script's 'Training time', which includes the initial validate()
    (100 eval batches and a 100-token sample, finetune/lora.py l.33-34, l.182) and one at every 100 steps."""
    path = ROOT / "benchmarks" / "data" / "published_memory_points_litgpt.json"
    if not path.is_file():
        return {}
    out: dict[int, dict[str, Any]] = {}
    for p in json.loads(path.read_text()):
        quant = p["method"].split("bnb ")[1].rstrip(")") if "bnb" in p["method"] else None
        mixed = p["precision"].startswith("bf16-mixed")
        notes = (f"Lit-GPT finetune/lora.py: LoRA r8/a16 on q,v, {'bnb ' + quant + ' base, PagedAdamW' if quant else 'AdamW'}"
                 f", {'bf16-mixed' if mixed else 'bf16-true'}, {p['num_gpus']}x A100-40GB "
                 f"{'FSDP1 + checkpointing' if p['num_gpus'] > 1 else 'no checkpointing'}, mbs {p['micro_batch_size']}, "
                 "the longest Alpaca sample. Metric: max_memory_allocated / 1e9 -> allocated, GB")
        if p["hf_id"] in _LITGPT_UNSUPPORTED:
            out[p["id"]] = {"card": None, "metric": "allocated", "unit": "GB", "notes": notes,
                            "unsupported": _LITGPT_UNSUPPORTED[p["hf_id"]]}
            continue
        card = _litgpt_card(p["hf_id"], mbs=int(p["micro_batch_size"]), gpus=int(p["num_gpus"]), quant=quant, mixed=mixed)
        out[p["id"]] = {"card": card, "metric": "allocated", "unit": "GB", "notes": notes}
    return out


POINTS.update(_litgpt_mappings())

# ---- held-out points: prime-rl's CI benchmark peaks (published_memory_points.json ids 301+, ``heldout``)
#
# What prime-rl publishes (PrimeIntellect-ai/prime-rl @d8f290ef0358a804f1912bd29ea1b37cc56894b4): the trainer
# calls ``torch.cuda.reset_peak_memory_stats()`` at the top of every step (src/prime_rl/trainer/rl/train.py
# l.215-217; sft/train.py l.182) and logs ``perf/peak_memory = torch.cuda.max_memory_reserved() / 1024**3``
# after the optimizer step (rl/train.py l.444, 458; sft/train.py l.324, 360); ``export_benchmark_json`` (master
# rank only, rl/train.py l.567-572) drops the first step and writes the mean over the others
# (src/prime_rl/trainer/utils.py l.168-193), which benchmarks/scripts/run_single_benchmark.py copies into the
# baseline's ``metrics.peak_memory.gib`` (l.199-222). Resetting the peak never shrinks reserved memory (no
# ``empty_cache`` in the loop), so the figure is rank 0's steady-state reserved peak -> ``reserved``, GiB.
# The CI job runs it with ``PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True`` (.github/workflows/benchmarks.yaml
# l.106-108) -> ``hardware.allocator: expandable_segments`` (the step-time entry's ``allocator``).
# Each card is the one the step-time harness maps the same run to (benchmarks/step_times.py ``map_train`` of the
# point's ``train_entry``), so the memory and the time of a run are scored on one card. These points are held out:
# ``load_points`` leaves them out of the scored set, ``heldout_rows`` scores them apart.

HELDOUT_TRAIN_TIMES = ROOT / "benchmarks" / "data" / "published_train_times_prime_rl_baselines.json"
"""The step-time entries the held-out points name (``train_entry``)."""


def _step_time_card(step_times: Any, e: dict[str, Any]) -> tuple[dict[str, Any], list[str]] | str:
    """The card ``benchmarks/step_times.py`` ``map_train`` gives a step-time entry, its preset applied, with the
    mapping's notes; or why the harness cannot map it."""
    try:
        card, n = step_times.map_train(e)
    except step_times.Unmapped as u:
        return "the step-time harness cannot map the run: " + "; ".join(u.reasons)
    if card.get("preset"):
        from trainfit.methods.presets import apply_preset  # noqa: PLC0415

        card = apply_preset(card, str(card["preset"]))
    return card, n


def _heldout_mappings() -> dict[int, dict[str, Any]]:
    """POINTS entries of the held-out points: the step-time harness's card of each ``train_entry``."""
    path = ROOT / "benchmarks" / "data" / "published_memory_points.json"
    if not path.is_file() or not HELDOUT_TRAIN_TIMES.is_file():
        return {}
    bench = str(Path(__file__).resolve().parent)
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import step_times  # noqa: PLC0415

    entries = {e["id"]: e for e in json.loads(HELDOUT_TRAIN_TIMES.read_text())}
    out: dict[int, dict[str, Any]] = {}
    for p in json.loads(path.read_text()):
        if not p.get("heldout"):
            continue
        e = entries[p["train_entry"]]
        notes = (f"prime-rl CI benchmark ({p['train_entry']}): rank 0's steady-state max_memory_reserved -> reserved, "
                 "GiB; allocator expandable_segments (the CI job's env). Card: step_times.map_train of that entry")
        mapped = _step_time_card(step_times, e)
        if isinstance(mapped, str):
            out[p["id"]] = {"card": None, "metric": "reserved", "unit": "GiB", "notes": notes, "unsupported": mapped}
            continue
        card, n = mapped
        out[p["id"]] = {"card": card, "metric": "reserved", "unit": "GiB", "notes": notes + " (" + "; ".join(n) + ")"}
    return out


POINTS.update(_heldout_mappings())

# ---- torchtitan-stack peaks (published_memory_points.json ids 401+, scored with the others)
#
# Per-GPU reserved peaks printed next to the step times of torchtitan runs: the torchtitan team's benchmark tables
# (benchmarks/llama3_h100_202412_torchtitan.md, the Trainy H200 file), torchtitan's nvfp4 doc, and torchao's float8 /
# mxfp8 training tables (torchtitan runs parsed by torchao's parse_torchtitan_logs.py). Every figure is torchtitan's
# log line ``memory: {max_reserved_gib}GiB`` = ``memory_stats()["reserved_bytes.all.peak"] / 2**30`` -> ``reserved``,
# GiB (each point's ``mem_metric`` cites the commit). Each point names the step-time entry of the same run
# (``train_file`` / ``train_entry``) and is planned on the card benchmarks/step_times.py ``map_train`` gives it, so
# the memory and the time of a run are scored on one card.


def _train_entry_mappings() -> dict[int, dict[str, Any]]:
    """POINTS entries of the scored points that name a step-time entry: the step-time harness's card of it. The
    metric and unit are reserved / GiB (torchtitan's log line) unless the point states its own (``metric``, ``unit``:
    the points of published_memory_points_qwen_torchao_peft.json, whose ``mem_metric`` says why)."""
    paths = [p for p in MEMORY_POINT_FILES if p.is_file()]
    if not paths:
        return {}
    bench = str(Path(__file__).resolve().parent)
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import step_times  # noqa: PLC0415

    out: dict[int, dict[str, Any]] = {}
    cache: dict[str, dict[str, Any]] = {}
    for p in (q for path in paths for q in json.loads(path.read_text())):
        if p.get("heldout") or not (p.get("train_file") or p.get("run")):
            continue
        metric, unit = p.get("metric", "reserved"), p.get("unit", "GiB")
        if p.get("run"):
            # a run with no published step time, written in the step-time entries' schema (``run``): the same mapping
            e = p["run"]
            notes = (f"run {e['id']} (the point's own entry): {metric}, {unit} (the point's mem_metric says why). Card: "
                     "step_times.map_train of that entry")
        else:
            f = p["train_file"]
            if f not in cache:
                cache[f] = {e["id"]: e for e in json.loads((ROOT / "benchmarks" / "data" / f).read_text())}
            e = cache[f][p["train_entry"]]
            notes = (f"{p['train_entry']} ({f}): torchtitan's logged max_memory_reserved -> reserved, GiB. Card: "
                     "step_times.map_train of that entry") if "metric" not in p else (
                     f"{p['train_entry']} ({f}): {metric}, {unit} (the point's mem_metric says why). Card: "
                     "step_times.map_train of that entry")
        extra = {"ambiguous": True} if p.get("ambiguous") else {}
        if p.get("pipeline_stage") is not None:
            # the source logs one rank's figure (``pipeline_stage``: that rank's stage; the point's mem_metric says why)
            extra["pipeline_stage"] = int(p["pipeline_stage"])
            notes += f"; scored on pipeline stage {int(p['pipeline_stage'])}'s rank (the rank the source logs)"
        mapped = _step_time_card(step_times, e)
        if not isinstance(mapped, str) and p.get("run"):
            from trainfit.errors import CardError  # noqa: PLC0415
            from trainfit.plan import make_plan  # noqa: PLC0415
            from trainfit.spec.card import load_card_dict  # noqa: PLC0415

            try:  # a run of the point's own: a card the planner refuses is a setting trainfit does not model
                make_plan(load_card_dict(mapped[0]))
            except (ValueError, CardError) as exc:
                mapped = "trainfit refuses the card: " + str(exc).splitlines()[0][:300]
        if isinstance(mapped, str):
            out[p["id"]] = {"card": None, "metric": metric, "unit": unit, "notes": notes, "unsupported": mapped, **extra}
            continue
        card, n = mapped
        if p.get("card_gpu"):
            # the point's own GPU where the step-time card's differs in capacity (``card_gpu``, its notes say why):
            # the fit verdict and the reserved cap read the capacity; the allocated bytes do not change
            card = {**card, "hardware": {**card["hardware"], "gpu": p["card_gpu"]}}
            n = [*n, f"hardware.gpu {p['card_gpu']} (the point's card_gpu: capacity)"]
        out[p["id"]] = {"card": card, "metric": metric, "unit": unit, "notes": notes + " (" + "; ".join(n) + ")", **extra}
    return out


# ---- first-contact points (published_memory_points_firstcontact_2612.json, ids 2601+, sources there)
#
# Scored as found: each point's notes record trainfit's error on first contact, before any change made for them.
# LitGPT's config-hub table (ids 2601-2614): litgpt finetune lora / full of the commit the row was added in, with the
# row's config_hub/finetune/<model>/<method>.yaml; the same loop as the resource tables' finetune/lora.py
# (``_litgpt_card``: lm_head in 128-token chunks kept through backward, bf16 chunks scored without an fp32 copy, torch
# AdamW foreach, bitsandbytes PagedAdamW under a bnb quantisation, no checkpointing on one device); litgpt/finetune/full.py
# computes the whole logits (``model(input_ids)``) and scores them with the same chunked_cross_entropy. The lora_*
# flags name litgpt's fused qkv rows and its MLP and head, mapped to the HF module names trainfit plans.

_LITGPT_FLAG_TARGETS = {"query": ("q_proj",), "key": ("k_proj",), "value": ("v_proj",), "projection": ("o_proj",),
                        "mlp": ("gate_proj", "up_proj", "down_proj"), "head": ("lm_head",)}
_LITGPT_FLAG_TARGETS_PHI3 = {"query": ("qkv_proj",), "key": ("qkv_proj",), "value": ("qkv_proj",),
                             "projection": ("o_proj",), "mlp": ("gate_up_proj", "down_proj"), "head": ("lm_head",)}


def _litgpt_hub_card(p: dict[str, Any]) -> dict[str, Any]:
    """The card of a LitGPT config-hub row (one A10G, bf16-true, the row's yaml)."""
    lg = p["litgpt"]
    quant = lg.get("quantize")
    prec: dict[str, Any] = {"weights": "bf16", "compute": "bf16", "master_weights": "none", "optimizer": "adamw",
                            "optimizer_states": "same_as_weights", "optimizer_impl": "foreach"}
    mbs = int(p["micro_batch_size"])
    # Lit-GPT's GPT keeps lm_head and the embedding as two parameters (litgpt/model.py l.25, l.28 @5895df10, no tying),
    # and convert_hf_checkpoint copies a tied checkpoint's embedding into lm_head (litgpt/scripts/convert_hf_checkpoint.py
    # l.176-177): a tied family (Gemma) trains an untied head
    from trainfit.catalog.models import hf_config_of, resolve_model  # noqa: PLC0415

    model: Any = p["hf_id"]
    if resolve_model(p["hf_id"]).tie_word_embeddings:
        model = {"id": p["hf_id"], "config": {**hf_config_of(p["hf_id"]), "tie_word_embeddings": False}}
    card: dict[str, Any] = {
        "model": model, "scope": "full",
        "hardware": {"gpu": "a10g", "gpus_per_node": 1},
        "parallel": {"strategy": "single", "gradient_checkpointing": False},
        "batch": {"micro_batch_size": mbs, "seq_len": 512, "grad_accum": int(lg["global_batch_size"]) // mbs},
        "loss": {"upcast": False}, "loop": {"keeps_output_through_backward": True},
    }
    if "lora_r" in lg:
        names = _LITGPT_FLAG_TARGETS_PHI3 if "Phi-3" in p["hf_id"] else _LITGPT_FLAG_TARGETS
        targets = list(dict.fromkeys(t for f in lg["lora_flags"] for t in names[f]))
        card["scope"] = "qlora" if quant else "lora"
        card["lora"] = {"rank": int(lg["lora_r"]), "alpha": lg["lora_alpha"], "targets": targets,
                        "dropout": lg["lora_dropout"], "adapter_dtype": "bf16"}
        if quant:
            card["lora"]["double_quant"] = quant.endswith("-dq")
            prec.update(weights="nf4", optimizer="paged_adamw", optimizer_states="fp32")
            card["software"] = {"bitsandbytes": "0.42.0"}  # litgpt's pyproject.toml pin at both commits
    card["precision"] = prec
    return card


_FC_HF_LORA = {"rank": 8, "alpha": 16, "targets": "all-linear", "dropout": 0.1}
"""peft examples/sft run_peft_*.sh: --lora_r 8 --lora_alpha 16 --lora_dropout 0.1 --lora_target_modules all-linear."""


def _fc_hf_card(model: str, *, scope: str, gpus: int, gpu: str, strategy: str, mbs: int, seq: int, accum: int,
                **extra: Any) -> dict[str, Any]:
    """An HF Trainer (TRL SFTTrainer) PEFT run of the first-contact points: packed sequences of ``seq`` tokens,
    gradient checkpointing, torch AdamW."""
    card: dict[str, Any] = {
        "model": model, "scope": scope, "lora": dict(_FC_HF_LORA),
        "precision": {"compute": "bf16", "optimizer": "adamw", "optimizer_impl": "foreach"},
        "hardware": {"gpu": gpu, "gpus_per_node": gpus},
        "parallel": {"strategy": strategy, "gradient_checkpointing": True},
        "batch": {"micro_batch_size": mbs, "seq_len": seq, "grad_accum": accum},
    }
    for k, v in extra.items():
        card[k] = {**card.get(k, {}), **v} if isinstance(v, dict) else v
    return card


_FC_CARDS: dict[int, dict[str, Any]] = {
    # peft aa2ca83c examples/sft/utils.py loads the unquantised model without torch_dtype (fp32); DeepSpeed's zero.Init
    # under the accelerate config's bf16 partitions it in bf16 (fp32 master of the trainable adapters in the optimizer)
    2615: _fc_hf_card("meta-llama/Llama-2-70b-hf", scope="lora", gpus=8, gpu="h100-sxm", strategy="zero3", mbs=8,
                      seq=2048, accum=4, attention="flash",
                      precision={"weights": "bf16", "master_weights": "fp32", "optimizer_states": "fp32"}),
    # FSDP1 with accelerate's MixedPrecision(bf16): the fp32 flat parameters stay fp32 in their shards, gathered in bf16
    2616: _fc_hf_card("meta-llama/Llama-2-70b-hf", scope="lora", gpus=8, gpu="h100-sxm", strategy="fsdp", mbs=8,
                      seq=2048, accum=4, attention="flash",
                      parallel={"fsdp_version": "fsdp1"},
                      precision={"weights": "fp32", "master_weights": "none", "optimizer_states": "fp32"}),
    2617: _fc_hf_card("meta-llama/Llama-2-70b-hf", scope="qlora", gpus=2, gpu="a100-40gb", strategy="zero3", mbs=2,
                      seq=2048, accum=2, attention="flash", lora={"double_quant": True},
                      precision={"weights": "nf4", "master_weights": "fp32", "optimizer_states": "fp32"}),
    2618: _fc_hf_card("meta-llama/Llama-2-70b-hf", scope="qlora", gpus=2, gpu="rtx4090", strategy="fsdp", mbs=2,
                      seq=2048, accum=2, attention="flash", lora={"double_quant": True},
                      parallel={"fsdp_version": "fsdp1", "offload": "params_and_optimizer"},
                      precision={"weights": "nf4", "master_weights": "none", "optimizer_states": "fp32"}),
    2619: _fc_hf_card("meta-llama/Llama-2-70b-hf", scope="qlora", gpus=2, gpu="h100-sxm", strategy="fsdp", mbs=2,
                      seq=2048, accum=2, attention="flash", lora={"double_quant": True},
                      parallel={"fsdp_version": "fsdp1"},
                      precision={"weights": "nf4", "master_weights": "none", "optimizer_states": "fp32"}),
    2620: _fc_hf_card("meta-llama/Meta-Llama-3-70B", scope="qlora", gpus=4, gpu="a10g", strategy="fsdp", mbs=1,
                      seq=3072, accum=2, lora={"rank": 16, "alpha": 8, "dropout": 0.05, "double_quant": True},
                      parallel={"fsdp_version": "fsdp1", "offload": "params_and_optimizer"},
                      precision={"weights": "nf4", "master_weights": "none", "optimizer_states": "fp32"}),
}


def _firstcontact_mappings() -> dict[int, dict[str, Any]]:
    """POINTS entries of the first-contact points: LitGPT rows from their yaml, the others from ``_FC_CARDS``."""
    path = ROOT / "benchmarks" / "data" / "published_memory_points_firstcontact_2612.json"
    if not path.is_file():
        return {}
    metric_of = {"allocated": "allocated", "device": "device", "reserved": "reserved"}
    out: dict[int, dict[str, Any]] = {}
    for p in json.loads(path.read_text()):
        metric = metric_of[p["mem_metric"].split(" ")[0].rstrip(":")]
        extra = {k: True for k in ("ambiguous", "approx_seq") if p.get(k)}
        if p.get("inconsistent"):
            # the published figure is below what the stated run must hold (its note gives the arithmetic): the printed
            # configuration is not what ran, so the point is listed with that reason and not scored
            out[p["id"]] = {"card": None, "metric": metric, "unit": p["peak_mem_unit"], "notes": p["source"],
                            "unsupported": "published figure inconsistent with its stated run: " + p["inconsistent"],
                            **extra}
            continue
        card = _litgpt_hub_card(p) if "litgpt" in p else _FC_CARDS[p["id"]]
        if "litgpt" in p:
            extra["approx_seq"] = True
        out[p["id"]] = _mapped_or_refused(p, card, metric=metric, extra=extra)
    return out


def _mapped_or_refused(p: dict[str, Any], card: dict[str, Any], *, metric: str, extra: dict[str, bool]) -> dict[str, Any]:
    """A first-contact point's POINTS entry: its card, or (the card's planning refused) no card and the refusal's
    first line as the reason it is unsupported."""
    from trainfit.errors import CardError  # noqa: PLC0415
    from trainfit.plan import make_plan  # noqa: PLC0415
    from trainfit.spec.card import load_card_dict  # noqa: PLC0415

    entry = {"metric": metric, "unit": p["peak_mem_unit"], "notes": p["source"], **extra}
    try:
        make_plan(load_card_dict(card))
    except (ValueError, CardError) as exc:
        return {"card": None, **entry, "unsupported": "trainfit refuses the card: " + str(exc).splitlines()[0][:300]}
    return {"card": card, **entry}


POINTS.update(_firstcontact_mappings())


# ---- first-contact points, second set (published_memory_points_firstcontact_2612b.json, ids 2661+, sources there)
#
# Scored as found: each point's notes record trainfit's error on first contact, before any change made for them.
# ms-swift example headers (2661-2666, cards from ``_swift_sft_card``: bf16 checkpoint, batch 1, checkpointing, torch AdamW
# foreach), axolotl's example READMEs (2667-2676). The GPU is a capacity only wherever the source names a class, not a card.

_FC_DPO_SEQ = 1801
"""hjh0119/shareAI-Llama3-DPO-zh-en-emoji's longest sample in ms-swift's dataset table (max=1801 tokens, Qwen2.5 tokenizer;
docs/source_en/Instruction/Supported-models-and-datasets.md @3602360a562313afbf2ef6065fdf61f271a2c5b9): an upper bound."""
_AX_CCE = {"chunked": True, "kernel": "liger"}
"""axolotl's CutCrossEntropyPlugin (Apple's cut-cross-entropy): the loss reads lm_head blocks and never holds the full
logits; planned as the chunked fused linear cross-entropy, the nearest kernel trainfit plans (no logits tensor)."""
_MISTRAL_SMALL_24B = "mistralai/Mistral-Small-24B-Instruct-2501"
"""The Mistral-Small-3.1 text decoder's shapes, shared by Devstral-Small-2505 and Magistral-Small-2506 / 2507."""


def _ax_gptoss_card(*, strategy: str, gpus: int, gpu: str, optimizer: str, impl: str, scope: str = "full",
                    offload: str | None = None, model: str = "openai/gpt-oss-20b") -> dict[str, Any]:
    """axolotl's gpt-oss examples (examples/gpt-oss/*.yaml @ca796fb56 / @50f2b94d5): MXFP4 dequantised to bf16,
    4096-token packed rows, batch 1, checkpointing with activation offloading, cut cross-entropy, flash attention; torch
    AdamW keeps its moments in the parameters' dtype, torchao AdamW8bit is planned as the 8-bit AdamW.

    Under FSDP2 the parameters train in fp32 shards: axolotl's bf16 true sets the HF Trainer's accelerate mixed precision
    to bf16, and accelerate's fsdp2_prepare_model then upcasts the sharded model, ``if accelerator.mixed_precision != "no"
    and (model_dtype is None or model_dtype != torch.float32): model = model.to(torch.float32)`` (huggingface/accelerate
    src/accelerate/utils/fsdp_utils.py l.701-704 @9359a0194f210624f1e6e85c3d838fdd55c11152, the commit axolotl's
    requirements.txt pins at ca796fb56), with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)
    (src/accelerate/utils/dataclasses.py set_mixed_precision): fp32 shards (and their gradients and torch AdamW moments),
    gathered in bf16 -> precision.weights fp32, compute bf16. The single-GPU LoRA run is not wrapped: bf16 as loaded."""
    card: dict[str, Any] = {
        "model": model, "scope": scope,
        "precision": {"weights": "fp32" if strategy == "fsdp" else "bf16", "compute": "bf16", "master_weights": "none",
                      "optimizer": optimizer, "optimizer_states": "same_as_weights", "optimizer_impl": impl},
        "hardware": {"gpu": gpu, "gpus_per_node": gpus}, "attention": "flash",
        "parallel": {"strategy": strategy, "gradient_checkpointing": True, "activation_offload": True},
        "batch": {"micro_batch_size": 1, "seq_len": 4096}, "loss": dict(_AX_CCE),
    }
    if strategy == "fsdp":
        card["parallel"]["fsdp_version"] = "fsdp2"
    if offload:
        card["parallel"]["offload"] = offload
    if scope == "lora":
        # PEFT's adapters in fp32 (no autocast_adapter_dtype change), their AdamW states fp32
        card["lora"] = {"rank": 8, "alpha": 16, "targets": "all-linear", "dropout": 0.0}
        card["precision"]["optimizer_states"] = "fp32"
    return card


def _ax_qlora_card(model: str, *, optimizer: str, cce: bool, dropout: float, rank: int = 32, mbs: int = 2,
                   seq: int = 2048, gpu: str = "a100-80gb", weights: str = "nf4", attention: str = "flash",
                   scope: str = "qlora") -> dict[str, Any]:
    """An axolotl single-GPU adapter run: bitsandbytes base (nf4 with double quant, or LLM.int8), PEFT fp32 adapters on
    every linear layer (lora_target_linear), alpha 16, checkpointing, packed rows of ``seq``, batch ``mbs``."""
    lora: dict[str, Any] = {"rank": rank, "alpha": 16, "targets": "all-linear", "dropout": dropout}
    if scope == "qlora":
        lora["double_quant"] = True
    card: dict[str, Any] = {
        "model": model, "scope": scope, "lora": lora,
        "precision": {"weights": weights, "compute": "bf16", "master_weights": "none", "optimizer": optimizer,
                      "optimizer_states": "fp32", "optimizer_impl": "foreach"},
        "hardware": {"gpu": gpu, "gpus_per_node": 1}, "attention": attention,
        "parallel": {"strategy": "single", "gradient_checkpointing": True},
        "batch": {"micro_batch_size": mbs, "seq_len": seq},
    }
    if cce:
        card["loss"] = dict(_AX_CCE)
    return card


_FC_B_CARDS: dict[int, dict[str, Any]] = {
    2661: _swift_sft_card("Qwen/Qwen2-7B-Instruct", seq=131),
    2662: _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", method="dpo", seq=_FC_DPO_SEQ, roles={"reference": "lora_disabled"}),
    # swift/llm/ds_config/zero3.json at 8ae0ade71 and 7b709960f: overlap_comm false, the block of _SWIFT_Z3_HEAD
    2663: _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", scope="full", gpus=4, strategy="zero3", method="dpo",
                          seq=_FC_DPO_SEQ, attention="flash", deepspeed=_SWIFT_Z3_HEAD, batch={"micro_batch_size": 4}),
    # SimPO (TRL CPOTrainer): no reference model; Qwen2.5-3B-Instruct has Qwen2.5-3B's config; zero2.json at 0b45cce58
    # is _SWIFT_Z2's block (overlap_comm true until e5c4c39ec, 2025-03-24)
    2664: _swift_sft_card("Qwen/Qwen2.5-3B", scope="full", gpus=2, strategy="zero2", method="dpo", seq=_FC_DPO_SEQ,
                          deepspeed=_SWIFT_Z2, roles={"reference": "none"}),
    2665: _swift_sft_card("Qwen/Qwen2.5-7B", scope="full", gpus=4, strategy="zero3", seq=8192, attention="flash",
                          deepspeed=_SWIFT_Z3_HEAD, loss={"chunked": True, "kernel": "liger"}),
    2666: _swift_sft_card("Qwen/Qwen2.5-7B", scope="full", gpus=4, strategy="zero3", seq=8192, attention="flash",
                          deepspeed=_SWIFT_Z3_HEAD),
    2667: _ax_gptoss_card(strategy="single", gpus=1, gpu="l40s", optimizer="adamw_8bit", impl="foreach", scope="lora"),
    2668: _ax_gptoss_card(strategy="fsdp", gpus=2, gpu="rtx4090", optimizer="adamw", impl="fused",
                          offload="params_and_optimizer"),
    2669: _ax_gptoss_card(strategy="fsdp", gpus=8, gpu="l40s", optimizer="adamw_8bit", impl="foreach"),
    2670: _ax_gptoss_card(strategy="fsdp", gpus=4, gpu="h100-sxm", optimizer="adamw_8bit", impl="foreach"),
    2671: _ax_gptoss_card(strategy="fsdp", gpus=8, gpu="h100-sxm", optimizer="adamw", impl="fused",
                          offload="params_and_optimizer", model="openai/gpt-oss-120b"),
    2672: _ax_qlora_card(_MISTRAL_SMALL_24B, optimizer="adamw", cce=True, dropout=0.0),
    2673: _ax_qlora_card(_MISTRAL_SMALL_24B, optimizer="adamw_8bit", cce=False, dropout=0.05),
    2674: _ax_qlora_card(_MISTRAL_SMALL_24B, optimizer="adamw_8bit", cce=True, dropout=0.05),
    # Llama 2 7B on an RTX 4090 (2023-08): xformers memory-efficient attention planned as flash (no score matrix)
    2675: _ax_qlora_card("meta-llama/Llama-2-7b-hf", optimizer="adamw_8bit", cce=False, dropout=0.05, seq=4096,
                         gpu="rtx4090", weights="int8", scope="lora"),
    2676: _ax_qlora_card("meta-llama/Llama-2-7b-hf", optimizer="paged_adamw", cce=False, dropout=0.05, seq=4096,
                         gpu="rtx4090"),
}


def _firstcontact_card_mappings(data_file: str, cards: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """POINTS entries of a later first-contact set (``benchmarks/data/<data_file>``): each point's card from ``cards``,
    the metric the point names; an empty dict when the file is absent."""
    path = ROOT / "benchmarks" / "data" / data_file
    if not path.is_file():
        return {}
    out: dict[int, dict[str, Any]] = {}
    for p in json.loads(path.read_text()):
        metric = p["mem_metric"].split(" ")[0].rstrip(":")
        extra = {k: True for k in ("ambiguous", "approx_seq") if p.get(k)}
        out[p["id"]] = _mapped_or_refused(p, cards[p["id"]], metric=metric, extra=extra)
    return out


POINTS.update(_firstcontact_card_mappings("published_memory_points_firstcontact_2612b.json", _FC_B_CARDS))


# ---- first-contact points, third set (published_memory_points_firstcontact_2612c.json, ids 2701+, sources there)
#
# Scored as found: each point's notes record trainfit's error on first contact, before any change made for them.
# axolotl's example READMEs not scored before (2701-2705: llama-3, qwen3.5, glm45), torchao's low-bit AdamW table of
# torchtune Llama-2-7B full fine-tunes (2706-2708), the llama-recipes FSDP LoRA memory PR (2709-2712), ms-swift's
# LoRA-initialisation tuner headers (2713-2715) and its packed full-DPO header (2716).

_TT_AO_CARD = {
    "model": "meta-llama/Llama-2-7b-hf", "scope": "full",
    "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
    "parallel": {"strategy": "single", "gradient_checkpointing": True},
    "batch": {"micro_batch_size": 2, "seq_len": 1024},
    "loss": {"chunked": True, "kernel": "torchtune"},
}
"""torchtune 52d1b838's full_finetune_single_device with llama2/7B_full_low_memory.yaml (batch_size 2, activation
checkpointing, CEWithChunkedOutputLoss, dtype bf16, Alpaca with max_seq_len null) and the optimizer swapped, as the
torchao low-bit-optim README's Llama-2-7B table states; optimizer_in_bwd false (the README's figures need the gradients
held: see the points' notes). Alpaca is not truncated: 1024 tokens an approximate upper bound on a batch's longest row
(approx_seq; with checkpointing and the chunked loss the activations are under 1 GiB either way)."""


def _tt_ao_card(optimizer: str) -> dict[str, Any]:
    """A torchao Llama-2-7B row: pure bf16 full fine-tune with ``optimizer`` (torch fused AdamW, or an 8-bit AdamW)."""
    return {**_TT_AO_CARD, "precision": dict(_TT_PURE_BF16, optimizer=optimizer)}


def _recipes_lora_card(*, keeps_logits: bool) -> dict[str, Any]:
    """llama-recipes (meta-llama/llama-cookbook) llama_finetuning.py at e5970e2e (2023-07-25, PR #41 merged): Llama-2-7B
    LoRA under FSDP1 full shard on 4 A100-40GB, pure bf16 (``model.to(torch.bfloat16)`` before get_peft_model), PEFT
    LoRA r 8 alpha 32 on q_proj / v_proj, dropout 0.05 (configs/peft.py), torch AdamW (fsdp_config.optimizer "AdamW"),
    batch 4 of samsum concatenated into 2048-token chunks (ft_datasets/utils.py Concatenator(chunk_size=2048)),
    activation checkpointing (fsdp_activation_checkpointing True), limit_all_gathers True, transformers >= 4.31 eager
    attention. ``keeps_logits``: the loop before the PR (``outputs = model(**batch); loss = outputs.loss``), which holds
    the model output through backward; after it ``loss = model(**batch).loss`` (utils/train_utils.py l.88). Both
    return the key/value cache (``loop.returns_kv_cache``): from_pretrained leaves config.use_cache at Llama-2's true
    (llama_finetuning.py l.93-97) and the layers are checkpointed by torch's apply_activation_checkpointing
    (policies/activation_checkpointing_functions.py l.17-32), not the model's gradient_checkpointing flag that turns
    use_cache off (transformers 4.31.0 models/llama/modeling_llama.py l.658-663). The kept output's logits are the fp32
    ones: LlamaForCausalLM upcasts them itself before the loss and returns the upcast tensor (l.825, l.844-850), the
    bf16 lm_head output freed (``loop.kept_output_dtype: fp32``)."""
    card: dict[str, Any] = {
        "model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
        "lora": {"rank": 8, "alpha": 32, "targets": ["q_proj", "v_proj"], "dropout": 0.05},
        "precision": {"weights": "bf16", "compute": "bf16", "master_weights": "none", "optimizer": "adamw",
                      "optimizer_states": "same_as_weights", "optimizer_impl": "foreach"},
        "hardware": {"gpu": "a100-40gb", "gpus_per_node": 4}, "attention": "eager",
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 4, "seq_len": 2048},
        "software": {"transformers": "4.31.0"},
    }
    card["loop"] = {"returns_kv_cache": True}
    if keeps_logits:
        card["loop"] |= {"keeps_output_through_backward": True, "kept_output_dtype": "fp32"}
    return card


_FC_C_CARDS: dict[int, dict[str, Any]] = {
    # axolotl examples/llama-3 @15f7910d (2024-04-18): fft-8b.yaml, full fine-tune of the bf16 checkpoint with bnb
    # PagedAdamW8bit, 8192-token packed rows, non-reentrant checkpointing, flash attention, the HF model's own loss
    2701: {"model": "meta-llama/Meta-Llama-3-8B", "scope": "full",
           "precision": {"weights": "bf16", "compute": "bf16", "master_weights": "none",
                         "optimizer": "paged_adamw_8bit", "optimizer_states": "same_as_weights",
                         "optimizer_impl": "foreach"},
           "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1}, "attention": "flash",
           "parallel": {"strategy": "single", "gradient_checkpointing": True},
           "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 8},
           "software": {"transformers": "4.40.0"}},
    # lora-8b.yml at the same commit trains NousResearch/Llama-2-7b-hf (Llama-2-7B) in LLM.int8 with LoRA r 32
    2702: _ax_qlora_card("meta-llama/Llama-2-7b-hf", optimizer="adamw_8bit", cce=False, dropout=0.05, seq=4096,
                         gpu="rtx4090", weights="int8", scope="lora"),
    # qlora-fsdp-70b.yaml: casperhansen/llama-3-70b-fp16 (Meta-Llama-3-70B), nf4 double quant with bf16 quant storage,
    # FSDP1 full shard with fsdp_offload_params, 512-token rows padded, re-entrant checkpointing, torch AdamW
    2703: _fc_hf_card("meta-llama/Meta-Llama-3-70B", scope="qlora", gpus=2, gpu="rtx4090", strategy="fsdp", mbs=1,
                      seq=512, accum=4, attention="flash",
                      lora={"rank": 8, "alpha": 16, "dropout": 0.05, "double_quant": True},
                      parallel={"fsdp_version": "fsdp1", "offload": "params_and_optimizer"},
                      precision={"weights": "nf4", "master_weights": "none", "optimizer_states": "fp32"},
                      loop={"checkpoint_reentrant": True}),
    # examples/qwen3.5/27b-qlora.yaml @c1193823 (2026-03-06): QLoRA r 16 alpha 32 on q/k/v/o/down/up (no gate_proj, no
    # linear-attention projections), 2048-token packed rows, cut cross-entropy, torchao AdamW4bit (planned as the 8-bit
    # AdamW: the adapters' states are well under 0.1 GiB either way)
    2704: {**_ax_qlora_card("Qwen/Qwen3.5-27B", optimizer="adamw_8bit", cce=True, dropout=0.0, rank=16, mbs=1),
           "lora": {"rank": 16, "alpha": 32, "dropout": 0.0, "double_quant": True,
                    "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "down_proj", "up_proj"]}},
    # examples/glm45/glm-45-air-qlora.yaml @753906cf (2026-03-05): quantize_moe_experts (the 3-D expert tensors nf4 as
    # well), LoRA r 16 alpha 8 on q/k/v/o only, 2048-token packed rows, batch 2, bnb AdamW8bit, cut cross-entropy
    2705: {**_ax_qlora_card("zai-org/GLM-4.5-Air", optimizer="adamw_8bit", cce=True, dropout=0.0, rank=16),
           "lora": {"rank": 16, "alpha": 8, "dropout": 0.0, "double_quant": True, "quantize_moe_experts": True,
                    "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}},
    2706: _tt_ao_card("adamw"),
    2707: _tt_ao_card("adamw_8bit"),
    2708: _tt_ao_card("adamw_8bit"),
    2709: _recipes_lora_card(keeps_logits=False),
    2710: _recipes_lora_card(keeps_logits=False),
    2711: _recipes_lora_card(keeps_logits=True),
    2712: _recipes_lora_card(keeps_logits=True),
    # ms-swift tuners/{olora,pissa,neftune}/train.sh @b40f31df (2024-12-05): the tuners/lora run of point 2661 with only
    # the adapter initialisation (OLoRA, PiSSA) or NEFTune's embedding noise changed
    2713: _swift_sft_card("Qwen/Qwen2-7B-Instruct", seq=131),
    2714: _swift_sft_card("Qwen/Qwen2-7B-Instruct", seq=131),
    2715: _swift_sft_card("Qwen/Qwen2-7B-Instruct", seq=131),
    # ms-swift examples/train/packing/dpo.sh @2900bbf4 (2025-08-13): full DPO of Qwen2.5-7B-Instruct under ZeRO-3 on 4
    # GPUs, pairs packed into 8192-token rows (a pair of 4096-token sequences holds the same tokens), flash attention,
    # the reference a second bf16 copy, expandable segments
    2716: _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", scope="full", gpus=4, strategy="zero3", method="dpo", seq=4096,
                          attention="flash", deepspeed=_SWIFT_Z3_HEAD,
                          hardware={"allocator": "expandable_segments"}),
}


POINTS.update(_firstcontact_card_mappings("published_memory_points_firstcontact_2612c.json", _FC_C_CARDS))


# ---- first-contact points, fourth set (published_memory_points_firstcontact_2612d.json, ids 2801+, sources there)
#
# Scored as found: each point's notes record trainfit's error on first contact, before any change made for them.
# PEFT's MetaMathQA result files not scored before (2801-2806: LoRA with KaSA, with the Riemannian-preconditioned AdamW,
# block-diagonal LoRA on the MLP, and P-tuning with its MLP prompt encoder, on an L40S or an RTX 4090), torchtitan's
# per-parameter FSDP commit (2807-2815: Llama-2-7B shapes on 8 Meta H100s, FSDP1 / FSDP2, full, per-op selective and no
# activation checkpointing) and two ms-swift LoRA example headers (2816-2817).


def _peft_4090_card(scope: str, **section: dict) -> dict[str, Any]:
    """A PEFT MetaMathQA run on an RTX 4090 with transformers 5.12.1 (the run files' meta_info.package_info and
    system_info): the L40S harness card (``_peft_l40s_card``) on that GPU and version."""
    card = _peft_l40s_card(scope, **section)
    return {**card, "software": {"transformers": "5.12.1"}, "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}}


def _titan_pr165_card(*, fsdp_version: str, ac: str, compiled: bool = False) -> dict[str, Any]:
    """torchtitan @83c879f1 (PR #165) and its parent: train_configs/llama_7b.toml (flavor 7B = dim 4096, 32 layers, 32
    heads, Llama-2's 32,000-token tokenizer and 11,008-wide MLP: Llama-2-7B's shapes), local batch 8 x 2048 tokens, 8
    GPUs of one host, FSDP full shard per transformer block with MixedPrecisionPolicy(param bf16, reduce fp32) over fp32
    parameters (parallelize_llama.py l.211-229; FSDP1's MixedPrecision alike at the parent, l.223-231), torch AdamW
    foreach (train.py l.95-96). ``ac``: full (checkpoint_wrapper per block), op (per-op SAC) or none.

    The loss (mapping corrected after first contact): the model's forward returns ``self.output(h).float()``
    (torchtrain/models/llama/model.py l.501 @83c879f1, l.516 at the parent): the bf16 logits are a temporary of that
    line and the model output is an fp32 copy; the loop binds it, ``pred = model(input_ids)``, scores
    ``F.cross_entropy(pred.flatten(0, 1), ...)`` on it and keeps it bound through ``backward()`` and the optimizer
    step until the next step's ``pred = model(...)`` (train.py l.277-298 @83c879f1): loop.keeps_output_through_backward
    with kept_output_dtype fp32 (first contact mapped it as a cross-entropy on bf16 logits, loss.upcast false).

    'SAC' (mapping corrected after first contact): the same figures were posted on 2024-03-06 in
    https://github.com/pytorch/torchtitan/pull/116 and on 2024-03-13 in https://github.com/pytorch/torchtitan/pull/135
    (their descriptions, read 2026-12-05), before every-n-th-layer checkpointing existed (it came
    with 0d415d782b9cdee51bd8fe3d03ada4e3157cc446, #125, 2024-03-14). Until then the only selective option was
    ``--training.enable_selective_ac``, the per-op policy that saves the outputs of every other ``aten.mm`` and of the
    SDPA flash / efficient kernels (torchtrain/parallelisms/parallelize_llama.py l.71-116 and config_manager.py
    l.245-248 @680f1aab6aba3efeb212498379d327cd8e4bb57c, 2024-03-06, the commit that added minipile); #135 calls it
    'the SAC policy ... in not recomputing'. Planned as parallel.gradient_checkpointing selective (op).

    ``compiled`` (mapping corrected after first contact): the no-AC line sits in the description's 'Compile: same setup
    as eager' list, under 'For fun -- how much can we push MFU?' (https://github.com/pytorch/torchtitan/pull/165, read
    2026-12-05), beside the compiled SAC run at 16 local batch; its 40 % MFU and 9100-9300 WPS are above every eager
    line's. train.py l.215-225 @83c879f1: ``model = torch.compile(model)`` with training.compile. parallel.compile."""
    parallel: dict[str, Any] = {"strategy": "fsdp", "fsdp_version": fsdp_version,
                                "gradient_checkpointing": {"full": True, "op": "selective", "none": False}[ac]}
    if compiled:
        parallel["compile"] = True
    return {
        "model": "meta-llama/Llama-2-7b-hf", "scope": "full",
        "precision": {"weights": "fp32", "compute": "bf16", "master_weights": "none", "optimizer": "adamw",
                      "optimizer_states": "same_as_weights", "optimizer_impl": "foreach"},
        "hardware": {"gpu": "h100-sxm-hbm2e-96gb", "gpus_per_node": 8}, "attention": "sdpa",
        "parallel": parallel, "batch": {"micro_batch_size": 8, "seq_len": 2048},
        "loop": {"keeps_output_through_backward": True, "kept_output_dtype": "fp32"},
    }


_FC_D_CARDS: dict[int, dict[str, Any]] = {
    # KaSA and the Riemannian-preconditioned AdamW leave the LoRA r 32 q/v run of point 44 in memory terms
    2801: _peft_l40s_card("lora", lora={"rank": 32, "alpha": 64, "targets": ["q_proj", "v_proj"]}),
    2802: _peft_l40s_card("lora", lora={"rank": 32, "alpha": 64, "targets": ["q_proj", "v_proj"]}),
    # BD-LoRA r 14 on gate/up/down (block-diagonal factors: fewer adapter parameters than plain LoRA r 14)
    2803: _peft_l40s_card("lora", lora={"rank": 14, "alpha": 28, "targets": _MLP}),
    # P-tuning: the virtual tokens as prompt tuning's; the MLP prompt encoder's parameters are not a card term
    2804: _peft_l40s_card("prompt_tuning", prompt_tuning={"num_virtual_tokens": 20}),
    2805: _peft_4090_card("prompt_tuning", prompt_tuning={"num_virtual_tokens": 30}),
    2806: _peft_4090_card("prompt_tuning", prompt_tuning={"num_virtual_tokens": 50}),
    2807: _titan_pr165_card(fsdp_version="fsdp1", ac="full"),
    2808: _titan_pr165_card(fsdp_version="fsdp1", ac="full"),
    2809: _titan_pr165_card(fsdp_version="fsdp1", ac="op"),
    2810: _titan_pr165_card(fsdp_version="fsdp1", ac="op"),
    2811: _titan_pr165_card(fsdp_version="fsdp2", ac="full"),
    2812: _titan_pr165_card(fsdp_version="fsdp2", ac="full"),
    2813: _titan_pr165_card(fsdp_version="fsdp2", ac="op"),
    2814: _titan_pr165_card(fsdp_version="fsdp2", ac="op"),
    2815: _titan_pr165_card(fsdp_version="fsdp2", ac="none", compiled=True),
    # ms-swift examples/train/early_stop/lora_sft.sh: the run of point 711 (examples/train/lora_sft.sh) with early stop
    2816: _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", seq=607),
    # ms-swift examples/train/agent/loss_scale/train.sh: Qwen2.5-3B LoRA with embed_tokens and lm_head trained in full
    # (modules_to_save), rows truncated at max_length 2048. The script sets use_liger_kernel, but --loss_scale hermes is
    # not binary (swift/loss_scale/config/hermes.json weights <tool_call> spans 2.0; ConfigLossScale.is_loss_scale_binary,
    # swift/loss_scale/base.py l.161-166), so the template keeps a loss_scale tensor (swift/template/base.py l.1000) and
    # compute_loss pops the labels before the forward, warning that Liger's cross-entropy 'will not take effect'
    # (swift/trainers/seq2seq_trainer.py l.131-137): the model returns the full logits and per_token_loss_func scores
    # logits.float() with reduction none (swift/trainers/utils.py l.101-113), all @d0c71e48c3871cb539f974a8b6bce668c3fb805f.
    # Planned as the eager loss with the fp32 upcast (the card's default), not Liger's fused linear cross-entropy.
    2817: _swift_sft_card("Qwen/Qwen2.5-3B", lora={"modules_to_save": ["embed_tokens", "lm_head"]}),
}


POINTS.update(_firstcontact_card_mappings("published_memory_points_firstcontact_2612d.json", _FC_D_CARDS))


# ---- first-contact points, fifth set (published_memory_points_firstcontact_2612e.json, ids 2901+, sources there)
#
# Scored as found: each point's notes record trainfit's error on first contact, before any change made for them.
# ms-swift example headers not scored before, all @3602360a562313afbf2ef6065fdf61f271a2c5b9: Megatron-SWIFT runs
# (2901-2906: dense full fine-tunes under Megatron tensor parallel, a Qwen3-30B-A3B full fine-tune with the whole
# optimizer offloaded to the CPU, a blockwise-fp8 MoE run) and ``swift sft`` runs (2907-2915: AdaLoRA, the unsloth
# backend, Muon on LoRA, full fine-tunes under ZeRO-3 with packing and Liger, Ulysses sequence parallel over 8 GPUs at
# LongAlpaca lengths, gpt-oss-20b LoRA, the self-cognition notebook).
#
# Left out, as trainfit refuses their cards (no figure to score): Megatron-SWIFT's DPO headers
# (examples/megatron/rlhf/dpo/dense.sh '# 4 * 45GiB', rlhf/dpo/group_by_length.sh '# 4 * 56GiB') run the reference
# model's forward under no_grad before the policy's in each micro-batch's forward_step
# (swift/megatron/trainers/dpo_trainer.py l.77-93 at that commit), a placement trainfit does not plan with Megatron
# tensor parallel (roles.reference gpu / lora_disabled is refused with tensor_parallel_impl megatron); its LoRA DPO /
# RM runs on Qwen3-30B-A3B (lora/dpo.sh '# 2 * 65GiB', rlhf/rm/moe.sh '# 2 * 45GiB') and Qwen3-235B-A22B
# (lora/qwen3_235b.sh) put LoRA on expert-parallel experts, which trainfit refuses (parallel.expert_parallel with
# lora). Megatron-SWIFT's Qwen3-30B-A3B Megatron-LM header (moe/qwen3_moe.sh '16 * 60GiB') is the figure of
# Quick-start.md's table, already a step-time entry's (swift-a800-qwen3-30b-a3b-megatron): not a new measurement.


def _swift_mcore_card(model: str, *, gpus: int, tp: int = 1, ep: int = 1, mbs: int = 1, seq: int = 8192,
                      accum: int = 1, recompute: bool | str = True, offload: str = "none", gpu: str = "a100-80gb",
                      **extra: Any) -> dict[str, Any]:
    """A Megatron-SWIFT ``megatron sft`` / ``megatron pt`` example run, full parameters, planned as
    ``benchmarks/step_times.py`` ``map_train`` plans the ms-swift-megatron entries (point 703's card): the distributed
    optimizer as ZeRO-1 over the data-parallel ranks, Megatron-Core tensor parallel with sequence parallel, Transformer
    Engine's fused kernels as compile, fp32 gradient buffers (Megatron-LM accumulates bf16 runs' gradients in fp32),
    flash attention, recompute full uniform 1 (``gradient_checkpointing``). Every script sets
    PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' (``hardware.allocator``). ``ep``: expert parallel with
    expert_tensor_parallel 1 (Megatron-SWIFT's default for MoE), grouped GEMM launched eagerly, aux-loss balancing."""
    par: dict[str, Any] = {"strategy": "zero1", "offload": offload, "gradient_checkpointing": recompute,
                           "compile": True, "tensor_parallel": tp, "sequence_parallel": tp > 1,
                           "tensor_parallel_impl": "megatron"}
    if ep > 1:
        par |= {"expert_parallel": ep, "expert_tensor_parallel": 1, "moe_launch": "eager",
                "moe_load_balancing": "aux_loss"}
    card: dict[str, Any] = {
        "model": model, "method": "sft", "scope": "full",
        "hardware": {"gpu": gpu, "gpus_per_node": gpus, "allocator": "expandable_segments"},
        "parallel": par, "batch": {"micro_batch_size": mbs, "seq_len": seq, "grad_accum": accum},
        "attention": "flash", "precision": {"optimizer": "adamw", "optimizer_in_backward": False, "grads": "fp32"}}
    for k, v in extra.items():
        card[k] = {**card.get(k, {}), **v} if isinstance(v, dict) else v
    return card


_SWIFT_Z3_LIGER = {"deepspeed": _SWIFT_Z3_HEAD, "attention": "flash", "loss": {"chunked": True, "kernel": "liger"}}
"""``--deepspeed zero3 --use_liger_kernel true --attn_impl flash_attn``: ms-swift's zero3.json (``_SWIFT_Z3_HEAD``),
Liger's fused linear cross-entropy (no logits tensor), flash attention."""

_FC_E_CARDS: dict[int, dict[str, Any]] = {
    # examples/megatron/sft.sh: Qwen2.5-7B-Instruct TP2 SP, mbs 16 = gbs 16 of the alpaca-gpt4 / self-cognition mix,
    # padding-free rows (megatron_args.py padding_free True) of at most 16 x 607 tokens: point 703's command
    2901: _swift_mcore_card("Qwen/Qwen2.5-7B-Instruct", gpus=2, tp=2, mbs=16, seq=640),
    # examples/megatron/muon.sh, its 'adam(w)' line: the same run with the default optimizer
    2902: _swift_mcore_card("Qwen/Qwen2.5-7B-Instruct", gpus=2, tp=2, mbs=16, seq=640),
    # examples/megatron/moe/qwen3_moe_offload.sh: EP4 on 4 GPUs (DP4), packing 8192, gbs 16 -> 4 micro-batches,
    # optimizer_cpu_offload with offload_fraction 1: the fp32 master and AdamW states on the host
    2903: _swift_mcore_card("Qwen/Qwen3-30B-A3B-Base", gpus=4, ep=4, accum=4, offload="optimizer"),
    # examples/megatron/pretrain.sh: Qwen2.5-7B TP4 SP, packing 8192, selective recompute (core attention), gbs 16
    2904: _swift_mcore_card("Qwen/Qwen2.5-7B", gpus=4, tp=4, accum=16, recompute="selective",
                            parallel={"selective_checkpointing": "core_attention"}),
    # examples/megatron/dense/qwen3_32b.sh: Qwen3-32B TP8 SP, packing 8192, gbs 16
    2905: _swift_mcore_card("Qwen/Qwen3-32B", gpus=8, tp=8, accum=16),
    # examples/megatron/fp8/llm.sh: Qwen3-30B-A3B-Instruct-2507-FP8 (Qwen3-30B-A3B's shapes), fp8 blockwise, TP2 EP8
    # (DP4), mbs 4 padding-free rows of at most 4 x 2048 tokens, bf16 Adam moments (exp_avg / exp_avg_sq bf16); a
    # 95 GiB per-GPU header: a 96 GB card (h20, capacity only)
    2906: _swift_mcore_card("Qwen/Qwen3-30B-A3B", gpus=8, tp=2, ep=8, mbs=4, seq=2048, gpu="h20",
                            precision={"compute": "fp8", "fp8_recipe": "blockwise", "optimizer_states": "bf16"}),
    # examples/train/tuners/adalora/train.sh: AdaLoRA starts every all-linear module at adalora_init_r 12
    # (swift/arguments/tuner_args.py l.175-176), alpha 32; self-cognition only (131 tokens at most)
    2907: _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", seq=131, lora={"rank": 12}),
    # examples/train/tuners/unsloth/train.sh: LoRA r 8 alpha 32 all-linear through the unsloth backend, self-cognition
    2908: _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", seq=131),
    # examples/train/optimizer/muon.sh: point 711's run (alpaca-gpt4 mix, LoRA r 8 all-linear) with Moonlight's Muon
    2909: _swift_sft_card("Qwen/Qwen2.5-7B-Instruct", seq=607),
    # examples/train/full/qwen2_5_32b.sh: full, ZeRO-3 on 8 GPUs, packing 8192, Liger, flash, expandable segments
    2910: _swift_sft_card("Qwen/Qwen2.5-32B", scope="full", gpus=8, strategy="zero3", seq=8192,
                          hardware={"allocator": "expandable_segments"}, **_SWIFT_Z3_LIGER),
    # examples/train/padding_free/sft.sh, the 'without padding_free' line: batch 8 padded to the longest row, at most
    # max_length 8192; full, ZeRO-3 on 4 GPUs, Liger, flash
    2911: _swift_sft_card("Qwen/Qwen2.5-7B", scope="full", gpus=4, strategy="zero3", seq=8192,
                          batch={"micro_batch_size": 8}, **_SWIFT_Z3_LIGER),
    # examples/train/agent/glm4.sh: GLM-4-9B-0414 full, ZeRO-3 on 4 GPUs, packing 8192, Liger, flash
    2912: _swift_sft_card("zai-org/GLM-4-9B-0414", scope="full", gpus=4, strategy="zero3", seq=8192, **_SWIFT_Z3_LIGER),
    # examples/train/sequence_parallel/sequence_parallel.sh: Qwen2.5-3B-Instruct LoRA, DDP over 8 GPUs with Ulysses
    # sequence parallel 8, batch 4 LongAlpaca-12k rows (longest 25,826 tokens, padded to a multiple of 8: 25,832)
    2913: _swift_sft_card("Qwen/Qwen2.5-3B-Instruct", gpus=8, strategy="ddp", seq=25832, attention="flash",
                          parallel={"context_parallel": 8, "context_parallel_kind": "ulysses"},
                          batch={"micro_batch_size": 4}),
    # examples/models/gpt_oss/train.sh: gpt-oss-20b LoRA r 8 all-linear on one GPU, the alpaca-gpt4 mix
    2914: _swift_sft_card("openai/gpt-oss-20b", seq=607),
    # examples/notebook/qwen2_5-self-cognition/sft.sh: Qwen2.5-3B-Instruct LoRA r 8 all-linear, the alpaca-gpt4 mix
    2915: _swift_sft_card("Qwen/Qwen2.5-3B-Instruct", seq=607),
}


POINTS.update(_firstcontact_card_mappings("published_memory_points_firstcontact_2612e.json", _FC_E_CARDS))


MEMORY_POINTS = ROOT / "benchmarks" / "data" / "published_memory_points.json"
"""Further published peak-memory measurements found for issue 15 (framework docs and tutorials), in
measured_points.json's shape, each with its source (repository + path + commit and date)."""
MEMORY_POINTS_QWEN_TORCHAO_PEFT = ROOT / "benchmarks" / "data" / "published_memory_points_qwen_torchao_peft.json"
"""Published peak-memory measurements scored as ids 501+, in the same shape: PEFT's MetaMathQA
results beside points 43-49 (mapped below), and runs whose step time is already an entry (``train_file`` /
``train_entry``, with the point's own ``metric`` / ``unit``)."""
MEMORY_POINTS_NANOTRON = ROOT / "benchmarks" / "data" / "published_memory_points_nanotron_benchmark.json"
"""The Ultra-Scale Playbook sweep's per-GPU peaks (nanotron, ids 601+): rank 0's ``max_memory_reserved`` (GiB) printed
beside the MFU of each step-time entry of published_train_times_nanotron_ultrascale.json, each point naming its entry
(``train_file`` / ``train_entry``, ``metric`` / ``unit``; the ``mem_metric`` cites nanotron's logging code)."""
MEMORY_POINTS_MS_SWIFT = ROOT / "benchmarks" / "data" / "published_memory_points_ms_swift.json"
"""Published peak-memory figures scored as ids 701+: ms-swift's Megatron-SWIFT runs (each naming a
step-time entry, ``train_file`` / ``train_entry``, or carrying its own entry in that schema, ``run``) and ms-swift's
``swift sft`` example runs (mapped below, ``_swift_sft_card``). Every figure is the header comment of the script (or the
doc's table) that states the run; the points say which log field it would be (``mem_metric``) and are flagged
ambiguous, since no header says how it was read."""
MEMORY_POINTS_LITGPT = ROOT / "benchmarks" / "data" / "published_memory_points_litgpt.json"
"""Lit-GPT's resource tables (ids 801+, mapped by ``_litgpt_mappings``): max_memory_allocated of finetune/lora.py runs on
A100-SXM4-40GB, and the out-of-memory cells as fit verdicts."""
MEMORY_POINTS_FIRSTCONTACT = ROOT / "benchmarks" / "data" / "published_memory_points_firstcontact_2612.json"
"""Published peak-memory measurements scored on first contact (ids 2601+, mapped by ``_firstcontact_mappings``): LitGPT's
config-hub table and PEFT / HF Trainer DeepSpeed and FSDP runs of Llama 70B; each note records the first-contact error."""
MEMORY_POINTS_FIRSTCONTACT_B = ROOT / "benchmarks" / "data" / "published_memory_points_firstcontact_2612b.json"
"""Published peak-memory measurements scored on first contact, second set (ids 2661+, mapped by
``_firstcontact_card_mappings``): ms-swift example headers (DPO, SimPO, ZeRO-3 with and without Liger) and axolotl's example
READMEs (gpt-oss 20B / 120B under FSDP2, Mistral-Small-24B QLoRA, Llama 2 7B on an RTX 4090); each note records the
first-contact error."""
MEMORY_POINTS_FIRSTCONTACT_C = ROOT / "benchmarks" / "data" / "published_memory_points_firstcontact_2612c.json"
"""Published peak-memory measurements scored on first contact, third set (ids 2701+, mapped by
``_firstcontact_card_mappings``): axolotl's llama-3 / qwen3.5 / glm45 example READMEs, torchao's low-bit AdamW table of
torchtune Llama-2-7B full fine-tunes, llama-recipes' FSDP LoRA memory PR, ms-swift's LoRA-initialisation tuner headers
and its packed full-DPO header; each note records the first-contact error."""
MEMORY_POINTS_FIRSTCONTACT_D = ROOT / "benchmarks" / "data" / "published_memory_points_firstcontact_2612d.json"
"""Published peak-memory measurements scored on first contact, fourth set (ids 2801+, mapped by
``_firstcontact_card_mappings``): PEFT's MetaMathQA result files of LoRA variants (KaSA, Riemannian AdamW, BD-LoRA) and
P-tuning, torchtitan's per-parameter FSDP commit (FSDP1 / FSDP2, three checkpointing settings, 8 GPUs) and two ms-swift
LoRA example headers; each note records the first-contact error."""
MEMORY_POINTS_FIRSTCONTACT_E = ROOT / "benchmarks" / "data" / "published_memory_points_firstcontact_2612e.json"
"""Published peak-memory measurements scored on first contact, fifth set (ids 2901+, mapped by
``_firstcontact_card_mappings``): ms-swift example headers of Megatron-SWIFT runs (tensor parallel, optimizer CPU
offload of a MoE, blockwise fp8) and of ``swift sft`` runs (AdaLoRA, unsloth, Muon, ZeRO-3 with packing and Liger,
Ulysses sequence parallel, gpt-oss-20b LoRA); each note records the first-contact error."""
MEMORY_POINT_FILES = (MEMORY_POINTS, MEMORY_POINTS_QWEN_TORCHAO_PEFT, MEMORY_POINTS_NANOTRON, MEMORY_POINTS_MS_SWIFT,
                      MEMORY_POINTS_LITGPT, MEMORY_POINTS_FIRSTCONTACT, MEMORY_POINTS_FIRSTCONTACT_B,
                      MEMORY_POINTS_FIRSTCONTACT_C, MEMORY_POINTS_FIRSTCONTACT_D, MEMORY_POINTS_FIRSTCONTACT_E)

POINTS.update(_train_entry_mappings())

PEERS = ("deepspeed_zero2", "deepspeed_zero3", "llm_analysis", "accelerate")
TOOLS = ("trainfit",) + PEERS
_UNIT_BYTES = {"GiB": GIB, "GB": GB}
_METRIC_ATTR = {"allocated": "allocated", "reserved": "reserved", "device": "device"}

# --------------------------------------------------------------------------------------------
# reference data
# --------------------------------------------------------------------------------------------


def reference_path() -> Path | None:
    """measured_points.json: $TRAINFIT_REFERENCE_DIR, else <repo>/../shared/reference, else <repo>/shared/reference."""
    candidates = []
    if os.environ.get("TRAINFIT_REFERENCE_DIR"):
        candidates.append(Path(os.environ["TRAINFIT_REFERENCE_DIR"]))
    candidates += [ROOT.parent / "shared" / "reference", ROOT / "shared" / "reference"]
    for c in candidates:
        p = (c / "measured_points.json").resolve()
        if p.is_file():
            return p
    return None


DEEPSPEED_POINTS = ROOT / "benchmarks" / "data" / "published_deepspeed_points.json"
"""DeepSpeed ZeRO out-of-memory / fit reports found for issue 15, in measured_points.json's shape (with
``outcome`` oom | fits and, for an OOM, ``requested``: the failing allocation's size)."""


def points_of_other_files(data: Path) -> list[dict[str, Any]]:
    """Every published memory point of the other point files (``MEMORY_POINT_FILES`` and ``DEEPSPEED_POINTS``, those
    present): what a set's tests check its ids and sources against."""
    return [q for f in MEMORY_POINT_FILES + (DEEPSPEED_POINTS,) if f != data and f.is_file()
            for q in json.loads(f.read_text())]


def load_points(path: Path | None = None, *, heldout: bool = False) -> list[dict[str, Any]]:
    """The scored points (reference + DeepSpeed + further memory points); ``heldout``: the held-out points
    only (``"heldout": true`` in published_memory_points.json), which the scored set never includes."""
    if heldout:
        return [p for p in json.loads(MEMORY_POINTS.read_text()) if p.get("heldout")] if MEMORY_POINTS.is_file() else []
    path = path or reference_path()
    if path is None:
        raise FileNotFoundError("measured_points.json not found (set TRAINFIT_REFERENCE_DIR)")
    points = json.loads(Path(path).read_text())
    for extra in (DEEPSPEED_POINTS, *MEMORY_POINT_FILES):
        if extra.is_file():
            points += [p for p in json.loads(extra.read_text()) if not p.get("heldout")]
    return points


# --------------------------------------------------------------------------------------------
# scoring
# --------------------------------------------------------------------------------------------


def _import_peers():
    bench = str(Path(__file__).resolve().parent)
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import peers  # noqa: PLC0415

    return peers


def plan_point(pid: int):
    """The trainfit plan of a supported point (None for an unsupported one)."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    card = POINTS[pid].get("card")
    return None if card is None else make_plan(load_card_dict(card))


def _peer_case(point: dict[str, Any], entry: dict[str, Any], plan) -> dict[str, Any]:
    """The peers.py case dict for a point (built from the trainfit card when there is one)."""
    from trainfit.catalog.models import hf_config_of
    from trainfit.memory.params import param_tensors

    card = entry.get("card")
    if card is None:  # unsupported method: the scope tells every peer so
        method = str(point["method"]).lower().replace(" ", "_")
        return {"hf_config": hf_config_of("meta-llama/Llama-3.2-3B"), "params_total": 0, "largest_layer_params": 0,
                "num_gpus": int(point["num_gpus"]), "gpus_per_node": int(point["num_gpus"]),
                "micro_batch_size": int(point["micro_batch_size"]), "seq_len": 768,
                "gradient_checkpointing": bool(point["grad_ckpt"]), "dtype": "bf16", "strategy": "single",
                "scope": method, "gpu_memory_bytes": 48 * GIB}
    c = plan.card
    model = card["model"]
    n = c.world_size
    prec = c.precision
    case = {
        "hf_config": (
            hf_config_of(model) if isinstance(model, str) else model.get("config") or hf_config_of(model["reference"])),
        "params_total": int(plan.params_total),
        "largest_layer_params": int(max(t.numel for t in param_tensors(plan.spec))),
        "num_gpus": n, "gpus_per_node": c.hardware.gpus_per_node,
        "micro_batch_size": c.batch.micro_batch_size, "seq_len": c.batch.seq_len,
        "gradient_checkpointing": c.parallel.gradient_checkpointing,
        "dtype": c.weights_dtype.value if c.scope.value == "full" else "bf16",
        "strategy": c.parallel.strategy.value if n > 1 else "single",
        "scope": c.scope.value,
        "gpu_memory_bytes": int(plan.gpu.memory_bytes),
        "master_weights": prec.master_weights.value,
        "optimizer_states": "fp32" if prec.optimizer_states.value == "fp32" else "same_as_weights",
    }
    return case


def _peer_overrides(entry: dict[str, Any], plan) -> str | None:
    """A reason to show a peer figure as unsupported although the peer returned one."""
    if plan is not None and plan.card.parallel.offload.value != "none":
        return ("peers.py passes no offload setting (DeepSpeed cpu_offload=False; llm-analysis and accelerate "
                "have none): its figure would be for an un-offloaded run")
    return None


def _run_peers(cases: list[dict[str, Any]]) -> dict[str, list[Any]]:
    peers = _import_peers()
    big = [dict(c, gpu_memory_bytes=2**40) for c in cases]  # llm-analysis refuses what does not fit
    calls = {
        "deepspeed_zero2": lambda: peers.deepspeed_zero2_many(cases),
        "deepspeed_zero3": lambda: peers.deepspeed_zero3_many(cases),
        "llm_analysis": lambda: peers.llm_analysis_many(big),
        "accelerate": lambda: peers.accelerate_estimate_many(cases),
    }
    out: dict[str, list[Any]] = {}
    for name, call in calls.items():
        try:
            out[name] = call()
        except Exception as exc:  # noqa: BLE001 - a missing peer env shows as unsupported, not a crash
            reason = f"peer failed: {type(exc).__name__}: {exc}"[:200]
            out[name] = [peers.Unsupported(reason) for _ in cases]
    return out


def _scored_peak(plan, stage: int | None):
    """The plan's peak phase; with ``stage`` (a point whose source logs one rank: that rank's pipeline stage) the
    peak phase of that stage's rank, chosen as ``Plan.peak`` chooses (largest device figure, ties by allocated)."""
    if stage is None or not plan.stage_phases:
        return plan.peak
    from trainfit.plan.result import peak_phase

    return peak_phase(plan.stage_phases[stage])


def _err(pred: float, meas: float) -> float:
    return (pred - meas) / meas


def heldout_rows(*, with_peers: bool = False) -> list[dict[str, Any]]:
    """The held-out points' rows (reported apart; never in ``published_rows``)."""
    return published_rows(with_peers=with_peers, heldout=True)


def published_rows(*, with_peers: bool = True, path: Path | None = None, heldout: bool = False) -> list[dict[str, Any]]:
    """One row per measured point: trainfit and each peer against the measured value (``heldout``: the
    held-out points instead of the scored ones)."""
    points = load_points(path, heldout=heldout)
    plans, cases = [], []
    for p in points:
        entry = POINTS[p["id"]]
        plan = plan_point(p["id"])
        plans.append(plan)
        cases.append(_peer_case(p, entry, plan))
    peer_results = _run_peers(cases) if with_peers else {}

    rows = []
    for i, (p, plan) in enumerate(zip(points, plans)):
        entry = POINTS[p["id"]]
        unit = entry["unit"]
        ran = p.get("outcome", "measured") != "oom"
        measured = (None if p.get("peak_mem") is None
                    else (float(p["peak_mem"]) + float(p.get("requested") or 0.0)) * _UNIT_BYTES[unit])
        metric = entry["metric"]
        capacity = plan.gpu.memory_bytes if plan is not None else None
        row: dict[str, Any] = {
            "id": p["id"], "model": p["model"], "method": p["method"],
            "gpus": f"{p['num_gpus']}x {p['gpu_type']}",
            "description": f"{p['method']}, {p['optimizer']}, {p['num_gpus']}x {p['gpu_type']}, {p['parallel']}, "
                           f"mbs {p['micro_batch_size']}, seq {p['seq_len']}, ckpt {p['grad_ckpt']}",
            "metric": metric, "metric_source": p["mem_metric"], "unit": unit,
            "measured_bytes": measured, "outcome": "ran" if ran else "out of memory",
            "scope": (entry.get("card") or {}).get("scope", "unsupported"),
            "strategy": _strategy_label(entry.get("card")),
            "ambiguous": bool(entry.get("ambiguous")), "approx_seq": bool(entry.get("approx_seq")),
            "notes": entry["notes"], "reliability": p.get("reliability"),
        }
        if plan is None:
            row.update(trainfit_bytes=f"unsupported: {entry['unsupported']}", trainfit_error=None,
                       trainfit_fits_verdict=None, trainfit_verdict_correct=None, trainfit_peak_phase=None)
        else:
            peak = _scored_peak(plan, entry.get("pipeline_stage"))
            pred = float(getattr(peak, _METRIC_ATTR[metric]))
            row.update(trainfit_bytes=pred, trainfit_error=None if measured is None else _err(pred, measured),
                       trainfit_fits_verdict="fits" if plan.fits else "does not fit",
                       trainfit_verdict_correct=bool(plan.fits) == ran,
                       trainfit_peak_phase=f"{peak.phase.value}: {peak.at}",
                       trainfit_components={k: float(v) for k, v in peak.components.items()})
        override = _peer_overrides(entry, plan)
        for name in PEERS:
            if not with_peers:
                continue
            r = peer_results[name][i]
            if override is not None and not hasattr(r, "reason"):
                r = _unsupported(override)
            if hasattr(r, "reason"):
                row[f"{name}_bytes"] = f"unsupported: {r.reason}"
                row[f"{name}_error"] = None
                row[f"{name}_verdict"] = None
                row[f"{name}_verdict_correct"] = None
            else:
                fits = capacity is not None and r <= capacity
                row[f"{name}_bytes"] = float(r)
                row[f"{name}_error"] = None if measured is None else _err(float(r), measured)
                row[f"{name}_verdict"] = "fits" if fits else "does not fit"
                row[f"{name}_verdict_correct"] = bool(fits) == ran
        rows.append(row)
    return rows


def _strategy_label(card: dict[str, Any] | None) -> str:
    """The error table's strategy column: the card's strategy, '+offload' when it offloads."""
    if card is None:
        return "unsupported"
    par = card.get("parallel", {})
    label = par.get("strategy", "fsdp")
    return label + ("+offload" if par.get("offload", "none") != "none" else "")


def split_summary(rows: list[dict[str, Any]], tool: str = "trainfit") -> list[dict[str, Any]]:
    """|error| by scope, by strategy and by metric: points, median and worst (with the point)."""
    out = []
    for key in ("scope", "strategy", "metric"):
        groups: dict[str, list[tuple[Any, float]]] = {}
        for r in rows:
            e = r.get(f"{tool}_error")
            if e is not None:
                groups.setdefault(str(r.get(key)), []).append((r["id"], e))
        for value, errs in sorted(groups.items()):
            wid, worst = max(errs, key=lambda t: abs(t[1]))
            out.append({"by": key, "value": value, "points": len(errs),
                        "median_abs_error": statistics.median(abs(e) for _, e in errs),
                        "worst_abs_error": abs(worst), "worst_signed": worst, "worst_id": wid})
    return out


def markdown_split(split: list[dict[str, Any]]) -> str:
    lines = ["| by | value | points | median abs err | worst (id) |", "|---|---|---|---|---|"]
    for g in split:
        lines.append(f"| {g['by']} | {g['value']} | {g['points']} | {g['median_abs_error']:.1%} | "
                     f"{g['worst_signed']:+.1%} (#{g['worst_id']}) |")
    return "\n".join(lines)


def verdict_table(rows: list[dict[str, Any]]) -> str:
    """Every point whose outcome is an OOM or a fit report without a figure, and every ZeRO point."""
    lines = ["| id | strategy | reported | trainfit says | right |", "|---|---|---|---|---|"]
    for r in rows:
        if r.get("outcome") == "ran" and r.get("measured_bytes") is not None and not str(r.get("strategy")).startswith("zero"):
            continue
        right = r.get("trainfit_verdict_correct")
        lines.append(f"| {r['id']} | {r.get('strategy')} | {r.get('outcome')} | {r.get('trainfit_fits_verdict')} | "
                     f"{'yes' if right else 'NO'} |")
    return "\n".join(lines)


def _unsupported(reason: str):
    return _import_peers().Unsupported(reason)


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per tool: points scored, median and worst |error| (with the point), signed median, verdicts right."""
    out: dict[str, dict[str, Any]] = {}
    for tool in TOOLS:
        scored = [(r["id"], r[f"{tool}_error"]) for r in rows if r.get(f"{tool}_error") is not None]
        verdicts = [r[f"{tool}_verdict_correct"] for r in rows if r.get(f"{tool}_verdict_correct") is not None]
        if not scored:
            out[tool] = {"points": 0, "median_abs_error": None, "median_signed_error": None,
                         "worst_abs_error": None, "worst_id": None, "fit_verdicts_correct": None}
            continue
        worst_id, worst = max(scored, key=lambda t: abs(t[1]))
        clean = [e for pid, e in scored if not _flagged(rows, pid)]
        out[tool] = {
            "points": len(scored),
            "median_abs_error": statistics.median(abs(e) for _, e in scored),
            "median_signed_error": statistics.median(e for _, e in scored),
            "worst_abs_error": abs(worst), "worst_id": worst_id,
            "median_abs_error_unflagged": statistics.median(abs(e) for e in clean) if clean else None,
            "points_unflagged": len(clean),
            "fit_verdicts_correct": sum(verdicts) / len(verdicts) if verdicts else None,
            "fit_verdicts": len(verdicts),
        }
    return out


def _flagged(rows: list[dict[str, Any]], pid: int) -> bool:
    r = next(r for r in rows if r["id"] == pid)
    return r["ambiguous"]


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------


def _cell(row: dict[str, Any], tool: str) -> str:
    b = row.get(f"{tool}_bytes")
    if b is None:
        return ""
    if isinstance(b, str):
        return "unsup."
    e = row[f"{tool}_error"]
    miss = "" if row[f"{tool}_verdict_correct"] else " ✗"
    return f"{b / GIB:.1f}" + ("" if e is None else f" ({e:+.0%})") + miss


def markdown_table(rows: list[dict[str, Any]]) -> str:
    head = ["id", "model", "method", "GPUs", "metric", "measured GiB", "trainfit", "DS ZeRO-2", "DS ZeRO-3",
            "llm-analysis", "accelerate", "flags"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        p_method, gpus = r["method"], r["gpus"]
        flags = ",".join(f for f, on in (("ambiguous", r["ambiguous"]), ("approx-seq", r["approx_seq"])) if on)
        tf = _cell(r, "trainfit") if not isinstance(r["trainfit_bytes"], str) else "unsupported"
        lines.append("| " + " | ".join([
            str(r["id"]), r["model"], p_method, gpus, r["metric"], ("—" if r["measured_bytes"] is None else f"{r['measured_bytes'] / GIB:.2f}"), tf,
            *(_cell(r, t) for t in PEERS), flags]) + " |")
    lines.append("")
    lines.append("Cells: predicted GiB (signed error vs measured); ✗ = the fit verdict is wrong (a run that ran said not to "
                 "fit, or an out-of-memory report said to fit). An OOM point's measured figure is the allocated bytes at "
                 "the failure plus the failing request.")
    return "\n".join(lines)


def markdown_summary(s: dict[str, dict[str, Any]]) -> str:
    lines = ["| tool | points | median abs err | median signed | worst abs err (id) | median abs err, unambiguous | fit verdicts right |",
             "|---|---|---|---|---|---|---|"]
    for tool, v in s.items():
        if not v["points"]:
            lines.append(f"| {tool} | 0 | | | | | |")
            continue
        unfl = v.get("median_abs_error_unflagged")
        unfl_s = "" if unfl is None else f"{unfl:.0%} (n={v['points_unflagged']})"
        lines.append(
            f"| {tool} | {v['points']} | {v['median_abs_error']:.0%} | {v['median_signed_error']:+.0%} | "
            f"{v['worst_abs_error']:.0%} (#{v['worst_id']}) | "
            f"{unfl_s} | "
            f"{v['fit_verdicts_correct']:.0%} of {v['fit_verdicts']} |")
    return "\n".join(lines)


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description="trainfit and its peers against published memory points")
    ap.add_argument("--no-peers", action="store_true", help="score trainfit only")
    args = ap.parse_args()
    rows = published_rows(with_peers=not args.no_peers)
    print(markdown_table(rows))
    print()
    print(markdown_summary(summary(rows)))
    print()
    print(markdown_split(split_summary(rows)))
    print()
    print(verdict_table(rows))
    unsupported = [r for r in rows if isinstance(r["trainfit_bytes"], str)]
    if unsupported:
        print()
        for r in unsupported:
            print(f"- #{r['id']} trainfit {r['trainfit_bytes']}")
    held = heldout_rows(with_peers=not args.no_peers)
    if held:
        print()
        print(f"## Held-out points ({len(held)}: prime-rl CI benchmark peaks, scored at first contact, not in the figures above)")
        print()
        print(markdown_table(held))
        print()
        print(markdown_summary(summary(held)))
        print()
        print(markdown_split(split_summary(held)))
        for r in held:
            if isinstance(r["trainfit_bytes"], str):
                print(f"- #{r['id']} trainfit {r['trainfit_bytes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
