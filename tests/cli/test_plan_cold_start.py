"""What a cold `trainfit plan` pays for: the guards of benchmarks/speed.md's figures (no wall-clock assertion)."""

from __future__ import annotations

import types

import pytest
from pydantic import BaseModel

from trainfit.spec import card as card_module


def _card_models() -> list[type[BaseModel]]:
    return [v for v in vars(card_module).values()
            if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == card_module.__name__]


def test_card_default_factories_are_plain_functions():
    """pydantic reads each default factory's signature when it builds a model: a builtin (``list``) costs a
    tokenize of its text signature, a model class the build of that model's own signature."""
    factories = [(m.__name__, name, f.default_factory) for m in _card_models() for name, f in m.model_fields.items()
                 if f.default_factory is not None]
    assert len(factories) >= 19
    assert [(m, n) for m, n, f in factories if not isinstance(f, types.FunctionType)] == []


def test_card_default_factories_make_what_they_did():
    from trainfit.spec.card import LoraSection, RunCard

    a, b = RunCard(), RunCard()
    assert a.lora == LoraSection() and a.lora.modules_to_save == [] and a.recipe.changes == []
    assert a.rollout.quantization_bf16_modules == [] and a.rollout.quantization_bf16_modules is not \
        b.rollout.quantization_bf16_modules


def _recorded(model: str):
    from replay_inputs import recorded_plan

    from trainfit.spec.card import load_card_dict

    card = load_card_dict({"model": model, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                           "parallel": {"strategy": "single"}, "batch": {"seq_len": 1024}})
    return recorded_plan(card)[1]


def test_identical_layers_share_their_ops(monkeypatch):
    """The step's sequence builds a layer's ops once per distinct layer (36 identical ones in Qwen3-8B). The
    workspace marks' positions are held by tests/unit/test_alloc_sequence.py."""
    from trainfit.memory import alloc_sequence as a

    rec = _recorded("Qwen/Qwen3-8B")
    calls: list[float] = []
    real = a._layer_ops

    def spy(total, shape, *, full):
        calls.append(total)
        return real(total, shape, full=full)

    monkeypatch.setattr(a, "_layer_ops", spy)
    seq = a.step_sequence(rec.terms, rec.shape, workspace=rec.workspace)
    layers = rec.terms.activations.per_layer
    assert len(layers) == 36 and len(calls) == len(set(layers)) == 1
    assert seq is not None and len(seq.workspace_at) == len(rec.workspace) == 2
    fwd_mark, bwd_mark = seq.workspace_at
    assert 0 < fwd_mark < bwd_mark < len(seq.step_events)


def test_a_plan_reads_one_model_file_one_gpu_file_and_no_price_table():
    """A cold `trainfit plan --json` of the default card: the catalogs give its model and GPU from their own
    files, and the price table (read by ``trainfit.compute.PRESETS`` on first use) is not read."""
    import json
    import subprocess
    import sys

    code = ("import sys, io, json, contextlib\nfrom trainfit.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['plan', '--json']) == 0\n"
            "from trainfit.catalog import gpus, models\n"
            "print(json.dumps([models._load.cache_info().currsize, models._entries.cache_info().currsize,"
            " gpus._load.cache_info().currsize, gpus._entries.cache_info().currsize,"
            " 'trainfit.catalog.prices' in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == [1, 0, 1, 0, False]


def test_family_refusals_hold_where_the_arch_module_is_imported(tmp_path):
    """A card that could be refused imports ``memory.arch_activations`` for its family sets (a large module the
    default card's plan does not import); the refusals themselves are unchanged."""
    import json

    import pytest

    from trainfit.errors import CardError
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    with pytest.raises(CardError, match="scope: lora is not planned for gpt_neox models"):
        make_plan(load_card_dict({"model": "EleutherAI/pythia-160m", "scope": "lora"}))
    gpt2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257, "n_positions": 1024,
            "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None, "activation_function": "gelu_new",
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-05,
            "tie_word_embeddings": True, "torch_dtype": "float32"}
    (tmp_path / "config.json").write_text(json.dumps(gpt2))
    card = {"model": str(tmp_path), "batch": {"seq_len": 512}}
    assert make_plan(load_card_dict({**card, "attention": "sdpa"})).phases  # planned
    with pytest.raises(CardError, match="attention: eager is not planned for gpt2 models"):
        make_plan(load_card_dict({**card, "attention": "eager"}))


class _Apart(float):
    """A float that hashes by identity: every layer's saved bytes a key of its own, so ``step_sequence`` builds
    each layer's ops separately, as it did before it shared them between identical layers."""

    __hash__ = object.__hash__


def _recorded_card(model: str, **card) -> object:
    from replay_inputs import recorded_plan

    from trainfit.spec.card import load_card_dict

    return recorded_plan(load_card_dict({"model": model, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                                         "parallel": {"strategy": "single"}, "batch": {"seq_len": 1024},
                                         **card}))[1]


@pytest.mark.parametrize(("model", "card", "distinct"), [
    ("deepseek-ai/DeepSeek-V2-Lite", {}, 2),  # MoE, its first layer dense
    ("deepseek-ai/DeepSeek-V2-Lite", {"scope": "lora"}, 2),
    ("google/gemma-2-2b", {"batch": {"seq_len": 8192}}, 1),  # sliding-window and global layers save the same bytes
    ("google/gemma-2-2b", {"scope": "lora"}, 2),  # LoRA: the first layer saves less than the rest
    ("Qwen/Qwen3-8B", {"scope": "lora"}, 2),
    ("Qwen/Qwen3-8B", {"parallel": {"strategy": "single", "gradient_checkpointing": False}}, 1),
])
def test_shared_layer_ops_give_the_sequence_of_one_build_per_layer(monkeypatch, model, card, distinct):
    """The whole allocation sequence (events, workspace marks, everything ``step_sequence`` returns) is the same
    when every layer's ops are built on their own (the way before the sharing), on models whose layers differ."""
    from dataclasses import replace

    from trainfit.memory import alloc_sequence as a

    rec = _recorded_card(model, **card)
    per_layer = rec.terms.activations.per_layer
    apart = replace(rec.terms, activations=replace(rec.terms.activations,
                                                   per_layer=tuple(_Apart(x) for x in per_layer)))
    calls: list[float] = []

    def spy(real):
        def built(total, *args, **kw):
            if kw.get("grad", True):  # not the checkpointed LoRA layer's one no-grad forward
                calls.append(total)
            return real(total, *args, **kw)
        return built

    for name in ("_layer_ops", "_lora_layer_ops"):
        monkeypatch.setattr(a, name, spy(getattr(a, name)))
    shared = a.step_sequence(rec.terms, rec.shape, workspace=rec.workspace)
    shared_calls, calls[:] = len(calls), []
    separate = a.step_sequence(apart, rec.shape, workspace=rec.workspace)
    assert separate == shared
    # the layer generators ran once per distinct layer shared, once per layer apart
    assert shared is not None and len(set(per_layer)) == distinct
    assert shared_calls == distinct and len(calls) == len(per_layer)


def test_a_planning_command_runs_with_fewer_collections_and_puts_the_thresholds_back(monkeypatch, capsys):
    """``trainfit.cli.main.PLANNING_GC_THRESHOLDS`` (mypy's values, mypy/build.py l.480 @8b3e7d8b) hold while `plan`
    and `size` run and are put back when ``main`` returns; any other command runs at the thresholds it found."""
    import gc

    from trainfit.cli import main as cli_main

    seen: list[tuple[str, tuple[int, ...]]] = []
    real = cli_main._main

    def spy(args):
        seen.append((args[0], gc.get_threshold()))
        return real(args)

    monkeypatch.setattr(cli_main, "_main", spy)
    before = gc.get_threshold()
    assert before != cli_main.PLANNING_GC_THRESHOLDS
    assert cli_main.main(["plan", "--json"]) == 0
    assert cli_main.main(["size", "Qwen/Qwen3-8B", "--json"]) == 0
    assert cli_main.main(["gpus"]) == 0
    capsys.readouterr()
    assert seen == [("plan", cli_main.PLANNING_GC_THRESHOLDS), ("size", cli_main.PLANNING_GC_THRESHOLDS),
                    ("gpus", before)]
    assert gc.get_threshold() == before


def test_a_plan_not_printed_to_a_terminal_skips_the_highlighter_and_prints_the_same_text(monkeypatch, capsys):
    """Written to a pipe or a file rich prints no style, so ``plan_cmd`` turns its highlighter off (the regular
    expressions that colour numbers and paths): the text is the same as with it, and a terminal still gets colour."""
    from rich import console as rich_console
    from rich.highlighter import ReprHighlighter

    from trainfit.cli.main import main

    calls = []
    real = ReprHighlighter.highlight
    monkeypatch.setattr(ReprHighlighter, "highlight", lambda self, text: calls.append(1) or real(self, text))
    assert main(["plan"]) == 0
    piped = capsys.readouterr().out
    assert calls == []

    plain = rich_console.Console

    class _Highlighting(plain):  # the console as before: the highlighter on, whatever the output
        def __init__(self, *args, **kwargs):
            kwargs.pop("highlight", None)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(rich_console, "Console", _Highlighting)
    assert main(["plan"]) == 0
    assert capsys.readouterr().out == piped and calls
    calls.clear()
    monkeypatch.setattr(rich_console, "Console", plain)
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal: the numbers are coloured as before
    assert main(["plan"]) == 0
    assert calls and "\x1b[" in capsys.readouterr().out


def test_the_process_command_line_freezes_the_heap_before_its_exit_and_prints_the_same(capsys):
    """``main()`` on the process's own argv (the `trainfit` script) moves the live objects to the collector's
    permanent generation as it returns, so the exit's collections skip them (``trainfit.cli.main``, gc.freeze); an
    in-process call with its own argv, and a command that is not a plan, leave the collector as it was (counted in a
    child process: the test session's own heap may be frozen by a library already). The printed plan and the exit
    code of a real process are the in-process ones."""
    import json
    import os
    import subprocess
    import sys

    from trainfit.cli.main import main

    code = ("import contextlib, gc, io, json, sys\nfrom trainfit.cli.main import main\n"
            "counts = [gc.get_freeze_count()]\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            "    for argv in (['plan', '--json'], None, None):\n"
            "        if argv is None:\n"
            "            sys.argv = ['trainfit', 'gpus'] if len(counts) == 2 else ['trainfit', 'plan', '--json']\n"
            "        assert main(argv) == 0\n"
            "        counts.append(gc.get_freeze_count())\n"
            "sys.stderr.write(json.dumps(counts))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    counts = json.loads(child.stderr.strip().splitlines()[-1])
    assert counts[:3] == [0, 0, 0] and counts[3] > 10_000, counts  # the modules' objects, frozen by the last call
    assert main(["plan", "--json"]) == 0
    in_process = capsys.readouterr().out
    run = subprocess.run([sys.executable, "-m", "trainfit", "plan", "--json"], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stderr == ""
    assert json.loads(run.stdout) == json.loads(in_process)
    text = subprocess.run([sys.executable, "-m", "trainfit", "plan"], capture_output=True, text=True, env=env)
    assert main(["plan"]) == 0
    assert (text.returncode, text.stdout, text.stderr) == (0, capsys.readouterr().out, "")
