"""Phone classes of speech, every 10 ms: what a clone's frames and its sample's are matched by.

pocketsphinx's English acoustic model decodes a phone loop (no words, no text), so any
sentence gets labels, in any language: for speech outside English they are the English phones
it sounds nearest to, which is all the matching needs, since both sides are labelled alike.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from voice_service.engines.world.pcm import Floats

# CMU's phone set as the en-us model names it; 0 is silence and anything else it hears
# (breath, noise).
_CMU = (
    "SIL AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH "
    "UH UW V W Y Z ZH"
)
PHONES: Final = tuple(_CMU.split())
SILENCE: Final = 0
FRAMES_PER_SECOND: Final = 100
RATE: Final = 16_000

Labels = npt.NDArray[np.uint8]
_INDEX: Final = {phone: index for index, phone in enumerate(PHONES)}


# A decoder per thread: pocketsphinx's is not safe to share, and one loads in a fraction of a
# second, so worker threads label at once.
_decoders = threading.local()


def labels(signal: Floats) -> Labels:
    """`PHONES` heard in `signal` (16 kHz, -1..1): one per 10 ms, the last frame included."""
    decoder = _decoder()
    # Its cepstral mean and noise estimate carry over from the last utterance: reset, so the
    # same speech gets the same phones whatever the thread heard before.
    decoder.reinit_feat()
    pcm = (np.clip(signal, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    found = np.full(signal.size * FRAMES_PER_SECOND // RATE + 1, SILENCE, dtype=np.uint8)
    for segment in decoder.seg():
        found[max(segment.start_frame, 0) : segment.end_frame + 1] = _INDEX.get(
            segment.word, SILENCE
        )
    return found


def _decoder() -> Any:
    decoder = getattr(_decoders, "decoder", None)
    if decoder is None:
        decoder = _decoders.decoder = _phone_decoder()
    return decoder


def _phone_decoder() -> Any:
    from pocketsphinx import Decoder, get_model_path

    model = Path(get_model_path()) / "en-us"
    # The phone loop's settings as CMU gives them for phone recognition (wide beams, the
    # phone language model weighted 2).
    return Decoder(
        hmm=str(model / "en-us"),
        allphone=str(model / "en-us-phone.lm.bin"),
        lm=None,
        lw=2.0,
        beam=1e-20,
        pbeam=1e-20,
        samprate=RATE,
        loglevel="FATAL",
    )


def at_frames(labels: Labels, frames: int, frame_ms: float) -> Labels:
    """`labels` (10 ms) read at `frames` frames of `frame_ms` each."""
    index = (np.arange(frames) * frame_ms * FRAMES_PER_SECOND / 1000.0).astype(np.intp)
    return labels[np.minimum(index, labels.size - 1)]
