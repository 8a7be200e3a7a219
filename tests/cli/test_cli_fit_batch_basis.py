"""`trainfit fit` compares steps that do the same work, and keeps the card's scope.

1. The global batch (sequences per optimizer step) is held across the rows, from --global-batch, else from the card
   as written (micro-batch x accumulation x data-parallel ranks): a card file's ``batch`` section no longer drops it
   (fit_search.fit read ``"batch" in pinned`` as "no global batch", so a copy of the default card ranked a TP-8
   row carrying 2,048 tokens a step against a 5-GPU data-parallel row carrying 10,240, and --global-batch did
   nothing). With batch.micro_batch_size and batch.grad_accum both pinned on the command line the rows carry
   different batches: they are ranked per token, and the output says so.
2. The card's scope is what the user asked to train: the default card (Qwen3-8B full SFT) stays full SFT with no
   CARD argument as with the same card as a file; --search-scope opens it (and says so)."""

import json
import shutil
from importlib import resources

import pytest

from trainfit.cli.main import main

KINDS = ["--gpu", "a100-80gb,h100-sxm", "--max-gpus", "8", "--price", "a100-80gb=1.2USD", "--price", "h100-sxm=3USD"]
SEQ = 2048  # src/trainfit/cards/default.yaml: batch: {micro_batch_size: 1, seq_len: 2048, grad_accum: 1}


def _card(tmp_path):
    path = tmp_path / "default_copy.yaml"
    shutil.copy(resources.files("trainfit.cards").joinpath("default.yaml"), path)
    return path


def _json(argv, capsys):
    rc = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def _data_parallel(r):
    p = r["parallel"]
    return r["gpus"] // (p["tensor_parallel"] * p["pipeline_parallel"] * p["context_parallel"])


def _tokens_per_step(r):
    return r["tokens_per_s"] * r["step_seconds"]


def test_a_card_file_holds_its_global_batch_across_rows(tmp_path, capsys):
    # default.yaml: 1 sequence x 1 accumulation step x 8 GPUs = 8 sequences per optimizer step
    obj = _json(["fit", str(_card(tmp_path)), *KINDS, "--steps", "1000"], capsys)
    assert obj["batch_basis"] == {"basis": "global_batch", "sequences_per_step": 8, "tokens_per_step": 8 * SEQ}
    fitting = [r for r in obj["rows"] if r["fits"]]
    assert len(fitting) >= 4
    for r in fitting:
        b = r["knobs"]["batch"]
        assert b["micro_batch_size"] == 1  # the card's micro-batch is held; its accumulation is chosen per row
        assert b["micro_batch_size"] * b["grad_accum"] * _data_parallel(r) == 8
        assert _tokens_per_step(r) == pytest.approx(8 * SEQ, rel=1e-9)
    # 5 and 7 data-parallel ranks cannot split 8 sequences: no row, each count listed with the reason
    assert not [r for r in obj["rows"] if r["gpus"] in (5, 7) and _data_parallel(r) == r["gpus"]]
    skipped = {(s["gpu"], s["gpus"]): s["reason"] for s in obj["skipped"]}
    assert "the global batch of 8 sequences does not split" in skipped[("a100-80gb", 5)]


def test_global_batch_option_is_held_with_a_card_file(tmp_path, capsys):
    obj = _json(["fit", str(_card(tmp_path)), *KINDS, "--global-batch", "16"], capsys)
    assert obj["batch_basis"]["sequences_per_step"] == 16
    for r in obj["rows"]:
        b = r["knobs"]["batch"]
        assert b["micro_batch_size"] * b["grad_accum"] * _data_parallel(r) == 16
        if r["fits"]:
            assert _tokens_per_step(r) == pytest.approx(16 * SEQ, rel=1e-9)


def test_the_text_and_the_html_report_state_the_held_global_batch(tmp_path, capsys):
    report = tmp_path / "fit.html"
    rc = main(["fit", str(_card(tmp_path)), *KINDS, "--steps", "1000", "--html", str(report)])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0
    assert "every row trains 8 sequences (16,384 tokens) per optimizer step" in out
    assert "every row trains 8 sequences (16,384 tokens) per optimizer step" in report.read_text()


PINNED_BATCH = ["--set", "batch.micro_batch_size=1", "--set", "batch.grad_accum=1"]


def test_micro_batch_and_accumulation_pinned_on_the_command_line_rank_per_token(tmp_path, capsys):
    obj = _json(["fit", str(_card(tmp_path)), *KINDS, *PINNED_BATCH], capsys)
    assert obj["batch_basis"] == {"basis": "per_token", "sequences_per_step": None, "tokens_per_step": None}
    fitting = [r for r in obj["rows"] if r["fits"]]
    assert {r["knobs"].get("batch") for r in fitting} == {None}  # held as pinned, not searched
    assert len({round(_tokens_per_step(r)) for r in fitting}) > 1  # 1 sequence per data-parallel rank
    per_token = [r["cost_per_step"] / _tokens_per_step(r) for r in fitting]
    assert per_token == sorted(per_token)
    # the Pareto front is per token too: the fastest row per token is on it (per step it was beaten)
    fastest = min(fitting, key=lambda r: r["step_seconds"] / _tokens_per_step(r))
    assert fastest["pareto"]
    rc = main(["fit", str(_card(tmp_path)), *KINDS, *PINNED_BATCH])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "ranked by cost per token" in out
    assert "batch.micro_batch_size and batch.grad_accum are pinned" in out
    # the headline gives the figure it ranked by (before: the best row's cost per step, a step of its own batch)
    best = obj["rows"][0]
    per_m = best["cost_per_step"] / _tokens_per_step(best) * 1e6
    seconds_per_m = best["step_seconds"] / _tokens_per_step(best) * 1e6
    headline = out[out.index("best by cost per token"):]
    assert f"{per_m:.4g} {best['currency']}/1M tokens" in headline
    assert f"{seconds_per_m:.4g} s/1M tokens" in headline
    assert "/step" not in headline.split(" skipped ")[0]


def test_steps_with_a_per_token_basis_is_refused_in_one_line(tmp_path, capsys):
    rc = main(["fit", str(_card(tmp_path)), *KINDS, *PINNED_BATCH, "--steps", "100"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "--steps: " in err and "--tokens" in err


def test_no_card_keeps_the_default_cards_full_scope(capsys):
    bare = _json(["fit", "--gpu", "a100-40gb", "--max-gpus", "1"], capsys)
    assert all("scope" not in r["knobs"] for r in bare["rows"])  # held: full SFT, as the card says


def test_search_scope_opens_scope_and_says_so(tmp_path, capsys):
    obj = _json(["fit", str(_card(tmp_path)), "--gpu", "a100-40gb", "--max-gpus", "1", "--search-scope"], capsys)
    assert any(r["knobs"].get("scope") in ("lora", "qlora") for r in obj["rows"])
    assert any("--search-scope" in w and "full" in w for w in obj["warnings"])
