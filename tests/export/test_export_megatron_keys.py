"""Megatron-Core card fields through every exporter and importer: the Megatron-Core settings (tensor_parallel_impl,
pipeline_layout, moe_dispatcher, moe_comm_overlap, tp_comm_overlap), the fp8 rollout, the host-swapped reference,
packing and the flash-attn loss. Written where the framework has the key (read back from hand-written framework
files too), said in one note naming the field where it has not; never dropped silently."""

from __future__ import annotations

import tomllib

import pytest
import yaml
from export_cards import CARDS, assert_lost_fields_named

from trainfit.errors import TrainfitError
from trainfit.export import TARGETS, ExportError, export, read_back
from trainfit.export.importers import import_text
from trainfit.export.parallel import layout_from_megatron, megatron_layout
from trainfit.spec.card import load_card_dict

NEW_FIELDS = ("parallel.tensor_parallel_impl", "parallel.tp_comm_overlap", "parallel.pipeline_layout",
              "parallel.moe_dispatcher", "parallel.moe_comm_overlap", "parallel.moe_routing",
              "parallel.moe_load_balancing", "rollout.quantization",
              "rollout.quantization_bf16_modules", "roles.reference", "batch.packed_sample_tokens",
              "batch.packed_sample_length_cv", "batch.padding", "precision.nf4_compute_dtype", "loss.kernel", "loss.inplace_backward", "hardware.allocator", "model")


@pytest.mark.parametrize("layout", [(1,), (3, 4), (0, 5, 2, 1), (28, 0, 0, 8), tuple(range(1, 17))])
def test_megatron_layout_string_round_trips(layout):
    s = megatron_layout(layout)
    assert s.startswith("E") and s.endswith("L") and s.count("|") == len(layout) - 1
    assert layout_from_megatron(s, "x") == layout


def test_megatron_layout_reads_megatrons_own_spellings():
    # the docstring form of Megatron-Core's PipelineParallelLayerLayout.parse_str_to_list, without its MTP stage
    assert layout_from_megatron("Ettt|(tt|)*3,tL", "k") == (3, 2, 2, 2, 1)
    assert layout_from_megatron("Et*3|t*2L", "k") == (3, 2)
    assert layout_from_megatron([["embedding", "decoder"], ["decoder", "decoder", "loss"]], "k") == (1, 2)
    for bad, why in (("Ettt|(tt|)*29,m|L", "MTP"), ("tE|tL", "must open"), ("Et|tLt", "close the last"),
                     ("Ex|tL", "not one of"), (5, "layout string"), ("E(t*5000|)*5000L", "expands past")):
        with pytest.raises(ValueError, match=why):
            layout_from_megatron(bad, "k")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["sft-moe-megatron-deepep-overlap", "sft-8b-pp2-layout-megatron",
                                  "sft-8b-pp2-vpp2-layout", "grpo-fp8-rollout-host-swap", "sft-packed-flash-attn-loss",
                                  "sft-chunked-torchtune-loss", "sft-expandable-segments", "sft-mtp",
                                  "sft-padding-mask-sdpa", "sft-qlora-fp32-base-gemms"])
def test_every_new_setting_is_carried_or_named(name, target):
    """A new field the file does not carry is lost, and a note says so naming the field (not the generic
    'reads back as' line for the framework settings)."""
    card = CARDS[name]() if name in CARDS else load_card_dict(
        {"model": {"id": "deepseek-ai/DeepSeek-V3", "mtp": True}, "hardware": {"gpu": "h100-sxm", "nodes": 32},
         "parallel": {"strategy": "zero1", "tensor_parallel": 8, "sequence_parallel": True, "expert_parallel": 32},
         "precision": {"master_weights": "fp32", "optimizer_states": "fp32", "grads": "fp32"}})
    assert_lost_fields_named(card, target, NEW_FIELDS)


def test_verl_writes_the_megatron_keys_and_reads_them_back():
    card = CARDS["sft-moe-megatron-deepep-overlap"]()
    e = export(card, "verl")
    o = e.data["overrides"]
    otc = "+engine.override_transformer_config"
    for want in (f"{otc}.moe_token_dispatcher_type=flex", f"{otc}.moe_enable_deepep=True",
                 f"{otc}.overlap_moe_expert_parallel_comm=True"):
        assert want in o
    back = read_back(card, e).parallel
    assert (back.tensor_parallel_impl.value, back.moe_dispatcher.value, back.moe_comm_overlap) == ("megatron", "deepep", True)
    # tp_comm_overlap: verl never sets up Transformer Engine's userbuffers; said, lost, not written
    assert not any("tp_comm_overlap" in x for x in o) and "parallel.tp_comm_overlap" in e.lost
    lay = export(CARDS["sft-8b-pp2-vpp2-layout"](), "verl")
    assert f"{otc}.pipeline_model_parallel_layout='Et*8|t*10|t*10|t*8L'" in lay.data["overrides"]
    assert "engine.virtual_pipeline_model_parallel_size=2" in lay.data["overrides"]
    assert read_back(CARDS["sft-8b-pp2-vpp2-layout"](), lay).parallel.pipeline_layout == (8, 10, 10, 8)


VERL_RECIPE = """#!/bin/sh
python3 -m verl.trainer.main_ppo model_engine=megatron \\
    actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B \\
    actor_rollout_ref.actor.strategy=megatron \\
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \\
    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2 \\
    actor_rollout_ref.actor.megatron.expert_model_parallel_size=4 \\
    actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=1 \\
    +actor_rollout_ref.actor.megatron.override_transformer_config.moe_enable_deepep=True \\
    +actor_rollout_ref.actor.megatron.override_transformer_config.moe_token_dispatcher_type=flex \\
    +actor_rollout_ref.actor.megatron.override_transformer_config.tp_comm_overlap=True \\
    '+actor_rollout_ref.actor.megatron.override_transformer_config.pipeline_model_parallel_layout="Et*20|t*28L"' \\
    actor_rollout_ref.rollout.quantization=fp8 \\
    trainer.n_gpus_per_node=8 trainer.nnodes=2
"""


def test_verl_recipe_keys_are_read():
    par = import_text(VERL_RECIPE, "verl").card["parallel"]
    assert par["moe_dispatcher"] == "deepep" and par["tp_comm_overlap"] is True
    assert par["pipeline_layout"] == [20, 28] and par["tensor_parallel_impl"] == "megatron"
    assert import_text(VERL_RECIPE, "verl").card["rollout"]["quantization"] == "fp8"
    # allgather is a card dispatcher (Megatron-Core MoEAllGatherTokenDispatcher); with moe_enable_deepep it is refused
    gather = VERL_RECIPE.replace("dispatcher_type=flex", "dispatcher_type=allgather")
    with pytest.raises(TrainfitError, match="moe_enable_deepep true needs moe_token_dispatcher_type flex"):
        import_text(gather, "verl")
    gather = gather.replace("moe_enable_deepep=True", "moe_enable_deepep=False")
    assert import_text(gather, "verl").card["parallel"]["moe_dispatcher"] == "allgather"
    with pytest.raises(TrainfitError, match="allowed: alltoall, allgather, flex"):
        import_text(gather.replace("dispatcher_type=allgather", "dispatcher_type=alltoall_seq"), "verl")
    with pytest.raises(TrainfitError, match="allowed: fp8"):
        import_text(VERL_RECIPE.replace("quantization=fp8", "quantization=torchao"), "verl")


NEMO_RECIPE = """defaults: grpo_math_1B.yaml
policy:
  model_name: Qwen/Qwen3-30B-A3B
  megatron_cfg:
    enabled: true
    tensor_model_parallel_size: 2
    sequence_parallel: true
    pipeline_model_parallel_size: 2
    expert_model_parallel_size: 8
    moe_token_dispatcher_type: flex
    moe_enable_deepep: true
    model_overrides:
      pipeline_model_parallel_layout: [[embedding, decoder, decoder], [decoder, loss]]
      tp_comm_overlap: true
      overlap_moe_expert_parallel_comm: true
  generation:
    vllm_cfg:
      precision: fp8
cluster:
  gpus_per_node: 8
  num_nodes: 2
"""


def test_nemo_rl_writes_and_reads_the_megatron_keys():
    got = import_text(NEMO_RECIPE, "nemo-rl").card
    par = got["parallel"]
    assert (par["moe_dispatcher"], par["pipeline_layout"], par["tp_comm_overlap"], par["moe_comm_overlap"],
            par["tensor_parallel_impl"]) == ("deepep", [2, 1], True, True, "megatron")
    assert got["rollout"]["quantization"] == "fp8" and got["roles"]["reference"] == "host_swap"
    card = CARDS["sft-8b-pp2-layout-megatron"]()
    e = export(card, "nemo-rl")
    m = yaml.safe_load(e.text)["policy"]["megatron_cfg"]
    # the card's pipeline_outputs_deallocated (false) is written: NeMo RL's AutoBridge provider would default it true
    assert m["model_overrides"] == {"deallocate_pipeline_outputs": False, "pipeline_model_parallel_layout": "Et*16|t*20L"}
    assert read_back(card, e).parallel.pipeline_layout == (16, 20)
    moe = export(CARDS["sft-moe-megatron-deepep-overlap"](), "nemo-rl")
    m = moe.data["config"]["policy"]["megatron_cfg"]
    assert (m["moe_token_dispatcher_type"], m["moe_enable_deepep"]) == ("flex", True)
    # NeMo RL's training step has no combined-1F1B path (no overlap_moe_expert_parallel_comm use at 7ea279a)
    assert "parallel.moe_comm_overlap" in moe.lost
    assert any(n.startswith("parallel.moe_comm_overlap: nemo-rl") for n in moe.notes)


def test_torchtitan_layout_and_deepep():
    card = CARDS["sft-8b-pp2-vpp2-layout"]()
    e = export(card, "torchtitan")
    par = tomllib.loads(e.text)["parallelism"]
    parts = par["module_fqns_per_model_part"]
    assert [len([m for m in p if m.startswith("layers.")]) for p in parts] == [8, 10, 10, 8]
    assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "output"]
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    back = read_back(card, e).parallel
    assert (back.pipeline_layout, back.virtual_stages) == ((8, 10, 10, 8), 2)
    moe = export(CARDS["sft-moe-megatron-deepep-overlap"](), "torchtitan")
    assert tomllib.loads(moe.text)["parallelism"]["expert_parallel_comm_backend"] == "deepep"
    assert "parallel.moe_dispatcher" not in moe.lost
    bad = e.text.replace('"layers.9", ', "")
    with pytest.raises(TrainfitError, match="consecutive layers"):
        import_text(bad, "torchtitan")


@pytest.mark.parametrize("payload", ["x$(touch MARK)", "a'b\"c\nimport os", "${oc.env:HOME}"])
def test_bf16_module_names_never_reach_a_file(payload):
    """rollout.quantization_bf16_modules is the one new free-text field: no exporter writes it (it is said)."""
    card = load_card_dict({"model": "Qwen/Qwen3-8B", "method": "grpo", "hardware": {"gpu": "h100-sxm"},
                           "rollout": {"quantization": "fp8", "quantization_bf16_modules": [payload]}})
    for target in TARGETS:
        try:
            e = export(card, target)
        except ExportError:
            continue
        assert payload not in e.text
        assert any("quantization_bf16_modules" in n for n in e.notes)


@pytest.mark.parametrize(("target", "written"), [("trl", "packing=True"), ("openrlhf", "--ds.packing_samples"),
                                                  ("nemo-rl", "sequence_packing:\n    enabled: true")])
def test_packing_is_written_where_the_trainer_has_it(target, written):
    """TRL's SFTConfig packing / OpenRLHF's --ds.packing_samples / NeMo RL's sequence_packing pack whole samples with
    per-sample attention; the
    mean sample length is the data's: lost and said, and the import says how to give it back."""
    card = CARDS["sft-packed-flash-attn-loss"]()
    e = export(card, target)
    assert written in e.text
    assert "batch.packed_sample_tokens" in e.lost
    assert any(n.startswith("batch.packed_sample_tokens 512, batch.packed_sample_length_cv 0.8: written as") for n in e.notes)
    companion = ("accelerate", export(card, "accelerate").text) if target == "trl" else None
    back = import_text(e.text, target, companion=companion)
    assert any("batch.packed_sample_tokens=N" in n for n in back.notes)
    plain = export(CARDS["sft-chunked-torchtune-loss"](), target)
    assert written not in plain.text


LAYOUT_CARD = """model: Qwen/Qwen3-8B
hardware: {gpu: h100-sxm, gpus_per_node: 8}
parallel: {strategy: zero1, tensor_parallel: 2, sequence_parallel: true, tensor_parallel_impl: megatron,
           pipeline_parallel: 2, pipeline_layout: [16, 20], tp_comm_overlap: true}
precision: {master_weights: fp32, optimizer_states: fp32, grads: fp32}
batch: {micro_batch_size: 1, grad_accum: 8, seq_len: 4096}
attention: flash
"""

LAYOUT_NEMO_RL_OUT = '# NeMo RL config written by trainfit export (keys: NVIDIA-NeMo/RL 7ea279a examples/configs/sft.yaml)\n# save it in examples/configs/ (defaults: resolves next to this file)\n# launch: uv run examples/run_sft.py --config nemo_rl.yaml\ndefaults: sft.yaml\npolicy:\n  model_name: Qwen/Qwen3-8B\n  precision: bfloat16\n  train_global_batch_size: 16\n  train_micro_batch_size: 1\n  dtensor_cfg:\n    enabled: false\n  megatron_cfg:\n    enabled: true\n    activation_checkpointing: true\n    tensor_model_parallel_size: 2\n    expert_tensor_parallel_size: 1\n    expert_model_parallel_size: 1\n    pipeline_model_parallel_size: 2\n    context_parallel_size: 1\n    sequence_parallel: true\n    recompute_granularity: full\n    optimizer:\n      use_distributed_optimizer: true\n      optimizer_cpu_offload: false\n      optimizer_offload_fraction: 0.0\n    distributed_data_parallel_config:\n      use_custom_fsdp: false\n      grad_reduce_in_fp32: true\n      overlap_param_gather: false\n    model_overrides:\n      deallocate_pipeline_outputs: false\n      pipeline_model_parallel_layout: Et*16|t*20L\n  max_total_sequence_length: 4096\ncluster:\n  gpus_per_node: 8\n  num_nodes: 1\n'

# the file is NeMo RL's: it reads back with the nemo-rl preset, launched under Ray (the card has neither)
LAYOUT_NEMO_RL_ERR = "notes (4): settings nemo-rl does not take as given\n  - parallel.tp_comm_overlap: nemo-rl has no setting that sets up Transformer Engine's userbuffers (Megatron-Core --tp-comm-overlap); not written, the tensor-parallel collectives run unhidden\n  - hardware.gpu: the card has 'h100-sxm'; the nemo-rl file reads back as 'a100-40gb'\n  - loop.launcher: the card has 'torchrun'; the nemo-rl file reads back as 'ray'\n  - preset: the card has None; the nemo-rl file reads back as 'nemo-rl'\nnot carried by the nemo-rl file (4): hardware.gpu, parallel.tp_comm_overlap, loop.launcher, preset\n  to plan the file with this card's other settings: trainfit import FILE --from nemo-rl --base CARD\n  to plan the imported file as this card: trainfit import FILE --from nemo-rl --set hardware.gpu=h100-sxm --set parallel.tp_comm_overlap=true --set loop.launcher=torchrun --set preset=null\n"


def test_cli_whole_output_layout_card_to_nemo_rl(tmp_path, capsys):
    """`trainfit export CARD --to nemo-rl`, whole stdout (the file) and stderr (notes, lost keys, the --set line):
    the layout reaches model_overrides, tp_comm_overlap is said once and listed."""
    from trainfit.cli.main import main

    card = tmp_path / "card.yaml"
    card.write_text(LAYOUT_CARD)
    assert main(["export", str(card), "--to", "nemo-rl"]) == 0
    got = capsys.readouterr()
    assert got.out == LAYOUT_NEMO_RL_OUT
    assert got.err == LAYOUT_NEMO_RL_ERR
