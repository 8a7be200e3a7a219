"""Which weights of a transformers v5 MoE model bitsandbytes' 4-bit loading quantizes, and what PEFT's LoRA wraps on
top: built on CPU with tiny random configs, checked against what trainfit plans.

transformers 5's MoE blocks hold their routed experts as one module with 3-D ``nn.Parameter`` stacks
(``Qwen3MoeExperts`` / ``MixtralExperts``: ``gate_up_proj`` ``E x 2f x h``, ``down_proj`` ``E x h x f``;
``GptOssExperts`` the same with biases). bitsandbytes' 4-bit loader swaps modules, not parameters:
``replace_with_bnb_linear`` replaces a module only where ``isinstance(module, Conv1D) or type(module) is nn.Linear``
(transformers 5.24.0 wheel, ``transformers/integrations/bitsandbytes.py`` l.184-228), and the quantizer quantizes a
loaded tensor only where it lands in a ``bnb.nn.Linear4bit`` (``quantizers/quantizer_bnb_4bit.py``
``param_needs_quantization``, l.83-87). So the expert stacks and the routers (``Qwen3MoeTopKRouter``,
``MixtralTopKRouter``, ``GptOssTopKRouter``: modules holding a ``weight`` Parameter, no ``nn.Linear``) keep the
loading dtype; only the attention projections (and a dense MLP's linears) become NF4. PEFT 0.21.2 then converts
``all-linear`` on Qwen3-MoE and Mixtral into ``target_parameters`` (``gate_up_proj``, ``down_proj``, ``gate.weight``)
and wraps those bf16 Parameters with ``ParamWrapper`` (``peft/tuners/lora/model.py`` ``_create_new_module``: no
quantized-layer dispatcher matches an experts module, so ``dispatch_default`` builds the ``ParamWrapper``,
``peft/tuners/lora/layer.py`` l.2738-2739), exactly as on a bf16 base; the attention projections become PEFT's
``bnb.Linear4bit``. On gpt-oss PEFT wraps no expert (no conversion for ``gpt_oss``). A gpt-oss checkpoint as
released carries an MXFP4 ``quantization_config``, and passing a ``BitsAndBytesConfig`` for it raises
(``quantizers/auto.py`` ``merge_quantization_configs`` l.259-266: "The model is quantized with Mxfp4Config but you
are passing a BitsAndBytesConfig config"); the MXFP4 quantizer itself is not trainable
(``quantizers/quantizer_mxfp4.py`` ``is_trainable`` l.209-213: False, "consider dequantizing the model first by passing
quantization_config=Mxfp4Config(dequantize=True)"), so a QLoRA of gpt-oss starts from a bf16 copy, whose experts the
same loader leaves bf16.

What this script checks, per family, on one model of 2 layers, hidden 64, 4 experts of top-2:

* the elements stored as NF4 (``Params4bit``, two per byte) equal trainfit's ``memory.weights.quantized_linear_params``
  and the elements kept in the loading dtype equal the rest of ``memory.params.param_breakdown`` (the fused experts
  with the norms, routers, embeddings and head: ``memory.weights.base_weight_bytes`` with ``quantized_experts``
  False);
* the PEFT modules built by ``LoraConfig(target_modules="all-linear")`` and the ``ParamWrapper`` activations one
  forward runs, against ``compute.inventory.peft_param_wrapper_calls`` for a QLoRA adapter;
* after PEFT's ``prepare_model_for_kbit_training`` (``lora.prepare_kbit: peft``) the expert stacks and the router
  are fp32 (every non-``Params4bit`` bf16 parameter is cast up), as memory plans them under that recipe;
* a forward and backward on the 4-bit base runs (bitsandbytes 0.50.2 has a CPU path for NF4; the ``kernels`` package
  it would prefer is not installed, so it falls back to its PyTorch dequantisation: correctness, not speed).

Not checkable here: transformers 4.x (not installed). There each expert is an ``nn.Module`` of three ``nn.Linear``
(``w1`` / ``w3`` / ``w2`` or ``gate_proj`` / ``up_proj`` / ``down_proj``) which the same replace loop turns into
``Linear4bit`` (transformers 4.48.1 wheel ``integrations/bitsandbytes.py`` ``_replace_with_bnb_linear`` l.168, l.202,
read for ``memory.weights``), so the v4 per-expert loop's experts are NF4 (``plan.terms.bnb_loop_experts``).

Writes ``benchmarks/results/qlora_moe_experts_cpu.json``. Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/qlora_moe_experts_cpu.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore")

OUT = Path(__file__).resolve().parent / "results" / "qlora_moe_experts_cpu.json"


def _configs():  # noqa: ANN202 - transformers configs
    import transformers as tf

    common = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=16, num_experts_per_tok=2)
    return {
        "qwen3_moe": (tf.Qwen3MoeForCausalLM, tf.Qwen3MoeConfig(
            intermediate_size=128, moe_intermediate_size=32, num_experts=4, decoder_sparse_step=1, mlp_only_layers=[],
            **common)),
        "mixtral": (tf.MixtralForCausalLM, tf.MixtralConfig(intermediate_size=32, num_local_experts=4, **common)),
        "gpt_oss": (tf.GptOssForCausalLM, tf.GptOssConfig(
            intermediate_size=32, num_local_experts=4, layer_types=["sliding_attention", "full_attention"],
            **common)),
    }


def _planned(config) -> dict:  # noqa: ANN001
    """What trainfit plans for this config: NF4 and unquantized element counts, ParamWrapper calls a forward."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.compute.inventory import Adapter, peft_param_wrapper_calls
    from trainfit.memory.params import param_breakdown
    from trainfit.memory.weights import quantized_linear_params

    fields = config.to_dict()
    if config.model_type == "qwen3_moe":  # transformers 5 writes the Hub's num_experts as num_local_experts
        fields.setdefault("num_experts", fields["num_local_experts"])
    spec = spec_from_hf_config(fields, name="tiny-" + config.model_type, source="random config")
    quant = quantized_linear_params(spec)
    return {"nf4_elements": quant, "unquantized_elements": param_breakdown(spec).total - quant,
            "param_wrapper_calls": peft_param_wrapper_calls(
                spec, adapter=Adapter(rank=4, targets=("all-linear",), nf4_base=True))}


def _measured(cls, config, tmp: Path) -> dict:  # noqa: ANN001
    import bitsandbytes as bnb
    import peft
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    torch.manual_seed(0)
    path = tmp / config.model_type
    cls(config).to(torch.bfloat16).save_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map="cpu",
                                                 quantization_config=BitsAndBytesConfig(
                                                     load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                     bnb_4bit_compute_dtype=torch.bfloat16,
                                                     bnb_4bit_use_double_quant=True))
    nf4 = kept = 0
    stacks: dict[str, str] = {}
    for name, p in model.named_parameters():
        if isinstance(p, bnb.nn.Params4bit):
            nf4 += p.numel() * 2  # two 4-bit values per stored byte
        else:
            kept += p.numel()
        if name.startswith("model.layers.0.mlp.") and p.dim() == 3:
            dtype = str(p.dtype).removeprefix("torch.")
            stacks[name.removeprefix("model.layers.0.mlp.")] = f"{dtype} {type(p).__name__}"
    linear4bit = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear4bit)})
    pm = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    cfg = pm.peft_config["default"]
    wrapped = sorted({f"{n.split('.layers.0.', 1)[1]}: {type(m).__module__.removeprefix('peft.tuners.lora.')}."
                      f"{type(m).__name__}" for n, m in pm.named_modules()
                      if ".layers.0." in n and isinstance(m, peft.tuners.lora.LoraLayer)})
    calls = 0
    activate = peft.tuners.lora.layer.ParamWrapper._activate_lora

    def counted(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        nonlocal calls
        calls += 1
        return activate(self, *a, **k)

    peft.tuners.lora.layer.ParamWrapper._activate_lora = counted
    try:
        x = torch.randint(0, config.vocab_size, (1, 16))
        loss = pm(input_ids=x, labels=x).loss
        loss.backward()
    finally:
        peft.tuners.lora.layer.ParamWrapper._activate_lora = activate
    return {"nf4_elements": nf4, "unquantized_elements": kept, "expert_stacks_layer0": stacks,
            "linear4bit_modules": linear4bit, "target_modules": sorted(cfg.target_modules or []),
            "target_parameters": sorted(cfg.target_parameters or []), "peft_modules_layer0": wrapped,
            "param_wrapper_calls": calls, "forward_backward": bool(torch.isfinite(loss).item())}


def _stacks_after_kbit_prep(path: Path) -> dict:
    """PEFT's ``prepare_model_for_kbit_training`` on the 4-bit load: the dtype of layer 0's expert stacks and router
    afterwards (it casts every bf16 / fp16 parameter that is not ``Params4bit`` to fp32; memory plans them fp32
    under ``lora.prepare_kbit``, ``plan.terms``)."""
    import torch
    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map="cpu",
                                                 quantization_config=BitsAndBytesConfig(
                                                     load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                     bnb_4bit_compute_dtype=torch.bfloat16))
    model = prepare_model_for_kbit_training(model)
    return {n.removeprefix("model.layers.0.mlp."): str(p.dtype).removeprefix("torch.")
            for n, p in model.named_parameters() if n.startswith("model.layers.0.mlp.")}


def _mxfp4_checkpoint_with_bnb(cls, config, tmp: Path) -> str:  # noqa: ANN001
    """A gpt-oss checkpoint whose config carries the released MXFP4 quantization_config, loaded with a
    BitsAndBytesConfig: the error transformers raises (before any weight is read)."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    path = tmp / "gpt_oss_mxfp4_config"
    cls(config).to(torch.bfloat16).save_pretrained(path)
    meta = json.loads((path / "config.json").read_text())
    meta["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                                                                      "model.layers.*.mlp.router",
                                                                                      "model.embed_tokens", "lm_head"]}
    (path / "config.json").write_text(json.dumps(meta))
    try:
        AutoModelForCausalLM.from_pretrained(path, device_map="cpu", quantization_config=BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4"))
    except ValueError as e:
        return f"ValueError: {e}"
    return "loaded"


def main() -> int:
    import bitsandbytes
    import peft
    import torch
    import transformers

    out = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
                        "bitsandbytes": bitsandbytes.__version__}, "families": {}}
    ok = True
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for fam, (cls, config) in _configs().items():
            got, plan = _measured(cls, config, tmp), _planned(config)
            match = {k: got[k] == plan[k] for k in plan}
            ok &= all(match.values())
            out["families"][fam] = {"measured": got, "planned": plan, "match": match}
            got["after_prepare_model_for_kbit_training"] = _stacks_after_kbit_prep(tmp / config.model_type)
            print(f"{fam}: stacks {got['expert_stacks_layer0']}; NF4 modules {got['linear4bit_modules']}; "
                  f"PEFT {got['peft_modules_layer0']}; after the kbit prep "
                  f"{got['after_prepare_model_for_kbit_training']}; match {match}")
        cls, config = _configs()["gpt_oss"]
        out["gpt_oss_mxfp4_checkpoint_with_bnb"] = _mxfp4_checkpoint_with_bnb(cls, config, tmp)
        print("gpt-oss MXFP4 checkpoint + BitsAndBytesConfig:", out["gpt_oss_mxfp4_checkpoint_with_bnb"])
    OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print("wrote", OUT, "all match" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
