"""Words of any script: a language written without spaces (Thai, Khmer, Chinese, Japanese) has words too, so the
thresholds and rates counted in words (a document's, a held-out sentence's, a prompt's; tokens per word) hold."""

from __future__ import annotations

import pytest

from focusflow.languages import LETTERS_PER_WORD, word_count, word_spans, words

THAI = "วันนี้อากาศดีมากครับเราจะไปโรงเรียนกัน"
CHINESE = "我们今天去北京大学看书。"
KHMER = "ខ្ញុំស្រឡាញ់ភាសាខ្មែរណាស់"


@pytest.mark.parametrize("text", ["Habari za asubuhi, rafiki!", "  two\tspaces  and\nlines ", "", "Ṣé dáadáa ni?"])
def test_text_written_with_spaces_keeps_its_whitespace_words(text):
    assert words(text) == text.split() and word_count(text) == len(text.split())


def test_an_ideographic_character_is_a_word_and_other_unspaced_letters_are_grouped():
    assert words(CHINESE) == [*"我们今天去北京大学看书", "。"]
    thai = words(THAI)
    assert "".join(thai) == THAI and 5 <= len(thai) <= len(THAI) // LETTERS_PER_WORD + 1
    khmer = words(KHMER)
    assert "".join(khmer) == KHMER and all(not ("\u17b4" <= unit[0] <= "\u17d3") for unit in khmer), \
        "a unit never starts with a combining sign: it stays with its letter"
    assert words(f"Bei 12 {CHINESE[:4]}OK") == ["Bei", "12", *CHINESE[:4], "OK"], "Latin and digits beside a run"


def test_spans_point_into_the_text():
    text = f"{THAI} {CHINESE}"
    assert [text[a:b] for a, b in word_spans(text)] == words(text) and word_count(text) == len(words(text))


def test_a_document_in_a_script_without_spaces_is_not_dropped_for_having_too_few_words():
    from focusflow.config import CleaningSpec
    from focusflow.corpus.cleaning import Cleaner

    cleaner = Cleaner(CleaningSpec())
    assert cleaner.clean(THAI) is not None and cleaner.clean(CHINESE * 2) is not None
    assert cleaner.clean("Ndiyo ndiyo, asante sana kwa chakula") is not None


def test_zero_width_spaces_mark_words_and_are_no_words_themselves():
    khmer = "ខ្ញុំ\u200bស្រឡាញ់\u200bភាសា\u200bខ្មែរ"
    assert words(khmer) == ["ខ្ញុំ", "ស្រឡាញ់", "ភាសា", "ខ្មែរ"] and word_count(khmer) == 4


def test_one_stray_zero_width_space_does_not_make_a_sentence_one_word():
    """Web text carries stray zero-width spaces: a Chinese sentence with one was one word (tokens per word 31, and
    cleaning's min_words dropped the document); a run longer than a word is counted in units still."""
    chinese = "我们今天在北京学习中文，明天去上海工作。他们喜欢吃饭和学习。"
    assert word_count(chinese + "\u200b") == word_count(chinese) == 30
    assert word_count("ខ្ញុំ\u200b" + chinese) == 1 + 30


def test_ethiopic_word_spaces_divide_words():
    """Amharic and Ge'ez text (Bibles, older print) divides words with ፡ instead of a space: a verse was one word
    (tokens per word ×5, and cleaning's min_words dropped it)."""
    verse = "በመጀመሪያ፡እግዚአብሔር፡ሰማይንና፡ምድርን፡ፈጠረ።"
    assert words(verse) == ["በመጀመሪያ", "እግዚአብሔር", "ሰማይንና", "ምድርን", "ፈጠረ።"] and word_count(verse) == 5
    assert word_count("ቃል ነበረ፡ ቃልም") == 3, "a word space beside a space is one boundary"


def test_tokenizer_metrics_count_the_same_words_as_word_count():
    from focusflow.tokenizer.metrics import _word_starts

    for text in ["በመጀመሪያ፡እግዚአብሔር፡ሰማይንና", "hello\u200bworld again", THAI, "two words"]:
        assert len(_word_starts(text)) == word_count(text), text
