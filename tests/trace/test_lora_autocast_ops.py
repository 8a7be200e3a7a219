"""What PEFT's fp32 LoRA adapters run under bf16 autocast, op by op
(``compute.inventory.Adapter.adapter_dtype_bytes``).

The planner prices fp32 adapters as fp32 GEMMs with ``FP32_LORA_*`` casts, which is what runs without autocast;
under autocast the products run on bf16 operands with four casts around them. Replacing the pricing by that
measured worse on the published LoRA / QLoRA rows (the null result in that docstring), so these tests pin the
traced op counts the docstring states, for whoever models it next: peft 0.21.2 ``Linear.forward``
(peft/tuners/lora/layer.py l.1100-1113 of the wheel) and autocast's ``cached_cast`` (pytorch/pytorch
aten/src/ATen/autocast_mode.cpp @008ec6b1840c94ff6d0f685bc10fbf585167c673).
"""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

IN, OUT, RANK, ROWS = 64, 48, 8, 32
BF16, FP32 = torch.bfloat16, torch.float32


class _Ops(TorchDispatchMode):
    """Every aten op that is not a view: (phase, name, input dtypes, input shapes, output dtype)."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.ops: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        if not func.is_view and func is not torch.ops.aten.detach.default:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            self.ops.append((self.phase, func.overloadpacket.__name__, tuple(t.dtype for t in tensors),
                             tuple(tuple(t.shape) for t in tensors), getattr(out, "dtype", None)))
        return out


def _adapted(dropout: float = 0.0):  # noqa: ANN202
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(IN, OUT, bias=False)).to(BF16)
    return peft.get_peft_model(model, peft.LoraConfig(r=RANK, target_modules=["0"], lora_dropout=dropout))


def _trace(*, autocast: bool, dropout: float = 0.0) -> list[tuple]:
    model = _adapted(dropout)
    assert {p.dtype for n, p in model.named_parameters() if "lora_" in n} == {FP32}  # autocast_adapter_dtype
    x = torch.randn(ROWS, IN, dtype=BF16, requires_grad=True)
    grad = torch.ones(ROWS, OUT, dtype=BF16)
    rec = _Ops()
    with rec:
        with torch.autocast("cpu", dtype=BF16, enabled=autocast):
            y = model(x)
        rec.phase = "backward"
        y.backward(grad)
    return rec.ops


def _count(ops: list[tuple], phase: str) -> Counter:
    return Counter(name for p, name, *_ in ops if p == phase)


def _casts(ops: list[tuple], phase: str) -> list[tuple]:
    """(from dtype, to dtype, shape) of each ``_to_copy``."""
    return [(dts[0], out, shapes[0]) for p, name, dts, shapes, out in ops if p == phase and name == "_to_copy"]


def test_autocast_runs_the_adapter_products_on_bf16_operands():
    ops = _trace(autocast=True)
    mms = [dts for p, name, dts, *_ in ops if name == "mm"]
    assert len(mms) == 3 + 5  # forward base + A + B; backward base dX (frozen weight) + A/B dX and dW
    assert all(d == (BF16, BF16) for d in mms)


def test_autocast_forward_ops_per_adapted_module():
    ops = _trace(autocast=True)
    assert _count(ops, "forward") == Counter({"mm": 3, "_to_copy": 4, "mul": 1, "add": 1})
    # PEFT's _cast_input_dtype up, autocast's casts of the input and both weights down (each call)
    assert sorted(_casts(ops, "forward"), key=str) == sorted([
        (BF16, FP32, (ROWS, IN)), (FP32, BF16, (ROWS, IN)), (FP32, BF16, (RANK, IN)), (FP32, BF16, (OUT, RANK)),
    ], key=str)
    # the scaling multiply and the add into the base output stay bf16; result.to(torch_result_dtype) is a no-op
    assert [out for p, name, _, _, out in ops if p == "forward" and name in ("mul", "add")] == [BF16, BF16]


def test_autocast_backward_ops_per_adapted_module():
    ops = _trace(autocast=True)
    assert _count(ops, "backward") == Counter({"mm": 5, "_to_copy": 4, "mul": 1, "add": 1})
    assert sorted(_casts(ops, "backward"), key=str) == sorted([
        (BF16, FP32, (OUT, RANK)), (BF16, FP32, (RANK, IN)),  # the fp32 weights' gradients
        (BF16, FP32, (ROWS, IN)), (FP32, BF16, (ROWS, IN)),  # the input gradient through both input casts
    ], key=str)


def test_without_autocast_the_adapter_runs_in_fp32():
    """The path ``FP32_LORA_*`` prices: fp32 products, one input cast up, the fp32 output scaled, added and cast
    down."""
    ops = _trace(autocast=False)
    fwd_mm = [dts for p, name, dts, *_ in ops if p == "forward" and name == "mm"]
    assert fwd_mm == [(BF16, BF16), (FP32, FP32), (FP32, FP32)]
    assert _count(ops, "forward") == Counter({"mm": 3, "_to_copy": 2, "mul": 1, "add": 1})
    assert _count(ops, "backward") == Counter({"mm": 5, "_to_copy": 3, "mul": 1, "add": 1})


def test_autocast_caches_weight_casts_within_one_region_only():
    """Two calls in one autocast region cast the fp32 weights once; a second region casts them again (a recompute
    or the next forward)."""
    model = _adapted()
    x = torch.randn(ROWS, IN, dtype=BF16)
    rec = _Ops()
    with rec:
        with torch.autocast("cpu", dtype=BF16):
            model(x)
            model(x)
        with torch.autocast("cpu", dtype=BF16):
            model(x)
    weight_casts = [c for c in _casts(rec.ops, "forward") if c[2] in ((RANK, IN), (OUT, RANK))]
    assert len(weight_casts) == 2 + 2


def test_dropout_acts_on_the_fp32_copy():
    """lora_dropout > 0: the dropout runs on the input PEFT cast to fp32, before autocast casts it down."""
    ops = _trace(autocast=True, dropout=0.1)
    fwd = [(name, dts) for p, name, dts, *_ in ops if p == "forward"]
    names = [n for n, _ in fwd]
    up = names.index("_to_copy")
    down = next(i for i, (n, d) in enumerate(fwd) if n == "_to_copy" and d == (FP32,) and i > up)
    between = fwd[up + 1:down]
    assert between and all(d and d[0] == FP32 for _, d in between if d)


def _script(name: str):  # noqa: ANN202
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_h200_cards_state_the_harness_runs_without_autocast():
    """The project's own H200 steps were measured with no autocast around the forward (the harnesses call the bf16
    model bare), so their fp32 adapters ran the fp32 path; their cards say so, and a pricing that depends on
    ``precision.autocast`` keeps them where they were measured."""
    import inspect

    from trainfit.accuracy.gpu import card_dict
    from trainfit.spec.card import load_card_dict

    cal = _script("gpu_calibrate")
    assert "autocast" not in inspect.getsource(cal.measure_case)
    for case in cal.GRID + cal.HELDOUT + cal.HELDOUT4:
        card = load_card_dict(card_dict({**case, "config": None}))
        assert card.precision.autocast is False
    loop = _script("gpu_loop_v4")
    assert "autocast" not in inspect.getsource(loop.measure)
    assert loop.card_of({"model": "org/M", "layers": 2, "scope": "lora", "mbs": 1, "seq": 512},
                        {})["precision"]["autocast"] is False
