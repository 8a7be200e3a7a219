"""``import --from trl`` reads the script shape TRL's own docs use: the config object under any name, passed to the
trainer call as ``args=``, the model from the trainer call. TRL's SFT quick start is ``trainer = SFTTrainer(model=
"Qwen/Qwen3-0.6B", train_dataset=load_dataset(...))`` then ``trainer.train()`` (huggingface/trl
docs/source/sft_trainer.md l.17-26 @f2cd57710ae345ea6428ae95363267fcf38a3dc8); its GRPO server example is
``training_args = GRPOConfig(per_device_train_batch_size=4, ...)`` then ``trainer = GRPOTrainer(model=
"Qwen/Qwen2.5-72B", args=training_args, ...)`` (docs/source/grpo_trainer.md l.380-391, same commit); an inline config
is ``args=SFTConfig(...)`` (sft_trainer.md l.273-281). Only ``args = <Config>(...)`` with nothing else imported
before: ``trainer = SFTTrainer(...)`` was refused ("... is not read"). Statements that are not read are skipped and
listed in a note; the file is still never run (``ast`` only). The docs' GRPO server example sits in ``def main()``
under ``if __name__ == "__main__":`` and computes ``vllm_server_host`` from its arguments: both are read, the host as
a not-read note; a non-literal value of a key the plan reads is still refused by name."""

from __future__ import annotations

import pytest

from trainfit.errors import InputError
from trainfit.export.importers import import_text

QUICK_START = '''from trl import SFTTrainer
from datasets import load_dataset

trainer = SFTTrainer(
    model="Qwen/Qwen3-0.6B",
    train_dataset=load_dataset("trl-lib/Capybara", split="train"),
)
trainer.train()
'''

NAMED = '''from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

training_args = SFTConfig(per_device_train_batch_size=4, gradient_accumulation_steps=8, bf16=True, max_length=4096)
dataset = load_dataset("trl-lib/Capybara", split="train")

trainer = SFTTrainer(
    model="Qwen/Qwen3-8B",
    args=training_args,
    train_dataset=dataset,
)
trainer.train()
'''

TWO_CONFIGS = '''from trl import DPOConfig, SFTConfig, SFTTrainer

warmup_args = DPOConfig(per_device_train_batch_size=1)
sft_args = SFTConfig(per_device_train_batch_size=2, gradient_accumulation_steps=4)
trainer = SFTTrainer(model="Qwen/Qwen3-8B", args=sft_args)
'''

INLINE = '''from trl import GRPOConfig, GRPOTrainer
from peft import LoraConfig

trainer = GRPOTrainer(
    "Qwen/Qwen3-8B",
    args=GRPOConfig(per_device_train_batch_size=8, num_generations=8, max_completion_length=1024),
    reward_funcs=accuracy_reward,
    peft_config=LoraConfig(r=16, lora_alpha=32),
)
trainer.train()
'''


def test_trl_quick_start_imports_with_trainer_defaults():
    imp = import_text(QUICK_START, "trl")
    assert imp.card["method"] == "sft" and imp.card["model"] == "Qwen/Qwen3-0.6B"
    said = " ".join(imp.notes)
    assert "no config passed to SFTTrainer: TRL's SFTConfig defaults" in said, said
    assert "line 8 trainer.train()" in said, said


def test_config_under_any_name_is_read():
    imp = import_text(NAMED, "trl")
    assert imp.card["model"] == "Qwen/Qwen3-8B" and imp.card["method"] == "sft"
    assert imp.card["batch"] == {"micro_batch_size": 4, "grad_accum": 8, "seq_len": 4096}
    assert imp.card["precision"]["compute"] == "bf16"
    said = " ".join(imp.notes)
    assert "not read" in said and "line 5 dataset = load_dataset(" in said and "line 12 trainer.train()" in said, said


def test_the_config_passed_as_args_wins_among_several():
    imp = import_text(TWO_CONFIGS, "trl")
    assert imp.card["method"] == "sft" and imp.card["batch"] == {"micro_batch_size": 2, "grad_accum": 4}
    assert any("line 3 warmup_args = DPOConfig(...)" in n for n in imp.notes), imp.notes


def test_inline_config_positional_model_and_inline_peft():
    imp = import_text(INLINE, "trl")
    assert imp.card["method"] == "grpo" and imp.card["model"] == "Qwen/Qwen3-8B"
    assert imp.card["scope"] == "lora" and imp.card["lora"]["rank"] == 16
    assert imp.card["rollout"]["response_len"] == 1024


@pytest.mark.parametrize("text, fragment", [
    ("from trl import SFTConfig, DPOConfig\na = SFTConfig()\nb = DPOConfig()\n",
     "several TRL configs (a line 2, b line 3) and no trainer call passes one as args="),
    ("from trl import SFTConfig, DPOTrainer\nargs = SFTConfig()\ntrainer = DPOTrainer(model='m', args=args)\n",
     "DPOTrainer is passed a SFTConfig"),
    ("from trl import SFTConfig, SFTTrainer\nargs = SFTConfig(per_device_train_batch_size=n)\n"
     "trainer = SFTTrainer(model='m', args=args)\n", "args.per_device_train_batch_size: not a literal value"),
    ("import os\nos.system('touch MARK')\n", "no TRL config"),
    ("from trl import SFTTrainer\ntrainer = SFTTrainer(model='m', args=cfg)\n", "args=cfg: no cfg = <TRL config>(...)"),
    ("from trl import SFTTrainer\na = SFTTrainer(model='m')\nb = SFTTrainer(model='n')\n", "several trainer calls"),
])
def test_refusals(text, fragment):
    with pytest.raises(InputError, match="--from trl") as exc:
        import_text(text, "trl")
    assert fragment in str(exc.value), str(exc.value)


def test_a_model_object_is_said_not_guessed():
    text = ('from transformers import AutoModelForCausalLM\nfrom trl import SFTConfig, SFTTrainer\n'
            'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-8B")\n'
            'trainer = SFTTrainer(model=model, args=SFTConfig())\n')
    imp = import_text(text, "trl")
    assert "model" not in imp.card
    assert any("model=model: not a string literal" in n for n in imp.notes), imp.notes


def test_nothing_in_the_file_runs(tmp_path):
    mark = tmp_path / "MARK"
    text = (f"import os\nos.system('touch {mark}')\nfrom trl import SFTConfig, SFTTrainer\n"
            f"args = SFTConfig()\ntrainer = SFTTrainer(model='m', args=args)\n")
    imp = import_text(text, "trl")
    assert not mark.exists() and any("line 2 os.system(" in n for n in imp.notes)


# TRL's GRPO server example (huggingface/trl docs/source/grpo_trainer.md l.380-391
# @f2cd57710ae345ea6428ae95363267fcf38a3dc8): the config and the trainer call inside ``def main():``, run under
# ``if __name__ == "__main__": main()``, one config value computed from the script's own arguments
DOC_MAIN = '''import argparse

from datasets import load_dataset
from trl import GRPOTrainer, GRPOConfig
from trl.rewards import accuracy_reward

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vllm_server_host", type=str, default="", help="The server IP")
    args = parser.parse_args()

    dataset = load_dataset("trl-lib/DeepMath-103K", split="train")

    training_args = GRPOConfig(
        per_device_train_batch_size=4,
        use_vllm=True,
        vllm_mode="server",
        vllm_server_host=args.vllm_server_host.replace("ip-", "").replace("-", "."),  # from ip-X-X-X-X to X.X.X.X
    )

    trainer = GRPOTrainer(
        model="Qwen/Qwen2.5-72B",
        args=training_args,
        reward_funcs=accuracy_reward,
        train_dataset=dataset
    )
    trainer.train()

if __name__=="__main__":
    main()
'''


def test_the_docs_main_function_is_read_and_a_computed_host_is_a_note():
    imp = import_text(DOC_MAIN, "trl")
    assert imp.card["method"] == "grpo" and imp.card["model"] == "Qwen/Qwen2.5-72B"
    assert imp.card["batch"]["micro_batch_size"] == 4
    assert imp.card["rollout"]["engine"] == "vllm" and imp.card["rollout"]["placement"] == "split"
    assert any("args.vllm_server_host (line 18, not a literal value)" in n for n in imp.notes), imp.notes
    assert any("line 10 args = parser.parse_args()" in n and "line 27 trainer.train()" in n for n in imp.notes)


def test_the_main_block_itself_is_read_and_an_uncalled_function_is_not():
    guarded = ("from trl import SFTConfig, SFTTrainer\nif '__main__' == __name__:\n"
               "    args = SFTConfig(per_device_train_batch_size=3)\n    trainer = SFTTrainer(model='m', args=args)\n")
    assert import_text(guarded, "trl").card["batch"]["micro_batch_size"] == 3
    uncalled = ("from trl import SFTConfig, SFTTrainer\ndef helper():\n"
                "    args = SFTConfig(per_device_train_batch_size=3)\n    trainer = SFTTrainer(model='m', args=args)\n")
    with pytest.raises(InputError, match="no TRL config"):
        import_text(uncalled, "trl")


def test_a_computed_value_the_plan_reads_is_still_refused_by_name():
    text = DOC_MAIN.replace("per_device_train_batch_size=4", "per_device_train_batch_size=args.bs")
    with pytest.raises(InputError, match=r"args\.per_device_train_batch_size: not a literal value \(line 15\)"):
        import_text(text, "trl")


def test_nothing_in_main_runs(tmp_path):
    mark = tmp_path / "MARK"
    text = DOC_MAIN.replace("    parser = argparse", f"    __import__('os').system('touch {mark}')\n    parser = argparse")
    import_text(text, "trl")
    assert not mark.exists()
