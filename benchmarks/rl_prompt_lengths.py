"""Measure the mean prompt tokens an RL framework feeds for the datasets the published RL rows name.

Writes ``benchmarks/data/rl_prompt_lengths.json``: per (dataset, model) the number of prompts, the mean, p50 and
max of the prompt as the framework tokenizes it: the dataset's text, the recipe's instruction around it, the chat
template of the run's model (verl's ``RLHFDataset`` applies ``tokenizer.apply_chat_template(messages,
add_generation_prompt=True)``), counted with the model's byte-level BPE. ``benchmarks/step_times.py`` reads the
file for rows that publish only a maximum prompt length (``rl_lengths``). No number is fitted: each is a count.

Inputs are public files, read locally (the Hugging Face hub is not reachable from where this ran); pass the
directory holding them with ``--inputs`` (default: the ``files`` named in ``SOURCES`` under that directory):

* ``qwen.tiktoken``: Qwen's BPE ranks (151,643 ordinary tokens; Qwen2, Qwen2.5 and Qwen3 share them);
* ``gsm8k_train.jsonl``: openai/grade-school-math ``grade_school_math/data/train.jsonl`` (7,473 problems);
* ``dapo_math_17k.parquet``: the 17,917 unique problems of BytedTsinghua-SIA/DAPO-Math-17k (the hub file holds
  each 100 times, 1,791,700 rows), instruction stripped.

Needs ``tiktoken`` and ``pyarrow`` (not project dependencies: ``pip install tiktoken pyarrow`` into any venv).
Usage: ``python benchmarks/rl_prompt_lengths.py --inputs DIR [--check]`` (``--check``: compare with the stored file,
exit 1 on a difference).
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import unicodedata
from pathlib import Path

OUT = Path(__file__).parent / "data" / "rl_prompt_lengths.json"

QWEN_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"""
            r"""|\s+(?!\S)|\s+""")
"""Qwen's pre-tokenizer split (``PAT_STR`` in Qwen's ``tokenization_qwen.py``; the same regex as the ``Split``
pre-tokenizer of the Qwen2/Qwen2.5/Qwen3 ``tokenizer.json``, which first applies an NFC normalizer: source
``qwen_tokenizer_json``)."""
QWEN_SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}

SOURCES = {
    "qwen_bpe": {"repo": "x1ngzai/Qwen-VL-Chat-Int4", "path": "qwen.tiktoken",
                 "commit": "1cd721a27dd000fc4cf688c6ad58e614da1d600d", "file": "qwen.tiktoken",
                 "note": "Qwen BPE ranks, 151,643 ordinary tokens (the vocabulary Qwen2/Qwen2.5/Qwen3 keep); checked:"
                         " '<|im_start|>hello<|im_end|>' -> [151644, 14990, 151645] as alibaba/rtp-llm"
                         " maga_transformer/test/tokenizer_test/qwen2_tokenizer_test.py expects"},
    "qwen_tokenizer_json": {"repo": "akougkas/warpio-cli", "path": "warpio-docs/ai-docs/model_cards/qwen3:4b.md",
                            "commit": "8dde6d21c14ca1c2167e7f8c86370e54fdbbc537",
                            "note": "a Qwen3 tokenizer.json: NFC normalizer, the Split regex QWEN_PAT, ByteLevel BPE;"
                                    " its chat_template (a 2507 thinking variant) opens the answer with '<think>\\n'"},
    "gsm8k": {"repo": "openai/grade-school-math", "path": "grade_school_math/data/train.jsonl",
              "commit": "3101c7d5072418e28b9008a6636bde82a006892c", "file": "gsm8k_train.jsonl"},
    "gsm8k_template": {"repo": "verl-project/verl", "path": "examples/data_preprocess/gsm8k.py",
                       "commit": "1dda039b9c6311889a9c9a26040677e1254814f9",
                       "note": "question + ' ' + 'Let's think step by step and output the final answer after \"####\".'"},
    "areal_gsm8k_template": {"repo": "inclusionAI/AReaL", "path": "areal/dataset/gsm8k.py",
                             "commit": "3a08204b82d9e2bfa0d63e719efbc6d8311d6661",
                             "note": "get_gsm8k_rl_dataset l.35-55: one user message, question + '\\nPlease put your"
                                     " final answer within \\\\boxed{}.' (the AReaL-lite GSM8K GRPO example,"
                                     " examples/math/gsm8k_grpo.py), the model's chat template applied by the workflow"},
    "dapo": {"repo": "MasterVito/SvS", "path": "data/dapo_math_17k.parquet",
             "commit": "9fd8f35375b31b8632b52e715296c264a3ad4176", "file": "dapo_math_17k.parquet",
             "note": "17,917 rows: the unique problems of BytedTsinghua-SIA/DAPO-Math-17k with the instruction removed"},
    "dapo_template": {"repo": "qurakchin/RLinf", "path": "examples/rstar2/data_process/process_train_dataset.py",
                      "commit": "4330aad76958bb31dc76405c98a4f392adf79a60",
                      "note": "the DAPO-Math-17k prompt text around each problem (the hub file's prompt[0].content)"},
    "retool_dataset": {"repo": "volcengine/verl", "path": "recipe/retool/retool.py",
                       "commit": "ea56e9ac47c3dfed65c028899012bb67f41f4c83",
                       "note": "CustomRLHFDataset.map_fn2 (l.100-104): the DAPO-Math-17k prompt[0].content +"
                               " answer_format (l.61), one user turn; recipe/retool/run_qwen2_7b_dapo.sh (same commit)"
                               " trains on it"},
    "retool_tool_schema": {"repo": "volcengine/verl", "path": "recipe/retool/sandbox_fusion_tool_config.yaml",
                           "commit": "ea56e9ac47c3dfed65c028899012bb67f41f4c83",
                           "note": "the one code_interpreter tool; verl/experimental/agent_loop/tool_agent_loop.py"
                                   " (same commit) l.103 passes tool_schema.model_dump(exclude_unset=True,"
                                   " exclude_none=True) as tools= to apply_chat_template (l.205-207)"},
    "qwen25_tools_template": {"repo": "volcengine/verl", "path": "docs/sglang_multiturn/sandbox_fusion.rst",
                              "commit": "2b2aa9d3fdefe4c1fc821b7d83b1cfd431927dc0",
                              "note": "l.222: a rollout of a Qwen2.5 model with this code_interpreter tool, its system"
                                      " turn as Qwen2.5-Instruct's chat template renders tools (the system text, the"
                                      " '# Tools' block, the tool's JSON, the <tool_call> instruction); without a"
                                      " system message the template opens with Qwen2.5-Instruct's default one"},
    "qwen25_math_template": {"repo": "QwenLM/Qwen2.5-Math", "path": "evaluation/utils.py",
                             "commit": "a45202bd16f1ec06f433442dc1152d0074773465",
                             "note": "'qwen25-math-cot': the system message Qwen2.5-Math's chat template adds when the"
                                     " conversation has none"},
}

DAPO_PREFIX = ("Solve the following math problem step by step. The last line of your response should be of the form"
               " Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n")
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'
GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
GSM8K_AREAL_INSTRUCTION = "\nPlease put your final answer within \\boxed{}."  # source areal_gsm8k_template
RETOOL_ANSWER_FORMAT = "\nThe answer format must be: \\boxed{'The final answer goes here.'}"
RETOOL_TOOL = {"type": "function", "function": {
    "name": "code_interpreter", "description": "A tool for executing code.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "The code to execute."}},
                   "required": ["code"]}}}
"""``recipe/retool/sandbox_fusion_tool_config.yaml``'s schema as ``model_dump(exclude_unset=True, exclude_none=True)``
gives it (source ``retool_tool_schema``): the unset ``enum`` and ``strict`` are left out."""
QWEN25_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def qwen25_tools_system(tools: list[dict]) -> str:
    """Qwen2.5-Instruct's system turn with ``tools`` and no system message (source ``qwen25_tools_template``);
    ``tojson`` is transformers' ``json.dumps(x, ensure_ascii=False)``."""
    listed = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
    return (QWEN25_DEFAULT_SYSTEM + "\n\n# Tools\n\nYou may call one or more functions to assist with the user query."
            "\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" + listed
            + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within"
            " <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\":"
            " <args-json-object>}\n</tool_call>")

# the chat template of each model, as apply_chat_template(add_generation_prompt=True) renders one user turn
# (HF tokenizer_config.json chat_template of each model: a default system turn where the model's template has one)
CHAT = {
    "Qwen/Qwen2-7B-Instruct": ("You are a helpful assistant.", "Qwen2-Instruct default system message"),
    "Qwen/Qwen2.5-0.5B-Instruct": ("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
                                   "Qwen2.5-Instruct default system message"),
    "Qwen/Qwen2.5-1.5B-Instruct": ("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
                                   "Qwen2.5-Instruct default system message (the template Qwen2.5-0.5B-Instruct's"
                                   " entry uses; the Qwen2.5-Instruct sizes ship one chat template)"),
    "Qwen/Qwen2.5-Math-7B": ("Please reason step by step, and put your final answer within \\boxed{}.",
                             "Qwen2.5-Math default system message (source qwen25_math_template)"),
    "Qwen/Qwen2.5-7B-Instruct": (qwen25_tools_system([RETOOL_TOOL]),
                                 "Qwen2.5-Instruct default system message with the code_interpreter tool's block"
                                 " (sources qwen25_tools_template, retool_tool_schema); the prompt only, before any"
                                 " turn"),
    "Qwen/Qwen3-30B-A3B-Base": (None, ("Qwen3 template: no default system turn, generation prompt"
                                       " '<|im_start|>assistant\\n' (the Qwen3 template was not read here for this"
                                       " model: a thinking-variant template adds '<think>\\n', 2 tokens more)")),
}

MEASURE = [
    # (dataset, model, source keys, prompt builder)
    ("openai/gsm8k", "Qwen/Qwen2-7B-Instruct", ("gsm8k", "gsm8k_template"), "gsm8k"),
    ("openai/gsm8k", "Qwen/Qwen2.5-0.5B-Instruct", ("gsm8k", "gsm8k_template"), "gsm8k"),
    ("openai/gsm8k (AReaL-lite boxed instruction)", "Qwen/Qwen2.5-1.5B-Instruct", ("gsm8k", "areal_gsm8k_template"),
     "gsm8k_areal"),
    ("BytedTsinghua-SIA/DAPO-Math-17k", "Qwen/Qwen2.5-Math-7B", ("dapo", "dapo_template", "qwen25_math_template"),
     "dapo"),
    ("BytedTsinghua-SIA/DAPO-Math-17k", "Qwen/Qwen3-30B-A3B-Base", ("dapo", "dapo_template"), "dapo"),
    ("BytedTsinghua-SIA/DAPO-Math-17k (multi-turn ReTool)", "Qwen/Qwen2.5-7B-Instruct",
     ("dapo", "dapo_template", "retool_dataset", "retool_tool_schema", "qwen25_tools_template"), "retool"),
]


def qwen_encoding(path: Path):
    import tiktoken

    ranks = {}
    for line in path.read_bytes().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    enc = tiktoken.Encoding("qwen", pat_str=QWEN_PAT, mergeable_ranks=ranks, special_tokens=QWEN_SPECIAL)
    assert enc.encode("<|im_start|>hello<|im_end|>", allowed_special="all") == [151644, 14990, 151645]
    return enc


def chatml(system: str | None, user: str) -> str:
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if system is not None else ""
    return f"{head}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def user_texts(kind: str, inputs: Path) -> list[str]:
    if kind == "gsm8k":
        rows = [json.loads(line) for line in (inputs / SOURCES["gsm8k"]["file"]).read_text().splitlines() if line]
        return [r["question"] + " " + GSM8K_INSTRUCTION for r in rows]
    if kind == "gsm8k_areal":
        rows = [json.loads(line) for line in (inputs / SOURCES["gsm8k"]["file"]).read_text().splitlines() if line]
        return [r["question"] + GSM8K_AREAL_INSTRUCTION for r in rows]
    import pyarrow.parquet as pq

    table = pq.read_table(inputs / SOURCES["dapo"]["file"], columns=["prompt"]).to_pylist()
    problems = [r["prompt"][0]["content"] for r in table]
    if any(p.startswith(DAPO_PREFIX[:40]) for p in problems):
        raise SystemExit("dapo: the problems already carry the instruction; this file is not the stripped one")
    end = RETOOL_ANSWER_FORMAT if kind == "retool" else ""
    return [DAPO_PREFIX + p + DAPO_SUFFIX + end for p in problems]


def measure(inputs: Path) -> list[dict]:
    enc = qwen_encoding(inputs / SOURCES["qwen_bpe"]["file"])
    out = []
    for dataset, model, keys, kind in MEASURE:
        system, template_note = CHAT[model]
        counts = [len(enc.encode(unicodedata.normalize("NFC", chatml(system, u)), allowed_special="all"))
                  for u in user_texts(kind, inputs)]
        out.append({
            "dataset": dataset, "model": model, "prompts": len(counts),
            "mean_tokens": round(statistics.fmean(counts), 1), "p50_tokens": int(statistics.median(counts)),
            "max_tokens": max(counts),
            "template": template_note, "tokenizer": "qwen_bpe",
            "sources": list(keys) + ["qwen_bpe"],
        })
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=Path, required=True, help="directory holding the SOURCES files")
    ap.add_argument("--check", action="store_true", help="compare with the stored file instead of writing it")
    args = ap.parse_args(argv)
    doc = {
        "description": "Mean prompt tokens as the RL framework feeds them (dataset text + the recipe's instruction"
                       " + the model's chat template, add_generation_prompt), measured by"
                       " benchmarks/rl_prompt_lengths.py; every prompt of the dataset, no sampling, no fitting.",
        "validation": "openai/gsm8k: the means equal the prompt_length/mean verl logged for these two models"
                      " (published_rl_times.json, playverl rows: 93.6 Qwen2-7B-Instruct, 103.6"
                      " Qwen2.5-0.5B-Instruct), a check of tokenizer, instruction and template together",
        "not_measured": {
            "BytedTsinghua-SIA/DAPO-Math-17k / deepseek-ai/DeepSeek-V3": "DeepSeek-V3 tokenizer not obtained",
            "agentica-org/DeepScaleR-Preview-Dataset": "dataset file not found in the public repositories searched",
            "hiyouga/geometry3k": "image tokens depend on each image's resolution; images not obtained",
        },
        "sources": SOURCES,
        "entries": measure(args.inputs),
    }
    if args.check:
        stored = json.loads(OUT.read_text())
        if stored["entries"] != doc["entries"]:
            print("rl_prompt_lengths.json differs from a fresh measurement", file=sys.stderr)
            return 1
        print("rl_prompt_lengths.json matches")
        return 0
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    for e in doc["entries"]:
        print(f"{e['dataset']:34s} {e['model']:28s} n={e['prompts']:6d} mean={e['mean_tokens']:7.1f}"
              f" p50={e['p50_tokens']:5d} max={e['max_tokens']:5d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
