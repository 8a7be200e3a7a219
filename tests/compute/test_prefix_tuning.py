"""PEFT prefix tuning (card scope prefix_tuning): trained counts against PEFT's result files, the op inventory
against an aten-op trace of PEFT's PrefixTuningConfig on a small llama, the saved bytes by hand, the attention over
the prefix, and the card's one-line refusals."""

from __future__ import annotations

import collections
from dataclasses import replace

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.cli.main import main
from trainfit.compute import prefix_tuning as pt
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.memory import peft_variants as pv
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Scope

L40S_3B = {"model": "meta-llama/Llama-3.2-3B", "precision": {"optimizer_impl": "foreach"},
           "hardware": {"gpu": "l40s", "gpus_per_node": 1},
           "parallel": {"strategy": "single", "gradient_checkpointing": False},
           "batch": {"micro_batch_size": 4, "seq_len": 210}}


def _plan(n: int, **extra):
    return make_plan(load_card_dict({**L40S_3B, "scope": "prefix_tuning", "prefix_tuning": {"num_virtual_tokens": n},
                                     **extra}))


def test_trained_count_matches_peft_on_llama_3_2_3b():
    # huggingface/peft method_comparison/MetaMathQA/results @51c2ff666b142d004c12609c9686cf17ca055751:
    # prefixtuning--llama-3.2-3B-lr_0.001.json "num_trainable_params": 11468800 (200 virtual tokens),
    # prefixtuning--llama-3.2-3B-tokens50-init_prefix-lr_0.005.json 2867200 (50)
    assert _plan(200).params_trainable == 11_468_800
    assert _plan(50).params_trainable == 2_867_200


def test_saved_bytes_per_layer_by_hand():
    spec = resolve_model("meta-llama/Llama-3.2-3B")
    b, s, n, a = 4, 210, 200, 2
    # the cache's cat'ed k and v (kv_dim 1024 over n + s), n more rows of the repeated k and v (q_dim 3072), the mask's
    # s x n more columns
    want = 2 * a * b * ((n + s) * 1024 + n * 3072) + a * b * s * n
    assert pv.prefix_saved_bytes_per_layer(spec, micro_batch_size=b, seq_len=s, num_virtual_tokens=n,
                                           compute_dtype_bytes=a) == want
    # the plan's activations grow by that difference per layer between two prefix lengths
    act = {k: next(p for p in _plan(k).phases if p.phase.value == "forward").components["activations"]
           for k in (100, 200)}
    per_layer = (pv.prefix_saved_bytes_per_layer(spec, micro_batch_size=b, seq_len=s, num_virtual_tokens=200,
                                                 compute_dtype_bytes=a)
                 - pv.prefix_saved_bytes_per_layer(spec, micro_batch_size=b, seq_len=s, num_virtual_tokens=100,
                                                   compute_dtype_bytes=a))
    assert act[200] - act[100] == pytest.approx(28 * per_layer, abs=28)


def test_inventory_attends_over_the_prefix_and_counts_its_ops():
    spec = resolve_model("meta-llama/Llama-3.2-3B")
    b, s, n = 4, 210, 200
    base = Adapter(rank=1, targets=())
    kw = dict(micro_batch_size=b, seq_len=s, causal_skip=False, mask_layers=28)
    without = step_inventory(spec, adapter=base, **kw)
    with_ = step_inventory(spec, adapter=replace(base, prefix_tokens=n), **kw)
    # every query reads n + s keys (no causal halving under the mask): the attention FLOPs scale by (n + s) / s
    assert with_.layers_forward.attention_forward_flops == pytest.approx(
        without.layers_forward.attention_forward_flops * (n + s) / s)
    # four cats a layer, the embedding and its cast forward; four kernels backward
    assert with_.layers_forward.kernels - without.layers_forward.kernels == 4 * 28
    assert with_.head_forward.kernels - without.head_forward.kernels == 2
    assert with_.head_backward.kernels - without.head_backward.kernels == 4
    cat = pt.prefix_cat_bytes_per_layer(micro_batch_size=b, seq_len=s, num_virtual_tokens=n, kv_dim=1024,
                                        dtype_bytes=2.0)
    assert cat == 2 * 2 * b * (n + n + s) * 1024 * 2
    enc = pt.prefix_encoder_work(micro_batch_size=b, num_virtual_tokens=n, row_elements=28 * 2 * 1024, dtype_bytes=2.0)
    assert with_.head_forward.memory_bytes - without.head_forward.memory_bytes == pytest.approx(enc.forward_bytes)
    assert with_.head_backward.memory_bytes - without.head_backward.memory_bytes == pytest.approx(enc.backward_bytes)


def test_prefix_plan_says_the_mask_and_runs_slower_with_more_tokens():
    p50, p200 = _plan(50), _plan(200)
    assert p200.step_seconds > p50.step_seconds
    assert any("prefix tuning: 200 prefix keys make transformers keep its 4-D mask" in a for a in p200.assumptions)


@pytest.mark.parametrize(("extra", "line"), [
    ({"prefix_tuning": {}}, "prefix_tuning.num_virtual_tokens: required with scope prefix_tuning (PEFT has no"
                            " default); allowed: 1 to 1000000, e.g. 20"),
    ({"attention": "eager"}, "attention: 'eager' with scope prefix_tuning is not modelled; allowed: sdpa"),
    ({"parallel": {"strategy": "single", "gradient_checkpointing": True}},
     "parallel.gradient_checkpointing: scope prefix_tuning is modelled without checkpointing; allowed: false"),
])
def test_card_refusals_are_one_line(extra, line, tmp_path, capsys):
    import yaml

    card = {**L40S_3B, "scope": "prefix_tuning", "prefix_tuning": {"num_virtual_tokens": 20}, **extra}
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    assert main(["plan", str(path)]) == 2
    out, err = capsys.readouterr()
    assert [ln for ln in (out + err).splitlines() if ln.strip()] == [f"trainfit: error: {line}"]


def test_section_read_by_its_scope_only(tmp_path, capsys):
    import yaml

    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump({**L40S_3B, "scope": "lora", "prefix_tuning": {"num_virtual_tokens": 20}}))
    assert main(["plan", str(path)]) == 2
    assert "prefix_tuning: only read with scope prefix_tuning" in capsys.readouterr().err


def test_scope_is_an_enum_member():
    assert Scope("prefix_tuning") is Scope.PREFIX_TUNING


@pytest.mark.trace
def test_op_counts_match_peft_prefix_tuning_trace():
    """The constants of compute.prefix_tuning against the aten ops PEFT's prefix tuning runs (module docstring)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from peft import PrefixTuningConfig, get_peft_model
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, n, b, s, kv_heads, d = 3, 5, 2, 7, 2, 16
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=kv_heads, head_dim=d, vocab_size=512, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = get_peft_model(LlamaForCausalLM(cfg).to(torch.bfloat16),
                           PrefixTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=n))
    trained = [p for p in model.parameters() if p.requires_grad]
    assert [(tuple(p.shape), p.dtype) for p in trained] == [((n, layers * 2 * kv_heads * d), torch.float32)]

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.shapes = collections.defaultdict(list)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                self.shapes[func.overloadpacket.__name__].append(tuple(out.shape))
            return out

    ids = torch.randint(0, 512, (b, s))
    with Ops() as fwd:
        out = model(input_ids=ids, attention_mask=torch.ones(b, s, dtype=torch.long), labels=ids)
    with Ops() as bwd:
        out.loss.backward()
    row = (b, n, layers * 2 * kv_heads * d)
    kv_cats = [x for x in fwd.shapes["cat"] if len(x) == 4 and x[1] == kv_heads and x[2] in (n, n + s)]
    assert len(kv_cats) == pt.PREFIX_CAT_KERNELS_PER_LAYER * layers
    assert sum(x == (b, kv_heads, n, d) for x in kv_cats) == sum(x == (b, kv_heads, n + s, d) for x in kv_cats)
    forward_encoder = fwd.shapes["embedding"].count(row) + fwd.shapes["_to_copy"].count(row)
    assert forward_encoder == pt.PREFIX_FORWARD_ENCODER_KERNELS
    split_cat = [x for x in bwd.shapes["cat"] if x == (layers * 2, b, kv_heads, n, d)]
    permuted_copy = [x for x in bwd.shapes["clone"] if x == (b, n, layers * 2, kv_heads, d)]
    backward_encoder = (len(split_cat) + len(permuted_copy) + bwd.shapes["_to_copy"].count(row)
                        + len(bwd.shapes["embedding_dense_backward"]))
    assert backward_encoder == pt.PREFIX_BACKWARD_ENCODER_KERNELS


def test_export_and_trace_refuse_in_one_line(tmp_path, capsys):
    import yaml

    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump({**L40S_3B, "scope": "prefix_tuning", "prefix_tuning": {"num_virtual_tokens": 20}}))
    assert main(["export", str(path), "--to", "trl"]) == 2
    out, err = capsys.readouterr()
    assert [ln for ln in (out + err).splitlines() if ln.strip()] == [
        "trainfit: error: scope: 'prefix_tuning' is not exported (the targets write LoRA adapter configs);"
        " allowed for export: full, lora, qlora"]
