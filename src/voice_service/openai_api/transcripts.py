"""A transcript in each of OpenAI's response formats."""

from __future__ import annotations

import json
from typing import Any

from voice_service.engines.protocols import Segment
from voice_service.openai_api.schemas import TranscriptFormat
from voice_service.transcription.service import TimedTranscript, billed_seconds


def usage(transcript: TimedTranscript) -> dict[str, Any]:
    """What the request is billed: one unit per started second, as OpenAI bills whisper-1."""
    return {"type": "duration", "seconds": billed_seconds(transcript.info.duration_seconds)}


def render(
    transcript: TimedTranscript,
    fmt: TranscriptFormat,
    task: str,
    *,
    words: bool,
    segments: bool,
    temperature: float,
) -> tuple[bytes, str]:
    """The body and its media type."""
    if fmt is TranscriptFormat.TEXT:
        return (transcript.text + "\n").encode(), "text/plain; charset=utf-8"
    if fmt is TranscriptFormat.SRT:
        return srt(transcript.segments).encode(), "application/x-subrip; charset=utf-8"
    if fmt is TranscriptFormat.VTT:
        return vtt(transcript.segments).encode(), "text/vtt; charset=utf-8"
    body: dict[str, Any] = {"text": transcript.text}
    if fmt is TranscriptFormat.VERBOSE_JSON:
        body = verbose_json(
            transcript, task, words=words, segments=segments, temperature=temperature
        )
    body["usage"] = usage(transcript)
    return json.dumps(body, ensure_ascii=False).encode(), "application/json"


def verbose_json(
    transcript: TimedTranscript, task: str, *, words: bool, segments: bool, temperature: float
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": task,
        "language": transcript.info.language,
        "duration": float(transcript.info.duration_seconds),
        "text": transcript.text,
    }
    if segments:
        body["segments"] = [
            {
                "id": index,
                "seek": 0,
                "start": segment.start,
                "end": segment.end,
                "text": segment.text,
                "tokens": list(segment.tokens),
                "temperature": temperature,
                "avg_logprob": segment.avg_logprob,
                "compression_ratio": segment.compression_ratio,
                "no_speech_prob": segment.no_speech_prob,
            }
            for index, segment in enumerate(transcript.segments)
        ]
    if words:
        body["words"] = [
            {"word": word.word, "start": word.start, "end": word.end}
            for segment in transcript.segments
            for word in segment.words
        ]
    return body


def srt(segments: list[Segment]) -> str:
    return "".join(
        f"{index}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text}\n\n"
        for index, s in enumerate(segments, start=1)
    )


def vtt(segments: list[Segment]) -> str:
    cues = "".join(
        f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text}\n\n" for s in segments
    )
    return "WEBVTT\n\n" + cues


def _clock(seconds: float, decimal_mark: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal_mark}{millis:03d}"
