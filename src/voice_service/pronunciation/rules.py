"""A dictionary's rules as they are stored (ElevenLabs' JSON shape of a rule), checked, and
made into the engines' `Rule`s."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from voice_service.engines.pronunciation import Alphabet, Rule, ipa_of

MAX_RULES = 10_000  # in one dictionary
MAX_TEXT = 200  # characters of a rule's string_to_replace, alias or phonemes


class StoredRule(TypedDict):
    type: Literal["alias", "phoneme"]
    string_to_replace: str
    alias: NotRequired[str]
    phoneme: NotRequired[str]
    alphabet: NotRequired[str]
    case_sensitive: NotRequired[bool]
    word_boundaries: NotRequired[bool]


class InvalidRule(ValueError):
    """A rule this service cannot say; the message names it."""


def engine_rule(stored: StoredRule) -> Rule:
    """The rule as the engines apply it. Raises `InvalidRule` for phonemes that are not of
    their alphabet, or text out of bounds."""
    text = stored["string_to_replace"]
    if not text.strip() or len(text) > MAX_TEXT:
        raise InvalidRule(f"string_to_replace must have 1 to {MAX_TEXT} characters: {text!r}")
    case_sensitive = stored.get("case_sensitive", True)
    word_boundaries = stored.get("word_boundaries", True)
    if stored["type"] == "alias":
        alias = stored.get("alias", "")
        if len(alias) > MAX_TEXT:
            raise InvalidRule(f"the alias of {text!r} is longer than {MAX_TEXT} characters")
        return Rule(text, alias, None, case_sensitive, word_boundaries)
    try:
        alphabet = Alphabet(stored.get("alphabet", Alphabet.IPA))
        phonemes = ipa_of(stored.get("phoneme", ""), alphabet)
    except ValueError as error:  # an unknown alphabet, or `InvalidPhonemes`
        raise InvalidRule(f"the phonemes of {text!r}: {error}") from None
    return Rule(text, None, phonemes, case_sensitive, word_boundaries)


def checked(rules: list[StoredRule]) -> list[StoredRule]:
    """`rules`, each one said (`engine_rule`), and no more than a dictionary holds."""
    if len(rules) > MAX_RULES:
        raise InvalidRule(f"a dictionary holds at most {MAX_RULES} rules, not {len(rules)}")
    for rule in rules:
        engine_rule(rule)
    return rules
