"""A transcript in each of OpenAI's response formats."""

from __future__ import annotations

import json
from typing import Any

from voice_service.engines.diarization import is_numbered
from voice_service.openai_api.schemas import TranscriptFormat
from voice_service.transcription.captions import srt, vtt
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
    if fmt is TranscriptFormat.DIARIZED_JSON:
        body = diarized_json(transcript)
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


def diarized_json(transcript: TimedTranscript) -> dict[str, Any]:
    """OpenAI's diarized transcript: its speakers lettered A, B, … in order of first speech."""
    return {
        "task": "transcribe",
        "duration": float(transcript.info.duration_seconds),
        "text": transcript.text,
        "segments": [
            {
                "type": "transcript.text.segment",
                "id": f"seg_{index}",
                "start": segment.start,
                "end": segment.end,
                "text": segment.text.strip(),
                "speaker": _letters(segment.speaker),
            }
            for index, segment in enumerate(transcript.segments)
        ],
    }


def _letters(speaker: str | None) -> str:
    """speaker_0 → A, …, speaker_25 → Z, speaker_26 → AA, …; a known speaker's name as it
    is."""
    if speaker is not None and not is_numbered(speaker):
        return speaker
    number = int((speaker or "speaker_0").removeprefix("speaker_"))
    letters = ""
    while True:
        number, digit = divmod(number, 26)
        letters = chr(ord("A") + digit) + letters
        if number == 0:
            return letters
        number -= 1
