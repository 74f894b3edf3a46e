"""Conversations of real people for judging diarization, with the truth of who spoke when.

Written down before any measurement on these voices, and kept in two halves that share no
speaker: the development half is what the diarizer's settings are chosen on, the held-out
half is what the benchmark reports. Every voice is a recording of a person; none is
synthetic (the set used to hold pytest-audioeval's sample recordings, which that package
makes with Kokoro voices, one of them among the service's own).

Voices, ten people in six languages (`bench.people`'s, read with its code):
- Debian's `pocketsphinx-testdata` (16 kHz): the LibriVox reader (5 clips), the playing-card
  caller (5) and the speaker of the commands and digit strings (4);
- Asterisk's telephone prompts (8 kHz; `bench.people.PACKAGES` names the Debian packages):
  Allison (US English), Carlo and Menardi (Italian), June (Canadian French), Armelle (French),
  the Russian IVR voice and the Colombian Spanish voice. Each has a few hundred prompts; of
  those of 2.5-7 s, eight spread evenly over the file names are its clips.

Held out: the LibriVox reader, the card caller, June, Menardi, the Russian and the Colombian
voice. Development: the command speaker, Allison, Carlo, Armelle.
The Asterisk voices are in the halves `bench.people` put them in; the three pocketsphinx
people stay where this set has always had them (the diarizer's settings were chosen with the
command speaker, so he cannot be held out here, though figure 20 holds him out).

Each half has 2-, 3- and 4-speaker conversations, four of each, from a seeded generator:
speakers drawn from the half, each speaker's clips shuffled and used once (so a speaker has as
many turns as clips, at most `TURNS_PER_SPEAKER`), turn order random with no speaker twice in
a row, a pause of 0.1-1.0 s between turns. Every clip is trimmed to its speech (Silero VAD),
so a turn is 1-7 s of one person. In the conversations every clip is heard through the
telephone band (8 kHz sampling, as the Asterisk prompts were recorded) and brought to one
loudness: a 16 kHz reader beside an 8 kHz prompt voice would otherwise be told apart by the
band alone (docs/performance.md, figure 19). The same conversations come twice: laid end to
end, and with each turn starting early over the one before, so that 10 % of the speech time
is two people at once.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt
from faster_whisper.vad import VadOptions, get_speech_timestamps
from scipy.signal import resample_poly

from bench.people import ASTERISK, PACKAGES, spoken_prompts
from bench.recordings import (
    POCKETSPHINX_DATA,
    SAMPLE_RATE,
    SpeechDataMissingError,
    read_recording,
)

Audio = npt.NDArray[np.float32]

_LIBRIVOX = "librivox/sense_and_sensibility_01_austen_64kb-{}.wav"
_POCKETSPHINX_VOICES = {
    "librivox reader": tuple(_LIBRIVOX.format(n) for n in ("0870", "0880", "0890", "0920", "0930")),
    "card caller": tuple(f"cards/00{n}.wav" for n in range(1, 6)),
    "command speaker": (
        "goforward.raw",
        "numbers.raw",
        "something.raw",
        "tidigits/dhd.2934z.raw",
    ),
}
# Asterisk's prompt voices, by the folder of their prompts under ASTERISK (as bench.people).
_ASTERISK_VOICES = {
    "Allison (Asterisk)": "en_US_f_Allison",
    "Carlo (Asterisk)": "it_IT_m_Carlo",
    "Armelle (Asterisk)": "fr",
    "June (Asterisk)": "fr_CA_f_June",
    "Menardi (Asterisk)": "it_IT_f_Menardi",
    "Russian IVR voice (Asterisk)": "ru_RU_f_IvrvoiceRU",
    "Colombian voice (Asterisk)": "es",
}
PROMPTS_PER_VOICE = 8
LONGEST_PROMPT_SECONDS = 7.0
HELD_OUT = (
    "librivox reader",
    "card caller",
    "June (Asterisk)",
    "Menardi (Asterisk)",
    "Russian IVR voice (Asterisk)",
    "Colombian voice (Asterisk)",
)
# The held-out voices that speak English, for a conversation transcribed in the language its
# request names (`english_conversation`).
HELD_OUT_ENGLISH = ("librivox reader", "card caller")
DEVELOPMENT = ("command speaker", "Allison (Asterisk)", "Carlo (Asterisk)", "Armelle (Asterisk)")
TELEPHONE_RATE = 8_000
SPEAKER_COUNTS = (2, 3, 4)
PER_COUNT = 4
TURNS_PER_SPEAKER = 4
PAUSE_SECONDS = (0.1, 1.0)
OVERLAP_SHARE = 0.10
_SEEDS = {"held-out": 36, "development": 3600, "english": 360}
_TRIM_MARGIN = 0.05  # seconds of a clip kept either side of its speech
_LOUDNESS_DBFS = -23.0


@dataclass(frozen=True, slots=True)
class Turn:
    speaker: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Conversation:
    name: str
    audio: Audio  # 16 kHz mono
    turns: tuple[Turn, ...]  # the truth, in start order

    @property
    def speakers(self) -> frozenset[str]:
        return frozenset(turn.speaker for turn in self.turns)


def conversations(half: str, *, overlap: bool) -> list[Conversation]:
    """The half's conversations ("held-out" or "development"), end to end or overlapping."""
    speakers = HELD_OUT if half == "held-out" else DEVELOPMENT
    rng = random.Random(_SEEDS[half])
    made = []
    for count in SPEAKER_COUNTS:
        for index in range(PER_COUNT):
            chosen = sorted(rng.sample(speakers, count))
            turns = list(_turn_order(rng, chosen))
            pauses = [rng.uniform(*PAUSE_SECONDS) for _ in turns[1:]]
            name = f"{half}/{count}-speakers/{index}{'/overlap' if overlap else ''}"
            made.append(_laid_out(name, turns, pauses, overlap))
    return made


def english_conversation(rounds: int) -> Conversation:
    """The held-out half's English voices in turn, every clip of each once a round, in a
    seeded order, with pauses as in the sets, heard as recorded (16 kHz, as a request carries
    them): a conversation whose every word Whisper can transcribe when told English (what a
    diarized request costs beside a plain one; told English, Whisper drops much of the other
    voices' speech without timestamp tokens and spells it out with them, so the two would not
    transcribe the same words)."""
    rng = random.Random(_SEEDS["english"])
    turns: list[tuple[str, Audio]] = []
    for _ in range(rounds):
        said = {speaker: list(voice_clips(speaker)) for speaker in HELD_OUT_ENGLISH}
        for shuffled in said.values():
            rng.shuffle(shuffled)
        for round_clips in zip(*said.values(), strict=True):
            turns += zip(HELD_OUT_ENGLISH, round_clips, strict=True)
    pauses = [rng.uniform(*PAUSE_SECONDS) for _ in turns[1:]]
    return _laid_out(f"held-out/english/{rounds}-rounds", turns, pauses, overlap=False)


def _turn_order(rng: random.Random, speakers: list[str]) -> Iterator[tuple[str, Audio]]:
    left = {}
    for speaker in speakers:
        clips = list(heard_clips(speaker))
        rng.shuffle(clips)
        left[speaker] = clips[:TURNS_PER_SPEAKER]
    previous = None
    while any(left.values()):
        choices = [s for s in speakers if left[s] and s != previous] or [
            s for s in speakers if left[s]
        ]
        speaker = rng.choice(choices)
        yield speaker, left[speaker].pop()
        previous = speaker


def _laid_out(
    name: str, turns: list[tuple[str, Audio]], pauses: list[float], overlap: bool
) -> Conversation:
    starts = [0.0]
    lengths = [clip.size / SAMPLE_RATE for _, clip in turns]
    steps = pauses
    if overlap:
        # Each change of speaker overlaps in proportion to the shorter of its two turns, scaled
        # so that the overlaps add up to OVERLAP_SHARE of the speech time (a speaker who goes
        # on after a pause does not overlap himself).
        changes = [a != b for (a, _), (b, _) in itertools.pairwise(turns)]
        shorter = [
            min(a, b) if changed else 0.0
            for a, b, changed in zip(lengths, lengths[1:], changes, strict=False)
        ]
        overlapped = OVERLAP_SHARE * sum(lengths) / (1 + OVERLAP_SHARE)
        scale = overlapped / sum(shorter)
        steps = [
            -scale * s if changed else pause
            for s, changed, pause in zip(shorter, changes, pauses, strict=True)
        ]
    for length, step in zip(lengths, steps, strict=False):
        starts.append(starts[-1] + length + step)
    total = max(start + length for start, length in zip(starts, lengths, strict=True))
    audio = np.zeros(round(total * SAMPLE_RATE) + 1, dtype=np.float32)
    for start, (_, clip) in zip(starts, turns, strict=True):
        at = round(start * SAMPLE_RATE)
        audio[at : at + clip.size] += clip
    truth = tuple(
        Turn(speaker, start, start + length)
        for start, length, (speaker, _) in zip(starts, lengths, turns, strict=True)
    )
    return Conversation(name, audio, truth)


@cache
def voice_clips(speaker: str) -> tuple[Audio, ...]:
    """The speaker's clips as recorded, trimmed to speech and brought to one loudness."""
    if speaker in _POCKETSPHINX_VOICES:
        raw = [read_recording(name) for name in _POCKETSPHINX_VOICES[speaker]]
    else:
        raw = _asterisk_prompts(_ASTERISK_VOICES[speaker])
    return tuple(_at_loudness(_trimmed(clip)) for clip in raw)


@cache
def heard_clips(speaker: str) -> tuple[Audio, ...]:
    """The speaker's clips as the conversations hear them: in the telephone band, at one
    loudness."""
    return tuple(_at_loudness(telephone_band(clip)) for clip in voice_clips(speaker))


def telephone_band(clip: Audio) -> Audio:
    """`clip` (16 kHz) sampled at 8 kHz and back: nothing above 4 kHz."""
    ratio = SAMPLE_RATE // TELEPHONE_RATE
    down = resample_poly(clip, 1, ratio)
    return np.asarray(resample_poly(down, ratio, 1), dtype=np.float32)[: clip.size]


def _asterisk_prompts(folder: str) -> list[Audio]:
    """`PROMPTS_PER_VOICE` of the folder's prompts (`bench.people`'s reading: those of 2.5 s
    or more, by file name) no longer than `LONGEST_PROMPT_SECONDS`, spread evenly over them."""
    prompts = [
        prompt
        for prompt in spoken_prompts(ASTERISK / folder)
        if prompt.size <= LONGEST_PROMPT_SECONDS * SAMPLE_RATE
    ]
    step = len(prompts) / PROMPTS_PER_VOICE
    return [prompts[int(index * step)] for index in range(PROMPTS_PER_VOICE)]


def float_wav(path: Path) -> Audio:
    """A 32-bit float WAV (as pyannote.audio ships them), 16 kHz mono."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        if (stream.rate, stream.channels) != (SAMPLE_RATE, 1):
            raise ValueError(f"{path} is not 16 kHz mono")
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(stream)]
    return np.concatenate(frames).astype(np.float32)


def _trimmed(clip: Audio) -> Audio:
    speech = get_speech_timestamps(clip, VadOptions(speech_pad_ms=0))
    if not speech:
        raise ValueError("a voice clip without speech")
    margin = round(_TRIM_MARGIN * SAMPLE_RATE)
    start = max(0, speech[0]["start"] - margin)
    end = min(clip.size, speech[-1]["end"] + margin)
    return clip[start:end]


def _at_loudness(clip: Audio) -> Audio:
    rms = float(np.sqrt(np.mean(clip**2)))
    gain = 10 ** (_LOUDNESS_DBFS / 20) / max(rms, 1e-6)
    return (clip * gain).astype(np.float32)


def check_data() -> None:
    """Fail early and plainly where the recordings are not installed."""
    read_recording(_POCKETSPHINX_VOICES["card caller"][0], POCKETSPHINX_DATA)
    for folder in _ASTERISK_VOICES.values():
        if not (ASTERISK / folder).is_dir():
            raise SpeechDataMissingError(
                f"{ASTERISK / folder} is missing: apt-get install {PACKAGES}"
            )
