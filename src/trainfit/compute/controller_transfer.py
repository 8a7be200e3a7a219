"""verl's single-controller batch transfer: the driver serialises each worker call's padded batch and deserialises
its results, one process for the whole step's batch, whatever the GPU count.

What happens per call, read at volcengine/verl @94d681dce4911c3ad6abb011a2d03c62d318868d (the fully-async
recipe's colocated runs; the same ``DataProto`` path from verl v0.3 on):

* The trainer (``RayPPOTrainer.fit``, ``verl/trainer/ppo/ray_trainer.py`` l.1103-1271) calls
  ``generate_sequences(gen_batch)`` (the prompts' ``input_ids``, ``attention_mask``, ``position_ids``, repeated
  ``rollout.n`` times, l.1103-1118), then ``compute_log_prob(batch)``, ``compute_ref_log_prob(batch)``,
  ``compute_values(batch)``, ``update_critic(batch)`` and ``update_actor(batch)`` (l.1174-1271), each inside its own
  timer (``gen``, ``old_log_prob``, ``ref``, ``values``, ``update_critic``, ``update_actor``).
* Each call splits the ``DataProto`` into one chunk per data-parallel rank (``dispatch_dp_compute_data_proto``,
  ``verl/single_controller/base/decorator.py`` l.341-351; Megatron: ``ray.put`` once per data-parallel chunk "to avoid
  duplicate serialization cost", l.149-153) and Ray serialises each chunk in the driver's thread.
  ``DataProto.__getstate__`` makes the bytes: ``contiguous()``, ``consolidate()``, ``torch.save`` into an
  ``io.BytesIO``, ``getvalue()``; ``__setstate__`` ``torch.load``s them (``verl/protocol.py`` l.267-289). The driver
  collects the results the same way and concatenates them.
* The tensors are padded to the step's maxima: the vLLM rollout pads every response to ``response_length``
  (``pad_2d_list_to_length(..., max_length=self.config.response_length)``) and returns ``prompts``, ``responses``,
  ``input_ids``, ``attention_mask``, ``position_ids`` (int64, ``verl/workers/rollout/vllm_rollout/
  vllm_rollout_spmd.py`` l.341, l.370-378); the trainer adds ``response_mask`` (int64, l.1150), the old log-prob
  pass returns ``old_log_probs`` and ``entropys`` (fp32, l.1175-1183), the reference ``ref_log_prob``, the critic
  ``values``, and the advantage step writes ``token_level_scores``, ``token_level_rewards``, ``advantages`` and
  ``returns`` (fp32, l.1229-1241; ``verl/trainer/ppo/core_algos.py`` l.256-257), all shipped with the update.

So each call costs the driver the batch's padded bytes at the host's serialise rate, plus the results at its
deserialise rate; the receivers deserialise their share in parallel. That is a fixed cost per step that does not
shrink with more GPUs: the fully-async doc's colocated 7B runs (docs/advance/fully_async.md
@df340d703292538fafc1439b4aa9f1f226ccadc5) spend 107.7 / 70.3 / 53.9 s in ``old_log_prob`` on 32 / 64 / 128 GPUs,
about 33 s + 2,400 GPU-s / GPUs.

Rates: measured on CPU (``benchmarks/verl_dataproto_cpu.py``), with no Ray object-store copy and no network transfer
from the driver's node, on a shared VM core (its large-buffer ``clone`` runs at 3.8 GB/s). A faster host serialises
faster: play-verl's Qwen2-7B 'recommended' PPO run (8 H100, one node) leaves 0.38 s of its 33.5 s ``update_actor``
outside ``update_policy`` (verl's own MFU timer, ``plan.rl_time``), where these rates put this call at 0.91 s, so that
host ran the serialisation at least 2.4x faster than this VM; the multi-node H20 runs above also move the batch across
nodes, which is not priced. The rates are the measurement, neither scaled nor fitted. Not counted: the Python pickling
of the non-tensor batch (per-row objects), the driver's ``union`` / ``concat`` copies outside the timed calls. verl's
engine workers (``trainer.use_legacy_worker_impl: disable``, the default from verl-project/verl
63e8a0d1617b209284011e0fcf1796574f372ffd of 2026-03-26) ship the trainer's calls without the padding
(``left_right_2_no_padding``): the planner prices those at the mean prompt and response
(``rollout.controller_padded_batches`` false, ``plan.rl_time.verl_controller_phases``).
"""

from __future__ import annotations

DATAPROTO_SERIALIZE_BYTES_PER_S = 0.44e9
"""Driver-side bytes per second of ``DataProto.__getstate__`` + Ray's pickling of it: consolidate (one copy),
``torch.save`` into ``BytesIO``, ``getvalue``, ``pickle.dumps``. Measured (``benchmarks/verl_dataproto_cpu.py``,
torch 2.13.0+cpu, one thread of a shared AMD EPYC VM core, 2026-12-03, best of 5 rounds of 0.31 GB), not fitted."""
DATAPROTO_DESERIALIZE_BYTES_PER_S = 0.74e9
"""Receiver-side bytes per second of ``pickle.loads`` + ``DataProto.__setstate__`` (``torch.load`` from
``BytesIO``). Same measurement as ``DATAPROTO_SERIALIZE_BYTES_PER_S``, not fitted."""

INT64_BYTES = 8
FP32_BYTES = 4


def verl_call_row_bytes(*, call: str, prompt_tokens: int, response_tokens: int, entropy: bool = False,
                        reference: bool = False, critic: bool = False) -> tuple[int, int]:
    """(bytes sent, bytes returned) per sequence of one verl worker call, the tensors padded to ``prompt_tokens`` +
    ``response_tokens`` (the run's maxima). ``call``: generation | old_logprob | ref_logprob | critic_values |
    actor_update | critic_update. ``entropy``: the old log-prob pass also returns the entropy; ``reference`` /
    ``critic``: the step has a reference pass / a critic, whose outputs ride along afterwards. Fields as listed in
    the module docstring (verl @94d681dce4911c3ad6abb011a2d03c62d318868d)."""
    p, r = prompt_tokens, response_tokens
    # prompts, responses, input_ids / attention_mask / position_ids over prompt + response, response_mask
    trained = INT64_BYTES * (p + r + 3 * (p + r) + r)
    if call == "generation":
        return INT64_BYTES * 3 * p, INT64_BYTES * (p + r + 3 * (p + r))
    if call == "old_logprob":
        return trained, FP32_BYTES * r * (2 if entropy else 1)
    if call == "ref_logprob":
        return trained + FP32_BYTES * r, FP32_BYTES * r
    if call == "critic_values":
        return trained + FP32_BYTES * r * (2 if reference else 1), FP32_BYTES * r
    if call in ("actor_update", "critic_update"):
        # old_log_probs, token_level_scores, token_level_rewards, advantages, returns (+ ref_log_prob, values)
        extra = 5 + (1 if reference else 0) + (1 if critic else 0)
        return trained + FP32_BYTES * r * extra, 0
    raise ValueError(f"unknown verl call {call!r}")


def controller_transfer_s(*, sent_bytes: float, returned_bytes: float, receivers: int,
                          serialize_bytes_per_s: float = DATAPROTO_SERIALIZE_BYTES_PER_S,
                          deserialize_bytes_per_s: float = DATAPROTO_DESERIALIZE_BYTES_PER_S) -> float:
    """Seconds one single-controller call spends moving its batch on the hosts: the driver serialises everything
    it sends and deserialises everything it collects, one after the other; the ``receivers`` (data-parallel ranks)
    deserialise and serialise their shares at the same time."""
    share = max(1, receivers)
    return (sent_bytes / serialize_bytes_per_s + returned_bytes / deserialize_bytes_per_s
            + sent_bytes / share / deserialize_bytes_per_s + returned_bytes / share / serialize_bytes_per_s)
