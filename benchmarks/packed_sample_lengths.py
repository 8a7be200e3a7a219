"""Measure the sample lengths of the packed SQuAD fine-tuning runs NVIDIA publishes (NeMo, Megatron-Bridge).

Writes ``benchmarks/data/packed_sample_lengths.json``: per (pipeline, model tokenizer) the number of samples, the
mean tokens a sample occupies in a packed row, its coefficient of variation (std / mean), the mean of its square
(what attention per sample costs: ``Σ len_i²``) and ``E[len²] / E[len]`` (the causal span trainfit's packed
attention uses, ``mean·(1 + cv²)``). ``benchmarks/step_times.py`` maps it onto the rows that fine-tune on packed
SQuAD (``batch.packed_sample_tokens`` / ``batch.packed_sample_length_cv``). No number is fitted: each is a count.

Each sample is built as the pipeline at the cited commit builds it (``SOURCES``):

* NeMo 24.07 (Llama 2, SentencePiece): ``SquadDataModule`` writes ``{"input": "Context: {context} Question:
  {question} Answer:", "output": answers[0]}``; ``GPTSFTDataset`` with the launcher's ``prompt_template "{input}
  {output}"`` tokenizes the two fields apart (the tokenizer is not space sensitive, so the separating space goes),
  no BOS, one EOS; ``prepare_packed_ft_dataset.py`` bins ``len(input_ids) - 1`` tokens per sample (input and label
  are shifted by one) and the packed collate gives each sample ``len - 1`` positions in ``cu_seqlens``.
* NeMo 2.0 (``llm.finetune``, Llama 3; NVIDIA/dgxc-benchmarking v25.04's ``ft_llama3``): the same ``SquadDataModule``
  template and ``create_sft_dataset`` defaults (``"{input} {output}"``, no BOS, one EOS) with the HF Llama 3
  tokenizer, which is space sensitive, so the separating space stays with the answer (as Megatron-Bridge below);
  packing and ``cu_seqlens`` as 24.07's, the row's padding its own segment.
* Megatron-Bridge 26.06 (Llama 3, tiktoken BPE): the ``squad`` adapter writes the same prompt and answer;
  ``PromptCompletionSFTPreprocessingConfig(separator=" ")`` tokenizes prompt and ``" " + answer`` apart (the BPE is
  space sensitive, so the space stays with the answer), no BOS, one EOS; packing and ``cu_seqlens`` as NeMo's.

Truncation to the run's 4,096-token sequence never triggers on SQuAD (the longest sample is reported).

Data: the SQuAD v1.1 *train* file (``train-v1.1.json``, 87,599 questions) is what the runs train on. Where it is
at hand pass it with ``--squad-json``. Where it is not (from where this was run, the SQuAD site and the Hugging
Face hub were unreachable and every public repository copy of the 30 MB file was absent or a subset), the script
reads the SQuAD v1.1 *development* set as its publisher renders it (``rajpurkar/SQuAD-explorer`` ``gh-pages``
``explore/1.1/dev/*.html``: all 48 articles, 2,067 paragraphs, 10,570 questions, the counts of ``dev-v1.1.json``).
SQuAD's articles were split at random into train / dev / test (Rajpurkar et al. 2016, §3), so the dev articles are
a random sample of the same distribution; the file records which split was measured and an article-level
bootstrap standard error of each figure. The packed rows are also simulated (NeMo's ``first_fit_shuffle`` into
4,096-token rows, padding as each framework's collate places it) as a check of what a row's attention costs.

Needs ``sentencepiece`` and ``tiktoken`` (not project dependencies: ``pip install sentencepiece tiktoken`` into
any venv or a ``--target`` folder on ``PYTHONPATH``).
Usage: ``python benchmarks/packed_sample_lengths.py --inputs DIR [--squad-json train-v1.1.json] [--check]``
(``DIR`` holds the ``file`` of each source; ``--check``: compare with the stored file, exit 1 on a difference).

The file's ``published`` list (sample-length statistics a framework publishes for a dataset it packs, e.g.
ms-swift's for LongAlpaca-12k) is not measured here: it is kept as stored when the file is rewritten.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import random
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).parent / "data" / "packed_sample_lengths.json"
PACK_TOKENS = 4096
"""The packed row of every published SQuAD fine-tuning row (``max_seq_length`` / ``packed_sequence_size``)."""

NEMO = ("NVIDIA/NeMo", "8e3d65dcfe3504689bfc5b6e67d502780aacad41")
"""NeMo at the '24.07 perf numbers' commit the NeMo rows cite."""
NEMO2 = ("NVIDIA/NeMo", "25ec4e9894c6938c3562ebb1df3280cf5a01f4da")
"""NeMo 2.0 as NVIDIA/dgxc-benchmarking release v25.04 installs it (ft_llama3/setup.sh @741c886)."""
DGXC = ("NVIDIA/dgxc-benchmarking", "741c886025a7665a1d690c05ff12ac29c1be7252")
MBRIDGE = ("NVIDIA-NeMo/Megatron-Bridge", "067f987df03b8355b03192d88d70f1709fedf51a")
LAUNCHER = ("NVIDIA/NeMo-Framework-Launcher", "8325688d8345a5513660f0f8390f0482a721c009")
"""NeMo-Framework-Launcher tag 24.07 (the NeMo rows' example scripts)."""


def _src(repo_commit: tuple[str, str], path: str, note: str, file: str | None = None) -> dict[str, str]:
    entry = {"repo": repo_commit[0], "path": path, "commit": repo_commit[1], "note": note}
    if file:
        entry["file"] = file
    return entry


SOURCES = {
    "squad_dev": {"repo": "rajpurkar/SQuAD-explorer", "path": "explore/1.1/dev/*.html",
                  "commit": "e0c66cfec263165fb3c15cb76a22175e371b71d7", "file": "squad_dev_explore",
                  "note": "gh-pages branch: the SQuAD v1.1 development set rendered per article by its authors (48"
                          " articles, 2,067 paragraphs, 10,570 questions, each with its ground-truth answers in"
                          " file order); the page index.html is skipped"},
    "squad_train_url": {"url": "https://rajpurkar.github.io/SQuAD-explorer/dataset/train-v1.1.json",
                        "date": "2026-12-02",
                        "note": "the train split the runs use (Hugging Face rajpurkar/squad 'train' is this file);"
                                " not reachable from where this was run: pass it with --squad-json where it is"},
    "llama2_tokenizer": {"repo": "karpathy/llama2.c", "path": "tokenizer.model",
                         "commit": "350e04fe35433e6d2941dce5a1f53308f87058eb", "file": "llama2_tokenizer.model",
                         "note": "Llama 2 SentencePiece model, 32,000 pieces; sha256 9e556afd44213b6bd1be2b850ebbbd98"
                                 "f5481437a8021afaf58ee7fb1818d347, the size and hash of meta-llama/Llama-2-7b-hf"
                                 " tokenizer.model (the 13B and 70B share it)"},
    "llama3_tokenizer": {"repo": "meta-llama/llama-models", "path": "models/llama3/tokenizer.model",
                         "commit": "a9c89c471f793423afd4cc3ca8671d6e56fe64cb", "file": "llama3_tokenizer.model",
                         "note": "Llama 3 BPE ranks, 128,000 ordinary tokens + 256 special (<|end_of_text|> 128001),"
                                 " with the pre-tokenizer regex of models/llama3/tokenizer.py at the same commit"},
    "nemo_squad_template": _src(NEMO, "nemo/collections/llm/gpt/data/squad.py",
                                "SquadDataModule._preprocess_and_split_data: input 'Context: ' + context + '"
                                " Question: ' + question + ' Answer:', output answers['text'][0], written to"
                                " training.jsonl (the TRAIN_DS the launcher scripts name)"),
    "nemo_sft_dataset": _src(NEMO, "nemo/collections/nlp/data/language_modeling/megatron/gpt_sft_dataset.py",
                             "GPTSFTDataset._separate_template / _process_example: fields tokenized apart, leading"
                             " space dropped when not space_sensitive; GPTSFTPackedDataset.collate_fn: each sample"
                             " len - 1 positions in cu_seqlens, the last one stretched to the padded row"),
    "nemo_packing": _src(NEMO, "scripts/nlp_language_modeling/prepare_packed_ft_dataset.py",
                         "tokenize with GPTSFTDataset, create_hist on len(input_ids) - 1, first_fit_shuffle"
                         " (nemo/utils/sequence_packing_utils.py)"),
    "nemo_launcher_sft": _src(LAUNCHER, "launcher_scripts/conf/peft/llama/sft.yaml",
                              "train_ds: prompt_template '{input} {output}', label_key output, add_bos False,"
                              " add_eos True, truncation_field input, truncation_method right; the h100 example"
                              " scripts set packed_sequence=true, pad_to_max_length=true, max_seq_length=4096"),
    "nemo_space_sensitive": _src(NEMO, "nemo/collections/common/tokenizers/sentencepiece_tokenizer.py",
                                 "space_sensitive = text_to_tokens('x y') != text_to_tokens('x') +"
                                 " text_to_tokens('y')"),
    "nemo2_squad_template": _src(NEMO2, "nemo/collections/llm/gpt/data/squad.py",
                                 "SquadDataModule._preprocess_and_split_data: the same input 'Context: ' + context +"
                                 " ' Question: ' + question + ' Answer:' and output answers['text'][0]; training.jsonl"
                                 " is HF 'squad' train less a seeded 5% validation split"),
    "nemo2_sft_dataset": _src(NEMO2, "nemo/collections/llm/gpt/data/core.py",
                              "create_sft_dataset defaults: prompt_template '{input} {output}', add_bos False,"
                              " add_eos True, label_key output, truncation_field input; GPTSFTDataset"
                              " (nemo/collections/nlp/data/language_modeling/megatron/gpt_sft_dataset.py)"
                              " _separate_template keeps the ' ' before {output} when the tokenizer is space"
                              " sensitive; GPTSFTPackedDataset.collate_fn: each sample len - 1 positions in"
                              " cu_seqlens, the row's padding appended as its own segment (pad_cu_seqlens False)"),
    "nemo2_packing": _src(NEMO2, "nemo/collections/llm/gpt/data/packed_sequence.py",
                          "prepare_packed_sequence_data: tokenize with create_sft_dataset, create_hist on"
                          " len(input_ids) - 1 (nemo/utils/sequence_packing_utils.py), first_fit_shuffle"),
    "nemo2_tokenizer": _src(NEMO2, "nemo/collections/common/tokenizers/huggingface/auto_tokenizer.py",
                            "AutoTokenizer.text_to_ids = convert_tokens_to_ids(tokenize(text)) (include_special_"
                            "tokens False: no BOS); space_sensitive = text_to_tokens('x y') != text_to_tokens('x')"
                            " + text_to_tokens('y') (True for Llama 3's BPE)"),
    "nemo2_recipe": _src(NEMO2, "nemo/collections/llm/recipes/llama3_8b.py",
                         "finetune_recipe(performance_mode=True): packed_sequence, seq_length 4096,"
                         " dataset_kwargs pad_to_max_length True, PackedSequenceSpecs(packed_sequence_size=4096)"
                         " (llama3_70b.py the same)"),
    "dgxc_ft_llama3": _src(DGXC, "ft_llama3/llama3_finetune.py",
                           "finetune_recipe_8b / _70b(performance_mode=True) with recipe.data.tokenizer ="
                           " hf_tokenizer('meta-llama/Meta-Llama-3-8B' / '-70B') (NeMo"
                           " scripts/llm/performance/utils.py: HF AutoTokenizer)"),
    "mbridge_squad": _src(MBRIDGE, "src/megatron/bridge/data/sources/hf_adapters.py",
                          "_squad_adapter: prompt f'Context: {context} Question: {question} Answer:', completion"
                          " answers['text'][0]"),
    "mbridge_recipe": _src(MBRIDGE, "src/megatron/bridge/recipes/utils/dataset_utils.py",
                           "default_squad_config: HF 'squad' (rajpurkar/squad), PromptCompletionSFTPreprocessing"
                           "Config(prompt_column input, completion_column output, separator ' '), offline packing"
                           " to seq_length (4096 in perf_recipes/llama/*/llama3.py llama3_70b_sft/peft configs)"),
    "mbridge_tokenize": _src(MBRIDGE, "src/megatron/bridge/data/sft_processing.py",
                             "tokenize_prompt_completion_example: prompt and separator + completion tokenized"
                             " apart (add_special_tokens=False), the separator's space kept when space sensitive,"
                             " add_bos False, add_eos True"),
    "mbridge_collate": _src(MBRIDGE, "src/megatron/bridge/data/packing/gpt_sft.py",
                            "packed collate: each sample len - 1 positions in cu_seqlens; the row's padding is its"
                            " own last segment (pad_cu_seqlens False, pad_seq_to_mult 1)"),
    "mbridge_flops": _src(MBRIDGE, "src/megatron/bridge/training/utils/flop_utils.py",
                          "for LoRA on packed SQuAD the recipe's model FLOPs use the packed file's mean tokens and"
                          " mean squared sequence length (packing/algorithms.py calculate_avg_seqlen: len - 1 per"
                          " sample): the framework's own account of attention per sample"),
}

LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
"""Llama 3's pre-tokenizer split (``pat_str`` of meta-llama/llama-models ``models/llama3/tokenizer.py``)."""
LLAMA3_EOS = 128001
"""``<|end_of_text|>``: the base model's EOS (the 256 special tokens follow the 128,000 ranks)."""

PIPELINES = {
    "nemo-24.07": {"framework": "nemo", "tokenizer": "llama2_tokenizer", "space_separator": False,
                   "models": ["meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-hf"],
                   "sources": ["nemo_squad_template", "nemo_sft_dataset", "nemo_packing", "nemo_launcher_sft",
                               "nemo_space_sensitive", "llama2_tokenizer"],
                   "padding": "last_sample"},
    "megatron-bridge-26.06": {"framework": "megatron-bridge", "tokenizer": "llama3_tokenizer", "space_separator": True,
                              "models": ["meta-llama/Meta-Llama-3-70B"],
                              "sources": ["mbridge_squad", "mbridge_recipe", "mbridge_tokenize", "mbridge_collate",
                                          "mbridge_flops", "llama3_tokenizer"],
                              "padding": "own_segment"},
    "nemo-2.0-25.04": {"framework": "nemo", "tokenizer": "llama3_tokenizer", "space_separator": True,
                       "models": ["meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B"],
                       "sources": ["nemo2_squad_template", "nemo2_sft_dataset", "nemo2_packing", "nemo2_tokenizer",
                                   "nemo2_recipe", "dgxc_ft_llama3", "llama3_tokenizer"],
                       "padding": "own_segment"},
}

_PARA = re.compile(r'<div class="para-wrap">(.*?)(?=<div class="para-wrap">|$)', re.DOTALL)
_CTX = re.compile(r"<pre>(.*?)</pre>", re.DOTALL)
_QA = re.compile(r'<div class="qa-wrap" data-id="([0-9a-f]+)"><p> <strong class="question">(.*?)</strong></p>'
                 r'<ul class="list-unstyled"><li><p><i>Ground Truth Answers: </i>(.*?)</p>', re.DOTALL)
_ANSWER = re.compile(r'<span class="answer">(.*?)</span>', re.DOTALL)


def squad_from_explorer(folder: Path) -> list[tuple[str, str, str, str]]:
    """(article, context, question, first answer) for every question of the explorer pages, in file order."""
    rows = []
    for page in sorted(folder.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        paragraphs = _PARA.findall(text)
        if not paragraphs:
            continue  # index.html
        for para in paragraphs:
            context = html.unescape(_CTX.search(para).group(1))
            for _, question, answers in _QA.findall(para):
                first = _ANSWER.search(answers)
                if first is None:
                    raise ValueError(f"{page.name}: a question without an answer")
                rows.append((page.stem, context, html.unescape(question), html.unescape(first.group(1))))
    return rows


def squad_from_json(path: Path) -> list[tuple[str, str, str, str]]:
    """The same rows from the official ``train-v1.1.json`` / ``dev-v1.1.json`` (Hugging Face ``squad`` reads it
    in this order: article, paragraph, question; ``answers['text'][0]`` is the first answer)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [(art["title"], para["context"], qa["question"], qa["answers"][0]["text"])
            for art in doc["data"] for para in art["paragraphs"] for qa in para["qas"]]


def llama2_encoder(inputs: Path) -> tuple[Callable[[str], list[int]], int, bool]:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(inputs / SOURCES["llama2_tokenizer"]["file"]))
    pieces = sp.encode_as_pieces
    space_sensitive = pieces("x y") != pieces("x") + pieces("y")  # NeMo's test (source nemo_space_sensitive)
    return sp.encode_as_ids, sp.eos_id(), space_sensitive


def llama3_encoder(inputs: Path) -> tuple[Callable[[str], list[int]], int, bool]:
    import tiktoken

    ranks = {}
    for line in (inputs / SOURCES["llama3_tokenizer"]["file"]).read_text().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    enc = tiktoken.Encoding(name="llama3", pat_str=LLAMA3_PAT, mergeable_ranks=ranks,
                            special_tokens={"<|end_of_text|>": LLAMA3_EOS})
    encode = enc.encode_ordinary
    space_sensitive = encode("x y") != encode("x") + encode("y")  # Megatron-Bridge's _is_space_sensitive
    return encode, LLAMA3_EOS, space_sensitive


ENCODERS = {"llama2_tokenizer": llama2_encoder, "llama3_tokenizer": llama3_encoder}


def sample_tokens(rows, encode, *, space_separator: bool, max_tokens: int = PACK_TOKENS) -> list[int]:
    """Positions each sample takes in a packed row: prompt ids + answer ids + EOS, minus the one token the
    input/label shift drops. Both frameworks strip spaces around each field; the template's separating space
    goes with the answer only for a space-sensitive tokenizer. Right truncation of the prompt to
    ``max_tokens`` (never reached on SQuAD) is applied as the frameworks do."""
    lengths = []
    for _, context, question, answer in rows:
        prompt = f"Context: {context} Question: {question} Answer:".strip(" ")
        answer = answer.strip(" ")
        ids = len(encode(prompt)) + len(encode((" " if space_separator else "") + answer)) + 1  # + EOS
        lengths.append(min(ids, max_tokens) - 1)
    return lengths


def moments(lengths: list[int]) -> dict[str, float]:
    mean = statistics.fmean(lengths)
    sq = statistics.fmean(x * x for x in lengths)
    cv = (sq / (mean * mean) - 1.0) ** 0.5
    return {"mean": mean, "cv": cv, "mean_sq": sq, "context": sq / mean}


def bootstrap_se(rows, lengths, *, draws: int = 400, seed: int = 0) -> dict[str, float]:
    """Standard error of each moment when whole articles are resampled (the split is by article)."""
    by_article: dict[str, list[int]] = {}
    for (article, *_), n in zip(rows, lengths):
        by_article.setdefault(article, []).append(n)
    groups = list(by_article.values())
    rng = random.Random(seed)
    stats = [moments([x for g in rng.choices(groups, k=len(groups)) for x in g]) for _ in range(draws)]
    return {k: statistics.stdev(s[k] for s in stats) for k in ("mean", "cv", "context")}


def simulate_packing(lengths: list[int], *, padding: str, seed: int = 0) -> dict[str, float]:
    """Pack the samples as ``first_fit_shuffle`` does into ``PACK_TOKENS`` rows; per row the attention work
    ``Σ segment²`` with the padding placed as the framework's collate places it (NeMo: the last sample's
    ``cu_seqlens`` end stretched to the row; Megatron-Bridge: the padding its own segment). Returns the rows, the
    fill and the row's effective causal span (work / row tokens) against ``E[len²] / E[len]``."""
    order = lengths[:]
    random.Random(seed).shuffle(order)
    bins: list[list[int]] = []
    room: list[int] = []
    for n in order:  # first fit: the first row with room
        for i, free in enumerate(room):
            if free >= n:
                bins[i].append(n)
                room[i] -= n
                break
        else:
            bins.append([n])
            room.append(PACK_TOKENS - n)
    work = 0
    for b, free in zip(bins, room):
        work += sum(n * n for n in b[:-1])
        work += (b[-1] + free) ** 2 if padding == "last_sample" else b[-1] ** 2 + free * free
    filled = sum(lengths) / (len(bins) * PACK_TOKENS)
    return {"rows": len(bins), "fill": filled, "samples_per_row": len(lengths) / len(bins),
            "row_context": work / (len(bins) * PACK_TOKENS)}


def measure(inputs: Path, squad_json: Path | None) -> dict:
    if squad_json is not None:
        rows = squad_from_json(squad_json)
        split = f"{squad_json.name} (official JSON)"
        data_source = {"file": squad_json.name, **SOURCES["squad_train_url"]}
    else:
        rows = squad_from_explorer(inputs / SOURCES["squad_dev"]["file"])
        split = "dev (SQuAD v1.1 development set, a random 10% of the articles; the train split was not obtained)"
        data_source = {k: SOURCES["squad_dev"][k] for k in ("repo", "path", "commit")}
    entries = []
    for name, pipe in PIPELINES.items():
        encode, _, space_sensitive = ENCODERS[pipe["tokenizer"]](inputs)
        if space_sensitive != pipe["space_separator"]:
            raise SystemExit(f"{name}: tokenizer space_sensitive={space_sensitive}, the pipeline expects"
                             f" {pipe['space_separator']}")
        lengths = sample_tokens(rows, encode, space_separator=pipe["space_separator"])
        m = moments(lengths)
        se = bootstrap_se(rows, lengths)
        sim = simulate_packing(lengths, padding=pipe["padding"])
        entries.append({
            "pipeline": name, "framework": pipe["framework"], "models": pipe["models"], "pack_tokens": PACK_TOKENS,
            "tokenizer": pipe["tokenizer"], "split": split,
            "samples": len(lengths), "articles": len({r[0] for r in rows}),
            "mean_tokens": round(m["mean"], 1), "cv": round(m["cv"], 3), "mean_sq_tokens": round(m["mean_sq"]),
            "context_tokens": round(m["context"], 1), "p50_tokens": int(statistics.median(lengths)),
            "max_tokens": max(lengths),
            "se": {"mean_tokens": round(se["mean"], 1), "cv": round(se["cv"], 3),
                   "context_tokens": round(se["context"], 1)},
            "packed_rows_check": {"pack_tokens": PACK_TOKENS, "rows": sim["rows"], "fill": round(sim["fill"], 4),
                                  "samples_per_row": round(sim["samples_per_row"], 2),
                                  "row_context_tokens": round(sim["row_context"], 1), "padding": pipe["padding"]},
            "sources": pipe["sources"],
        })
    return {
        "description": "Tokens per packed SQuAD v1.1 sample as NeMo 24.07, NeMo 2.0 and Megatron-Bridge 26.06 build"
                       " them"
                       " (prompt 'Context: {context} Question: {question} Answer:' + answer + EOS, minus the"
                       " input/label shift), measured by benchmarks/packed_sample_lengths.py: every question of the"
                       " split, no sampling, no fitting. mean_tokens / cv feed batch.packed_sample_tokens /"
                       " batch.packed_sample_length_cv; context_tokens = E[len^2] / E[len] = mean (1 + cv^2).",
        "data": data_source,
        "split": split,
        "se_note": "se: standard error of each figure when whole articles are resampled (400 draws): how far the"
                   " train split's figure may sit from this split's",
        "packed_rows_check": "first_fit_shuffle into 4,096-token rows; row_context_tokens = the row's attention"
                             " work (sum of segment^2, padding placed as the framework's collate places it) / 4,096:"
                             " what a padded row costs, against context_tokens (what the card's two fields give)",
        "sources": SOURCES,
        "entries": entries,
    }


def kept_published(path: Path) -> dict:
    """The stored file's ``published`` statistics (sample lengths a framework publishes for a dataset it packs, each
    with its own source; not measured here) and their note, carried over when the measured entries are rewritten."""
    if not path.exists():
        return {}
    stored = json.loads(path.read_text())
    return {k: stored[k] for k in ("published_note", "published") if k in stored}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=Path, required=True, help="folder holding the tokenizer files and squad pages")
    ap.add_argument("--squad-json", type=Path, default=None, help="official SQuAD v1.1 JSON (train-v1.1.json)")
    ap.add_argument("--check", action="store_true", help="compare with the stored file; exit 1 on a difference")
    args = ap.parse_args(argv)
    doc = measure(args.inputs, args.squad_json) | kept_published(OUT)
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        same = OUT.read_text() == text
        print("same as stored" if same else "differs from stored")
        return 0 if same else 1
    OUT.write_text(text)
    for e in doc["entries"]:
        print(f"{e['pipeline']:24s} {e['tokenizer']:17s} n={e['samples']} mean={e['mean_tokens']}"
              f" (se {e['se']['mean_tokens']}) cv={e['cv']} E[s^2]/E[s]={e['context_tokens']} max={e['max_tokens']}"
              f" | packed rows {e['packed_rows_check']['rows']} fill {e['packed_rows_check']['fill']}"
              f" row context {e['packed_rows_check']['row_context_tokens']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
