"""bitsandbytes NF4 dequantisation temporaries (trainfit.memory.nf4_dequant), the fp32 model's loss without an upcast
copy and PEFT's no-op input cast on an fp32 model: hand-computed bytes; the plan-vs-trace cells are
tests/trace/test_qlora_grid.py."""

from trainfit.accuracy.grid import ARCHS, GridCase
from trainfit.memory import nf4_dequant
from trainfit.memory.logits import logits_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_forward_gemm_bytes_is_the_cuda_fallbacks_buffers():
    # 512 x 8192 weight, 128 rows, bf16: absmax_dq + (absmax_dq + offset): 2 x 4 B x 65,536 blocks; the bf16 weight;
    # the output 128 x 512 x 2; the unsaved bf16 input 128 x 8192 x 2, less the fp32 copy lora_A saves (x 4)
    n = 512 * 8192
    got = nf4_dequant.forward_gemm_bytes(in_features=8192, out_features=512, rows=128, compute_dtype_bytes=2,
                                         adapter_input_bytes=4)
    assert got == 2 * 4 * n // 64 + 2 * n + 128 * 512 * 2 + 128 * 8192 * (2 - 4)
    plain = nf4_dequant.forward_gemm_bytes(in_features=8192, out_features=512, rows=128, compute_dtype_bytes=2,
                                           double_quant=False)
    assert plain == 2 * n + 128 * 512 * 2 + 128 * 8192 * 2  # a plain fp32 absmax is used as it is


def test_backward_gemm_bytes():
    n = 512 * 8192
    got = nf4_dequant.backward_gemm_bytes(in_features=8192, out_features=512, rows=128, compute_dtype_bytes=2,
                                          adapter_input_bytes=4)
    # grad_output, fp32 absmax, bf16 weight, grad_A; the adapter branch's pending input gradient less its saved copy
    assert got == 128 * 512 * 2 + 4 * n // 64 + 2 * n + 128 * 8192 * 2 + 128 * 8192 * (2 - 4)



def test_qlora_plan_has_the_dequant_moment_and_lora_does_not():
    qlora = make_plan(load_card_dict(GridCase("llama_widemlp", scope="qlora", seq_len=128).card()))
    lora = make_plan(load_card_dict(GridCase("llama_widemlp", scope="lora", seq_len=128).card()))
    fq = {p.phase.value: p for p in qlora.phases}["forward"]
    fl = {p.phase.value: p for p in lora.phases}["forward"]
    assert "dequantisation" in fq.at and "dequantisation" not in fl.at
    cfg = ARCHS["llama_widemlp"]
    assert (cfg["intermediate_size"], cfg["hidden_size"]) == (8192, 512)
    # the moment is the MLP output projection (in 8192, out 512) of one 128-token micro-batch, double-quantised,
    # with an all-linear adapter (fp32 input copy): absmax_dq + (absmax_dq + offset) 2 x 4 B x 4,194,304 / 64
    # = 524,288; the bf16 weight 2 x 4,194,304 = 8,388,608; the output 128 x 512 x 2 = 131,072; the bf16 input
    # 128 x 8192 x 2 less the fp32 copy lora_A saves 128 x 8192 x 4: -2,097,152 -> 6,946,816 B
    assert fq.components["activation_transients"] == 6_946_816


def test_fp32_logits_make_no_upcast_copy():
    kw = dict(micro_batch_size=1, seq_len=512, vocab_size=32000, hidden_size=256)
    # 512 x 32,000 = 16,384,000 logits. bf16 model: the bf16 logits (2 B), their fp32 upcast (4 B) and the fp32
    # log-softmax (4 B) are alive at once -> 16,384,000 x 10 = 163,840,000 B. fp32 model: the logits are already fp32,
    # no upcast copy (``Tensor.float`` returns the same tensor): 4 B + the log-softmax 4 B -> 16,384,000 x 8
    # = 131,072,000 B; counting a copy would give 12 B per logit, 196,608,000 B.
    bf16 = logits_bytes(compute_dtype_bytes=2, **kw).forward_peak
    fp32 = logits_bytes(compute_dtype_bytes=4, **kw).forward_peak
    assert (bf16, fp32) == (163_840_000, 131_072_000)
    assert bf16 - fp32 == 2 * 16_384_000


def test_fp32_model_adapter_saves_no_input_copy():
    from trainfit.memory.activations import _adapter_saved, _Ctx
    from trainfit.spec.enums import Attention

    def ctx(a: int) -> _Ctx:
        return _Ctx(T=128, b=1, s=128, a=a, full=False, targets={"q_proj": 16, "k_proj": 16}, attention=Attention.SDPA)

    bf16 = ctx(2)  # a new fp32 copy of the input per module, and the fp32 rank-16 output
    assert [_adapter_saved(bf16, m, 256, 16, input_saved=False) for m in ("q_proj", "k_proj")] == [128 * 4 * 272] * 2
    fp32 = ctx(4)  # PEFT's cast returns the fp32 input itself: q and k share it, saved once
    assert [_adapter_saved(fp32, m, 256, 16, input_saved=False) for m in ("q_proj", "k_proj")] == [
        128 * 4 * (16 + 256), 128 * 4 * 16]


def test_forward_gemm_bytes_when_matmul4bit_saves_the_input_and_makes_one_absmax():
    # bitsandbytes 0.41.1: MatMul4Bit keeps the input (the layer's saved set counts it) and dequantize_4bit makes one
    # fp32 absmax (offset added in place); lora_A's fp32 copy is still made after the base GEMM (not yet live)
    n = 512 * 8192
    got = nf4_dequant.forward_gemm_bytes(in_features=8192, out_features=512, rows=128, compute_dtype_bytes=2,
                                         adapter_input_bytes=4, input_saved=True, absmax_copies=1)
    assert got == 4 * n // 64 + 2 * n + 128 * 512 * 2 - 128 * 8192 * 4
    # a bf16 adapter saves the input itself: nothing unsaved, nothing pending, with or without MatMul4Bit's copy
    for saved in (True, False):
        assert nf4_dequant.forward_gemm_bytes(in_features=8192, out_features=512, rows=128, compute_dtype_bytes=2,
                                              adapter_input_bytes=2, input_saved=saved) == 8 * n // 64 + 2 * n + 128 * 512 * 2


def test_forward_absmax_copies_read_the_pin():
    assert [nf4_dequant.forward_absmax_copies(p) for p in ("0.41.1", "0.43.1", "0.49.2", "0.50.0", "0.50.2", None,
                                                             ">=0.41")] == [1, 1, 1, 2, 2, 2, 2]


def test_checkpointed_forward_subtracts_no_adapter_copy():
    # the widemlp cell under checkpointing: the last layer's forward runs without grad, so lora_A saves no fp32 copy
    # of down_proj's input and the whole bf16 input is live beside the dequantised weight
    card = GridCase("llama_widemlp", scope="qlora", ckpt=True, seq_len=128).card()
    fwd = {p.phase.value: p for p in make_plan(load_card_dict(card)).phases}["forward"]
    cfg = ARCHS["llama_widemlp"]
    no_grad = nf4_dequant.forward_gemm_bytes(in_features=cfg["intermediate_size"], out_features=cfg["hidden_size"],
                                             rows=128, compute_dtype_bytes=2)
    assert fwd.components["activation_transients"] == no_grad


def test_a_non_reentrant_first_forward_counts_the_down_proj_input_as_held() -> None:
    # bitsandbytes before 0.43.2 under a non-reentrant checkpoint: the first forward's MatMul4Bit keeps the down_proj
    # input on its recorded node (memory.bnb_saved_input.ctx_held_input_bytes), so the moment does not count it again
    from trainfit.catalog.models import resolve_model
    from trainfit.memory.nf4_dequant import layer_moments

    spec = resolve_model("meta-llama/Llama-2-7b-hf")
    kw = {"rows": 512, "compute_dtype_bytes": 2, "adapted": frozenset({"down_proj"})}
    _, free, _ = layer_moments(spec, **kw)
    _, held, _ = layer_moments(spec, **kw, first_forward_holds_input=True)
    assert free - held == 512 * spec.intermediate_size * 2
