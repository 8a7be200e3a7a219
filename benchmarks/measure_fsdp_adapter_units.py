"""Measure the host seconds an FSDP1 unit made of one PEFT adapter linear adds per call, in the no-grad forward, the
grad forward and the backward: ``rates.FSDP_ADAPTER_UNIT_*_HOST_S`` (``parallel.fsdp_adapter_units``).

PEFT's ``fsdp_auto_wrap_policy`` (fms-hf-tuning and the HF Trainer apply it to a PEFT model on FSDP) wraps every leaf
with a trainable weight, so each LoRA ``lora_A`` / ``lora_B`` linear is a unit beside its decoder layer. Same footing as
``tools/measure_fsdp_backward_hooks.py``: a fake process group of 8 ranks (collectives are no-ops: host work only),
a tiny transformers Qwen2 (hidden 64, 16 tokens, fp32, eager attention) at 4 and 8 decoder layers with LoRA r 8 on
q/k/v/o_proj (dropout 0.1), FSDP1 ``FullyShardedDataParallel`` with ``use_orig_params=True`` (accelerate launch's
default, ``--fsdp_use_orig_params true``) wrapped two ways: the decoder layers only (``transformer_auto_wrap_policy``)
and PEFT's policy (the layers plus 8 adapter units each). Timed, best of ``ROUNDS`` interleaved rounds of 10 calls:
the no-grad forward, the grad forward (its backward run untimed after it), ``loss.backward()`` after an untimed grad
forward. Per adapter unit: (PEFT policy - layers only) over its adapter units at 4 layers (32) and at 8 (64): both
wrappings hold the same root and layer units, so only the adapter units differ; also the slope from 4 to 8 layers.
The host is a shared VM: a run under load reads every figure higher, so the quietest run (the lowest figures, its 4-
and 8-layer estimates agreeing) is the one to read.

Usage::

    ROUNDS=12 .venv/bin/python benchmarks/measure_fsdp_adapter_units.py
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="8", MASTER_ADDR="127.0.0.1", MASTER_PORT="29564")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from measure_fsdp_backward_hooks import MODES, best_of_rounds, timed  # noqa: E402  the same timing
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def build(layers: int, wrap: str):  # noqa: ANN201 - a torch module
    from peft import LoraConfig, get_peft_model
    from peft.utils.other import fsdp_auto_wrap_policy
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = get_peft_model(Qwen2ForCausalLM(cfg).float(),
                           LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, target_modules=TARGETS))
    policy = (fsdp_auto_wrap_policy(model) if wrap == "adapters"
              else functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Qwen2DecoderLayer}))
    return FullyShardedDataParallel(model, auto_wrap_policy=policy, use_orig_params=True, device_id=torch.device("cpu"))


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    rounds = int(os.environ.get("ROUNDS", 15))
    ids = torch.randint(0, 256, (1, 16))
    models = {(w, n): build(n, w) for w in ("layers", "adapters") for n in (4, 8)}
    units = {(w, n): sum(1 for m in models[(w, n)].modules()
                         if type(m).__name__ == "FullyShardedDataParallel") for w, n in models}
    for m in models.values():
        m.train()
        for _ in range(5):
            timed(m, ids, "backward")
    best = best_of_rounds(models, ids, rounds)
    import peft
    import transformers

    print(f"torch {torch.__version__} ({torch.version.git_version}), transformers {transformers.__version__}, peft"
          f" {peft.__version__}, best of {rounds} rounds; FSDP units: {units}")
    added = (units[("adapters", 8)] - units[("layers", 8)]) - (units[("adapters", 4)] - units[("layers", 4)])
    row = []
    for mode in MODES:
        slope = ((best[("adapters", 8, mode)] - best[("layers", 8, mode)])
                 - (best[("adapters", 4, mode)] - best[("layers", 4, mode)]))
        row.append(f"{mode} {slope / added * 1e6:.0f} us")
    print(f"per adapter unit, slope 4 -> 8 layers ({added} units): " + ", ".join(row))
    for n in (4, 8):
        extra = units[("adapters", n)] - units[("layers", n)]
        cells = [f"{mode} {(best[('adapters', n, mode)] - best[('layers', n, mode)]) / extra * 1e6:.0f} us"
                 for mode in MODES]
        print(f"per adapter unit at {n} layers ({extra} units): " + ", ".join(cells))
    for key in sorted(best):
        print(f"  {key}: {best[key] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
