"""The estimator-vs-trace grid: small random-dimension models traced on fake tensors.

Pure data. Each case gives the run card trainfit plans and the trace request that measures
the same step (``trainfit.trace.api.TraceRequest`` keyword arguments).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ARCHS: dict[str, dict[str, Any]] = {
    "llama": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
              "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 32000,
              "tie_word_embeddings": False, "attention_bias": False},
    "llama_wideq": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
                    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 512,
                    "tie_word_embeddings": False, "attention_bias": False},
    "qwen3": {"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
              "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 151936,
              "tie_word_embeddings": False, "attention_bias": False},
    "llama_widemlp": {"model_type": "llama", "hidden_size": 512, "intermediate_size": 8192, "num_hidden_layers": 4,
                      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 512,
                      "tie_word_embeddings": False, "attention_bias": False},
    "qwen2": {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 8192,
              "tie_word_embeddings": True},
    "qwen3_moe": {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
                  "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 8192,
                  "tie_word_embeddings": False, "num_experts": 8, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 128, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True},
    "qwen3_moe_wide": {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
                       "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 512,
                       "tie_word_embeddings": False, "num_experts": 8, "num_experts_per_tok": 4,
                       "moe_intermediate_size": 512, "decoder_sparse_step": 1, "mlp_only_layers": [],
                       "norm_topk_prob": True},
    "gemma2": {"model_type": "gemma2", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
               "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 16384,
               "tie_word_embeddings": True, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0,
               "query_pre_attn_scalar": 32, "sliding_window": 256},
    "qwen3_5": {"model_type": "qwen3_5", "tie_word_embeddings": False, "text_config": {
        "model_type": "qwen3_5_text", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 8192,
        "tie_word_embeddings": False, "linear_num_key_heads": 4, "linear_num_value_heads": 8,
        "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]}},
}


@dataclass(frozen=True, slots=True)
class GridCase:
    arch: str
    scope: str = "full"
    attention: str = "sdpa"
    ckpt: bool = False
    world_size: int = 1
    seq_len: int = 2048
    micro_batch_size: int = 1
    optimizer_impl: str = "fused"
    precision: str = "bf16"
    tensor_parallel: int = 1
    """> 1: torch tensor parallel over this many of the ``world_size`` ranks (FSDP2 over the rest)."""
    sequence_parallel: bool = False
    pipeline_parallel: int = 1
    """> 1: ``world_size`` pipeline stages; the trace runs stage ``pipeline_stage`` alone."""
    pipeline_stage: int = 0
    pipeline_first_stage_layers: int | None = None
    """Uneven split: decoder layers of the first stage (``parallel.pipeline_first_stage_layers``)."""
    pipeline_last_stage_layers: int | None = None
    """Uneven split: decoder layers of the last stage (``parallel.pipeline_last_stage_layers``)."""
    micro_batches: int = 1
    context_parallel: int = 1
    """> 1: the sequence split over this many of the ``world_size`` ranks (``trainfit.trace.context_parallel``;
    FSDP2 over all ranks when there are more than this)."""
    context_parallel_kind: str = "ring"
    expert_parallel: int = 1
    """> 1: each of the ``world_size`` ranks holds 1/this of the experts (``trainfit.trace.expert_parallel``)."""
    num_virtual_tokens: int = 0
    """scope ``prompt_tuning``: the soft prompt's virtual tokens (``prompt_tuning.num_virtual_tokens``)."""
    padding: str = "none"
    """``mask``: samples padded to ``seq_len`` with an attention mask (``batch.padding``; the trace's
    ``padding_mask``)."""
    nf4_compute_dtype: str = "bf16"
    """scope ``qlora``: ``fp32`` loads the model in float32 (``precision.nf4_compute_dtype``)."""

    @property
    def name(self) -> str:
        return (f"{self.arch}-{self.scope}-{self.attention}-{'ckpt' if self.ckpt else 'nockpt'}-r{self.world_size}"
                f"-s{self.seq_len}-b{self.micro_batch_size}-{self.optimizer_impl}"
                + ("" if self.precision == "bf16" else f"-{self.precision}")
                + ("" if self.tensor_parallel == 1 else f"-tp{self.tensor_parallel}")
                + ("-sp" if self.sequence_parallel else "")
                + ("" if self.pipeline_parallel == 1 else f"-pp{self.pipeline_parallel}s{self.pipeline_stage}")
                + ("" if self.pipeline_first_stage_layers is None else f"f{self.pipeline_first_stage_layers}")
                + ("" if self.pipeline_last_stage_layers is None else f"l{self.pipeline_last_stage_layers}")
                + ("" if self.micro_batches == 1 else f"-m{self.micro_batches}")
                + ("" if self.context_parallel == 1 else f"-cp{self.context_parallel}{self.context_parallel_kind}")
                + ("" if self.expert_parallel == 1 else f"-ep{self.expert_parallel}")
                + ("" if not self.num_virtual_tokens else f"-vt{self.num_virtual_tokens}")
                + ("" if self.padding == "none" else f"-pad{self.padding}")
                + ("" if self.nf4_compute_dtype == "bf16" else f"-nf4{self.nf4_compute_dtype}"))

    def hf_config(self) -> dict[str, Any]:
        return ARCHS[self.arch] if self.arch in ARCHS else {}

    def card(self) -> dict[str, Any]:
        card: dict[str, Any] = {
            "model": {"config": self.hf_config(), "id": self.arch},
            "scope": self.scope,
            "attention": self.attention,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": self.world_size},
            # the expert-parallel trace replicates the dense weights over its data-parallel ranks
            "parallel": {"strategy": "single" if self.world_size in (
                self.tensor_parallel * self.pipeline_parallel * self.context_parallel, self.expert_parallel)
                         else "fsdp", "gradient_checkpointing": self.ckpt},
            "batch": {"micro_batch_size": self.micro_batch_size, "seq_len": self.seq_len},
            "precision": {"optimizer_impl": self.optimizer_impl},
        }
        if self.tensor_parallel > 1:
            card["parallel"].update(tensor_parallel=self.tensor_parallel, sequence_parallel=self.sequence_parallel)
        if self.pipeline_parallel > 1:
            card["parallel"]["pipeline_parallel"] = self.pipeline_parallel
            for key in ("pipeline_first_stage_layers", "pipeline_last_stage_layers"):
                if getattr(self, key) is not None:
                    card["parallel"][key] = getattr(self, key)
        if self.micro_batches > 1:
            card["batch"]["grad_accum"] = self.micro_batches
        if self.context_parallel > 1:
            card["parallel"].update(context_parallel=self.context_parallel,
                                    context_parallel_kind=self.context_parallel_kind)
        if self.expert_parallel > 1:
            card["parallel"]["expert_parallel"] = self.expert_parallel
        if self.precision == "fp32_autocast":
            card["precision"].update(weights="fp32", compute="bf16")
        if self.scope in ("lora", "qlora", "dora"):
            card["lora"] = {"rank": 16, "alpha": 32, "targets": "all-linear"}
        if self.nf4_compute_dtype != "bf16":
            card["precision"]["nf4_compute_dtype"] = self.nf4_compute_dtype
        if self.scope == "prompt_tuning":
            card["prompt_tuning"] = {"num_virtual_tokens": self.num_virtual_tokens}
        if self.padding != "none":
            card["batch"]["padding"] = self.padding
        return card

    def trace_kwargs(self) -> dict[str, Any]:
        return {"hf_config": self.hf_config(), "micro_batch_size": self.micro_batch_size, "seq_len": self.seq_len,
                "attention": self.attention, "gradient_checkpointing": self.ckpt, "scope": self.scope,
                "lora_rank": 16, "lora_alpha": 32, "lora_targets": ("all-linear",), "precision": self.precision,
                "optimizer_impl": self.optimizer_impl, "world_size": self.world_size // self.pipeline_parallel,
                **({"num_virtual_tokens": self.num_virtual_tokens} if self.num_virtual_tokens else {}),
                **({"padding_mask": True} if self.padding == "mask" else {}),
                **({"nf4_compute_dtype": self.nf4_compute_dtype} if self.nf4_compute_dtype != "bf16" else {}),
                **({"tensor_parallel": self.tensor_parallel, "sequence_parallel": self.sequence_parallel}
                   if self.tensor_parallel > 1 else {}),
                **({"pipeline_parallel": self.pipeline_parallel, "pipeline_stage": self.pipeline_stage,
                    "pipeline_first_stage_layers": self.pipeline_first_stage_layers,
                    "pipeline_last_stage_layers": self.pipeline_last_stage_layers,
                    "micro_batches": self.micro_batches}
                   if self.pipeline_parallel > 1 or self.micro_batches > 1 else {})}

    def planned_phases(self, plan: Any) -> tuple:
        """The plan's phases of the rank the trace measures: the traced pipeline stage's, else the plan's."""
        return plan.stage_phases[self.pipeline_stage] if self.pipeline_parallel > 1 else plan.phases


GRID: tuple[GridCase, ...] = (
    # dense llama: the attention x checkpointing x ranks cube
    GridCase("llama"),
    GridCase("llama", ckpt=True),
    GridCase("llama", attention="eager", seq_len=512),
    GridCase("llama", attention="eager", ckpt=True, seq_len=512, micro_batch_size=4),
    GridCase("llama", world_size=8),
    GridCase("llama", world_size=8, ckpt=True),
    GridCase("llama", scope="lora"),
    GridCase("llama", scope="lora", ckpt=True, micro_batch_size=4, seq_len=512),
    GridCase("llama", scope="lora", world_size=8, ckpt=True),
    GridCase("llama", optimizer_impl="foreach", seq_len=512, micro_batch_size=4),
    GridCase("llama", optimizer_impl="for_loop", ckpt=True),
    GridCase("llama", precision="fp32_autocast", ckpt=True, seq_len=512),
    # qwen3 (q/k norm, large vocabulary)
    GridCase("qwen3"),
    GridCase("qwen3", ckpt=True, micro_batch_size=4, seq_len=512),
    GridCase("qwen3", attention="eager", seq_len=512),
    GridCase("qwen3", world_size=8, ckpt=True),
    GridCase("qwen3", scope="lora", attention="eager", seq_len=512),
    GridCase("qwen3", scope="lora", world_size=8),
    # qwen2 (qkv bias, tied embeddings)
    GridCase("qwen2"),
    GridCase("qwen2", ckpt=True, world_size=8),
    GridCase("qwen2", scope="lora", ckpt=True),
    # MoE (fused experts, grouped_mm)
    GridCase("qwen3_moe", seq_len=512),
    GridCase("qwen3_moe", ckpt=True, seq_len=512, micro_batch_size=4),
    GridCase("qwen3_moe", world_size=8, seq_len=512),
    # hybrid linear attention (Gated DeltaNet + gated full attention)
    GridCase("gemma2", attention="eager", seq_len=512),
    GridCase("gemma2", attention="eager", ckpt=True),
    GridCase("llama", attention="eager", ckpt=True, scope="lora"),
    GridCase("gemma2", scope="lora", attention="eager", ckpt=True, seq_len=512, micro_batch_size=4),

    GridCase("qwen3_5", seq_len=512),
    GridCase("qwen3_5", ckpt=True, seq_len=512, micro_batch_size=4),
    GridCase("qwen3_5", scope="lora", seq_len=512),
    # PEFT's DoRA (magnitude vectors, saved base and lora_B outputs), (IA)^3 (its llama defaults k, v, down)
    # and prompt tuning (64 virtual tokens before every sequence): trainfit.memory.peft_variants
    GridCase("llama", scope="dora"),
    GridCase("llama", scope="dora", ckpt=True, micro_batch_size=4, seq_len=512),
    GridCase("llama", scope="dora", world_size=8, ckpt=True, seq_len=512),
    GridCase("llama", scope="ia3"),
    GridCase("qwen3", scope="ia3", attention="eager", seq_len=512),
    GridCase("llama", scope="ia3", world_size=8, ckpt=True, seq_len=512),
    GridCase("llama", scope="prompt_tuning", num_virtual_tokens=64),
    GridCase("qwen2", scope="prompt_tuning", num_virtual_tokens=64, ckpt=True, micro_batch_size=4, seq_len=512),
)

QLORA_GRID: tuple[GridCase, ...] = (
    # QLoRA: bitsandbytes 0.50.2 NF4 bases (double quantization) under PEFT's LoRA (trainfit.trace.qlora): the packed
    # weights and their quantization state to the byte, the loss-dominated peaks, bias and tied embeddings (qwen2),
    # and a wide-MLP small-vocabulary model at short sequences where a layer's dequantised weight is at the peak
    # (trainfit.memory.nf4_dequant); an fp32-loaded model (precision.nf4_compute_dtype fp32)
    GridCase("llama", scope="qlora"),
    GridCase("llama", scope="qlora", ckpt=True, micro_batch_size=4, seq_len=512),
    GridCase("qwen3", scope="qlora", attention="eager", seq_len=512),
    GridCase("qwen2", scope="qlora", ckpt=True),
    GridCase("llama_widemlp", scope="qlora", seq_len=128),
    GridCase("llama_widemlp", scope="qlora", ckpt=True, seq_len=128),
    GridCase("llama_widemlp", scope="qlora", seq_len=128, nf4_compute_dtype="fp32"),
    GridCase("llama", scope="qlora", ckpt=True, seq_len=512, nf4_compute_dtype="fp32"),
)
"""QLoRA grid cases (needs bitsandbytes): kept apart from ``GRID`` so its tables and axes stay as they were.

Every phase of every cell is checked (tests/trace/test_qlora_grid.py): within 2 %, a checkpointed cell's forward
within 3.5 %. The checkpointed last layer's forward runs without grad, so its dequantisation moment holds the whole
down_proj input with no adapter copy subtracted (``memory.nf4_dequant.layer_moments``). Open, not QLoRA's: with
checkpointing a layer's forward holds its MLP intermediates beside the checkpoint inputs alone, and the plan's
forward looks at the dequantisation and the loss only. On the wide-MLP model that leaves the forward phase under
(QLoRA, seq 128: -3.1 %; LoRA and QLoRA at micro-batch 4 x 512: -56 % and -72 % before that fix, and their backward
peaks +4.9 % / +6.6 %, so those shapes are not grid cells); the peaks of the cells above sit elsewhere. The backward overestimate left on ``llama_widemlp`` without checkpointing (+1.4 %; LoRA +1.7 %) is the
same in LoRA: the MLP's gradients moment, not the dequantisation."""

TP_GRID: tuple[GridCase, ...] = (
    # tensor (+ sequence) parallel: torch's DTensor plan on a fake process group (trace.tensor_parallel),
    # alone and under FSDP2 over the remaining ranks (2-D mesh)
    GridCase("llama", world_size=2, tensor_parallel=2, seq_len=512),
    GridCase("llama", world_size=4, tensor_parallel=4, sequence_parallel=True, ckpt=True, seq_len=512),
    GridCase("llama", world_size=8, tensor_parallel=2, sequence_parallel=True, seq_len=512),
    GridCase("qwen3", world_size=2, tensor_parallel=2, sequence_parallel=True, seq_len=512),
    GridCase("qwen3", world_size=8, tensor_parallel=2, ckpt=True, seq_len=512),
    # pipeline parallel: one stage under Megatron-Core's 1F1B order with its micro-batches in flight
    # (trace.pipeline): the first stage (most in flight), a middle one, the last (head and loss)
    GridCase("llama", world_size=2, pipeline_parallel=2, micro_batches=4, seq_len=512),
    GridCase("llama", world_size=2, pipeline_parallel=2, micro_batches=4, ckpt=True, seq_len=512),
    GridCase("llama", world_size=4, pipeline_parallel=4, pipeline_stage=1, micro_batches=4, seq_len=512),
    GridCase("qwen3", world_size=2, pipeline_parallel=2, pipeline_stage=1, micro_batches=2, seq_len=512),
    # uneven stages (Megatron-Core num_layers_in_first/last_pipeline_stage): a 2-layer first stage of 3 with
    # the embedding, and a 1-layer last stage (head and loss) after a 3-layer first
    GridCase("llama", world_size=3, pipeline_parallel=3, pipeline_first_stage_layers=2, micro_batches=4,
             seq_len=512),
    GridCase("llama", world_size=2, pipeline_parallel=2, pipeline_stage=1, pipeline_last_stage_layers=1,
             micro_batches=4, seq_len=512),
)
"""Model-parallel grid cases: kept apart from ``GRID`` so its tables and axes stay as they were."""

CP_GRID: tuple[GridCase, ...] = (
    # context parallel, rank 0 (trace.context_parallel): torch's ring attention (load-balanced, K/V
    # all-gathered) and verl's Ulysses all-to-all, a replica per rank or FSDP2 over the data x context ranks
    GridCase("llama", world_size=2, context_parallel=2, seq_len=2048),
    GridCase("llama", world_size=2, context_parallel=2, context_parallel_kind="ulysses", seq_len=2048),
    GridCase("llama", world_size=8, context_parallel=4, ckpt=True, seq_len=2048),
    GridCase("qwen3", world_size=4, context_parallel=4, context_parallel_kind="ulysses", seq_len=1024),
    # attention-heavy (q 4x the hidden size, small vocabulary): the peak sits in a layer's attention backward
    GridCase("llama_wideq", world_size=2, context_parallel=2, ckpt=True, seq_len=4096),
    GridCase("llama_wideq", world_size=4, context_parallel=4, seq_len=4096),
    GridCase("llama_wideq", world_size=4, context_parallel=4, context_parallel_kind="ulysses", seq_len=4096),
)
"""Context-parallel grid cases (per-rank bytes of rank 0 against ``parallel.context_parallel``)."""

EP_GRID: tuple[GridCase, ...] = (
    # expert parallel, rank 0 (trace.expert_parallel): 8 experts split over the ranks, all-to-all token
    # dispatch and combine around transformers' grouped experts, dense weights replicated
    GridCase("qwen3_moe", world_size=2, expert_parallel=2, seq_len=512),
    GridCase("qwen3_moe", world_size=2, expert_parallel=2, seq_len=2048, micro_batch_size=2),
    GridCase("qwen3_moe", world_size=4, expert_parallel=4, ckpt=True, seq_len=2048),
    GridCase("qwen3_moe", world_size=8, expert_parallel=8, ckpt=True, seq_len=1024, micro_batch_size=4),
)
"""Expert-parallel grid cases (per-rank bytes of rank 0 against ``parallel.expert_parallel``)."""


@dataclass(frozen=True, slots=True)
class CatalogCase(GridCase):
    """A grid case on a full-size catalog model (slow to trace: extrapolated from shallow depths)."""

    model_id: str = "Qwen/Qwen3-8B"

    @property
    def name(self) -> str:
        return self.model_id.split("/")[-1] + "-" + GridCase.name.fget(self).split("-", 1)[1]

    def hf_config(self) -> dict[str, Any]:
        from trainfit.catalog.models import hf_config_of

        return hf_config_of(self.model_id)

    def card(self) -> dict[str, Any]:
        card = GridCase.card(self)
        card["model"] = self.model_id
        return card


SLOW_GRID: tuple[CatalogCase, ...] = (
    CatalogCase("qwen3_8b"),
    CatalogCase("qwen3_8b", ckpt=True, optimizer_impl="for_loop"),
    CatalogCase("qwen3_8b", attention="eager", optimizer_impl="foreach"),
    CatalogCase("qwen3_8b", world_size=8, ckpt=True),
    CatalogCase("qwen3_8b", world_size=8),
    CatalogCase("qwen3_8b", scope="lora", ckpt=True),
    CatalogCase("qwen3_8b", precision="fp32_autocast", ckpt=True, optimizer_impl="for_loop"),
    # seed 000's GRPO actor step on RTX 4090s: Qwen3.5-27B (3 Gated DeltaNet + 1 attention layers), prompt 1024 +
    # response 4096 tokens, checkpointing, FSDP2 over 4 or 8 cards (extrapolated from one 12-layer trace, the 8-layer step cut out of it)
    CatalogCase("qwen3_5_27b", model_id="Qwen/Qwen3.5-27B", scope="lora", ckpt=True, world_size=4, seq_len=5120),
    CatalogCase("qwen3_5_27b", model_id="Qwen/Qwen3.5-27B", scope="lora", ckpt=True, world_size=8, seq_len=5120),
    CatalogCase("qwen3_5_27b", model_id="Qwen/Qwen3.5-27B", ckpt=True, world_size=8, seq_len=5120),
)


SLOW_TP_GRID: tuple[CatalogCase, ...] = (
    CatalogCase("qwen3_8b", model_id="Qwen/Qwen3-8B", world_size=4, tensor_parallel=4, sequence_parallel=True, ckpt=True),
    CatalogCase("llama_70b", model_id="meta-llama/Llama-3.1-70B", world_size=8, tensor_parallel=8, sequence_parallel=True),
)
"""Full-size tensor-parallel cases (extrapolated from 4 and 5 traced layers)."""
