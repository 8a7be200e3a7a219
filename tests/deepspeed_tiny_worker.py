"""Shared source for the tests that run DeepSpeed itself on the CPU (tests/unit/test_deepspeed_zero.py,
tests/memory/test_zero_stream_replay.py); importable because pytest puts tests/ on sys.path for its conftest."""

DEEPSPEED_TINY_PROLOGUE = '''\
import json, os, sys
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
import torch, deepspeed
from torch import nn
deepspeed.init_distributed(dist_backend="gloo")
H, I, V, L = 64, 160, 300, 4

class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.norm = nn.LayerNorm(H)
        s.q = nn.Linear(H, H, bias=False); s.k = nn.Linear(H, H // 2, bias=False)
        s.v = nn.Linear(H, H // 2, bias=False); s.o = nn.Linear(H, H, bias=False)
        s.gate = nn.Linear(H, I, bias=False); s.up = nn.Linear(H, I, bias=False); s.down = nn.Linear(I, H, bias=False)
    def forward(s, x):
        x = s.norm(x)
        x = x + s.o(s.q(x) + torch.cat([s.k(x), s.v(x)], -1))
        return x + s.down(torch.nn.functional.silu(s.gate(x)) * s.up(x))

class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(V, H); s.layers = nn.ModuleList(Block() for _ in range(L))
        s.head = nn.Linear(H, V, bias=False)
    def forward(s, ids):
        x = s.emb(ids)
        for layer in s.layers:
            x = layer(x)
        return s.head(x)


def engine(zero):
    torch.manual_seed(0)
    m = M()
    cfg = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": zero,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
    eng, *_ = deepspeed.initialize(model=m, model_parameters=m.parameters(), config=cfg)
    return m, eng, eng.optimizer
'''
"""The start of a one-rank DeepSpeed worker script (run with ``python -c``; argv[1] is the rendezvous port):
gloo init, a 4-layer toy decoder (H 64, I 160, V 300) and ``engine(zero)`` -> (model, engine, ZeRO
optimizer) under bf16 AdamW. The DeepSpeed buffer tests append their own ``run`` and main."""
