"""One-off: turn ../shared/reference/model_configs.json into catalog data files (HF config layout).

Kept for provenance; the committed files under src/trainfit/catalog/data/models/ are the catalog.
"""

import json
import re
import sys
from pathlib import Path

REF = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/model_configs.json")
OUT = Path(__file__).resolve().parents[1] / "src/trainfit/catalog/data/models"
CORE = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "max_position_embeddings"]


def family(key: str, e: dict) -> str:
    if "Qwen3.5" in key or "Qwen3.6" in key or "Qwen3.8" in key:
        return "qwen3_5"
    if key.startswith("Qwen/Qwen3-") and e.get("num_experts"):
        return "qwen3_moe"
    if key.startswith("Qwen/Qwen3-"):
        return "qwen3"
    if key.startswith("Qwen/Qwen2.5") or key.startswith("Qwen/Qwen-1"):
        return "qwen2"
    if key.startswith("google/gemma-2"):
        return "gemma2"
    if key.startswith("mistralai/"):
        return "mistral"
    return "llama"


def main() -> None:
    ref = json.loads(REF.read_text())
    OUT.mkdir(parents=True, exist_ok=True)
    for key, e in ref.items():
        mid = key.split(" (")[0]
        fam = family(key, e)
        cfg = {k: e[k] for k in CORE}
        notes = [e.get("note", "")]
        if fam in ("qwen3", "qwen3_moe", "llama", "mistral"):
            cfg["attention_bias"] = False
        if fam == "qwen3_moe":
            for k in ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob"):
                cfg[k] = e[k]
            cfg["decoder_sparse_step"] = e.get("decoder_sparse_step", 1)
            cfg["mlp_only_layers"] = e.get("mlp_only_layers", [])
        if fam == "gemma2":
            for k in ("sliding_window", "query_pre_attn_scalar", "attn_logit_softcapping",
                      "final_logit_softcapping", "hidden_activation"):
                cfg[k] = e[k]
        if key.startswith("Qwen/Qwen-1"):
            # Qwen-1 (remote code QWenLMHeadModel) is Qwen2-shaped: c_attn = fused qkv with bias,
            # MHA, and 'intermediate_size' counts both SwiGLU branches (each is half).
            cfg["intermediate_size"] = e["intermediate_size"] // 2
            notes.append("Qwen-1 remote code mapped onto the Qwen2 layout: SwiGLU width = intermediate_size/2 = "
                         f"{cfg['intermediate_size']}; fused c_attn has the same parameters as q/k/v with bias")
        cfg["model_type"] = fam
        if fam == "qwen3_5":
            la = e["linear_attention"]
            text = {k: e[k] for k in CORE}
            text.update({k: la[k] for k in la if k.startswith("linear_")})
            text.update(model_type="qwen3_5_text", full_attention_interval=4,
                        partial_rotary_factor=e["partial_rotary_factor"], attention_bias=False)
            n = e["num_hidden_layers"]
            text["layer_types"] = ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(n)]
            cfg = {"model_type": "qwen3_5", "tie_word_embeddings": e["tie_word_embeddings"], "text_config": text}
            notes.append("text decoder only: the vision tower and MTP head are not counted")
        verified = "UNVERIFIED" not in key
        aliases = []
        short = mid.split("/")[-1]
        aliases.append(short)
        entry = {
            "id": mid,
            "aliases": aliases,
            "verified": verified,
            "source": e["source"],
            "note": " ".join(n for n in notes if n),
            "config": cfg,
        }
        fname = re.sub(r"[^A-Za-z0-9._-]+", "_", mid) + ".json"
        (OUT / fname).write_text(json.dumps(entry, indent=1) + "\n")
        print(fname)


if __name__ == "__main__":
    main()
