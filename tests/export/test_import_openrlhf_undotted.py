"""OpenRLHF 0.11's options are grouped (--ds.zero_stage, --actor.model_name_or_path); before them it spelled the same settings
undotted (--zero_stage, --pretrain). The importer read none of an old script's options and said nothing, so its card
carried the defaults (ZeRO-2, micro-batch 1, no checkpointing) in place of what the script gave: now a note names them."""

from __future__ import annotations

from trainfit.export.importers import read_openrlhf

OLD = ("deepspeed --module openrlhf.cli.train_dpo --pretrain Qwen/Qwen2.5-7B-Instruct --micro_train_batch_size 1"
       " --train_batch_size 64 --max_len 2048 --zero_stage 3 --bf16 --ref_offload --gradient_checkpointing\n")


def test_an_old_scripts_options_are_named_as_not_read():
    notes = " ".join(read_openrlhf(OLD).notes)
    assert "not read: --bf16, --gradient_checkpointing, --max_len, --micro_train_batch_size, --pretrain," in notes
    assert "--zero_stage" in notes and "0.11 grouped flags" in notes and "--set the fields they meant" in notes


def test_dotted_options_and_the_launchers_own_say_nothing():
    new = ("deepspeed --num_nodes 1 --num_gpus 8 --module openrlhf.cli.train_sft --model.model_name_or_path"
           " Qwen/Qwen2.5-7B --ds.zero_stage 3 --train.micro_batch_size 2\n")
    imported = read_openrlhf(new)
    assert not any("not read:" in n for n in imported.notes)
    assert imported.card["parallel"]["strategy"] == "zero3"


def test_an_undotted_option_ends_the_list_before_it():
    # --ds.lora.target_modules takes several words; a later undotted option and its value were read as two more
    # target modules
    script = ("deepspeed --module openrlhf.cli.train_sft --model.model_name_or_path Qwen/Qwen2.5-7B"
              " --ds.lora.rank 16 --ds.lora.target_modules q_proj v_proj --seed 42\n")
    imported = read_openrlhf(script)
    assert imported.card["lora"]["targets"] == ["q_proj", "v_proj"]
    assert any("not read: --seed" in n for n in imported.notes)
