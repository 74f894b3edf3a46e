"""Catalogue voices the tests speak with, by engine key and by their stable public id."""

from __future__ import annotations

from voice_service.core.ids import catalogue_voice_id

JOE_KEY = "piper:en_US-joe-medium"
JOE = catalogue_voice_id(JOE_KEY)
GERMAN = catalogue_voice_id("espeak:de")
SPANISH = catalogue_voice_id("kokoro:jm_kumo:es")
# A Voice's fields in the API: the spec's, and beyond it a clone's description (issue 51)
# and resemblance (issue 56), both null on catalogue voices.
VOICE_FIELDS = frozenset(
    {"id", "name", "language", "type", "created_at", "description", "resemblance", "languages"}
)
