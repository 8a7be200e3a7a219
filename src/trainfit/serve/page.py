"""The page `trainfit serve` shows: controls, the verdict, the report; inline CSS and script only."""

from __future__ import annotations

from functools import lru_cache
from html import escape

from trainfit.report.html import page
from trainfit.serve.app import MAX_BODY_BYTES
from trainfit.spec.enums import Method, Offload, Scope, Strategy

DEFAULT_MODEL = "Qwen/Qwen3-8B"
DEFAULT_GPU = "a100-40gb"


def _options(values: list[str], selected: str) -> str:
    return "".join(
        f'<option value="{escape(v)}"{" selected" if v == selected else ""}>{escape(v)}</option>' for v in values
    )


EXTRA_CSS = """
form#controls{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:8px 16px;background:#f7f7f9;
 border:1px solid #e1e1e8;padding:12px;margin-bottom:12px;font-size:13px}
form#controls label{display:flex;flex-direction:column;gap:3px}form#controls label.check{flex-direction:row;align-items:center;gap:6px}
form#controls input,form#controls select{font-size:13px;padding:3px}
form#controls .wide{grid-column:span 2}.rl{display:none}body.rl-method .rl{display:flex}
#verdict{font-size:16px;font-weight:bold;padding:8px 12px;border-radius:4px;margin:8px 0;background:#eee}
#verdict.fits{background:#e6f4ea;color:#1a7f37}#verdict.no-fit{background:#fdecea;color:#c62828}
#error{background:#fdecea;border:1px solid #f5c2c0;color:#8a1c1c;padding:8px 12px;font-size:13px;margin:8px 0}
#status{font-size:12px;color:#777;min-height:16px}#report #verdict-box .badge{display:none}#report.stale{opacity:.45}
.fitbox{background:#f7f7f9;border:1px solid #e1e1e8;padding:10px;font-size:13px}.fitbox label{margin-right:12px}
"""

SCRIPT = r"""
(function(){
'use strict';
const LIMIT = __LIMIT__;
const $ = (id) => document.getElementById(id);
let upload = null, seq = 0, timer = null;

function card(){
  const c = {
    model: upload ? {config: upload.config, id: upload.name} : $('model').value,
    method: $('method').value, scope: $('scope').value,
    hardware: {gpu: $('gpu').value, gpus_per_node: int('count'), nodes: int('nodes')},
    parallel: {strategy: $('strategy').value, offload: $('offload').value, gradient_checkpointing: $('ckpt').checked},
    batch: {micro_batch_size: int('mbs'), seq_len: int('seq'), grad_accum: int('accum')},
    loss: {chunked: $('chunked').checked},
  };
  if (c.method === 'ppo' || c.method === 'grpo'){
    c.rollout = {placement: $('placement').value, response_len: int('resp'), num_generations: int('ngen')};
    if (num('gmu') !== '') c.rollout.gpu_memory_utilization = num('gmu');  // empty: the framework's default
    if (c.rollout.placement === 'split') c.rollout.gpus = int('rgpus');
  }
  return c;
}
function int(id){ const v = $(id).value.trim(); return /^-?\d+$/.test(v) ? parseInt(v, 10) : v; }
function num(id){ const v = $(id).value.trim(); const n = Number(v); return v !== '' && isFinite(n) ? n : v; }
function gib(b){ return (b / 1073741824).toFixed(2) + ' GiB'; }

async function post(path, body){
  const text = JSON.stringify(body);
  if (text.length > LIMIT) return {status: 413, data: {error: 'the request is ' + text.length + ' bytes; the limit is ' + LIMIT + ' bytes'}};
  const r = await fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: text});
  let data; try { data = await r.json(); } catch (e) { data = {error: 'the server answered ' + r.status}; }
  return {status: r.status, data: data};
}

function showError(msg){ const e = $('error'); e.textContent = msg; e.hidden = !msg; }

async function update(){
  const my = ++seq;
  document.body.classList.toggle('rl-method', ['ppo','grpo'].includes($('method').value));
  $('rgpus-wrap').style.display = $('placement').value === 'split' && ['ppo','grpo'].includes($('method').value) ? 'flex' : 'none';
  $('status').textContent = 'planning...';
  $('report').classList.add('stale');
  let res;
  try { res = await post('/api/plan', card()); }
  catch (e) { if (my === seq){ $('status').textContent = ''; showError('the server did not answer: ' + e); } return; }
  if (my !== seq) return;  // a newer request is on its way
  $('status').textContent = '';
  const v = $('verdict');
  if (res.status !== 200){
    showError('trainfit: error: ' + (res.data.error || res.status));
    v.className = ''; v.dataset.fits = ''; v.textContent = 'no plan: fix the input above';
    return;
  }
  showError('');
  const d = res.data;
  v.className = d.fits ? 'fits' : 'no-fit';
  v.dataset.fits = d.fits ? 'yes' : 'no';
  v.textContent = (d.fits ? 'FITS' : 'DOES NOT FIT') + ': peak ' + gib(d.peak_gpu_bytes.device) + ' in ' + d.peak_phase +
    ' of ' + gib(d.gpu_capacity_bytes) + ' on ' + d.chart.world_size + ' x ' + d.gpu.name +
    (d.headroom_bytes >= 0 ? ' (headroom ' + gib(d.headroom_bytes) + ')' : ' (over by ' + gib(-d.headroom_bytes) + ')') +
    (!d.fits && d.headroom_bytes >= 0 && d.rollout && !d.rollout.engine_fits ? '; the rollout engine cannot start' : '');
  $('report').innerHTML = d.html;   // built by the server from escaped text
  $('report').classList.remove('stale');
}
function schedule(){ clearTimeout(timer); timer = setTimeout(update, 150); }

function fitCard(){
  // what the form says to train, held by the search as a card file's fields are (docs/api.md): model, method, scope
  // and the workload (sequence length; for PPO/GRPO response length and generations). The knobs (strategy, offload,
  // micro-batch and accumulation, checkpointing, chunked loss, placement, vLLM fraction), the GPU and the counts are
  // the search's to vary: the checked kinds are posted as gpus
  const c = card();
  const f = {model: c.model, method: c.method, scope: c.scope, batch: {seq_len: c.batch.seq_len}};
  if (c.rollout) f.rollout = {response_len: c.rollout.response_len, num_generations: c.rollout.num_generations};
  return f;
}
async function runFit(){
  const gpus = Array.from(document.querySelectorAll('#fit-gpus input:checked')).map(x => x.value);
  const c = fitCard();
  $('fit-status').textContent = 'searching...';
  let res;
  try { res = await post('/api/fit', {card: c, gpus: gpus, max_gpus: int('fit-max')}); }
  catch (e) { $('fit-status').textContent = 'the server did not answer: ' + e; return; }
  if (res.status !== 200){ $('fit-status').textContent = 'trainfit: error: ' + (res.data.error || res.status); return; }
  $('fit-status').textContent = '';
  $('fit-report').innerHTML = res.data.html;
}

function readUpload(ev){
  const f = ev.target.files[0];
  if (!f) return;
  if (f.size > LIMIT){ showError('config.json: ' + f.size + ' bytes is over the ' + LIMIT + '-byte limit'); ev.target.value=''; return; }
  const rd = new FileReader();
  rd.onload = () => {
    let cfg;
    try { cfg = JSON.parse(rd.result); } catch (e) { showError('config.json: not JSON (' + e.message + ')'); ev.target.value=''; return; }
    if (!cfg || typeof cfg !== 'object' || Array.isArray(cfg)){ showError('config.json: must hold a JSON object'); return; }
    upload = {config: cfg, name: f.name.replace(/\.json$/i, '') || 'uploaded config'};
    $('upload-status').textContent = 'using ' + f.name; $('model').disabled = true; $('clear-upload').hidden = false;
    schedule();
  };
  rd.readAsText(f);
}
function clearUpload(){ upload = null; $('config').value = ''; $('upload-status').textContent = '';
  $('model').disabled = false; $('clear-upload').hidden = true; schedule(); }

async function load(){
  try {
    const [m, g] = await Promise.all([fetch('/api/models').then(r => r.json()), fetch('/api/gpus').then(r => r.json())]);
    const ms = $('model'), gs = $('gpu');
    for (const x of m.models){ const o = new Option(x.id + (x.verified ? '' : ' (unverified)'), x.id); ms.add(o); }
    for (const x of g.gpus){ gs.add(new Option(x.id + ' (' + x.memory_label + ')', x.id)); }
    ms.value = ms.dataset.default; if (!ms.value && ms.options.length) ms.selectedIndex = 0;
    gs.value = gs.dataset.default; if (!gs.value && gs.options.length) gs.selectedIndex = 0;
    const box = $('fit-gpus');
    for (const x of g.gpus){
      const l = document.createElement('label'); const i = document.createElement('input');
      i.type = 'checkbox'; i.value = x.id; i.checked = ['rtx4090','a100-40gb','a100-80gb','h100-sxm'].includes(x.id);
      l.append(i, ' ' + x.id); box.append(l);
    }
  } catch (e) { showError('could not load the catalogs: ' + e); return; }
  for (const el of document.querySelectorAll('#controls input, #controls select')){
    if (el.id === 'config') continue;
    el.addEventListener('input', schedule); el.addEventListener('change', schedule);
  }
  $('config').addEventListener('change', readUpload);
  $('clear-upload').addEventListener('click', clearUpload);
  $('fit-run').addEventListener('click', runFit);
  update();
}
load();
})();
"""


@lru_cache(maxsize=1)
def index_html() -> str:
    methods = [m.value for m in Method]
    scopes = [s.value for s in Scope]
    strategies = [s.value for s in Strategy]
    offloads = [o.value for o in Offload]
    body = f"""
<h1>trainfit: will this post-training run fit?</h1>
<form id="controls" onsubmit="return false">
  <label class="wide">Model (catalog)<select id="model" data-default="{escape(DEFAULT_MODEL)}"></select></label>
  <label class="wide">or upload a config.json (max {MAX_BODY_BYTES // 1024} KiB)<input type="file" id="config" accept=".json,application/json">
    <span><span id="upload-status"></span> <button type="button" id="clear-upload" hidden>use the catalog</button></span></label>
  <label>Method<select id="method">{_options(methods, "sft")}</select></label>
  <label>Scope<select id="scope">{_options(scopes, "full")}</select></label>
  <label>GPU<select id="gpu" data-default="{escape(DEFAULT_GPU)}"></select></label>
  <label>GPUs per node<input type="number" id="count" min="1" max="64" value="8"></label>
  <label>Nodes<input type="number" id="nodes" min="1" value="1"></label>
  <label>Strategy<select id="strategy">{_options(strategies, "fsdp")}</select></label>
  <label>Offload<select id="offload">{_options(offloads, "none")}</select></label>
  <label>Micro-batch size<input type="number" id="mbs" min="1" value="1"></label>
  <label>Sequence length<input type="number" id="seq" min="1" value="2048"></label>
  <label>Gradient accumulation<input type="number" id="accum" min="1" value="1"></label>
  <label class="check"><input type="checkbox" id="ckpt" checked> gradient checkpointing</label>
  <label class="check"><input type="checkbox" id="chunked"> chunked loss (no full logits)</label>
  <label class="rl">Rollout placement<select id="placement">{_options(["colocate", "split"], "colocate")}</select></label>
  <label class="rl" id="rgpus-wrap">Rollout GPUs per node<input type="number" id="rgpus" min="1" value="1"></label>
  <label class="rl">vLLM memory fraction<input type="number" id="gmu" min="0.05" max="1" step="0.05" value="" placeholder="default"></label>
  <label class="rl">Response length<input type="number" id="resp" min="1" value="1024"></label>
  <label class="rl">Generations per prompt<input type="number" id="ngen" min="1" value="8"></label>
</form>
<div id="status" aria-live="polite"></div>
<div id="error" role="alert" hidden></div>
<div id="verdict" data-fits="">loading...</div>
<div id="report"></div>
<h2>Best configuration per GPU type and card count (fit)</h2>
<div class="fitbox"><div id="fit-gpus"></div>
  <label>at most <input type="number" id="fit-max" min="1" max="64" value="64" style="width:5em"> cards</label>
  <button type="button" id="fit-run">Search</button> <span id="fit-status"></span>
  <p class="note">Searches the knobs for the model, method, scope and workload above (sequence length; for PPO/GRPO response length and generations per prompt); the GPU, counts and other settings are left to the search.</p></div>
<div id="fit-report"></div>
<noscript><p>This page needs JavaScript for its controls; the JSON API works without it (docs/api.md).</p></noscript>
"""
    return page("trainfit", body, script=SCRIPT.replace("__LIMIT__", str(MAX_BODY_BYTES)), extra_css=EXTRA_CSS)
