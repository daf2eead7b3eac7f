"""Print a digest of the weights that fine-tuning, the MLM head, LAPT and align train on tiny models, to show that
a change to the training code leaves every trained weight bit-identical::

    PYTHONPATH=/path/to/other/checkout python tests/training/weights_digest.py FIXTURES > before.txt
    PYTHONPATH=.                        python tests/training/weights_digest.py FIXTURES > after.txt
    diff before.txt after.txt          # identical

The tiny models are built once into the folder ``FIXTURES`` and reused: a tokenizer trained again in another
process may order tied merges differently (the tokenizers library's hash maps), which changes every weight.
One torch thread, fp32, fixed seeds; takes under a minute. Only APIs both versions share are used.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(1, str(ROOT))  # the tests package (tiny models); focusflow comes from PYTHONPATH


def digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name and bytes, in name order."""
    hasher = hashlib.sha256()
    for name in sorted(tensors):
        hasher.update(name.encode())
        hasher.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return hasher.hexdigest()[:16]


def folder_digest(folder: Path) -> str:
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(file))
    return digest(tensors)


def fine_tuning(model_dir: Path) -> str:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from focusflow.evaluation.downstream.finetune import FinetuneSpec, finetune
    from tests.tiny_models import sample_texts

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    texts = sample_texts(120, seed=5)
    features = [{"input_ids": tokenizer(text)["input_ids"][:32], "labels": int(len(text.split()) % 2)}
                for text in texts]
    dev = features[100:]

    def evaluate_dev() -> float:
        from focusflow.evaluation.downstream.finetune import collate_features

        with torch.no_grad():
            batch = collate_features(dev, tokenizer.pad_token_id)
            return -float(model(**batch).loss)

    spec = FinetuneSpec(lr=5e-3, epochs=2, batch_size=8, eval_every_fraction=0.2, precision="fp32")
    finetune(model, features[:100], evaluate_dev, spec, tokenizer.pad_token_id)
    return digest(model.state_dict())


def bare_encoder(folder: Path) -> Path:
    """A BERT body without its MLM head (what the source stage trains a head for)."""
    from transformers import BertConfig, BertModel

    from tests.tiny_models import sample_texts, train_tokenizer

    tokenizer = train_tokenizer("bert", sample_texts(300), 300)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id)
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def mlm_head(bare: Path, work: Path) -> str:
    from focusflow.config import MlmHeadSpec
    from focusflow.training import train_mlm_head
    from tests.tiny_models import sample_texts

    spec = MlmHeadSpec(steps=40, positions_per_step=64, feature_sequences=64, seq_len=32, lr=1e-2, eval_every=10)
    train_mlm_head(bare, sample_texts(200, seed=1), spec, work / "head")
    return folder_digest(work / "head")


def lapt(model_dir: Path, train: Path, heldout: Path, work: Path, **settings: object) -> str:
    from focusflow.config import LaptSpec
    from focusflow.training import run_lapt

    spec = LaptSpec(**{"objective": "mlm", "steps": 6, "batch_size": 4, "micro_batch_size": 2, "seq_len": 32,
                       "eval_every": 3, "checkpoint_every": 3, "eval_sequences": 8, "precision": "fp32", **settings})
    out = work / f"lapt-{len(list(work.glob('lapt-*')))}"
    run_lapt(model_dir, train, heldout, spec, out, resume=False, progress=False)
    return folder_digest(out / "final")


def distill(source_dir: Path, train: Path, heldout: Path, work: Path) -> str:
    """LAPT by distillation: a scrambled copy of the source learns the source's word states."""
    from focusflow.config import LaptSpec
    from focusflow.training import run_lapt
    from tests.training.test_align import scrambled_copy

    scrambled_copy(source_dir, work / "student")
    spec = LaptSpec(objective="distill", steps=6, batch_size=4, seq_len=32, eval_every=3, checkpoint_every=3,
                    eval_sequences=8, precision="fp32")
    run_lapt(work / "student", train, heldout, spec, work / "distill", resume=False, progress=False,
             source_dir=source_dir)
    return folder_digest(work / "distill" / "final")


def align(source_dir: Path, train: Path, work: Path, keep_best: bool) -> str:
    from focusflow.config import AlignSpec
    from focusflow.training import align_embeddings
    from tests.training.test_align import scrambled_copy

    scrambled_copy(source_dir, work / "init")
    spec = AlignSpec(steps=12, lr=1e-2, batch_tokens=512, eval_every=4, log_every=4, checkpoint_every=6,
                     precision="fp32", keep_best=keep_best)
    align_embeddings(work / "init", source_dir, train, work / f"align-{keep_best}", spec)
    return folder_digest(work / f"align-{keep_best}" / "final")


def fixtures(folder: Path) -> tuple[Path, Path, Path, Path]:
    """The tiny BERT, a bare encoder and a train/held-out split, built on the first call and reused after."""
    from focusflow.corpus.io import write_texts
    from tests.tiny_models import sample_texts, save_tiny

    if not (folder / "done").exists():
        folder.mkdir(parents=True, exist_ok=True)
        texts = sample_texts(300, seed=3)
        write_texts(folder / "train.jsonl", texts[:260])
        write_texts(folder / "heldout.jsonl", texts[260:])
        save_tiny("bert", folder / "bert", texts)
        bare_encoder(folder / "bare")
        (folder / "done").touch()
    return folder / "bert", folder / "bare", folder / "train.jsonl", folder / "heldout.jsonl"


def main() -> None:
    torch.set_num_threads(1)
    np.random.seed(0)
    bert, bare, train, heldout = fixtures(Path(sys.argv[1]))
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        print("fine-tuning", fine_tuning(bert))
        print("mlm-head", mlm_head(bare, work))
        print("lapt", lapt(bert, train, heldout, work))
        print("lapt-two-stage", lapt(bert, train, heldout, work, embeddings_only_fraction=0.5))
        print("distill", distill(bert, train, heldout, work))
        print("align", align(bert, train, work, keep_best=False))  # the trained rows
        print("align-keep-best", align(bert, train, work, keep_best=True))  # the state its selection keeps


if __name__ == "__main__":
    main()
