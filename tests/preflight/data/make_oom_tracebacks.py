"""Writes oom_tracebacks.json: the traceback corpus of `diagnose` (run: python tests/preflight/data/make_oom_tracebacks.py).

Synthetic logs are built from each framework's own function names and source lines (named in 'source');
excerpts keep the library frames and the message of a public issue (user paths shortened)."""
import json
from pathlib import Path

SP = "/usr/lib/python3.11/site-packages/"

def frames(lines, tag=""):
    out = []
    for file, line, fn, code in lines:
        out.append(f'{tag}  File "{file}", line {line}, in {fn}')
        if code:
            out.append(f"{tag}    {code}")
    return out

def tb(fr, msg, tag="", pre=(), post=()):
    return "\n".join(list(pre) + [f"{tag}Traceback (most recent call last):"] + frames(fr, tag) + [tag + msg] + list(post)) + "\n"

def new_msg(req, total="23.99 GiB", free="1.02 GiB", exc="torch.OutOfMemoryError"):
    return (f"{exc}: CUDA out of memory. Tried to allocate {req}. GPU 0 has a total capacity of {total} of which {free} is free. "
            "Including non-PyTorch memory, this process has 22.96 GiB memory in use. Of the allocated memory 20.11 GiB is allocated "
            "by PyTorch, and 1.21 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")

TRAINER = [
    ("train_grpo.py", 88, "<module>", "trainer.train()"),
    (SP + "transformers/trainer.py", 2245, "train", "return inner_training_loop("),
    (SP + "transformers/trainer.py", 2560, "_inner_training_loop", "tr_loss_step = self.training_step(model, inputs, num_items_in_batch)"),
    (SP + "transformers/trainer.py", 3730, "training_step", "inputs = self._prepare_inputs(inputs)"),
    (SP + "trl/extras/profiling.py", 98, "wrapper", "return func(self, *args, **kwargs)"),
    (SP + "trl/trainer/grpo_trainer.py", 1010, "_prepare_inputs", "generation_batch = self._generate_and_score_completions(generation_batch)"),
]
MODEL = [
    (SP + "torch/nn/modules/module.py", 1773, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    (SP + "torch/nn/modules/module.py", 1784, "_call_impl", "return forward_call(*args, **kwargs)"),
    (SP + "transformers/utils/generic.py", 940, "wrapper", "output = func(self, *args, **kwargs)"),
    (SP + "transformers/models/qwen3/modeling_qwen3.py", 480, "forward", "logits = self.lm_head(hidden_states[:, slice_indices, :])"),
    (SP + "torch/nn/modules/linear.py", 125, "forward", "return F.linear(input, self.weight, self.bias)"),
]
NOISE_GEN = [
    "INFO 12-01 10:02:11 [llm_engine.py:443] vLLM engine started (v0.11.0) with config: model='Qwen/Qwen3.5-27B', gpu_memory_utilization=0.9",
    "INFO 12-01 10:02:40 [gpu_model_runner.py:2123] Model loading took 6.26 GiB; generate() warm-up done; sampling with temperature 1.0",
    "Processed prompts: 100%|##########| 128/128 [01:31<00:00,  1.40it/s] rollout finished",
    "step 0: optimizer.step() not yet called; loss.backward() pending",
]

entries = []
def add(id, source, kind, framework, log, phase, frame, note, card=None, card_phase=None, match=None, candidates=None):
    e = {"id": id, "source": source, "kind": kind, "framework": framework, "log": log,
         "expect": {"phase": phase, "frame": frame, **({"candidates": candidates} if candidates else {})}, "note": note}
    if card is not None:
        e["card"] = card
        e["expect_with_card"] = {"phase": card_phase or phase, "match": match}
    entries.append(e)

SEED_CARD = {"model": "Qwen/Qwen3.5-27B", "method": "grpo", "scope": "lora",
             "hardware": {"gpu": "rtx4090", "gpus_per_node": 8},
             "roles": {"reference": "lora_disabled", "kl_coef": 0.04},
             "rollout": {"prompt_len": 1024, "response_len": 4096, "tensor_parallel": 8, "gpu_memory_utilization": 0.9}}

# 1. the case: TRL GRPO reference log-probs, vLLM words all over the log
fr = TRAINER + [
    (SP + "trl/trainer/grpo_trainer.py", 1489, "_generate_and_score_completions", "ref_per_token_logps, _ = self._get_per_token_logps_and_entropies("),
    (SP + "trl/extras/profiling.py", 98, "wrapper", "return func(self, *args, **kwargs)"),
    (SP + "trl/trainer/grpo_trainer.py", 880, "_get_per_token_logps_and_entropies", "logits = model(**model_inputs).logits"),
] + MODEL
add("trl-grpo-ref-logprob-vllm-noise", "synthetic: frames follow trl/trainer/grpo_trainer.py (GRPOTrainer._generate_and_score_completions -> _get_per_token_logps_and_entropies, TRL 0.20-0.23); the seed's GRPO 27B card", "synthetic", "trl",
    tb(fr, new_msg("2.37 GiB"), pre=NOISE_GEN), "ref_logprob", "_get_per_token_logps_and_entropies",
    "issue 14: a vLLM engine line must not label a _get_per_token_logps OOM as generation",
    card=SEED_CARD, match="bf16 logits of one log-prob micro-batch")

# 2. TRL GRPO: the loss's own forward (old TRL spelling _get_per_token_logps inside _compute_loss)
fr = TRAINER[:3] + [
    (SP + "transformers/trainer.py", 3736, "training_step", "loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)"),
    (SP + "trl/extras/profiling.py", 87, "wrapper", "return func(self, *args, **kwargs)"),
    (SP + "trl/trainer/grpo_trainer.py", 1187, "compute_loss", "return self._compute_loss(model, inputs)"),
    (SP + "trl/trainer/grpo_trainer.py", 1197, "_compute_loss", "per_token_logps = self._get_per_token_logps(model, input_ids, attention_mask, logits_to_keep)"),
    (SP + "trl/trainer/grpo_trainer.py", 860, "_get_per_token_logps", "logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep + 1).logits"),
] + MODEL
add("trl-grpo-loss-forward", "synthetic: frames follow huggingface/trl#3172 (GRPOTrainer.compute_loss -> _compute_loss -> _get_per_token_logps, TRL 0.16)", "synthetic", "trl",
    tb(fr, new_msg("2.37 GiB"), pre=NOISE_GEN[:2] + ["ref_per_token_logps computed for batch 0"]), "actor_forward", "_get_per_token_logps",
    "the loss's log-prob pass: the caller (_compute_loss) decides, not the word 'ref' in an INFO line",
    card=SEED_CARD, match="bf16 logits")

# 3. TRL GRPO generation inside vLLM, with backward/optimizer words in the log
fr = TRAINER + [
    (SP + "trl/trainer/grpo_trainer.py", 1320, "_generate_and_score_completions", "prompt_ids, completion_ids, num_items_in_batch = self._generate(prompts, images)"),
    (SP + "trl/trainer/grpo_trainer.py", 1250, "_generate", "completion_ids = self._generate_single_turn(prompts, images)"),
    (SP + "trl/trainer/grpo_trainer.py", 1120, "_generate_single_turn", "all_outputs = self.llm.generate(vllm_inputs, sampling_params=sampling_params, use_tqdm=False)"),
    (SP + "vllm/entrypoints/llm.py", 388, "generate", "outputs = self._run_engine(use_tqdm=use_tqdm)"),
    (SP + "vllm/entrypoints/llm.py", 1514, "_run_engine", "step_outputs = self.llm_engine.step()"),
    (SP + "vllm/v1/engine/llm_engine.py", 243, "step", "outputs = self.engine_core.get_output()"),
    (SP + "vllm/v1/worker/gpu_model_runner.py", 1760, "execute_model", "logits = self.model.compute_logits(sample_hidden_states, None)"),
]
add("trl-grpo-vllm-generate", "synthetic: frames follow trl/trainer/grpo_trainer.py (_generate_single_turn -> vllm LLM.generate, TRL 0.22, vLLM 0.10 V1 engine)", "synthetic", "trl",
    tb(fr, new_msg("1.21 GiB"), pre=["[INFO] actor_backward step 3 done, loss.backward() 2.1 s", "[INFO] optimizer.step() 0.4 s; from_pretrained cache hit"]),
    "rollout", "execute_model", "generation inside vLLM; the log's backward/optimizer/from_pretrained words do not count")

# 4. TRL weight sync: merge_adapter under _move_model_to_vllm
fr = TRAINER + [
    (SP + "trl/trainer/grpo_trainer.py", 1300, "_generate_and_score_completions", "self._move_model_to_vllm()"),
    (SP + "trl/trainer/grpo_trainer.py", 1080, "_move_model_to_vllm", "self.model.merge_adapter()"),
    (SP + "peft/tuners/tuners_utils.py", 640, "merge_adapter", "module.merge(adapter_names=adapter_names)"),
    (SP + "peft/tuners/lora/layer.py", 620, "merge", "delta_weight = self.get_delta_weight(active_adapter)"),
]
add("trl-grpo-weight-sync", "synthetic: frames follow trl/trainer/grpo_trainer.py (_move_model_to_vllm merges the PEFT adapter, TRL 0.19-0.23)", "synthetic", "trl",
    tb(fr, new_msg("130.00 MiB"), pre=NOISE_GEN[:1] + ["_get_per_token_logps took 3.1 s"]), "weight_sync", "merge_adapter",
    "weight sync; a log-prob word earlier in the log does not count")

# 5. SFT backward through gradient-checkpoint recompute
fr = [
    ("train_sft.py", 51, "<module>", "trainer.train()"),
    (SP + "transformers/trainer.py", 2245, "train", "return inner_training_loop("),
    (SP + "transformers/trainer.py", 2560, "_inner_training_loop", "tr_loss_step = self.training_step(model, inputs, num_items_in_batch)"),
    (SP + "transformers/trainer.py", 3770, "training_step", "self.accelerator.backward(loss, **kwargs)"),
    (SP + "accelerate/accelerator.py", 2734, "backward", "loss.backward(**kwargs)"),
    (SP + "torch/_tensor.py", 648, "backward", "torch.autograd.backward("),
    (SP + "torch/autograd/__init__.py", 353, "backward", "_engine_run_backward("),
    (SP + "torch/autograd/graph.py", 824, "_engine_run_backward", "return Variable._execution_engine.run_backward("),
    (SP + "torch/utils/checkpoint.py", 1124, "unpack_hook", "frame.recompute_fn(*args)"),
    (SP + "torch/utils/checkpoint.py", 1518, "recompute_fn", "fn(*args, **kwargs)"),
] + MODEL[:2] + [(SP + "transformers/models/qwen3/modeling_qwen3.py", 71, "forward", "down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))")]
add("sft-backward-checkpoint-recompute", "synthetic: frames follow transformers Trainer.training_step -> accelerate backward -> torch.utils.checkpoint recompute (torch 2.5+)", "synthetic", "transformers",
    tb(fr, new_msg("148.00 MiB"), pre=["generate() not used in SFT; model.forward() step 12"]), "backward", "recompute_fn",
    "the recomputed forward runs inside backward: the innermost recognised frame is the checkpoint's recompute")

# 6. DeepSpeed ZeRO-3 optimizer step
fr = [
    ("train.py", 140, "<module>", "engine.step()"),
    (SP + "deepspeed/runtime/engine.py", 2213, "step", "self._take_model_step(lr_kwargs)"),
    (SP + "deepspeed/runtime/engine.py", 2119, "_take_model_step", "self.optimizer.step()"),
    (SP + "deepspeed/utils/nvtx.py", 18, "wrapped_fn", "ret_val = func(*args, **kwargs)"),
    (SP + "deepspeed/runtime/zero/stage3.py", 2050, "step", "self._optimizer_step(sub_group_id)"),
    (SP + "deepspeed/runtime/zero/stage3.py", 947, "_optimizer_step", "self.optimizer.step()"),
    (SP + "torch/optim/optimizer.py", 487, "wrapper", "out = func(*args, **kwargs)"),
    (SP + "deepspeed/ops/adam/fused_adam.py", 150, "step", "state['exp_avg_sq'] = torch.zeros_like(p.data)"),
]
add("deepspeed-zero3-step", "synthetic: frames follow deepspeed/runtime/zero/stage3.py (DeepSpeedZeroOptimizer_Stage3.step -> _optimizer_step, DeepSpeed 0.15)", "synthetic", "deepspeed",
    tb(fr, new_msg("1.93 GiB"), pre=["[INFO] [engine.py:123] Engine before forward", "[INFO] loss.backward() done in 2.3 s"]), "optimizer_step", "step",
    "the optimizer step's first call allocates the states")

# 7. load: from_pretrained
fr = [
    ("train.py", 20, "<module>", 'model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16, device_map="cuda")'),
    (SP + "transformers/models/auto/auto_factory.py", 604, "from_pretrained", "return model_class.from_pretrained("),
    (SP + "transformers/modeling_utils.py", 288, "_wrapper", "return func(*args, **kwargs)"),
    (SP + "transformers/modeling_utils.py", 5106, "from_pretrained", ") = cls._load_pretrained_model("),
    (SP + "transformers/modeling_utils.py", 5569, "_load_pretrained_model", "caching_allocator_warmup(model_to_load, expanded_device_map, hf_quantizer)"),
    (SP + "transformers/modeling_utils.py", 6180, "caching_allocator_warmup", "_ = torch.empty(byte_count // factor, dtype=torch.float16, device=device_name, requires_grad=False)"),
]
add("transformers-from-pretrained", "synthetic: frames follow transformers/modeling_utils.py (from_pretrained -> _load_pretrained_model -> caching_allocator_warmup, transformers 4.53)", "synthetic", "transformers",
    tb(fr, new_msg("50.10 GiB"), pre=["loading weights for generate() and backward()"]), "load", "caching_allocator_warmup",
    "loading the weights")

# 8. vLLM engine start (profiling run) in a colocated TRL run
fr = [
    ("train_grpo.py", 70, "<module>", "trainer = GRPOTrainer(model=model, args=args, reward_funcs=reward, train_dataset=ds)"),
    (SP + "trl/trainer/grpo_trainer.py", 640, "__init__", "self.llm = LLM("),
    (SP + "vllm/entrypoints/llm.py", 285, "__init__", "self.llm_engine = LLMEngine.from_engine_args("),
    (SP + "vllm/v1/engine/llm_engine.py", 190, "from_engine_args", "return cls(vllm_config=vllm_config,"),
    (SP + "vllm/v1/engine/core.py", 83, "__init__", "self._initialize_kv_caches(vllm_config)"),
    (SP + "vllm/v1/engine/core.py", 141, "_initialize_kv_caches", "self.model_executor.determine_available_memory())"),
    (SP + "vllm/v1/worker/gpu_worker.py", 230, "determine_available_memory", "self.model_runner.profile_run()"),
    (SP + "vllm/v1/worker/gpu_model_runner.py", 2450, "profile_run", "output = self._dummy_sampler_run(last_hidden_states)"),
]
add("vllm-engine-start-profile", "synthetic: frames follow vllm/v1/engine/core.py (_initialize_kv_caches -> profile_run, vLLM 0.9-0.10) under TRL's colocated LLM()", "synthetic", "vllm",
    tb(fr, new_msg("4.63 GiB")), "load", "profile_run",
    "the engine's start-up profiling run is the load phase, not generation")

# 9. verl: reference log-probs (Ray worker), log full of generation words
tag = "(WorkerDict pid=2204) "
fr = [
    (SP + "verl/single_controller/ray/base.py", 705, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
    (SP + "verl/single_controller/base/decorator.py", 540, "inner", "return func(*args, **kwargs)"),
    (SP + "verl/workers/fsdp_workers.py", 1020, "compute_ref_log_prob", "output, _ = self.ref_policy.compute_log_prob(data=data, calculate_entropy=False)"),
    (SP + "verl/workers/actor/dp_actor.py", 330, "compute_log_prob", "entropy, log_probs = self._forward_micro_batch("),
    (SP + "verl/workers/actor/dp_actor.py", 270, "_forward_micro_batch", "log_probs = logprobs_from_logits(logits, micro_batch['responses'])"),
    (SP + "verl/utils/torch_functional.py", 80, "logprobs_from_logits", "output = logprobs_from_logits_v2(logits, labels)"),
]
pre = ["(main_task pid=2001) generate_sequences: 14.2 s", "(WorkerDict pid=2204) vLLM wake_up; actor_rollout_generate_sequences done",
       "ray::WorkerDict.actor_rollout_generate_sequences() finished"]
log = "\n".join(pre) + "\n(main_task pid=2001) ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.ref_compute_ref_log_prob() (pid=2204, ip=10.0.0.2, actor_id=abc)\n" + \
      "\n".join(frames(fr, "(main_task pid=2001) ")) + "\n(main_task pid=2001) " + new_msg("9.47 GiB", total="79.11 GiB") + "\n"
add("verl-ref-logprob-ray", "synthetic: frames follow verl/workers/fsdp_workers.py (compute_ref_log_prob -> dp_actor.compute_log_prob -> _forward_micro_batch, verl 0.4-0.5), Ray's RayTaskError layout", "synthetic", "verl",
    log, "ref_logprob", "logprobs_from_logits", "a Ray task re-raises the worker's OOM; generation lines earlier do not count")

# 10. verl: actor update backward
fr = [
    (SP + "verl/single_controller/ray/base.py", 432, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
    (SP + "verl/single_controller/base/decorator.py", 207, "inner", "return func(*args, **kwargs)"),
    (SP + "verl/workers/fsdp_workers.py", 504, "update_actor", "metrics = self.actor.update_policy(data=data)"),
    (SP + "verl/workers/actor/dp_actor.py", 420, "update_policy", "loss.backward()"),
    (SP + "torch/_tensor.py", 626, "backward", "torch.autograd.backward("),
    (SP + "torch/autograd/__init__.py", 347, "backward", "_engine_run_backward("),
    (SP + "torch/autograd/graph.py", 823, "_engine_run_backward", "return Variable._execution_engine.run_backward("),
]
log = "(Runner pid=104449) Before vllm offload in sharding manager: 58.32 GB / 79.19 GB.\n(Runner pid=104449) compute_log_prob done; compute_ref_log_prob done\n" + \
      "(Runner pid=104449) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::WorkerDict.actor_rollout_ref_update_actor() (pid=118847, ip=10.130.71.7)\n" + \
      "\n".join(frames(fr, "(Runner pid=104449) ")) + "\n(Runner pid=104449) " + new_msg("5.94 GiB", total="79.19 GiB") + "\n"
add("verl-update-actor-backward", "synthetic: the Ray header and frames of EasyR1's verl fork in github.com/wangyuduan0618/EasyR1/issues/9 (update_actor -> update_policy), ending in torch's backward", "synthetic", "verl",
    log, "actor_backward", "_engine_run_backward", "backward of the actor update in an RL run")

# 11. OpenRLHF make_experience: the reference model's pass
fr = [
    (SP + "openrlhf/trainer/ppo_trainer.py", 240, "fit", "experience = self.experience_maker.make_experience(rand_prompts, **self.generate_kwargs)"),
    (SP + "torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
    (SP + "openrlhf/trainer/ppo_utils/experience_maker.py", 312, "make_experience", "base_action_log_probs = self.initial_model(sequences, num_actions, attention_mask)"),
    (SP + "torch/nn/modules/module.py", 1736, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    (SP + "openrlhf/models/actor.py", 230, "forward", "log_probs = log_probs_from_logits(output[\"logits\"][:, :-1, :], sequences[:, 1:])"),
]
add("openrlhf-make-experience-ref", "synthetic: frames follow openrlhf/trainer/ppo_utils/experience_maker.py (NaiveExperienceMaker.make_experience, OpenRLHF 0.5)", "synthetic",
    "openrlhf", tb(fr, new_msg("7.82 GiB", total="39.39 GiB"), tag="[rank0]: ", pre=["[rank0]: actor.generate() 2048 samples; training_step_actor next"]),
    "ref_logprob", "make_experience", "the caller's source line names the reference model")

# 12. OpenRLHF weight broadcast to vLLM
fr = [
    (SP + "openrlhf/trainer/ppo_trainer.py", 260, "fit", "self._broadcast_to_vllm()"),
    (SP + "openrlhf/trainer/ray/ppo_actor.py", 146, "_broadcast_to_vllm", "with deepspeed.zero.GatheredParameters([param], enabled=self.strategy.args.zero_stage == 3):"),
    (SP + "deepspeed/runtime/zero/partition_parameters.py", 2230, "__enter__", "self.params[0].all_gather(param_list=self.params)"),
    (SP + "deepspeed/runtime/zero/partition_parameters.py", 1150, "all_gather", "return self._all_gather(param_list, async_op=async_op, hierarchy=hierarchy)"),
]
add("openrlhf-broadcast-to-vllm", "synthetic: frames follow openrlhf/trainer/ray/ppo_actor.py (ActorPPOTrainer._broadcast_to_vllm under ZeRO-3, OpenRLHF 0.5)", "synthetic",
    "openrlhf", tb(fr, new_msg("1.45 GiB", total="79.11 GiB"), pre=["make_experience: ref and critic done", "ppo_train: backward done"]),
    "weight_sync", "_broadcast_to_vllm", "the weight broadcast's ZeRO-3 gather")

# --- excerpts of real logs (library frames and the message as reported; user paths shortened) ---
fr = [
    ("/verl/verl/workers/fsdp_workers.py", 782, "compute_log_prob", "output, entropys = self.actor.compute_log_prob(data=data, calculate_entropy=True)"),
    ("/verl/verl/utils/profiler/performance.py", 89, "f", "return self.log(decorated_function, *args, **kwargs)"),
    ("/verl/verl/utils/profiler/performance.py", 102, "log", "output = func(*args, **kwargs)"),
    ("/verl/verl/workers/actor/dp_actor.py", 332, "compute_log_prob", "entropy, log_probs = self._forward_micro_batch("),
    ("/verl/verl/workers/actor/dp_actor.py", 266, "_forward_micro_batch", "entropy = verl_F.entropy_from_logits(logits)  # (bsz, response_length)"),
    ("/verl/verl/utils/torch_functional.py", 148, "entropy_from_logits", "entropy = torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)"),
]
msg = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 13.91 GiB. GPU 0 has a total capacity of 79.11 GiB of which 8.85 GiB is free. "
       "Process 23444 has 70.25 GiB memory in use. Of the allocated memory 60.49 GiB is allocated by PyTorch, and 6.77 GiB is reserved by PyTorch "
       "but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
add("verl-2828-old-logprob-entropy", "https://github.com/verl-project/verl/issues/2828", "excerpt", "verl",
    "\n".join(frames(fr)) + "\n" + msg + "\n", "old_logprob", "entropy_from_logits",
    "excerpt (the issue's traceback starts at fsdp_workers.compute_log_prob): the actor's compute_log_prob is the old policy's pass")
fr = [
    ("/.conda/envs/torch/lib/python3.10/site-packages/torch/optim/optimizer.py", 487, "wrapper", "out = func(*args, **kwargs)"),
    ("/.conda/envs/torch/lib/python3.10/site-packages/torch/optim/optimizer.py", 91, "_use_grad", "ret = func(self, *args, **kwargs)"),
    ("/.conda/envs/torch/lib/python3.10/site-packages/torch/optim/adamw.py", 220, "step", "adamw("),
    ("/.conda/envs/torch/lib/python3.10/site-packages/torch/optim/optimizer.py", 154, "maybe_fallback", "return func(*args, **kwargs)"),
    ("/.conda/envs/torch/lib/python3.10/site-packages/torch/optim/adamw.py", 782, "adamw", "func("),
    ("/.conda/envs/torch/lib/python3.10/site-packages/torch/optim/adamw.py", 606, "_multi_tensor_adamw", "exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)"),
]
add("trl-2776-adamw-step", "https://github.com/huggingface/trl/pull/2776 (comment by Tuziking; GRPO run)", "excerpt", "torch",
    "\n".join(frames(fr, "[rank0]: ")) + "\n[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 130.00 MiB. GPU 0 has a total capacity of 94.99 GiB of which 87.19 MiB is free. Including non-PyTorch memory,\n",
    "optimizer_step", "_multi_tensor_adamw", "excerpt (the visible frames are torch's AdamW only, so without a card it is the plain optimizer step)")
log = ("Traceback (most recent call last):\n"
       '  File ".\\train.py", line 135, in main_loop\n'
       "    train_one_epoch(train_loader, model, criterion, optimizer, writer, epoch, None, model_type, logger)\n"
       '  File "D:\\Projects\\UCTransNet\\Train_one_epoch.py", line 76, in train_one_epoch\n'
       "    out_loss.backward()\n"
       '  File "C:\\Python38\\lib\\site-packages\\torch\\_tensor.py", line 255, in backward\n'
       "    torch.autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)\n"
       '  File "C:\\Python38\\lib\\site-packages\\torch\\autograd\\__init__.py", line 147, in backward\n'
       "    Variable._execution_engine.run_backward(\n"
       "RuntimeError: CUDA out of memory. Tried to allocate 100.00 MiB (GPU 0; 12.00 GiB total\n")
add("uctransnet-2-windows-backward", "https://github.com/McGregorWwww/UCTransNet/issues/2", "excerpt", "torch", log, "backward", "backward",
    "excerpt with Windows paths; the message is cut after '12.00 GiB total' as in the issue")

tag = "(EngineCore_DP0 pid=8884) "
fr = [
    ("/opt/conda/envs/vllm_env/lib/python3.13/site-packages/torch/nn/modules/module.py", 1773, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("/opt/conda/envs/vllm_env/lib/python3.13/site-packages/torch/nn/modules/module.py", 1784, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("/opt/conda/envs/vllm_env/lib/python3.13/site-packages/vllm/v1/sample/sampler.py", 86, "forward", "logits = logits.to(torch.float32)"),
]
lines = frames(fr, tag)
lines.insert(2, tag + "           ~~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^")
msg = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB. GPU 0 has a total capacity of 79.11 GiB of which 140.75 MiB is free. "
       "Process 3270336 has 78.96 GiB memory in use. Of the allocated memory 68.83 GiB is allocated by PyTorch, with 660.00 MiB allocated in private pools "
       "(e.g., CUDA Graphs), and 331.08 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See docume")
add("vllm-27508-sampler-start-or-generate", "https://github.com/vllm-project/vllm/issues/27508", "excerpt", "vllm",
    "\n".join(lines) + "\n" + tag + msg + "\n", None, "forward",
    "excerpt cut above the sampler: a vLLM frame runs at engine start (the dummy sampler run) or while generating, and the visible frames cannot say which",
    candidates=["load", "rollout"])
print(len(entries))
about = ("OOM logs with the traceback above the message, each with the phase diagnose must attribute from the frames alone "
         "('expect') and, where a card is given, with the card ('expect_with_card': phase and the label the size must match). "
         "'kind' is 'excerpt' for library frames and the message as a public issue reported them (user paths shortened), or "
         "'synthetic' for logs built from the named framework's function names and source lines, with other phases' words "
         "(engine start, generate, backward, optimizer.step) placed in the log before the traceback on purpose.")
with open(Path(__file__).with_name("oom_tracebacks.json"), "w") as fh:
    json.dump({"about": about, "logs": entries}, fh, indent=1, ensure_ascii=False)
