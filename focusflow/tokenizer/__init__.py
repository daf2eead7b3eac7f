"""Target-language tokenizers: training (sentencepiece/tokenizers), canonical token forms, efficiency metrics."""

from focusflow.tokenizer.metrics import compare_tokenizers, tokenizer_metrics
from focusflow.tokenizer.training import VocabularySizeError, load_tokenizer, supported_vocab_size, train_tokenizer

__all__ = ["train_tokenizer", "tokenizer_metrics", "compare_tokenizers", "load_tokenizer", "VocabularySizeError",
           "supported_vocab_size"]
