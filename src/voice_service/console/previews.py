"""Voice previews: a short fixed sentence per voice, made once per process and kept.

Not billed: the text is ours and fixed, so the work per voice is bounded and cached."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from voice_service.books.ledger import Ledger
from voice_service.core.models import Voice
from voice_service.speech.service import speak
from voice_service.web.context import AppContext

MAX_CACHED = 64
SENTENCES = {
    "en": "Hello! This is how I sound.",
    "es": "¡Hola! Así suena mi voz.",
    "fr": "Bonjour ! Voici ma voix.",
    "de": "Hallo! So klingt meine Stimme.",
    "it": "Ciao! Questa è la mia voce.",
    "pt": "Olá! Esta é a minha voz.",
    "nl": "Hallo! Zo klinkt mijn stem.",
    "pl": "Cześć! Tak brzmi mój głos.",
    "ja": "こんにちは。これが私の声です。",
}


def preview_text(language: str | None) -> str:
    code = (language or "en").split("-")[0].lower()
    return SENTENCES.get(code, SENTENCES["en"])


class Previews:
    def __init__(self) -> None:
        self._audio: OrderedDict[str, bytes] = OrderedDict()
        self._lock = asyncio.Lock()

    async def get(self, context: AppContext, voice: Voice, ledger: Ledger) -> bytes:
        async with self._lock:  # one synthesis at a time: previews never crowd the pool
            audio = self._audio.get(voice.id)
            if audio is None:
                audio = await speak(context, voice, preview_text(voice.language), ledger)
                self._audio[voice.id] = audio
                if len(self._audio) > MAX_CACHED:
                    self._audio.popitem(last=False)
            self._audio.move_to_end(voice.id)
            return audio
