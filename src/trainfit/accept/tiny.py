"""The default policy: a tiny random Qwen3 with a tokenizer trained locally on the task texts."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from trainfit.accept.tasks import load_tasks

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>", "<think>", "</think>"]
VOCAB_SIZE = 512


def _corpus() -> list[str]:
    out = []
    for t in load_tasks():
        out += [t.prompt, t.correct, t.wrong, t.hidden_tests, *t.files.values()]
    out += ['{"name": "read_file", "arguments": {"path": "solution.py"}}', "visible tests passed", "Done."]
    return out * 4


def build_tokenizer():
    """Byte-level BPE trained on the task texts, with the Qwen3 chat template from TRL."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   padding_side="left")
    fast.add_special_tokens({"additional_special_tokens": SPECIALS[3:]})
    fast.chat_template = resources.files("trl").joinpath("chat_templates/qwen3.jinja").read_text()
    return fast


def build_model(tokenizer, seed: int = 0):
    """Qwen3, hidden 64, 2 layers, fp32, random init (seeded)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                      tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    return Qwen3ForCausalLM(cfg)


def save_default(out_dir: Path, seed: int = 0) -> Path:
    tok = build_tokenizer()
    model = build_model(tok, seed)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return out_dir
