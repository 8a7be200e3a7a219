"""Property-based fuzzing of the CLI (issue 17): generated and mutated inputs for plan, fit, export,
check, record, diagnose and serve, run in-process. Every case must hold the invariants of
``fuzzlib.check_run``; plans also those of ``check_plan_json`` / ``check_plan_text``.

Budget: TRAINFIT_FUZZ_EXAMPLES (total cases; default fuzzlib.DEFAULT_TOTAL); weights below add up to 100.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import strategies as S
from fuzzlib import case, check_plan_json, check_plan_text, check_run, fuzz_settings, run_cli


def fresh(tmp_path: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=tmp_path))


def write(path: Path, text: str) -> Path:
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")
    path.write_bytes(data)
    return path


def plan_and_check(argv: list[str], as_json: bool) -> None:
    run = run_cli(["plan", *argv, *(["--json"] if as_json else [])])
    obj = check_run(run, json_out=as_json, name="plan")
    if run.rc == 0:
        ctx = f"argv={run.argv}"
        if as_json:
            check_plan_json(obj, ctx)
        else:
            check_plan_text(run.stdout, ctx)


@fuzz_settings(22)
@given(data=S.top_level, suffix=st.sampled_from(S.SUFFIXES), as_json=st.booleans())
@case
def test_plan_generated_cards(tmp_path, data, suffix, as_json):
    card = write(fresh(tmp_path) / f"card{suffix}", S.dump(data, suffix))
    plan_and_check([str(card)], as_json)


@fuzz_settings(12)
@given(text=S.mutated_text(), suffix=st.sampled_from(S.SUFFIXES), as_json=st.booleans())
@case
def test_plan_mutated_cards(tmp_path, text, suffix, as_json):
    card = write(fresh(tmp_path) / f"card{suffix}", text)
    plan_and_check([str(card)], as_json)


@fuzz_settings(8)
@given(items=S.set_items, base=st.sampled_from([None, *S.BASE_CARDS[:3]]), as_json=st.booleans())
@case
def test_plan_set_values(tmp_path, items, base, as_json):
    argv = []
    if base is not None:
        argv.append(str(write(fresh(tmp_path) / "card.yaml", base)))
    for item in items:
        argv += ["--set", item]
    plan_and_check(argv, as_json)


@fuzz_settings(9)
@given(cfg=S.mutated_config(), how=st.sampled_from(["path", "inline", "flag"]), as_json=st.booleans())
@case
def test_plan_config_json(tmp_path, cfg, how, as_json):
    _, config = cfg
    d = fresh(tmp_path)
    (d / "model").mkdir()
    write(d / "model" / "config.json", S.dump_config(config))
    if how == "flag":
        argv = ["--model", str(d / "model")]
    elif how == "path":
        argv = [str(write(d / "card.yaml", json.dumps({"model": {"path": str(d / "model")}})))]
    else:
        argv = [str(write(d / "card.json", json.dumps({"model": {"config": config}})))]
    plan_and_check(argv, as_json)


OUT_KINDS = ["ok", "ok", "dir", "missing_folder", "input", "dev_full"]


def out_path(d: Path, kind: str, card: Path) -> tuple[str, Path, bool]:
    """(the argument to pass, the path it names, whether the run may leave a file there); a fresh folder."""
    if kind == "ok":
        return str(d / "out.file"), d / "out.file", True
    if kind == "dir":
        (d / "adir").mkdir()
        return str(d / "adir"), d / "adir", False
    if kind == "missing_folder":
        return str(d / "nope" / "out.file"), d / "nope" / "out.file", False
    if kind == "input":
        return str(card), card, False
    if kind == "trailing_slash":
        return str(d / "out.file") + "/", d / "out.file", False
    return "/dev/full", Path("/dev/full"), False


def check_outputs(run, target: Path, may_write: bool, kind: str, card: Path, card_text: bytes, name: str) -> None:
    check_run(run, name=name)
    assert card.read_bytes() == card_text, f"the input card was changed\nargv={run.argv}"
    if kind in ("dir", "missing_folder", "input", "trailing_slash", "dev_full"):
        assert run.rc == 2, f"{kind}: expected exit 2, got {run.rc}\nargv={run.argv}\nstderr={run.stderr}"
    if kind == "dir":
        assert list(target.iterdir()) == []
    elif kind in ("missing_folder", "trailing_slash"):
        assert not target.exists(), run.argv
    if may_write:
        assert target.exists() == (run.rc == 0), f"output exists={target.exists()} with exit {run.rc}\nargv={run.argv}"
    leftovers = [p.name for p in target.parent.glob(".*.tmp")] if target.parent.is_dir() and kind != "dev_full" else []
    assert not leftovers, leftovers


@fuzz_settings(5)
@given(text=S.mutated_text() | st.sampled_from(S.BASE_CARDS) | S.valid_cards.map(lambda c: S.dump(c, ".yaml")),
       kind=st.sampled_from(OUT_KINDS))
@case
def test_plan_html_output(tmp_path, text, kind):
    d = fresh(tmp_path)
    card = write(d / "card.yaml", text)
    before = card.read_bytes()
    arg, target, may_write = out_path(d, kind, card)
    run = run_cli(["plan", str(card), "--html", arg])
    check_outputs(run, target, may_write, kind, card, before, "plan --html")


@fuzz_settings(2)
@given(text=st.sampled_from(S.BASE_CARDS[:3]) | S.valid_cards.map(lambda c: S.dump(c, ".yaml")) | S.mutated_text(S.BASE_CARDS[:3]),
       gpu=st.sampled_from(["rtx4090", "h100", "a100-80gb"]))
@case
def test_fit(tmp_path, text, gpu):
    card = write(fresh(tmp_path) / "card.yaml", text)
    run = run_cli(["fit", str(card), "--gpu", gpu, "--max-gpus", "1", "--set", "model=Qwen/Qwen3-0.6B", "--json"])
    check_run(run, json_out=True, name="fit")


EXPORT_TARGETS = ["accelerate", "deepspeed", "trl", "verl", "openrlhf", "torchtitan", "nemo-rl"]


@fuzz_settings(8)
@given(data=S.cards | S.mutated_text().map(lambda t: ("text", t)), target=st.sampled_from(EXPORT_TARGETS + ["nope"]),
       out=st.sampled_from(["stdout", "ok", "dir", "missing_folder"]), as_json=st.booleans())
@case
def test_export(tmp_path, data, target, out, as_json):
    d = fresh(tmp_path)
    text = data[1] if isinstance(data, tuple) else S.dump(data, ".yaml")
    card = write(d / "card.yaml", text)
    before = card.read_bytes()
    argv = ["export", str(card), "--to", target, *(["--json"] if as_json else [])]
    if out == "stdout":
        run = run_cli(argv)
        check_run(run, json_out=as_json, name="export")
        return
    arg, path, may_write = out_path(d, out, card)
    run = run_cli([*argv, "--out", arg])
    check_outputs(run, path, may_write, out, card, before, "export")


def _audit_dict(gpus: int = 8) -> dict:
    from trainfit.preflight.audit import AuditReport, GpuInfo

    gib = 2**30
    report = AuditReport(
        created_utc="2026-01-01T00:00:00+00:00", python_version="3.11.9", python_executable="/usr/bin/python3",
        platform="Linux", packages={"torch": "2.5.1", "transformers": "4.46.0", "trl": "0.12.0", "vllm": "not installed"},
        gpus=tuple(GpuInfo(index=i, name="NVIDIA A100-SXM4-80GB", memory_total_bytes=80 * gib, memory_free_bytes=79 * gib,
                           driver_version="550.54", compute_cap="8.0") for i in range(gpus)),
        driver_version="550.54", cuda_runtime="12.4", torch_cuda_available=True, nccl_version="2.21.5",
        p2p_matrix=None, p2p_source=None, topology_text=None, nvlink=True, cpu_cores=64, cpu_cores_usable=64,
        host_ram_total_bytes=512 * gib, host_ram_available_bytes=500 * gib, checkpoint_path="/tmp",
        checkpoint_path_exists=True, checkpoint_writable=True, disk_free_bytes=1000 * gib, disk_total_bytes=2000 * gib,
    )
    return report.to_dict()


AUDIT_FIELDS = ["gpus", "packages", "host_ram_total_bytes", "host_ram_available_bytes", "disk_free_bytes", "nvlink",
                "cpu_cores", "errors", "p2p_matrix", "checkpoint_path", "driver_version", "commands"]
GPU_FIELDS = ["index", "name", "memory_total_bytes", "memory_free_bytes", "driver_version", "compute_cap"]


@st.composite
def audit_files(draw) -> str:
    d = _audit_dict(draw(st.sampled_from([0, 1, 2, 8])))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):
        gpus = d["gpus"] if isinstance(d["gpus"], list) and all(isinstance(g, dict) for g in d["gpus"]) else []
        if gpus and draw(st.booleans()):
            g = gpus[draw(st.integers(min_value=0, max_value=len(gpus) - 1))]
            g[draw(st.sampled_from(GPU_FIELDS))] = draw(S.scalar | st.sampled_from([-85_520_000_000, 0, 2**60]))
        else:
            d[draw(st.sampled_from(AUDIT_FIELDS))] = draw(S.json_like)
    text = json.dumps(d)
    if draw(st.integers(min_value=0, max_value=7)) == 0:
        text = draw(S.mutated_text([text]))
    return text


@fuzz_settings(7)
@given(text=st.sampled_from(S.BASE_CARDS) | S.valid_cards.map(lambda c: S.dump(c, ".yaml")) | S.mutated_text(),
       audit=audit_files(), as_json=st.booleans())
@case
def test_check(tmp_path, text, audit, as_json):
    d = fresh(tmp_path)
    card = write(d / "card.yaml", text)
    audit_file = write(d / "audit.json", audit)
    run = run_cli(["check", str(card), "--audit", str(audit_file), *(["--json"] if as_json else [])])
    check_run(run, codes=(0, 1, 2), json_out=as_json, name="check")


@fuzz_settings(6)
@given(text=st.sampled_from(S.BASE_CARDS) | S.valid_cards.map(lambda c: S.dump(c, ".yaml")) | S.mutated_text(),
       audit=audit_files(), out=st.sampled_from(["ok", "ok", "dir", "missing_folder", "input"]))
@case
def test_record(tmp_path, text, audit, out):
    d = fresh(tmp_path)
    card = write(d / "card.yaml", text)
    before = card.read_bytes()
    audit_file = write(d / "audit.json", audit)
    arg, path, may_write = out_path(d, out, card)
    run = run_cli(["record", str(card), "--audit", str(audit_file), "--out", arg, "--timeout", "2"])
    check_outputs(run, path, may_write, out, card, before, "record")


@fuzz_settings(8)
@given(log=S.oom_logs(), how=st.sampled_from(["log", "message", "log+card"]), as_json=st.booleans())
@case
def test_diagnose(tmp_path, log, how, as_json):
    d = fresh(tmp_path)
    argv = ["diagnose"]
    if how == "message":
        argv += ["--message", log.replace("\x00", "")]
    else:
        argv += ["--log", str(write(d / "train.log", log))]
    if how == "log+card":
        argv += ["--card", str(write(d / "card.yaml", S.BASE_CARDS[0]))]
    run = run_cli([*argv, *(["--json"] if as_json else [])])
    check_run(run, json_out=as_json, name="diagnose", input_echo=True)


@fuzz_settings(3)
@given(body=S.cards | S.json_like)
@case
def test_serve_plan(body):
    """POST /api/plan's entry point in-process (tests/serve/test_fuzz.py covers the HTTP layer)."""
    import time

    from fuzzlib import STATS
    from trainfit.serve.worker import call

    start = time.monotonic()
    status, payload = call("plan", body)
    STATS.setdefault("serve plan", []).append(time.monotonic() - start)
    assert status in (200, 400, 413), (status, payload)
    json.loads(json.dumps(payload, allow_nan=False))
    if status == 200:
        check_plan_json(payload, f"body={body!r}")
    else:
        assert isinstance(payload.get("error"), str) and payload["error"].strip(), payload


def make_file(d: Path, kind: str, i: int) -> str:
    """A path argument of the given kind (files are created fresh in ``d``)."""
    p = d / f"in{i}"
    if kind == "missing":
        return str(d / f"missing{i}" / "x.json")
    if kind == "dir":
        p.mkdir()
        return str(p)
    text = {"empty": "", "garbage": "lorem: [ipsum\n", "json_list": "[1, 2]", "json_object": "{}",
            "yaml_card": S.BASE_CARDS[i % len(S.BASE_CARDS)], "binary": "\x00\xff\xfe", "bomb": _bomb_text(),
            "nan_json": '{"a": NaN, "b": Infinity}', "non_utf8": "a: 1\n\udcff\udcfe\n",
            "gpu_time": GPU_TIME.read_text() if kind == "gpu_time" else ""}[kind]
    p = p.with_suffix(".json" if kind in ("json_list", "json_object", "nan_json", "gpu_time") else ".yaml")
    write(p, text)
    return str(p)


GPU_TIME = Path(__file__).resolve().parents[1] / "data" / "gpu_time_dry_run.json"


def _bomb_text() -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


@st.composite
def command_lines(draw, d: Path) -> tuple[str, list[str], list[Path]]:
    """(command, argv, output paths it may create): random flags with plausible and hostile values."""
    cmd = draw(st.sampled_from(list(S.COMMAND_FLAGS)))
    argv = [cmd]
    outputs: list[Path] = []
    if cmd == "diagnose":
        if draw(st.booleans()):
            argv.append(draw(st.sampled_from(["oom", "nccl", "", "x" * 200]) | S.hostile_text))
    else:
        usual = "gpu_time" if cmd == "calibrate" else "yaml_card"
        argv.append(make_file(d, draw(st.sampled_from([usual] * 6 + S.FILE_KINDS)), 0))
    flags = draw(st.lists(st.sampled_from(S.COMMAND_FLAGS[cmd]), max_size=5))
    for i, flag in enumerate(flags, start=1):
        if flag in S.PATH_FLAGS:
            if flag in ("--html", "--out"):
                kind = draw(st.sampled_from(["ok", "ok", "dir", "missing_folder", "input"]))
                arg, path, may = out_path(Path(tempfile.mkdtemp(dir=d)), kind, Path(argv[1]) if cmd != "diagnose" else d / "x")
                argv += [flag, arg]
                if may:
                    outputs.append(path)
            else:
                argv += [flag, make_file(d, draw(st.sampled_from(S.FILE_KINDS)), i)]
        elif flag == "--set":
            argv += [flag, draw(S.set_items)[0]]
        elif S.FLAG_VALUES[flag]:
            argv += [flag, draw(st.sampled_from(S.FLAG_VALUES[flag]) | S.hostile_text)]
        else:
            argv.append(flag)
    if cmd == "fit":  # keep the search small: a two-card budget on one or two kinds unless drawn
        if "--max-gpus" not in flags:
            argv += ["--max-gpus", "2"]
        if "--gpu" not in flags:
            argv += ["--gpu", "rtx4090,h100"]
    if cmd in ("check", "record") and "--audit" not in argv:
        audit = d / "audit.json"
        audit.write_text(json.dumps(_audit_dict(8)))
        argv += ["--audit", str(audit)]
    if cmd == "record" and "--out" not in argv:
        argv += ["--out", str(d / "record.yaml")]
        outputs.append(d / "record.yaml")
    if cmd == "calibrate" and "--gpu" not in flags:  # the dry-run output names no GPU
        argv += ["--gpu", "h100-sxm"]
    if cmd == "calibrate":  # the CPU dry-run output is refused as GPU rates without it
        argv.append("--allow-dry-run")
    if cmd == "calibrate" and "--out" not in argv:  # never the user's own calibration file
        argv += ["--out", str(d / "cal.json")]
        outputs.append(d / "cal.json")
    if cmd == "import" and "--from" not in argv:
        argv += ["--from", draw(st.sampled_from(S.FLAG_VALUES["--from"][:7]))]
    return cmd, argv, outputs


@fuzz_settings(10)
@given(data=st.data())
@case
def test_command_lines(tmp_path, data):
    d = fresh(tmp_path)
    cmd, argv, outputs = data.draw(command_lines(d))
    run = run_cli(argv)
    check_run(run, codes=(0, 1, 2) if cmd in ("check", "compare") else (0, 2), outputs=tuple(outputs), name=f"{cmd} flags",
              json_out="--json" in argv and cmd != "record" and not (cmd in ("export", "import") and "--out" in argv),
              input_echo=cmd == "diagnose")
    if cmd == "plan" and run.rc == 0 and "--json" in argv:
        check_plan_json(json.loads(run.stdout), f"argv={argv}")
