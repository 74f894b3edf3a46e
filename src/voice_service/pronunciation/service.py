"""An organization's pronunciation dictionaries: made from rules or a PLS file, changed a
version at a time, and the lexicon a speech request's locators name.

Versions are never changed once written, so a lexicon is compiled once per set of versions
and kept (`_LEXICONS`) on every node alike. A new version replaces the latest only where the
latest is still the one it was made from, so two nodes changing one dictionary at once each
build on the other's change.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import delete, func, select
from sqlalchemy import update as update_rows
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.errors import InvalidRequest, NotFound
from voice_service.core.ids import new_id
from voice_service.core.models import PronunciationDictionary, PronunciationDictionaryVersion
from voice_service.engines.manner import PLAIN, Manner
from voice_service.engines.pronunciation import NO_LEXICON, Lexicon
from voice_service.kit.db import transaction
from voice_service.pronunciation import pls
from voice_service.pronunciation.rules import (
    MAX_RULES,
    InvalidRule,
    StoredRule,
    checked,
    engine_rule,
)
from voice_service.runtime import Runtime
from voice_service.tenancy.audit import Action, Actor

MAX_DICTIONARIES = 100  # per organization
MAX_LOCATORS = 3  # per request, as ElevenLabs takes
_LEXICONS_KEPT = 64
_LEXICONS: OrderedDict[tuple[str, ...], Lexicon] = OrderedDict()
_NEW_VERSION_TRIES = 5
# What a change makes of the latest version's rules.
_Change = Callable[[list[StoredRule]], list[StoredRule]]


@dataclass(frozen=True, slots=True)
class Locator:
    dictionary_id: str
    version_id: str | None = None  # None: the latest


async def create(
    runtime: Runtime,
    org_id: str,
    name: str,
    rules: list[StoredRule],
    *,
    description: str | None = None,
    language: str | None = None,
    actor: Actor | None = None,
) -> PronunciationDictionary:
    """A new dictionary holding `rules` (its first version); a console user's `actor` is
    audited in its transaction."""
    await _check(rules)
    now = runtime.books.clock()
    dictionary = PronunciationDictionary(
        id=new_id("pd"),
        org_id=org_id,
        name=name,
        description=description,
        language=language,
        latest_version_id=new_id("pdv"),
        latest_rules=len(rules),
        created_at=now,
    )
    async with transaction(runtime.sessions) as session:
        held = await session.scalar(
            select(func.count()).where(PronunciationDictionary.org_id == org_id)
        )
        if (held or 0) >= MAX_DICTIONARIES:
            raise InvalidRequest(
                f"An organization holds at most {MAX_DICTIONARIES} pronunciation dictionaries; "
                "delete one first."
            )
        session.add(dictionary)
        session.add(_version(dictionary.latest_version_id, dictionary.id, rules, now))
        if actor is not None:
            actor.record(session, Action.DICTIONARY_CREATED, f"{dictionary.id} in {org_id}")
    return dictionary


async def create_from_file(
    runtime: Runtime,
    org_id: str,
    name: str,
    document: bytes,
    *,
    description: str | None = None,
    actor: Actor | None = None,
) -> PronunciationDictionary:
    """A new dictionary from a PLS file's rules."""
    try:
        lexicon = await asyncio.to_thread(pls.read, document, MAX_RULES)
    except pls.InvalidLexicon as error:
        raise InvalidRequest(f"file: {error}.") from None
    return await create(
        runtime,
        org_id,
        name,
        lexicon.rules,
        description=description,
        language=lexicon.language,
        actor=actor,
    )


async def listed(
    runtime: Runtime, org_id: str, *, offset: int, limit: int
) -> Sequence[PronunciationDictionary]:
    """The organization's dictionaries, newest first."""
    async with runtime.sessions() as session:
        found = await session.scalars(
            select(PronunciationDictionary)
            .where(PronunciationDictionary.org_id == org_id)
            .order_by(PronunciationDictionary.created_at.desc(), PronunciationDictionary.id)
            .offset(offset)
            .limit(limit)
        )
        return list(found)


async def get(runtime: Runtime, org_id: str, dictionary_id: str) -> PronunciationDictionary:
    """The organization's dictionary; another's is not found, as one that never was."""
    async with runtime.sessions() as session:
        return await _find(session, org_id, dictionary_id)


async def rules_of(
    runtime: Runtime, org_id: str, dictionary_id: str, version_id: str
) -> tuple[PronunciationDictionary, list[StoredRule]]:
    """A version of the organization's dictionary, with its rules."""
    async with runtime.sessions() as session:
        dictionary = await _find(session, org_id, dictionary_id)
        version = await session.get(PronunciationDictionaryVersion, version_id)
        if version is None or version.dictionary_id != dictionary.id:
            raise NotFound(f"Dictionary {dictionary_id!r} has no version {version_id!r}.")
        return dictionary, _stored(version.rules)


async def add_rules(
    runtime: Runtime, org_id: str, dictionary_id: str, rules: list[StoredRule]
) -> PronunciationDictionary:
    """A new version with `rules` added; each replaces a rule for the same text."""
    replaced = {rule["string_to_replace"] for rule in rules}
    return await _new_version(
        runtime,
        org_id,
        dictionary_id,
        lambda old: [rule for rule in old if rule["string_to_replace"] not in replaced] + rules,
    )


async def remove_rules(
    runtime: Runtime, org_id: str, dictionary_id: str, texts: Sequence[str]
) -> PronunciationDictionary:
    """A new version without the rules for `texts`."""
    removed = set(texts)
    return await _new_version(
        runtime,
        org_id,
        dictionary_id,
        lambda old: [rule for rule in old if rule["string_to_replace"] not in removed],
    )


async def update(
    runtime: Runtime,
    org_id: str,
    dictionary_id: str,
    *,
    name: str | None = None,
    archived: bool | None = None,
    default: bool | None = None,
) -> PronunciationDictionary:
    """Rename the dictionary, archive it (requests may no longer name it, and it is no
    longer a default) or restore it, or make it one of the organization's defaults (the
    dictionaries that speech naming none is said with, the earliest made first) or not."""
    async with transaction(runtime.sessions) as session:
        dictionary = await _find(session, org_id, dictionary_id)
        if name is not None:
            dictionary.name = name
        if archived is not None:
            dictionary.archived_at = runtime.books.clock() if archived else None
        if default and dictionary.archived_at is not None:
            raise InvalidRequest("An archived dictionary cannot be a default.")
        if dictionary.archived_at is not None or default is False:
            dictionary.default_since = None
        elif default and dictionary.default_since is None:
            if len(await _defaults(session, org_id)) >= MAX_LOCATORS:
                raise InvalidRequest(
                    f"An organization has at most {MAX_LOCATORS} default dictionaries: "
                    "make one of them not a default first."
                )
            dictionary.default_since = runtime.books.clock()
    return dictionary


async def remove(
    runtime: Runtime, org_id: str, dictionary_id: str, *, actor: Actor | None = None
) -> None:
    """Delete the dictionary and every version of it; a console user's `actor` is audited
    in the same transaction."""
    async with transaction(runtime.sessions) as session:
        dictionary = await _find(session, org_id, dictionary_id)
        await session.execute(
            delete(PronunciationDictionaryVersion).where(
                PronunciationDictionaryVersion.dictionary_id == dictionary.id
            )
        )
        await session.delete(dictionary)
        if actor is not None:
            actor.record(session, Action.DICTIONARY_DELETED, f"{dictionary.id} in {org_id}")


async def with_dictionaries(
    runtime: Runtime, org_id: str, locators: Sequence[Locator] | None, manner: Manner = PLAIN
) -> Manner:
    """`manner` with the lexicon of the dictionaries `locators` name, or of the
    organization's defaults when it names none (None), which a voice that cannot take
    dictionaries goes without (`lexicon_of` says what is refused)."""
    lexicon = await lexicon_of(runtime, org_id, locators)
    return replace(manner, lexicon=lexicon, lexicon_by_default=locators is None)


async def lexicon_of(runtime: Runtime, org_id: str, locators: Sequence[Locator] | None) -> Lexicon:
    """The rules of the dictionaries `locators` name, the first named first, or of the
    organization's defaults when `locators` is None. A dictionary or version the
    organization does not have is not found; an archived one is refused."""
    if locators is not None and len(locators) > MAX_LOCATORS:
        raise InvalidRequest(
            f"pronunciation_dictionary_locators: at most {MAX_LOCATORS} dictionaries."
        )
    if locators == []:
        return NO_LEXICON
    async with runtime.sessions() as session:
        if locators is None:
            versions = [row.latest_version_id for row in await _defaults(session, org_id)]
        else:
            versions = [await _version_named(session, org_id, locator) for locator in locators]
        if not versions:
            return NO_LEXICON
        key = tuple(versions)
        lexicon = _LEXICONS.get(key)
        if lexicon is None:
            rows = await session.scalars(
                select(PronunciationDictionaryVersion).where(
                    PronunciationDictionaryVersion.id.in_(versions)
                )
            )
            by_id = {row.id: _stored(row.rules) for row in rows}
            # Off the event loop: three dictionaries of 10,000 rules take a good part of a
            # second to compile.
            lexicon = await asyncio.to_thread(_compiled, [by_id[version] for version in versions])
    _LEXICONS[key] = lexicon
    _LEXICONS.move_to_end(key)
    while len(_LEXICONS) > _LEXICONS_KEPT:
        _LEXICONS.popitem(last=False)
    return lexicon


async def _defaults(session: AsyncSession, org_id: str) -> list[PronunciationDictionary]:
    """The organization's default dictionaries, the earliest made first. Two nodes making a
    fourth at once could each see two, so only the first three are ever used."""
    found = await session.scalars(
        select(PronunciationDictionary)
        .where(
            PronunciationDictionary.org_id == org_id,
            PronunciationDictionary.default_since.is_not(None),
        )
        .order_by(PronunciationDictionary.default_since, PronunciationDictionary.id)
        .limit(MAX_LOCATORS)
    )
    return list(found)


async def _version_named(session: AsyncSession, org_id: str, locator: Locator) -> str:
    dictionary = await _find(session, org_id, locator.dictionary_id)
    if dictionary.archived_at is not None:
        raise InvalidRequest(f"Pronunciation dictionary {dictionary.id!r} is archived.")
    if locator.version_id is None:
        return dictionary.latest_version_id
    owner = await session.scalar(
        select(PronunciationDictionaryVersion.dictionary_id).where(
            PronunciationDictionaryVersion.id == locator.version_id
        )
    )
    if owner != dictionary.id:
        raise NotFound(f"Dictionary {dictionary.id!r} has no version {locator.version_id!r}.")
    return locator.version_id


async def _new_version(
    runtime: Runtime,
    org_id: str,
    dictionary_id: str,
    change: _Change,
) -> PronunciationDictionary:
    for _ in range(_NEW_VERSION_TRIES):
        async with transaction(runtime.sessions) as session:
            dictionary = await _find(session, org_id, dictionary_id)
            latest = await session.get(PronunciationDictionaryVersion, dictionary.latest_version_id)
            assert latest is not None
            rules = change(_stored(latest.rules))
            await _check(rules)
            now = runtime.books.clock()
            version_id = new_id("pdv")
            moved = await session.execute(
                update_rows(PronunciationDictionary)
                .where(
                    PronunciationDictionary.id == dictionary.id,
                    PronunciationDictionary.latest_version_id == latest.id,
                )
                .values(latest_version_id=version_id, latest_rules=len(rules))
            )
            if moved.rowcount == 1:  # type: ignore[attr-defined]
                session.add(_version(version_id, dictionary.id, rules, now))
                dictionary.latest_version_id, dictionary.latest_rules = version_id, len(rules)
                return dictionary
    raise InvalidRequest("The dictionary is being changed by other requests; try again.")


def _compiled(dictionaries: list[list[StoredRule]]) -> Lexicon:
    return Lexicon(engine_rule(rule) for rules in dictionaries for rule in rules)


async def _check(rules: list[StoredRule]) -> None:
    """`rules` each said, off the event loop (10,000 of them take a tenth of a second)."""
    try:
        await asyncio.to_thread(checked, rules)
    except InvalidRule as error:
        raise InvalidRequest(f"rules: {error}.") from None


async def _find(session: AsyncSession, org_id: str, dictionary_id: str) -> PronunciationDictionary:
    found = await session.scalar(
        select(PronunciationDictionary).where(
            PronunciationDictionary.id == dictionary_id,
            PronunciationDictionary.org_id == org_id,
        )
    )
    if found is None:
        raise NotFound(f"Pronunciation dictionary {dictionary_id!r} not found.")
    return found


def _version(
    version_id: str, dictionary_id: str, rules: list[StoredRule], now: datetime
) -> PronunciationDictionaryVersion:
    return PronunciationDictionaryVersion(
        id=version_id,
        dictionary_id=dictionary_id,
        rules=[dict(rule) for rule in rules],
        created_at=now,
    )


def _stored(rules: list[dict[str, Any]]) -> list[StoredRule]:
    return cast(list[StoredRule], rules)  # written by `_version` from checked rules
