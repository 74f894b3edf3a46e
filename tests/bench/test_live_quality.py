"""`bench.live_quality`'s tally: each side's word errors over the words said, once per turn."""

from __future__ import annotations

from bench.live_quality import VOICES, summary


def test_the_summary_counts_each_sides_errors_over_the_words_said() -> None:
    turns = [
        {"language": "en", "said": "Prices fell 2 percent.", "live": "Prices fell 2 per cent.",
         "batch": "Prices fell 2 percent."},
        {"language": "es", "said": "Los precios bajaron.", "live": "Los precios bajaron",
         "batch": "Los precios bajaron"},
    ]  # fmt: skip
    got = summary(turns)
    # "per cent" for "percent": one substitution and one insertion, over 4 + 3 words.
    assert got == {"same": 1, "count": 2, "live_wer": 2 / 7, "batch_wer": 0.0}


def test_every_language_has_a_voice_of_its_own() -> None:
    assert set(VOICES) == {"en", "es", "fr", "it", "pt"}
    assert all(key.endswith(f":{language}") or language == "en" for language, key in VOICES.items())
