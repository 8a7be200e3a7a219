"""The page's Search posts what the form says to train: model, method, scope and the workload (sequence length; for
PPO/GRPO response length and generations), which ``/api/fit`` holds. Before, ``runFit`` posted ``{model, method}``
only, so a user who picked lora or qlora got full fine-tuning rows (the API holds a body's missing scope at its
default, full: docs/api.md)."""

import json
import shutil
import subprocess

import pytest

from trainfit.serve.page import SCRIPT

NODE = shutil.which("node") or shutil.which("nodejs")

FORM = {"model": "Qwen/Qwen3-8B", "method": "grpo", "scope": "lora", "gpu": "rtx4090", "count": "4", "nodes": "1",
        "strategy": "zero2", "offload": "optimizer", "ckpt": True, "chunked": True, "mbs": "2", "seq": "4096",
        "accum": "3", "placement": "colocate", "gmu": "", "resp": "2048", "ngen": "16", "rgpus": "1", "fit-max": "8"}

HARNESS = """
const FORM = %s;
const el = (id) => ({value: FORM[id], checked: FORM[id], textContent: '', innerHTML: '', style: {},
                     classList: {toggle(){}, add(){}, remove(){}}, addEventListener(){}, dataset: {}});
const els = {};
globalThis.document = {getElementById: (id) => (els[id] = els[id] || el(id)),
                       querySelectorAll: () => [{value: 'rtx4090'}, {value: 'h100-sxm'}],
                       addEventListener(){}, body: {classList: {toggle(){}}}};
globalThis.window = globalThis;
let posted = null;
globalThis.fetch = async (path, opts) => { if (path === '/api/fit') posted = JSON.parse(opts.body);
  return {status: 200, json: async () => ({html: ''}), text: async () => '{"html": ""}'}; };
const LIMIT = 65536;
const $ = (id) => document.getElementById(id);
let upload = null, seq = 0, timer = null;
%s
runFit().then(() => { process.stdout.write(JSON.stringify(posted)); });
"""


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_search_posts_scope_and_workload_not_the_knobs():
    # the page's functions from card() to runFit(), outside the script's closure (which loads the catalogs first)
    functions = SCRIPT[SCRIPT.index("function card()"):SCRIPT.index("function readUpload")]
    src = HARNESS % (json.dumps(FORM), functions)
    out = subprocess.run([NODE, "-e", src], capture_output=True, text=True, timeout=60, check=True).stdout
    body = json.loads(out)
    assert body["card"] == {"model": "Qwen/Qwen3-8B", "method": "grpo", "scope": "lora", "batch": {"seq_len": 4096},
                            "rollout": {"response_len": 2048, "num_generations": 16}}
    assert body["gpus"] == ["rtx4090", "h100-sxm"] and body["max_gpus"] == 8


def test_run_fit_posts_the_forms_fit_card():
    run_fit = SCRIPT[SCRIPT.index("async function runFit()"):]
    run_fit = run_fit[:run_fit.index("\n}\n")]
    assert "const c = fitCard();" in run_fit
    fit_card = SCRIPT[SCRIPT.index("function fitCard()"):SCRIPT.index("async function runFit()")]
    assert "scope: c.scope" in fit_card
