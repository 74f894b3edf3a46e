"""Voice cloning by timbre matching with the WORLD vocoder (`pyworld`).

A clone is a neural base voice converted toward a profile measured on the customer's sample,
with the base chosen per sample. Everything is CPU-only and offline. One module per concern:

- `profile`: what is measured and stored with a clone (`VoiceProfile`, its serialized form).
- `analysis`: measuring a sample (pitch, envelope, tilt) and rejecting ones without speech.
- `conversion`: turning base-voice speech toward a profile and resynthesizing it.
- `bases`: the base voices, their long-term profiles, and `WorldCloner`, which chooses one.
- `timbre`: the sample's voiced frames kept with a clone and lent to its speech by phone;
  `phones` hears which phone each 10 ms of speech is (pocketsphinx's phone loop).
- `base_profiles`, `base_speech`: the bases' profiles and spoken probe sentences, shipped as
  data (`python -m bench.clone_base_profiles` makes them).
- `pcm`: float signals from and to PCM, shared by the others.

All functions are pure (no shared mutable state), hence safe from several worker threads;
`WorldCloner` guards its caches with a lock, and `phones` keeps a decoder per thread.
"""

from voice_service.engines.world.analysis import ANALYSIS_RATE, NoSpeechInSample, analyse_sample
from voice_service.engines.world.bases import BaseVoice, WorldCloner, measure_base
from voice_service.engines.world.conversion import Conversion, convert
from voice_service.engines.world.profile import VoiceProfile

__all__ = [
    "ANALYSIS_RATE",
    "BaseVoice",
    "Conversion",
    "NoSpeechInSample",
    "VoiceProfile",
    "WorldCloner",
    "analyse_sample",
    "convert",
    "measure_base",
]
