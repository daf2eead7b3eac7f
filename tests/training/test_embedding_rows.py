"""Training only the embedding rows the training texts use gives the model a dense gradient gives."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from focusflow.training.embedding_rows import TrainedRowsEmbedding, train_used_rows


def test_the_lookup_is_the_embedding_it_replaces_and_only_used_rows_train():
    torch.manual_seed(0)
    plain = torch.nn.Embedding(50, 8, padding_idx=0)
    rows = TrainedRowsEmbedding(plain, torch.tensor([3, 7, 7, 11]))
    ids = torch.tensor([[0, 3, 7, 20], [11, 49, 3, 0]])
    torch.testing.assert_close(rows(ids), plain(ids), rtol=0, atol=0)
    assert rows.weight.shape == (3, 8) and [name for name, _ in rows.named_parameters()] == ["weight"]
    rows(ids).sum().backward()
    assert rows.weight.grad is not None and rows.state_dict().keys() == {"weight"}



def test_every_table_lives_on_the_device_of_the_embedding_it_replaces():
    """A model already on a GPU: the lookups index tables on its device (the first GPU run found the slot table left
    on the CPU, and every GPU fine-tuning failed). The meta device stands in for a GPU here."""
    rows = TrainedRowsEmbedding(torch.nn.Embedding(50, 8).to("meta"), torch.tensor([3, 7, 11]))
    assert {name: tensor.device.type for name, tensor in [*rows.named_buffers(), *rows.named_parameters()]} == {
        "frozen": "meta", "slot": "meta", "trained_ids": "meta", "weight": "meta"}
    assert rows(torch.tensor([[3, 20]], device="meta")).device.type == "meta"

def _classifier(vocab: int) -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=3, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(config)


@pytest.mark.parametrize("embedding_lr_scale", [1.0, 3.0])
def test_finetuning_with_trained_rows_ends_where_a_dense_gradient_ends(monkeypatch, embedding_lr_scale):
    """Same steps, same best dev step, same weights (every row: trained, and untouched), to float tolerance."""
    import sys

    from focusflow.evaluation.downstream.finetune import FinetuneSpec, finetune

    finetune_module = sys.modules["focusflow.evaluation.downstream.finetune"]  # the package names its function so

    rng = np.random.default_rng(0)
    features = [{"input_ids": [1, *rng.integers(5, 120, size=int(rng.integers(4, 12))).tolist(), 2],
                 "labels": int(rng.integers(0, 3))} for _ in range(48)]
    spec = FinetuneSpec(lr=1e-3, epochs=2, batch_size=8, eval_every_fraction=0.25, seed=3,
                        embedding_lr_scale=embedding_lr_scale, precision="fp32")
    scores = iter(np.linspace(0.1, 0.9, 50).tolist() * 4)

    def run(model):
        return finetune(model, features, lambda: next(scores), spec, pad_id=0)

    dense_model, rows_model = _classifier(400), _classifier(400)
    initial = copy.deepcopy(rows_model.state_dict())
    used = []
    real = finetune_module.train_used_rows
    monkeypatch.setattr(finetune_module, "train_used_rows", lambda model, ids: used.append(1) or real(model, ids))
    rows_result = run(rows_model)
    scores = iter(np.linspace(0.1, 0.9, 50).tolist() * 4)
    monkeypatch.setattr(finetune_module, "train_used_rows", lambda model, ids: None)
    dense_result = run(dense_model)
    assert used == [1] and rows_result.best_step == dense_result.best_step
    assert isinstance(rows_model.get_input_embeddings(), torch.nn.Embedding), "a plain embedding again at the end"
    dense, trained = dense_model.state_dict(), rows_model.state_dict()
    assert dense.keys() == trained.keys()
    for name in dense:
        torch.testing.assert_close(trained[name], dense[name], rtol=1e-5, atol=1e-6, msg=name)
    embedding = "bert.embeddings.word_embeddings.weight"
    untouched = sorted(set(range(400)) - {i for f in features for i in f["input_ids"]})
    torch.testing.assert_close(trained[embedding][untouched], initial[embedding][untouched], rtol=0, atol=0)


def test_a_model_without_a_plain_embedding_is_left_as_it_is():
    class Toy(torch.nn.Module):
        pass

    assert train_used_rows(Toy(), [[1, 2]]) is None


def test_the_padding_row_stays_frozen_as_nn_embedding_keeps_it():
    model = _classifier(50)
    pad = model.get_input_embeddings().padding_idx
    rows = train_used_rows(model, [[pad, 3, 7], [pad, 9]])
    assert pad not in rows.trained_ids.tolist() and rows.trained_ids.tolist() == [3, 7, 9]
