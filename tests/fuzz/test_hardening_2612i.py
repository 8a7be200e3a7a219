"""Findings of the seventh review of the December 2026 hardening pass, as explicit cases (each fails without its fix).
As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line, exit code 2,
no traceback and no output file; ``--json`` prints ``{"error": line}`` on a refusal (tests/cli/test_cli_json_errors.py).
The output-stream findings of the same review (a named pipe nobody reads, ``--out /dev/stdout`` redirected to a file,
the Python API's HTML writers) are in tests/unit/test_fsio_streams.py; the web API's cross-site ones in
tests/serve/test_api_cross_site.py.

Checked in the same review and found clean (no case kept, nothing to fix):
- the reward grader, from inside a jailed candidate (a ``solution.py`` probing its world through ``Candidate``): its
  open descriptors are 0-2 (``/dev/null``) and the request and reply pipes; its environment PATH, HOME, TMPDIR, LANG
  and PYTHONDONTWRITEBYTECODE only; argv ``['-c']``; no ``/proc``, ``/sys``, ``/run`` or ``/work`` (so no parent
  argv, no other process, no hidden test); ``/`` holds the read-only system trees, ``/ws`` and empty private tmpfs;
  a fresh uid with no groups, pid 2 under the namespace's init; no host unix socket. No copy of ``hidden.sealed``
  lies outside the checkout on the machine. Monkeypatching builtins / sys.exit, fake "passed" prints (the score is
  read from junit XML), forks, sleeps, daemons, memory, disk, network and writes outside stay covered by
  tests/accept/test_sandbox_attacks.py. The hidden tests compare JSON values with ``==`` (``True == 1``,
  ``5.0 == 5``): equal values, not a way past a test.
- cards with YAML python tags (``!!python/object/apply:os.system``, ``!!python/name``), custom tags, ``!!binary``,
  ``!!set``, timestamps, merge keys, duplicate keys, several documents, NUL, a BOM, non-text keys, list or scalar
  roots, 5,000-digit integers, NaN / inf / negative / huge numbers, ANSI escapes and RTL marks: one line each, no
  code run. No input is unpickled anywhere. An empty card plans the default card (pinned in test_regressions). YAML
  1.1 reads ``2:00`` as 120 and ``0x10`` as 16 (PyYAML's SafeLoader, as the frameworks' own YAML readers do): left.
- the newest card fields (roles.reward_model_dtype, precision.autocast, precision.tf32, lora.quantize_moe_experts,
  loop.returns_kv_cache, parallel.unsloth_layers, loss.triton): 22 odd values each on an SFT and a GRPO card, by
  file and by ``--set``, with and without ``--json``; exports of each to six targets name it where not carried.
- ``size`` with ``/dev/zero``, ``/dev/null``, folders, ``..``, 300-character and newline names, config.json values
  that are NaN, negative, huge, fractional, booleans or non-dividing head counts; ``export --out`` to ``/dev/full``,
  ``/dev/null``, a link, a dangling link, a folder, a missing folder, a path through a file.
- the web API's model sources (local paths in model, model.id, model.path, roles.reward_model, roles.critic,
  model.reference): refused before any file is opened (checked with an audit hook)."""

from __future__ import annotations

import pytest

from fuzzlib import check_run, run_cli


def _plan(tmp_path, text):
    card = tmp_path / "card.yaml"
    card.write_text(text)
    run = run_cli(["plan", str(card), "--json"])
    check_run(run, codes=(0, 2), json_out=True)
    return run


# ------------------------------------------------------------------------------------------------
# 1. model.reference (the shape a bare parameter count assumes): an empty one was dropped and the nearest shape
#    planned without a word; one given beside an id, a path or a config (no bare count) was ignored; an unknown one
#    was reported as "model: '...' is not in the catalog, not a local path, and not in the Hugging Face cache or
#    reachable hub" (the wrong field, and places never looked in: a reference is looked up in the catalog only).
@pytest.mark.parametrize("model, line", [
    ("{params: 27e9, reference: ''}", "model.reference: empty; allowed: a catalog id"),
    ("{params: 27e9, reference: '  '}", "model.reference: empty; allowed: a catalog id"),
    ("{id: Qwen/Qwen3-8B, reference: Qwen/Qwen3-32B}", "model.reference: only read with model.params"),
    ("{path: /nonexistent/model, reference: Qwen/Qwen3-32B}", "model.reference: only read with model.params"),
    ("{params: 27e9, reference: Qwen/Qwen3-32b}",
     "model.reference: 'Qwen/Qwen3-32b' is not in the catalog (the reference shape is a catalog model); did you mean:"),
    ("{params: 27e9, reference: /tmp/some/config.json}",
     "model.reference: '/tmp/some/config.json' is not in the catalog (the reference shape is a catalog model);"),
])
def test_model_reference_is_read_or_refused_naming_itself(tmp_path, model, line):
    run = _plan(tmp_path, f"model: {model}\n")
    assert run.rc == 2 and line in run.stderr, run.stderr
    assert "not a local path" not in run.stderr and "Hugging Face" not in run.stderr


def test_model_reference_by_catalog_id_or_alias_still_plans(tmp_path):
    run = _plan(tmp_path, "model: {params: 27e9, reference: Qwen/Qwen3-8B}\n")
    assert run.rc == 0, run.stderr
    assert "Qwen/Qwen3-8B's shape" in " ".join(__import__("json").loads(run.stdout)["assumptions"])


# ------------------------------------------------------------------------------------------------
# 2. model.params beside model.config: two sources of the model's size, and the config's won without a word (a card
#    saying 7e9 parameters was planned at the inline config's 95,040). An id or a path beside either stays allowed:
#    it names what the framework loads (export.common.model_name), the count or config sizes the plan.
def test_model_params_beside_an_inline_config_is_refused(tmp_path):
    cfg = ("{hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 2, vocab_size: 100, intermediate_size: 128,"
           " model_type: llama}")
    run = _plan(tmp_path, f"model: {{params: 7e9, config: {cfg}}}\n")
    assert run.rc == 2 and "model.params: give a parameter count or an inline config, not both" in run.stderr, run.stderr
    run = _plan(tmp_path, f"model: {{id: org/tiny, config: {cfg}}}\n")
    assert run.rc == 0, run.stderr


# ------------------------------------------------------------------------------------------------
# 3. A card's text reached the terminal raw: `trainfit plan` printed model.id as given, so a card from elsewhere
#    holding ESC sequences (``\x1b]0;...`` sets the window title, ``\x1b[...`` moves the cursor and recolours, OSC 8
#    makes links) drove the user's terminal (rich drops BEL and a few others, not ESC). Control characters other than
#    tab, newline and carriage return are refused wherever the card holds text, naming the key.
@pytest.mark.parametrize("text, key", [
    ('model: {id: "\\e]0;PWNED\\a\\e[31mRED", params: 7e9}\n', "model.id"),
    ('model: "Qwen/Qwen3-0.6B\\e[2J"\n', "model"),
    ('model: Qwen/Qwen3-0.6B\nscope: lora\nlora: {modules_to_save: [lm_head, "x\\x9b31m"]}\n', "lora.modules_to_save[1]"),
    ('model: Qwen/Qwen3-0.6B\nrecipe: {path: "a\\x7fb"}\n', "recipe.path"),
])
def test_control_characters_in_card_text_are_refused_naming_the_key(tmp_path, text, key):
    run = _plan(tmp_path, text)
    assert run.rc == 2, run.stdout[:300]
    assert f"trainfit: error: {key}: control character U+" in run.stderr, run.stderr
    assert "\x1b" not in run.stdout + run.stderr and "\x9b" not in run.stdout + run.stderr


def test_control_characters_given_with_set_are_refused_too():
    run = run_cli(["plan", "--set", "model={id: \"a\\e[31m\", params: 7e9}"])  # YAML's \e escape
    check_run(run, codes=(2,))
    assert "model.id: control character U+001B" in run.stderr, run.stderr
    run = run_cli(["plan", "--set", "recipe.path=a\x1b[31m"])  # a raw ESC: not YAML, read as the text it is
    check_run(run, codes=(2,))
    assert "recipe.path: control character U+001B" in run.stderr, run.stderr
