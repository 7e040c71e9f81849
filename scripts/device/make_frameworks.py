#!/usr/bin/env python3
"""A Lightning 2.x ModelCheckpoint checkpoint and an HF Trainer checkpoint folder of tiny models built
from a config (no download), trained two steps on the GPU when there is one; next to each file what
torch (or safetensors) reads back: OUT/<name>.torch.json.

  make_frameworks.py lightning|hf OUT_DIR"""
import glob
import os
import pickletools
import shutil
import sys
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402


def pickle_globals(path):
    """The module.name globals a torch.save zip's pickle names (what a verify gate must judge)."""
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(pkl):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "GLOBAL":
            found.add(arg.replace(" ", "."))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.add(f"{strings[-2]}.{strings[-1]}")
    return sorted(found)


def read_back(path):
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        obj = load_file(path)
        return {"tensors": describe.describe({k: obj[k] for k in sorted(obj)}), "writer": "safetensors"}
    obj = torch.load(path, weights_only=False, map_location="cpu")  # our own file, written just now
    return {"tensors": describe.describe(obj), "writer": "torch.save", "globals": pickle_globals(path),
            "top_level_keys": sorted(map(str, obj)) if isinstance(obj, dict) else None}


def lightning(out):
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Tiny(L.LightningModule):
        def __init__(self, hidden=16, lr=1e-2):
            super().__init__()
            self.save_hyperparameters()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))

        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.9)}

    L.seed_everything(45)
    x = torch.randn(32, 8)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    ckpt = ModelCheckpoint(dirpath=os.path.join(out, "lightning"), filename="tiny-{step}", every_n_train_steps=2,
                           save_top_k=-1)
    trainer = L.Trainer(max_steps=2, accelerator="auto", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[ckpt], precision="bf16-mixed"
                        if torch.cuda.is_available() else "32-true")
    trainer.fit(Tiny(), data)
    files = sorted(glob.glob(os.path.join(out, "lightning", "*.ckpt")))
    dest = os.path.join(out, "lightning.ckpt")
    shutil.move(files[-1], dest)
    shutil.rmtree(os.path.join(out, "lightning"), ignore_errors=True)
    describe.write(dest + ".torch.json", dict(read_back(dest), file="lightning.ckpt", saved_as=os.path.basename(
        files[-1]), lightning=L.__version__))
    print(f"lightning {L.__version__}: {[os.path.basename(f) for f in files]} -> {dest}")


def hf(out):
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(45)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2))

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            ids = torch.arange(i, i + 16) % 64
            return {"input_ids": ids, "labels": ids}

    run = os.path.join(out, "hf_run")
    args = TrainingArguments(output_dir=run, max_steps=2, save_steps=2, per_device_train_batch_size=4,
                             report_to=[], logging_steps=1, seed=45, bf16=torch.cuda.is_available())
    Trainer(model=model, args=args, train_dataset=Tokens()).train()
    folder = os.path.join(run, "checkpoint-2")
    dest = os.path.join(out, "hf_checkpoint-2")
    shutil.move(folder, dest)
    shutil.rmtree(run, ignore_errors=True)
    names = sorted(os.listdir(dest))
    per_file = {}
    for n in names:
        p = os.path.join(dest, n)
        if n.endswith((".safetensors", ".pt", ".bin", ".pth")):
            try:
                per_file[n] = read_back(p)
            except Exception as e:  # recorded; the other files still get theirs
                per_file[n] = {"error": f"{type(e).__name__}: {e}"[:300]}
    # Beside the folder, not in it: the folder stays exactly what the Trainer wrote.
    describe.write(dest + ".torch.json", {"file": "hf_checkpoint-2", "files": per_file, "listing": names,
                                          "transformers": transformers.__version__})
    print(f"transformers {transformers.__version__}: {dest}: {names}")


if __name__ == "__main__":
    {"lightning": lightning, "hf": hf}[sys.argv[1]](sys.argv[2])
