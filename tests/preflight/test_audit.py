"""`audit` on fake machines: good nvidia-smi output (2 and 8 GPUs, NVLink or PCIe), garbage, a hang,
a failing driver, an old driver without compute_cap, and no GPU at all."""

from __future__ import annotations

import json
import time

import pytest

from helpers import invoke
from trainfit.preflight.audit import AuditReport, nvlink_in_topology, parse_gpu_csv, parse_p2p, run_audit
from trainfit.preflight.shell import run_command
from trainfit.units import MIB



def write_exe(folder, name, text):
    """An executable stand-in (a local copy of conftest's: `import conftest` is ambiguous across test folders)."""
    import stat

    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(text)
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p

def test_eight_a100_with_nvlink(machine, tmp_path):
    machine("a100x8_nvlink", ram_gib=1024, avail_gib=1000)
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert r.errors == ()
    assert [g.index for g in r.gpus] == list(range(8))
    g = r.gpus[0]
    assert (g.name, g.memory_total_bytes, g.memory_free_bytes) == ("NVIDIA A100-SXM4-40GB", 40960 * MIB, 40327 * MIB)
    assert (g.driver_version, g.compute_cap, r.driver_version) == ("535.129.03", "8.0", "535.129.03")
    assert r.nvlink is True
    assert r.p2p_source == "nvidia-smi topo -p2p r"
    assert len(r.p2p_matrix) == 8 and r.p2p_matrix[3][3] == "X" and r.p2p_matrix[0][7] == "OK"
    assert "NV12" in r.topology_text
    assert r.host_ram_total_bytes == 1024 * 2**30 and r.host_ram_available_bytes == 1000 * 2**30
    assert r.checkpoint_writable and r.disk_free_bytes > 0
    assert r.cpu_cores >= 1
    assert {"torch", "transformers", "trl", "peft", "accelerate", "deepspeed", "vllm", "nemo-rl"} <= set(r.packages)
    # the seed's env_audit.py fields: packages, gpus (name, memory.total, driver_version), topology, raw commands
    assert any("--query-gpu" in " ".join(c.args) for c in r.commands)
    assert any(c.args[1:] == ("topo", "-m") for c in r.commands)


def test_two_rtx4090_pcie_only(machine, tmp_path):
    machine("rtx4090x2_pcie")
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert len(r.gpus) == 2 and r.gpus[1].memory_free_bytes == 24079 * MIB
    assert r.nvlink is False  # the legend's "NV#" line does not count
    assert r.p2p_matrix == (("X", "NS"), ("NS", "X"))


def test_eight_rtx4090_pcie_only(machine, tmp_path):
    machine("rtx4090x8_pcie")
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert len(r.gpus) == 8 and r.nvlink is False and r.errors == ()


def test_garbage_output_is_an_error_not_a_crash(machine, tmp_path):
    machine("garbage")
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert r.gpus == () and r.nvlink is None
    assert len(r.errors) == 1 and r.errors[0].startswith("gpus: cannot parse nvidia-smi --query-gpu output")


def test_hang_is_recorded_as_a_timeout(machine, tmp_path):
    machine("hang")
    start = time.monotonic()
    r = run_audit(checkpoint_path=tmp_path, timeout_s=0.5, probe_torch=False)
    assert time.monotonic() - start < 5
    assert r.errors == ("gpus: nvidia-smi --query-gpu: timed out after 0.5 s",)
    assert r.commands[0].returncode is None


def test_failing_driver_is_recorded(machine, tmp_path):
    machine("driver_failure")
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert r.gpus == ()
    assert r.errors[0].startswith("gpus: nvidia-smi --query-gpu: exit code 9: NVIDIA-SMI has failed")
    assert r.commands[0].returncode == 9


def test_old_driver_without_compute_cap(machine, tmp_path):
    machine("old_driver")
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert r.errors == () and len(r.gpus) == 2
    assert r.gpus[0].compute_cap is None and r.gpus[0].driver_version == "550.54.14"


def test_no_gpu_machine_with_torch_probe(machine, tmp_path):
    machine("none")
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5)
    assert r.gpus == () and r.nvlink is None and r.p2p_matrix is None and r.topology_text is None
    assert r.errors[0] == "gpus: nvidia-smi --query-gpu: not found: nvidia-smi"
    if r.packages["torch"] != "not installed":
        assert r.torch_cuda_available is False  # this machine's torch sees no GPU; nothing raised


def test_unwritable_checkpoint_path_is_recorded(machine, tmp_path):
    machine("none")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        r = run_audit(checkpoint_path=locked / "ckpt", timeout_s=5, probe_torch=False)
    finally:
        locked.chmod(0o700)
    if r.checkpoint_writable:  # running as root: permissions do not bind
        pytest.skip("root ignores directory permissions")
    assert r.checkpoint_path_exists is False
    assert any("is not writable" in e for e in r.errors)


def test_checkpoint_path_under_a_file_is_not_writable(machine, tmp_path):
    machine("none")
    (tmp_path / "a-file").write_text("x")
    r = run_audit(checkpoint_path=tmp_path / "a-file" / "ckpt", timeout_s=5, probe_torch=False)
    assert r.checkpoint_writable is False
    assert f"disk: checkpoint path '{tmp_path / 'a-file' / 'ckpt'}' is not writable" in r.errors[-1]


def test_report_round_trips_through_json(machine, tmp_path):
    machine("a100x8_nvlink")
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert AuditReport.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_cli_json_and_text(machine, tmp_path):
    machine("rtx4090x2_pcie")
    res = invoke("audit", "--json", "--no-torch", "--checkpoint-path", tmp_path)
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["nvlink"] is False and len(data["gpus"]) == 2
    text = invoke("audit", "--no-torch", "--checkpoint-path", tmp_path).output
    assert "NVIDIA GeForce RTX 4090, 23.99 GiB total" in text and "nvlink      no (PCIe only)" in text


def test_cli_on_no_gpu_machine(machine, tmp_path):
    machine("none")
    res = invoke("audit", "--no-torch", "--checkpoint-path", tmp_path)
    assert res.exit_code == 0
    assert "gpus        none found" in res.output and "not found: nvidia-smi" in res.output


def test_parsers_refuse_garbage():
    with pytest.raises(ValueError):
        parse_gpu_csv("a, b\n", ("index", "name", "memory.total"))
    with pytest.raises(ValueError):
        parse_p2p("nothing here")
    with pytest.raises(ValueError):
        nvlink_in_topology("Legend:\n  NV#  = Connection traversing a bonded set of # NVLinks\n")


def test_run_command_never_raises(tmp_path):
    assert run_command(["/nonexistent/tool"]).error == "not found: /nonexistent/tool"
    assert run_command([str(tmp_path)]).error.startswith("PermissionError")
    r = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.returncode, r.stdout, r.stderr, r.error) == (3, "out", "err", "exit code 3: err")


def test_real_h200_output(machine, tmp_path):
    """Verbatim nvidia-smi output of a one-GPU H200 (driver 580), ANSI header underlines included."""
    machine("h200x1_real", ram_gib=126, avail_gib=125)
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert r.errors == ()
    g = r.gpus[0]
    assert (g.name, g.memory_total_bytes, g.compute_cap, r.driver_version) == (
        "NVIDIA H200", 143771 * MIB, "9.0", "580.159.04")
    assert r.p2p_matrix == (("X",),) and r.nvlink is False
    assert "\x1b" not in r.topology_text and r.topology_text.startswith("GPU0\tCPU Affinity")


# --- hardening (issue 17): bounded probe output, sane parsed values, strict audit files ---------------

def _fake_smi(machine, tmp_path, script: str):

    bin_dir = machine("none")
    write_exe(bin_dir, "nvidia-smi", script)
    return bin_dir


def test_endless_nvidia_smi_is_capped(machine, tmp_path):
    """An nvidia-smi that never stops printing: stopped at 1 MiB, recorded as an error, memory bounded."""
    import resource

    _fake_smi(machine, tmp_path, "#!/bin/sh\nexec yes '0, NVIDIA H100, 81559, 80000, 550.54, 9.0'\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    r = run_audit(checkpoint_path=tmp_path, timeout_s=20, probe_torch=False)
    assert time.monotonic() - start < 5
    assert r.gpus == ()
    assert r.errors[0] == "gpus: nvidia-smi --query-gpu: printed more than 1,048,576 bytes on stdout; stopped"
    assert len(r.commands[0].stdout) <= 1 << 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB: under 200 MiB grown


@pytest.mark.parametrize(("row", "why"), [
    ("0, NVIDIA H100, -81559, 80000, 550.54, 9.0", "outside 0.."),
    ("0, NVIDIA H100, inf, 80000, 550.54, 9.0", "outside 0.."),
    ("0, NVIDIA H100, nan, 80000, 550.54, 9.0", "outside 0.."),
    ("0, NVIDIA H100, 1e30, 80000, 550.54, 9.0", "outside 0.."),
    ("0, NVIDIA H100, lots, 80000, 550.54, 9.0", "not a number of MiB"),
    ("0, NVIDIA H100, 81559, 90000, 550.54, 9.0", "more than the total"),
    ("0, NVIDIA H100, 0, 0, 550.54, 9.0", "0 bytes of GPU memory"),
    ("-1, NVIDIA H100, 81559, 80000, 550.54, 9.0", "index"),
    ("x, NVIDIA H100, 81559, 80000, 550.54, 9.0", "not a whole number"),
    ("0, NVIDIA H100, 81559, 80000, 550.54, 9.0\n0, NVIDIA H100, 81559, 80000, 550.54, 9.0", "appears twice"),
])
def test_parsed_gpu_values_are_sanity_checked(row, why):
    """-79.65 GiB of GPU memory (found by fuzzing) and its relatives are refused, never recorded."""
    from trainfit.preflight.audit import GPU_QUERY_FIELDS

    with pytest.raises(ValueError, match=why):
        parse_gpu_csv(row, GPU_QUERY_FIELDS)


def test_negative_memory_from_nvidia_smi_is_an_error_entry(machine, tmp_path):
    _fake_smi(machine, tmp_path, "#!/bin/sh\necho '0, NVIDIA H100, -81559, 80000, 550.54, 9.0'\n")
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    assert r.gpus == ()
    assert r.errors[0].startswith("gpus: cannot parse nvidia-smi --query-gpu output: memory.total '-81559' MiB is outside")


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 1e400, -1.0])
def test_run_command_survives_any_timeout(timeout):
    r = run_command(["sh", "-c", "echo ok"], timeout_s=timeout)
    assert r.stdout == "ok" or r.error.startswith("timed out after 0")


def test_exited_probe_with_a_lingering_child_returns():
    start = time.monotonic()
    r = run_command(["sh", "-c", "(sleep 30 &) ; echo done"], timeout_s=10)
    assert (r.returncode, r.stdout, r.error) == (0, "done", None)
    assert time.monotonic() - start < 3


@pytest.mark.parametrize(("edit", "why"), [
    (lambda d: d["gpus"][0].update(memory_total_bytes=-85_520_000_000), "memory_total_bytes"),
    (lambda d: d["gpus"][0].update(memory_total_bytes="80GB"), "memory_total_bytes"),
    (lambda d: d["gpus"][0].update(memory_free_bytes=1.5), "memory_free_bytes"),
    (lambda d: d["gpus"][0].update(index=True), "index"),
    (lambda d: d.update(gpus={"0": {}}), "gpus"),
    (lambda d: d.update(gpus=[1]), "gpus\\[0\\]"),
    (lambda d: d.update(host_ram_total_bytes=float("inf")), "host_ram_total_bytes"),
    (lambda d: d.update(disk_free_bytes=-1), "disk_free_bytes"),
    (lambda d: d.update(errors="none"), "errors"),
    (lambda d: d.update(packages=["torch"]), "packages"),
    (lambda d: d.update(nvlink="yes"), "nvlink"),
    (lambda d: d.update(p2p_matrix=[[1, 2]]), "p2p_matrix"),
    (lambda d: d.update(checkpoint_path=None), "checkpoint_path"),
])
def test_audit_file_fields_are_checked(machine, tmp_path, edit, why):
    machine("a100x8_nvlink")
    d = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False).to_dict()
    AuditReport.from_dict(json.loads(json.dumps(d)))  # the untouched report reads back
    edit(d)
    with pytest.raises((ValueError, TypeError), match=why):
        AuditReport.from_dict(d)


# --- fuzzed probe output: the parsers raise only ValueError, the audit never raises ---------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ROW = "0, NVIDIA H100 80GB HBM3, 81559, 81000, 550.54.15, 9.0"
_CELLS = st.sampled_from(["0", "-1", "1e400", "inf", "nan", "-81559", "81559", "[N/A]", "", "x", "9" * 30, "1.5",
                          "NVIDIA H100", "550.54", "9.0", " , ", "\x00", "MiB", "81559 MiB"])
_rows = st.lists(_CELLS, min_size=1, max_size=8).map(", ".join)
_outputs = st.one_of(
    st.lists(_rows, max_size=5).map("\n".join),
    st.text(max_size=200),
    st.lists(st.sampled_from([_ROW, "GPU0\tX\tNV18", "GPU1\tNV18\tX", "\tGPU0\tGPU1", "Legend:", "NV#", "\x1b[4m"]),
             max_size=6).map("\n".join),
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(text=_outputs)
def test_parsers_raise_only_value_error(text):
    from trainfit.preflight.audit import GPU_QUERY_FIELDS

    for parse in (lambda t: parse_gpu_csv(t, GPU_QUERY_FIELDS), lambda t: parse_gpu_csv(t, GPU_QUERY_FIELDS[:-1]),
                  parse_p2p, nvlink_in_topology):
        try:
            out = parse(text)
        except ValueError:
            continue
        if isinstance(out, tuple) and out and hasattr(out[0], "memory_total_bytes"):
            for g in out:
                assert g.memory_total_bytes is None or 0 < g.memory_total_bytes <= 16 * 2**40
                assert g.memory_free_bytes is None or 0 <= g.memory_free_bytes


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(query=_outputs, topo=_outputs, rc=st.sampled_from([0, 0, 1, 9]))
def test_audit_never_raises_on_any_probe_output(machine, tmp_path, query, topo, rc):
    """The 3 audit crashes in 69 runs against broken nvidia-smi stand-ins: any output, any exit, no exception."""

    bin_dir = machine("none")
    (tmp_path / "q.txt").write_text(query)
    (tmp_path / "t.txt").write_text(topo)
    write_exe(bin_dir, "nvidia-smi", f'#!/bin/sh\ncase "$*" in\n  *--query-gpu*) cat "{tmp_path}/q.txt"; exit {rc} ;;\n'
                                     f'  *) cat "{tmp_path}/t.txt" ;;\nesac\n')
    r = run_audit(checkpoint_path=tmp_path, timeout_s=5, probe_torch=False)
    json.dumps(r.to_dict(), allow_nan=False)
    AuditReport.from_dict(json.loads(json.dumps(r.to_dict())))
    if r.gpus:
        assert all(g.memory_total_bytes is None or g.memory_total_bytes > 0 for g in r.gpus)
