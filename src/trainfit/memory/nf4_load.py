"""Loading a QLoRA model with torchao 0.1's NF4 tensor: the reserved bytes its quantization leaves cached.

torchtune's QLoRA before May 2024 (pytorch/torchtune @fef3ed10dc9efe9e35b118e4397e84c680c0a737, 2024-04-16:
``pyproject.toml`` pins ``torchao==0.1``) builds every LoRA-wrapped linear on the GPU in bf16 and converts it
with ``to_nf4`` (``torchtune/modules/peft/lora.py`` ``_create_weight_and_bias``), then loads the checkpoint
with ``model.load_state_dict``, whose ``copy_`` into an NF4 weight runs ``to_nf4(src.to(device))`` again
(``torchtune/utils/_register_nf4_dispatch_ops.py`` ``inplace_copy``). torchao 0.1's
``NF4Tensor.from_tensor`` (pytorch/ao ``torchao/dtypes/nf4tensor.py`` at v0.1,
ff2889540075e8c8d0a2f4b9900da1b9136ae376) finds each element's nearest NF4 code with
``(value.unsqueeze(-1) - nf4).abs()``: two ``numel × 16`` bf16 tensors (64 B per weight element) alive at
once beside the bf16 input and the scaled blocks, then ``min(dim=-1)`` (bf16 values and int64 indices).
torchao 0.2 quantizes in chunks of 2^20 elements (pytorch/ao@6081796bc, 2024-05-01, "perform in chunks
(#196)": "This can cause a large memory spike"), so the spike is gone from 0.2 on.

The caching allocator keeps the segments these temporaries needed (one size for the attention
projections, one for the MLP's), so the reserved high-water after loading is far above the weights
(``torch.cuda.max_memory_reserved`` includes it for the whole run). It is replayed here op by op through
``trainfit.memory.caching_allocator`` (one GPU, default allocator settings, no ``empty_cache``).

Pure: no torch.
"""

from __future__ import annotations

from functools import lru_cache

from trainfit.memory.caching_allocator import CachingAllocator
from trainfit.memory.lora import targeted_groups
from trainfit.memory.params import linear_groups, param_breakdown
from trainfit.spec.card import pin_before
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import LoraSpec

BF16 = 2
INT64 = 8
# torchao's NF4 defaults: ``to_nf4(tensor, block_size: int = 64, scaler_block_size: int = 256)``, a 16-entry NF4 code
# table (pytorch/ao torchao/dtypes/nf4tensor.py @38cb64cc5d17f17da1319625310fe5d406dd5370).
NF4_BLOCK = 64  # torchao/dtypes/nf4tensor.py to_nf4 block_size
SCALER_BLOCK = 256  # torchao/dtypes/nf4tensor.py @38cb64cc to_nf4 scaler_block_size
NF4_CODES = 16  # 4-bit codes: 2**4 entries of the NF4 table
CHUNKED_SINCE = (0, 2)
"""torchao quantizes NF4 in 2^20-element chunks from 0.2 on (pytorch/ao@6081796bc, "perform in chunks (#196)",
2024-05-01: ``CHUNK_SIZE = 1024**2`` in torchao/dtypes/nf4tensor.py; an ancestor of tag v0.2.0, not of v0.1)."""


def spikes(torchao_version: str | None) -> bool:
    """True for a torchao pin before 0.2 (``0.1``, ``==0.1``, ``0.1.0``); None or unparsable: False."""
    return pin_before(torchao_version, CHUNKED_SINCE)


def _to_nf4(a: CachingAllocator, n: int) -> list:
    """torchao 0.1 ``NF4Tensor.from_tensor`` of an ``n``-element bf16 weight already on the GPU: its
    temporaries in order, freed as the code drops them; returns the blocks the NF4 tensor keeps."""
    nb, nsb = n // NF4_BLOCK, n // NF4_BLOCK // SCALER_BLOCK
    keep = [a.malloc(NF4_CODES * BF16)]  # the nf4 code table, one per tensor
    # double_quantize_scalers: block absmax (abs, then max values + indices), minus the mean, per-256 absmax
    t, v, i = a.malloc(BF16 * n), a.malloc(BF16 * nb), a.malloc(INT64 * nb)
    a.release(t), a.release(i)
    mean, s1 = a.malloc(BF16), a.malloc(BF16 * nb)
    a.release(v)
    t, v2, i2 = a.malloc(BF16 * nb), a.malloc(BF16 * nsb), a.malloc(INT64 * nsb)
    a.release(t), a.release(i2)
    two, factor = a.malloc(BF16 * nb), a.malloc(BF16 * nb)  # 256 / (2 * absmax expanded): a full-size result
    a.release(two), a.release(v2)
    q1, q2 = a.malloc(BF16 * nb), a.malloc(BF16 * nb)  # * factor, round
    a.release(q1)
    q3 = a.malloc(BF16 * nb)  # clamp
    a.release(q2)
    q8 = a.malloc(nb)  # .to(int8)
    a.release(q3), a.release(s1)
    keep += [mean, factor, q8]  # factor[:, 0] is a view: the full-size storage stays
    # convert_to_norm_float_weight: absmax again, scaled blocks, the (n, 16) differences and their min
    t, v, i = a.malloc(BF16 * n), a.malloc(BF16 * nb), a.malloc(INT64 * nb)
    a.release(t), a.release(i)
    scaled = a.malloc(BF16 * n)
    a.release(v)
    d1 = a.malloc(NF4_CODES * BF16 * n)  # value - nf4
    d2 = a.malloc(NF4_CODES * BF16 * n)  # .abs()
    a.release(d1)
    mv, mi = a.malloc(BF16 * n), a.malloc(INT64 * n)  # min(dim=-1): values, indices
    a.release(mv), a.release(d2), a.release(scaled)
    shifted = a.malloc(INT64 * n // 2)
    packed = a.malloc(INT64 * n // 2)
    a.release(shifted)
    data = a.malloc(n // 2)  # .to(uint8): two codes per byte
    a.release(packed), a.release(mi)
    keep.append(data)
    return keep


@lru_cache(maxsize=256)
def load_reserved_bytes(spec: ModelSpec, lora: LoraSpec) -> tuple[int, int]:
    """(peak allocated, reserved) bytes after torchtune builds and loads a QLoRA model with torchao 0.1 NF4
    on one GPU: per decoder layer its LoRA-wrapped linears (bf16, then ``to_nf4``, the bf16 freed), the
    adapters (bf16) and the layer's other weights; then the embedding, final norm and head in bf16; then
    ``load_state_dict``: each NF4 weight re-quantized from a bf16 copy of the checkpoint's tensor, its old
    NF4 blocks freed. Linears no adapter wraps stay bf16 (torchtune quantizes only ``LoRALinear`` bases)."""
    a = CachingAllocator()
    targeted = {g.name for g in targeted_groups(spec, lora)}
    groups = [g for g in linear_groups(spec) if not g.is_fused_experts]
    pb = param_breakdown(spec)
    layers = spec.num_layers
    nf4: dict[tuple[int, str], list] = {}
    other_per_layer = max(0, pb.other // max(1, layers))
    for layer in range(layers):
        for g in groups:
            if layer >= g.count:
                continue
            n = g.in_features * g.out_features
            if g.name in targeted:
                w = a.malloc(BF16 * n)
                nf4[(layer, g.name)] = _to_nf4(a, n)
                a.release(w)
                r = lora.rank * g.lora_rank_multiplier
                a.malloc(BF16 * r * g.in_features), a.malloc(BF16 * r * g.out_features)
            else:
                a.malloc(BF16 * n)
        if other_per_layer:
            a.malloc(BF16 * other_per_layer)
    a.malloc(BF16 * pb.embedding)
    if pb.lm_head:
        a.malloc(BF16 * pb.lm_head)
    for (layer, name), blocks in list(nf4.items()):
        g = next(x for x in groups if x.name == name)
        n = g.in_features * g.out_features
        src = a.malloc(BF16 * n)
        new = _to_nf4(a, n)
        for b in blocks:
            a.release(b)
        nf4[(layer, name)] = new
        a.release(src)
    return a.peak_allocated, a.peak_reserved
