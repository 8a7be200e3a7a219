"""precision.fp8_all_gather in the torchtitan export and import: ``[quantize.linear.float8]
enable_fsdp_float8_all_gather`` and ``precompute_float8_dynamic_scale_for_fsdp`` (torchtitan 0.2.2 JobConfig
fields), read back as the card setting."""

from __future__ import annotations

import tomllib

from export_vendor import torchtitan_keys_recorded
from test_export_torchtitan_nemo_rl import check_torchtitan

from trainfit.export import export
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict


def _card(all_gather: bool):
    return load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
                           "parallel": {"strategy": "fsdp", "compile": True},
                           "precision": {"compute": "fp8", "fp8_recipe": "current", "fp8_all_gather": all_gather}})


def test_export_writes_the_float8_all_gather_and_reads_it_back():
    e = export(_card(True), "torchtitan")
    cfg = tomllib.loads(e.text)
    f8 = cfg["quantize"]["linear"]["float8"]
    assert f8 == {"recipe_name": "tensorwise", "enable_fsdp_float8_all_gather": True,
                  "precompute_float8_dynamic_scale_for_fsdp": True}
    check_torchtitan(cfg, torchtitan_keys_recorded()["keys"])
    back = import_text("# launch: torchrun --nnodes=1 --nproc_per_node=8 -m torchtitan.train\n" + e.text,
                       "torchtitan").card
    assert back["precision"]["fp8_all_gather"] is True
    off = tomllib.loads(export(_card(False), "torchtitan").text)["quantize"]["linear"]["float8"]
    assert off == {"recipe_name": "tensorwise"}
