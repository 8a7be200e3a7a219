"""Generated and mutated inputs: cards (schema-driven), card texts, --set items, config.json files,
audit files and OOM logs. Mostly plausible values (so cases reach the planner), mixed with hostile ones."""

from __future__ import annotations

import copy
import enum
import json
import typing
from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel

from trainfit.spec.card import RunCard

MODELS = ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-8B",
          "google/gemma-2-9b", "Qwen/Qwen2.5-7B", "Qwen/Qwen3.5-27B"]
GPUS = ["rtx4090", "a100-40gb", "a100-80gb", "h100", "h200", "l40s", "custom", "A100", "h100-sxm", "nope", ""]

HOSTILE_TEXT = ["", " ", "\n", "x\ny: 1", "$(touch P)", "`id`", "'\"", "a" * 300, "\x00", "\udcff", "☃", "-", "~",
                "null", "NaN", ".inf", "1e400", "0x10", "{a: 1}", "[1, 2]", "*a", "&a b"]
EDGE_INTS = [0, 1, -1, 2, 3, 7, 8, 16, 1023, 1024, 4096, 4097, 2**31, -(2**31), 2**63, 10**30]
EDGE_FLOATS = [0.0, -0.0, 0.3, 0.5, 1.0, 1.5, 1e-300, 1e12, 1e308, float("inf"), float("-inf"), float("nan")]

edge_int = st.sampled_from(EDGE_INTS) | st.integers(min_value=-5, max_value=5000)
edge_float = st.sampled_from(EDGE_FLOATS) | st.floats(allow_nan=True, allow_infinity=True)
hostile_text = st.sampled_from(HOSTILE_TEXT) | st.text(max_size=12)
scalar = st.none() | st.booleans() | edge_int | edge_float | hostile_text
json_like = st.recursive(scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                         max_leaves=8)


def _misspell(v: str) -> st.SearchStrategy[str]:
    return st.sampled_from([v.upper(), v.replace("_", "-"), f" {v} ", v + "x", v[:-1], v.title()])


def _strategy_for(annotation: Any, name: str) -> st.SearchStrategy[Any]:
    """Plausible values for one card field (from its annotation), with edge and wrong-type values mixed in."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)) and args:
        return st.one_of([_strategy_for(a, name) for a in args]) | st.none()
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [m.value for m in annotation]
        return st.sampled_from(values) | st.sampled_from(values) | st.sampled_from(values).flatmap(_misspell) | scalar
    if annotation is bool:
        return st.booleans() | st.booleans() | st.sampled_from(["yes", "on", 0, 1, 2, "maybe"])
    if annotation is int:
        return st.sampled_from([1, 1, 2, 4, 8]) | st.integers(min_value=1, max_value=64) | edge_int | scalar
    if annotation is float:
        return st.sampled_from([0.3, 0.5, 0.9, 1.0, 16, 24, 80]) | st.floats(min_value=0.01, max_value=1000) | edge_float | scalar
    if annotation is str:
        if name == "gpu":
            return st.sampled_from(GPUS) | hostile_text
        if name == "currency":
            return st.sampled_from(["CNY", "USD", "EUR", "", "cny"]) | hostile_text
        return hostile_text
    if origin is list:
        return st.lists(hostile_text, max_size=3) | scalar
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), scalar, max_size=3) | scalar
    return scalar


def section(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    optional = {name: _strategy_for(f.annotation, name) for name, f in model.model_fields.items()}
    return st.fixed_dictionaries({}, optional=optional)


_SECTIONS = {name: f.annotation for name, f in RunCard.model_fields.items()
             if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)}

numbers = st.sampled_from([1e9, 7e9, 27e9, 0.6e9, "27e9", "7B"]) | edge_float | edge_int

model_values = (
    st.sampled_from(MODELS) | st.sampled_from(MODELS) | st.sampled_from(MODELS)
    | st.fixed_dictionaries({"params": numbers}, optional={"reference": st.sampled_from(MODELS + ["nope"])})
    | st.fixed_dictionaries({"id": st.sampled_from(MODELS)}, optional={"revision": hostile_text})
    | st.sampled_from(["nope/nope", "", "./missing-dir", "Qwen/Qwen3-8b"])
    | json_like
)

_top = {
    "model": model_values,
    "method": _strategy_for(RunCard.model_fields["method"].annotation, "method"),
    "scope": _strategy_for(RunCard.model_fields["scope"].annotation, "scope"),
    "attention": _strategy_for(RunCard.model_fields["attention"].annotation, "attention"),
    "preset": st.sampled_from(["trl", "verl", "openrlhf", "nemo-rl", "TRL", "nope"]) | hostile_text,
    "name": hostile_text,
    "notes": hostile_text | json_like,
}
_top.update({name: section(model) | section(model) | json_like for name, model in _SECTIONS.items()})


def _small(d: dict[str, Any]) -> dict[str, Any]:
    return d


def _dotted_keys() -> list[str]:
    keys = [k for k in ("model", "method", "scope", "attention", "preset", "name", "notes")]
    for name, model in _SECTIONS.items():
        keys += [f"{name}.{f}" for f in model.model_fields]
    return keys


DOTTED_KEYS = _dotted_keys()
def _bounds(f) -> tuple[float | None, float | None]:
    lo = hi = None
    for m in f.metadata:
        lo = getattr(m, "ge", None) if getattr(m, "ge", None) is not None else lo
        lo = getattr(m, "gt", None) if getattr(m, "gt", None) is not None and lo is None else lo
        hi = getattr(m, "le", None) if getattr(m, "le", None) is not None else hi
    return lo, hi


_PARALLEL_DEGREES = {"tensor_parallel", "context_parallel", "pipeline_parallel", "virtual_stages", "expert_parallel",
                     "expert_tensor_parallel", "gpus", "sleep_level"}


def _valid_for(name: str, f) -> st.SearchStrategy[Any] | None:
    """A value the card accepts for this field (None: leave the field out of valid cards)."""
    ann = f.annotation
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    base = args[0] if args else ann
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return st.sampled_from([m.value for m in base])
    if base is bool:
        return st.booleans()
    lo, hi = _bounds(f)
    if base is int:
        if name in _PARALLEL_DEGREES:
            return st.sampled_from([1, 1, 1, 2, 4])
        lo_i = int(lo if lo is not None else 1)
        return st.sampled_from([v for v in (1, 2, 4, 8, 16, 512, 1024, 2048, 4096) if v >= lo_i and (hi is None or v <= hi)])
    if base is float:
        if name == "gpu_memory_gib":
            return st.sampled_from([8, 16, 24, 48, 80, 141])
        if name == "gpu_memory_utilization":
            return st.sampled_from([0.3, 0.5, 0.9])
        if name in ("dropout",):
            return st.sampled_from([0.0, 0.05])
        return st.sampled_from([0.0, 1.0, 16.0, 64.0, 512.0]).filter(lambda v: (lo is None or v >= lo) and (hi is None or v <= hi))
    if name == "gpu":
        return st.sampled_from(["rtx4090", "a100-40gb", "a100-80gb", "h100", "h200", "l40s"])
    if name == "currency":
        return st.sampled_from(["CNY", "USD"])
    return None


def valid_section(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    optional = {}
    for name, f in model.model_fields.items():
        v = _valid_for(name, f)
        if v is not None:
            optional[name] = v
    return st.fixed_dictionaries({}, optional=optional)


valid_cards = st.fixed_dictionaries(
    {"model": st.sampled_from(MODELS[:3]) | st.sampled_from(MODELS),
     "method": st.sampled_from(["sft", "sft", "dpo", "grpo", "ppo", "rm"])},
    optional={"scope": st.sampled_from(["full", "lora", "qlora"]),
              **{name: valid_section(model) for name, model in _SECTIONS.items()
                 if name in ("hardware", "batch", "rollout", "parallel", "precision", "loss", "generation", "roles",
                             "loop", "deepspeed")}})
"""Cards built only from accepted values: most reach the planner (some still fail its coherence checks)."""


def _coherent(card: dict[str, Any]) -> dict[str, Any]:
    """Repair the cross-field rules a random valid card breaks most often (a custom GPU's memory, a price's currency,
    a price's rentable unit without a price, a price beside a named price)."""
    hw = card.get("hardware")
    if isinstance(hw, dict):
        if "gpu_memory_gib" in hw:
            hw["gpu"] = "custom"
        if "price_gpus_per_instance" in hw:  # the unit of a price: read with one only
            hw.setdefault("price_per_gpu_hour", 1.0)
        if "price_per_gpu_hour" in hw:
            hw.setdefault("currency", "USD")
            hw.pop("price_preset", None)  # a stated price beside a named one is refused (spec.card.price_pair_refusal)
    return card


valid_cards = valid_cards.map(_coherent)


@st.composite
def one_bad_field(draw) -> dict[str, Any]:
    """A valid card with one field (a real dotted key) set to a hostile value."""
    card = draw(valid_cards)
    key = draw(st.sampled_from(DOTTED_KEYS))
    value = draw(scalar | json_like)
    node = card
    *parents, leaf = key.split(".")
    for p in parents:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    node[leaf] = value
    return card


cards = valid_cards | valid_cards | st.deferred(lambda: one_bad_field()) | st.fixed_dictionaries({}, optional=_top) | st.fixed_dictionaries(
    {"model": st.sampled_from(MODELS[:3]), "method": st.sampled_from(["sft", "dpo", "grpo", "ppo", "rm"])},
    optional={"scope": st.sampled_from(["full", "lora", "qlora"]),
              "hardware": section(_SECTIONS["hardware"]), "batch": section(_SECTIONS["batch"]),
              "rollout": section(_SECTIONS["rollout"]), "parallel": section(_SECTIONS["parallel"])})
"""Card dicts: any subset of the real keys with generated values, or a model+method card with a few sections."""

top_level = cards | cards | cards | cards | json_like
"""What a card file may hold: usually a mapping, sometimes a list, a string, a number or null."""

SUFFIXES = [".yaml", ".yml", ".json", ".txt", ""]


def dump(data: Any, suffix: str) -> str:
    import yaml

    if suffix == ".json":
        return json.dumps(data)  # allow_nan: NaN/Infinity reach the loader
    try:
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    except yaml.YAMLError:
        return json.dumps(data)


# ------------------------------------------------------------------------------------------------
# mutated texts

BASE_CARDS = [
    "model: Qwen/Qwen3-8B\nmethod: sft\nhardware:\n  gpu: a100-40gb\n  gpus_per_node: 8\nbatch:\n  micro_batch_size: 1\n  seq_len: 2048\n",
    "model: Qwen/Qwen3-0.6B\nmethod: grpo\nscope: lora\nrollout:\n  num_generations: 8\n  response_len: 1024\n  placement: colocate\nhardware:\n  gpu: rtx4090\n  gpus_per_node: 2\n",
    "model: Qwen/Qwen3-1.7B\nmethod: dpo\nscope: qlora\nparallel:\n  strategy: zero3\n  offload: optimizer\nhardware: {gpu: custom, gpu_memory_gib: 24, host_ram_gib: 64}\n",
    "model:\n  params: 27e9\nmethod: sft\nhardware: {gpu: h100, gpus_per_node: 8, nodes: 2, price_per_gpu_hour: 2.5, currency: USD}\n",
    '{"model": "Qwen/Qwen3-30B-A3B", "method": "ppo", "parallel": {"expert_parallel": 8, "strategy": "fsdp"}, "hardware": {"gpu": "h200"}}',
]
INSERTS = [":", ": ", "\n", "  ", "-", "- ", "&a ", "*a", "[", "]", "{", "}", "'", '"', "#", "0", "9" * 12, "-1", ".inf",
           ".nan", "1e400", "!!python/object:os.system", "!!binary x", "\t", "\x00", "\udcff", "☃", ",", "? ", "|", ">"]


@st.composite
def mutated_text(draw, base: list[str] | None = None) -> str:
    text = draw(st.sampled_from(base or BASE_CARDS))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not text:
            text = draw(st.sampled_from(INSERTS))
            continue
        i = draw(st.integers(min_value=0, max_value=len(text) - 1))
        op = draw(st.sampled_from(["insert", "delete", "replace", "dup_line", "swap"]))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(INSERTS) | st.text(max_size=3)) + text[i:]
        elif op == "delete":
            j = draw(st.integers(min_value=i, max_value=min(len(text), i + 8)))
            text = text[:i] + text[j:]
        elif op == "replace":
            text = text[:i] + draw(st.sampled_from(INSERTS) | st.text(max_size=2)) + text[i + 1:]
        elif op == "dup_line":
            lines = text.splitlines(keepends=True)
            k = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            lines.insert(k, lines[k])
            text = "".join(lines)
        else:
            j = draw(st.integers(min_value=0, max_value=len(text) - 1))
            chars = list(text)
            chars[i], chars[j] = chars[j], chars[i]
            text = "".join(chars)
    return text


# ------------------------------------------------------------------------------------------------
# --set items

set_keys = st.sampled_from(DOTTED_KEYS) | st.sampled_from(DOTTED_KEYS) | st.sampled_from(
    ["", ".", "a..b", "hardware", "hardware.gpu.x", "model.params", "x" * 300, "batch.", " batch.seq_len", "unknown.key"])
set_values = (st.sampled_from(["1", "2", "8", "0", "-1", "2147483648", "1e400", ".inf", "nan", "true", "[1, 2]", "{a: 1}",
                               "&a [*a]", "rtx4090", "custom", "zero3", "grpo", "lora", "", "'", "a: b: c", "!!python/name:os.system"])
              | st.text(max_size=10))
set_items = st.lists(st.tuples(set_keys, set_values).map(lambda kv: f"{kv[0]}={kv[1]}") | hostile_text, min_size=1, max_size=3)


# ------------------------------------------------------------------------------------------------
# config.json

def catalog_config(model_id: str) -> dict[str, Any]:
    from trainfit.catalog.models import hf_config_of

    return hf_config_of(model_id)


CONFIG_BASES = ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3.5-27B", "google/gemma-2-9b"]
CONFIG_KEYS = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "head_dim", "vocab_size", "moe_intermediate_size", "num_experts", "num_experts_per_tok",
               "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers", "layer_types",
               "sliding_window", "max_position_embeddings", "model_type", "tie_word_embeddings", "text_config",
               "linear_num_key_heads", "full_attention_interval", "linear_conv_kernel_dim"]
config_values = st.sampled_from([-768, -1, 0, 1, 3, 2**31, 10**30, 1e300, 1.5, "768", None, [], {}, True, "qwen3",
                                 "llama", "bert", [0, 1], ["full_attention"]]) | edge_int | edge_float


@st.composite
def mutated_config(draw) -> tuple[str, Any]:
    """(model id it came from, a config dict with 1-3 fields changed or removed, or not a dict at all)."""
    base = draw(st.sampled_from(CONFIG_BASES))
    cfg = copy.deepcopy(catalog_config(base))
    if draw(st.integers(min_value=0, max_value=15)) == 0:
        return base, draw(json_like)
    target = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        key = draw(st.sampled_from(CONFIG_KEYS))
        if draw(st.booleans()) and key in target:
            del target[key]
        else:
            target[key] = draw(config_values)
    return base, cfg


def dump_config(cfg: Any) -> str:
    return json.dumps(cfg)  # NaN/Infinity as JSON's non-standard constants


# ------------------------------------------------------------------------------------------------
# OOM logs

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {a} GiB. GPU 0 has a total capacity of {t} GiB"
       " of which {f} MiB is free. Including non-PyTorch memory, this process has {u} GiB memory in use. Of the"
       " allocated memory {al} GiB is allocated by PyTorch, and {r} MiB is reserved by PyTorch but unallocated.")
log_number = st.sampled_from(["2.32", "0", "0.00", "-1", "1e400", "inf", "nan", "99999999999999999999", "23.55", "79.19",
                              "1,024", "", "x"]) | st.floats(min_value=0, max_value=1e6).map(lambda v: f"{v:.2f}")


@st.composite
def oom_logs(draw) -> str:
    msg = OOM.format(a=draw(log_number), t=draw(log_number), f=draw(log_number), u=draw(log_number),
                     al=draw(log_number), r=draw(log_number))
    if draw(st.booleans()):
        msg = draw(mutated_text([msg]))
    noise = draw(st.lists(st.text(max_size=40), max_size=5))
    frames = draw(st.sampled_from(["", 'File "/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 347, in backward\n',
                                   'File "x.py", line 1, in forward\n  logits = self.lm_head(h)\n']))
    return "\n".join(noise) + "\nTraceback (most recent call last):\n" + frames + msg + "\n"


# ------------------------------------------------------------------------------------------------
# command-line flags

INT_TEXT = ["1", "2", "8", "0", "-1", "2147483648", "99999999999999999999", "1.5", "abc", "", "1e3", "inf"]
FLOAT_TEXT = ["1", "0.5", "0", "-1", "1e9", "1e400", "inf", "nan", "-inf", "abc", "", "1,5"]
FILE_KINDS = ["missing", "dir", "empty", "garbage", "json_list", "json_object", "yaml_card", "binary", "bomb", "nan_json",
              "non_utf8", "gpu_time"]
"""``binary`` is written as UTF-8 (its characters are valid code points); ``non_utf8`` holds bytes that are not
UTF-8 at all (0xff 0xfe), ``gpu_time`` a real ``gpu_calibrate.py time`` output (what calibrate reads)."""
FLAG_VALUES: dict[str, list[str]] = {
    "--model": MODELS[:3] + ["nope", "", "Qwen/Qwen3-8b", "./nope", "/", "a/b/c", "\n", "$(id)"],
    "--method": ["sft", "dpo", "grpo", "ppo", "rm", "DPO", "Grpo", "x", ""],
    "--scope": ["full", "lora", "qlora", "LoRA", "half", ""],
    "--gpu": ["rtx4090", "h100", "a100-80gb", "rtx4090,h100", ",", "", "nope", "custom", "A100", "rtx4090,,nope"],
    "--gpus": INT_TEXT, "--nodes": INT_TEXT, "--mbs": INT_TEXT, "--seq": INT_TEXT, "--grad-accum": INT_TEXT,
    "--strategy": ["fsdp", "zero3", "ddp", "single", "zero4", "FSDP", ""],
    "--offload": ["none", "optimizer", "params_and_optimizer", "all", ""],
    "--attention": ["sdpa", "flash", "eager", "fast", ""],
    "--preset": ["trl", "verl", "openrlhf", "nemo-rl", "TRL", "nope", ""],
    "--max-gpus": ["1", "2", "0", "-1", "abc", "3"],
    "--objective": ["cost", "time", "cards", "speed", "", "COST"],
    "--steps": INT_TEXT, "--global-batch": INT_TEXT,
    "--tokens": FLOAT_TEXT,
    "--budget": ["100CNY", "100", "-5USD", "infUSD", "nanCNY", "1e400USD", "CNY", "", "100 XYZ", "0USD"],
    "--deadline": ["12h", "90m", "2d", "0h", "-1h", "1e400h", "infh", "h", "", "12", "nanh"],
    "--price": ["rtx4090=1.98CNY", "rtx4090=", "=1", "rtx4090=infCNY", "rtx4090=nanUSD", "nope=1CNY", "rtx4090=-1CNY",
                "rtx4090=1.98", "rtx4090", "h100=2USD"],
    "--market": ["", "nope", "cn", "us", "lambda"],
    "--fx": ["USD:CNY=7.1", "USD:CNY=0", "USD:CNY=inf", "USD:CNY=nan", "x", "USD:USD=2", "USD:CNY=-1", "USD=7", ":="],
    "--to": ["accelerate", "deepspeed", "trl", "verl", "openrlhf", "nope", ""],
    "--timeout": FLOAT_TEXT,
    "--message": [OOM.format(a="2.32", t="23.55", f="10", u="23", al="20", r="1"), "", "CUDA out of memory", "\x00", "x" * 3000],
    "--force": [], "--json": [], "--ckpt": [], "--no-ckpt": [], "--dry-run": [], "--search-scope": [],
    "--from": ["accelerate", "deepspeed", "trl", "verl", "openrlhf", "torchtitan", "nemo-rl", "TRL", "nope", ""],
    "--memory-margin": FLOAT_TEXT, "--time-margin": FLOAT_TEXT,
}
PATH_FLAGS = {"--html", "--out", "--calibration", "--price-table", "--audit", "--log", "--card", "--measured", "--held-out",
              "--with", "--base"}
COMMAND_FLAGS = {
    "plan": ["--model", "--method", "--scope", "--gpu", "--gpus", "--nodes", "--strategy", "--offload", "--mbs", "--seq",
             "--grad-accum", "--ckpt", "--no-ckpt", "--attention", "--preset", "--set", "--html", "--calibration", "--json"],
    "fit": ["--gpu", "--max-gpus", "--objective", "--steps", "--tokens", "--budget", "--deadline", "--price",
            "--price-table", "--market", "--fx", "--set", "--global-batch", "--search-scope", "--json", "--html", "--calibration"],
    "export": ["--to", "--out", "--set", "--json"],
    "check": ["--timeout", "--set", "--json", "--calibration"],
    "record": ["--out", "--force", "--timeout", "--measured", "--json"],
    "diagnose": ["--log", "--message", "--card", "--set", "--json"],
    "calibrate": ["--out", "--held-out", "--gpu", "--dry-run", "--json"],
    "compare": ["--memory-margin", "--time-margin", "--json"],
    "import": ["--from", "--with", "--base", "--set", "--out", "--json"],
}
