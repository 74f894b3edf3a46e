"""The benchmark's view of what users hear (`bench.tts_quality`) runs and yields sane figures.

One English sentence through the default voice, eSpeak and a clone: seconds of audio, so the
test stays short. The engines load with a fixed seed and Whisper decodes greedily, so the
figures repeat from run to run; the bounds are loose enough for any sound engine.
"""

from __future__ import annotations

from pathlib import Path

from bench import tts_quality
from voice_service.engines.protocols import EngineVoice


def test_quick_english_run_reports_intelligible_natural_speech_and_its_cost(
    tmp_path: Path,
) -> None:
    figures = tts_quality.run(True, languages=("en",), data_dir=tmp_path)

    [english] = figures["languages"]
    assert english["language"] == "en"
    assert english["default"]["voice_key"].startswith("piper:")
    assert english["espeak"]["voice_key"].startswith("espeak:")
    assert english["default"]["wer"] <= 0.2
    assert english["previous_wer"] is None
    # The held-out set's first sentence, spoken and heard on its own by the same voice.
    assert english["heldout"]["voice_key"] == english["default"]["voice_key"]
    assert 0 <= english["heldout"]["wer"] <= 0.2
    assert figures["clone"]["wer"] <= 0.2
    for spoken in (english["default"], english["espeak"], figures["clone"]):
        assert 0 <= spoken["wer"] <= 1
        assert 1 < spoken["audio_seconds"] < 10
        assert set(spoken["dnsmos"]) == {"ovrl", "sig", "bak"}
        assert all(1 <= score <= 5 for score in spoken["dnsmos"].values())
    costs = figures["cpu_per_audio_second"]
    assert set(costs) == {"piper", "espeak", "world", "whisper_en"}
    assert all(cost > 0 for cost in costs.values())


def test_default_voice_is_the_first_the_catalogue_lists_for_the_language() -> None:
    voices = [
        EngineVoice("espeak:es", "eSpeak Spanish", "es"),
        EngineVoice("kokoro:jm_kumo:es", "Kokoro Kumo (Spanish)", "es"),
        EngineVoice("kokoro:jf_gongitsune:es", "Kokoro Gongitsune (Spanish)", "es"),
        EngineVoice("espeak:pt-br", "eSpeak Portuguese (Brazil)", "pt-BR"),
        EngineVoice("espeak:pt", "eSpeak Portuguese (Portugal)", "pt-PT"),
    ]

    assert tts_quality.default_voice(voices, "es").key == "kokoro:jf_gongitsune:es"
    assert tts_quality.default_voice(voices, "pt").key == "espeak:pt-br"
