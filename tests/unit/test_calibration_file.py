"""The calibration file: round trip, atomic writes, validation, paths, and rates_for."""

from __future__ import annotations

import json
import os

import pytest

from trainfit.calibration import (
    calibration_to_dict, default_calibration_path, find_calibration, load_calibration, make_calibration, rates_for,
    save_calibration,
)
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import GemmPoint, default_rates
from trainfit.errors import CardError

GEMM = [{"m": 8192, "n": 4096, "k": 4096, "flops_per_s": 7.5e14}, {"m": 1, "n": 4096, "k": 4096, "flops_per_s": 3e12}]


def _cal(**devices):
    return make_calibration(devices or {"NVIDIA H200": {"matmul_flops_per_s": 7.9e14, "gemm_points": GEMM, "p2p": True}},
                            sources=["test"], notes=["h200 measured: a note"], created="2025-01-31")


def _file(tmp_path, data):
    p = tmp_path / "cal.json"
    p.write_text(json.dumps(data))
    return p


def _valid():
    return {"trainfit_calibration": 1, "created": "2025-01-31", "sources": [], "notes": [],
            "devices": {"h200": {"matmul_flops_per_s": 7.9e14}}}


def test_round_trip_resolves_aliases_and_keeps_every_field(tmp_path):
    cal = _cal()
    assert cal.gpu_ids == ("h200",)  # "NVIDIA H200" is an alias of the catalog id
    saved = save_calibration(cal, tmp_path / "sub" / "cal.json")
    assert saved.path == str(tmp_path / "sub" / "cal.json")
    back = load_calibration(saved.path)
    assert back == cal and back.path == saved.path
    assert back.device("h200").overrides()["gemm_points"][0] == GemmPoint(m=8192, n=4096, k=4096, flops_per_s=7.5e14)
    data = json.loads((tmp_path / "sub" / "cal.json").read_text())
    assert list(data) == ["trainfit_calibration", "created", "sources", "devices", "notes"]
    assert data["devices"]["h200"]["gemm_points"] == GEMM
    assert hash(back) == hash(cal)
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["cal.json"]  # no temporary file left


def test_failed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "cal.json"
    save_calibration(_cal(), path)
    before = path.read_text()

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(CardError, match=r"cannot write .* \(No space left on device\)"):
        save_calibration(_cal(h200={"matmul_flops_per_s": 1e14}), path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["cal.json"]


@pytest.mark.parametrize(("change", "message"), [
    ({"trainfit_calibration": 2}, "trainfit_calibration must be 1 (the only version), got 2"),
    ({"extra": 1}, "unknown key(s) ['extra']; allowed: trainfit_calibration, created, sources, devices, notes"),
    ({"created": "yesterday"}, "created must be an ISO date such as '2025-01-31', got 'yesterday'"),
    ({"sources": "x"}, "sources must be a list of strings, got 'x'"),
    ({"devices": []}, "devices must be an object of GPU catalog id -> {rate: value}, got list"),
    ({"devices": {"h300": {}}}, "gpu: 'h300' is not in the GPU catalog"),
    ({"devices": {"h200": {}, "NVIDIA H200": {}}}, "devices 'NVIDIA H200' and 'h200' name the same GPU"),
    ({"devices": {"h200": {"matmul_flops": 1e15}}}, "devices.h200: unknown rate 'matmul_flops'; allowed: matmul_flops_per_s, hbm_bytes_per_s"),
    ({"devices": {"h200": {"matmul_flops_per_s": -1}}}, "devices.h200.matmul_flops_per_s must be a positive number, got -1"),
    ({"devices": {"h200": {"hbm_bytes_per_s": "fast"}}}, "devices.h200.hbm_bytes_per_s must be a positive number, got 'fast'"),
    ({"devices": {"h200": {"sm_count": 1.5}}}, "devices.h200.sm_count must be a positive integer, got 1.5"),
    ({"devices": {"h200": {"p2p": "yes"}}}, "devices.h200.p2p must be true or false, got 'yes'"),
    ({"devices": {"h200": {"gemm_points": [{"m": 1, "n": 2}]}}}, "gemm_points[0] must have exactly the keys m, n, k, flops_per_s"),
    ({"devices": {"h200": {"gemm_points": [{"m": 0, "n": 2, "k": 2, "flops_per_s": 1.0}]}}}, "gemm_points[0].m must be a positive integer, got 0"),
    ({"devices": {"h200": {"reserved_replay_scale": 1.1}}}, "reserved_replay_scale must be an object of '<allocator>/<strategy>' -> positive number"),
    ({"devices": {"h200": {"reserved_replay_scale": {"single": 1.1}}}}, "key 'single' must be '<allocator>/<strategy>' with allocator one of default, expandable_segments"),
    ({"devices": {"h200": {"reserved_replay_scale": {"default/single": 0}}}}, "reserved_replay_scale.default/single must be a positive number, got 0"),
    # json's true and 1.0 compare equal to 1 in Python: the version is the integer 1 only
    ({"trainfit_calibration": True}, "trainfit_calibration must be 1 (the only version), got True"),
    ({"trainfit_calibration": 1.0}, "trainfit_calibration must be 1 (the only version), got 1.0"),
    # the memory constants: what calibration.memory._fit_group can produce (grid 0.01..4 refined by 20 x 0.0005)
    ({"devices": {"h200": {"fragmentation_share": 50}}},
     "devices.h200.fragmentation_share must be between 0.01 and 4.01 (the range its fit searches"),
    ({"devices": {"h200": {"reserved_replay_scale": {"default/single": 1e-05}}}},
     "devices.h200.reserved_replay_scale.default/single must be between 0.01 and 4.01 (the range its fit searches"),
    ({"devices": {"h200": {"compute_capability": "banana"}}},
     "devices.h200.compute_capability must be 'major.minor' digits such as '9.0', got 'banana'"),
    # catalog h200 bf16 dense peak 9.89e14 (trainfit.catalog.gpus); x 1.5 (file.PEAK_TOLERANCE)
    ({"devices": {"h200": {"gemm_points": [{"m": 1, "n": 1, "k": 1, "flops_per_s": 1e20}]}}},
     "devices.h200.gemm_points[0].flops_per_s must be at most 1.48e+15 FLOP/s (1.5 x h200's datasheet dense 16-bit peak"
     " 9.89e+14), got 1e+20"),
    ({"devices": {"h200": {"matmul_flops_per_s": 7.9e17}}},
     "devices.h200.matmul_flops_per_s must be at most 1.48e+15 FLOP/s"),
])
def test_validation_names_the_field_and_what_is_allowed(tmp_path, change, message):
    data = {**_valid(), **change}
    with pytest.raises(CardError) as exc:
        load_calibration(_file(tmp_path, data))
    text = str(exc.value)
    assert message in text and "\n" not in text
    assert text.startswith(f"calibration '{tmp_path / 'cal.json'}'")


@pytest.mark.parametrize("devices", [
    {"h200": {"fragmentation_share": 0.01, "reserved_replay_scale": {"default/single": 4.01}}},
    {"h200": {"compute_capability": "10.0", "matmul_flops_per_s": 9.8e14 * 1.5}},
])
def test_the_edges_of_the_ranges_are_accepted(tmp_path, devices):
    assert load_calibration(_file(tmp_path, {**_valid(), "devices": devices})).gpu_ids == ("h200",)


def test_unreadable_files_are_one_line_errors(tmp_path):
    with pytest.raises(CardError, match="no such file"):
        load_calibration(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CardError, match="not valid JSON"):
        load_calibration(tmp_path / "bad.json")


def test_rates_for_overrides_only_the_calibrated_gpu():
    cal = _cal(h200={"matmul_flops_per_s": 7.9e14, "host_s_per_forward_kernel": 3e-5})
    h200 = rates_for(resolve_gpu("NVIDIA H200"), cal)
    assert h200.matmul_flops_per_s == 7.9e14 and h200.host_s_per_forward_kernel == 3e-5
    assert h200.hbm_bytes_per_s == default_rates(resolve_gpu("h200")).hbm_bytes_per_s
    # the replaced field's default source line goes; the file's names the calibrated values
    assert h200.sources[-1] == ("calibration (in memory, 2025-01-31): host_s_per_forward_kernel 3e-05, "
                                "matmul_flops_per_s 7.9e+14")
    assert not any(s.startswith("matmul ") for s in h200.sources)
    assert any(s.startswith("HBM ") for s in h200.sources) == any(
        s.startswith("HBM ") for s in default_rates(resolve_gpu("h200")).sources)
    assert rates_for(resolve_gpu("a100-40gb"), cal) == default_rates(resolve_gpu("a100-40gb"))
    assert rates_for(resolve_gpu("h200"), None) == default_rates(resolve_gpu("h200"))


def test_default_path_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINFIT_CALIBRATION", str(tmp_path / "x.json"))
    assert default_calibration_path() == tmp_path / "x.json"
    monkeypatch.delenv("TRAINFIT_CALIBRATION")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert default_calibration_path() == tmp_path / "cfg" / "trainfit" / "calibration.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_calibration_path() == tmp_path / "home" / ".config" / "trainfit" / "calibration.json"


def test_find_calibration(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINFIT_CALIBRATION", str(tmp_path / "default.json"))
    assert find_calibration(None) is None
    with pytest.raises(CardError, match="--calibration: no such file"):
        find_calibration(tmp_path / "explicit.json")
    save_calibration(_cal(), tmp_path / "default.json")
    assert find_calibration(None) == tmp_path / "default.json"
    save_calibration(_cal(), tmp_path / "explicit.json")
    assert find_calibration(str(tmp_path / "explicit.json")) == tmp_path / "explicit.json"


def test_the_variable_naming_the_null_device_is_no_calibration(monkeypatch, tmp_path):
    """``TRAINFIT_CALIBRATION=/dev/null`` switches a default calibration file off; other devices stay refused."""
    monkeypatch.setenv("TRAINFIT_CALIBRATION", os.devnull)
    assert find_calibration(None) is None
    link = tmp_path / "null-link"
    link.symlink_to(os.devnull)
    monkeypatch.setenv("TRAINFIT_CALIBRATION", str(link))
    assert find_calibration(None) is None
    if os.path.exists("/dev/zero"):
        monkeypatch.setenv("TRAINFIT_CALIBRATION", "/dev/zero")
        with pytest.raises(CardError, match=r"\$TRAINFIT_CALIBRATION: '/dev/zero' is a device, not a file"):
            find_calibration(None)


def test_conftest_hides_the_users_default_file():
    assert not default_calibration_path().exists()
    assert find_calibration(None) is None


def test_to_dict_is_json():
    assert json.loads(json.dumps(calibration_to_dict(_cal())))["devices"]["h200"]["p2p"] is True


def test_the_package_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, trainfit.calibration, trainfit.cli.calibrate_cmd; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_replay_scales_round_trip_per_layout(tmp_path):
    """reserved_replay_scale holds one factor per '<allocator>/<strategy>'; the file keeps it as an object."""
    from trainfit.calibration.memory import replay_scales

    cal = make_calibration({"h200": {"reserved_replay_scale": {"expandable_segments/ddp": 0.9, "default/single": 1.1}}},
                           created="2025-01-31")
    back = load_calibration(save_calibration(cal, tmp_path / "cal.json").path)
    assert back == cal and hash(back) == hash(cal)
    assert replay_scales(back, "h200") == {"default/single": 1.1, "expandable_segments/ddp": 0.9}
    assert json.loads((tmp_path / "cal.json").read_text())["devices"]["h200"]["reserved_replay_scale"] == {
        "default/single": 1.1, "expandable_segments/ddp": 0.9}
    gpu = resolve_gpu("h200")  # a memory constant is no rate: the time model's rates are the defaults
    assert rates_for(gpu, back).matmul_flops_per_s == default_rates(gpu).matmul_flops_per_s


def test_null_optional_rates_round_trip(tmp_path):
    """A null optional rate (not measured) loads, saves and loads again as None, and rates_for takes it."""
    data = _valid()
    data["devices"]["h200"].update(fp8_precise_matmul_flops_per_s=None, vllm_eager_s_per_kernel=None,
                                   sglang_eager_s_per_kernel=None)
    first = load_calibration(_file(tmp_path, data))
    saved = save_calibration(first, tmp_path / "again.json")
    again = load_calibration(saved.path)
    assert again.devices == first.devices
    for name in ("fp8_precise_matmul_flops_per_s", "vllm_eager_s_per_kernel", "sglang_eager_s_per_kernel"):
        assert again.device("h200").values()[name] is None
        assert json.loads((tmp_path / "again.json").read_text())["devices"]["h200"][name] is None
    assert rates_for(resolve_gpu("h200"), again).fp8_precise_matmul_flops_per_s is None


def test_null_is_refused_for_a_required_rate(tmp_path):
    data = _valid()
    data["devices"]["h200"]["matmul_flops_per_s"] = None
    with pytest.raises(CardError, match="matmul_flops_per_s must be a positive number, got None"):
        load_calibration(_file(tmp_path, data))


def test_created_is_optional_and_an_undated_file_round_trips(tmp_path):
    """docs/calibration.md "Format": ``created`` is optional; a hand-written file without it loads (undated) and is
    written back without it; when given it must still be an ISO date."""
    data = {"trainfit_calibration": 1, "devices": {"rtx4090": {"matmul_flops_per_s": 1.5e14}}}
    cal = load_calibration(_file(tmp_path, data))
    assert cal.created is None and cal.gpu_ids == ("rtx4090",)
    assert "created" not in calibration_to_dict(cal)
    back = load_calibration(save_calibration(cal, tmp_path / "again.json").path)
    assert back.created is None and back.devices == cal.devices
    with pytest.raises(CardError, match="created must be an ISO date such as '2025-01-31', got None"):
        load_calibration(_file(tmp_path, {**data, "created": None}))


def test_the_docs_smallest_hand_written_file_loads(tmp_path):
    """docs/calibration.md "Format" shows the smallest file (required keys only); it must load as shown."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "calibration.md").read_text()
    assert "are the only required ones" in doc
    line = next(t for t in doc.splitlines() if t.startswith('{"trainfit_calibration": 1, "devices"'))
    p = tmp_path / "cal_hand.json"
    p.write_text(line)
    assert load_calibration(p).created is None
