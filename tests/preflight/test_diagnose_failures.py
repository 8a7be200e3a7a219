"""`diagnose` reads the failures besides a CUDA OOM: an NCCL watchdog timeout, vLLM's KV-cache start-up errors and
a DeepSpeed op that failed to build (each exited 2 'no CUDA/HIP out-of-memory message').

The logs in data/logs/ follow the formats of the code that prints them (``trainfit.preflight.failures``):
ProcessGroupNCCL.cpp's WorkNCCL operator<< and watchdog timeout message (pytorch/pytorch @
cf1380dfb6c8552c8cdb791a85a89499775ad409), vLLM's ``_check_enough_kv_cache_memory`` (vLLM 0.34.0
``vllm/v1/core/kv_cache_planning.py`` l.106-126; the older ``models's`` spelling of vllm-project/vllm @
bbf906a88ba1a39104884c88c9811a4f968e4659 ``vllm/v1/core/kv_cache_utils.py``) and torch's
``_run_ninja_build(..., error_prefix=f"Error building extension '{name}'")`` (torch 2.13.0
``torch/utils/cpp_extension.py`` l.2546)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import invoke, write_card
from trainfit.preflight.diagnose import diagnose_log
from trainfit.preflight.failures import ExtensionBuildError, KvCacheShortage, NcclTimeout, last_failure
from trainfit.units import GIB

LOGS = Path(__file__).parent / "data" / "logs"
GRPO = ("model: Qwen/Qwen3-8B\nmethod: grpo\npreset: trl\nhardware: {gpu: a100-80gb, gpus_per_node: 8}\n"
        "rollout: {num_generations: 8, prompts_per_step: 64, prompt_len: 512, response_len: 4096,"
        " gpu_memory_utilization: 0.9}\n")


def _log(name: str) -> str:
    return (LOGS / name).read_text()


def test_nccl_watchdog_timeout_fields():
    t = last_failure(_log("nccl_watchdog_timeout.log"))
    assert t == NcclTimeout(rank=3, op="ALLREDUCE", seq=1234, numel_in=262144000, numel_out=262144000,
                            timeout_ms=600000, ran_ms=600012, text=t.text)
    # the older format (TensorShape, no NumelIn/Out) still names the op and the timeout
    old = last_failure("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST,"
                       " TensorShape=[1024], Timeout(ms)=1800000) ran for 1800427 milliseconds before timing out.")
    assert (old.op, old.seq, old.timeout_ms, old.ran_ms, old.numel_in) == ("BROADCAST", 7, 1800000, 1800427, None)


def test_nccl_timeout_names_op_timeout_causes_and_checks(tmp_path):
    res = invoke("diagnose", "--log", LOGS / "nccl_watchdog_timeout.log")
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert lines[0].startswith("failure: NCCL watchdog timeout: [Rank 3] Watchdog caught collective operation timeout")
    assert ("note: NCCL watchdog timeout on rank 3: collective ALLREDUCE (SeqNum 1234, 262144000 elements in, 262144000"
            " out) ran 600012 ms against a timeout of 600000 ms (10.0 min)") in lines
    assert any(line.startswith("note: likely causes:") and "OOM killer" in line and "desynchronised" in line
               and "slower" in line for line in lines)
    assert any(line.startswith("note: check:") and "TORCH_NCCL_DESYNC_DEBUG=1" in line for line in lines)
    assert not any("single-variable" in line or "fixes:" in line for line in lines)
    card = write_card(tmp_path / "card.yaml", GRPO)
    out = json.loads(invoke("diagnose", "--log", LOGS / "nccl_watchdog_timeout.log", "--card", card, "--json").output)
    assert out["failure"]["kind"] == "nccl-timeout" and out["failure"]["timeout_ms"] == 600000
    assert any(n.startswith("plan: step ") and "far under the timeout" in n for n in out["notes"])


def test_vllm_kv_errors_parse():
    none = last_failure(_log("vllm_no_kv_memory.log"))
    assert isinstance(none, KvCacheShortage) and none.reason == "none" and none.available_bytes == -1.25 * GIB
    short = last_failure(_log("vllm_kv_below_max_len.log"))
    assert (short.reason, short.max_model_len, short.needed_bytes, short.available_bytes, short.estimated_max_len) == (
        "max-len", 32768, 4.0 * GIB, 1.73 * GIB, 14160)
    # vLLM 0.34.0's spelling, with no estimate sentence (an estimate of 0 is not printed)
    new = last_failure("ValueError: To serve at least one request with the model's max seq len (8192), (1.00 GiB KV cache is"
                       " needed, which is larger than the available KV cache memory (0.25 GiB). Try increasing")
    assert (new.max_model_len, new.estimated_max_len) == (8192, None)


def test_vllm_kv_error_is_the_generation_symptom_and_replans_at_the_cards_shapes(tmp_path):
    card = write_card(tmp_path / "card.yaml", GRPO)
    res = invoke("diagnose", "--log", LOGS / "vllm_kv_below_max_len.log", "--card", card, "--json")
    assert res.exit_code == 0
    out = json.loads(res.output)
    assert out["symptom"]["key"] == "oom-generation" and out["phase_hint"] == "rollout"
    notes = out["notes"]
    assert any(n.startswith("plan: vLLM KV cache ") and "4608 tokens" in n for n in notes)
    assert any("set max_model_len to 4608" in n for n in notes)
    assert any("less KV cache than the plan" in n for n in notes)
    changes = [k["change"] for k in out["kv_fixes"]]
    assert any(c.startswith("rollout.gpu_memory_utilization 0.9 -> 0.95") for c in changes)
    assert any(c.startswith("rollout.max_num_seqs 256 -> 128") for c in changes)
    assert all(k["kv_after_bytes"] > k["kv_before_bytes"] for k in out["kv_fixes"])
    text = invoke("diagnose", "--log", LOGS / "vllm_no_kv_memory.log").output
    assert "symptom: OOM during generation (生成阶段 OOM)" in text
    assert "fixes: none computed (no card: --card re-plans the engine settings at its shapes)" in text


def test_deepspeed_build_error_says_which_op_and_how_to_fix(tmp_path):
    e = last_failure(_log("deepspeed_cpu_adam_build.log"))
    assert e == ExtensionBuildError(name="cpu_adam", deepspeed=True, ninja_missing=False, text="Error building extension 'cpu_adam'")
    card = write_card(tmp_path / "card.yaml", "model: Qwen/Qwen3-0.6B\nparallel: {strategy: zero3, offload: optimizer}\n")
    res = invoke("diagnose", "--log", LOGS / "deepspeed_cpu_adam_build.log", "--card", card)
    assert res.exit_code == 0
    text = res.output
    assert "DeepSpeed op 'cpu_adam' failed to build just in time" in text
    assert "DS_BUILD_CPU_ADAM=1 pip install deepspeed" in text and "DS_BUILD_OPS=1" in text and "prebuilt" in text
    assert "ninja" in text and "CUDA toolkit" in text
    assert "parallel.offload is optimizer" in text
    ninja = last_failure("RuntimeError: Unable to JIT load the fused_adam op due to ninja not being installed.")
    assert ninja.ninja_missing and ninja.deepspeed and ninja.name == "fused_adam"


def test_the_last_failure_in_the_log_wins_and_an_oom_comes_first():
    log = _log("deepspeed_cpu_adam_build.log") + "\n" + _log("nccl_watchdog_timeout.log")
    assert last_failure(log).kind == "nccl-timeout"
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of"
           " 79.25 GiB of which 1.00 GiB is free.")
    assert diagnose_log(_log("nccl_watchdog_timeout.log") + "\n" + oom).oom is not None
