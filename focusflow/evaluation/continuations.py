"""Greedy continuations of held-out prompts: what a person reads to judge a decoder, beside its numbers.

A loss says how surprised a model is; a few continuations say whether its text is the language. The
prompts are the first :data:`PROMPT_WORDS` words of the first :data:`N_PROMPTS` held-out sentences long
enough to leave text to continue, in the reference's (seeded) order, so every model of a run (the source
included, whose reference draws the same order) continues the same prompts. Decoding is greedy with a
fresh generation configuration (a model's own sampling defaults are ignored) and at most
:data:`NEW_TOKENS` new tokens, one prompt at a time (no padding): the same model gives the same text, and
three short generations cost seconds on a CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from focusflow.config import PrecisionName
from focusflow.languages import word_spans, words
from focusflow.precision import resolve_precision

N_PROMPTS = 3
PROMPT_WORDS = 6
NEW_TOKENS = 24
# a prompt's sentence has words left to compare with, and is short enough to fit every tokenizer's reference
_MIN_WORDS, _MAX_WORDS = PROMPT_WORDS + 3, 40


def repetition_rate(texts: Sequence[str], n: int = 2) -> float | None:
    """The share of word ``n``-grams of each text that repeat one seen earlier in the same text, over all texts
    (``1 − distinct / total``, "rep-n"): 0 for varied text, near 1 for a continuation that collapsed into one
    repeated word ("weqonga weqonga …"); None without any ``n``-gram."""
    total = repeated = 0
    for text in texts:
        units = words(str(text))  # a script written without spaces counts its own units (languages.word_spans)
        grams = [tuple(units[i:i + n]) for i in range(len(units) - n + 1)]
        total += len(grams)
        repeated += len(grams) - len(set(grams))
    return repeated / total if total else None


def held_out_prompts(sentences: Sequence[str], n: int = N_PROMPTS, words: int = PROMPT_WORDS) -> list[dict[str, str]]:
    """``{"prompt", "heldout"}`` for the first ``n`` usable sentences: their first ``words`` words, and the rest
    of the sentence (what the held-out text says next)."""
    prompts = []
    for sentence in sentences:
        spans = word_spans(sentence)  # the words of any script (a sentence of Thai or Chinese has no spaces)
        if _MIN_WORDS <= len(spans) <= _MAX_WORDS:
            prompts.append({"prompt": sentence[:spans[words - 1][1]].rstrip(),
                            "heldout": sentence[spans[words][0]:].strip()})
        if len(prompts) == n:
            break
    return prompts


@torch.no_grad()
def greedy_continuations(model, tokenizer, prompts: Sequence[dict[str, str]], *, new_tokens: int = NEW_TOKENS,
                         precision: PrecisionName = "auto") -> list[dict[str, str]]:
    """Each prompt with the model's greedy continuation (``continuation``: the text after the prompt)."""
    from transformers import GenerationConfig

    model.eval()
    device = next(model.parameters()).device
    autocast = resolve_precision(precision, device).autocast
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else model.config.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=new_tokens, eos_token_id=eos,
                              pad_token_id=pad, bos_token_id=tokenizer.bos_token_id)
    out = []
    for item in prompts:
        encoded = tokenizer(item["prompt"], return_tensors="pt")
        with autocast():
            generated = model.generate(input_ids=encoded["input_ids"].to(device),
                                       attention_mask=encoded["attention_mask"].to(device), generation_config=config)
        out.append({**item, "continuation": _text_after(tokenizer, encoded["input_ids"][0].tolist(),
                                                        generated[0].tolist())})
    return out


def _text_after(tokenizer, prompt_ids: list[int], ids: list[int]) -> str:
    """The decoded text the new tokens add: the whole decoded sequence less the decoded prompt (decoders that
    strip a leading space would lose it decoding the new tokens alone)."""
    prompt = tokenizer.decode(prompt_ids, skip_special_tokens=True)
    whole = tokenizer.decode(ids, skip_special_tokens=True)
    if whole.startswith(prompt):
        return whole[len(prompt):]
    return tokenizer.decode(ids[len(prompt_ids):], skip_special_tokens=True)
