"""benchmarks/sglang_moe_name_scan_cpu.py: the name walk of SGLang's MoE ``load_weights`` resolves every tensor the
export yields, and its substring tests grow as experts^2 per layer: 3.75 M for Qwen3-30B-A3B, the count the
null result in compute/sync.py times."""

from __future__ import annotations

import importlib.util
import sys

from step_times_module import REPO

from trainfit.catalog.models import from_catalog
from trainfit.compute import sync

_spec = importlib.util.spec_from_file_location("sglang_moe_name_scan_cpu",
                                               REPO / "benchmarks" / "sglang_moe_name_scan_cpu.py")
assert _spec is not None and _spec.loader is not None
M = importlib.util.module_from_spec(_spec)
sys.modules["sglang_moe_name_scan_cpu"] = M
_spec.loader.exec_module(M)


def test_every_expert_and_stacked_tensor_resolves_to_its_own_fragment() -> None:
    names, fragments = M.tensor_names(2, 4), M.expert_fragments(4)
    assert len(fragments) == 12 and "experts.1.gate_proj." not in "model.layers.0.mlp.experts.11.gate_proj.weight"
    # 2 layers x (4 experts x 3 + q/k/v): the norms, o_proj and the router match nothing and load as plain tensors
    assert M.resolve(names, fragments) == 2 * (12 + 3)


def test_substring_tests_grow_with_the_square_of_the_experts() -> None:
    for experts in (0, 4, 16, 128):
        per_layer = M.substring_tests(M.tensor_names(1, experts), M.expert_fragments(experts))
        # q, k, v stop at the 1st, 2nd, 3rd stacked test; the six other dense tensors test all 5 and all 3E fragments;
        # the expert tensor at place k of the mapping tests the 5 stacked names and k fragments
        m = 3 * experts
        assert per_layer == (1 + 2 + 3) + 6 * (5 + m) + 5 * m + m * (m + 1) // 2


def test_qwen3_30b_a3b_pass_is_the_counted_one() -> None:
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    names = M.tensor_names(48, 128)
    # the export's tensors less the embeddings, the final norm and the head, which the walk leaves out
    assert len(names) == sync.hf_tensor_count(spec) - 3
    assert M.substring_tests(names, M.expert_fragments(128)) == 3_752_640
