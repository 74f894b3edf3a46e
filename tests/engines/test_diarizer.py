"""The diarizer over a long recording: its speech gathered piece by piece (as a job does),
four hours of it clustered at once within bounded memory, each person one label throughout."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from bench.diarization_set import voice_clips

from tests.helpers.speakers import CALLER, COMMANDS, READER, spoken
from voice_service.engines.diarization import (
    MAX_CLUSTERED,
    MAX_SPEAKERS,
    THRESHOLD,
    VAD_BLOCK_SECONDS,
    Diarizer,
    SpeakerTurn,
    VoicedSegments,
    attributed,
    cluster,
    speech_regions,
)
from voice_service.engines.protocols import Segment, Word
from voice_service.engines.speaker_embedding import SAMPLE_RATE, SpeakerEncoder

ROUNDS = [
    (person, index)
    for round_ in ((0, 4, 1), (2, 1, 0), (3, 2, 2))
    for person, index in zip((READER, CALLER, COMMANDS), round_, strict=True)
]
HOURS = 4
MEMORY_BOUND = 100 * 2**20  # the most clustering four hours may allocate at once


@pytest.fixture(scope="module")
def diarizer() -> Diarizer:
    return Diarizer(SpeakerEncoder())


def test_four_hours_gathered_piece_by_piece_cluster_in_bounded_memory(diarizer: Diarizer) -> None:
    samples, truth = spoken(ROUNDS, pause=1.0)
    seconds = samples.size / SAMPLE_RATE
    once = diarizer.voiced(samples)
    # The same real conversation, over and over for four hours, as a job's pieces gather it.
    gathered = VoicedSegments()
    copies = int(HOURS * 3600 / seconds)
    for copy in range(copies):
        offset = copy * seconds
        gathered.extend(
            VoicedSegments(
                [(offset + start, offset + end) for start, end in once.spans], once.vectors
            )
        )
    assert len(gathered.spans) > MAX_CLUSTERED  # so the bound, not the input, is tested

    tracemalloc.start()
    try:
        turns = diarizer.turns_of(gathered, copies * seconds)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, f"{peak / 2**20:.0f} MiB"

    # Each person has one label from the first copy to the last.
    people: dict[int, str] = {}
    for turn in turns:
        middle = (turn.start + turn.end) / 2 % seconds
        (person,) = {p for p, start, end in truth if start - 0.25 <= middle <= end + 0.25}
        assert people.setdefault(turn.speaker, person) == person
    assert sorted(people.values()) == sorted({READER, CALLER, COMMANDS})
    assert turns[-1].end > (copies - 1) * seconds
    assert np.diff([turn.start for turn in turns]).min() > 0


def test_speech_across_a_vad_block_is_one_region_and_the_vad_holds_a_block() -> None:
    clip = voice_clips(READER)[0]
    edge = VAD_BLOCK_SECONDS * SAMPLE_RATE
    before = np.zeros(edge - clip.size // 2, dtype=np.float32)
    audio = np.concatenate([before, clip, np.zeros(SAMPLE_RATE, dtype=np.float32)])
    ((start, end),) = speech_regions(audio)
    assert start < VAD_BLOCK_SECONDS < end
    assert end - start > clip.size / SAMPLE_RATE - 1.0

    # Ten minutes: what the VAD allocates at once is a few blocks' worth, not the audio's.
    long = np.tile(audio, 10)
    tracemalloc.start()
    try:
        regions = speech_regions(long)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(regions) == 10
    block_bytes = VAD_BLOCK_SECONDS * SAMPLE_RATE * long.itemsize
    assert peak < 3 * block_bytes, f"{peak / 2**20:.0f} MiB for {long.nbytes / 2**20:.0f} MiB"


def test_the_clustering_threshold_decides_whether_two_voices_are_one() -> None:
    # Two people's segments whose mean vectors lie 0.4 apart in cosine distance: nearer than
    # the d-vectors' THRESHOLD (one person), further than a stronger encoder's (two).
    first, second = np.eye(2, 8, dtype=np.float32)
    angle = np.arccos(0.6)
    other = np.cos(angle) * first + np.sin(angle) * second
    vectors = np.stack([first, first, other, other])
    durations = np.full(4, 5.0)
    assert THRESHOLD > 0.4
    assert set(cluster(vectors, durations, (1, MAX_SPEAKERS)).tolist()) == {0}
    split = cluster(vectors, durations, (1, MAX_SPEAKERS), threshold=0.35)
    assert split.tolist() in ([0, 0, 1, 1], [1, 1, 0, 0])


@pytest.mark.parametrize(
    ("text", "words", "parts"),
    [
        (
            "I read the sample, slowly and clearly.",
            ["I", "read", "the", "sample,", "slowly", "and", "clearly."],
            ["I read the sample,", "slowly and clearly."],
        ),
        # Japanese writes no spaces between words: none are added.
        (
            "今日は晴れです。明日は雨です。",
            ["今日", "は", "晴れ", "です。", "明日", "は", "雨", "です。"],
            ["今日は晴れです。", "明日は雨です。"],
        ),
    ],
)
def test_a_segment_split_between_speakers_keeps_the_decoders_spacing(
    text: str, words: list[str], parts: list[str]
) -> None:
    half = 4  # words the first speaker says, in either case
    timed = tuple(Word(word, float(n), n + 0.9) for n, word in enumerate(words))
    turns = [SpeakerTurn(0, 0.0, half - 0.05), SpeakerTurn(1, half - 0.05, len(words) + 1.0)]
    said = attributed([Segment(text, 0.0, float(len(words)), timed)], turns)
    assert [(segment.text, segment.speaker) for segment in said] == [
        (parts[0], "speaker_0"),
        (parts[1], "speaker_1"),
    ]
