from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from voice_service.engines.manner import SPEEDS
from voice_service.pronunciation.schemas import Locators, locators_of
from voice_service.pronunciation.service import Locator
from voice_service.speech.stitching import MAX_IDS
from voice_service.voices.schemas import EXAMPLE_VOICE_ID

MAX_TEXT_LENGTH = 5000
# Short, and heard right when transcribed back (docs/api.md, Voices).
EXAMPLE_TEXT = "Welcome to Voice Service."


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the text must contain something other than whitespace")
    return text


# Text to speak, in the native API and the OpenAI-compatible one alike.
SpeechText = Annotated[
    str, Field(min_length=1, max_length=MAX_TEXT_LENGTH), AfterValidator(_not_blank)
]


Speed = Annotated[
    float,
    Field(
        ge=SPEEDS[0],
        le=SPEEDS[1],
        description=f"{SPEEDS[0]} to {SPEEDS[1]} times the voice's own pace; 1 by default. "
        "Every engine reaches it by its own timing; billing is unchanged.",
    ),
]


# ElevenLabs' `previous_text` and `next_text`: the text said before and after this one in
# other requests, so that a sentence split between them is said as one; never billed.
NeighbourText = Annotated[
    str | None,
    Field(
        max_length=MAX_TEXT_LENGTH,
        description="The text said before (previous_text) or after (next_text) this one, in "
        "another request: a sentence split between them keeps its intonation. Not billed.",
    ),
]


# ElevenLabs' request stitching: earlier or later speech requests named by their request ids
# in place of their text (speech/stitching.py).
StitchedRequests = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=40)]] | None,
    Field(
        max_length=MAX_IDS,
        description=f"Up to {MAX_IDS} speech requests of the organization (their "
        "X-Request-ID) said before (previous_request_ids) or after (next_request_ids) this "
        "one, in place of previous_text or next_text, which are then ignored. A request is "
        "remembered for VOICE_SERVICE_STITCHING_MINUTES once billed. Not billed.",
    ),
]


# ElevenLabs' `language_code`: the language a multilingual voice says the text in.
LANGUAGE_CODE_PATTERN = r"^[a-z]{2}$"
LanguageCode = Annotated[
    str | None,
    Field(
        pattern=LANGUAGE_CODE_PATTERN,
        description='The language to say the text in (ISO 639-1, e.g. "es"): a clone speaks '
        "every language of its base voice, a catalogue voice only its own; one the voice "
        "does not speak is a 400 naming those it does. The voice's own language by default.",
        examples=["es"],
    ),
]


class VoiceSettings(BaseModel):
    """ElevenLabs' `voice_settings`: only `speed` changes our voices; the others
    (`stability`, `similarity_boost`, `style`, `use_speaker_boost`) are accepted and not
    used."""

    speed: Speed = 1.0


class SpeechRequest(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"text": EXAMPLE_TEXT, "voice_id": EXAMPLE_VOICE_ID}]}
    )

    text: SpeechText = Field(
        description="1 to 5000 characters; billed one unit per character.",
        examples=[EXAMPLE_TEXT],
    )
    voice_id: str = Field(
        min_length=1,
        max_length=100,
        description="An id from GET /voices.",
        examples=[EXAMPLE_VOICE_ID],
    )
    voice_settings: VoiceSettings | None = Field(
        None, description="ElevenLabs' voice settings; `speed` is the one these voices use."
    )
    previous_text: NeighbourText = None
    next_text: NeighbourText = None
    previous_request_ids: StitchedRequests = None
    next_request_ids: StitchedRequests = None
    pronunciation_dictionary_locators: Locators = None
    language_code: LanguageCode = None

    @property
    def locators(self) -> list[Locator] | None:
        return locators_of(self.pronunciation_dictionary_locators)

    @property
    def speed(self) -> float:
        return self.voice_settings.speed if self.voice_settings else 1.0
