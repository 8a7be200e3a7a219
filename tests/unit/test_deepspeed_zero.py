"""trainfit.memory.deepspeed against DeepSpeed itself (the pinned 0.19.8, run on the CPU with gloo).

DeepSpeed's config classes give the defaults; a real ``deepspeed.initialize`` of a small model at
ZeRO-2 and ZeRO-3 (world size 1, in a subprocess) gives the sizes its code allocates: the IPG
buckets, the gradient partition, the fp32 gradient made at the step, the persistent parameters and
the parameter coordinator's gathered element counts, which must equal what the pure module computes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from deepspeed_tiny_worker import DEEPSPEED_TINY_PROLOGUE

from trainfit.memory.deepspeed import (
    DEFAULTS,
    gathered_params,
    ipg_bucket_bytes,
    partition_numel,
    persistent_numel,
    resolve_zero_config,
    zero_buffers,
)
from trainfit.spec.card import DeepSpeedSection

GIB = 2**30
deepspeed = pytest.importorskip("deepspeed")


def test_defaults_are_deepspeeds():
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    cfg = DeepSpeedZeroConfig()
    assert cfg.reduce_bucket_size == DEFAULTS["reduce_bucket_size"]
    assert cfg.allgather_bucket_size == DEFAULTS["allgather_bucket_size"]
    assert cfg.prefetch_bucket_size == DEFAULTS["stage3_prefetch_bucket_size"]
    assert cfg.max_live_parameters == DEFAULTS["stage3_max_live_parameters"]
    assert cfg.max_reuse_distance == DEFAULTS["stage3_max_reuse_distance"]
    assert cfg.param_persistence_threshold == DEFAULTS["stage3_param_persistence_threshold"]
    assert cfg.model_persistence_threshold == DEFAULTS["model_persistence_threshold"]
    assert cfg.sub_group_size == DEFAULTS["sub_group_size"]
    assert cfg.contiguous_gradients is DEFAULTS["contiguous_gradients"]
    assert DeepSpeedZeroConfig(stage=3).overlap_comm is True and DeepSpeedZeroConfig(stage=2).overlap_comm is False
    card = DeepSpeedSection()
    for key in ("reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size",
                "stage3_max_live_parameters", "stage3_max_reuse_distance", "stage3_param_persistence_threshold",
                "sub_group_size", "contiguous_gradients", "overlap_comm"):
        assert getattr(card, key) == DEFAULTS[key], key
    # "auto" is dropped by DeepSpeed's own config (a config handed to deepspeed.initialize directly)
    assert DeepSpeedZeroConfig(reduce_bucket_size="auto").reduce_bucket_size == DEFAULTS["reduce_bucket_size"]


def test_auto_is_what_the_hf_trainer_fills():
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    class _Cfg:
        hidden_size = 4096

    class _Model:
        config = _Cfg()

    ds = HfTrainerDeepSpeedConfig({"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
                                                         "stage3_prefetch_bucket_size": "auto",
                                                         "stage3_param_persistence_threshold": "auto"}})
    ds.trainer_config_finalize(_Args(), _Model(), num_training_steps=10)
    z = ds.config["zero_optimization"]
    ours = resolve_zero_config(stage=3, hidden_size=4096, reduce_bucket_size="auto",
                               stage3_prefetch_bucket_size="auto", stage3_param_persistence_threshold="auto")
    assert (ours.reduce_bucket_size, ours.prefetch_bucket_size, ours.param_persistence_threshold) == (
        z["reduce_bucket_size"], z["stage3_prefetch_bucket_size"], z["stage3_param_persistence_threshold"])


class _Args:
    """The TrainingArguments fields trainer_config_finalize reads."""

    fp16 = bf16 = False
    fp16_backend = "auto"
    half_precision_backend = "auto"
    deepspeed = None

    def get_warmup_steps(self, num_training_steps: int) -> int:
        return 0


def test_a_published_report_decomposes_exactly():
    """LLaMA-Factory #1158: Baichuan2-13B (13,896,668,160 params) ZeRO-2 on 4 GPUs, bf16: 'Tried to
    allocate 12.94 GiB' with '77.65 GiB already allocated' = bf16 weights + fp32 partition + fp32 AdamW
    + the gradient partition + its flat copy, at the cast to fp32."""
    n, dp = 13_896_668_160, 4
    cfg = resolve_zero_config(stage=2, hidden_size=5120, reduce_bucket_size=5e8, overlap_comm=False)
    buf = zero_buffers(cfg, dp=dp, trainable_numel=n, grad_bytes=2, largest_param=5120 * 125696)
    assert buf.step_fp32_grad / GIB == pytest.approx(12.94, abs=0.005)
    part = partition_numel(n, dp)
    already = 2 * n + (4 + 8) * part + 2 * part + (buf.step_cast - buf.step_fp32_grad)
    assert already / GIB == pytest.approx(77.65, abs=0.01)


_WORKER = DEEPSPEED_TINY_PROLOGUE + textwrap.dedent('''
    def run(zero):
        m, eng, zo = engine(zero)
        rec = {"numel": sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in m.parameters()),
               "fp32_grad": 0, "ipg": [], "grad_partition": 0, "fwd": 0, "bwd": 0, "loss": 0}
        step = zo._optimizer_step
        def optimizer_step(i):
            groups = zo.single_partition_of_fp32_groups if zero["stage"] < 3 else zo.fp32_partitioned_groups_flat
            g = groups[i].grad
            rec["fp32_grad"] = max(rec["fp32_grad"], g.numel())
            rec["fp32_dtype"] = str(g.dtype)
            return step(i)
        zo._optimizer_step = optimizer_step
        if zero["stage"] < 3:
            reduce = zo.reduce_ipg_grads
            def reduce_ipg_grads(*a, **k):
                rec["ipg"] = [b.numel() for v in zo.ipg_buckets.values() for b in v.buffer]
                if zo.grads_in_partition is not None:
                    rec["grad_partition"] = zo.grads_in_partition.numel()
                return reduce(*a, **k)
            zo.reduce_ipg_grads = reduce_ipg_grads
        else:
            rec["ipg"] = [v.buffer.numel() for v in zo.ipg_buckets.values()]
            rec["grad_partition"] = zo.grad_partitions_flat_buffer.numel()
            rec["grad_dtype"] = str(zo.grad_partitions_flat_buffer.dtype)
            rec["persistent"] = sum(p.ds_numel for p in zo.persistent_parameters)
            coord = zo.parameter_offload.get_param_coordinator()
            name = "_PartitionedParameterCoordinator__n_available_params"
            phase = ["fwd"]
            fetch = coord.fetch_sub_module
            def fetch_sub_module(*a, **k):
                out = fetch(*a, **k)
                rec[phase[0]] = max(rec[phase[0]], getattr(coord, name))
                return out
            coord.fetch_sub_module = fetch_sub_module
        ids = torch.randint(0, V, (1, 16))
        for _ in range(3):  # the coordinator records its trace in the first step
            if zero["stage"] == 3:
                rec.update(fwd=0, bwd=0); phase[0] = "fwd"
            loss = eng(ids).float().pow(2).mean()
            if zero["stage"] == 3:
                rec["loss"] = getattr(coord, name); phase[0] = "bwd"
            eng.backward(loss)
            eng.step()
        return rec

    out = [run(json.loads(z)) for z in sys.argv[2:]]
    print("RESULT " + json.dumps(out))
''')

_ZERO2 = {"stage": 2, "reduce_bucket_size": 5000, "overlap_comm": True, "contiguous_gradients": True}
_ZERO3 = [
    {"stage": 3, "reduce_bucket_size": 7000, "stage3_prefetch_bucket_size": 0, "stage3_max_live_parameters": 10**6,
     "stage3_max_reuse_distance": 60000, "stage3_param_persistence_threshold": 100},
    {"stage": 3, "reduce_bucket_size": 7000, "stage3_prefetch_bucket_size": 20000, "stage3_max_live_parameters": 50000,
     "stage3_max_reuse_distance": 100000, "stage3_param_persistence_threshold": 100},
]
H, I, V, L = 64, 160, 300, 4
_LAYERS = tuple((H * H, H * H // 2, H * H // 2, H * H, H * I, H * I, I * H) for _ in range(L))
_SIZES = ((V * H, 1), (H, 2 * L), (H * H, 2 * L), (H * H // 2, 2 * L), (H * I, 3 * L), (V * H, 1))


@pytest.fixture(scope="module")
def deepspeed_runs():
    configs = [_ZERO2, *_ZERO3]
    proc = subprocess.run([sys.executable, "-c", _WORKER, "29561", *(json.dumps(c) for c in configs)],
                          check=False, capture_output=True, text=True, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-4000:]
    return dict(zip(("zero2", "zero3a", "zero3b"), json.loads(line[len("RESULT "):])))


@pytest.mark.slow  # a DeepSpeed engine per config in a subprocess: about a minute on two loaded cores
def test_zero2_buffers_are_deepspeeds(deepspeed_runs):
    run = deepspeed_runs["zero2"]
    cfg = resolve_zero_config(stage=2, hidden_size=H, **{k: v for k, v in _ZERO2.items() if k != "stage"})
    buf = zero_buffers(cfg, dp=1, trainable_numel=run["numel"], grad_bytes=2, largest_param=V * H)
    assert run["ipg"] == [5000, 5000]  # two buckets with overlap_comm
    assert ipg_bucket_bytes(cfg, grad_bytes=2) == sum(run["ipg"]) * 2
    assert run["grad_partition"] == run["numel"]
    assert run["fp32_dtype"] == "torch.float32"
    assert buf.step_fp32_grad == run["fp32_grad"] * 4
    assert buf.optimizer_flat_numel == run["fp32_grad"]


@pytest.mark.slow
@pytest.mark.parametrize("which", [0, 1])
def test_zero3_buffers_and_gathered_parameters_are_deepspeeds(deepspeed_runs, which):
    zero = _ZERO3[which]
    run = deepspeed_runs[("zero3a", "zero3b")[which]]
    cfg = resolve_zero_config(stage=3, hidden_size=H, **{k: v for k, v in zero.items() if k != "stage"})
    assert run["ipg"] == [zero["reduce_bucket_size"]]
    assert ipg_bucket_bytes(cfg, grad_bytes=2) == run["ipg"][0] * 2
    assert run["grad_partition"] == run["numel"] and run["grad_dtype"] == "torch.bfloat16"
    assert run["persistent"] == persistent_numel(cfg, _SIZES)  # the LayerNorm weights and biases
    buf = zero_buffers(cfg, dp=1, trainable_numel=run["numel"], grad_bytes=2, largest_param=V * H)
    assert buf.step_fp32_grad == run["fp32_grad"] * 4
    g = gathered_params(_LAYERS, embedding=V * H, head=V * H, tied=False,
                        prefetch_bucket_size=cfg.prefetch_bucket_size, max_live_parameters=cfg.max_live_parameters,
                        max_reuse_distance=cfg.max_reuse_distance, recompute=False)
    assert (g.forward_peak, g.at_loss, g.backward_peak) == (run["fwd"], run["loss"], run["bwd"])


@pytest.mark.parametrize(("name", "stage", "reduce", "overlap"), [
    ("llamafactory-z2", 2, 500_000_000, False), ("llamafactory-z3", 3, "auto", False),
    ("ms-swift-zero2", 2, 200_000_000, True), ("ms-swift-zero3", 3, "auto", True), ("openrlhf", 3, 500_000_000, None),
])
def test_presets_carry_their_frameworks_deepspeed_settings(name, stage, reduce, overlap):
    from trainfit.methods.presets import apply_preset
    from trainfit.plan.terms import zero_config_of
    from trainfit.spec.card import load_card_dict

    card = load_card_dict(apply_preset({"model": "Qwen/Qwen3-8B"}, name))
    assert card.parallel.strategy.value == f"zero{stage}"
    assert card.deepspeed.reduce_bucket_size == reduce and card.deepspeed.overlap_comm is overlap
    cfg = zero_config_of(card, __import__("trainfit.plan.resolve", fromlist=["x"]).model_spec_of(card), stage)
    assert cfg.reduce_bucket_size == (4096 * 4096 if reduce == "auto" else reduce)
    # OpenRLHF hands its config (every bucket key "auto") to deepspeed.initialize: DeepSpeed's defaults
    assert cfg.overlap_comm is (stage == 3 if overlap is None else overlap)
