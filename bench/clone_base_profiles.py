"""Measures the clones' base voices and rewrites what the package ships of them: their
profiles (`voice_service/engines/world/base_profiles.py`), and their probe and verifying
sentences spoken, with harvest's F0 of each within the base's pitch range as its profile
gives it (`base_speech.npz`). Run it when a voice model or the analysis changes:
`python -m bench.clone_base_profiles`; when only a sentence changes, `... speech` rewrites
the sentences alone, against the profiles as shipped."""

from __future__ import annotations

import pprint
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from voice_service.engines.kokoro import KokoroEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import TextToSpeech
from voice_service.engines.world import BaseVoice, base_profiles, base_speech, measure_base
from voice_service.engines.world.bases import CLONE_TEXTS, spoken_for_analysis
from voice_service.engines.world.conversion import analyse_base_speech, base_f0_range
from voice_service.engines.world.profile import VoiceProfile
from voice_service.inference.engines import load_cloner


def main(speech_only: bool) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        speakers: dict[str, TextToSpeech] = {
            "piper": PiperEngine(),
            "kokoro": KokoroEngine(Path(data_dir)),
        }
        cloner = load_cloner(speakers)
        assert cloner is not None
        bases = [BaseVoice.of(key, speakers[key.split(":")[0]]) for key in cloner.base_voices]
        if speech_only:
            profiles = base_profiles.PROFILES
        else:
            profiles = {base.key: _rounded(measure_base(base).to_dict()) for base in bases}
            _write_profiles(profiles)
        spoken = {
            (base.key, base_speech.text_id(text)): _spoken(base, text, profiles[base.key])
            for base in bases
            for text in CLONE_TEXTS
        }
    base_speech.write(Path(base_speech.__file__).with_name(base_speech.FILE), spoken)


def _write_profiles(profiles: dict[str, dict[str, Any]]) -> None:
    listing = pprint.pformat(profiles, width=96, compact=True)
    block = f"PROFILES: Final[dict[str, dict[str, Any]]] = {listing}\n"
    path = Path(base_profiles.__file__)
    text = re.sub(
        r"(# BEGIN GENERATED\n).*(# END GENERATED\n)",
        lambda match: match.group(1) + block + match.group(2),
        path.read_text(),
        flags=re.DOTALL,
    )
    path.write_text(text)


def _spoken(base: BaseVoice, text: str, profile: Mapping[str, Any]) -> base_speech.SpokenText:
    """`text` as the cloner hears it from `base`, with harvest's F0 of it."""
    pcm = spoken_for_analysis(base, text)
    f0_range = base_f0_range(VoiceProfile.from_dict(profile))
    return base_speech.SpokenText(pcm.samples, analyse_base_speech(pcm, f0_range).world.f0)


def _rounded(profile: dict[str, Any]) -> dict[str, Any]:
    """Four decimals: a hundredth of a dB or of a semitone's log, far below what is heard."""
    return {
        name: [round(v, 4) for v in value]
        if isinstance(value, list)
        else round(value, 4)
        if isinstance(value, float)
        else value
        for name, value in profile.items()
    }


if __name__ == "__main__":
    main(speech_only=sys.argv[1:] == ["speech"])
