"""Every failure class issue 17's fuzzing found (and the fuzz suite since), as explicit cases.

Each case runs the CLI in-process and asserts the exit code, the one-line message (naming the field
or the limit) and, where it mattered, the time: inputs that used to hang, eat memory or crash."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fuzzlib import check_plan_json, check_run, run_cli


def _bomb(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines)


def _indent(text: str, n: int = 2) -> str:
    return "\n".join(" " * n + ln for ln in text.splitlines())


QWEN3_MOE = {"model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4,
             "num_hidden_layers": 48, "vocab_size": 151936, "intermediate_size": 6144, "num_experts": 128,
             "num_experts_per_tok": 8, "moe_intermediate_size": 768, "head_dim": 128}


def _moe(**changes) -> str:
    return json.dumps({"model": {"config": {**QWEN3_MOE, **changes}}})


# (file name, file text, exit code, a fragment of stderr (exit 2) or of the JSON plan's model name (exit 0))
CARDS = [
    # a card file that parses to a string, a list or a number (traceback in load_card / set_dotted / flat_keys)
    ("list.yaml", "- model\n- method\n", 2, "holds a list, not a mapping"),
    ("str.yaml", "hello\n", 2, "holds a string, not a mapping"),
    ("num.yaml", "42\n", 2, "holds a number, not a mapping"),
    ("list.json", "[1, 2]", 2, "holds a list, not a mapping"),
    ("keys.yaml", "1: 2\n", 2, "a key that is not text"),
    ("empty.yaml", "", 0, "Qwen/Qwen3-8B"),
    # an unknown suffix is read as YAML, never replaced by the default card
    ("c.txt", "model: Qwen/Qwen3-0.6B\nmethod: dpo\n", 0, "Qwen/Qwen3-0.6B"),
    ("c", "model: Qwen/Qwen3-0.6B\nmethod: dpo\n", 0, "Qwen/Qwen3-0.6B"),
    ("c.cfg", "model: [\n", 2, "not valid YAML"),
    # inf and huge numbers (OverflowError in spec_from_hf_config / spec_from_param_count, MemoryError in generation)
    ("inf.yaml", "model:\n  params: .inf\n", 2, "model.params: input should be a finite number"),
    ("big.yaml", "model:\n  params: 1e400\n", 2, "model.params: input should be a finite number"),
    ("huge.yaml", "model:\n  params: 1e20\n", 2, "model.params: input should be less than or equal to"),
    ("gen.yaml", "method: grpo\nrollout:\n  num_generations: 2147483648\n", 2,
     "rollout.num_generations: input should be less than or equal to 4096"),
    ("seq.yaml", "batch:\n  seq_len: .inf\n", 2, "batch.seq_len"),
    ("nan.yaml", "hardware:\n  gpu: custom\n  gpu_memory_gib: .nan\n", 2, "hardware.gpu_memory_gib: input should be a finite number"),
    ("cfg_inf.json", json.dumps({"model": {"config": {**QWEN3_MOE, "hidden_size": 1e300}}}), 2,
     "config.json field 'hidden_size' = 1e+300 is outside 1..1,000,000"),
    ("cfg_big.json", _moe(vocab_size=10**30), 2, "'vocab_size' = 1e+30 is outside 1..100,000,000"),
    # negative, zero and inconsistent model sizes (a Qwen3-MoE with moe_intermediate_size -768 planned -27.4e9 params)
    ("moe_neg.json", _moe(moe_intermediate_size=-768), 2, "'moe_intermediate_size' = -768 is outside 1.."),
    ("moe_zero.json", _moe(num_experts=0), 2, "'num_experts' = 0 is outside 1.."),
    ("moe_topk.json", _moe(num_experts_per_tok=129), 2, "'num_experts_per_tok' = 129 is outside 1..128"),
    ("kv.json", _moe(num_key_value_heads=5), 2, "'num_key_value_heads' = 5 does not divide"),
    ("heads_neg.json", _moe(num_attention_heads=-32), 2, "'num_attention_heads' = -32 is outside"),
    ("frac.json", _moe(head_dim=127.5), 2, "'head_dim' must be an integer"),
    ("mlp_only.json", _moe(mlp_only_layers=[99]), 2, "'mlp_only_layers' = 99 is outside 0..47"),
    ("layers.json", _moe(num_hidden_layers=1721), 2, "'num_hidden_layers' = 1721 is outside 1..1,024"),  # planned 77 s
    ("cfg_list.json", json.dumps({"model": {"config": [1, 2]}}), 2, "model.config"),
    ("cfg_type.json", _moe(model_type=["qwen3"]), 2, "model_type"),
    # a value the plan silently ignored
    ("gpumem.yaml", "hardware:\n  gpu: h100\n  gpu_memory_gib: 24\n", 2, "hardware.gpu_memory_gib: only read with hardware.gpu: custom"),
    ("method.yaml", "method: DPO\n", 2, "method: 'DPO' is not allowed; allowed: sft, rm, dpo, ppo or grpo"),
    ("software.yaml", "software:\n  hardware:\n    gpu: h100\n", 2, "software.hardware: a package version like"),
    # a section that is not a mapping, read by a preset's merge (TypeError in apply_preset)
    ("preset_rollout.yaml", "preset: verl\nscope: lora\nrollout: 5\n", 2, "rollout: must be a section of keys"),
    ("preset_list.yaml", "preset: verl\nscope: lora\nrollout: [1]\n", 2, "rollout: must be a section of keys"),
    # usage errors name the field
    ("seq_text.yaml", "batch:\n  seq_len: long\n", 2, "batch.seq_len:"),
    ("section.yaml", "hardware: 8\n", 2, "hardware:"),
    ("model_list.yaml", "model: [1, 2]\n", 2, "model: a catalog id (e.g. Qwen/Qwen3-8B), a local path, or a mapping"),
]


@pytest.mark.parametrize(("name", "text", "code", "fragment"), CARDS, ids=[c[0] for c in CARDS])
def test_card_regressions(tmp_path, name, text, code, fragment):
    card = tmp_path / name
    card.write_text(text)
    run = run_cli(["plan", str(card), "--json"])
    obj = check_run(run, json_out=True)
    assert run.rc == code, run.stderr
    if code == 2:
        assert fragment in run.stderr, run.stderr
    else:
        assert obj["model"]["name"] == fragment
        check_plan_json(obj)
        if name.startswith("c"):
            assert obj["method"] == "dpo"


@pytest.mark.parametrize("where", ["notes", "software", "config", "set"])
def test_alias_bomb_is_refused_in_milliseconds(tmp_path, where):
    """A YAML alias bomb ran past 30 s and 2.5 GB in plan and record."""
    bomb = _bomb()
    if where == "set":
        argv = ["plan", "--set", "software.x=" + " ".join(bomb.replace("\n", ", ").split()).join("{}")]
        argv = ["plan", "--set", "notes=" + "{" + bomb.replace("\n", ", ") + "}"]
    else:
        section = {"notes": "notes:\n", "software": "software:\n", "config": "model:\n  config:\n"}[where]
        card = tmp_path / "bomb.yaml"
        card.write_text(section + _indent(bomb, 2 if where != "config" else 4) + "\n")
        argv = ["plan", str(card)]
    start = time.monotonic()
    run = run_cli(argv)
    took = time.monotonic() - start
    check_run(run)
    assert run.rc == 2
    assert "alias bomb" in run.stderr or "aliases" in run.stderr, run.stderr
    assert took < 1.0, took


@pytest.mark.parametrize("section", ["", "hardware:\n", "software:\n"])
def test_thousands_of_keys_are_refused_fast(tmp_path, section):
    """A card with thousands of keys took 11 s to be refused."""
    pad = "  " if section else ""
    card = tmp_path / "many.yaml"
    card.write_text(section + "\n".join(f"{pad}k{i}: {i}" for i in range(5000)) + "\n")
    start = time.monotonic()
    run = run_cli(["plan", str(card)])
    took = time.monotonic() - start
    check_run(run)
    assert run.rc == 2 and "more than 1,000 keys" in run.stderr, run.stderr
    assert took < 1.0, took


@pytest.mark.parametrize("text", ["[" * 100_000, "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 200)),
                                  "- a\n" * 200_000, "x: " + "y" * 2_000_000])
def test_deep_long_and_large_files_are_refused_fast(tmp_path, text):
    card = tmp_path / "card.yaml"
    card.write_text(text)
    start = time.monotonic()
    run = run_cli(["plan", str(card)])
    check_run(run)
    assert run.rc == 2, run.stderr
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize(("item", "fragment"), [
    ("a..b=1", "'a..b': a key has an empty part"),
    ("=1", "a key has an empty part"),
    ("x" * 300 + "=1", "key longer than 200 characters"),
    ("hardware.gpu.x=1", "hardware.gpu.x: 'gpu' is 'a100-40gb', not a section of keys; set 'gpu' itself"),
    ("model.params=1e9", "model.params: 'model' is 'Qwen/Qwen3-8B', not a section of keys"),
    ("batch.seq_len=abc", "batch.seq_len:"),
    ("batch.seq_len=1e400", "batch.seq_len:"),
    ("rollout.num_generations=2147483648", "rollout.num_generations: input should be less than or equal to 4096"),
    ("noequals", "--set: expected KEY=VALUE"),
])
def test_set_items(item, fragment):
    run = run_cli(["plan", "--set", item])
    check_run(run)
    assert run.rc == 2 and fragment in run.stderr, run.stderr


def test_set_on_a_card_that_is_a_list(tmp_path):
    """set_dotted on a non-mapping card raised AttributeError."""
    card = tmp_path / "card.yaml"
    card.write_text("- 1\n")
    for cmd in (["plan", str(card), "--set", "batch.seq_len=4"], ["fit", str(card), "--set", "batch.seq_len=4"]):
        run = run_cli(cmd)
        check_run(run)
        assert run.rc == 2 and "holds a list" in run.stderr, run.stderr


@pytest.mark.parametrize("command", [["plan"], ["fit", "--gpu", "rtx4090", "--max-gpus", "1"]], ids=["plan", "fit"])
@pytest.mark.parametrize("kind", ["dir", "missing_folder", "input", "dev_full"])
def test_html_bad_outputs(tmp_path, command, kind):
    """--html to a directory, a missing folder, the input card or a full disk: one line naming --html, exit 2,
    nothing written (fit gave a traceback there, and overwrote the card it was given, exit 0)."""
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    (tmp_path / "adir").mkdir()
    target = {"dir": tmp_path / "adir", "missing_folder": tmp_path / "nope" / "r.html", "input": card,
              "dev_full": Path("/dev/full")}[kind]
    if kind == "dev_full" and not target.exists():
        pytest.skip("no /dev/full")
    run = run_cli([command[0], str(card), *command[1:], "--html", str(target)])
    check_run(run)
    assert run.rc == 2, run.stderr
    assert "--html" in run.stderr, run.stderr
    assert card.read_text() == "model: Qwen/Qwen3-0.6B\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "card.yaml"]
    assert list((tmp_path / "adir").iterdir()) == []


def test_plan_html_written_atomically(tmp_path):
    out = tmp_path / "r.html"
    run = run_cli(["plan", "--html", str(out)])
    check_run(run)
    assert run.rc == 0 and out.read_text().lstrip().lower().startswith("<!doctype html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


@pytest.mark.parametrize("card", [
    {"model": {"params": 1}},  # a 1-parameter model: tiny everything, nothing negative
    {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "rollout": {"num_generations": 4096, "prompts_per_step": 1_000_000}},
    {"model": "Qwen/Qwen3-0.6B", "batch": {"seq_len": 10_000_000}, "hardware": {"gpu": "a100-40gb"}},
    {"model": {"params": 1e14}, "hardware": {"gpu": "custom", "gpu_memory_gib": 16384}},
])
def test_extreme_plans_are_finite_and_consistent(tmp_path, card):
    """Extreme accepted values: JSON without NaN/Infinity, verdict and headroom consistent, in bounded time."""
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    run = run_cli(["plan", str(path), "--json"])
    obj = check_run(run, json_out=True)
    if run.rc == 0:
        check_plan_json(obj, run.stderr)


def test_fit_html_written_atomically(tmp_path):
    out = tmp_path / "r.html"
    run = run_cli(["fit", "--gpu", "rtx4090", "--max-gpus", "1", "--html", str(out)])
    check_run(run)
    assert run.rc == 0 and out.read_text().lstrip().lower().startswith("<!doctype html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


@pytest.mark.parametrize(("option", "value", "fragment"), [
    ("--tokens", "1e400", "--tokens: must be a finite number > 0 and at most 1e+16, got inf"),  # OverflowError in run_steps
    ("--tokens", "inf", "--tokens: must be a finite number > 0"),
    ("--tokens", "nan", "--tokens: must be a finite number > 0"),
    ("--tokens", "1e300", "at most 1e+16, got 1e+300"),
    ("--tokens", "0", "--tokens: must be a finite number > 0"),
    ("--steps", "1" + "0" * 400, "--steps: must be in 1..1,000,000,000,000, got a 401-digit number"),  # OverflowError
    ("--steps", "0", "--steps: must be in 1..1,000,000,000,000, got 0"),
])
def test_fit_run_length_out_of_range(option, value, fragment):
    run = run_cli(["fit", "--gpu", "rtx4090", "--max-gpus", "1", option, value])
    check_run(run)
    assert run.rc == 2 and fragment in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


@pytest.mark.parametrize(("name", "data", "fragment"), [
    ("bin.yaml", bytes(range(256)) * 4, "is not UTF-8 text (byte 128)"),  # YAML ReaderError traceback
    ("ctl.yaml", b"entries:\n- gpu: h100\x00\n", "is not valid JSON/YAML: unacceptable character #x0000"),  # ReaderError
    ("latin.yaml", "entries: café\n".encode("latin-1"), "is not UTF-8 text (byte 12)"),  # Python's decode message
    ("nan.json", b'{"entries": [{"gpu": "h100", "per_gpu_hour": NaN, "currency": "USD"}]}', "NaN is not a number JSON allows"),
    ("bomb.yaml", _bomb().encode(), "aliases"),
    ("big.yaml", b"entries: [" + b"1, " * 400_000 + b"]\n", "larger than 1 MiB"),
])
def test_fit_price_table_bad_files(tmp_path, name, data, fragment):
    table = tmp_path / name
    table.write_bytes(data)
    run = run_cli(["fit", "--gpu", "rtx4090", "--max-gpus", "1", "--price-table", str(table)])
    check_run(run)
    assert run.rc == 2, run.stderr
    assert f"--price-table: '{table}'" in run.stderr and fragment in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


@pytest.fixture(scope="module")
def audit_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("audit") / "audit.json"
    run = run_cli(["audit", "--json"])
    assert run.rc == 0, run.stderr
    path.write_text(run.stdout)
    return path


@pytest.mark.parametrize(("out", "force", "fragment"), [
    ("card", True, "is one of the inputs; refusing to write over it"),  # overwrote the card, exit 0
    ("card", False, "is one of the inputs; refusing to write over it"),
    ("audit", True, "is one of the inputs; refusing to write over it"),
    ("measured", True, "is one of the inputs; refusing to write over it"),
    ("dev_full", True, "cannot write '/dev/full': no space left on device"),
    ("missing_folder", False, "does not exist; create it first"),
    ("dir", True, "is a directory; give a file path"),
])
def test_record_bad_outputs(tmp_path, audit_file, out, force, fragment):
    """record --out: an input is never overwritten (even with --force); a failed write leaves nothing behind."""
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    audit = tmp_path / "audit.json"
    audit.write_bytes(audit_file.read_bytes())
    measured = tmp_path / "measured.yaml"
    measured.write_text("phases: {}\n")
    (tmp_path / "adir").mkdir()
    target = {"card": card, "audit": audit, "measured": measured, "dev_full": Path("/dev/full"),
              "missing_folder": tmp_path / "nope" / "r.yaml", "dir": tmp_path / "adir"}[out]
    if out == "dev_full" and not target.exists():
        pytest.skip("no /dev/full")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    argv = ["record", str(card), "--audit", str(audit), "--out", str(target)]
    argv += ["--measured", str(measured)] if out == "measured" else []
    run = run_cli(argv + (["--force"] if force else []))
    check_run(run)
    named = f"'{target.parent if out == 'missing_folder' else target}'"
    assert run.rc == 2 and run.stderr.startswith("trainfit: error: record: ") and named in run.stderr, run.stderr
    assert fragment in run.stderr, run.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "adir"])
    assert list((tmp_path / "adir").iterdir()) == []


def test_record_written_atomically(tmp_path, audit_file):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\n")
    out = tmp_path / "r.yaml"
    out.write_text("old\n")
    run = run_cli(["record", str(card), "--audit", str(audit_file), "--out", str(out), "--force"])
    check_run(run)
    assert run.rc == 0, run.stderr
    assert "record:" in out.read_text() and sorted(p.name for p in tmp_path.iterdir()) == ["card.yaml", "r.yaml"]


@pytest.mark.parametrize(("name", "data", "fragment"), [
    ("big.json", json.dumps({**QWEN3_MOE, "pad": "x" * (2**20 + 10)}).encode(), "is larger than 1 MiB"),  # read whole
    ("bin.json", b"\xff\xfe" + bytes(100), "is not UTF-8 text (byte 0)"),
    ("nan.json", json.dumps(QWEN3_MOE)[:-1].encode() + b', "rope_theta": NaN}', "NaN is not a number JSON allows"),
    ("list.json", b"[1, 2]", "must hold a mapping of fields, got list"),
])
def test_trace_config_json_is_read_bounded(tmp_path, name, data, fragment):
    """trace read a local config.json whole (no size cap), with Python's decode message on a binary file."""
    cfg = tmp_path / name
    cfg.write_bytes(data)
    card = tmp_path / "card.yaml"
    card.write_text(f"model: {json.dumps(str(cfg))}\n")
    start = time.monotonic()
    run = run_cli(["trace", str(card), "--json"])
    check_run(run, json_out=True)
    assert run.rc == 2 and f"model: '{cfg}'" in run.stderr and fragment in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert time.monotonic() - start < 5.0
