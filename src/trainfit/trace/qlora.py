"""QLoRA on fake tensors: bitsandbytes NF4 bases under PEFT's LoRA (needs bitsandbytes 0.50.2).

The model is built as transformers' bitsandbytes quantizer leaves it and PEFT wraps it, on the meta device
(``trainfit.trace.build``); then, inside the trace's ``FakeTensorMode`` (GROUND_TRUTH.md §9):

1. every ``Linear4bit`` weight is quantized from a fake bf16 weight with ``bitsandbytes.functional.quantize_4bit``
   (NF4, block 64, double quantization) and kept as a plain ``nn.Parameter`` holding the packed codes with the
   ``.quant_state`` attribute bitsandbytes reads (``Params4bit`` cannot be re-created on fake tensors). The state's
   tensors (uint8 absmax, fp32 second-level absmax, offset, the 16-entry NF4 and 256-entry dynamic code tables)
   are registered on the module as non-persistent buffers, so the tracker counts them as weights and each layer
   owns its own;
2. ``F.name2qmap["dynamic"]`` (the dynamic map ``quantize_blockwise`` caches at first use, a real tensor otherwise)
   is seeded with a fake copy of ``create_dynamic_map()`` while quantizing, and restored after;
3. the custom op ``bitsandbytes::gemm_4bit`` (MatMul4Bit's forward) is decomposed by a dispatch mode above the
   tracker into the steps of the CUDA backend's unfused path, so its dequantisation temporaries are counted.
   Its fake kernel alone returns only the output.

Pinned behaviour (bitsandbytes 0.50.2):

* ``bitsandbytes/backends/cuda/ops.py`` l.904-916 ``_dequant_linear_fallback``: ``absmax_dq`` (fp32, one per 64-block:
  n/16 B), ``absmax = absmax_dq + offset`` (n/16 B more, both alive until the GEMM returns), the weight dequantised
  to the input's dtype (2 B per weight in bf16), then ``F.linear``. The CUDA dispatch takes it for more than 1,536
  rows (l.922-926, l.954); at 1,536 rows or fewer ``_gemm_4bit_use_custom_cuda`` may pick the fused kernel, which
  has no dequantised weight: the trace is an upper bound there.
* ``bitsandbytes/autograd/_functions.py`` l.358 MatMul4Bit saves only the packed weight (no input), and l.384 its
  backward dequantises again with ``F.dequantize_4bit`` (``functional.py`` l.1052-1066: the fp32 absmax, then the
  weight in ``quant_state.dtype``), which runs as it is (its ops have fake kernels).
* ``peft/tuners/lora/bnb.py`` (peft 0.21.2) l.533: PEFT's ``Linear4bit`` clones the base output before adding the
  adapter's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import sys
from typing import Any, Iterator

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from trainfit.memory.quant import NF4_BLOCK
from trainfit.trace.types import TraceUnsupported

BITSANDBYTES_PIN = "0.50.2"
_QUANT_STATE_BUFFERS = ("absmax", "code", "offset", "absmax2", "code2")


def require_bitsandbytes() -> None:
    """Import bitsandbytes, or raise the one-line refusal when it is not installed."""
    if importlib.util.find_spec("bitsandbytes") is None:
        raise TraceUnsupported(f"trace: scope 'qlora' cannot be traced: bitsandbytes is not installed (pip install"
                               f" -c constraints.txt bitsandbytes=={BITSANDBYTES_PIN})")
    import_quietly()


def import_quietly() -> None:
    """Import bitsandbytes (when installed) before transformers or PEFT do: its CPU backend logs a warning at import
    when the optional ``kernels`` package is missing (``backends/cpu/ops.py`` l.242-256: a CPU inference kernel the
    trace never runs), and PEFT imports bitsandbytes for every LoRA model once it is installed. That logger is
    quietened for the import only."""
    if "bitsandbytes" in sys.modules or importlib.util.find_spec("bitsandbytes") is None:
        return
    log = logging.getLogger("bitsandbytes.backends.cpu.ops")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        import bitsandbytes  # noqa: F401
    finally:
        log.setLevel(level)


def check_request(req: Any) -> None:
    """What the QLoRA trace covers: a train step on one rank, the fast tracker, PEFT's adapter, bf16 params."""
    if (req.world_size > 1 or req.tensor_parallel > 1 or req.mode != "fast" or req.pass_kind != "train_step"
            or req.precision != "bf16" or req.lora_impl != "peft" or req.replay_allocator):
        raise TraceUnsupported("trace: scope 'qlora' is traced for a bf16 train step on one rank (world_size 1, no"
                               " tensor parallel), mode 'fast', PEFT's adapter, without --reserved")


def quantize_linears_meta(model: nn.Module, layers: nn.ModuleList, *, compute_dtype: torch.dtype,
                          double_quant: bool = True) -> int:
    """Replace every ``nn.Linear`` inside the decoder ``layers`` by a meta ``bitsandbytes.nn.Linear4bit`` (NF4,
    ``compress_statistics=double_quant``), as transformers' ``replace_with_bnb_linear`` does: the embedding and
    the output head (``modules_to_not_convert``) are not decoder layers and stay. Marks the model
    ``is_loaded_in_4bit`` (PEFT then wraps the bases with its ``Linear4bit``). Returns how many were replaced."""
    import bitsandbytes as bnb

    count = 0
    for layer in layers:
        for name, mod in list(layer.named_modules()):
            if type(mod) is not nn.Linear:
                continue
            new = bnb.nn.Linear4bit(mod.in_features, mod.out_features, bias=mod.bias is not None,
                                    compute_dtype=compute_dtype, compress_statistics=double_quant, quant_type="nf4",
                                    device="meta")
            new.weight.requires_grad_(False)
            if mod.bias is not None:  # in the model's dtype, as loaded (nn.Linear's default would be float32)
                new.bias = mod.bias
            new.support_avx512bf16_for_cpu = False  # the CPU-only inference repacking never runs on a GPU
            parent = layer.get_submodule(name.rpartition(".")[0]) if "." in name else layer
            setattr(parent, name.rpartition(".")[2], new)
            count += 1
    model.is_loaded_in_4bit = True
    return count


@contextlib.contextmanager
def fake_dynamic_map() -> Iterator[None]:
    """Inside ``FakeTensorMode``: ``F.name2qmap["dynamic"]`` holds a fake copy of ``create_dynamic_map()`` (a real
    cached map cannot meet fake tensors in ``quantize_blockwise``); the previous entry is restored on exit."""
    import bitsandbytes.functional as F
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        real = F.create_dynamic_map()  # its .tolist() cannot run on fake tensors
    missing = object()
    old = F.name2qmap.get("dynamic", missing)
    F.name2qmap["dynamic"] = torch.empty(real.shape, dtype=real.dtype, device="cpu")
    try:
        yield
    finally:
        if old is missing:
            F.name2qmap.pop("dynamic", None)
        else:
            F.name2qmap["dynamic"] = old


def quantize_fake(model: nn.Module, *, weight_dtype: torch.dtype, double_quant: bool = True) -> int:
    """Inside ``FakeTensorMode``, after ``build.materialize_fake``: quantize every ``Linear4bit``'s weight, as a fake
    ``weight_dtype`` tensor (the dtype transformers loads the checkpoint in before ``Params4bit`` quantizes it:
    ``quant_state.dtype``, the dtype MatMul4Bit's backward dequantises to), with bitsandbytes
    ``functional.quantize_4bit`` into a packed uint8 ``nn.Parameter`` with ``.quant_state``, its state's tensors
    registered as non-persistent buffers. Returns the quantized weights' element count."""
    import bitsandbytes as bnb
    import bitsandbytes.functional as F

    elements = 0
    with fake_dynamic_map():
        for mod in model.modules():
            if not isinstance(mod, bnb.nn.Linear4bit):
                continue
            w = mod.weight  # Linear4bit's meta Params4bit: nn.Linear's default float32, whatever the model's dtype
            packed, state = F.quantize_4bit(torch.empty(w.shape, dtype=weight_dtype, device="cpu"),
                                            blocksize=NF4_BLOCK, quant_type="nf4",
                                            compress_statistics=double_quant,
                                            quant_storage=torch.uint8)
            elements += w.numel()
            param = nn.Parameter(packed, requires_grad=False)
            param.quant_state = state
            mod._parameters["weight"] = param
            mod.quant_state = state
            nested = state.state2 is not None
            for name, t in zip(_QUANT_STATE_BUFFERS, (state.absmax, state.code, state.offset if nested else None,
                                                      state.state2.absmax if nested else None,
                                                      state.state2.code if nested else None)):
                if t is not None:
                    mod.register_buffer(f"weight_{name}", t, persistent=False)
    return elements


class Gemm4bitDecomposed(TorchDispatchMode):
    """Runs ``bitsandbytes::gemm_4bit`` as the CUDA backend's unfused path (``_dequant_linear_fallback``,
    bitsandbytes 0.50.2 ``backends/cuda/ops.py`` l.904-916), its steps dispatched to the modes below (the tracker,
    the fake mode); every other op passes through."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if func is not torch.ops.bitsandbytes.gemm_4bit.default:
            return func(*args, **kwargs)
        return _dequant_linear(*args, **kwargs)


def _dequant_linear(A, B, shapeB, absmax, blocksize, quant_type, bias=None, absmax_8bit=None,  # noqa: ANN001, ANN202
                    absmax_code=None, absmax_offset=None):
    """bitsandbytes 0.50.2 ``backends/cuda/ops.py`` l.910-916, with the in-place dequantisation kernels
    (``_dequantize_blockwise_impl``, ``_dequantize_4bit_impl``: they write into the buffers allocated here) left
    out: they allocate nothing."""
    if absmax_8bit is not None:
        absmax_dq = torch.empty_like(absmax_8bit, dtype=torch.float32)  # l.911
        absmax = absmax_dq + absmax_offset  # l.913 (absmax_dq stays alive until return)
    B_dq = torch.empty(tuple(shapeB), dtype=A.dtype, device=A.device)  # l.914
    out = torch.nn.functional.linear(A, B_dq, bias)  # l.916
    del B_dq, absmax
    return out


