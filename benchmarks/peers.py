"""Peer memory estimators for the accuracy table, each run in its own virtual environment.

Set the environments up with ``bash benchmarks/peers_env.sh`` (they live under ``.peers/``).

A *case* is a dict::

    {"hf_config": {...catalog-style HF config, may nest text_config...},
     "params_total": int, "largest_layer_params": int,
     "num_gpus": int, "gpus_per_node": int, "micro_batch_size": int, "seq_len": int,
     "gradient_checkpointing": bool, "dtype": "bf16", "strategy": "single"|"ddp"|"zero2"|"zero3"|"fsdp",
     "scope": "full"|"lora"|"qlora", "gpu_memory_bytes": int}

Every peer function returns the per-GPU figure in bytes (an ``int``) or ``Unsupported(reason)``.
Each has a ``*_many(cases)`` twin that sends the whole list to one subprocess (one interpreter
start and one library import per peer, not per case). The single-case functions call those.

This module is also the worker: ``python peers.py --worker KIND IN.json OUT.json`` runs inside the
peer's venv and imports only the standard library and that peer. Run ``python benchmarks/peers.py``
for the self-test against GROUND_TRUTH §7.

None of the peers models LoRA/QLoRA (they all count every parameter as trained with Adam), so a
case whose scope is not "full" is Unsupported for every peer.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / ".peers"
GiB = 2**30


@dataclass(frozen=True)
class Unsupported:
    """The peer has no figure for this case; ``reason`` says why (one line)."""

    reason: str

    def to_json(self) -> dict[str, str]:
        return {"unsupported": self.reason}


Result = int | Unsupported


def _python(kind: str) -> Path:
    """The interpreter of a peer's venv (accelerate: the main .venv unless .peers/accelerate exists)."""
    env_var = {"deepspeed": "TRAINFIT_PEER_DEEPSPEED_PY", "llm-analysis": "TRAINFIT_PEER_LLM_ANALYSIS_PY",
               "accelerate": "TRAINFIT_PEER_ACCELERATE_PY"}[kind]
    if os.environ.get(env_var):
        return Path(os.environ[env_var])
    if kind == "accelerate":
        own = PEERS / "accelerate" / "bin" / "python"
        return own if own.exists() else ROOT / ".venv" / "bin" / "python"
    return PEERS / kind / "bin" / "python"


class PeerEnvMissing(RuntimeError):
    pass


def _run_worker(kind: str, payloads: list[dict[str, Any]], timeout: float = 600) -> list[Any]:
    """Send a JSON list to the worker in the peer's venv; get a JSON list back (same length)."""
    if not payloads:
        return []
    py = _python(kind)
    if not py.exists():
        raise PeerEnvMissing(f"{kind}: no interpreter at {py}; run `bash benchmarks/peers_env.sh`")
    with tempfile.TemporaryDirectory(prefix="trainfit-peer-") as tmp:
        src, dst = Path(tmp, "in.json"), Path(tmp, "out.json")
        src.write_text(json.dumps(payloads))
        env = dict(os.environ, DS_BUILD_OPS="0", DS_ACCELERATOR="cpu", TRANSFORMERS_VERBOSITY="error",
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONWARNINGS="ignore")
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([str(py), str(Path(__file__).resolve()), "--worker", kind, str(src), str(dst)],
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        if proc.returncode != 0 or not dst.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"{kind} worker failed (rc {proc.returncode}): " + " | ".join(tail))
        out = json.loads(dst.read_text())
    if len(out) != len(payloads):
        raise RuntimeError(f"{kind} worker returned {len(out)} results for {len(payloads)} cases")
    return out


def _decode(x: Any) -> Result:
    if isinstance(x, dict) and "unsupported" in x:
        return Unsupported(x["unsupported"])
    return int(x)


def _dispatch(kind: str, cases: list[dict[str, Any]], prepare) -> list[Result]:
    """prepare(case) -> payload dict or Unsupported; only payloads go to the worker."""
    results: list[Result | None] = []
    payloads: list[dict[str, Any]] = []
    slots: list[int] = []
    for i, case in enumerate(cases):
        p = prepare(case)
        if isinstance(p, Unsupported):
            results.append(p)
        else:
            results.append(None)
            payloads.append(p)
            slots.append(i)
    for i, r in zip(slots, _run_worker(kind, payloads)):
        results[i] = _decode(r)
    return results  # type: ignore[return-value]


def _full_scope_only(case: dict[str, Any]) -> Unsupported | None:
    if case.get("scope", "full") != "full":
        return Unsupported(f"scope '{case['scope']}': the peer models full fine-tuning only (every parameter trained with Adam)")
    return None


def _topology(case: dict[str, Any]) -> tuple[int, int] | Unsupported:
    n = int(case.get("num_gpus", 1))
    per_node = int(case.get("gpus_per_node", n) or n)
    if n <= per_node:
        return n, 1
    if n % per_node:
        return Unsupported(f"num_gpus {n} is not a multiple of gpus_per_node {per_node}")
    return per_node, n // per_node


# --------------------------------------------------------------------------------------------
# DeepSpeed 0.19.8
# --------------------------------------------------------------------------------------------

def _ds_prepare(stage: int):
    def prepare(case: dict[str, Any]):
        bad = _full_scope_only(case)
        if bad:
            return bad
        topo = _topology(case)
        if isinstance(topo, Unsupported):
            return topo
        per_node, nodes = topo
        return {"stage": stage, "total_params": int(case["params_total"]),
                "largest_layer_params": int(case.get("largest_layer_params") or 0),
                "num_gpus_per_node": per_node, "num_nodes": nodes}
    return prepare


def deepspeed_zero2_many(cases: list[dict[str, Any]]) -> list[Result]:
    return _dispatch("deepspeed", cases, _ds_prepare(2))


def deepspeed_zero3_many(cases: list[dict[str, Any]]) -> list[Result]:
    return _dispatch("deepspeed", cases, _ds_prepare(3))


def deepspeed_zero2(case: dict[str, Any]) -> Result:
    """DeepSpeed's ZeRO-2 model-states estimate per GPU, no offload.

    Calls ``deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs(total_params,
    num_gpus_per_node, num_nodes, cpu_offload=False)`` (the function behind ``..._all_cold``):
    ``2·P + 18·P / n_gpus`` bytes (bf16 params replicated; bf16+fp32 grads, fp32 master and Adam
    moments sharded).

    Models: model states only, mixed precision with fp32 master weights, every parameter trained.
    Ignores: activations, checkpointing, batch and sequence, temporary buffers, the CUDA context,
    allocator fragmentation, frozen parameters (LoRA), pure-bf16 training (no master copy).
    """
    return deepspeed_zero2_many([case])[0]


def deepspeed_zero3(case: dict[str, Any]) -> Result:
    """DeepSpeed's ZeRO-3 model-states estimate per GPU, no offload.

    Calls ``deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs(total_params,
    largest_layer_params, num_gpus_per_node, num_nodes, cpu_offload=False, cpu_offload_params=False)``:
    ``4·largest_layer + 18·P / n_gpus`` bytes (everything sharded, plus one gathered fp32-sized layer).

    Models: model states only, mixed precision with fp32 master weights, every parameter trained,
    one gathered layer. Ignores: activations, checkpointing, batch and sequence, prefetch buckets,
    the CUDA context, fragmentation, frozen parameters, pure-bf16 training.
    """
    return deepspeed_zero3_many([case])[0]


def _worker_deepspeed(payloads: list[dict[str, Any]]) -> list[Any]:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    out: list[Any] = []
    for p in payloads:
        if p["stage"] == 2:
            _cpu, gpu = estimate_zero2_model_states_mem_needs(
                p["total_params"], num_gpus_per_node=p["num_gpus_per_node"], num_nodes=p["num_nodes"],
                cpu_offload=False)
        else:
            _cpu, gpu, _largest = estimate_zero3_model_states_mem_needs(
                p["total_params"], p["largest_layer_params"], num_gpus_per_node=p["num_gpus_per_node"],
                num_nodes=p["num_nodes"], cpu_offload=False, cpu_offload_params=False)
        out.append(int(gpu))
    return out


# --------------------------------------------------------------------------------------------
# accelerate 1.15 (estimate-memory, offline)
# --------------------------------------------------------------------------------------------

_ACC_DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
               "fp32": "float32", "float32": "float32"}


def _acc_prepare(with_lm_head: bool):
    def prepare(case: dict[str, Any]):
        bad = _full_scope_only(case)
        if bad:
            return bad
        if int(case.get("num_gpus", 1)) != 1 or case.get("strategy", "single") not in ("single", "ddp"):
            return Unsupported("accelerate estimate-memory has no multi-GPU or sharded figure")
        dtype = _ACC_DTYPES.get(str(case.get("dtype", "bf16")))
        if dtype is None:
            return Unsupported(f"dtype '{case.get('dtype')}' has no accelerate training figure")
        return {"hf_config": case["hf_config"], "dtype": dtype, "with_lm_head": with_lm_head}
    return prepare


def accelerate_estimate_many(cases: list[dict[str, Any]], *, with_lm_head: bool = False) -> list[Result]:
    return _dispatch("accelerate", cases, _acc_prepare(with_lm_head))


def accelerate_estimate(case: dict[str, Any], *, with_lm_head: bool = False) -> Result:
    """accelerate's "Training using Adam" figure for one GPU.

    As ``accelerate estimate-memory`` does (it needs the hub, so offline we do it by hand): build
    ``transformers.AutoModel`` (the base model, no ``lm_head``) from the config on the meta device
    in fp32, ``total_size, _ = accelerate.utils.calculate_maximum_sizes(model)``, then
    ``max(accelerate.commands.estimate.estimate_training_usage(total_size, dtype).values())``.
    For bf16/fp16 that is the optimizer term, 8 B/param; for fp32, the "step" term, 16 B/param.
    ``with_lm_head=True`` builds ``AutoModelForCausalLM`` instead, which adds an untied head
    (the CLI does not: Qwen3-8B counts 7,568,405,504 parameters without it, 8,190,735,360 with).

    Models: the largest single component of (weights, grads, Adam states, step) - not their sum.
    Ignores: activations, batch, sequence, checkpointing, the sum of components, the CUDA
    context, fragmentation, frozen parameters, multi-GPU (Unsupported).
    """
    return accelerate_estimate_many([case], with_lm_head=with_lm_head)[0]


def _decoder_config(cfg: dict[str, Any]) -> dict[str, Any]:
    dec = dict(cfg.get("text_config") or cfg)
    if "model_type" not in dec and "model_type" in cfg:
        dec["model_type"] = cfg["model_type"]
    if dec.get("model_type") == "qwen3_5":
        dec["model_type"] = "qwen3_5_text"
    dec.pop("full_attention_interval", None)
    return dec


def _worker_accelerate(payloads: list[dict[str, Any]]) -> list[Any]:
    import torch
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    try:  # the project's own unwrapping when importable, so the peer sees the same decoder
        from trainfit.trace.hf_build import build_hf_config
    except Exception:  # noqa: BLE001 - the peer venv may not have trainfit
        build_hf_config = None
    out: list[Any] = []
    for p in payloads:
        try:
            if build_hf_config is not None:
                cfg = build_hf_config(p["hf_config"])
            else:
                dec = _decoder_config(p["hf_config"])
                cfg = AutoConfig.for_model(dec.pop("model_type"), **dec)
            cls = AutoModelForCausalLM if p["with_lm_head"] else AutoModel
            with torch.device("meta"):
                model = cls.from_config(cfg, dtype=torch.float32)
            total_size, _largest = calculate_maximum_sizes(model)
            usage = estimate_training_usage(total_size, p["dtype"])
            figure = max(usage.values())
            out.append(int(figure) if figure != -1 else {"unsupported": f"no figure for {p['dtype']}"})
        except Exception as e:  # noqa: BLE001
            out.append({"unsupported": f"accelerate could not build the model: {type(e).__name__}: {e}"[:300]})
    return out


# --------------------------------------------------------------------------------------------
# llm-analysis 0.2.2
# --------------------------------------------------------------------------------------------

_LA_ZERO = {"single": 0, "ddp": 0, "zero1": 1, "zero2": 2, "fsdp_grad_op": 2, "zero3": 3, "fsdp": 3}


def _la_prepare(case: dict[str, Any]):
    bad = _full_scope_only(case)
    if bad:
        return bad
    strategy = case.get("strategy", "single")
    if strategy not in _LA_ZERO:
        return Unsupported(f"strategy '{strategy}' has no llm-analysis equivalent")
    if str(case.get("dtype", "bf16")) not in ("bf16", "fp16", "bfloat16", "float16"):
        return Unsupported("llm-analysis models 16-bit weights with an fp32 master copy only")
    dec = _decoder_config(case["hf_config"])
    if any(t != "full_attention" for t in dec.get("layer_types") or ()):
        return Unsupported("llm-analysis has no linear-attention (Gated DeltaNet) layers")
    h = int(dec["hidden_size"])
    n_head = int(dec["num_attention_heads"])
    kv = int(dec.get("num_key_value_heads") or n_head)
    head_dim = int(dec.get("head_dim") or h // n_head)
    if head_dim * n_head != h:
        return Unsupported(f"head_dim·heads = {head_dim * n_head} != hidden {h}: llm-analysis assumes head_dim = hidden/heads")
    experts = int(dec.get("num_experts") or dec.get("num_local_experts") or 1)
    top_k = int(dec.get("num_experts_per_tok") or 1) if experts > 1 else 1
    inter = int(dec.get("moe_intermediate_size") or dec["intermediate_size"]) if experts > 1 else int(dec["intermediate_size"])
    if experts > 1 and dec.get("shared_expert_intermediate_size"):
        return Unsupported("llm-analysis has no shared experts")
    if experts > 1 and (dec.get("mlp_only_layers") or int(dec.get("decoder_sparse_step", 1) or 1) != 1):
        return Unsupported("llm-analysis assumes every layer is MoE")
    ffn = 3 * inter // 2  # SwiGLU has 3 matrices; llm-analysis counts 2·h·ffn
    topo = _topology(case)
    if isinstance(topo, Unsupported):
        return topo
    n = int(case.get("num_gpus", 1))
    per_node = topo[0]
    model = {"name": f"trainfit-case-{abs(hash(json.dumps(dec, sort_keys=True)))}",
             "num_layers": int(dec["num_hidden_layers"]), "n_head": n_head, "hidden_dim": h,
             "vocab_size": int(dec["vocab_size"]), "max_seq_len": int(case["seq_len"]),
             "num_key_value_heads": kv, "ffn_embed_dim": ffn, "expansion_ratio": ffn / h,
             "model_type": dec.get("model_type"), "moe_num_experts": experts, "moe_top_k": top_k}
    return {"model": model, "gpu_memory_bytes": int(case["gpu_memory_bytes"]),
            "batch_size_per_gpu": int(case["micro_batch_size"]), "seq_len": int(case["seq_len"]),
            "activation_recomputation": 2 if case.get("gradient_checkpointing") else 0,
            "ds_zero": _LA_ZERO[strategy] if n > 1 else 0, "total_num_gpus": n,
            "num_gpus_per_node": per_node,
            # pure bf16 (the project's default: bf16 params, no master, AdamW states in bf16) -> its
            # "master copy" is 2 B and the Adam moments 2+2 B; a fp32 master / fp32 states -> 4 / 8 B.
            "master_weights_dtype_bytes": 4 if case.get("master_weights", "none") == "fp32" else 2,
            "other_op_bytes": 8 if case.get("optimizer_states", "same_as_weights") == "fp32" else 4}


def llm_analysis_many(cases: list[dict[str, Any]]) -> list[Result]:
    return _dispatch("llm-analysis", cases, _la_prepare)


def llm_analysis(case: dict[str, Any]) -> Result:
    """llm-analysis's per-GPU training peak: ``(weight+op_state+grad+act)_memory_per_gpu``.

    Calls ``llm_analysis.analysis.train(model_name=<json>, gpu_name=<registered card>,
    dtype_name="w16a16e16", batch_size_per_gpu, seq_len, activation_recomputation=FULL if
    checkpointing else NONE, ds_zero=0|2|3 (fsdp -> 3), total_num_gpus, flash_attn=True)``.
    The model JSON carries the GQA heads; SwiGLU is mapped to its 2-matrix MLP with
    ``ffn_embed_dim = 1.5·intermediate`` and an explicit ``expansion_ratio = ffn_embed_dim/hidden``
    (so the MLP parameter count matches; the ratio also scales its MLP activation term).
    The card is registered with the case's ``gpu_memory_bytes`` (as GiB). Precision: the case's
    ``dtype`` "bf16" is pure bf16 (the project's default), so ``master_weights_dtype_bytes=2`` and
    ``other_op_bytes=4`` (bf16 Adam moments): 2 (weights) + 2 (grads, in the master dtype) + 2+4
    (master + moments) = 10 B/param. Optional case keys ``master_weights: "fp32"`` and
    ``optimizer_states: "fp32"`` give the mixed-precision 4 and 8 B (18 B/param in all).

    Models: 16-bit weights + a master copy (always, even when training is pure bf16) + Adam
    moments, gradients in the master dtype, activations
    (flash attention; full recompute keeps the layer inputs), ZeRO sharding.
    Ignores / limits: always ties the embeddings (an untied lm_head is missing), q/k norms and
    biases, shared experts, linear attention, head_dim != hidden/heads, pure-bf16 training,
    temporary buffers, logits, the CUDA context and fragmentation.
    Unsupported where it refuses (the batch does not fit the card) or cannot express the model.
    """
    return llm_analysis_many([case])[0]


def _worker_llm_analysis(payloads: list[dict[str, Any]]) -> list[Any]:
    import logging
    import tempfile as _tf

    from llm_analysis import analysis as la
    from llm_analysis.config import GPUConfig, gpu_configs

    logging.disable(logging.CRITICAL)
    out: list[Any] = []
    with _tf.TemporaryDirectory() as tmp:
        for i, p in enumerate(payloads):
            gib = p["gpu_memory_bytes"] / 2**30   # llm-analysis multiplies mem_per_GPU_in_GB by 1024**3
            gpu_name = f"trainfit-{p['gpu_memory_bytes']}"
            gpu_configs[gpu_name] = GPUConfig(
                name=gpu_name, mem_per_GPU_in_GB=gib, hbm_bandwidth_in_GB_per_sec=2000,
                intra_node_bandwidth_in_GB_per_sec=300, intra_node_min_message_latency=8e-06,
                peak_fp16_TFLOPS=312)
            model = dict(p["model"], name=f"{p['model']['name']}-{i}")
            path = Path(tmp, f"model{i}.json")
            path.write_text(json.dumps(model))
            try:
                s = la.train(model_name=str(path), gpu_name=gpu_name, dtype_name="w16a16e16",
                             log_level="CRITICAL", batch_size_per_gpu=p["batch_size_per_gpu"],
                             gradient_accumulation_steps=1, seq_len=p["seq_len"],
                             activation_recomputation=p["activation_recomputation"], ds_zero=p["ds_zero"],
                             total_num_gpus=p["total_num_gpus"], num_gpus_per_node=p["num_gpus_per_node"],
                             flash_attn=True, master_weights_dtype_bytes=p["master_weights_dtype_bytes"],
                             other_op_bytes=p["other_op_bytes"])
                out.append(int(s["(weight+op_state+grad+act)_memory_per_gpu"]))
            except (AssertionError, ValueError) as e:
                out.append({"unsupported": f"llm-analysis refused: {e}".splitlines()[0][:300]})
    return out


# --------------------------------------------------------------------------------------------
# worker entry and self-test
# --------------------------------------------------------------------------------------------

_WORKERS = {"deepspeed": _worker_deepspeed, "accelerate": _worker_accelerate, "llm-analysis": _worker_llm_analysis}


def _worker_main(kind: str, src: str, dst: str) -> None:
    payloads = json.loads(Path(src).read_text())
    Path(dst).write_text(json.dumps(_WORKERS[kind](payloads)))


QWEN3_8B = {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False,
            "max_position_embeddings": 40960, "attention_bias": False, "model_type": "qwen3"}


def _qwen3_8b_case(**kw: Any) -> dict[str, Any]:
    case = {"hf_config": QWEN3_8B, "params_total": 8_190_735_360, "largest_layer_params": 151936 * 4096,
            "num_gpus": 1, "gpus_per_node": 8, "micro_batch_size": 1, "seq_len": 2048,
            "gradient_checkpointing": False, "dtype": "bf16", "strategy": "single", "scope": "full",
            "gpu_memory_bytes": 143771 * 2**20}   # an H200: the 1-GPU figures exceed 80 GB
    case.update(kw)
    return case


def self_test() -> int:
    """Qwen3-8B, micro-batch 1, seq 2048, GiB per GPU: GROUND_TRUTH §7's table."""
    one = _qwen3_8b_case()
    fsdp8 = _qwen3_8b_case(num_gpus=8, strategy="fsdp")
    fsdp8_ckpt = _qwen3_8b_case(num_gpus=8, strategy="fsdp", gradient_checkpointing=True)
    rows: list[tuple[str, Any, float | None]] = []
    t = time.perf_counter()
    ds = deepspeed_zero3_many([one, fsdp8])
    rows += [("DeepSpeed ZeRO-3, 1 GPU", ds[0], 139.63), ("DeepSpeed ZeRO-3, 8 GPUs", ds[1], 19.48)]
    ds2 = deepspeed_zero2_many([one, fsdp8])
    rows += [("DeepSpeed ZeRO-2, 1 GPU", ds2[0], None), ("DeepSpeed ZeRO-2, 8 GPUs", ds2[1], None)]
    t_ds = time.perf_counter() - t
    t = time.perf_counter()
    la = llm_analysis_many([one, fsdp8, fsdp8_ckpt, _qwen3_8b_case(gpu_memory_bytes=81559 * 2**20)])
    rows += [("llm-analysis, 1 GPU", la[0], 83.82), ("llm-analysis, FSDP 8", la[1], 22.14),
             ("llm-analysis, FSDP 8 + ckpt", la[2], 10.53), ("llm-analysis, 1 GPU on an 80 GB card", la[3], None)]
    t_la = time.perf_counter() - t
    t = time.perf_counter()
    acc_head = accelerate_estimate_many([one, fsdp8], with_lm_head=True)
    acc_cli = accelerate_estimate_many([one])
    rows += [("accelerate bf16, CausalLM (with lm_head)", acc_head[0], 61.03),
             ("accelerate bf16, AutoModel as the CLI", acc_cli[0], None),
             ("accelerate, FSDP 8", acc_head[1], None)]
    t_acc = time.perf_counter() - t
    failures = 0
    print(f"{'case':44} {'GiB':>10} {'expected':>9}  ok")
    for name, got, want in rows:
        if isinstance(got, Unsupported):
            shown, ok = "n/a", want is None
            print(f"{name:44} {shown:>10} {'' if want is None else want:>9}  {'ok' if ok else 'FAIL'}  ({got.reason})")
        else:
            gib = got / GiB
            ok = want is None or math.isclose(round(gib, 2), want, abs_tol=0.011)
            print(f"{name:44} {gib:10.2f} {'' if want is None else want:>9}  {'ok' if ok else 'FAIL'}")
        failures += not ok
    print(f"timing: deepspeed {t_ds:.1f}s (2 calls), llm-analysis {t_la:.1f}s, accelerate {t_acc:.1f}s (2 calls)")
    lora = deepspeed_zero3(_qwen3_8b_case(scope="lora"))
    print(f"LoRA case -> {lora}")
    failures += not isinstance(lora, Unsupported)
    print("self-test:", "PASS" if not failures else f"{failures} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        _worker_main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(self_test())
