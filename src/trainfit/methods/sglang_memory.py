"""SGLang's default ``mem_fraction_static``: the engine budget of a card whose SGLang engine states none.

miles and slime hand SGLang its own ``ServerArgs`` defaults for every ``--sglang-*`` option not given
(radixark/miles miles/backends/sglang_utils/sglang_engine.py l.806-811 @748935dc7155d4990d02d62f6061c50ef8054051:
``kwargs[attr.name] = getattr(args, f"sglang_{attr.name}")`` over ``dataclasses.fields(ServerArgs)``), and
``ServerArgs.mem_fraction_static`` defaults to None, which ``_handle_gpu_memory_settings`` then sets by a rule on the
GPU's memory and the engine's TP size. Read in the sglang 0.5.15.post1 wheel (slime's image,
``SGLANG_IMAGE_TAG=v0.5.15.post1-cu129``, THUDM/slime docker/Dockerfile l.1 @624b824a898ab0ec1fcb4d373004c7f3852bf515;
https://pypi.org/project/sglang/0.5.15.post1/, sglang/srt/server_args.py, read 2026-12-05) and checked against the
0.5.16 wheel (miles' base image, ``SGLANG_IMAGE_TAG=v0.5.16``, radixark/miles docker/Dockerfile l.14 @748935dc; miles
builds its ``sglang-miles`` branch at no pinned commit, ``SGLANG_COMMIT=""`` l.20, so 0.5.16's rule is the nearest
pinned reading), whose heuristic path is the same at its defaults (``SGLANG_ENABLE_POST_CAPTURE_KV_SIZING`` False,
sglang/srt/environ.py l.337; server_args.py l.4054-4090, ``reserve_for_graph_mb`` l.4164-4196):

1. ``gpu_mem``: ``nvidia-smi --query-gpu=memory.total`` in MiB, the smallest card's (sglang/srt/utils/common.py
   l.638-668), the catalog's ``memory_bytes`` / 2**20; None (unknown) gives 0.88.
2. ``chunked_prefill_size`` and the decode CUDA graph ``max_bs`` by ``gpu_mem`` (server_args.py l.3497-3550):
   < 20 GiB 2048 / 8; < 35 GiB 2048 / 24 (TP < 4) or 80; < 60 GiB 4096 / 32 or 160; < 90 GiB and < 160 GiB 8192 /
   256 or 512; else 16384 / 512.
3. The prefill CUDA graph is Breakable on CUDA (model_executor/cuda_graph_config.py l.95-101), disabled for an MLA
   model and for an engine with LoRA (server_args.py l.3350-3384); where it runs it captures the token counts
   ``_generate_prefill_cuda_graph_batch_sizes`` lists up to ``chunked_prefill_size`` (l.3586-3591, l.3759-3776).
4. ``reserved_mem`` MiB = 512 + max(chunked_prefill_size, 2048) x 1.5 + decode max_bs x 2 + tp x pp / 8 x 1024
   + 8 per prefill graph size, at least 10 x 1024 on a card over 60 GiB (l.3623-3673); the fraction is
   ``round((gpu_mem - reserved_mem) / gpu_mem, 3)`` (l.3686-3690).

Not modelled (a card stating ``rollout.gpu_memory_utilization`` covers them): DP attention, DeepEP all-to-all,
speculative decoding, prefill/decode disaggregation, a multimodal model's lowering, pipeline-parallel engines
(``pp`` 1), and the other rules that turn the prefill graph off (DeepSeek-V4, attention context parallel).
SGLang's fraction counts weights and KV pool only (activations and graphs are the reserve); the card's
``gpu_memory_utilization`` carries it as the engine's share, as a stated ``--sglang-mem-fraction-static`` is.
Pure: no torch, no I/O.
"""

from __future__ import annotations

SGLANG_MEM_FRACTION_SOURCE = ("SGLang ServerArgs mem_fraction_static rule, sglang 0.5.15.post1"
                              " server_args.py _handle_gpu_memory_settings l.3469-3690")
"""Where the rule was read (module docstring)."""
SGLANG_UNKNOWN_GPU_MEM_FRACTION = 0.88
"""``mem_fraction_static`` when the GPU's memory is unknown (server_args.py l.3686-3690)."""

_MIB_PER_GIB = 1024
_TIERS: tuple[tuple[float, int, int, int], ...] = (
    # (gpu_mem below, GiB; chunked_prefill_size; decode max_bs at TP < 4; at TP >= 4), server_args.py l.3497-3543
    (20, 2048, 8, 8),
    (35, 2048, 24, 80),
    (60, 4096, 32, 160),
    (90, 8192, 256, 512),
    (160, 8192, 256, 512),
)
_LARGEST_TIER = (16384, 512, 512)
"""B200 / MI300 and larger (l.3544-3550)."""


def sglang_chunk_and_decode_bs(*, gpu_memory_mib: float, tp_size: int) -> tuple[int, int]:
    """``(chunked_prefill_size, decode CUDA graph max_bs)`` SGLang picks for the card (module docstring 2.)."""
    for below_gib, chunk, bs_small_tp, bs_large_tp in _TIERS:
        if gpu_memory_mib < below_gib * _MIB_PER_GIB:
            return chunk, (bs_small_tp if tp_size < 4 else bs_large_tp)
    chunk, bs, _ = _LARGEST_TIER
    return chunk, bs


def sglang_prefill_graph_sizes(*, max_tokens: int) -> int:
    """How many token counts the prefill CUDA graph captures up to ``max_tokens`` (server_args.py l.3759-3776)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1024 + 1, 64)) + list(range(1280, 4096 + 1, 256))
             + list(range(4608, max_tokens + 1, 512)))
    return sum(1 for s in sizes if s <= max_tokens)


def sglang_mem_fraction_static(*, gpu_memory_mib: float | None, tp_size: int, mla: bool = False,
                               lora: bool = False) -> float:
    """SGLang's default ``mem_fraction_static`` for an engine of ``tp_size`` GPUs of ``gpu_memory_mib`` (nvidia-smi
    total) serving an MLA model or not, with LoRA or not (module docstring 1.-4.)."""
    if gpu_memory_mib is None:
        return SGLANG_UNKNOWN_GPU_MEM_FRACTION
    chunk, decode_bs = sglang_chunk_and_decode_bs(gpu_memory_mib=gpu_memory_mib, tp_size=tp_size)
    reserved_mib = 512 + max(chunk, 2048) * 1.5 + decode_bs * 2 + tp_size * 1 / 8 * 1024
    if not (mla or lora):
        reserved_mib += sglang_prefill_graph_sizes(max_tokens=chunk) * 8
    if gpu_memory_mib > 60 * _MIB_PER_GIB:
        reserved_mib = max(reserved_mib, 10 * _MIB_PER_GIB)
    return round((gpu_memory_mib - reserved_mib) / gpu_memory_mib, 3)
