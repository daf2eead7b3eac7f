"""MLM head on a frozen bare encoder: loads as BertForMaskedLM, encoder untouched, decoder tied, beats unigram."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from focusflow.evaluation.intrinsic import evaluate_mlm, unigram_counts, unigram_log_probs
from focusflow.models import MlmHeadSpec, describe_source
from focusflow.training.mlm_head import HeadParts, fit_head, prepare_source, train_mlm_head
from tests.tiny_models import sample_texts, train_tokenizer


def repeated_word_texts(n: int, seed: int) -> list[str]:
    """Each sentence repeats one word: context predicts a masked token, word frequencies do not."""
    rng = random.Random(seed)
    words = sorted({w.lower().strip(".,?!") for t in sample_texts(200) for w in t.split() if w.isalpha()})[:40]
    return [" ".join([rng.choice(words)] * rng.randint(6, 12)) for _ in range(n)]


@pytest.fixture(scope="module")
def bare_encoder(tmp_path_factory) -> Path:
    return save_bare_encoder(tmp_path_factory.mktemp("bare"))


def save_bare_encoder(folder: Path) -> Path:
    """A BERT encoder without an MLM head (as multilingual-e5 ships), saved to ``folder``."""
    from transformers import BertConfig, BertModel

    tokenizer = train_tokenizer("bert", sample_texts(300) + repeated_word_texts(200, 0), 300)
    torch.manual_seed(0)
    # a wide initialization lets one attention layer carry the neighbours' identity to a masked position
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, initializer_range=0.3,
                        pad_token_id=tokenizer.pad_token_id)
    encoder = BertModel(config, add_pooling_layer=False)
    encoder.config.architectures = ["BertModel"]
    encoder.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_head_loads_ties_and_beats_unigram(bare_encoder, tmp_path):
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    assert describe_source(bare_encoder).lm_loss is None
    train, heldout = repeated_word_texts(600, 1), repeated_word_texts(80, 2)
    spec = MlmHeadSpec(steps=300, positions_per_step=128, feature_sequences=256, seq_len=32, lr=1e-2)
    stats = train_mlm_head(bare_encoder, train, spec, tmp_path / "head")
    assert stats["valid_loss_best"] < stats["valid_loss_step0"] and stats["best_step"] > 0

    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "head")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "head")
    assert describe_source(tmp_path / "head").lm_loss == "mlm"
    source = AutoModel.from_pretrained(bare_encoder)
    source_state = source.state_dict()
    for name, value in model.bert.state_dict().items():
        torch.testing.assert_close(value, source_state[name], msg=name)  # encoder frozen, copied
    assert model.cls.predictions.decoder.weight.data_ptr() == model.bert.embeddings.word_embeddings.weight.data_ptr()

    unigram = unigram_log_probs(unigram_counts(tokenizer, train))
    result = evaluate_mlm(model, tokenizer, heldout, unigram=unigram)
    # measured: 3.24 vs unigram 3.66 nats (context predicts the repeated word; frequencies cannot)
    assert result["loss"] < result["unigram_loss"] - 0.25, result


def test_unigram_bias_start_equals_the_unigram_model(bare_encoder, tmp_path):
    train = sample_texts(300, seed=5)
    spec = MlmHeadSpec(steps=1, lr=1e-9, positions_per_step=16, feature_sequences=16, seq_len=32)
    train_mlm_head(bare_encoder, train, spec, tmp_path / "head0")
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "head0")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "head0")
    expected = unigram_log_probs(unigram_counts(tokenizer, train))
    np.testing.assert_allclose(model.cls.predictions.bias.detach().numpy(), expected, atol=1e-5)


def test_prepare_source_trains_a_head_only_for_bare_encoders(bare_encoder, tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(sample_texts(200)), encoding="utf-8")
    stats = prepare_source(str(bare_encoder), tmp_path / "with-head", head_train=corpus,
                           head_spec={"steps": 5, "feature_sequences": 16, "seq_len": 32, "positions_per_step": 32})
    assert stats["architecture"] == "BertForMaskedLM" and stats["mlm_head"]["steps"] == 5
    assert describe_source(tmp_path / "with-head").lm_loss == "mlm"
    copied = prepare_source(str(bare_encoder), tmp_path / "bare-copy")
    assert copied["lm_loss"] is None and (tmp_path / "bare-copy" / "model.safetensors").is_file()


def test_bf16_head_training_keeps_float32_weights_and_still_learns(bare_encoder, tmp_path):
    from transformers import AutoModelForMaskedLM

    train = repeated_word_texts(300, 1)
    spec = MlmHeadSpec(steps=60, positions_per_step=128, feature_sequences=128, seq_len=32, lr=1e-2, eval_every=20,
                       precision="bf16")
    stats = train_mlm_head(bare_encoder, train, spec, tmp_path / "head")
    assert stats["valid_loss_best"] < stats["valid_loss_step0"] and stats["spec"]["precision"] == "bf16"
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "head")
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_fit_head_computes_the_logits_under_the_given_precision():
    from transformers import BertConfig, BertForMaskedLM

    from focusflow.precision import resolve_precision

    head = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=32)).cls.predictions
    seen: list[torch.dtype] = []
    head.transform.dense.register_forward_hook(lambda module, args, output: seen.append(output.dtype))
    features, labels = torch.randn(64, 16), torch.randint(0, 50, (64,))
    fit_head(HeadParts(head.transform, head.transform.LayerNorm, head.bias), torch.randn(50, 16), features, labels,
             np.ones(50),
             MlmHeadSpec(steps=3, positions_per_step=8, eval_every=3), resolve_precision("bf16", "cpu"))
    assert seen and set(seen) == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in head.transform.parameters()) and head.bias.dtype == torch.float32


def _bare(family: str, folder: Path) -> Path:
    """A bare encoder of another family than BERT, without a head: XLM-R's (as multilingual-e5-base and -large ship)
    or DeBERTa-v2's (mDeBERTa-v3's released discriminator)."""
    from transformers import DebertaV2Config, DebertaV2Model, XLMRobertaConfig, XLMRobertaModel

    tokenizer = train_tokenizer("xlmr", sample_texts(300) + repeated_word_texts(200, 0), 300)
    torch.manual_seed(0)
    common = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=64, initializer_range=0.3, pad_token_id=tokenizer.pad_token_id)
    if family == "xlmr":
        encoder = XLMRobertaModel(XLMRobertaConfig(max_position_embeddings=70, **common))  # with its pooler
    else:
        encoder = DebertaV2Model(DebertaV2Config(max_position_embeddings=64, relative_attention=True,
                                                 position_buckets=16, pos_att_type=["p2c", "c2p"],
                                                 position_biased_input=False, type_vocab_size=0, legacy=False,
                                                 **common))
    encoder.config.architectures = [type(encoder).__name__]
    encoder.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize(("family", "architecture"), [("xlmr", "XLMRobertaForMaskedLM"),
                                                      ("deberta", "DebertaV2ForMaskedLM")])
def test_a_bare_encoder_of_another_family_gets_its_familys_head(family, architecture, tmp_path):
    """multilingual-e5-base is a bare XLM-R: its run stopped at the source stage ("supports BERT encoders")."""
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    bare = _bare(family, tmp_path / "bare")
    assert describe_source(bare).lm_loss is None
    train, heldout = repeated_word_texts(600, 1), repeated_word_texts(80, 2)
    spec = MlmHeadSpec(steps=200, positions_per_step=128, feature_sequences=256, seq_len=32, lr=1e-2)
    stats = train_mlm_head(bare, train, spec, tmp_path / "head")
    assert stats["valid_loss_best"] < stats["valid_loss_step0"]
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "head")
    assert type(model).__name__ == architecture and describe_source(tmp_path / "head").lm_loss == "mlm"
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    source_state = AutoModel.from_pretrained(bare).state_dict()
    for name, value in getattr(model, model.base_model_prefix).state_dict().items():
        torch.testing.assert_close(value, source_state[name], msg=name)  # the encoder frozen, copied whole
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "head")
    result = evaluate_mlm(model, tokenizer, heldout, unigram=unigram_log_probs(unigram_counts(tokenizer, train)))
    assert result["loss"] < result["unigram_loss"], "the saved head computes what was trained (not a fresh one)"
    untrained = train_mlm_head(bare, train, MlmHeadSpec(steps=1, lr=1e-9, positions_per_step=16, feature_sequences=16,
                                                        seq_len=32), tmp_path / "head0")
    assert untrained["steps"] == 1
    bias = AutoModelForMaskedLM.from_pretrained(tmp_path / "head0").get_output_embeddings().bias
    np.testing.assert_allclose(bias.detach().numpy(), unigram_log_probs(unigram_counts(tokenizer, train)), atol=1e-5,
                               err_msg="the trained bias is the saved decoder's bias")


def test_a_head_whose_parts_do_not_compute_the_models_logits_is_refused(monkeypatch, tmp_path):
    """The head's parts are found by their names; a family whose names match but whose head computes otherwise
    (another activation, an untied decoder) is refused rather than trained into a head that is not saved."""
    from transformers import AutoModel

    from focusflow.errors import InputError
    from focusflow.training import mlm_head

    bare = AutoModel.from_pretrained(_bare("xlmr", tmp_path / "bare"))
    real = mlm_head._head_parts
    monkeypatch.setattr(mlm_head, "_head_parts", lambda model: mlm_head.HeadParts(
        torch.nn.Sequential(*list(real(model).transform)[:1]), real(model).norm, real(model).bias))  # no GELU, no norm
    with pytest.raises(InputError, match="computes something else"):
        mlm_head.with_new_head(bare)
