"""The intelligibility measure the benchmark and the tests share (`bench.wer`)."""

from __future__ import annotations

from bench.wer import measure_name, units, word_error_rate, word_errors


def test_words_ignore_case_accents_and_punctuation() -> None:
    assert word_errors("¿Cómo está, señor?", "como esta senor") == (0, 3)
    assert word_error_rate("the cat sat", "the hat sat") == 1 / 3


def test_japanese_counts_the_characters_of_the_reading() -> None:
    assert measure_name("ja") == "CER"
    assert measure_name("en") == measure_name(None) == "WER"
    # Kanji or kana, the same word reads the same: no error.
    assert word_errors("隣の庭でトマトを育てる。", "となりの庭でとまとを育てる", "ja")[0] == 0
    # "ie" for "uchi" (家): the two readings' characters differ.
    reference = units("家に帰る", "ja")
    assert "".join(reference) == "イエニカエル"
    assert word_error_rate("家に帰る", "家に帰る", "ja") == 0
    assert word_error_rate("家に帰る", "うちに帰る", "ja") == 2 / len(reference)
