"""Findings of the fifth review of the December 2026 hardening pass, as explicit cases (each fails without its fix).
As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line, exit code 2,
no traceback and no output file."""

from __future__ import annotations

import os
import threading
import time

import pytest

from fuzzlib import check_run, run_cli


@pytest.fixture
def fifo(tmp_path):
    """A named pipe; for 5 s a writer opens and closes it as soon as a reader waits, so that code reading it
    (without the fix) gets an empty file and fails its assertion instead of hanging the suite."""
    path = tmp_path / "card.fifo"
    os.mkfifo(path)
    stop = threading.Event()

    def release():
        deadline = time.monotonic() + 5
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.02)

    t = threading.Thread(target=release, daemon=True)
    t.start()
    yield path
    stop.set()
    t.join()


# ------------------------------------------------------------------------------------------------
# 1. `trainfit calibrate` read its inputs whole: a named pipe with no writer hung it for ever and /dev/zero
#    grew it to 13 GB of memory in 36 s; a card, --calibration or $TRAINFIT_CALIBRATION that is a pipe or a
#    device was called missing ("no such file") or, from the variable, passed over as no calibration.
def test_calibrate_reads_a_pipe_without_hanging(fifo):
    """A named pipe is an input read once (``<(...)``); one whose writer sends nothing ends in one line."""
    run = run_cli(["calibrate", str(fifo), "--dry-run"])
    check_run(run, codes=(2,))
    assert f"calibrate: the named pipe '{fifo}' gave nothing to read" in run.stderr, run.stderr


@pytest.mark.parametrize("argv, what", [(["plan", "{fifo}"], "card"), (["export", "{fifo}", "--to", "trl"], "card"),
                                        (["plan", "--calibration", "{fifo}"], "--calibration"),
                                        (["import", "{fifo}", "--from", "deepspeed"], "FILE")])
def test_a_pipe_is_named_not_called_missing(fifo, argv, what):
    run = run_cli([a.format(fifo=fifo) for a in argv])
    check_run(run, codes=(2,))
    assert f"{what}: '{fifo}' is a named pipe, not a file" in run.stderr, run.stderr


@pytest.mark.parametrize("value", ["/dev/zero", "{fifo}"])
def test_the_calibration_variable_naming_a_pipe_or_device_is_refused(monkeypatch, fifo, value):
    monkeypatch.setenv("TRAINFIT_CALIBRATION", value.format(fifo=fifo))
    run = run_cli(["plan"])
    check_run(run, codes=(2,))
    assert "$TRAINFIT_CALIBRATION: '" in run.stderr and ", not a file" in run.stderr, run.stderr


def test_calibrate_refuses_an_input_past_its_bound(tmp_path, monkeypatch):
    from trainfit.calibration import build, file

    monkeypatch.setattr(build, "MAX_INPUT_BYTES", 1000)
    monkeypatch.setattr(file, "MAX_INPUT_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text("[" + "0, " * 2000 + "0]")
    run = run_cli(["calibrate", str(big), "--dry-run"])
    check_run(run, codes=(2,))
    assert "is larger than" in run.stderr, run.stderr
    run = run_cli(["plan", "--calibration", str(big)])
    check_run(run, codes=(2,))
    assert "is larger than" in run.stderr, run.stderr


def test_diagnose_reads_a_pipe_as_its_log_without_hanging(fifo):
    """Before: a named pipe read as --log hung until a writer came, /dev/zero never ended. A pipe is read (``<(...)``,
    tests/cli/test_cli_diagnose.py); one whose writer sends nothing ends in one line."""
    run = run_cli(["diagnose", "--log", str(fifo)])
    check_run(run, codes=(2,))
    assert f"--log: the named pipe '{fifo}' gave nothing to read (no writer); give a log file, or '-' to read stdin" \
        in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# 2. A config.json's tie_word_embeddings was read as Python truth on the gated decoders (Llama, Qwen, Mistral, ...):
#    the text "false" planned a tied head, one vocab x hidden matrix fewer (155.6M of the parameters here), silently.
_CFG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 151936, "head_dim": 128}


@pytest.mark.parametrize("value", ["false", "no", 2])
def test_tie_word_embeddings_that_is_not_a_boolean_is_refused(tmp_path, value):
    import json

    (tmp_path / "config.json").write_text(json.dumps({**_CFG, "tie_word_embeddings": value}))
    run = run_cli(["size", str(tmp_path)])
    check_run(run, codes=(2,))
    assert "config.json field 'tie_word_embeddings' must be true, false or null" in run.stderr, run.stderr


@pytest.mark.parametrize("value, tied", [(True, True), (False, False), (None, False)])
def test_tie_word_embeddings_booleans_and_null_still_read(value, tied):
    from trainfit.catalog.hf_config import spec_from_hf_config

    assert spec_from_hf_config({**_CFG, "tie_word_embeddings": value}, name="x", source="t").tie_word_embeddings is tied


# ------------------------------------------------------------------------------------------------
# 3. The Python API took arguments of the wrong type into the core: calibration={...} or True raised
#    AttributeError, budget=5 AttributeError, price_table=5 and tokens="1e9" TypeError; tokens=True and
#    global_batch=True planned one token / one sequence; trace(layers=True) reached transformers' own validation;
#    size(Path(...)) refused the local path its message offers. A global batch too large to split was refused as
#    batch.grad_accum, a field the user never gave.
@pytest.mark.parametrize("kwargs, fragment", [
    ({"calibration": {"x": 1}}, "calibration: a path, a Calibration"),
    ({"calibration": True}, "calibration: a path, a Calibration"),
])
def test_plan_api_refuses_a_calibration_of_the_wrong_type(kwargs, fragment):
    import trainfit
    from trainfit.errors import CardError

    with pytest.raises(CardError, match=fragment):
        trainfit.plan(**kwargs)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"budget": 5}, "budget: a string"),
    ({"market": 5}, "market: a string"),
    ({"price_table": 5}, "price_table: a path"),
    ({"tokens": "1e9"}, "tokens: a number of tokens"),
    ({"tokens": True}, "tokens: a number of tokens"),
    ({"global_batch": True}, "global_batch: a whole number"),
    ({"global_batch": 64.0}, "global_batch: a whole number"),
    ({"calibration": 5}, "calibration: a path, a Calibration"),
])
def test_fit_api_refuses_arguments_of_the_wrong_type(kwargs, fragment):
    import trainfit
    from trainfit.errors import CardError

    with pytest.raises(CardError, match=fragment):
        trainfit.fit(gpus=["a100-80gb"], max_gpus=2, **kwargs)


def test_trace_api_refuses_a_boolean_layer_count():
    import trainfit
    from trainfit.errors import TrainfitError

    with pytest.raises(TrainfitError, match="layers must be a whole number >= 1 or None, got True"):
        trainfit.trace(layers=True)


def test_size_api_reads_a_local_path_given_as_a_path(tmp_path):
    import json
    from pathlib import Path

    import trainfit

    (tmp_path / "config.json").write_text(json.dumps(_CFG))
    assert trainfit.size(Path(tmp_path)).params_total == trainfit.size(str(tmp_path)).params_total > 0


def test_a_global_batch_too_large_to_split_names_the_global_batch():
    import trainfit
    from trainfit.errors import CardError

    run = run_cli(["fit", "--gpu", "a100-80gb", "--max-gpus", "2", "--global-batch", "1000000000000"])
    check_run(run, codes=(2,))
    assert "--global-batch: 1,000,000,000,000 sequences per step" in run.stderr, run.stderr
    with pytest.raises(CardError, match="^global_batch: 1,000,000,000,000 sequences per step"):
        trainfit.fit(gpus=["a100-80gb"], max_gpus=2, global_batch=10**12)


# ------------------------------------------------------------------------------------------------
# 4. roles.reference precomputed (DPO's reference log-probs of a fixed dataset) was taken by ppo and grpo and planned
#    as no reference at all ("reference (frozen, precomputed, 0 GPUs)"), though their reference scores each step's
#    freshly generated responses.
@pytest.mark.parametrize("method", ["grpo", "ppo"])
def test_a_precomputed_reference_is_refused_for_on_policy_rl(method):
    run = run_cli(["plan", "--method", method, "--set", "roles.reference=precomputed"])
    check_run(run, codes=(2,))
    assert f"roles.reference: precomputed is DPO's" in run.stderr and f"method {method} scores" in run.stderr, run.stderr
    assert "allowed: gpu, cpu, none, host_swap" in run.stderr, run.stderr


def test_a_precomputed_reference_still_plans_for_dpo():
    run = run_cli(["plan", "--method", "dpo", "--set", "roles.reference=precomputed"])
    check_run(run, codes=(0,))


# ------------------------------------------------------------------------------------------------
# 5. `trainfit serve --host ''` listened on every interface (0.0.0.0) of an API without authentication, its warning
#    naming no address ("listening on ;").
@pytest.mark.parametrize("host", ["", "  "])
def test_serve_refuses_an_empty_host(host, monkeypatch):
    from trainfit.errors import TrainfitError
    from trainfit.serve import app

    def no_server(*args, **kwargs):  # without the check the command would listen and serve for ever
        raise TrainfitError("make_server was reached")

    monkeypatch.setattr(app, "make_server", no_server)
    run = run_cli(["serve", "--host", host, "--port", "0", "--quiet"])
    check_run(run, codes=(2,))
    assert "--host: " in run.stderr and "would listen on every interface" in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# 6. --from deepspeed read files DeepSpeed itself refuses, and planned a partial optimizer offload as a full one: a key
#    given twice kept its last value (stage 3 then 2 imported as zero2), bf16 and fp16 both enabled imported as bf16,
#    offload_optimizer.ratio 2.0 or -0.5 imported, and ratio 0.3 (70% of the optimizer states stay on the GPU) was
#    planned as every state on the host, with no note.
@pytest.mark.parametrize("text, fragment", [
    ('{"zero_optimization": {"stage": 3, "stage": 2}}', "key 'stage' is given twice in one object"),
    ('{"bf16": {"enabled": true}, "fp16": {"enabled": true}}', "bf16.enabled and fp16.enabled are both true"),
    ('{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 2.0}}}',
     "zero_optimization.offload_optimizer.ratio: '2.0'; allowed: a share from 0 to 1"),
    ('{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": true}}}',
     "zero_optimization.offload_optimizer.ratio: 'True'; allowed: a share from 0 to 1"),
])
def test_deepspeed_import_refuses_what_deepspeed_refuses(tmp_path, text, fragment):
    path = tmp_path / "ds.json"
    path.write_text(text)
    out = tmp_path / "card.yaml"
    run = run_cli(["import", str(path), "--from", "deepspeed", "--out", str(out)])
    check_run(run, codes=(2,), outputs=(out,))
    assert fragment in run.stderr, run.stderr


def test_deepspeed_partial_optimizer_offload_is_said():
    from trainfit.export.importers import read_deepspeed

    imp = read_deepspeed('{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}')
    assert [n for n in imp.notes if n.startswith("zero_optimization.offload_optimizer.ratio 0.3:") and "(70%)" in n]
    full = read_deepspeed('{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 1}}}')
    assert not [n for n in full.notes if "ratio" in n]


def test_nemo_rl_import_refuses_a_key_given_twice_as_omegaconf_does(tmp_path):
    """Before: the second gpus_per_node (2) silently replaced the first (8); OmegaConf.load refuses the file."""
    from trainfit.export import export
    from trainfit.spec.card import load_card_dict

    text = export(load_card_dict({"method": "grpo"}), "nemo-rl").text
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("gpus_per_node:"))
    path = tmp_path / "grpo.yaml"
    path.write_text(text.replace(line, line + "\n" + line.split(":")[0] + ": 2", 1))
    run = run_cli(["import", str(path), "--from", "nemo-rl"])
    check_run(run, codes=(2,))
    assert "--from nemo-rl: key 'gpus_per_node' is given twice in one mapping" in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# 7. `trainfit accept` took any existing --model path and a card that is a pipe: a card file or a pipe as --model ended
#    in transformers' OSError traceback after 3 s of imports; --device cuda on a machine without CUDA ended in torch's
#    AssertionError ("Torch not compiled with CUDA enabled") after building the model.
@pytest.mark.parametrize("what", ["file", "fifo", "folder"])
def test_accept_refuses_a_model_that_is_not_a_checkpoint_folder(tmp_path, fifo, what):
    model = {"file": tmp_path / "card.yaml", "fifo": fifo, "folder": tmp_path / "empty"}[what]
    if what == "file":
        model.write_text("model: Qwen/Qwen3-8B\n")
    elif what == "folder":
        model.mkdir()
    run = run_cli(["accept", "--model", str(model)])
    check_run(run, codes=(2,))
    assert "is not a checkpoint folder (no config.json in it)" in run.stderr, run.stderr


def test_accept_refuses_a_card_that_is_a_pipe(fifo):
    run = run_cli(["accept", str(fifo)])
    check_run(run, codes=(2,))
    assert f"card: '{fifo}' is a named pipe, not a file" in run.stderr, run.stderr


def test_accept_refuses_cuda_where_torch_sees_none(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run = run_cli(["accept", "--device", "cuda"])
    check_run(run, codes=(2,))
    assert "--device cuda: torch sees no CUDA device on this machine" in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# 8. trainfit.watch checked its record path only when the run ended: a folder raised OutputError, a path through a
#    file FileExistsError and a pipe with no reader hung finish() for ever, each after the whole training run (before
#    the user's own save); negative or NaN margins and a zero horizon were taken.
@pytest.mark.parametrize("what, fragment", [("dir", "is a directory; give a file path"),
                                            ("through", "passes through the file"),
                                            ("fifo", "is a named pipe, not a file")])
def test_watch_refuses_a_record_path_it_could_not_write_when_the_run_starts(tmp_path, fifo, what, fragment):
    from trainfit.errors import OutputError
    from trainfit.watch.core import Watch

    (tmp_path / "a-file").write_text("x")
    record = {"dir": tmp_path, "through": tmp_path / "a-file" / "r.yaml", "fifo": fifo}[what]
    with pytest.raises(OutputError, match=fragment):
        Watch({"model": "Qwen/Qwen3-8B"}, record=record, device="cpu", memory=False)


def test_watch_still_creates_the_record_folders_it_is_given(tmp_path):
    from trainfit.watch.core import Watch

    w = Watch({"model": "Qwen/Qwen3-8B"}, record=tmp_path / "new" / "r.yaml", device="cpu", memory=False)
    assert w.record_path == tmp_path / "new" / "r.yaml"


@pytest.mark.parametrize("kwargs", [{"memory_margin": -1}, {"time_margin": float("nan")}, {"horizon_steps": 0},
                                    {"memory_margin": "x"}, {"time_margin": True}, {"memory_margin": float("inf")}])
def test_watch_refuses_margins_and_horizons_out_of_range(kwargs):
    from trainfit.errors import CardError
    from trainfit.watch.core import Watch

    with pytest.raises(CardError, match=f"watch: {next(iter(kwargs))} must be a number"):
        Watch({"model": "Qwen/Qwen3-8B"}, device="cpu", memory=False, **kwargs)


@pytest.mark.parametrize("key", ["attention_bias", "mlp_bias"])
def test_bias_switches_that_are_not_booleans_are_refused(key):
    """Before: "false" as text planned biases on every projection, silently."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.errors import ConfigError

    with pytest.raises(ConfigError, match=f"config.json field '{key}' must be true, false or null"):
        spec_from_hf_config({**_CFG, key: "false"}, name="x", source="t")
    assert spec_from_hf_config({**_CFG, key: None}, name="x", source="t") == spec_from_hf_config(_CFG, name="x", source="t")
