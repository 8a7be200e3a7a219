"""rollout.quantization: fp8 exports as NeMo RL's vllm_cfg.precision fp8 (with use_deep_gemm, as the fp8
performance recipes run it) and reads back; the bf16 module keywords are a recipe key, noted."""

from __future__ import annotations

import yaml
from export_vendor import nemo_rl_keys_recorded
from test_export_torchtitan_nemo_rl import check_nemo_rl

from trainfit.export import export
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict


def _card(**rollout):
    return load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "grpo", "hardware": {"gpu": "h100-sxm"},
                           "rollout": {"quantization": "fp8", **rollout}})


def test_fp8_generation_exports_and_reads_back():
    e = export(_card(), "nemo-rl")
    cfg = yaml.safe_load(e.text)
    vllm = cfg["policy"]["generation"]["vllm_cfg"]
    assert (vllm["precision"], vllm["use_deep_gemm"]) == ("fp8", True)
    check_nemo_rl(cfg, nemo_rl_keys_recorded()[cfg["defaults"]])  # keys of grpo_math_1B.yaml at the pinned commit
    assert "rollout.quantization" not in e.lost
    back = import_text(e.text, "nemo-rl")
    assert back.card["rollout"]["quantization"] == "fp8"


def test_bf16_modules_are_noted_and_read_from_a_recipe():
    e = export(_card(quantization_bf16_modules=["o_proj"]), "nemo-rl")
    assert any("quantization_ignored_layer_kws" in n for n in e.notes)
    recipe = e.text.replace("      use_deep_gemm: true\n",
                            "      use_deep_gemm: true\n      quantization_ignored_layer_kws: [a_proj, b_proj]\n")
    back = import_text(recipe, "nemo-rl")
    assert back.card["rollout"]["quantization_bf16_modules"] == ["a_proj", "b_proj"]
    plain = export(load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "grpo"}), "nemo-rl")
    assert "precision" not in yaml.safe_load(plain.text)["policy"]["generation"]["vllm_cfg"]
