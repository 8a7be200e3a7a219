"""RL response lengths as a distribution, not a mean: the step waits for its longest sequence.

Response lengths (``ResponseShape``): ``exponential`` (truncated at ``response_len_max``) is the
default when a mean is given. RL response lengths are right-skewed, with a clipped tail: many
responses are short, a few run long, and the ones that would run past the limit are cut at it
(verl logs ``response_length/clip_ratio``, the share cut at the maximum; DAPO, Yu et al. 2025, §3.4,
discusses these truncated samples). A truncated exponential has exactly that shape: its mass at the
maximum is ``exp(−(max−1)/θ)``, with ``θ`` solved so the mean is ``response_len_mean`` (a response
has at least one token: ``1 + min(Exp(θ), max − 1)``). ``uniform`` is uniform on
``[2·mean − max, max]`` (mean >= (max+1)/2); ``fixed`` gives every response ``response_len_mean``
tokens (``response_len_max`` when no mean is given, the default then).

``shifted_exponential`` (an option, not the default): the truncated exponential above a floor,
``floor + min(Exp(θ), max − floor)`` with ``floor = SHORTEST_SHARE_OF_MEAN × mean`` and ``θ`` solved for the mean.
verl logs each step's shortest response (``response_length/min``) too, and it is far from the exponential's: the
shortest of 512-5,120 responses is 16-44 % of the step's mean in every run of
``benchmarks/data/rl_response_length_steps.json`` (mean over logged steps), where the exponential's is ``1 + θ/N``,
about 1 token. The floor's share is read from the fit-half run's logged minimum (``SHORTEST_SHARE_OF_MEAN``); the
tail above it is lighter than the plain exponential's at the same mean. Checked on that file's runs, at every 1/40th
logged step's mean, cap and batch (the expected longest of all ``N`` responses; the share cut at the cap):

* fit half, play-verl Qwen2.5-0.5B GRPO (cap 192): clip ratio logged 0.170, shifted 0.352, exponential 0.529;
* held out, play-verl Qwen2.5-0.5B PPO (cap 256): clip 0.321 logged, 0.436 shifted, 0.589 exponential;
* held out, the batch's longest, logged / shifted / exponential: play-verl Qwen2-7B min 867 / 719 (−17 %) / 988
  (+14 %); Qwen2-7B recommended 1,011 / 975 (−4 %) / 1,024 (+1 %); the MI300X deepseek-llm-7b GRPO run 647 / 745
  (+15 %) / 1,019 (+57 %); its PPO run 453 / 511 (+13 %) / 512 (+13 %): median |error| 14 % against 13.5 %, the
  largest 17 % against 57 %. The clip ratio of the cap-free 7B runs (0.00003-0.0044 logged) is not reproduced by
  either (shifted 0-0.0031, exponential 0.0005-0.026).

So it is the better shape for the batch's longest, but not the default: the step-time benchmark
(``benchmarks/step_times.py``, tree of 2cbdbdc, against the same tree) moved the wrong way on subsets the default
must not worsen. As the card default alone: the generation subset's median 17.2 -> 15.2 % but 3 -> 6 rows beyond
50 % (NeMo RL's Llama-3.1-70B phases on 64 H100 −40..−43 -> −57..−60 %: one engine's longest falls), the RL step
subset 14.5 -> 14.9 %, the actor update 22.3 -> 23.1 %, the rows without a published mean 18.0 -> 20.0 % (5 -> 2
beyond 50 %), all rows 10.4 -> 10.7 % (63 -> 64 beyond 50 %). With the slowest engine holding the batch's longest
(its groups: the whole batch's, the top one made one whole sequence of that engine, share 1/S, the others
rescaled to the rest; that experiment's code is not kept) as well: generation 17.2 -> 14.6 % (3 -> 2
beyond 50 %; fit half 10.9 -> 5.9 %, held-out half 37.2 -> 37.0 %; play-verl Qwen2-7B min +61 -> +48 %, the MI300X
deepseek-llm-7b GRPO phase +24 -> +11 %, verl fully-async H20 64-GPU +90 -> +67 %, but NeMo RL's 70B phases
−40..−43 -> −44..−47 %), RL step 14.5 -> 14.5 % with 2 -> 3 beyond 50 % (NeMo RL v0.6 DeepSeek-V3 GB200 step
−49.9 -> −50.6 %; RL step held-out half 12.8 -> 13.5 %), actor update 22.3 -> 23.1 % (the shape also sets the
update's micro-batch spread), rows without a published mean 18.0 -> 19.9 %, all rows 10.4 -> 10.5 % (63 -> 63).
(The slowest engine is now planned with the default shape, ``slowest_engine_length_groups`` and ``generation``'s "The
slowest engine", together with the engines' measured eager price; the figures here are the tree of 2cbdbdc's.)
The lighter tail is what lets the slowest engine in at all: the same slowest engine with the plain exponential
moved generation 17.2 -> 18.0 % and the rows without a published mean 18.0 -> 22.2 % (5 -> 8 beyond 50 %; all rows
63 -> 66 beyond 50 %). Nor does the floor's value rescue the default: at a floor of 0.25 x the mean (a sensitivity
check, not a fit) with the slowest engine, generation 17.2 -> 15.8 %, NeMo RL's 70B phases −40..−43 -> −32..−36 %,
rows without a published mean 18.0 -> 17.2 % but 5 -> 6 beyond 50 %, the RL step 2 -> 3 beyond 50 %, the actor
update 22.3 -> 22.8 %, all rows 63 -> 65 beyond 50 %.
The floor was read from one short-answer run at a tight cap (0.5B GSM8K, cap 1.36x its mean); the held-out runs'
floors are 0.16-0.35 of their means, and no run with a chain-of-thought profile logs its shortest response, so the
floor of the ``COT`` / ``LONG_COT`` rows (NeMo RL's 70B, the DAPO rows) is unmeasured.

**Published clip ratio and longest response** (``fit_published_lengths``; ``rollout.response_clip_ratio`` and
``rollout.response_len_batch_max`` beside ``rollout.response_len_mean``). verl logs, for the whole batch of every
step, ``response_length/mean``, ``/max``, ``/min`` and ``/clip_ratio`` (the share whose length equals the cap); the
step's generation waits for the engine holding its longest response. Where a run publishes them beside the mean:

* the batch's longest ``M`` below the cap: the card's shape with that mean, truncated at ``M`` instead of at
  ``response_len`` (no response of the batch ran longer), so the slowest engine's longest is ``M``, not the cap the
  exponential's tail reaches with thousands of draws. A reading, no fit. verl-data's GRPO-LoRA GSM8K steps (Qwen2.5-3B
  to 72B, 320 responses, cap 1,024, eric-haibin-lin/verl-data gsm8k/ logs @cc499463f18599e4a604e893f20872db68435928
  and @bf76dddc4e0119693632a147abab27f303dd2c13) log longest 633-811 at means 240-304 with a clip ratio of 0, where
  the exponential's expected longest of the 320 is the cap (about 6.3x the mean untruncated);
* a clip ratio ``c`` above 0: the exponential above a floor ``f``, ``f + min(Exp(θ), max − f)``, with ``θ`` and
  ``f`` solved so the mass at the cap is ``c`` and the mean is the mean (no parameter fitted); refused when ``f``
  would fall below one token (the share is above what the plain exponential of that mean cuts: the cap's mass is
  then runaway sequences the exponential family does not hold);
* a clip ratio of 0 without the longest: refused. The plain exponential of the mean still puts its share at the cap
  (3.7 % at mean 300, cap 1,024), and the floored exponential's limit as ``c`` falls to 0 is every response at the
  mean (the floor rises to the mean, ``θ`` falls to 0: the longest of 320 is 626 tokens at ``c`` 1e-6, 306 at
  1e-300), neither a reading of a run; the longest, which verl logs beside the share, says where the lengths end;
* a mean at the cap with any share below 1 (every response cut means a share of 1), or a mean of one token with a
  share above 0: refused.

Checked against every logged step of ``benchmarks/data/rl_response_length_steps.json`` with a clip ratio above 0
(no parameter fitted, so both halves are held out; the floor plus ``θ/N`` is the expected shortest of the step's
``N``, logged as ``response_length/min``): fit half, play-verl Qwen2.5-0.5B GRPO (cap 192), 435 of 435 steps solved,
expected shortest 97.7 against 61.2 logged (median ratio 1.53); held out, play-verl Qwen2.5-0.5B PPO 45 of 45,
125.0 against 28.5 (3.13); Qwen2-7B min 30 of 62 solved (32 refused: one to three runaway responses at the cap),
12.0 against 57.5 (0.11); Qwen2-7B recommended 43 of 43, 47.9 against 38.9 (1.08); the MI300X deepseek-llm-7b GRPO
run 6 of 36 (30 refused), 35.3 against 8.7; its PPO run 420 of 420, 71.1 against 47.5 (1.47). So the floor the
share sets is a rough one (high on the tight-cap short-answer runs, the cap's mass a mix of the body's tail and
runaways elsewhere); the longest response, where published, is the reading that moves the step.

Measured (``benchmarks/step_times.py``, against the tree of fb33b925). The verl-data GRPO-LoRA GSM8K rows
(``published_rl_times_firstcontact_2612d.json``: Qwen2.5-3B, 7B, 14B, 32B, 72B; one step each, the lengths that
step's) with their logged clip ratio 0 and longest 811 / 749 / 633 / 689 / 639: generation +8.1 / +39.5 / +19.7 /
+23.0 / +28.2 % -> -11.7 / +4.1 / -22.2 / -14.2 / -16.6 % (mean |error| 23.7 -> 13.8 %), their steps 14.2 -> 13.3 %
mean |error|, their log-prob and update passes 32.5 -> 33.9 % and 25.4 -> 26.5 % (the narrower spread of lengths;
the LoRA passes are planned 4-50 % short already; 14B's log-prob -48.5 -> -50.0 %); the generation subset's median
19.7 -> 17.8 % (fit half 22.7 -> 19.3 %, held out 18.0 -> 17.8 %), RL step 15.3 -> 14.9 %, log-prob and update
unchanged, all rows 10.13 -> 10.13 % (60 -> 61 beyond 50 %). The 7B's four TP-2 engines land at +4 %, the 3B's one
TP-2 engine at -12 %, the TP-8 engines (14B-72B) at -14..-22 %: the cap's tail had hidden a per-step cost the plan
misses on those eager vLLM v0 LoRA engines (not established here: the longest is read, the step price is not).

Checked, not kept on the benchmark rows:

* the clip ratio above 0 beside the mean on the GSM8K + MATH rows of that file (0.444 / 0.166 / 0.044 at a 512 cap,
  Qwen2.5-7B / 14B / 32B): generation unchanged (the cap binds either way), every pass shorter (the floor narrows the
  spread): log-prob -35.8 / -36.6 / -25.3 -> -37.3 / -39.3 / -30.4 %, update -32.9 / -35.6 / -4.6 -> -34.4 / -37.2 /
  -10.5 %, steps -9.7 / -31.5 / -22.7 -> -10.2 / -31.9 / -24.0 %; with the floor above the logged shortest (above)
  the narrower spread is the bias, so those rows keep the default shape;
* the mean over the logged steps of the batch's longest on rows whose times are means over steps (play-verl
  Qwen2-7B min 869.6 and recommended 1,010.5, the MI300X deepseek-llm-7b GRPO 649.8 and PPO 452.4, each over the
  row's own steps of ``rl_response_length_steps.json``) and the 0.5B GRPO run's mean clip ratio 0.16992: generation
  +24.6 -> +12.1 % (MI300X GRPO) but -7.5 -> -17.6 % (Qwen2-7B min) and -0.2 -> -5.6 % (MI300X PPO), the 0.5B
  log-prob -40.8 -> -47.5 %; these rows' mean |error| 19.7 -> 20.6 %, all rows 10.20 -> 10.22 %. Per step the
  longest is the cap in 28-91 % of these runs' steps and far below it in the rest, so one truncation at the mean
  longest does not stand for the steps; not set.

**No published mean** (``default_response_mean``): a model's response length is a property of the
model and the task, not of the maximum the run allows. The default is the same truncated
exponential with its *natural* scale ``θ`` (the mean the model would have with no limit) taken from
a named ``LengthProfile`` (the task's, ``rollout.length_profile``, else the model's); the limit then
clips it, so the mean is ``1 + θ·(1 − exp(−(max−1)/θ))``: close to ``θ`` for a generous maximum, close to
the maximum for a tight one (most responses cut).
Each profile's ``θ`` is the median over distinct published runs (model, data, maximum) of the ``θ``
that reproduces each run's published mean at its maximum (``_solve_theta``; runs sharing model, data and
maximum first reduced to their median):

* ``SHORT_ANSWER``, grade-school word problems answered with a short worked solution (GSM8K) by non-thinking
  instruct/chat models, from the console logs verl runs' authors committed (the mean over every logged step of
  ``response_length/mean``): Qwen2.5-0.5B-Instruct at 192 (GRPO): 141.2, ``θ`` 292, and at 256 (PPO): 197.4,
  ``θ`` 466 (dingxianzhong/play-verl logs/verl_grpo_qwen2.5b_8gpu.log, logs/verl_ppo_qwen2.5b_8gpu.log
  @7716a615fc4b68961f2bb7716c9aadcd65ca28d2) and 161.4, ``θ`` 252 (eric-haibin-lin/verl-data
  gsm8k/Qwen2.5-0.5B-bsz256_2-prompt512-resp256-0.538.log @f07af3291bd1c87fe8a7301cc3b883c0d2572720), their
  median 359; at 512 (PPO): 278.5, ``θ`` 371 (verl-data gsm8k/Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log
  @f07af3291bd1c87fe8a7301cc3b883c0d2572720); Qwen2-7B-Instruct at 1,024 (PPO): 169.5 and 188.3, ``θ`` 169
  and 188 (play-verl
  logs/verl_qwen2_7b_min.log, logs/verl_qwen2_7b_recommended.log @7716a615fc4b68961f2bb7716c9aadcd65ca28d2),
  and (GPG, Megatron, GSM8K alone
  despite the file name): 160.2, ``θ`` 159 (diqiuzhuanzhuan/verldata run_logs/qwen2-7b_math_megatron.log
  @42e31cd07ea08b66e709a74e9aed2bd740589c34, linked from volcengine/verl docs/algo/baseline.md
  @b178a3cd56f58b2d502255daba591e92833930a7), their median 169; deepseek-llm-7b-chat at 1,024 (GRPO): 133.4,
  ``θ`` 132, and at 512 (PPO): 136.1, ``θ`` 139 (yushengsu-thu/verl_training_log gsm8k/grpo_run_deepseek7b_llm.log,
  gsm8k/ppo_run_deepseek7b_llm.log @deb1507ca0740580d2019e7150d08edf8dd6ca35); gemma-2-2b-it fine-tuned on GSM8K,
  at 512 (PPO): 145.2, ``θ`` 149 (verl-data gsm8k/gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640.log
  @f07af3291bd1c87fe8a7301cc3b883c0d2572720). The play-verl and ROCm runs' steps are
  ``benchmarks/data/rl_response_length_steps.json``.
  ``θ`` = 168.9 tokens, the median of the seven runs (a mean of 162 at a 512 maximum, 170 at 1,024). The 0.5B
  model at tight maxima is the long end (most of its first responses run to the limit); the 7B models, with room,
  settle at 130-190. A GSM8K + MATH mix is neither profile: Qwen2-7B-Instruct on verl's gsm8k + math parquet at
  1,024 (GPG) averaged 315.1, ``θ`` 329 (verldata run_logs/qwen2-7b_math.log
  @42e31cd07ea08b66e709a74e9aed2bd740589c34). No published run of a
  thinking model on GSM8K states its response length, so the profile is for non-thinking models: ``auto`` keeps
  ``LONG_COT`` for a thinking checkpoint unless the card names a profile.
* ``COT``, chain-of-thought of instruct and base models on competition math (Llama-3.1-8B-Instruct on
  OpenMathInstruct-2 at 4,096: mean 1,019-1,128, ``θ`` 1.04k-1.16k; DeepSeek-V3 on OpenMathInstruct-2 at 1,536:
  697-761, ``θ`` 0.82k-0.95k, and on DAPO-Math-17k at 1,536: 974, ``θ`` 1.55k; NeMo RL
  docs/about/performance-summary.md @9dbd9adc95a10f5946cceb36e1d5b31e2429e470; DeepSeek-V3 on
  DAPO-Math-17k at 9,632: 1,960, ``θ`` 1.97k, verl docs/perf/dpsk.md
  @b178a3cd56f58b2d502255daba591e92833930a7): ``θ`` = 1,341 tokens (median of the four runs' medians).
* ``LONG_COT``, reasoning-tuned models that think before answering (Qwen3-32B, Qwen3-30B-A3B at
  4,096: mean 3,154-3,258, ``θ`` 7.5k-8.6k; Qwen3-235B-A22B at 8,192: 5,700-5,713, ``θ`` 10.6k; NeMo RL,
  same table): ``θ`` = 8,522 tokens (median of the three models' medians; at 8,192 it gives a mean of 5.3k).

* ``TOOL_INTEGRATED``, multi-turn tool-integrated reasoning: the model writes code, the engine stops at the tool call,
  the interpreter's output is appended and generation resumes (verl's ``ToolAgentLoop``). The sequence the engine
  decodes and prefills and the trainer processes is the whole trajectory: verl's ``response_ids`` hold every
  assistant turn and every tool response, the latter masked out of the loss only
  (``verl/experimental/agent_loop/tool_agent_loop.py`` ``_handle_processing_tools_state``, ``response_mask`` 0 for
  the tool tokens, volcengine/verl @ea56e9ac47c3dfed65c028899012bb67f41f4c83). ReTool (Feng et al., arXiv:2504.11536v2,
  its cognitive analysis, Fig. 3: Qwen2.5-32B-Instruct cold-started on ReTool-SFT, then RL with a code sandbox at a
  16,384-token cap) plots the trajectory length over RL, from about 10k tokens at the start (the SFT model) to about
  6k after 400 steps. The paper's Fig. 3 was not read here: it is a plot, and no text of it was reachable; its two
  end points are taken from one second-hand summary (https://zhangshuibai.github.io/paper-notes/agents/notes/
  11_ReTool_2504.11536.html, "10k -> 6k tokens", -40 %, read 2026-12-03). An RL run from the SFT checkpoint spends its
  steps along that curve, so the profile stands for the run's average, not its end point: with the curve unread, the
  mean of the two stated end points, 8k tokens. That mean is an assumption, not a reading: it is the run average
  only if the length falls linearly with the step. A curve that drops early (most of the 10k -> 6k fall in the first
  100 of 400 steps) would put the run average nearer 6k tokens; one that holds near 10k and drops late, nearer 10k.
  ``θ`` = 9,882 tokens: the natural scale whose truncated mean at the
  paper's 16,384 cap is 8k (``_solve_theta(7999, 16383)``; the 6k end point alone gives 6,530, the 10k start 15.1k).
  A 32B model's curve, one published run:
  a placeholder for tool-integrated tasks until runs that log their mean trajectory length are read. ``auto`` never
  picks it (the model name does not say the task); a card names it.

**Which profile** (``profile_named``, the card's ``rollout.length_profile``): ``short_answer``, ``cot``,
``long_cot`` or ``tool_integrated`` names it; ``auto`` (the default) keeps the model-name rule, ``profile_for(name)``: ``LONG_COT`` for
checkpoints published as thinking models (Qwen3 post-trained models, QwQ, DeepSeek-R1 and its distillations,
DeepScaleR, names with "thinking" or "reason"), ``COT`` otherwise (base models and Qwen3's non-thinking
``-Instruct-2507`` checkpoints included). ``auto`` never picks ``SHORT_ANSWER``: the model name does not say the task.

Pure Python: no torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from math import exp, expm1, log

from trainfit.errors import CardError
from trainfit.spec.enums import LengthProfileName, ResponseShape

DEFAULT_QUANTILES = 64

SHORTEST_SHARE_OF_MEAN = 0.437
"""The shifted shape's floor as a share of the mean response: the batch's shortest response over its mean,
``response_length/min`` / ``response_length/mean``, averaged over the 435 logged steps of the one fit-half run of
``benchmarks/data/rl_response_length_steps.json`` (read from the run's console log by
``benchmarks/rl_response_length_steps.py``; recomputed from that file: 0.43654; dingxianzhong/play-verl logs/verl_grpo_qwen2.5b_8gpu.log
@7716a615fc4b68961f2bb7716c9aadcd65ca28d2, Qwen2.5-0.5B-Instruct GRPO on GSM8K, 512 sequences, cap 192): 0.4365.
The shortest of ``N`` draws of ``floor + Exp(θ)`` is ``floor + θ/N``, so the logged minimum reads the floor."""


@dataclass(frozen=True, slots=True)
class LengthProfile:
    """A named default response-length distribution: a truncated exponential of natural scale
    ``natural_mean_tokens`` (the mean with no maximum), clipped at the run's maximum."""

    name: str
    natural_mean_tokens: float
    source: str


SHORT_ANSWER = LengthProfile(
    "short-answer", 168.9,
    "median natural scale of published verl GSM8K runs of non-thinking instruct/chat models: Qwen2.5-0.5B-Instruct, "
    "Qwen2-7B-Instruct, deepseek-llm-7b-chat, gemma-2-2b-it (dingxianzhong/play-verl logs/ "
    "@7716a615fc4b68961f2bb7716c9aadcd65ca28d2; yushengsu-thu/verl_training_log gsm8k/ "
    "@deb1507ca0740580d2019e7150d08edf8dd6ca35; eric-haibin-lin/verl-data gsm8k/ "
    "@f07af3291bd1c87fe8a7301cc3b883c0d2572720; diqiuzhuanzhuan/verldata run_logs/qwen2-7b_math_megatron.log "
    "@42e31cd07ea08b66e709a74e9aed2bd740589c34)")
COT = LengthProfile(
    "chain-of-thought", 1341.0,
    "median natural scale of published RL runs of instruct/base models: Llama-3.1-8B-Instruct and DeepSeek-V3 "
    "(NVIDIA-NeMo/RL docs/about/performance-summary.md @9dbd9adc95a10f5946cceb36e1d5b31e2429e470; "
    "volcengine/verl docs/perf/dpsk.md @b178a3cd56f58b2d502255daba591e92833930a7)")
LONG_COT = LengthProfile(
    "long chain-of-thought", 8522.0,
    "median natural scale of published RL runs of thinking models: Qwen3-32B, Qwen3-30B-A3B, Qwen3-235B-A22B "
    "(NVIDIA-NeMo/RL docs/about/performance-summary.md @9dbd9adc95a10f5946cceb36e1d5b31e2429e470)")

TOOL_INTEGRATED = LengthProfile(
    "tool-integrated reasoning", 9882.0,
    "ReTool (Feng et al., arXiv:2504.11536v2, Fig. 3, not read here): Qwen2.5-32B-Instruct trajectories with "
    "code-interpreter turns at a 16,384-token cap, about 10k tokens at the SFT start and 6k after RL as "
    "https://zhangshuibai.github.io/paper-notes/agents/notes/11_ReTool_2504.11536.html states them @2026-12-03; "
    "the run average taken as their mean, 8k, which assumes a linear fall (an early drop would put it nearer 6k)")

_THINKING = re.compile(r"qwq|deepseek-r1|r1-distill|deepscaler|thinking|reason|(^|/)qwen3[^/]*$", re.IGNORECASE)


def profile_for(model_name: str | None) -> LengthProfile:
    """``LONG_COT`` for a checkpoint published as a thinking model, else ``COT`` (module docstring)."""
    name = (model_name or "").strip()
    low = name.lower()
    if not name or low.endswith("-base") or "-base-" in low or "instruct-2507" in low:
        return COT
    return LONG_COT if _THINKING.search(name) else COT


PROFILES = {LengthProfileName.SHORT_ANSWER: SHORT_ANSWER, LengthProfileName.COT: COT,
            LengthProfileName.LONG_COT: LONG_COT, LengthProfileName.TOOL_INTEGRATED: TOOL_INTEGRATED}


def profile_named(name: LengthProfileName | str | None, *, model_name: str | None) -> LengthProfile:
    """The card's ``rollout.length_profile``: the named profile, or with ``auto`` (or none) the model-name rule
    ``profile_for(model_name)`` (module docstring)."""
    try:
        key = LengthProfileName(name if name is not None else LengthProfileName.AUTO)
    except ValueError:
        allowed = ", ".join(p.value for p in LengthProfileName)
        raise CardError(f"rollout.length_profile: {name!r} is not allowed; allowed: {allowed}") from None
    return profile_for(model_name) if key is LengthProfileName.AUTO else PROFILES[key]


def default_response_mean(*, response_len_max: float, profile: LengthProfile = COT) -> float:
    """Mean response tokens when none is published: the profile's truncated exponential at the
    maximum, ``1 + θ·(1 − exp(−(max − 1)/θ))``."""
    if response_len_max < 1:
        raise CardError(f"response_len_max: must be >= 1, got {response_len_max}")
    theta = profile.natural_mean_tokens
    return 1.0 + theta * -expm1(-(response_len_max - 1) / theta)


def response_length_groups(
    *, shape: ResponseShape | str | None, response_len_max: float, response_len_mean: float | None,
    sequences: int, quantiles: int = DEFAULT_QUANTILES, clip_ratio: float | None = None,
    longest_tokens: float | None = None,
) -> tuple[tuple[float, float], ...]:
    """``(length, share)`` groups standing for ``sequences`` draws, shares summing to 1.

    Bins of equal probability, the top one split into 1, 1, 2, 4, ... sequences (from the top) so
    the longest of ``sequences`` is its own group; each group's length is the conditional mean of
    its bin, so the shares average exactly to the distribution's mean.
    ``clip_ratio`` / ``longest_tokens``: the published share cut at the cap and the batch's longest response beside
    the mean (module docstring, "Published clip ratio and longest response"; ``fit_published_lengths``).
    """
    fit = fit_published_lengths(shape=shape, response_len_max=response_len_max,
                                response_len_mean=response_len_mean, clip_ratio=clip_ratio,
                                longest_tokens=longest_tokens)
    if fit.kind is ResponseShape.FIXED:
        return ((fit.mean_tokens, 1.0),)
    edges = _bin_edges(sequences, quantiles)
    groups = []
    cap, floor = fit.cap_tokens, fit.floor_tokens
    top = cap - floor  # lengths are the floor + a draw on [0, cap − floor]
    for p0, p1 in pairwise(edges):
        if fit.kind is ResponseShape.UNIFORM:
            lo = 2 * fit.mean_tokens - cap
            length = lo + (cap - lo) * (p0 + p1) / 2
        else:
            length = floor + (_exp_integral(p1, fit.theta_tokens, top)
                              - _exp_integral(p0, fit.theta_tokens, top)) / (p1 - p0)
        groups.append((min(length, cap), p1 - p0))
    return tuple(groups)


def slowest_engine_length_groups(
    *, shape: ResponseShape | str | None, response_len_max: float, response_len_mean: float | None,
    sequences: int, engines: int, quantiles: int = DEFAULT_QUANTILES, clip_ratio: float | None = None,
    longest_tokens: float | None = None,
) -> tuple[tuple[float, float], ...]:
    """``(length, share)`` groups for the ``sequences`` one engine of ``engines`` runs when it is the engine the
    phase waits for: ``response_length_groups`` of its ``sequences`` draws with its top group, one sequence, at the
    expected longest of the whole batch's ``engines x sequences`` draws (the top group of those), not of its own.

    The rollout phase ends when the slowest data-parallel engine finishes: the trainer gathers every engine's
    output before the next phase (verl's ``generate_sequences`` returns the concatenation of the replicas' chunks;
    module docstring, "The slowest engine"). Each engine receives a contiguous chunk of the batch, so its lengths are
    a sample of the distribution and one of them holds the batch's longest response; the decode tail runs until
    that response ends, so the expected phase is that engine's, whose longest is the top of ``engines x sequences``
    draws. Its other ``sequences - 1`` draws are the distribution's (the groups below the top keep their lengths and
    shares), so its mean rises by ``(batch longest - engine longest) / sequences``. ``engines`` 1 or a fixed length:
    ``response_length_groups`` unchanged. ``clip_ratio`` / ``longest_tokens`` as ``response_length_groups``.
    Raises ``CardError`` for ``engines`` < 1 and as ``response_length_groups`` does."""
    if engines < 1:
        raise CardError(f"engines: must be >= 1, got {engines}")
    published = dict(shape=shape, response_len_max=response_len_max, response_len_mean=response_len_mean,
                     quantiles=quantiles, clip_ratio=clip_ratio, longest_tokens=longest_tokens)
    own = response_length_groups(sequences=sequences, **published)
    if engines == 1 or len(own) == 1:
        return own
    batch = response_length_groups(sequences=sequences * engines, **published)
    longest = batch[-1][0]
    top_length, top_share = own[-1]
    return own[:-1] + ((max(top_length, longest), top_share),)


@dataclass(frozen=True, slots=True)
class LengthFit:
    """The response-length distribution a card's inputs give: ``kind``; ``mean_tokens``; lengths
    ``floor_tokens + min(Exp(theta_tokens), cap_tokens − floor_tokens)`` for the exponential kinds (``theta_tokens``
    0 otherwise); ``cap_tokens``, the longest any response can be (``response_len_max``, or the published longest)."""

    kind: ResponseShape
    mean_tokens: float
    theta_tokens: float
    floor_tokens: float
    cap_tokens: float


def fit_published_lengths(
    *, shape: ResponseShape | str | None, response_len_max: float, response_len_mean: float | None,
    clip_ratio: float | None = None, longest_tokens: float | None = None,
) -> LengthFit:
    """The distribution for the card's shape, mean, published share cut at the cap (``clip_ratio``, verl's
    ``response_length/clip_ratio``) and published longest response of the batch (``longest_tokens``, verl's
    ``response_length/max``): module docstring, "Published clip ratio and longest response".

    Without ``clip_ratio`` and ``longest_tokens`` (or without a mean): the card's shape as before. With a mean:
    ``longest_tokens`` below the cap truncates the shape there instead of at ``response_len_max`` (no response of
    the batch was longer); ``clip_ratio`` > 0 takes the exponential above a floor ``f`` whose mass at the cap is the
    ratio and whose mean is the mean: ``θ = (max − f) / −ln(c)`` and ``mean = f + θ(1 − c)``, so with
    ``a = (1 − c) / −ln(c)``, ``f = (mean − max·a) / (1 − a)``. Raises ``CardError`` naming the field when they
    disagree: a ratio above the share the plain exponential of that mean puts at the cap (the floor would fall below
    one token; ``a`` rounds to 1 for a share just under 1), a ratio above 0 with a longest below the cap or with a
    mean at the cap (or at one token), a ratio of 0 without ``longest_tokens`` (where the lengths end is unknown), a
    longest below the mean or above ``response_len_max``."""
    if response_len_max < 1:
        raise CardError(f"response_len_max: must be >= 1, got {response_len_max}")
    if response_len_mean is None or (clip_ratio is None and longest_tokens is None):
        kind, mean, theta = _shape(shape, response_len_max, response_len_mean)
        return LengthFit(kind, mean, theta, _floor_tokens(kind, mean), float(response_len_max))
    cap = float(response_len_max)
    if longest_tokens is not None:
        if not response_len_mean <= longest_tokens <= response_len_max:
            raise CardError(f"rollout.response_len_batch_max: {longest_tokens:g}; allowed: from response_len_mean"
                            f" ({response_len_mean:g}) to response_len ({response_len_max:g})")
        cap = float(longest_tokens)
    if clip_ratio is not None and not 0.0 <= clip_ratio < 1.0:
        raise CardError(f"rollout.response_clip_ratio: {clip_ratio} is not a share; allowed: 0 to below 1")
    if clip_ratio and cap < response_len_max:
        raise CardError(f"rollout.response_clip_ratio: {clip_ratio:g} of the responses cut at response_len"
                        f" ({response_len_max:g}) but response_len_batch_max is {cap:g}; allowed with it: 0")
    if clip_ratio == 0 and longest_tokens is None:  # the exponential family's share -> 0 limit is the mean alone
        raise CardError(f"rollout.response_clip_ratio: 0 (none cut) beside response_len_mean {response_len_mean:g}"
                        " needs rollout.response_len_batch_max (where the lengths end); allowed with it:"
                        f" response_len_batch_max from response_len_mean to below response_len ({response_len_max:g}),"
                        " or response_clip_ratio above 0 or null")
    if not clip_ratio:
        kind, mean, theta = _shape(shape, cap, response_len_mean)
        return LengthFit(kind, mean, theta, _floor_tokens(kind, mean), cap)
    kind, mean, _ = _shape(shape, cap, response_len_mean)
    if kind not in (ResponseShape.EXPONENTIAL, ResponseShape.FIXED) or (
            kind is ResponseShape.FIXED and shape is not None and ResponseShape(shape) is ResponseShape.FIXED):
        raise CardError(f"rollout.response_clip_ratio: {clip_ratio:g} with response_len_mean sets the exponential's"
                        f" floor; response_len_shape is '{shape}'; allowed with it: exponential")
    if kind is ResponseShape.FIXED and mean - 1.0 < cap - mean:  # every response one token: none reaches the cap
        raise CardError(f"rollout.response_clip_ratio: {clip_ratio} cut at response_len {cap:g}, yet"
                        f" response_len_mean {mean:g} is one token a response; allowed with that mean: 0")
    if kind is ResponseShape.FIXED:  # the mean at the cap: every response cut, a share of 1
        raise CardError(f"rollout.response_clip_ratio: {clip_ratio} of the responses cut, yet response_len_mean"
                        f" {mean:g} is response_len (every response cut); allowed with that mean: none below 1"
                        " (drop response_clip_ratio, or give a mean below response_len)")
    a = (1.0 - clip_ratio) / -log(clip_ratio)  # below 1 for every share in (0, 1); 1.0 once rounded near 1
    if a * (cap - 1.0) > mean - 1.0:  # the floor (mean − cap·a)/(1 − a) below 1 token, tested without dividing
        most = exp(-(cap - 1.0) / _solve_theta(mean - 1.0, cap - 1.0))
        raise CardError(f"rollout.response_clip_ratio: {clip_ratio} is more than the truncated exponential of mean"
                        f" {mean:g} puts at response_len {cap:g}; allowed with that mean: 0 to {most:.4g}")
    floor = (mean - cap * a) / (1.0 - a)  # 1 − a >= (cap − mean)/(cap − 1) > 0 here
    return LengthFit(ResponseShape.SHIFTED_EXPONENTIAL, mean, (cap - floor) / -log(clip_ratio), floor, cap)


def _shape(shape, response_len_max, response_len_mean) -> tuple[ResponseShape, float, float]:
    if response_len_max < 1:
        raise CardError(f"response_len_max: must be >= 1, got {response_len_max}")
    if response_len_mean is not None and not 1 <= response_len_mean <= response_len_max:
        raise CardError(f"response_len_mean: must be within [1, response_len_max={response_len_max}], "
                        f"got {response_len_mean}")
    if shape == "exponential-truncated":
        shape = ResponseShape.EXPONENTIAL
    try:
        kind = ResponseShape(shape) if shape is not None else (
            ResponseShape.FIXED if response_len_mean is None else ResponseShape.EXPONENTIAL)
    except ValueError:
        raise CardError(f"response length shape: one of exponential-truncated, shifted_exponential, uniform, fixed; "
                        f"got {shape!r}") from None
    if kind is ResponseShape.FIXED:
        return kind, float(response_len_mean or response_len_max), 0.0
    mean = (response_len_max + 1) / 2 if response_len_mean is None else float(response_len_mean)
    if kind is ResponseShape.UNIFORM:
        if mean < (response_len_max + 1) / 2:
            raise CardError(f"uniform response lengths up to {response_len_max} cannot have mean {mean} < (max+1)/2; "
                            "use exponential-truncated")
        return kind, mean, 0.0
    if mean >= response_len_max - 1e-6 * response_len_max or mean <= 1 + 1e-9:
        return ResponseShape.FIXED, mean, 0.0
    floor = _floor_tokens(kind, mean)
    return kind, mean, _solve_theta(mean - floor, response_len_max - floor)


def _floor_tokens(kind: ResponseShape, mean: float) -> float:
    """Where the exponential part starts: 1 token, or ``SHORTEST_SHARE_OF_MEAN × mean`` for the shifted shape."""
    return max(1.0, SHORTEST_SHARE_OF_MEAN * mean) if kind is ResponseShape.SHIFTED_EXPONENTIAL else 1.0


def clip_ratio_response_mean(*, response_len_max: float, clip_ratio: float) -> float:
    """Mean response tokens of the default shape (the truncated exponential ``1 + min(Exp(θ), max − 1)``, module
    docstring) whose share cut at the maximum is ``clip_ratio`` (a run's logged or published share of responses that
    hit ``response_len``, verl's ``response_length/clip_ratio``; ``rollout.response_clip_ratio``): that share is
    ``exp(−(max − 1)/θ)``, so ``θ = (max − 1) / −ln(clip_ratio)`` and the mean is ``1 + θ·(1 − clip_ratio)``.

    Biased low: at a logged run's mean the exponential puts 1.8-3.1x the logged share at the cap (the module docstring's
    checks: 0.529 against 0.170 logged, 0.589 against 0.321), so the mean that gives the logged share is shorter than
    the run's. The card refuses ``response_len`` below 2 next to a ratio (``RolloutSection``)."""
    if not 0.0 < clip_ratio < 1.0:
        raise CardError(f"rollout.response_clip_ratio: {clip_ratio} is not a share; allowed: above 0 and below 1")
    if response_len_max < 2:
        raise CardError(f"rollout.response_len: {response_len_max:g} with rollout.response_clip_ratio {clip_ratio:g};"
                        " allowed: >= 2")
    theta = (response_len_max - 1) / -log(clip_ratio)
    return 1.0 + theta * (1.0 - clip_ratio)


def _solve_theta(mean: float, cap: float) -> float:
    """θ with θ·(1 − exp(−cap/θ)) = mean (increasing in θ), by bisection on log θ."""
    lo, hi = log(mean), log(mean) + 40.0
    for _ in range(80):
        mid = (lo + hi) / 2
        t = exp(mid)
        if t * -expm1(-cap / t) < mean:
            lo = mid
        else:
            hi = mid
    return exp((lo + hi) / 2)


def _exp_integral(p: float, theta: float, cap: float) -> float:
    """∫₀ᵖ min(−θ·ln(1−q), cap) dq."""
    p_cap = -expm1(-cap / theta)
    q = min(p, p_cap)
    below = theta * (q + (1 - q) * log(1 - q)) if q < 1 else theta * q
    return below + cap * max(0.0, p - p_cap)


def _bin_edges(sequences: int, quantiles: int) -> list[float]:
    if sequences <= quantiles:
        return [i / sequences for i in range(sequences + 1)]
    edges = [i / quantiles for i in range(quantiles)]
    top = []  # ranks from the top: 1, 2, 4, ... sequences, stopping at one bin
    k = 1
    while k < sequences / quantiles:
        top.append(1 - k / sequences)
        k *= 2
    return edges + sorted(top) + [1.0]


# ------------------------------------------------------------------------------------------------
