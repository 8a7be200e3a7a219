"""Every module-level numeric constant of the time and memory model names where its value comes from.

The rule (a constant is read from a publication or a code base, or measured on a host by a committed script, and
cited where it is defined) is checked here on the source text: for each module-level ``NAME = <number or arithmetic
of numbers>`` in ``src/trainfit/compute``, ``plan`` and ``memory`` (tuple-unpacked names and numeric dict / tuple
tables too), the docstring right under it, the comment on its line(s) and the comment block right above it must hold
a structured source: an external source path (``…/file.py``-like, not inside ``src/trainfit``) with a commit (``@``
and 7-40 hex digits) or with a package version (``bitsandbytes 0.43.3``, a wheel); a URL; an arXiv id
(``2101.06840``); or a measuring script under ``benchmarks/`` that exists. Fit or negation wording ("fitted",
"tuned", "not measured", "a guess") makes the text uncited whatever else it holds. A neighbour's docstring does not
count.

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
REPO = SRC.parents[1]
URL = re.compile(r"https?://[\w.-]+\.[a-z]{2,}[/\w.#?=&%~:+-]*", re.IGNORECASE)
ARXIV_NAMED = re.compile(r"arxiv[: ]+(?:abs/)?\d{4}\.\d{4,5}|arxiv\.org/abs/\d{4}\.\d{4,5}", re.IGNORECASE)
COMMIT = re.compile(r"@[0-9a-f]{7,40}\b")
PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:py|pyx|cu|cuh|h|hpp|cc|cpp|c|md|json|ya?ml|txt|rst|sh|toml))\b")
VERSION = re.compile(r"\b[A-Za-z][\w-]*(?: |==|-)v?\d+\.\d+\.\d+\b|\bwheel\b")
SCRIPT = re.compile(r"\bbenchmarks/[\w/.-]+\.py\b")
FIT_WORDING = re.compile(
    r"(?<!not )(?<!never )\bfitted\b|\bfit to (?:the )?(?:benchmarks/|rows|published)|\btuned (?:so|to|on|against)\b"
    r"|\bnot measured\b(?! apart)|\ba guess\b|\bguessed\b",
    re.IGNORECASE,
)


def cited(text: str) -> bool:
    """Whether ``text`` names a structured source (module docstring) and no fit or negation wording."""
    if FIT_WORDING.search(text):
        return False
    if URL.search(text) or ARXIV_NAMED.search(text):
        return True
    if any((REPO / m.group(0)).is_file() for m in SCRIPT.finditer(text)):
        return True
    external = [m.group(1) for m in PATH.finditer(text)
                if not m.group(1).startswith(("src/", "trainfit/", "benchmarks/", "tests/", "catalog/", "compute/",
                                              "memory/", "plan/", "spec/"))]
    return bool(external) and bool(COMMIT.search(text) or VERSION.search(text))


def _numeric(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    return False


def _table(node: ast.AST) -> bool:
    """A numeric table: a tuple / list of numbers (or of such tuples), or a dict whose values all are."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_numeric(e) or _table(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.values) and all(_numeric(v) or _table(v) for v in node.values)
    return False


def _targets(stmt: ast.stmt) -> list[tuple[str, ast.AST]]:
    """``(name, value)`` of a module-level assignment: one name, an annotated name or a tuple unpacked from a tuple."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return [(stmt.target.id, stmt.value)]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return []
    target, value = stmt.targets[0], stmt.value
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts)
            and all(isinstance(t, ast.Name) for t in target.elts)):
        return [(t.id, v) for t, v in zip(target.elts, value.elts)]
    return []


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
        pairs = [(n, v) for n, v in _targets(stmt) if _numeric(v) or _table(v)]
        if not pairs:
            continue
        text = [comments[line] for line in range(stmt.lineno, stmt.end_lineno + 1) if line in comments]
        nxt = body[i + 1] if i + 1 < len(body) else None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            text.append(nxt.value.value)
        line = stmt.lineno - 1
        while line in own_line:
            text.append(comments[line])
            line -= 1
        ok = cited("\n".join(text))
        for name, value in pairs:
            number = eval(compile(ast.Expression(value), "<constant>", "eval")) if _numeric(value) else math.nan
            found[name] = (stmt.lineno, number, ok)
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
    "compute/static_generation.py:DECODE_POINTS": "tolerance",  # quadrature points along the context: numerical accuracy
    "compute/sync.py:GIB": "bytes per GiB",
    "compute/controller_transfer.py:INT64_BYTES": "dtype width",
    "compute/controller_transfer.py:FP32_BYTES": "dtype width",
    "compute/prefix_tuning.py:FP32_BYTES": "dtype width",
    "compute/moe_time.py:INT32_BYTES": "dtype width",
    "compute/decode_step.py:ACTIVATION_BYTES": "dtype width",
    "plan/time.py:FP8_PARAM_BYTES": "dtype width",
    "memory/fp8.py:FP8_GATHERED_BYTES": "dtype width",
    "memory/activations.py:FP8_GLU_INPUT_BYTES": "dtype width",  # torch.float8_e4m3fn, 1 byte
    "memory/activations.py:FP32": "dtype width",
    "memory/activations.py:INT64": "dtype width",
    "memory/activations.py:INT32": "dtype width",
    "memory/fp8.py:FP32": "dtype width",
    "memory/nf4_load.py:BF16": "dtype width",
    "memory/nf4_load.py:INT64": "dtype width",
    "memory/peft_variants.py:FP32": "dtype width",
    "memory/peft_variants.py:INT64": "dtype width",
    "memory/alloc_sequence.py:STREAM_SHIFT": "bit position",
    "memory/expandable_segments.py:_SHIFT": "bit position",
    "memory/caching_allocator.py:ADDR_BITS": "bit position",
    "compute/continuous_batching.py:_EPS": "tolerance",
    "compute/fsdp2_output_cast.py:BF16_BYTES": "dtype width",
    "compute/fsdp2_output_cast.py:FP32_BYTES": "dtype width",
    "memory/kbit_upcast.py:KBIT_UPCAST_PARAM_BYTES": "dtype width",
    "memory/kbit_upcast.py:KBIT_STREAM_BYTES": "dtype width",
    "compute/float8_casts.py:BF16_BYTES": "dtype width",
    "compute/float8_casts.py:FP32_BYTES": "dtype width",
    "compute/float8_casts.py:FP8_BYTES": "dtype width",
}
"""Constants that need no source: what the value is follows from its definition (``key: reason``, the reason one of
``UNIT_REASONS``)."""
UNIT_REASONS = frozenset({"dtype width", "bytes per GiB", "bytes per GB", "bit position", "tolerance"})
"""The only reasons a constant may go without a source."""

UNCITED_DEBT = frozenset("""
compute/attention_time.py:BASE_HEAD_DIM
compute/attention_time.py:EXP_EXPOSED_FRACTION
compute/attention_time.py:FP8_ATTENTION_BACKWARD_KERNELS compute/attention_time.py:FP8_ATTENTION_ELEMENT_BYTES
compute/attention_time.py:FP8_ATTENTION_FORWARD_KERNELS compute/attention_time.py:SEQ_HALF
compute/attention_time.py:WINDOW_MASK_KERNELS
compute/attention_time.py:_EFFICIENCY
compute/attention_time.py:_HEAD_DIM_64
compute/collectives.py:NANOTRON_ZERO1_GATHER_COPY_HOST_S
compute/collectives.py:SLOWEST_RANK_SIGMA
compute/continuous_batching.py:JUMP_FORCE_PERIODS compute/continuous_batching.py:JUMP_TOLERANCE
compute/continuous_batching.py:MAX_CHUNKS_PER_LENGTH compute/continuous_batching.py:MIN_CHUNKS_PER_MEAN
compute/continuous_batching.py:MIN_CHUNK_TOKENS compute/continuous_batching.py:_NONE
compute/cp_ring.py:BACKWARD_KERNELS_DIAGONAL
compute/decode_step.py:DECODE_KERNELS_PER_LAYER compute/decode_step.py:SGLANG_GRAPH_MAX_BS_0_4
compute/engine_hosts.py:RAY_CGRAPH_CROSS_NODE_EXECUTIONS_PER_S compute/expert_loop.py:LOOP_EXPERT_BACKWARD_BYTES
compute/float8_casts.py:FP8_BACKWARD_KERNELS
compute/float8_casts.py:FP8_CAST_BYTES compute/float8_casts.py:FP8_FORWARD_KERNELS
compute/float8_casts.py:FP8_TRANSPOSE_BYTES compute/float8_casts.py:FP8_WEIGHT_BACKWARD_KERNELS
compute/float8_casts.py:FP8_WEIGHT_FORWARD_KERNELS
compute/gemm.py:FP32_TILE_M compute/gemm.py:FP32_TILE_N
compute/gemm.py:GROUPED_MM_CEILING compute/gemm.py:GROUPED_MM_CEILING_SM100
compute/gemm.py:K_HALF compute/gemm.py:TILE_M compute/gemm.py:TILE_N compute/generation.py:PREFILL_TOKENS_PER_PASS
compute/hybrid_engine.py:DS_OPT_DECODE_KERNELS_PER_LAYER compute/hybrid_engine.py:DS_TP_ALL_REDUCES_PER_LAYER
compute/hybrid_engine.py:HF_GREEDY_STEP_KERNELS compute/inventory.py:ACTIVATION_BYTES
compute/inventory.py:ACTIVATION_KERNELS compute/inventory.py:ATTENTION_GLUE_BYTES
compute/inventory.py:ATTENTION_GLUE_KERNELS compute/inventory.py:BACKWARD_BYTES_FACTOR
compute/inventory.py:BACKWARD_KERNEL_FACTOR compute/inventory.py:BIAS_GRAD_BYTES
compute/inventory.py:COMPILED_CE_BACKWARD_BYTES compute/inventory.py:COMPILED_CE_FORWARD_BYTES
compute/inventory.py:EAGER_SCORE_BACKWARD_BYTES compute/inventory.py:EAGER_SCORE_FORWARD_BYTES
compute/inventory.py:EMBED_BACKWARD_BYTES_PER_WEIGHT
compute/inventory.py:FP32_LORA_BACKWARD_CHAINED_INPUT_BYTES
compute/inventory.py:FP32_LORA_BACKWARD_CHAINED_OUTPUT_BYTES compute/inventory.py:FP32_LORA_CHAINED_BASE_OUTPUT_BYTES
compute/inventory.py:FP32_LORA_CHAINED_INPUT_BYTES compute/inventory.py:FP32_LORA_CHAINED_OUTPUT_BYTES
compute/inventory.py:FP32_LORA_CHAIN_INPUT_SET_BYTES compute/inventory.py:FP32_LORA_CHAIN_OUTPUT_SET_BYTES
compute/inventory.py:FP32_LORA_INPUT_BYTES compute/inventory.py:FP32_LORA_OUTPUT_BYTES
compute/inventory.py:INTERLEAVED_ROTARY_FORWARD_KERNELS
compute/inventory.py:LAYER_NORM_BYTES compute/inventory.py:LAYER_NORM_KERNELS
compute/inventory.py:LORA_BACKWARD_BYTES_FACTOR compute/inventory.py:LORA_BACKWARD_KERNEL_FACTOR
compute/inventory.py:LOSS_BACKWARD_BYTES compute/inventory.py:LOSS_FORWARD_BYTES
compute/inventory.py:MOE_DISPATCH_KERNELS compute/inventory.py:NEMO_RL_LOGPROB_FIXED_KERNELS
compute/inventory.py:NF4_DEQUANT_BYTES_PER_WEIGHT
compute/inventory.py:NORM_CHAIN_BACKWARD_BYTES compute/inventory.py:NORM_CHAIN_FORWARD_BYTES
compute/inventory.py:NORM_KERNELS
compute/inventory.py:ROTARY_BYTES compute/inventory.py:ROTARY_KERNELS
compute/inventory.py:THD_ROPE_BACKWARD_KERNELS_PER_CALL compute/inventory.py:THD_ROPE_BACKWARD_KERNELS_PER_SAMPLE
compute/inventory.py:THD_ROPE_FORWARD_KERNELS_PER_CALL compute/inventory.py:THD_ROPE_FORWARD_SYNCS_PER_CALL
compute/moe_time.py:AUTOMODEL_FC1_BIAS_BYTES
compute/moe_time.py:AUTOMODEL_FC1_BIAS_KERNELS compute/moe_time.py:AUTOMODEL_FC2_BIAS_BYTES
compute/moe_time.py:AUTOMODEL_FC2_BIAS_KERNELS compute/moe_time.py:AUTOMODEL_FC2_BIAS_KERNELS_NO_PROBS_GRAD
compute/moe_time.py:CHUNK_SORT_KERNELS compute/moe_time.py:CLAMPED_GLU_BACKWARD_BYTES
compute/moe_time.py:CLAMPED_GLU_BACKWARD_KERNELS compute/moe_time.py:CLAMPED_GLU_FORWARD_BYTES
compute/moe_time.py:CLAMPED_GLU_FORWARD_KERNELS compute/moe_time.py:DISPATCH_DTOH_COPIES
compute/moe_time.py:DISPATCH_PREPROCESS_KERNELS compute/moe_time.py:EXPERT_BIAS_BACKWARD_BYTES
compute/moe_time.py:EXPERT_BIAS_BACKWARD_KERNELS_PER_EXPERT compute/moe_time.py:EXPERT_BIAS_CAT_KERNELS
compute/moe_time.py:EXPERT_BIAS_FORWARD_BYTES compute/moe_time.py:EXPERT_BIAS_FORWARD_KERNELS_PER_EXPERT
compute/moe_time.py:EXPERT_PROJECTIONS compute/moe_time.py:SIGMOID_ROUTER_INPUT_CAST_BYTES
compute/offload.py:DS_BOUNDARY_KERNELS_PER_TENSOR
compute/offload.py:FSDP2_CPU_ACCUMULATE_BYTES_PER_GRAD_BYTE
compute/optimizer_time.py:CLIP_KERNELS
compute/optimizer_time.py:MULTI_PASS_BYTES_FACTOR
compute/optimizer_time.py:STATE_COUNT
compute/rates.py:DEVICE_S_PER_KERNEL_MIN
compute/rates.py:EAGER_DECODE_FORWARDS_PER_REQUEST compute/rates.py:ENGINE_S_PER_SEQUENCE
compute/rates.py:ENGINE_S_PER_STEP compute/rates.py:ENGINE_V0_S_PER_SEQUENCE compute/rates.py:FSDP_UNIT_FORWARD_HOST_S
compute/rates.py:HF_ROOT_MODULES
compute/rates.py:HOST_S_PER_BACKWARD_KERNEL compute/rates.py:HOST_S_PER_FORWARD_KERNEL
compute/rates.py:POWER_CLOCK_EXPONENT compute/rates.py:ZERO3_MODULE_BACKWARD_HOST_S
compute/reference_swap.py:S_PER_BLOCKING_COPY compute/response_lengths.py:DEFAULT_QUANTILES
compute/sleep_wake.py:KV_REMAP_S_PER_BYTE
compute/sync.py:FP8_SCALE_SIBLING_BYTES compute/sync.py:NEMO_RL_BRIDGE_SINCE compute/sync.py:SGLANG_TENSOR_ENTRY_BYTES
compute/sync.py:S_PER_SGLANG_OWN_COPY_BYTE compute/sync.py:S_PER_SKYRL_WEIGHT_REQUEST
compute/sync.py:S_PER_TENSOR_SGLANG_LOAD
compute/traced.py:_BYTES
memory/activations.py:DROPOUT_MASK_BYTES
memory/activations.py:QWEN3_5_PARTIAL_ROTARY
memory/arch_activations.py:LAYERNORM_STATS_BYTES
memory/attention.py:BACKWARD_BYTES_PER_SCORE memory/attention.py:EAGER_BYTES_PER_SCORE_BY_FAMILY
memory/attention.py:FORWARD_BYTES_PER_SCORE memory/attention.py:FORWARD_CKPT_BYTES_PER_SCORE
memory/attention.py:HF_SDPA_CONTIGUOUS memory/attention.py:SOFTMAX_BACKWARD_TMP_BYTES_PER_SCORE
memory/hybrid_engine.py:HE_TP_GATHER_PARTITION_LAYERS
memory/logits.py:COMPILED_CE_ROW_SAVED_BYTES
memory/logits.py:HELD_LOGITS_BYTES_PER_LOGIT
memory/logits.py:HF_LOSS_FUNCTION_DEFAULT
memory/logits.py:TORCHTUNE_ROW_STATS_BYTES
memory/logits.py:TRL_FP32_STATS_PER_TOKEN memory/logits.py:TRL_TOKEN_CHUNK memory/logits.py:TRL_VOCAB_CHUNK
memory/logits.py:VERL_VIEW_DIV_BACKWARD_TENSORS memory/nf4_load.py:NF4_CODES
memory/overhead.py:FRAGMENTATION_OF_TRANSIENTS memory/overhead.py:NCCL_CHANNELS
memory/parallel.py:EP_FORWARD_ROW_TENSORS
memory/phases.py:_PERIODS
memory/stream_pools.py:ALL_GATHER memory/stream_pools.py:COMPUTE
memory/stream_pools.py:REDUCE_SCATTER
plan/rank_buffers.py:LOSS_PARALLEL_BACKWARD_BYTES_PER_LOGIT plan/rank_buffers.py:LOSS_PARALLEL_FORWARD_BYTES_PER_LOGIT
plan/rank_buffers.py:LOSS_PARALLEL_RETAINED_BYTES_PER_LOGIT plan/result.py:PEAK_TIE_BYTES
plan/rl_batches.py:DYNAMIC_COUNT_MIN_PROBABILITY plan/rl_batches.py:PACKING_SAMPLE_SEQUENCES
plan/rl_generation.py:SGLANG_NEWEST_RELEASE_READ
plan/time.py:COMPILE_KERNEL_FACTOR plan/time.py:COMPILE_MEMORY_FACTOR
plan/time.py:PAGING_PASSES
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
        assert reason in UNIT_REASONS, (key, reason)
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
        "I = 1.5\n"
        '"""Tuned so the rows match; see src/trainfit/compute/inventory.py"""\n'
        "J = 2.5\n"
        '"""Not measured; a guess."""\n'
        "# fitted to benchmarks/ rows\n"
        "K = 3.5\n"
        "L = 4.5\n"
        '"""x @deadbeef"""\n'
        "M = 5.5\n"
        '"""Read from org/repo ``pkg/mod.py`` @0123abcd; fitted on the published rows."""\n'
        "N = 6.5\n"
        '"""measured by benchmarks/no_such_script.py"""\n'
        "O = 7.5\n"
        '"""bitsandbytes 0.43.3 wheel ``bitsandbytes/nn/modules.py`` l.472."""\n'
        "P, Q = 1, 2.5\n"
        "R = {'a': 1.0, 'b': 2.0}\n"
        '"""Read from org/repo ``pkg/mod.py`` @0123abcd."""\n'
        "S = (1.0, 2.0)\n"
    )
    found = scan_source(src)
    assert {name: cited for name, (_, _, cited) in found.items()} == {
        "A": False, "B": True, "C": True, "D": False, "E": False, "G": False, "H": True, "I": False, "J": False,
        "K": False, "L": False, "M": False, "N": False, "O": True, "P": False, "Q": False, "R": True, "S": False}
    assert found["B"][1] == 9.0
    assert scan_source("E = 1e9\n\"\"\"Measured by benchmarks/step_times.py.\"\"\"\n")["E"][2]  # a script that exists


def test_host_rates_name_their_sources():
    """The host-memory rate, the CPU Adam byte count and the PCIe efficiency each cite their source."""
    constants = scan_tree()
    for name in ("HOST_MEMORY_BYTES_PER_S", "CPU_ADAM_BYTES_PER_PARAM", "PCIE_EFFICIENCY"):
        assert constants[f"compute/rates.py:{name}"][2], name
