"""Pronunciation dictionaries on the wire, in ElevenLabs' shapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, StrictBool
from pydantic.config import JsonDict

from voice_service.core.errors import InvalidRequest
from voice_service.core.models import PronunciationDictionary
from voice_service.pronunciation.rules import MAX_RULES, MAX_TEXT, StoredRule
from voice_service.pronunciation.service import MAX_LOCATORS, Locator

MAX_NAME_LENGTH = 100
MAX_PLS_BYTES = 1024 * 1024  # a PLS file uploaded
MAX_DESCRIPTION_LENGTH = 1000

RuleText = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]


class _RuleIn(BaseModel):
    string_to_replace: RuleText = Field(description="The text the rule says, as written.")
    case_sensitive: StrictBool = Field(True, description="Match only this case (PLS's own rule).")
    word_boundaries: StrictBool = Field(True, description="Match only whole words.")


class AliasRule(_RuleIn):
    type: Literal["alias"]
    alias: str = Field(max_length=MAX_TEXT, description="What to say instead.")


class PhonemeRule(_RuleIn):
    type: Literal["phoneme"]
    phoneme: RuleText = Field(description='IPA, or CMU Arpabet ("EH1 N JH IH0 N").')
    alphabet: Literal["ipa", "cmu-arpabet"] = "ipa"


RuleIn = Annotated[AliasRule | PhonemeRule, Field(discriminator="type")]


def form_fields(fields: Mapping[str, str]) -> tuple[str, str | None]:
    """A PLS upload form's name and description, checked as the JSON bodies' are."""
    name = fields.get("name", "").strip()
    description = fields.get("description", "").strip() or None
    if not name or len(name) > MAX_NAME_LENGTH:
        raise InvalidRequest(f"name: 1 to {MAX_NAME_LENGTH} characters are required.")
    if description is not None and len(description) > MAX_DESCRIPTION_LENGTH:
        raise InvalidRequest(f"description: at most {MAX_DESCRIPTION_LENGTH} characters.")
    return name, description


def stored(rules: list[AliasRule | PhonemeRule]) -> list[StoredRule]:
    return [cast(StoredRule, rule.model_dump()) for rule in rules]


_ALIAS_EXAMPLE: JsonDict = {"type": "alias", "string_to_replace": "nginx", "alias": "engine x"}
_PHONEME_EXAMPLE: JsonDict = {
    "type": "phoneme",
    "string_to_replace": "Bob",
    "phoneme": "T AA1 M",
    "alphabet": "cmu-arpabet",
}


class FromRules(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"name": "Our stack", "rules": [_ALIAS_EXAMPLE, _PHONEME_EXAMPLE]}]
        }
    )

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    description: str | None = Field(None, max_length=MAX_DESCRIPTION_LENGTH)
    rules: list[RuleIn] = Field(max_length=MAX_RULES)


class RulesIn(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"rules": [_ALIAS_EXAMPLE]}]})

    rules: list[RuleIn] = Field(min_length=1, max_length=MAX_RULES)


class RuleStrings(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"rule_strings": ["nginx"]}]})

    rule_strings: list[RuleText] = Field(min_length=1, max_length=MAX_RULES)


class DictionaryPatch(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"archived": True}]})

    name: str | None = Field(None, min_length=1, max_length=MAX_NAME_LENGTH)
    archived: StrictBool | None = None
    default: StrictBool | None = Field(
        None,
        description=f"One of the organization's defaults (at most {MAX_LOCATORS}): speech "
        "that names no dictionaries, and all of Wyoming's, is said with them.",
    )


class LocatorIn(BaseModel):
    """ElevenLabs' `pronunciation_dictionary_locators` item."""

    pronunciation_dictionary_id: str = Field(min_length=1, max_length=40)
    version_id: str | None = Field(
        None, max_length=40, description="A version of it; the latest when left out."
    )

    def locator(self) -> Locator:
        return Locator(self.pronunciation_dictionary_id, self.version_id)


Locators = Annotated[
    list[LocatorIn] | None,
    Field(
        max_length=MAX_LOCATORS,
        description=f"Up to {MAX_LOCATORS} of the organization's pronunciation dictionaries; "
        "where two have a rule for the same text, the first named wins. Left out, the "
        "organization's default dictionaries apply; an empty list says none. Never billed.",
    ),
]


def locators_of(items: list[LocatorIn] | None) -> list[Locator] | None:
    """The dictionaries a request names; None where it names none (the organization's
    defaults apply) rather than an empty list (it wants none)."""
    return None if items is None else [item.locator() for item in items]


class DictionaryOut(BaseModel):
    id: str
    name: str
    description: str | None
    latest_version_id: str
    latest_version_rules_num: int
    creation_time_unix: int
    archived_time_unix: int | None
    default: bool  # one of the organization's defaults
    created_by: str  # the organization: every key of it may use and change it
    permission_on_resource: Literal["admin"] = "admin"

    @classmethod
    def of(cls, row: PronunciationDictionary) -> DictionaryOut:
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            latest_version_id=row.latest_version_id,
            latest_version_rules_num=row.latest_rules,
            creation_time_unix=int(row.created_at.timestamp()),
            archived_time_unix=int(row.archived_at.timestamp()) if row.archived_at else None,
            default=row.default_since is not None,
            created_by=row.org_id,
        )


class DictionaryCreated(DictionaryOut):
    """What add-from-file and add-from-rules answer: the dictionary and its first version."""

    version_id: str
    version_rules_num: int

    @classmethod
    def of(cls, row: PronunciationDictionary) -> DictionaryCreated:
        return cls(
            **DictionaryOut.of(row).model_dump(),
            version_id=row.latest_version_id,
            version_rules_num=row.latest_rules,
        )


class DictionaryList(BaseModel):
    pronunciation_dictionaries: list[DictionaryOut]
    next_cursor: str | None
    has_more: bool


class VersionOut(BaseModel):
    """What add-rules and remove-rules answer: the new version."""

    id: str
    version_id: str
    version_rules_num: int

    @classmethod
    def of(cls, row: PronunciationDictionary) -> VersionOut:
        return cls(id=row.id, version_id=row.latest_version_id, version_rules_num=row.latest_rules)


class Deleted(BaseModel):
    id: str
    deleted: Literal[True] = True
