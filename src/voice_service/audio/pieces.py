"""Long audio cut into pieces at pauses, as it is decoded: what a transcription job decodes
one piece at a time, so memory holds one piece and a word is never cut in two.

Silero (`audio.vad`) marks where speech starts and stops. A piece ends half of `pause` into
the first pause of at least `pause` seconds once it is `shortest` seconds long; one that
reaches `longest` seconds with no such pause ends in the middle of its longest pause (or at
`longest`, when it has none). The cuts depend on the audio alone, not on how it arrives.
A piece where the VAD heard no speech says so, and its transcript is empty: Whisper given
only silence invents words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from voice_service.audio.vad import RATE, WINDOW, Floats, ServerVad, SpeechDetector

# A pause the VAD reports: shorter silences are breaths between words.
PAUSE_MS = 300
# The detector reports a silence this many samples after it began (whole windows).
_LAG = math.ceil(PAUSE_MS * RATE / 1000 / WINDOW) * WINDOW


@dataclass(frozen=True, slots=True)
class Piece:
    start: int  # its first sample, counted from the start of the audio
    samples: Floats  # mono float32 at RATE
    speech: bool  # the VAD heard speech in it

    @property
    def start_seconds(self) -> float:
        return self.start / RATE

    @property
    def end(self) -> int:
        return self.start + self.samples.size


@dataclass(slots=True)
class _Span:
    begin: int
    end: int | None = None  # None while it lasts


@dataclass(slots=True)
class PieceCutter:
    """Feed it decoded audio with `add`, then `finish`; each returns the pieces completed."""

    shortest: float = 10.0
    longest: float = 30.0
    pause: float = 1.0
    _detector: SpeechDetector = field(
        default_factory=lambda: SpeechDetector(ServerVad(silence_duration_ms=PAUSE_MS))
    )
    _buffer: list[Floats] = field(default_factory=list)
    _start: int = 0  # the buffer's first sample
    _end: int = 0  # one past its last
    _silences: list[_Span] = field(default_factory=lambda: [_Span(0)])
    _speech: list[_Span] = field(default_factory=list)

    def add(self, audio: Floats) -> list[Piece]:
        if audio.size == 0:
            return []
        self._buffer.append(audio)
        self._end += audio.size
        for event in self._detector.add(audio):
            if event.kind == "started":
                self._silences[-1].end = event.sample
                self._speech.append(_Span(event.sample))
            else:
                began = max(event.sample - _LAG, self._speech[-1].begin)
                self._speech[-1].end = began
                self._silences.append(_Span(began))
        pieces = []
        while (cut := self._cut()) is not None:
            pieces.append(self._take(cut))
        return pieces

    def finish(self) -> list[Piece]:
        """The rest of the audio, as the last piece (none if nothing is left)."""
        return [self._take(self._end)] if self._end > self._start else []

    def _cut(self) -> int | None:
        """Where the piece in the buffer ends, if that is known yet. Decided only from
        audio the VAD has judged, so the pieces are the same however the audio arrives."""
        judged = self._detector.judged
        shortest = self._start + round(self.shortest * RATE)
        longest = self._start + round(self.longest * RATE)
        pause = round(self.pause * RATE)
        pauses = []  # (begin, end) of each silence heard within the piece's reach
        for span in self._silences:
            begin = max(span.begin, self._start)
            end = min(judged if span.end is None else span.end, judged, longest)
            if end - begin >= _LAG:  # a shorter one may yet be cut off by `longest`
                pauses.append((begin, end))
        for begin, end in pauses:
            # Half the least pause in: a pause need not be waited out (it may last minutes).
            if end - begin >= pause and begin + pause // 2 >= shortest:
                return begin + pause // 2
        if judged < longest:
            return None
        inner = [(begin, end) for begin, end in pauses if begin > self._start]
        if not inner:
            return longest
        begin, end = max(inner, key=lambda found: found[1] - found[0])
        return (begin + end) // 2

    def _take(self, cut: int) -> Piece:
        audio = np.concatenate(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        taken = cut - self._start
        piece = Piece(self._start, audio[:taken], self._heard_speech(self._start, cut))
        rest = audio[taken:]
        self._buffer = [rest] if rest.size else []
        self._start = cut
        self._silences = [s for s in self._silences if s.end is None or s.end > cut]
        self._speech = [s for s in self._speech if s.end is None or s.end > cut]
        return piece

    def _heard_speech(self, begin: int, end: int) -> bool:
        return any(s.begin < end and (s.end is None or s.end > begin) for s in self._speech)
