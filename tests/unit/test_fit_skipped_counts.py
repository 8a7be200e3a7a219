"""A card count with nothing to plan is listed under ``skipped`` with its reason (``fit_search.empty_cell_reason``),
as a GPU kind the card cannot run on is, in place of vanishing from the output: 1 and 3 cards hold no tensor
parallel 2, and a global batch of 2 sequences does not split over 3 data-parallel ranks. Before, those counts were
simply absent (``skipped`` empty)."""

import json

from trainfit.cli.main import main
from trainfit.search import fit

SEQ = {"micro_batch_size": 1, "grad_accum": 2, "seq_len": 1024}


def test_counts_that_cannot_hold_the_pinned_tensor_parallel_are_listed():
    base = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "full", "batch": SEQ,
            "parallel": {"tensor_parallel": 2, "sequence_parallel": True}, "hardware": {"gpus_per_node": 2}}
    pinned = frozenset({"model", "method", "scope", "batch.seq_len", "parallel.tensor_parallel",
                        "parallel.sequence_parallel", "precision.optimizer", "loss.chunked", "parallel.offload"})
    result = fit(base, gpus=["a100-40gb"], max_gpus=4, pinned=pinned, workers=1)
    assert {r.gpus for r in result.rows} == {2, 4}
    assert [(s.gpu, s.gpus) for s in result.skipped] == [("a100-40gb", 1), ("a100-40gb", 3)]
    assert all(s.reason.startswith("no model-parallel layout of") for s in result.skipped)


def test_a_count_the_global_batch_does_not_split_over_is_listed_in_the_cli(capsys):
    rc = main(["fit", "--gpu", "a100-40gb", "--max-gpus", "4", "--global-batch", "2", "--json",
               "--set", "model=Qwen/Qwen3-0.6B", "--set", "scope=lora", "--set", "batch.seq_len=1024",
               "--set", "loss.chunked=true", "--set", "precision.optimizer=adamw", "--set", "parallel.offload=none",
               "--set", "parallel.gradient_checkpointing=true", "--set", "parallel.strategy=fsdp"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    obj = json.loads(out)
    assert {r["gpus"] for r in obj["rows"]} == {1, 2, 4}
    [skip] = obj["skipped"]
    assert skip["gpu"] == "a100-40gb" and skip["gpus"] == 3
    assert skip["reason"].startswith("the global batch of 2 sequences does not split")


def test_the_reason_names_what_the_user_can_change_when_accumulation_is_chosen_per_row(tmp_path, capsys):
    # a card file: its accumulation is chosen per row (fit_search.DERIVED_FROM_GLOBAL_BATCH), so batch.grad_accum is
    # no remedy; --global-batch and the card count are (before: "change batch.grad_accum or --global-batch")
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\nscope: lora\nbatch: {micro_batch_size: 1, grad_accum: 2, seq_len: 1024}\n"
                    "loss: {chunked: true}\nprecision: {optimizer: adamw}\n"
                    "parallel: {offload: none, gradient_checkpointing: true, strategy: fsdp}\n")
    rc = main(["fit", str(card), "--gpu", "a100-40gb", "--max-gpus", "4", "--global-batch", "2", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    [skip] = json.loads(out)["skipped"]
    assert skip["gpus"] == 3
    assert "batch.grad_accum" not in skip["reason"]
    assert "--global-batch" in skip["reason"] and "card count" in skip["reason"]


def test_the_reason_names_a_pinned_accumulation(capsys):
    # pinned by --set, the accumulation is held: then it is one of the things to change
    rc = main(["fit", "--gpu", "a100-40gb", "--max-gpus", "4", "--global-batch", "4", "--json",
               "--set", "model=Qwen/Qwen3-0.6B", "--set", "scope=lora", "--set", "batch.seq_len=1024",
               "--set", "batch.grad_accum=2", "--set", "batch.micro_batch_size=1",
               "--set", "loss.chunked=true", "--set", "precision.optimizer=adamw", "--set", "parallel.offload=none",
               "--set", "parallel.gradient_checkpointing=true", "--set", "parallel.strategy=fsdp"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    skipped = {s["gpus"]: s["reason"] for s in json.loads(out)["skipped"]}
    assert "the pinned batch.grad_accum" in skipped[1]
