"""Who spoke when: speaker turns of 16 kHz mono audio, with the d-vector encoder we ship.

Speech regions (Silero VAD, as faster-whisper ships it, split at pauses of 0.1 s) get a
d-vector every 0.4 s; a region is cut where the windows just before and after differ (two
people with no pause between them) and into segments of at most `MAX_SEGMENT_SECONDS`; each
segment's vector is the mean of its windows (or, where the operator set a speaker model, that
model's embedding of the segment: `VoiceModel`), and the segments are clustered: SciPy's
average-linkage hierarchy over cosine distance, cut at the caller's number of speakers, else
where merging would join clusters further apart than `THRESHOLD` (kept within the caller's
bounds). A "speaker" heard for under `MIN_SPEAKER_SECONDS` goes to the nearest other. Speakers
the caller knows (a reference clip each) name the speakers whose voices are nearest theirs,
one each, where they are more similar than `KNOWN_SIMILARITY`. A speaker's
segments less than `GAP_SECONDS` apart are one turn, and each turn reaches `EDGE_SECONDS`
past its speech (never past the midpoint to its neighbour), as a person's turn includes their
breaths and soft word ends.

The settings were chosen on `bench.diarization_set`'s development half; docs/performance.md
gives what they score on the held-out half. Memory is bounded whatever the length: the
distances clustered are those of at most `MAX_CLUSTERED` segments (an even sample of them on
longer audio; every segment then goes to its nearest speaker).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from faster_whisper.vad import VadOptions, get_speech_timestamps
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.optimize import linear_sum_assignment

from voice_service.engines.protocols import Segment, Word
from voice_service.engines.speaker_embedding import (
    HOP_LENGTH,
    SAMPLE_RATE,
    WINDOW_FRAMES,
    SpeakerEncoder,
)
from voice_service.engines.speaker_model import SpeakerModel

Floats = npt.NDArray[np.float32]

MAX_SPEAKERS: Final = 32  # the most a request may ask for (ElevenLabs' bound)
MAX_SEGMENT_SECONDS: Final = 3.0
THRESHOLD: Final = 0.5  # average cosine distance between two different people's clusters
# A known person's name labels a speaker whose voice is more similar than this to their
# reference (`bench.known_speakers`: chosen on the development voices).
KNOWN_SIMILARITY: Final = 0.6
GAP_SECONDS: Final = 1.0
EDGE_SECONDS: Final = 0.2
MIN_SPEAKER_SECONDS: Final = 2.0
MAX_CLUSTERED: Final = 3000
STRIDE_FRAMES: Final = WINDOW_FRAMES // 2
STEP_SECONDS: Final = STRIDE_FRAMES * HOP_LENGTH / SAMPLE_RATE
WINDOW_SECONDS: Final = WINDOW_FRAMES * HOP_LENGTH / SAMPLE_RATE
CHANGE_CONTEXT: Final = 3  # windows either side compared for a change of speaker
CHANGE_DISTANCE: Final = 0.3
VAD_BLOCK_SECONDS: Final = 60
_NUMBERED: Final = re.compile(r"speaker_\d+")
_MIN_SEGMENT_SECONDS: Final = 0.25  # shorter speech gives no usable d-vector
_VAD: Final = VadOptions(min_silence_duration_ms=100, speech_pad_ms=60)


D_VECTORS: Final = "d-vector"  # the encoder that made a vector, where no speaker model did


@dataclass(frozen=True, slots=True)
class KnownSpeaker:
    """A person the caller knows: their name, and their reference clip's vector, as the
    `encoder` named (a speaker model's identity, or `D_VECTORS`) made it."""

    name: str
    vector: Floats  # unit length
    encoder: str = D_VECTORS


@dataclass(frozen=True, slots=True)
class SpeakerHints:
    """What the caller knows of the speakers: their number (each None where not given),
    and people who may be among them."""

    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None
    known: tuple[KnownSpeaker, ...] = ()

    def given(self) -> dict[str, Any]:
        """The hints given, by their field names (as a job keeps them, in JSON)."""
        counts = {
            "num_speakers": self.num_speakers,
            "min_speakers": self.min_speakers,
            "max_speakers": self.max_speakers,
        }
        kept: dict[str, Any] = {name: count for name, count in counts.items() if count is not None}
        if self.known:
            kept["known"] = [
                {"name": person.name, "vector": person.vector.tolist(), "encoder": person.encoder}
                for person in self.known
            ]
        return kept

    @classmethod
    def of(cls, kept: dict[str, Any]) -> SpeakerHints:
        """The hints `given` kept."""
        known = tuple(
            KnownSpeaker(
                person["name"],
                np.asarray(person["vector"], dtype=np.float32),
                person.get("encoder", D_VECTORS),  # kept before speaker models were
            )
            for person in kept.get("known", ())
        )
        return cls(
            kept.get("num_speakers"), kept.get("min_speakers"), kept.get("max_speakers"), known
        )

    def bounds(self) -> tuple[int, int]:
        if self.num_speakers is not None:
            return self.num_speakers, self.num_speakers
        return self.min_speakers or 1, self.max_speakers or MAX_SPEAKERS


@dataclass(frozen=True, slots=True)
class SpeakerTurn:
    speaker: int  # 0, 1, … in order of first appearance
    start: float  # seconds
    end: float
    name: str | None = None  # the known speaker it is


@dataclass(slots=True)
class VoicedSegments:
    """Speech in segments of one voice each: their seconds and unit vectors, in time
    order. A long recording's are gathered piece by piece (a kilobyte per segment) and
    clustered once at its end."""

    spans: list[tuple[float, float]] = field(default_factory=list)
    vectors: list[Floats] = field(default_factory=list)

    def extend(self, other: VoicedSegments) -> None:
        self.spans += other.spans
        self.vectors += other.vectors


Clusterer = Callable[[Floats, npt.NDArray[np.float64], tuple[int, int]], npt.NDArray[np.int64]]


@dataclass(frozen=True, slots=True)
class VoiceModel:
    """A speaker model that names each segment's voice in place of the d-vectors (which
    still find where one voice gives way to another), with the distances its vectors need:
    `threshold` as `THRESHOLD`, `known_similarity` as `KNOWN_SIMILARITY`."""

    model: SpeakerModel
    threshold: float
    known_similarity: float


class Diarizer:
    def __init__(
        self,
        encoder: SpeakerEncoder,
        clusterer: Clusterer | None = None,
        voices: VoiceModel | None = None,
    ) -> None:
        """`clusterer`: labels segments' vectors (`cluster` unless another is compared);
        `voices`: the operator's speaker model, if one is set."""
        self._encoder = encoder
        self._voices = voices
        threshold = THRESHOLD if voices is None else voices.threshold
        self._cluster = clusterer or functools.partial(cluster, threshold=threshold)
        self._known_similarity = KNOWN_SIMILARITY if voices is None else voices.known_similarity
        self.encoder = D_VECTORS if voices is None else voices.model.identity

    def turns(self, audio: Floats, hints: SpeakerHints = SpeakerHints()) -> list[SpeakerTurn]:
        """The speaker turns of `audio` (16 kHz mono), in time order; none without speech."""
        return self.turns_of(self.voiced(audio), len(audio) / SAMPLE_RATE, hints)

    def voiced(self, audio: Floats, offset: float = 0.0) -> VoicedSegments:
        """The speech of `audio` (16 kHz mono, starting `offset` seconds into a longer
        recording) in segments of one voice each, for `turns_of`."""
        voiced = VoicedSegments()
        for start, end in speech_regions(audio):
            windows = self._encoder.window_vectors(audio[_samples(start, end)], STRIDE_FRAMES)
            for first, last in _pieces(windows):
                begin, finish = _span(first, last, windows.shape[0], start, end)
                if self._voices is None:
                    mean = windows[first:last].mean(axis=0)
                    vector = mean / (np.linalg.norm(mean) + 1e-12)
                else:
                    vector = self._voices.model.embed(audio[_samples(begin, finish)])
                voiced.spans.append((offset + begin, offset + finish))
                voiced.vectors.append(vector)
        return voiced

    def turns_of(
        self, voiced: VoicedSegments, duration: float, hints: SpeakerHints = SpeakerHints()
    ) -> list[SpeakerTurn]:
        """The speaker turns of a recording of `duration` seconds whose speech is `voiced`
        (gathered in one piece, or piece by piece in the order of the audio)."""
        if not voiced.spans:
            return []
        durations = np.array([end - start for start, end in voiced.spans])
        vectors = np.stack(voiced.vectors)
        speakers = _in_order(self._cluster(vectors, durations, hints.bounds()))
        names = _names(speakers, vectors, durations, hints.known, self._known_similarity)
        return [
            replace(turn, name=names.get(turn.speaker))
            for turn in _joined(speakers, voiced.spans, duration)
        ]

    def known(self, name: str, audio: Floats) -> KnownSpeaker:
        """`name`'s voice, as a reference clip (16 kHz mono) of them alone holds it."""
        regions = speech_regions(audio)
        speech = np.concatenate([audio[_samples(s, e)] for s, e in regions]) if regions else audio
        if self._voices is not None:
            return KnownSpeaker(name, self._voices.model.embed(speech), self.encoder)
        return KnownSpeaker(name, self._encoder.embed(speech))


def speech_regions(audio: Floats) -> list[tuple[float, float]]:
    """Where there is speech, in seconds; speech too short to embed is left out. The VAD
    hears the audio a block at a time (it copies what it is given, several times over), and
    speech running across a block's edge is one region."""
    block = VAD_BLOCK_SECONDS * SAMPLE_RATE
    spans: list[list[int]] = []
    for offset in range(0, len(audio), block):
        for chunk in get_speech_timestamps(audio[offset : offset + block], _VAD):
            start, end = offset + chunk["start"], offset + chunk["end"]
            if spans and spans[-1][1] == offset == start:
                spans[-1][1] = end
            else:
                spans.append([start, end])
    return [
        (start / SAMPLE_RATE, end / SAMPLE_RATE)
        for start, end in spans
        if (end - start) / SAMPLE_RATE >= _MIN_SEGMENT_SECONDS
    ]


def _pieces(windows: Floats) -> list[tuple[int, int]]:
    """Ranges of windows of one speaker each, as far as the neighbourhood tells: cut where
    the windows before and after differ most (above CHANGE_DISTANCE), then evenly into
    pieces of at most MAX_SEGMENT_SECONDS."""
    count = windows.shape[0]
    context = CHANGE_CONTEXT
    distance = np.zeros(count)
    for k in range(context, count - context + 1):
        left = windows[k - context : k].mean(axis=0)
        right = windows[k : k + context].mean(axis=0)
        distance[k] = 1 - left @ right / (np.linalg.norm(left) * np.linalg.norm(right) + 1e-12)
    cuts = [0]
    for k in np.argsort(-distance):
        if distance[k] < CHANGE_DISTANCE:
            break
        if all(abs(k - cut) >= context for cut in [*cuts, count]):
            cuts.append(int(k))
    cuts = [*sorted(cuts), count]
    most = max(1, round(MAX_SEGMENT_SECONDS / STEP_SECONDS))
    pieces = []
    for first, last in itertools.pairwise(cuts):
        edges = np.linspace(first, last, -(-(last - first) // most) + 1).round().astype(int)
        pieces += [(int(a), int(b)) for a, b in itertools.pairwise(edges.tolist()) if b > a]
    return pieces


def _span(first: int, last: int, count: int, start: float, end: float) -> tuple[float, float]:
    """The seconds windows `first` to `last` speak for: cut between neighbours' windows."""
    offset = (WINDOW_SECONDS - STEP_SECONDS) / 2
    begin = start if first == 0 else start + first * STEP_SECONDS + offset
    finish = end if last == count else start + last * STEP_SECONDS + offset
    return begin, min(finish, end)


def cluster(
    vectors: Floats,
    durations: npt.NDArray[np.float64],
    bounds: tuple[int, int],
    threshold: float = THRESHOLD,
) -> npt.NDArray[np.int64]:
    """A speaker label for each row of unit `vectors` (segments of `durations` seconds),
    the count within `bounds`; `threshold`: as `THRESHOLD`, for vectors of another encoder
    (a `VoiceModel`'s)."""
    low, high = bounds
    if vectors.shape[0] < 2 or high == 1:
        return np.zeros(vectors.shape[0], dtype=np.int64)
    step = -(-vectors.shape[0] // MAX_CLUSTERED)
    sample = vectors[::step]
    tree = linkage(sample, method="average", metric="cosine")
    if low == high:
        labels = fcluster(tree, t=low, criterion="maxclust")
    else:
        labels = fcluster(tree, t=threshold, criterion="distance")
        if not low <= labels.max() <= high:
            labels = fcluster(tree, t=min(max(labels.max(), low), high), criterion="maxclust")
    similarity = vectors @ _centroids(sample, labels).T
    # fcluster numbers clusters from 1; segments left out of a sample go to the nearest.
    nearest = labels - 1 if step == 1 else np.argmax(similarity, axis=1)
    # A speaker heard for less than MIN_SPEAKER_SECONDS is more likely a stray segment of
    # another than a person: it goes to the nearest of the rest (while the bounds allow).
    while True:
        spoken = np.bincount(nearest, weights=durations, minlength=similarity.shape[1])
        alive = np.flatnonzero(spoken > 0)
        smallest = alive[np.argmin(spoken[alive])]
        if alive.size <= max(low, 1) or spoken[smallest] >= MIN_SPEAKER_SECONDS:
            return np.asarray(nearest, dtype=np.int64)
        similarity[:, smallest] = -np.inf
        moved = nearest == smallest
        nearest[moved] = np.argmax(similarity[moved], axis=1)


def _centroids(vectors: Floats, labels: npt.NDArray[np.int32]) -> Floats:
    return np.stack([vectors[labels == label].mean(axis=0) for label in np.unique(labels)])


def _in_order(labels: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The labels renumbered 0, 1, … in order of first appearance."""
    numbers: dict[int, int] = {}
    return np.array([numbers.setdefault(label, len(numbers)) for label in labels.tolist()])


def _names(
    speakers: npt.NDArray[np.int64],
    vectors: Floats,
    durations: npt.NDArray[np.float64],
    known: Sequence[KnownSpeaker],
    known_similarity: float,
) -> dict[int, str]:
    """Each known person's speaker: the pairing of speakers and people whose voices are
    nearest overall, one speaker each, a pair kept only if more similar than
    `known_similarity`."""
    if not known:
        return {}
    voices = np.stack(
        [
            voice_of(vectors[speakers == speaker], durations[speakers == speaker])
            for speaker in range(int(speakers.max()) + 1)
        ]
    )
    similarity = voices @ np.stack([person.vector for person in known]).T
    rows, columns = linear_sum_assignment(similarity, maximize=True)
    return {
        int(row): known[column].name
        for row, column in zip(rows, columns, strict=True)
        if similarity[row, column] > known_similarity
    }


def voice_of(vectors: Floats, durations: npt.NDArray[np.float64]) -> Floats:
    """One speaker's voice: its segments' vectors weighted by their durations, unit length."""
    weighted = (vectors * durations[:, None]).sum(axis=0)
    unit: Floats = (weighted / (np.linalg.norm(weighted) + 1e-12)).astype(np.float32)
    return unit


def _joined(
    speakers: npt.NDArray[np.int64], segments: Sequence[tuple[float, float]], duration: float
) -> list[SpeakerTurn]:
    runs: list[SpeakerTurn] = []
    for speaker, (start, end) in zip(speakers.tolist(), segments, strict=True):
        if runs and runs[-1].speaker == speaker and start - runs[-1].end < GAP_SECONDS:
            runs[-1] = SpeakerTurn(speaker, runs[-1].start, end)
        else:
            runs.append(SpeakerTurn(speaker, start, end))
    turns = []
    for index, turn in enumerate(runs):
        start, end = max(0.0, turn.start - EDGE_SECONDS), min(duration, turn.end + EDGE_SECONDS)
        if index > 0:
            start = max(start, min(turn.start, (runs[index - 1].end + turn.start) / 2))
        if index + 1 < len(runs):
            end = min(end, max(turn.end, (turn.end + runs[index + 1].start) / 2))
        turns.append(SpeakerTurn(turn.speaker, start, end))
    return turns


def _samples(start: float, end: float) -> slice:
    return slice(round(start * SAMPLE_RATE), round(end * SAMPLE_RATE))


def speaker_name(speaker: int) -> str:
    return f"speaker_{speaker}"


def is_numbered(speaker: str) -> bool:
    """Whether `speaker` is a `speaker_name` (not a known speaker's name)."""
    return _NUMBERED.fullmatch(speaker) is not None


def attributed(segments: Sequence[Segment], turns: Sequence[SpeakerTurn]) -> list[Segment]:
    """`segments` with their speakers: each word is its turn's (the one it overlaps most, else
    the nearest), and a segment whose words change speaker is split there. A segment without
    word times goes whole to the turn it overlaps most. No turns (no speech heard): one
    speaker said whatever was transcribed."""
    if not turns:
        turns = [SpeakerTurn(0, 0.0, float("inf"))]
    said: list[Segment] = []
    for segment in segments:
        if not segment.words:
            said.append(replace(segment, speaker=_speaker_of(segment.start, segment.end, turns)))
            continue
        words = [replace(w, speaker=_speaker_of(w.start, w.end, turns)) for w in segment.words]
        runs: list[list[Word]] = []
        for word in words:
            if runs and runs[-1][-1].speaker == word.speaker:
                runs[-1].append(word)
            else:
                runs.append([word])
        if len(runs) == 1:
            said.append(replace(segment, words=tuple(words), speaker=words[0].speaker))
            continue
        said += [
            replace(
                segment,
                text=text,
                start=run[0].start,
                end=run[-1].end,
                words=tuple(run),
                tokens=(),  # the decoder's tokens are the whole segment's
                speaker=run[0].speaker,
            )
            for run, text in zip(runs, _texts_of(segment.text, runs), strict=True)
        ]
    return said


def _texts_of(text: str, runs: Sequence[Sequence[Word]]) -> list[str]:
    """Each run's part of its segment's `text`, cut where the run's first word starts, so
    the spaces between words (or their absence, in Chinese or Japanese) and the
    punctuation stay as the decoder wrote them. Words that are not found in order in the
    text (a provider's own words) are joined with spaces."""
    starts: list[int] = []
    cursor = 0
    for run in runs:
        for index, word in enumerate(run):
            found = text.find(word.word, cursor)
            if found < 0:
                return [" ".join(word.word for word in run).strip() for run in runs]
            if index == 0:
                starts.append(found)
            cursor = found + len(word.word)
    cuts = [0, *starts[1:], len(text)]
    return [text[start:end].strip() for start, end in itertools.pairwise(cuts)]


def _speaker_of(start: float, end: float, turns: Sequence[SpeakerTurn]) -> str:
    turn = _turn_of(start, end, turns)
    return turn.name or speaker_name(turn.speaker)


def _turn_of(start: float, end: float, turns: Sequence[SpeakerTurn]) -> SpeakerTurn:
    overlaps = [min(end, turn.end) - max(start, turn.start) for turn in turns]
    best = int(np.argmax(overlaps))
    if overlaps[best] <= 0:
        middle = (start + end) / 2
        best = int(np.argmin([max(turn.start - middle, middle - turn.end) for turn in turns]))
    return turns[best]
