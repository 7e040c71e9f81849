#!/usr/bin/env python3
"""Checkpoint folders in the on-disk layouts that HF Trainer, Accelerate, DeepSpeed and Keras 3 write.

Written with Debian's PyTorch 1.13 and numpy 1.24 (/usr/bin/python3); run from the repository root:
    /usr/bin/python3 scripts/make_trainer_fixtures.py

None of transformers, accelerate, peft, deepspeed or keras is installed: their layouts are written by hand
from their sources (transformers trainer.py / trainer_callback.py, accelerate checkpointing.py and
utils/constants.py, deepspeed runtime/engine.py, runtime/zero/stage_1_and_2.py, runtime/zero/stage3.py,
checkpoint/constants.py, utils/zero_to_fp32.py (0.16.x), keras src/saving/saving_lib.py). Where those
libraries pickle their own classes, the class is defined here in a stand-in module registered in
sys.modules under the real module name, so each pickle names exactly the global the real library's
pickle names (transformers.training_args.TrainingArguments, deepspeed.runtime.zero.config.ZeroStageEnum,
...). The stand-ins exist only while this script runs.
Python 3.11 pickles an Enum member as builtins.getattr(EnumClass, "NAME") (written __builtin__.getattr under
torch.save's protocol 2); Python <= 3.10 and >= 3.12 pickle EnumClass(value) instead. So the TrainingArguments
and ZeRO optimizer pickles here name __builtin__.getattr next to the enum classes, as the real files do when
saved under 3.11. numpy's legacy RNG state pickles numpy.core.multiarray._reconstruct, numpy.ndarray,
numpy.dtype and, for its bytes under protocol 2, _codecs.encode (numpy >= 2 names numpy._core...).

Every tensor comes from a real tiny model (Tiny below: embed 6x4 tied to head.weight, proj 4->3, LayerNorm(3),
out 3->4, an int64 buffer position_ids) trained for real: torch.optim.AdamW, a linear-warmup LambdaLR,
max_grad_norm 1.0, 10 steps, fixed seeds. All zip timestamps are fixed; running twice gives the same bytes.

tests/data/trainers/
  hf/checkpoint-10/            Trainer._save_checkpoint, world_size 1, save_safetensors=True:
                               config.json, model.safetensors (metadata {"format": "pt"}; the tied
                               head.weight dropped as save_pretrained does), training_args.bin,
                               optimizer.pt (AdamW state_dict: two param groups, decay / no decay, state
                               step tensor(10.)), scheduler.pt (LambdaLR.state_dict, last_epoch 10),
                               scaler.pt (GradScaler.state_dict keys), rng_state.pth
                               ({"python", "numpy", "cpu"}; no "cuda" on CPU), trainer_state.json.
  hf/checkpoint-10-bin/        the same with save_safetensors=False: pytorch_model.bin (torch.save of
                               the state dict; head.weight and embed.weight share one storage); no scaler.pt.
  hf/checkpoint-10-peft/       a LoRA run: adapter_model.safetensors (base_model.model.<module>.lora_A/B.weight)
                               and adapter_config.json instead of the model; the optimizer holds only the
                               four LoRA tensors.
  hf/checkpoint-10-save-only-model/  save_only_model=True: no optimizer.pt, scheduler.pt, scaler.pt, rng_state.pth.
  hf/run/checkpoint-5/, hf/run/checkpoint-10/  one run's two saves (save_steps 5); resume_from_checkpoint=True
                               picks the highest checkpoint-<n> (trainer_utils.get_last_checkpoint).
  accelerate/save_state/       Accelerator.save_state(dir), one process: model.safetensors (shared tensors
                               dropped, as accelerate.utils.save does), optimizer.bin, scheduler.bin, scaler.pt,
                               random_states_0.pkl ({"step", "random_state", "numpy_random_seed",
                               "torch_manual_seed"}; "torch_cuda_manual_seed" only when CUDA is available),
                               custom_checkpoint_0.pkl (a registered EMA object's state_dict()).
  accelerate/save_state_bin/   the same with safe_serialization=False: pytorch_model.bin.
  hf/checkpoint-10-deepspeed/  the Trainer under DeepSpeed ZeRO-2 (2 processes): latest + global_step10/ (the
                               ZeRO files of deepspeed/zero2), zero_to_fp32.py, the gathered model.safetensors,
                               scheduler.pt, rng_state_{0,1}.pth, trainer_state.json, training_args.bin.
  hf/checkpoint-10-fsdp/       the Trainer under FSDP SHARDED_STATE_DICT (2 processes): DCP folders
                               pytorch_model_fsdp_0/ ("model.<name>") and optimizer_0/ ("optimizer.state.<name>.*",
                               param_groups a bytes item), scheduler.pt, rng_state_{0,1}.pth, trainer_state.json.
  accelerate/save_state_deepspeed/  save_state under DeepSpeed: latest ("pytorch_model") + pytorch_model/,
                               scheduler.bin, random_states_{0,1}.pkl, zero_to_fp32.py.
  deepspeed/zero2/             engine.save_checkpoint(dir), ZeRO stage 2, fp32, 2 data-parallel ranks:
                               latest ("global_step10", no newline), global_step10/mp_rank_00_model_states.pt,
                               global_step10/zero_pp_rank_{0,1}_mp_rank_00_optim_states.pt.
  deepspeed/zero2_bf16/        the same with bf16 enabled: module weights in bf16, optimizer files
                               bf16_zero_pp_rank_{0,1}_mp_rank_00_optim_states.pt, fp32 master partitions.
  deepspeed/zero3/             ZeRO stage 3, fp32, 2 ranks: zero_pp_rank_{0,1}_mp_rank_00_model_states.pt
                               (every parameter an empty placeholder tensor, buffers whole) and
                               zero_pp_rank_{0,1}_mp_rank_00_optim_states.pt (fp32_flat_groups).
                               (DeepSpeed also copies its zero_to_fp32.py script next to `latest`; left out here.)
  keras/clean.keras            a Keras 3 zip: metadata.json, config.json, model.weights.h5 (ZIP_STORED, in
                               keras' order); h5 groups layers/<name>/vars/<i>.
  keras/lambda.keras           the same model with a Lambda layer: config.json holds a
                               {"class_name": "__lambda__", "config": {"code": <base64 marshal>}} function.
  keras/duplicate_config.keras two members named config.json (the clean one first, the Lambda one second);
                               zipfile (and so keras) reads the last one.
  keras/clean_deflated.keras   clean.keras with every member deflated (a zip tool's recompression; Keras
                               itself stores), which Keras's zipfile reads.
  keras/clean_npz.keras        save_model(weights_format="npz")'s calls (write_keras_like_keras): weights in
                               model.weights.npz, np.savez written into a force_zip64 member; plain arrays
                               named layers/<name>/vars/<i> (keras_npz_contents explains why not Keras's dicts).
  keras/pickled_npz.keras      the same as Keras's writer really fills it: one dict per layer path, which
                               numpy pickles (0-d object arrays, members __root__.npy, layers/dense.npy, ...).
  keras/clean_npz_deflated.keras clean_npz.keras recompressed (the outer members deflated).
  expected.json                per folder, per file: every tensor (name as flattened by
                               make_pytorch_fixtures.describe, dtype, shape, sha256 of its bytes as
                               torch.load(weights_only=False) reads them), the globals each pickle names,
                               the step numbers each file states, what the trainer loads on resume, and for
                               DeepSpeed the fp32 parameters rebuilt by zero_to_fp32's algorithm
                               (reimplemented here, checked against the trained master weights).
"""
import codecs
import copy
import functools
import hashlib
import io
import json
import marshal
import math
import os
import pickletools
import random
import shutil
import struct
import sys
import types
import warnings
import zipfile
from collections import OrderedDict

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_pytorch_fixtures import DTYPE, describe  # noqa: E402  (one definition of a fixture's expected tensors)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "trainers")
SEED = 1234
WORLD = 2            # DeepSpeed data-parallel ranks
DS_VERSION = "0.16.4"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)

# ----------------------------------------------------------------------------------------------------------
# Stand-in modules: classes the real libraries pickle, registered under their real module names.
# ----------------------------------------------------------------------------------------------------------
STUBS = {
    "transformers.trainer_utils": '''
from enum import Enum
class ExplicitEnum(str, Enum):
    pass
class IntervalStrategy(ExplicitEnum):
    NO = "no"
    STEPS = "steps"
    EPOCH = "epoch"
class SaveStrategy(ExplicitEnum):
    NO = "no"
    STEPS = "steps"
    EPOCH = "epoch"
    BEST = "best"
class HubStrategy(ExplicitEnum):
    END = "end"
    EVERY_SAVE = "every_save"
    CHECKPOINT = "checkpoint"
    ALL_CHECKPOINTS = "all_checkpoints"
class SchedulerType(ExplicitEnum):
    LINEAR = "linear"
    COSINE = "cosine"
''',
    "transformers.trainer_pt_utils": '''
from dataclasses import dataclass
@dataclass
class AcceleratorConfig:
    split_batches: bool = False
    dispatch_batches: object = None
    even_batches: bool = True
    use_seedable_sampler: bool = True
    non_blocking: bool = False
    gradient_accumulation_kwargs: object = None
''',
    "transformers.training_args": '''
from dataclasses import dataclass, field
from enum import Enum
class OptimizerNames(str, Enum):
    ADAMW_TORCH = "adamw_torch"
    ADAMW_TORCH_FUSED = "adamw_torch_fused"
@dataclass
class TrainingArguments:
    output_dir: str = "run"
    overwrite_output_dir: bool = False
    do_train: bool = True
    do_eval: bool = True
    eval_strategy: object = "steps"
    per_device_train_batch_size: int = 4
    per_device_eval_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-3
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = 1.0
    num_train_epochs: float = 4.0
    max_steps: int = 20
    lr_scheduler_type: object = "linear"
    warmup_steps: int = 2
    logging_strategy: object = "steps"
    logging_steps: float = 5
    save_strategy: object = "steps"
    save_steps: float = 5
    save_total_limit: object = None
    save_safetensors: bool = True
    save_only_model: bool = False
    seed: int = 1234
    bf16: bool = False
    fp16: bool = False
    eval_steps: float = 5
    metric_for_best_model: object = "loss"
    greater_is_better: bool = False
    optim: object = "adamw_torch"
    report_to: list = field(default_factory=list)
    hub_strategy: object = "every_save"
    accelerator_config: object = None
    deepspeed: object = None
''',
    "accelerate.utils.dataclasses": '''
from enum import Enum
class DistributedType(str, Enum):
    NO = "NO"
    MULTI_GPU = "MULTI_GPU"
    DEEPSPEED = "DEEPSPEED"
''',
    "accelerate.state": '''
class PartialState:
    _shared_state = {}
    def __init__(self, **state):
        self.__dict__ = self._shared_state
        self.__dict__.update(state)
''',
    "deepspeed.runtime.zero.config": '''
from enum import Enum
class ZeroStageEnum(int, Enum):
    """ Enum class for possible zero stages """
    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3
    max_stage = 3
''',
    "deepspeed.runtime.fp16.loss_scaler": '''
class LossScalerBase:
    def __init__(self, cur_scale):
        self.cur_scale = cur_scale
        self.dynamic = False
class LossScaler(LossScalerBase):
    def __init__(self, scale=1):
        super(LossScaler, self).__init__(scale)
''',
    "deepspeed.utils.tensor_fragment": '''
from dataclasses import dataclass
@dataclass
class fragment_address:
    numel: int
    start: int
''',
}


def install_stubs():
    """Executes each stand-in's source in a module registered under the real name (so __module__ matches)."""
    for name, source in STUBS.items():
        parts = name.split(".")
        for i in range(1, len(parts)):
            sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
        mod = types.ModuleType(name)
        sys.modules[name] = mod
        exec(compile(source, f"<stand-in {name}>", "exec"), mod.__dict__)
    return {name: sys.modules[name] for name in STUBS}


def remove_stubs():
    for name in list(sys.modules):
        if name.split(".")[0] in ("transformers", "accelerate", "deepspeed"):
            del sys.modules[name]


# ----------------------------------------------------------------------------------------------------------
# The tiny model and its training.
# ----------------------------------------------------------------------------------------------------------
class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("position_ids", torch.arange(5))
        self.embed = nn.Embedding(6, 4)
        self.proj = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)
        self.out = nn.Linear(3, 4)
        self.head = nn.Linear(4, 6, bias=False)
        self.head.weight = self.embed.weight      # tied, as tie_word_embeddings does

    def forward(self, ids):
        return self.head(self.out(torch.tanh(self.norm(self.proj(self.embed(ids))))))


class LoRALinear(nn.Module):
    """peft's lora.Linear in miniature: base layer frozen, lora_A/lora_B trained (scaling alpha/r)."""

    def __init__(self, base, r=2, alpha=4):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.ModuleDict({"default": nn.Linear(base.in_features, r, bias=False)})
        self.lora_B = nn.ModuleDict({"default": nn.Linear(r, base.out_features, bias=False)})
        nn.init.normal_(self.lora_B["default"].weight, std=0.1)
        self.scaling = alpha / r

    def forward(self, x):
        return self.base_layer(x) + self.lora_B["default"](self.lora_A["default"](x)) * self.scaling


def decay_split(model):
    """Trainer.get_decay_parameter_names: no weight decay for biases and LayerNorm parameters."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if name.endswith("bias") or name.startswith("norm.") else decay).append(name)
    return decay, no_decay


def linear_warmup(current_step, *, num_warmup_steps, num_training_steps):
    # transformers.optimization._get_linear_schedule_with_warmup_lr_lambda
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1, num_warmup_steps))
    return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))


def make_scheduler(opt):
    return torch.optim.lr_scheduler.LambdaLR(
        opt, functools.partial(linear_warmup, num_warmup_steps=2, num_training_steps=20))


def batch(n):
    random.random()          # the data pipeline touches every generator, so each saved RNG state moves
    np.random.rand()
    ids = torch.randint(0, 6, (n, 5))
    return ids, torch.roll(ids, 1, dims=1)


def loss_of(model, ids, targets):
    return nn.functional.cross_entropy(model(ids).reshape(-1, 6), targets.reshape(-1))


def seed_all():
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)


def rng_states():
    return random.getstate(), np.random.get_state(), torch.random.get_rng_state()


def train_hf(lora=False, save_at=(5, 10)):
    """Trainer's loop in miniature; returns a snapshot of everything _save_checkpoint writes at each save."""
    seed_all()
    model = Tiny()
    if lora:
        for p in model.parameters():
            p.requires_grad_(False)
        model.proj = LoRALinear(model.proj)
        model.out = LoRALinear(model.out)
    params = dict(model.named_parameters())
    decay, no_decay = decay_split(model)
    groups = [{"params": [params[n] for n in decay], "weight_decay": 0.01},
              {"params": [params[n] for n in no_decay], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=5e-3, eps=1e-8)
    sched = make_scheduler(opt)
    snaps, log_history, window = {}, [], []
    for step in range(1, max(save_at) + 1):
        ids, targets = batch(4)
        loss = loss_of(model, ids, targets)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        window.append(loss.item())
        if step % 5 == 0:
            log_history.append({"epoch": step / 5, "grad_norm": round(grad_norm.item(), 6),
                                "learning_rate": sched.get_last_lr()[0],
                                "loss": round(sum(window) / len(window), 4), "step": step})
            window = []
            with torch.no_grad():
                ids, targets = batch(4)
                eval_loss = loss_of(model, ids, targets).item()
            log_history.append({"epoch": step / 5, "eval_loss": round(eval_loss, 6), "eval_runtime": 0.0125,
                                "eval_samples_per_second": 320.0, "eval_steps_per_second": 80.0, "step": step})
        if step in save_at:
            snaps[step] = {"model": copy.deepcopy(model.state_dict()),   # deepcopy keeps the tie
                           "optimizer": copy.deepcopy(opt.state_dict()),
                           "scheduler": copy.deepcopy(sched.state_dict()),
                           "rng": rng_states(), "log_history": copy.deepcopy(log_history)}
    return model, snaps


# ----------------------------------------------------------------------------------------------------------
# File writers.
# ----------------------------------------------------------------------------------------------------------
ST_DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}


def raw(t):
    t = t.detach().contiguous()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()


def save_safetensors(tensors, path, metadata=None):
    """The safetensors format by hand: u64 LE header length, JSON header padded with spaces to 8 bytes, data.
    Tensors are laid out as the Rust writer orders them: by dtype alignment (largest first), then name."""
    order = sorted(tensors, key=lambda n: (-tensors[n].element_size(), n))
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in order:
        data = raw(tensors[name])
        header[name] = {"dtype": ST_DTYPE[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", None)
    tensors = []
    for name, info in header.items():
        a, b = info["data_offsets"]
        tensors.append({"name": name, "dtype": info["dtype"], "shape": info["shape"],
                        "sha256": hashlib.sha256(blob[8 + n + a:8 + n + b]).hexdigest()})
    return {"tensors": tensors, "metadata": meta}


def without_shared(state_dict):
    """Drops later names of tensors sharing storage (save_pretrained / accelerate clean_state_dict_for_safetensors)."""
    seen, out = set(), {}
    for name, t in state_dict.items():
        key = (t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr())
        if key in seen:
            continue
        seen.add(key)
        out[name] = t.contiguous()
    return out


def json_file(path, obj, **kw):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, **kw) + ("\n" if kw.get("indent") else ""))


def training_args(stubs, **overrides):
    tu, ta = stubs["transformers.trainer_utils"], stubs["transformers.training_args"]
    acc_state = stubs["accelerate.state"]
    acc_state.PartialState._shared_state.clear()
    args = ta.TrainingArguments(
        eval_strategy=tu.IntervalStrategy.STEPS, lr_scheduler_type=tu.SchedulerType.LINEAR,
        logging_strategy=tu.IntervalStrategy.STEPS, save_strategy=tu.SaveStrategy.STEPS,
        optim=ta.OptimizerNames.ADAMW_TORCH, hub_strategy=tu.HubStrategy.EVERY_SAVE,
        accelerator_config=stubs["transformers.trainer_pt_utils"].AcceleratorConfig(), **overrides)
    # Trainer reads args.device, whose cached_property stores these two on the instance.
    args.distributed_state = acc_state.PartialState(
        _cpu=True, backend=None, device=torch.device("cpu"), debug=False,
        distributed_type=stubs["accelerate.utils.dataclasses"].DistributedType.NO, num_processes=1,
        process_index=0, local_process_index=0, fork_launched=False)
    args._n_gpu = 0
    args.__dict__["__cached__setup_devices"] = torch.device("cpu")
    return args


def trainer_state(step, log_history, save_steps=5):
    """TrainerState (trainer_callback.py) as save_to_json writes it: asdict, indent=2, sort_keys=True, newline."""
    evals = [e for e in log_history if "eval_loss" in e]
    best = min(evals, key=lambda e: e["eval_loss"]) if evals else None
    return {
        "epoch": step / 5, "global_step": step, "max_steps": 20, "logging_steps": 5, "eval_steps": 5,
        "save_steps": save_steps, "train_batch_size": 4, "num_train_epochs": 4, "num_input_tokens_seen": 0,
        "total_flos": float(step * 4 * 5 * 6 * 63), "log_history": log_history,
        "best_metric": best["eval_loss"] if best else None,
        "best_global_step": best["step"] if best else None,
        "best_model_checkpoint": f"run/checkpoint-{best['step']}" if best else None,
        "is_local_process_zero": True, "is_world_process_zero": True, "is_hyper_param_search": False,
        "trial_name": None, "trial_params": None,
        "stateful_callbacks": {"TrainerControl": {"args": {
            "should_epoch_stop": False, "should_evaluate": False, "should_log": False, "should_save": True,
            "should_training_stop": False}, "attributes": {}}},
    }


MODEL_CONFIG = {"architectures": ["TinyForCausalLM"], "hidden_size": 4, "model_type": "tiny",
                "tie_word_embeddings": True, "torch_dtype": "float32", "transformers_version": "4.46.0",
                "vocab_size": 6}

SCALER_STATE = {"scale": 32768.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
                "_growth_tracker": 10}


def write_hf_checkpoint(path, snap, step, stubs, safetensors=True, save_only_model=False, scaler=False,
                        peft=None):
    os.makedirs(path, exist_ok=True)
    if peft is not None:
        adapter, adapter_config = peft
        save_safetensors(adapter, os.path.join(path, "adapter_model.safetensors"), {"format": "pt"})
        json_file(os.path.join(path, "adapter_config.json"), adapter_config, indent=2, sort_keys=True)
    else:
        json_file(os.path.join(path, "config.json"), MODEL_CONFIG, indent=2, sort_keys=True)
        if safetensors:
            save_safetensors(without_shared(snap["model"]), os.path.join(path, "model.safetensors"),
                             {"format": "pt"})
        else:
            torch.save(snap["model"], os.path.join(path, "pytorch_model.bin"))
    torch.save(training_args(stubs, save_safetensors=safetensors, save_only_model=save_only_model,
                             fp16=scaler), os.path.join(path, "training_args.bin"))
    if not save_only_model:
        torch.save(snap["optimizer"], os.path.join(path, "optimizer.pt"))
        torch.save(snap["scheduler"], os.path.join(path, "scheduler.pt"))
        if scaler:
            torch.save(dict(SCALER_STATE), os.path.join(path, "scaler.pt"))
        py, npy, cpu = snap["rng"]
        torch.save({"python": py, "numpy": npy, "cpu": cpu}, os.path.join(path, "rng_state.pth"))
    with open(os.path.join(path, "trainer_state.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(trainer_state(step, snap["log_history"]), indent=2, sort_keys=True) + "\n")


def lora_adapter(model):
    """peft get_peft_model_state_dict: LoRA weights only, adapter name removed, under base_model.model."""
    return {f"base_model.model.{n.replace('.default', '')}": t.detach().clone()
            for n, t in model.state_dict().items() if "lora_" in n}


ADAPTER_CONFIG = {
    "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "tiny-base", "bias": "none",
    "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True, "layer_replication": None,
    "layers_pattern": None, "layers_to_transform": None, "loftq_config": {}, "lora_alpha": 4,
    "lora_dropout": 0.0, "megatron_config": None, "megatron_core": "megatron.core", "modules_to_save": None,
    "peft_type": "LORA", "r": 2, "rank_pattern": {}, "revision": None, "target_modules": ["out", "proj"],
    "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": False,
}


class EMA:
    """An object registered with accelerator.register_for_checkpointing (needs state_dict/load_state_dict)."""

    def __init__(self, model, decay=0.99):
        self.decay, self.num_updates = decay, 0
        self.shadow = {k: v.detach().clone() for k, v in model.named_parameters()}

    def update(self, model):
        self.num_updates += 1
        for k, v in model.named_parameters():
            self.shadow[k].mul_(self.decay).add_(v.detach(), alpha=1 - self.decay)

    def state_dict(self):
        return {"decay": self.decay, "num_updates": self.num_updates, "shadow": self.shadow}


def write_accelerate(path, safe):
    """accelerate.checkpointing.save_accelerator_state + save_custom_state after 10 steps."""
    os.makedirs(path, exist_ok=True)
    seed_all()
    model = Tiny()
    ema = EMA(model)
    decay, no_decay = decay_split(model)
    params = dict(model.named_parameters())
    opt = torch.optim.AdamW([{"params": [params[n] for n in decay], "weight_decay": 0.01},
                             {"params": [params[n] for n in no_decay], "weight_decay": 0.0}], lr=5e-3)
    sched = make_scheduler(opt)
    for _ in range(10):
        ids, targets = batch(4)
        loss_of(model, ids, targets).backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        ema.update(model)
    state = {k: v.detach() for k, v in model.state_dict().items()}
    if safe:
        save_safetensors(without_shared(state), os.path.join(path, "model.safetensors"), {"format": "pt"})
    else:
        torch.save(state, os.path.join(path, "pytorch_model.bin"))
    torch.save(opt.state_dict(), os.path.join(path, "optimizer.bin"))
    torch.save(sched.state_dict(), os.path.join(path, "scheduler.bin"))
    torch.save(dict(SCALER_STATE), os.path.join(path, "scaler.pt"))
    torch.save({"step": 10, "random_state": random.getstate(), "numpy_random_seed": np.random.get_state(),
                "torch_manual_seed": torch.get_rng_state()}, os.path.join(path, "random_states_0.pkl"))
    torch.save(ema.state_dict(), os.path.join(path, "custom_checkpoint_0.pkl"))


# ----------------------------------------------------------------------------------------------------------
# DeepSpeed ZeRO: data-parallel training over 2 ranks, each rank's AdamW holding its flat fp32 partition.
# ----------------------------------------------------------------------------------------------------------
def ds_checkpoint(path, stage, bf16, stubs, tag="global_step10"):
    zcfg = stubs["deepspeed.runtime.zero.config"]
    scaler_mod = stubs["deepspeed.runtime.fp16.loss_scaler"]
    frag = stubs["deepspeed.utils.tensor_fragment"].fragment_address
    seed_all()
    model = Tiny()
    params = dict(model.named_parameters())
    group_names = list(decay_split(model))          # bit16_groups: HF's two optimizer param groups
    wd = [0.01, 0.0]
    numel = {n: params[n].numel() for n in params}

    # partition layout
    layout = []   # per group: stage 2: (padded_total, partition_size); stage 3: {name: (offset, part_numel)}
    parts = [[None] * len(group_names) for _ in range(WORLD)]
    for g, names in enumerate(group_names):
        if stage == 2:
            total = sum(numel[n] for n in names)
            padded = math.ceil(total / (2 * WORLD)) * (2 * WORLD)   # nccl_start_alignment_factor * dp
            flat = torch.cat([params[n].detach().reshape(-1) for n in names] + [torch.zeros(padded - total)])
            size = padded // WORLD
            layout.append((total, size))
            for r in range(WORLD):
                parts[r][g] = flat.narrow(0, r * size, size).clone().float().detach().requires_grad_(True)
        else:
            offsets, off = {}, 0
            for n in names:
                pn = math.ceil(numel[n] / WORLD)
                offsets[n] = (off, pn)
                off += pn
            layout.append(offsets)
            for r in range(WORLD):
                chunks = []
                for n in names:
                    pn = offsets[n][1]
                    full = torch.cat([params[n].detach().reshape(-1), torch.zeros(pn * WORLD - numel[n])])
                    chunks.append(full.narrow(0, r * pn, pn))
                parts[r][g] = torch.cat(chunks).clone().float().detach().requires_grad_(True)

    def gather(parts_by_rank, g, names):
        out = {}
        if stage == 2:
            full = torch.cat([parts_by_rank[r][g].detach() for r in range(WORLD)])
            off = 0
            for n in names:
                out[n] = full.narrow(0, off, numel[n]).view(params[n].shape).clone()
                off += numel[n]
        else:
            for n in names:
                o, pn = layout[g][n]
                full = torch.cat([parts_by_rank[r][g].detach().narrow(0, o, pn) for r in range(WORLD)])
                out[n] = full.narrow(0, 0, numel[n]).view(params[n].shape).clone()
        return out

    def scatter(grads, g, names, r):
        if stage == 2:
            total, size = layout[g]
            flat = torch.cat([grads[n].reshape(-1) for n in names] + [torch.zeros(size * WORLD - total)])
            return flat.narrow(0, r * size, size).clone()
        chunks = []
        for n in names:
            o, pn = layout[g][n]
            full = torch.cat([grads[n].reshape(-1), torch.zeros(pn * WORLD - numel[n])])
            chunks.append(full.narrow(0, r * pn, pn))
        return torch.cat(chunks)

    opts = [torch.optim.AdamW([{"params": [parts[r][g]], "weight_decay": wd[g]} for g in range(len(group_names))],
                              lr=5e-3, eps=1e-8) for r in range(WORLD)]
    scheds = [make_scheduler(o) for o in opts]
    for _ in range(10):
        master = {}
        for g, names in enumerate(group_names):
            master.update(gather(parts, g, names))
        with torch.no_grad():
            for n, p in params.items():        # the bit16 working copy the forward pass runs on
                p.copy_(master[n].bfloat16().float() if bf16 else master[n])
        ids, targets = batch(4 * WORLD)            # every rank's micro-batch; DP averages the gradients
        loss_of(model, ids, targets).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # gradient_clipping 1.0
        grads = {n: p.grad.detach().clone() for n, p in params.items()}
        model.zero_grad()
        for r in range(WORLD):
            for g, names in enumerate(group_names):
                parts[r][g].grad = scatter(grads, g, names, r)
            opts[r].step()
            scheds[r].step()
            opts[r].zero_grad()
    master = {}
    for g, names in enumerate(group_names):
        master.update(gather(parts, g, names))
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(master[n])
    if bf16:
        model = model.bfloat16()                    # floating parameters only; position_ids stays int64

    ds_config = {"train_batch_size": 4 * WORLD, "train_micro_batch_size_per_gpu": 4,
                 "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
                 "zero_optimization": {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
                                       "reduce_scatter": True, "allgather_partitions": True},
                 "bf16": {"enabled": bf16}, "fp16": {"enabled": False},
                 "zero_allow_untested_optimizer": True}
    param_shapes = [OrderedDict((n, params[n].shape) for n in names) for names in group_names]
    ckpt = os.path.join(path, tag)
    os.makedirs(ckpt, exist_ok=True)
    with open(os.path.join(path, "latest"), "w") as f:
        f.write(tag)

    def model_states(module_sd, shared):
        return dict(module=module_sd, buffer_names=["position_ids"], optimizer=None, param_shapes=param_shapes,
                    frozen_param_shapes=OrderedDict(), shared_params=shared,
                    frozen_param_fragments=OrderedDict(), lr_scheduler=scheds[0].state_dict(),
                    data_sampler=None, random_ltd=None, sparse_tensor_module_names=set(), skipped_steps=0,
                    global_steps=10, global_samples=10 * 4 * WORLD, dp_world_size=WORLD, mp_world_size=1,
                    ds_config=ds_config, ds_version=DS_VERSION)

    if stage == 2:
        torch.save(model_states(model.state_dict(), {"head.weight": "embed.weight"}),
                   os.path.join(ckpt, "mp_rank_00_model_states.pt"))
        for r in range(WORLD):
            paddings, mappings, lean = [], [], []
            for g, names in enumerate(group_names):
                total, size = layout[g]
                left = r * size
                pad = size if total <= left else (left + size - total if total < left + size else 0)
                paddings.append(pad)
                lean.append(parts[r][g][:size - pad])        # _get_groups_without_padding: a view
                mapping, off = OrderedDict(), 0
                for n in names:                               # _init_lp_to_hp_mapping / get_hp_fragment_mapping
                    lo, hi = max(off, left), min(off + numel[n], left + size)
                    if lo < hi:
                        mapping[n] = frag(numel=hi - lo, start=lo - left)
                    off += numel[n]
                mappings.append(mapping)
            osd = {"loss_scaler": scaler_mod.LossScaler(scale=1.0), "dynamic_loss_scale": False,
                   "overflow": False, "clip_grad": 1.0, "base_optimizer_state": opts[r].state_dict(),
                   "single_partition_of_fp32_groups": lean, "zero_stage": zcfg.ZeroStageEnum.gradients,
                   "group_paddings": paddings, "partition_count": [WORLD] * len(group_names),
                   "ds_version": DS_VERSION, "param_slice_mappings": mappings}
            prefix = "bf16_" if bf16 else ""
            torch.save({"optimizer_state_dict": osd, "ds_config": ds_config, "ds_version": DS_VERSION},
                       os.path.join(ckpt, f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
    else:
        for n, p in model.named_parameters():
            p.data = torch.empty(0, dtype=p.dtype)               # free_param: the partitioned placeholder
        for r in range(WORLD):
            shared = {"head.weight": "embed.weight"} if r == 0 else {}   # _get_shared_params runs on rank 0
            torch.save(model_states(model.state_dict(), shared),
                       os.path.join(ckpt, f"zero_pp_rank_{r}_mp_rank_00_model_states.pt"))
            osd = {"zero_stage": zcfg.ZeroStageEnum.weights, "loss_scaler": scaler_mod.LossScaler(scale=1.0),
                   "dynamic_loss_scale": False, "overflow": False, "partition_count": WORLD,
                   "optimizer_state_dict": opts[r].state_dict(), "fp32_flat_groups": list(parts[r])}
            prefix = "bf16_" if bf16 else ""
            torch.save({"optimizer_state_dict": osd, "ds_config": ds_config, "ds_version": DS_VERSION},
                       os.path.join(ckpt, f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
    return master


# ----------------------------------------------------------------------------------------------------------
# The Trainer and save_state under an engine: DeepSpeed's `latest` + tag folder, or FSDP's DCP folders,
# inside their own folder.
# ----------------------------------------------------------------------------------------------------------
ZERO_TO_FP32_STUB = ("#!/usr/bin/env python\n"
                     "# DeepSpeed copies its utils/zero_to_fp32.py beside `latest` at every save_checkpoint.\n")


def rng_file(path, rank):
    """_save_rng_state: rng_state_<process_index>.pth when world_size > 1, seeded per rank."""
    random.seed(SEED + rank)
    np.random.seed(SEED + rank)
    torch.manual_seed(SEED + rank)
    py, npy, cpu = rng_states()
    torch.save({"python": py, "numpy": npy, "cpu": cpu}, os.path.join(path, f"rng_state_{rank}.pth"))


def write_hf_under_deepspeed(path, log_history, stubs):
    """Trainer._save_checkpoint with --deepspeed (ZeRO-2, 2 processes): save_model writes the gathered
    weights (model.safetensors); _save_optimizer_and_scheduler calls model_wrapped.save_checkpoint(output_dir),
    which writes latest, global_step10/ and zero_to_fp32.py; scheduler.pt for the Trainer's own scheduler
    (not a DeepSpeedSchedulerWrapper); rng_state_<r>.pth per process. Resume: deepspeed_load_checkpoint
    reads the tag, scheduler.pt and the RNG files."""
    ds_checkpoint(path, 2, False, stubs)
    states = torch.load(os.path.join(path, "global_step10", "mp_rank_00_model_states.pt"))
    with open(os.path.join(path, "zero_to_fp32.py"), "w") as f:
        f.write(ZERO_TO_FP32_STUB)
    json_file(os.path.join(path, "config.json"), MODEL_CONFIG, indent=2, sort_keys=True)
    save_safetensors(without_shared(states["module"]), os.path.join(path, "model.safetensors"), {"format": "pt"})
    torch.save(training_args(stubs, deepspeed="ds_config.json"), os.path.join(path, "training_args.bin"))
    torch.save(states["lr_scheduler"], os.path.join(path, "scheduler.pt"))
    for r in range(WORLD):
        rng_file(path, r)
    with open(os.path.join(path, "trainer_state.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(trainer_state(10, log_history), indent=2, sort_keys=True) + "\n")


def dcp_flatten(prefix, obj, out):
    """DCP's flatten_state_dict (2.x): nested dicts to dotted names; a tensor, or a list or value holding
    none, is one item."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            dcp_flatten(f"{prefix}.{k}", v, out)
    else:
        out[prefix] = obj
    return out


def write_hf_under_fsdp(path, snap, stubs):
    """Trainer._save_checkpoint with FSDP SHARDED_STATE_DICT: save_fsdp_model writes the DCP folder
    pytorch_model_fsdp_0/ ({"model": state_dict}), save_fsdp_optimizer optimizer_0/ ({"optimizer":
    FSDP.optim_state_dict}, keyed by parameter name); scheduler.pt, rng_state_<r>.pth, trainer_state.json.
    Written by torch 1.13's DCP (no_dist), so .metadata names torch.distributed._shard.checkpoint's classes
    where torch >= 2.0 names torch.distributed.checkpoint's; the folder layout and item names are FSDP's."""
    from make_pytorch_fixtures import import_dcp_113
    FileSystemWriter, save_state_dict = import_dcp_113()
    os.makedirs(path, exist_ok=True)
    json_file(os.path.join(path, "config.json"), MODEL_CONFIG, indent=2, sort_keys=True)
    model_sd = {k: v for k, v in snap["model"].items()}
    save_state_dict(dcp_flatten("model", model_sd, {}), FileSystemWriter(os.path.join(path, "pytorch_model_fsdp_0")),
                    no_dist=True)
    osd = snap["optimizer"]
    decay, no_decay = decay_split(Tiny())
    order = list(decay) + list(no_decay)            # the optimizer's param ids follow its groups
    named = {"state": {order[i]: dict(st) for i, st in osd["state"].items()},
             "param_groups": [dict(g, params=[order[i] for i in g["params"]]) for g in osd["param_groups"]]}
    save_state_dict(dcp_flatten("optimizer", named, {}), FileSystemWriter(os.path.join(path, "optimizer_0")),
                    no_dist=True)
    torch.save(training_args(stubs), os.path.join(path, "training_args.bin"))
    torch.save(snap["scheduler"], os.path.join(path, "scheduler.pt"))
    for r in range(WORLD):
        rng_file(path, r)
    with open(os.path.join(path, "trainer_state.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(trainer_state(10, snap["log_history"]), indent=2, sort_keys=True) + "\n")


def write_accelerate_under_deepspeed(path, stubs):
    """Accelerator.save_state under DeepSpeed ZeRO-2, 2 processes: model.save_checkpoint(output_dir,
    "pytorch_model") writes latest ("pytorch_model") and pytorch_model/; no optimizer file (DeepSpeed
    holds it); scheduler.bin, random_states_<r>.pkl. Resume: load_state -> model.load_checkpoint(input_dir,
    "pytorch_model")."""
    ds_checkpoint(path, 2, False, stubs, tag="pytorch_model")
    states = torch.load(os.path.join(path, "pytorch_model", "mp_rank_00_model_states.pt"))
    with open(os.path.join(path, "zero_to_fp32.py"), "w") as f:
        f.write(ZERO_TO_FP32_STUB)
    torch.save(states["lr_scheduler"], os.path.join(path, "scheduler.bin"))
    for r in range(WORLD):
        random.seed(SEED + r)
        np.random.seed(SEED + r)
        torch.manual_seed(SEED + r)
        torch.save({"step": 10, "random_state": random.getstate(), "numpy_random_seed": np.random.get_state(),
                    "torch_manual_seed": torch.get_rng_state()}, os.path.join(path, f"random_states_{r}.pkl"))


def natural_keys(text):
    import re
    return [int(c) if c.isdigit() else c for c in re.split(r"(\d+)", text)]


def zero_to_fp32(path):
    """deepspeed/utils/zero_to_fp32.py's algorithm, reimplemented: read `latest`, the *_optim_states.pt
    files in natural order, rank 0's model states; rebuild fp32 parameters, buffers (as float) and shared."""
    with open(os.path.join(path, "latest")) as f:
        ckpt = os.path.join(path, f.read().strip())
    optim = sorted((n for n in os.listdir(ckpt) if n.endswith("_optim_states.pt")), key=natural_keys)
    sds = [torch.load(os.path.join(ckpt, n), map_location="cpu")["optimizer_state_dict"] for n in optim]
    stage, world = sds[0]["zero_stage"], sds[0]["partition_count"]
    world = max(world) if isinstance(world, list) else world
    assert world == len(sds)
    model_file = "mp_rank_00_model_states.pt" if stage <= 2 else "zero_pp_rank_0_mp_rank_00_model_states.pt"
    ms = torch.load(os.path.join(ckpt, model_file), map_location="cpu")
    state = OrderedDict((k, v.float()) for k, v in ms["module"].items() if k in ms["buffer_names"])
    if stage <= 2:
        groups = [sd["single_partition_of_fp32_groups"] for sd in sds]
        for g, shapes in enumerate(ms["param_shapes"]):
            full = torch.cat([groups[r][g] for r in range(world)], 0)
            offset = 0
            for name, shape in shapes.items():
                state[name] = full.narrow(0, offset, shape.numel()).view(shape)
                offset += shape.numel()
            align = 2 * world
            assert align * math.ceil(offset / align) == align * math.ceil(full.numel() / align)
    else:
        flats = [torch.cat(sd["fp32_flat_groups"], 0) for sd in sds]
        shapes = {k: v for d in ms["param_shapes"] for k, v in d.items()}
        offset = 0
        for name, shape in shapes.items():
            pn = math.ceil(shape.numel() / world)
            state[name] = torch.cat([flats[r].narrow(0, offset, pn) for r in range(world)], 0) \
                .narrow(0, 0, shape.numel()).view(shape)
            offset += pn
        assert offset * world == flats[0].numel() * world
    for k, v in ms["shared_params"].items():
        if v in state:
            state[k] = state[v]
    return state


# ----------------------------------------------------------------------------------------------------------
# Keras 3 .keras archives.
# ----------------------------------------------------------------------------------------------------------
def keras_obj(module, class_name, config, build=None):
    d = {"module": module, "class_name": class_name, "config": config, "registered_name": None}
    if build is not None:
        d["build_config"] = {"input_shape": build}
    return d


POLICY = keras_obj("keras", "DTypePolicy", {"name": "float32"})


def dense(name, units, activation, build):
    return keras_obj("keras.layers", "Dense", {
        "name": name, "trainable": True, "dtype": POLICY, "units": units, "activation": activation,
        "use_bias": True,
        "kernel_initializer": keras_obj("keras.initializers", "GlorotUniform", {"seed": None}),
        "bias_initializer": keras_obj("keras.initializers", "Zeros", {}),
        "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None,
        "kernel_constraint": None, "bias_constraint": None}, build)


def lambda_function():
    """keras.src.utils.python_utils.func_dump of `lambda x: x * 2.0`: base64 of the marshalled code object."""
    fn = eval(compile("lambda x: x * 2.0", "<keras-fixture>", "eval"))
    return codecs.encode(marshal.dumps(fn.__code__), "base64").decode("ascii")


def keras_config(with_lambda):
    layers = [keras_obj("keras.layers", "InputLayer", {"batch_shape": [None, 4], "dtype": "float32",
                                                       "sparse": False, "name": "input_layer"}),
              dense("dense", 3, "relu", [None, 4])]
    if with_lambda:
        layers.append(keras_obj("keras.layers", "Lambda", {
            "name": "lambda", "trainable": True, "dtype": POLICY,
            "function": {"class_name": "__lambda__",
                         "config": {"code": lambda_function(), "defaults": None, "closure": None}},
            "arguments": {}}, [None, 3]))
    layers.append(dense("dense_1", 2, "linear", [None, 3]))
    return keras_obj("keras", "Sequential", {"name": "sequential", "trainable": True, "dtype": POLICY,
                                             "layers": layers, "build_input_shape": [None, 4]}, [None, 4])


def keras_weights():
    import h5py
    rs = np.random.RandomState(SEED)
    weights = {"layers/dense/vars/0": rs.uniform(-0.9, 0.9, (4, 3)).astype(np.float32),
               "layers/dense/vars/1": np.zeros(3, np.float32),
               "layers/dense_1/vars/0": rs.uniform(-1.0, 1.0, (3, 2)).astype(np.float32),
               "layers/dense_1/vars/1": np.zeros(2, np.float32)}
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:                # H5IOStore: "vars" for the model itself, then each layer
        f.create_group("vars")
        for name, value in weights.items():
            f.create_dataset(name, data=value)
    return buf.getvalue(), weights


class fixed_zip_time:
    """zipfile stamps a member opened by name (ZipFile.open(name, "w"), as Keras's saving_lib and numpy's
    savez do) with the clock; the fixtures must come out byte for byte the same on every run."""
    def __enter__(self):
        self.saved = zipfile.time
        zipfile.time = types.SimpleNamespace(time=lambda: 0.0,
                                             localtime=lambda *_: (*ZIP_TIME, 0, 1, -1))

    def __exit__(self, *_):
        zipfile.time = self.saved


def keras_npz_contents(as_keras_writes):
    """NpzIOStore's `contents`: one entry per saveable's inner path. Keras's own writer (make() returns a
    dict that save_own_variables fills with "0", "1", ...) hands np.savez a dict per path, which numpy
    stores as a 0-d object array: a pickle (of numpy.core.multiarray._reconstruct, numpy.ndarray,
    numpy.dtype). That is `as_keras_writes`. Keras 3.9+ loads with allow_pickle=False and so cannot load
    its own npz of a model with weights; 3.0-3.8 loaded with allow_pickle=True and ran the pickle. The
    other form holds each variable as a plain array under the name the .h5 gives it
    (layers/<name>/vars/<i>): an .npz that np.load(allow_pickle=False) reads, as Keras's own
    test_npz_io_store_loads_normal_array writes one."""
    _, weights = keras_weights()
    if not as_keras_writes:
        return weights
    contents = {"__root__": {}}                   # make(""): the Sequential's own (no) variables
    for name, value in weights.items():
        layer, _, index = name.rpartition("/vars/")
        contents.setdefault(layer, {})[index] = value
    return contents


def write_keras_like_keras(path, weights_contents, compression=zipfile.ZIP_STORED):
    """saving_lib._save_model_to_fileobj with weights_format="npz", call for call: ZipFile(f, "w") (Keras's
    default, ZIP_STORED), metadata.json and config.json through zf.open(name, "w"), then NpzIOStore.close():
    zf.open("model.weights.npz", "w", force_zip64=True) and np.savez into that stream (which is not seekable,
    so numpy's inner members get data descriptors). `compression` other than stored is what a zip tool that
    recompresses the archive gives; Keras never writes it."""
    meta = json.dumps({"keras_version": "3.9.0", "date_saved": "2025-04-01@12:00:00"}).encode()
    config = json.dumps(keras_config(False)).encode()
    with fixed_zip_time(), zipfile.ZipFile(path, "w", compression) as zf:
        with zf.open("metadata.json", "w") as f:
            f.write(meta)
        with zf.open("config.json", "w") as f:
            f.write(config)
        with zf.open("model.weights.npz", "w", force_zip64=True) as f:
            np.savez(f, **weights_contents)


def write_keras(path, members, compression=zipfile.ZIP_STORED):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "Duplicate name: 'config.json'" is the point of one fixture
        with zipfile.ZipFile(path, "w") as zf:   # keras writes with ZipFile's default, ZIP_STORED
            for name, data in members:
                info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
                info.external_attr = 0o600 << 16
                info.compress_type = compression
                zf.writestr(info, data)


# ----------------------------------------------------------------------------------------------------------
# Describing what was written.
# ----------------------------------------------------------------------------------------------------------
def pickle_globals(path):
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    names, strings = [], []
    for op, arg, _ in pickletools.genops(pkl):
        if op.name == "GLOBAL":
            names.append(arg.replace(" ", "."))
        elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL":
            names.append(".".join(strings[-2:]))
    return sorted(set(names))


def steps_of(name, obj):
    steps = {}
    if isinstance(obj, dict):
        if "last_epoch" in obj:
            steps["scheduler.last_epoch"] = obj["last_epoch"]
            steps["scheduler._step_count"] = obj["_step_count"]
        if "state" in obj and "param_groups" in obj:
            steps["optimizer.state.step"] = sorted({int(s["step"]) for s in obj["state"].values()})
        if "global_steps" in obj:
            steps["global_steps"] = obj["global_steps"]
            steps["global_samples"] = obj["global_samples"]
            steps["skipped_steps"] = obj["skipped_steps"]
            steps.update({f"lr_scheduler.{k}": v for k, v in steps_of(name, obj["lr_scheduler"]).items()})
        if "optimizer_state_dict" in obj and isinstance(obj["optimizer_state_dict"], dict):
            osd = obj["optimizer_state_dict"]
            inner = osd.get("base_optimizer_state", osd.get("optimizer_state_dict"))
            steps.update({f"base_optimizer.{k}": v for k, v in steps_of(name, inner).items()})
            steps["zero_stage"] = int(osd["zero_stage"])
        if "step" in obj and "random_state" in obj:
            steps["step"] = obj["step"]
        if "num_updates" in obj:
            steps["num_updates"] = obj["num_updates"]
    return steps


def describe_file(path):
    name = os.path.basename(path)
    if name.endswith(".safetensors"):
        return read_safetensors(path)
    if name == "trainer_state.json":
        with open(path) as f:
            st = json.load(f)
        return {"steps": {"global_step": st["global_step"], "epoch": st["epoch"],
                          "log_history.step": [e["step"] for e in st["log_history"]]}}
    if name.endswith(".py"):
        return {"script": True}
    if name == ".metadata" or name.endswith(".distcp"):
        return {"dcp": True}                        # described by the DCP reader's own fixtures
    if name == "latest":
        with open(path) as f:
            return {"text": f.read()}
    if name.endswith(".json"):
        return {}
    if zipfile.is_zipfile(path):
        obj = torch.load(path, map_location="cpu")     # weights_only=False (torch 1.13's default)
        d = {"tensors": describe(obj), "globals": pickle_globals(path)}
        steps = steps_of(name, obj)
        if steps:
            d["steps"] = steps
        return d
    raise RuntimeError(f"unexpected file {path}")


def describe_folder(root):
    files = {}
    for dirpath, _, names in sorted(os.walk(root)):
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            files[os.path.relpath(p, root)] = describe_file(p)
    return files


def describe_keras_npz(path):
    """Every member of model.weights.npz as Keras 3.9+ reads it (np.load(allow_pickle=False)): a numeric
    array's dtype, shape and sha256, or the error an object array (a pickle) raises."""
    with zipfile.ZipFile(path) as zf:
        members = [{"name": i.filename, "size": i.file_size, "compress_type": i.compress_type}
                   for i in zf.infolist()]
        npz = np.load(io.BytesIO(zf.read("model.weights.npz")), allow_pickle=False)
        arrays = {}
        for key in npz.files:
            try:
                a = npz[key]
                arrays[key] = {"dtype": str(a.dtype), "shape": list(a.shape),
                               "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
            except ValueError as e:                 # "Object arrays cannot be loaded when allow_pickle=False"
                arrays[key] = {"refused": str(e)}
    return {"members": members, "npz": arrays}


def describe_keras(path):
    import h5py
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        members = [{"name": i.filename, "size": i.file_size,
                    "sha256": hashlib.sha256(zf.open(i).read()).hexdigest()} for i in infos]
        config = json.loads(zf.read("config.json"))           # the last member of that name
        h5 = zf.read("model.weights.h5")
    layers = [l["class_name"] for l in config["config"]["layers"]]
    datasets = []
    with h5py.File(io.BytesIO(h5), "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                a = obj[()]
                datasets.append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape),
                                 "sha256": hashlib.sha256(a.tobytes()).hexdigest()})
        f.visititems(visit)
    return {"members": members, "config_read_by_keras": {"layers": layers,
                                                        "has_lambda": "__lambda__" in json.dumps(config)},
            "datasets": datasets}


RESUME = {
    "hf": ["Trainer.train(resume_from_checkpoint=...): get_last_checkpoint picks the highest checkpoint-<n>",
           "_load_from_checkpoint: config.json check; model.safetensors, else pytorch_model.bin "
           "(or the *.index.json shards); adapter_model.safetensors/.bin + adapter_config.json for PEFT",
           "TrainerState.load_from_json(trainer_state.json): global_step, epoch, stateful_callbacks",
           "_load_optimizer_and_scheduler: optimizer.pt (or optimizer.bin) and scheduler.pt, only when both exist;"
           " under DeepSpeed only scheduler.pt (when not a DeepSpeedSchedulerWrapper): deepspeed_load_checkpoint"
           " loads the rest",
           "_load_scaler: scaler.pt if present",
           "_load_rng_state: rng_state.pth (world_size 1) or rng_state_<process_index>.pth; keys python, numpy,"
           " cpu, cuda/xla/npu/hpu/mlu/musa; under safe_globals() (numpy _reconstruct, ndarray, dtype,"
           " UInt32DType) with torch >= 2.6"],
    "accelerate": ["load_accelerator_state: model.safetensors (load_model) else pytorch_model.bin; "
                   "optimizer.bin, scheduler.bin (suffix _<i> for the i-th > 0), sampler.bin, dl_state_dict.bin, "
                   "scaler.pt (if a scaler), random_states_<process_index>.pkl (step, random_state, "
                   "numpy_random_seed, torch_manual_seed, torch_cuda_manual_seed/...; failures only logged)",
                   "Accelerator.load_state: custom_checkpoint_<i>.pkl, count must match the registered objects; "
                   "load_custom_state uses weights_only=False"],
    "deepspeed": ["load_checkpoint(dir, tag=None): tag from `latest`",
                  "_load_checkpoint: mp_rank_00_model_states.pt (stage < 3) or zero_pp_rank_<dp>_mp_rank_00_"
                  "model_states.pt (stage 3): module, lr_scheduler, global_steps, global_samples, skipped_steps, "
                  "dp_world_size, mp_world_size; other keys returned as client_state",
                  "_load_zero_checkpoint: [bf16_]zero_pp_rank_<r>_mp_rank_00_optim_states.pt for r in "
                  "range(dp_world_size saved); the engine's bf16 mode tried first, then the other prefix; "
                  "dp world size must match"],
}


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    stubs = install_stubs()
    expected = {}

    model, snaps = train_hf()
    hf = os.path.join(OUT, "hf")
    write_hf_checkpoint(os.path.join(hf, "checkpoint-10"), snaps[10], 10, stubs, scaler=True)
    write_hf_checkpoint(os.path.join(hf, "checkpoint-10-bin"), snaps[10], 10, stubs, safetensors=False)
    write_hf_checkpoint(os.path.join(hf, "checkpoint-10-save-only-model"), snaps[10], 10, stubs,
                        save_only_model=True)
    write_hf_checkpoint(os.path.join(hf, "run", "checkpoint-5"), snaps[5], 5, stubs)
    write_hf_checkpoint(os.path.join(hf, "run", "checkpoint-10"), snaps[10], 10, stubs)
    lora_model, lora_snaps = train_hf(lora=True, save_at=(10,))
    write_hf_checkpoint(os.path.join(hf, "checkpoint-10-peft"), lora_snaps[10], 10, stubs,
                        peft=(lora_adapter(lora_model), ADAPTER_CONFIG))

    write_accelerate(os.path.join(OUT, "accelerate", "save_state"), safe=True)
    write_accelerate(os.path.join(OUT, "accelerate", "save_state_bin"), safe=False)

    write_hf_under_deepspeed(os.path.join(hf, "checkpoint-10-deepspeed"), snaps[10]["log_history"], stubs)
    write_hf_under_fsdp(os.path.join(hf, "checkpoint-10-fsdp"), snaps[10], stubs)
    write_accelerate_under_deepspeed(os.path.join(OUT, "accelerate", "save_state_deepspeed"), stubs)

    references = {}
    for name, stage, bf16 in (("zero2", 2, False), ("zero2_bf16", 2, True), ("zero3", 3, False)):
        path = os.path.join(OUT, "deepspeed", name)
        master = ds_checkpoint(path, stage, bf16, stubs)
        rebuilt = zero_to_fp32(path)
        for n, t in master.items():
            assert torch.equal(rebuilt[n], t), f"{name}: {n} does not rebuild"
        assert torch.equal(rebuilt["head.weight"], master["embed.weight"])
        references[f"deepspeed/{name}"] = {
            n: {"dtype": DTYPE[t.dtype], "shape": list(t.shape), "sha256": hashlib.sha256(raw(t)).hexdigest()}
            for n, t in rebuilt.items()}

    described = []                                  # a checkpoint folder is described whole, its subfolders with it
    for top in ("hf", "accelerate", "deepspeed"):
        for dirpath, dirnames, filenames in sorted(os.walk(os.path.join(OUT, top))):
            if any(dirpath.startswith(d + os.sep) for d in described):
                continue
            if filenames and not any(os.path.isfile(os.path.join(dirpath, d, "latest")) for d in dirnames):
                described.append(dirpath)
                rel = os.path.relpath(dirpath, OUT)
                if rel.startswith("deepspeed/") and rel.count("/") == 2:
                    continue                                # a tag folder: described with its parent
                expected[rel] = {"files": describe_folder(dirpath), "resume": RESUME[top]}
                if rel in references:
                    expected[rel]["reference_fp32"] = references[rel]

    h5, _ = keras_weights()
    meta = json.dumps({"keras_version": "3.6.0", "date_saved": "2024-10-01@12:00:00"}).encode()
    clean = json.dumps(keras_config(False)).encode()
    with_lambda = json.dumps(keras_config(True)).encode()
    kdir = os.path.join(OUT, "keras")
    os.makedirs(kdir)
    write_keras(os.path.join(kdir, "clean.keras"),
                [("metadata.json", meta), ("config.json", clean), ("model.weights.h5", h5)])
    write_keras(os.path.join(kdir, "lambda.keras"),
                [("metadata.json", meta), ("config.json", with_lambda), ("model.weights.h5", h5)])
    write_keras(os.path.join(kdir, "duplicate_config.keras"),
                [("metadata.json", meta), ("config.json", clean), ("model.weights.h5", h5),
                 ("config.json", with_lambda)])
    # The same archive recompressed by a zip tool (every member deflated), which Keras's zipfile reads.
    write_keras(os.path.join(kdir, "clean_deflated.keras"),
                [("metadata.json", meta), ("config.json", clean), ("model.weights.h5", h5)],
                compression=zipfile.ZIP_DEFLATED)
    write_keras_like_keras(os.path.join(kdir, "clean_npz.keras"), keras_npz_contents(False))
    write_keras_like_keras(os.path.join(kdir, "pickled_npz.keras"), keras_npz_contents(True))
    write_keras_like_keras(os.path.join(kdir, "clean_npz_deflated.keras"), keras_npz_contents(False),
                           compression=zipfile.ZIP_DEFLATED)
    for n in ("clean.keras", "lambda.keras", "duplicate_config.keras", "clean_deflated.keras"):
        expected[f"keras/{n}"] = describe_keras(os.path.join(kdir, n))
    for n in ("clean_npz.keras", "pickled_npz.keras", "clean_npz_deflated.keras"):
        expected[f"keras/{n}"] = describe_keras_npz(os.path.join(kdir, n))

    remove_stubs()
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
