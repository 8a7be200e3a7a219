"""FSDP2 on a one-rank mesh, traced: a toy model (embedding, four square linear units, lm_head) under
``fully_shard`` with ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` on a fake process group of world
size 1 (FakeTensorMode), measured by torch's ``FSDPMemTracker`` at FSDP2's own hooks; checked against
``plan.terms._fsdp_terms``' one-rank branch (``parallel.fsdp_one_rank``)."""

from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from trainfit.memory.sharding import make_sharding  # noqa: E402
from trainfit.plan.terms import _fsdp_terms  # noqa: E402
from trainfit.spec.enums import Strategy  # noqa: E402
from trainfit.trace.fsdp import fake_process_group, make_mesh  # noqa: E402

pytestmark = pytest.mark.trace

H, V, L = 256, 512, 4


class _Toy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.layers = nn.ModuleList(nn.Linear(H, H, bias=False) for _ in range(L))
        self.head = nn.Linear(H, V, bias=False)

    def forward(self, x):  # noqa: ANN001, ANN201
        h = self.emb(x)
        for layer in self.layers:
            h = torch.relu(layer(h))
        return self.head(h).float().logsumexp(-1).sum()


def _traced() -> dict[str, dict[str, int]]:
    """Bytes per FSDP category at each hook of the second (steady) step: ``"<hook> <unit>"`` -> category -> bytes."""
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as pg
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    seen: dict[str, dict[str, int]] = {}
    tracker: list = [None]

    def snap(tag: str) -> None:
        if tracker[0] is not None:
            (dev,) = tracker[0].get_tracker_snapshot("current").values()
            seen[tag] = {str(k).rsplit(".", 1)[-1]: int(v) for k, v in dev.items()}

    orig_post, orig_reduce = pg.FSDPParamGroup.post_backward, pg.foreach_reduce

    def post(self, *a):  # noqa: ANN001, ANN002, ANN202
        snap(f"post_backward {self._module_fqn}")
        return orig_post(self, *a)

    def reduce(*a, **k):  # noqa: ANN002, ANN003, ANN202
        n = sum(key.startswith("before reduce") for key in seen)
        snap(f"before reduce {n}")
        out = orig_reduce(*a, **k)
        snap(f"after reduce {n}")
        return out

    with pytest.MonkeyPatch.context() as mp, fake_process_group(1):
        mp.setattr(pg.FSDPParamGroup, "post_backward", post)
        mp.setattr(pg, "foreach_reduce", reduce)
        mesh, _ = make_mesh(1)
        with FakeTensorMode():
            model = _Toy()
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for layer in model.layers:
                fully_shard(layer, mesh=mesh, mp_policy=policy)
            fully_shard(model, mesh=mesh, mp_policy=policy)
            opt = torch.optim.AdamW(model.parameters(), foreach=False)
            x = torch.randint(0, V, (1, 8))
            for step in range(2):
                mt = FSDPMemTracker(model, opt)
                mt.track_inputs((x,))
                with mt:
                    tracker[0] = mt if step == 1 else None
                    model(x).backward()
                    opt.step()
                    opt.zero_grad()
            # the tracker's own per-module snapshots after FSDP's pre-forward / pre-backward hooks (unsharded)
            for st in mt.memory_tracking.values():
                for state in ("AFT_PRE_FW", "AFT_PRE_BW"):
                    for shot in st.snapshots.get(getattr(type(next(iter(st.snapshots))), state), []):
                        (dev,) = shot.values()
                        seen[f"{state} {st.mod_fqn}"] = {str(k).rsplit(".", 1)[-1]: int(v) for k, v in dev.items()}
    return seen


@pytest.fixture(scope="module")
def traced() -> dict[str, dict[str, int]]:
    return _traced()


def _plan() -> dict[str, float]:
    spec = SimpleNamespace(num_layers=L, hidden_size=0)  # the toy has no final norm
    pb = SimpleNamespace(largest_layer=H * H, embedding=V * H, lm_head=V * H, total=2 * V * H + L * H * H)
    sharding = make_sharding(strategy=Strategy.FSDP, gpus_per_node=1, nodes=1, fsdp_one_rank=True)
    w = SimpleNamespace(base=pb.total * 2, adapter=0)  # gathered in bf16
    fsdp, _ = _fsdp_terms(spec, sharding, SimpleNamespace(lora=None), w, pb=pb, scale=1.0, n_train=pb.total,
                          grad_bytes=4, unsharded_grad_bytes=2)
    return fsdp


def test_one_unit_unsharded_at_a_time_and_no_prefetch(traced) -> None:
    plan = _plan()
    root = plan["fsdp_root_unit"]
    assert root == 2 * V * H * 2
    for i in range(L):
        for state in ("AFT_PRE_FW", "AFT_PRE_BW"):
            # the root stays unsharded; this unit is the only layer unsharded (the backward prefetch of the unit
            # before it allocated nothing)
            (key,) = [k for k in traced if k.startswith(state) and k.endswith(f"layers.{i}")]
            assert traced[key]["UNSHARDED_PARAM"] == root + plan["fsdp_layer_units"]


def test_layer_backward_holds_its_bf16_grads_and_the_previous_fp32_reduce_input(traced) -> None:
    plan = _plan()
    head_grads = plan["fsdp_root_grads"]  # lm_head's bf16 gradient, reduced at the end
    assert head_grads == V * H * 2
    for i in range(L - 1):  # layer L-1 is the first to reduce: no earlier input
        t = traced[f"post_backward layers.{i}"]
        assert t["UNSHARDED_PARAM"] == plan["fsdp_root_unit"] + plan["fsdp_layer_units"]
        # TEMP besides: the activation gradient flowing through (8 tokens x H, a few KB)
        assert t["UNSHARDED_GRAD"] + (t["TEMP"] - head_grads) == pytest.approx(plan["fsdp_unsharded_grads"],
                                                                               abs=8 * H * 4)
    last = traced[f"post_backward layers.{L - 1}"]
    assert last["UNSHARDED_GRAD"] == H * H * 2 and last["TEMP"] == pytest.approx(head_grads, abs=8 * H * 4)


def test_each_layer_reduce_adds_an_fp32_input_and_the_fp32_sharded_gradient(traced) -> None:
    # the layers reduce first (L of them), the root last; each layer's reduce allocates the fp32 reduce-scatter
    # input and reduce_output (the sharded gradient), both the unit's size in fp32; the previous input went first
    for n in range(L):
        before, after = traced[f"before reduce {n}"], traced[f"after reduce {n}"]
        grown = sum(after.get(k, 0) for k in ("TEMP", "SHARDED_GRAD")) - sum(before.get(k, 0) for k in ("TEMP", "SHARDED_GRAD"))
        assert grown == 2 * H * H * 4
        if n:  # the previous unit's input was freed before this reduce (reduce_scatter_max_input_buffers 1)
            assert before["TEMP"] == pytest.approx(_plan()["fsdp_root_grads"], abs=8 * H * 4)
