"""Every module-level numeric constant of the time and memory model names where its value comes from.

The rule (a constant is read from a publication or a code base, or measured on a host by a committed script, and
cited where it is defined) is checked here on the source text: for each module-level ``NAME = <number or arithmetic
of numbers>`` in ``src/trainfit/compute``, ``plan`` and ``memory``, the docstring right under it, the comment on its
line(s) and the comment block right above it must hold a citation mark: a URL, an arXiv id, a commit (``@`` and 7-40
hex digits), a source file path (``owner/repo/…/file.py``-like, with an extension), "measured", or a
``benchmarks/`` script. A neighbour's docstring does not count.

``UNIT_DEFINITIONS`` is the only permanent allow-list: unit conversions, dtype widths, bit positions of an internal
key encoding, a numerical tolerance. ``UNCITED_DEBT`` lists the constants found without a citation mark when this
test was written; it may only shrink: a constant that gains a citation must leave it (``test_debt_list_is_current``),
and a new constant without one fails ``test_no_new_uncited_constant``.
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "trainfit"
PACKAGES = ("compute", "plan", "memory")
CITATION = re.compile(
    r"https?://|arxiv|@[0-9a-f]{7,40}\b"
    r"|\b[\w.-]+/[\w./-]+\.(?:py|pyx|cu|cuh|h|hpp|cc|cpp|c|md|json|ya?ml|txt|rst|sh|toml)\b"
    r"|\bmeasured\b|benchmarks/",
    re.IGNORECASE,
)


def _numeric(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    return False


def scan_source(src: str) -> dict[str, tuple[int, float, bool]]:
    """``{name: (line, value, cited)}`` for the module-level numeric constants of one module's source."""
    comments, own_line = {}, set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string
            if not tok.line[:tok.start[1]].strip():
                own_line.add(tok.start[0])
    body = ast.parse(src).body
    found: dict[str, tuple[int, float, bool]] = {}
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            name, value = stmt.target.id, stmt.value
        else:
            continue
        if not _numeric(value):
            continue
        text = [comments[line] for line in range(stmt.lineno, stmt.end_lineno + 1) if line in comments]
        nxt = body[i + 1] if i + 1 < len(body) else None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            text.append(nxt.value.value)
        line = stmt.lineno - 1
        while line in own_line:
            text.append(comments[line])
            line -= 1
        found[name] = (stmt.lineno, eval(compile(ast.Expression(value), "<constant>", "eval")),
                       bool(CITATION.search("\n".join(text))))
    return found


@cache
def scan_tree() -> dict[str, tuple[int, float, bool]]:
    """``{"package/module.py:NAME": (line, value, cited)}`` over ``PACKAGES``."""
    out = {}
    for package in PACKAGES:
        for path in sorted((SRC / package).glob("*.py")):
            for name, row in scan_source(path.read_text()).items():
                out[f"{package}/{path.name}:{name}"] = row
    return out


UNIT_DEFINITIONS = {
    "compute/sync.py:GIB": "2**30 bytes",
    "compute/controller_transfer.py:INT64_BYTES": "dtype width",
    "compute/controller_transfer.py:FP32_BYTES": "dtype width",
    "compute/moe_time.py:INT32_BYTES": "dtype width",
    "compute/decode_step.py:ACTIVATION_BYTES": "dtype width (bf16)",
    "plan/time.py:FP8_PARAM_BYTES": "dtype width (fp8)",
    "memory/fp8.py:FP8_GATHERED_BYTES": "dtype width (e4m3)",
    "memory/activations.py:FP32": "dtype width",
    "memory/activations.py:INT64": "dtype width",
    "memory/activations.py:INT32": "dtype width",
    "memory/fp8.py:FP32": "dtype width",
    "memory/nf4_load.py:BF16": "dtype width",
    "memory/nf4_load.py:INT64": "dtype width",
    "memory/peft_variants.py:FP32": "dtype width",
    "memory/peft_variants.py:INT64": "dtype width",
    "memory/alloc_sequence.py:STREAM_SHIFT": "bit position of an internal event-key encoding",
    "memory/expandable_segments.py:_SHIFT": "bit position of an internal block-key encoding",
    "memory/nf4_load.py:NF4_CODES": "2**4 codes of a 4-bit format",
    "memory/caching_allocator.py:ADDR_BITS": "bit position bounding the simulated allocator's addresses",
    "compute/continuous_batching.py:_EPS": "numerical tolerance of a float comparison",
    "compute/fsdp2_output_cast.py:BF16_BYTES": "dtype width",
    "compute/fsdp2_output_cast.py:FP32_BYTES": "dtype width",
    "memory/kbit_upcast.py:KBIT_UPCAST_PARAM_BYTES": "dtype width (fp32)",
    "memory/kbit_upcast.py:KBIT_STREAM_BYTES": "dtype width (fp32)",
}
"""Constants that need no source: what the value is follows from its definition (``key: reason``)."""

UNCITED_DEBT = frozenset("""
compute/attention_time.py:BACKWARD_FLOPS_FACTOR compute/attention_time.py:BASE_HEAD_DIM
compute/attention_time.py:EXP_EXPOSED_FRACTION compute/attention_time.py:FP8_ATTENTION_BACKWARD_KERNELS
compute/attention_time.py:FP8_ATTENTION_FORWARD_KERNELS compute/attention_time.py:SEQ_HALF
compute/attention_time.py:TF32_TO_BF16_TENSOR_RATE compute/attention_time.py:WINDOW_MASK_KERNELS
compute/attention_time.py:WINDOW_TILE_TOKENS compute/collectives.py:DDP_BUCKET_BYTES
compute/continuous_batching.py:JUMP_FORCE_PERIODS compute/continuous_batching.py:JUMP_TOLERANCE
compute/continuous_batching.py:MAX_CHUNKS_PER_LENGTH compute/continuous_batching.py:MIN_CHUNKS_PER_MEAN
compute/continuous_batching.py:MIN_CHUNK_TOKENS compute/controller_transfer.py:DATAPROTO_DESERIALIZE_BYTES_PER_S
compute/controller_transfer.py:LOGPROB_BYTES_PER_TOKEN compute/controller_transfer.py:TRAIN_BYTES_PER_TOKEN
compute/cp_ring.py:BACKWARD_KERNELS_DIAGONAL compute/cp_ring.py:BACKWARD_KERNELS_PER_HIGHER_STEP
compute/cp_ring.py:BACKWARD_KERNELS_PER_LOWER_STEP compute/cp_ring.py:FORWARD_KERNELS_DIAGONAL
compute/cp_ring.py:FORWARD_KERNELS_PER_STEP compute/cp_ring.py:FORWARD_KERNELS_SETUP
compute/cp_ring.py:RING_DTYPE_BYTES compute/decode_step.py:DECODE_KERNELS_PER_LAYER
compute/decode_step.py:SGLANG_GRAPH_MAX_BS_0_4 compute/engine_hosts.py:RAY_CGRAPH_CROSS_NODE_EXECUTIONS_PER_S
compute/expert_loop.py:LOOP_EXPERT_BACKWARD_BYTES compute/float8_all_gather.py:PRECOMPUTE_KERNELS
compute/float8_casts.py:EAGER_AMAX_KERNELS compute/float8_casts.py:EAGER_CAST_KERNELS
compute/float8_casts.py:FP8_CAST_BYTES compute/float8_casts.py:FP8_TRANSPOSE_BYTES
compute/float8_casts.py:NVFP4_COPY_BYTES compute/float8_casts.py:TORCHAO_COMPILED_AMAX_KERNELS
compute/gemm.py:FP32_TILE_M compute/gemm.py:FP32_TILE_N compute/gemm.py:K_HALF compute/gemm.py:TILE_M
compute/gemm.py:TILE_N compute/generation.py:PREFILL_TOKENS_PER_PASS
compute/hybrid_engine.py:DS_OPT_DECODE_KERNELS_PER_LAYER compute/hybrid_engine.py:DS_TP_ALL_REDUCES_PER_LAYER
compute/hybrid_engine.py:HF_GREEDY_STEP_KERNELS compute/inventory.py:BACKWARD_BYTES_FACTOR
compute/inventory.py:BACKWARD_KERNEL_FACTOR compute/inventory.py:BIAS_GRAD_BYTES
compute/inventory.py:EMBED_BACKWARD_BYTES_PER_WEIGHT compute/inventory.py:FP32_LORA_CHAINED_BASE_OUTPUT_BYTES
compute/inventory.py:GPTQ_TORCH_DEQUANT_FORWARD_BYTES_PER_WEIGHT
compute/inventory.py:GPTQ_TORCH_DEQUANT_FORWARD_KERNELS compute/inventory.py:INTERLEAVED_ROTARY_FORWARD_KERNELS
compute/inventory.py:LORA_BACKWARD_BYTES_FACTOR compute/inventory.py:LORA_BACKWARD_KERNEL_FACTOR
compute/inventory.py:MOE_DISPATCH_KERNELS compute/inventory.py:NEMO_RL_LOGPROB_FIXED_KERNELS
compute/inventory.py:NF4_DEQUANT_BYTES_PER_WEIGHT compute/inventory.py:NORM_CHAIN_BACKWARD_BYTES
compute/inventory.py:NORM_CHAIN_FORWARD_BYTES compute/inventory.py:NORM_STRIDED_BYTES
compute/inventory.py:PRIME_HEAD_GRAD_ACCUMULATE_BYTES compute/inventory.py:RESIDUAL_BYTES
compute/inventory.py:TE_A2A_THD_AFTER_ATTN_KERNELS_PER_SEQUENCE_PER_CP
compute/inventory.py:TE_A2A_THD_KERNELS_PER_CALL compute/inventory.py:TE_A2A_THD_SYNCS_PER_SEQUENCE_PER_CP
compute/inventory.py:THD_ROPE_BACKWARD_KERNELS_PER_CALL compute/inventory.py:THD_ROPE_BACKWARD_KERNELS_PER_SAMPLE
compute/inventory.py:THD_ROPE_FORWARD_KERNELS_PER_CALL compute/inventory.py:ZERO_CENTRED_NORM_STRIDED_BYTES
compute/moe_time.py:CHUNK_SORT_KERNELS compute/moe_time.py:CLAMPED_GLU_BACKWARD_BYTES
compute/moe_time.py:CLAMPED_GLU_BACKWARD_KERNELS compute/moe_time.py:CLAMPED_GLU_FORWARD_BYTES
compute/moe_time.py:CLAMPED_GLU_FORWARD_KERNELS compute/moe_time.py:DISPATCH_DTOH_COPIES
compute/moe_time.py:DISPATCH_PREPROCESS_KERNELS compute/moe_time.py:EXPERT_BIAS_BACKWARD_BYTES
compute/moe_time.py:EXPERT_BIAS_BACKWARD_KERNELS_PER_EXPERT compute/moe_time.py:EXPERT_BIAS_FORWARD_BYTES
compute/moe_time.py:EXPERT_BIAS_FORWARD_KERNELS_PER_EXPERT compute/moe_time.py:EXPERT_PROJECTIONS
compute/moe_time.py:SIGMOID_ROUTER_INPUT_CAST_BYTES compute/offload.py:DS_BOUNDARY_KERNELS_PER_TENSOR
compute/offload.py:DS_SYNCS_PER_TENSOR compute/offload.py:FSDP2_CPU_ACCUMULATE_BYTES_PER_GRAD_BYTE
compute/optimizer_time.py:CLIP_KERNELS compute/optimizer_time.py:FOREACH_OPS
compute/optimizer_time.py:FOR_LOOP_OPS_PER_TENSOR compute/optimizer_time.py:MULTI_PASS_BYTES_FACTOR
compute/rates.py:DEVICE_S_PER_KERNEL_MIN compute/rates.py:EAGER_DECODE_FORWARDS_PER_REQUEST
compute/rates.py:ENGINE_S_PER_STEP compute/rates.py:ENGINE_V0_S_PER_SEQUENCE compute/rates.py:HF_ROOT_MODULES
compute/rates.py:POWER_CLOCK_EXPONENT compute/reference_swap.py:BLOCKING_COPIES_PER_SWAP
compute/reference_swap.py:COPIES_PER_SWAP compute/response_lengths.py:DEFAULT_QUANTILES
compute/sleep_wake.py:KV_REMAP_S_PER_BYTE compute/sync.py:FP8_SCALE_SIBLING_BYTES
compute/sync.py:SGLANG_TENSOR_ENTRY_BYTES compute/sync.py:S_PER_SGLANG_OWN_COPY_BYTE
compute/sync.py:S_PER_TENSOR_SGLANG_LOAD compute/te_host.py:X86_OVER_GRACE_HOST memory/activations.py:DELTANET_CHUNK
memory/activations.py:DELTANET_DQKWG_TILE memory/activations.py:DROPOUT_MASK_BYTES
memory/activations.py:QWEN3_5_PARTIAL_ROTARY memory/alloc_sequence.py:ADAPTER_TENSORS_PER_LAYER
memory/arch_activations.py:GELU_NEW_SAVED memory/arch_activations.py:LAYERNORM_STATS_BYTES
memory/attention.py:BACKWARD_BYTES_PER_SCORE memory/attention.py:FORWARD_BYTES_PER_SCORE
memory/attention.py:FORWARD_CKPT_BYTES_PER_SCORE memory/fp8.py:FP8_TENSORS_PER_LINEAR
memory/logits.py:BACKWARD_PEAK_BYTES_PER_LOGIT memory/logits.py:COMPILED_CE_ROW_SAVED_BYTES
memory/logits.py:FLASH_CE_ROW_FORWARD_BYTES memory/logits.py:FLASH_CE_ROW_SAVED_BYTES
memory/logits.py:FORWARD_PEAK_BYTES_PER_LOGIT memory/logits.py:HELD_LOGITS_BYTES_PER_LOGIT
memory/logits.py:MEGATRON_SOFTMAX_BYTES_PER_LOGIT memory/logits.py:PRIME_RL_BACKWARD_BYTES_PER_CHUNK_LOGIT
memory/logits.py:PRIME_RL_TOKEN_BYTES memory/logits.py:RETAINED_BYTES_PER_LOGIT
memory/logits.py:TORCHTUNE_OUTPUT_CHUNKS memory/logits.py:TORCHTUNE_ROW_STATS_BYTES
memory/logits.py:TRL_FP32_STATS_PER_TOKEN memory/logits.py:VERL_VIEW_DIV_BACKWARD_TENSORS
memory/overhead.py:NCCL_CHANNELS memory/peft_variants.py:DORA_CONSTANT_BYTES_PER_OUT
memory/quant.py:NF4_DQ_BLOCK_ELEMENTS
plan/rank_buffers.py:LOSS_PARALLEL_BACKWARD_BYTES_PER_LOGIT
plan/rank_buffers.py:LOSS_PARALLEL_RETAINED_BYTES_PER_LOGIT plan/result.py:PEAK_TIE_BYTES
plan/rl_batches.py:DYNAMIC_COUNT_MIN_PROBABILITY plan/rl_batches.py:PACKING_SAMPLE_SEQUENCES
plan/rl_offload.py:NEMO_RL_DTENSOR_OPTIMIZER_BYTES plan/time.py:COMPILE_KERNEL_FACTOR
plan/time.py:COMPILE_MEMORY_FACTOR plan/time.py:PAGING_PASSES
""".split())
"""Constants without a citation mark when this test was written (``package/module.py:NAME``), the model's known
debt: cite one where it is defined, then delete it here."""


def test_no_new_uncited_constant():
    """A constant added without a source fails here: cite it (docstring right under it), or, for a unit or a dtype
    width, add it to ``UNIT_DEFINITIONS`` with the reason."""
    new = sorted(key for key, (_, _, cited) in scan_tree().items()
                 if not cited and key not in UNIT_DEFINITIONS and key not in UNCITED_DEBT)
    assert not new, f"module-level constants without a source: {new}"


def test_debt_list_is_current():
    """Every debt entry still exists and is still uncited: one that gained a citation (or was removed) leaves the
    list, so the list only shrinks."""
    constants = scan_tree()
    stale = sorted(key for key in UNCITED_DEBT if key not in constants or constants[key][2])
    assert not stale, f"cited or gone, remove from UNCITED_DEBT: {stale}"


def test_unit_definitions_are_units():
    """The allow-list holds units and definitions only: powers of two or ten (sizes, dtype widths, a tolerance) or a
    bit position below 64, each with its reason; none is a model constant in disguise."""
    constants = scan_tree()
    for key, reason in UNIT_DEFINITIONS.items():
        assert key in constants, key
        value = constants[key][1]
        assert reason
        power = any(math.isclose(math.log(value, base), round(math.log(value, base)), abs_tol=1e-9)
                    for base in (2, 10))
        assert power or ("bit position" in reason and 0 < value < 64), (key, value)


def test_scanner_tells_cited_from_uncited():
    src = (
        "A = 3.0\n"
        "B = 2 * 4.5\n"
        '"""Read from org/repo ``pkg/mod.py`` @0123abcd."""\n'
        "C = 7  # https://example.org/spec, read 2026-12-01\n"
        "D = 5\n"
        '"""A number with no source."""\n'
        "# measured by benchmarks/some_script.py\n"
        "E = 1e9\n"
        "F = True\n"
        "G = 0.5\n"
        '"""Same figure as the one above."""\n'
        "H = 0.6\n"
        '"""arXiv 2101.06840, Table 2."""\n'
    )
    found = scan_source(src)
    assert {name: cited for name, (_, _, cited) in found.items()} == {
        "A": False, "B": True, "C": True, "D": False, "E": True, "G": False, "H": True}
    assert found["B"][1] == 9.0


def test_host_rates_name_their_sources():
    """The host-memory rate, the CPU Adam byte count and the PCIe efficiency each cite their source."""
    constants = scan_tree()
    for name in ("HOST_MEMORY_BYTES_PER_S", "CPU_ADAM_BYTES_PER_PARAM", "PCIE_EFFICIENCY"):
        assert constants[f"compute/rates.py:{name}"][2], name
