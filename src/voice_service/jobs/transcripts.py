"""A completed job's transcript as a file: plain text, SRT or VTT, the same captions the
sync endpoints give."""

from __future__ import annotations

from typing import Literal

from voice_service.engines.protocols import Segment, Word
from voice_service.jobs.schemas import JobTranscript
from voice_service.transcription.captions import srt, vtt

TranscriptFormat = Literal["srt", "vtt", "text"]

MEDIA_TYPES: dict[TranscriptFormat, str] = {
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
    "text": "text/plain; charset=utf-8",
}


def transcript_file(transcript: JobTranscript, format: TranscriptFormat) -> str:
    if format == "text":
        return transcript.text + "\n"
    segments = [
        Segment(
            text=s.text,
            start=s.start,
            end=s.end,
            words=tuple(Word(w.word, w.start, w.end) for w in s.words or ()),
            speaker=s.speaker,
        )
        for s in transcript.segments
    ]
    return srt(segments) if format == "srt" else vtt(segments)
