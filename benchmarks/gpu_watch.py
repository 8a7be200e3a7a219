"""trainfit.watch on real CUDA steps: a transformers Trainer step and a TRL GRPO step, records as data.

    python benchmarks/gpu_watch.py --out gpu_out/watch            # on a CUDA machine (a few minutes)
    python benchmarks/gpu_watch.py --out /tmp/w --device cpu --dry-run   # the same code, tiny, on the CPU

Writes ``sft.record.yaml`` (a Qwen3-shaped model, hidden 1024, 8 layers, vocabulary 151,936, random
bf16 weights, batch 2 x 2048, AdamW fused, 6 steps, no checkpointing: the card is written from the
same numbers) and ``grpo.record.yaml`` (the acceptance run's tiny policy under TRL's GRPOTrainer with
transformers generation, a reference model (beta 0.04) and each generation used for two updates
(num_iterations 2), so the record has every GRPO phase: rollout, reward, reference and old-policy
log-probs, forward, backward, optimizer step; 4 steps), then times ``benchmarks/watch_overhead.py``
on the device (the custom loop, TRL SFT and TRL GRPO with and without the callback:
``overhead.md``). Commit the directory under ``benchmarks/results/watch/``; ``trainfit compare``
prints each record, ``trainfit calibrate`` reads them (their measured reserved bytes fit the replay
scale of ``h200 default/single``; docs/calibration.md).

On a lent device: ``bash benchmarks/gpu_env.sh`` (if the wheels are not there), then this script;
about 3 minutes on an H200, the overhead runs most of it. ``--dry-run --device cpu`` is the test
that it runs (tests need no GPU).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

SFT_CONFIG = {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
              "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
              "max_position_embeddings": 40960, "tie_word_embeddings": False}
DRY = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}


def sft(out: Path, device: str, dry: bool) -> None:
    import torch
    from datasets import Dataset
    from transformers import Qwen3Config, Qwen3ForCausalLM, Trainer, TrainingArguments

    import trainfit

    cfg = {**SFT_CONFIG, **(DRY if dry else {})}
    batch, seq, steps = (2, 64, 3) if dry else (2, 2048, 6)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in cfg.items() if k != "model_type"})).to(dtype)
    ids = torch.randint(0, cfg["vocab_size"], (batch * steps, seq))
    ds = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    card = {"model": {"id": "qwen3-h1024-L8", "config": cfg}, "method": "sft", "scope": "full",
            "precision": {"weights": "fp32" if dtype == torch.float32 else "bf16",
                          "compute": "fp32" if dtype == torch.float32 else "bf16", "optimizer_impl": "fused"},
            "hardware": {"gpu": "h200", "gpus_per_node": 1}, "attention": "sdpa",
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": batch, "seq_len": seq}}
    args = TrainingArguments(output_dir=str(out / "sft"), per_device_train_batch_size=batch, max_steps=steps,
                             use_cpu=device == "cpu", report_to="none", logging_steps=1, save_strategy="no",
                             disable_tqdm=True, optim="adamw_torch_fused" if device != "cpu" else "adamw_torch",
                             bf16=dtype == torch.bfloat16, learning_rate=1e-5)
    w = trainfit.watch(card, record=out / "sft.record.yaml", device=device)
    Trainer(model=model, args=args, train_dataset=ds, callbacks=[w]).train()
    print(w.summary())


def grpo(out: Path, device: str) -> None:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    import trainfit
    from trainfit.accept.tiny import save_default
    from trainfit.accept.train import accept_card

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    d = save_default(out / "grpo_model")
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    card = accept_card(model.config.to_dict(), micro_batch=4, seq_len=64)
    card["roles"] = {"kl_coef": 0.04}  # a reference model: the ref log-prob pass
    card["rollout"]["num_iterations"] = 2  # two updates per generation: the old-policy log-prob pass
    w = trainfit.watch(card, record=out / "grpo.record.yaml", device=device)
    args = GRPOConfig(output_dir=str(out / "grpo"), use_cpu=device == "cpu", report_to="none",
                      per_device_train_batch_size=4, num_generations=4, max_steps=4, max_completion_length=32,
                      logging_steps=1, save_strategy="no", disable_tqdm=True, beta=0.04, num_iterations=2, bf16=False)
    GRPOTrainer(model=model, processing_class=tok, args=args,
                reward_funcs=[lambda completions, **k: [float(len(c)) for c in completions]],
                train_dataset=Dataset.from_list([{"prompt": "def add(a, b):"}] * 16), callbacks=[w]).train()
    print(w.summary())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes (with --device cpu: the CPU path)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    sft(a.out, a.device, a.dry_run)
    grpo(a.out, a.device)
    bench = [sys.executable, str(HERE / "watch_overhead.py"), "--device", a.device, "--out", str(a.out / "overhead.md")]
    if a.dry_run:
        bench += ["--steps", "3", "--repeats", "1", "--runs", "sft"]
    res = subprocess.run(bench, capture_output=True, text=True)
    print(res.stdout)
    if res.returncode != 0:
        print(res.stderr[-4000:], file=sys.stderr)
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
