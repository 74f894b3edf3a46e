"""Figure 21: does the first part of a sentence split across two requests end without the
fall of a sentence's end, once the request names the rest as its `next_text`?

Each sentence is cut between two words. Its first part is spoken (a) alone, (b) with the
second part as `next_text`, through the engines' own path (`Engines.speech_parts` with the
request's `Context`), and the whole sentence once, giving (c) its audio up to the cut (the
same rule `continuity` cuts by: halfway between the two words' times) and (d) its true end.
(c) is how the words sound where the sentence goes on, (d) how a sentence's end falls. A
voice without word times (eSpeak) has no (c): its cut would be a guess, and the service
says its parts alone, so its (b) is its (a).

Per sentence the slopes scatter widely, and for these voices the words before a cut often
fall inside a whole sentence too, so the figure with a target is how far (b) ends from (c),
beside how far (a) does: a part said with its `next_text` should end as the middle of its
sentence does.

The pitch of each ending (its last `TAIL_SECONDS`) is pYIN's (librosa), in semitones, on
frames within `QUIET_DB` of its loudest. WORLD's Harvest was tried first: on Piper's voice
it called whole loud vowels unvoiced and jumped by most of an octave inside words, so the
last stretch it left was rarely the last syllable. The slope is a least-squares line over
the last voiced stretch of at least `MIN_STRETCH_SECONDS`, broken where the pitch jumps
more than `JUMP_SEMITONES` from one 5 ms frame to the next: no voice glides that fast (a
quick fall is some 50 semitones a second), so a line across such a jump measures the
tracker.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import librosa
import numpy as np
import numpy.typing as npt

from voice_service.engines.alignment import character_times
from voice_service.engines.continuity import context_of
from voice_service.engines.manner import PLAIN, Manner
from voice_service.engines.protocols import Pcm
from voice_service.inference.engines import Engines

# Plain English sentences, each cut between two words well inside it.
SENTENCES = (
    ("The old lighthouse keeper climbed the stairs", "every evening before the storm."),
    ("My sister bought a small blue bicycle", "for her daughter's birthday last spring."),
    ("The train to the coast was running", "almost an hour late this morning."),
    ("We walked along the river for a while", "and then sat down under a tree."),
    ("Our neighbours are planting apple trees", "at the far end of their garden."),
    ("The children were reading quietly in the library", "until the bell rang at noon."),
    ("He opened the window to let in", "the cool air from the hills."),
    ("The baker sells fresh bread and warm rolls", "to everyone who passes by."),
    ("A heavy rain fell on the village", "during the whole of the night."),
    ("She wrote a long letter to her grandmother", "about the trip to the mountains."),
    ("The museum will open a new exhibition", "of paintings from the last century."),
    ("They painted the kitchen a pale yellow", "before moving into the house."),
)
QUICK_SENTENCES = 8
# Each engine's English voice: the catalogue's first.
VOICES = {"piper": "piper:en_US-joe-medium", "kokoro": "kokoro:jm_kumo:en", "espeak": "espeak:en"}
CONDITIONS = ("alone", "with_next", "whole_cut", "whole_end")

FRAME_MS = 5.0
TAIL_SECONDS = 1.2
MIN_STRETCH_SECONDS = 0.08
JUMP_SEMITONES = 2.0
F0_RANGE = (50.0, 400.0)
QUIET_DB = -30.0
# An ending falls below this slope (semitones a second); see docs/performance.md, figure 21.
FALLING = -10.0

Floats = npt.NDArray[np.float64]


def final_slope(pcm: Pcm) -> float | None:
    """Semitones a second of the pitch over the last voiced stretch of `pcm`; None where
    none is long enough."""
    rate = pcm.sample_rate
    tail = pcm.samples[-round(TAIL_SECONDS * rate) :].astype(np.float32) / 32768
    hop = round(rate * FRAME_MS / 1000)
    f0, voiced, _ = librosa.pyin(
        tail, fmin=F0_RANGE[0], fmax=F0_RANGE[1], sr=rate, frame_length=1024, hop_length=hop
    )
    loudness = librosa.feature.rms(y=tail, frame_length=1024, hop_length=hop)[0]
    loud = loudness > loudness.max() * 10 ** (QUIET_DB / 20)
    f0 = np.where(voiced & loud[: f0.size], f0, 0.0)
    stretch = _last_stretch(f0)
    if stretch is None:
        return None
    semitones = 12 * np.log2(f0[stretch])
    times = np.arange(f0.size)[stretch] * hop / rate
    slope, _ = np.polyfit(times, semitones, 1)
    return float(slope)


def _last_stretch(f0: Floats) -> slice | None:
    """The last run of voiced frames without a jump, at least `MIN_STRETCH_SECONDS` long."""
    frames = round(MIN_STRETCH_SECONDS * 1000 / FRAME_MS)
    voiced = f0 > 0
    steps = np.abs(np.diff(12 * np.log2(np.where(voiced, f0, 1.0))))
    breaks = np.concatenate([[True], ~voiced[1:] | ~voiced[:-1] | (steps > JUMP_SEMITONES)])
    end = f0.size
    for start in np.flatnonzero(breaks)[::-1]:
        if voiced[start] and end - start >= frames:
            return slice(int(start), end)
        end = int(start)
    return None


def _said(engines: Engines, voice: str, text: str, manner: Manner = PLAIN) -> Pcm:
    """`text` spoken as a whole (not streamed) request's chunks are, joined."""
    pcms = [part().pcm for part in engines.speech_parts(voice, None, text, manner=manner)]
    samples = np.concatenate([pcm.samples for pcm in pcms])
    return Pcm(samples, pcms[0].sample_rate, pcms[0].word_times if len(pcms) == 1 else ())


def _cut_after(pcm: Pcm, text: str, chars: int) -> Pcm:
    """`pcm` of `text` up to halfway between the word ending at `chars` and the next."""
    starts, ends = character_times(text, pcm.word_times, pcm.duration_seconds)
    cut = (ends[chars - 1] + starts[chars + 1]) / 2
    return Pcm(pcm.samples[: round(cut * pcm.sample_rate)], pcm.sample_rate)


def endings(engines: Engines, voice: str, sentence: tuple[str, str]) -> dict[str, float | None]:
    """Each condition's final slope for one sentence."""
    first, second = sentence
    whole = f"{first} {second}"
    said = _said(engines, voice, whole)
    context = context_of(None, first, second)
    clips: dict[str, Callable[[], Pcm]] = {
        "alone": lambda: _said(engines, voice, first),
        "with_next": lambda: _said(engines, voice, first, Manner(context=context)),
        "whole_cut": lambda: _cut_after(said, whole, len(first)),
        "whole_end": lambda: said,
    }
    if not said.word_times:
        del clips["whole_cut"]
    return {condition: final_slope(clip()) for condition, clip in clips.items()}


def _summary(slopes: Sequence[float | None]) -> dict[str, float | None]:
    found = [slope for slope in slopes if slope is not None]
    return {
        "median": statistics.median(found) if found else None,
        "falling": sum(slope < FALLING for slope in found) / len(found) if found else None,
        "measured": len(found),
    }


def measure(engines: Engines, quick: bool) -> dict[str, Any]:
    """Per engine loaded, each condition's median final slope and share falling."""
    sentences = SENTENCES[:QUICK_SENTENCES] if quick else SENTENCES
    result: dict[str, Any] = {"threshold": FALLING, "sentences": len(sentences)}
    for engine, voice in VOICES.items():
        if engine not in engines.speakers:
            continue
        rows = [endings(engines, voice, sentence) for sentence in sentences]
        result[engine] = {
            condition: {
                **_summary([row.get(condition) for row in rows]),
                "slopes": [row.get(condition) for row in rows],
            }
            for condition in CONDITIONS
        }
        result[engine]["cut_gap"] = _gap(rows, "with_next")
        result[engine]["alone_gap"] = _gap(rows, "alone")
    return result


def _gap(rows: Sequence[dict[str, float | None]], condition: str) -> float | None:
    """The median, over sentences, of how far `condition`'s final slope is from the whole
    sentence's at the cut: how unlike the middle of its sentence a part ends."""
    gaps = [
        abs(ending - middle)
        for row in rows
        if (ending := row.get(condition)) is not None
        and (middle := row.get("whole_cut")) is not None
    ]
    return statistics.median(gaps) if gaps else None
