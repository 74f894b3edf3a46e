"""Which audio an API accepts, and how the audio pipeline's refusals are told to its caller.

Each API has its policy: the native one answers any other file 415, the OpenAI-compatible one
answers as OpenAI does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from voice_service.audio.decode import AudioTooLong, NonFiniteAudio, UndecodableAudio
from voice_service.audio.formats import NATIVE_AUDIO, AcceptedAudio, UnsupportedAudio
from voice_service.core.errors import ApiError, InvalidRequest, UnsupportedMediaType


@dataclass(frozen=True, slots=True)
class AudioPolicy:
    """The audio one API accepts, and its answer for any other file."""

    accepted: AcceptedAudio
    refusal: Callable[[str], ApiError]  # given why the file was refused


def _unsupported_media_type(reason: str) -> ApiError:
    return UnsupportedMediaType(
        f"Unsupported audio file ({reason}). Accepted formats: {NATIVE_AUDIO.text}."
    )


# The spec's five formats, anything else 415 (spec sections 4.2 and 7).
NATIVE_POLICY = AudioPolicy(NATIVE_AUDIO, _unsupported_media_type)


@contextmanager
def audio_errors_as_api_errors(what: str, policy: AudioPolicy = NATIVE_POLICY) -> Iterator[None]:
    """Answer what the audio pipeline refuses: the policy's refusal for anything that is not
    accepted audio, 400 for audio that is too long or holds non-numbers."""
    try:
        yield
    except UnsupportedAudio as exc:
        raise policy.refusal(exc.reason) from None
    except UndecodableAudio as exc:
        raise policy.refusal(str(exc)) from None
    except AudioTooLong as exc:
        raise InvalidRequest(
            f"file: the {what} is longer than the {exc.max_seconds:g} s this service accepts."
        ) from None
    except NonFiniteAudio as exc:
        raise InvalidRequest(f"file: {exc}.") from None
