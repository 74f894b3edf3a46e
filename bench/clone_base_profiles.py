"""Measures the clones' base voices and rewrites the profiles the package ships
(`voice_service/engines/world/base_profiles.py`). Run it when a voice model, the calibration
text or the analysis changes: `python -m bench.clone_base_profiles`."""

from __future__ import annotations

import pprint
import re
import tempfile
from pathlib import Path
from typing import Any

from voice_service.engines.kokoro import KokoroEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import TextToSpeech
from voice_service.engines.world import BaseVoice, base_profiles, measure_base
from voice_service.inference.engines import load_cloner


def main() -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        speakers: dict[str, TextToSpeech] = {
            "piper": PiperEngine(),
            "kokoro": KokoroEngine(Path(data_dir)),
        }
        cloner = load_cloner(speakers)
        assert cloner is not None
        profiles = {
            key: _rounded(measure_base(BaseVoice(key, speakers[key.split(":")[0]])).to_dict())
            for key in cloner.base_voices
        }
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
    main()
