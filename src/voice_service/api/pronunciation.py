"""/pronunciation-dictionaries: an organization's rules for saying words, in ElevenLabs'
shape; a speech request names up to three in `pronunciation_dictionary_locators`."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from voice_service.core.vocabulary import Scope
from voice_service.pronunciation import pls, service
from voice_service.pronunciation.schemas import (
    MAX_DESCRIPTION_LENGTH,
    MAX_NAME_LENGTH,
    MAX_PLS_BYTES,
    Deleted,
    DictionaryCreated,
    DictionaryList,
    DictionaryOut,
    DictionaryPatch,
    FromRules,
    RulesIn,
    RuleStrings,
    VersionOut,
    form_fields,
    stored,
)
from voice_service.tenancy.principal import Principal
from voice_service.web.deps import Context, require
from voice_service.web.schemas import (
    error_responses,
    json_request_body,
    multipart_request_body,
    parse_json,
)
from voice_service.web.uploads import receive_upload

router = APIRouter(tags=["pronunciation dictionaries"])

# Dictionaries are part of making speech: a key that may speak may keep them.
Keeper = Annotated[Principal, Depends(require(Scope.TEXT_TO_SPEECH))]
DictionaryId = Annotated[
    str, Path(openapi_examples={"a dictionary": {"value": "pd_5e1a9c3b7d2f4e6a8b0c1d2e"}})
]
VersionId = Annotated[
    str, Path(openapi_examples={"a version": {"value": "pdv_0c4e8a2b6d1f3a5c7e9b1d3f"}})
]

_FILE_BODY = multipart_request_body(
    {
        "name": {"type": "string", "maxLength": MAX_NAME_LENGTH, "examples": ["Our products"]},
        "file": {
            "type": "string",
            "format": "binary",
            "description": "A PLS 1.0 lexicon (alias and phoneme lexemes, IPA or x-cmu), "
            "at most 1 MiB (413) and 10,000 rules.",
        },
        "description": {
            "type": "string",
            "maxLength": MAX_DESCRIPTION_LENGTH,
            "examples": ["Product names and the team's jargon."],
        },
    },
    required=["name", "file"],
)


@router.post(
    "/pronunciation-dictionaries/add-from-file",
    summary="Create a pronunciation dictionary from a PLS file",
    status_code=201,
    response_model=DictionaryCreated,
    responses=error_responses(400, 413),
    openapi_extra=_FILE_BODY,
)
async def add_from_file(request: Request, context: Context, principal: Keeper) -> DictionaryCreated:
    async with receive_upload(
        request, MAX_PLS_BYTES, context.uploads_dir, what="a PLS file"
    ) as upload:
        name, description = form_fields(upload.fields)
        document = await asyncio.to_thread(upload.path.read_bytes)
    dictionary = await service.create_from_file(
        context, principal.org_id, name, document, description=description
    )
    return DictionaryCreated.of(dictionary)


@router.post(
    "/pronunciation-dictionaries/add-from-rules",
    summary="Create a pronunciation dictionary from rules",
    status_code=201,
    response_model=DictionaryCreated,
    responses=error_responses(400),
    openapi_extra=json_request_body(FromRules),
)
async def add_from_rules(
    request: Request, context: Context, principal: Keeper
) -> DictionaryCreated:
    body = await parse_json(request, FromRules)
    dictionary = await service.create(
        context, principal.org_id, body.name, stored(body.rules), description=body.description
    )
    return DictionaryCreated.of(dictionary)


@router.get(
    "/pronunciation-dictionaries",
    summary="The organization's pronunciation dictionaries, newest first",
    response_model=DictionaryList,
    responses=error_responses(400),
)
async def list_dictionaries(
    context: Context,
    principal: Keeper,
    cursor: Annotated[str | None, Query(pattern=r"^\d{1,9}$")] = None,
    page_size: Annotated[int, Query(ge=1, le=100)] = 30,
) -> DictionaryList:
    offset = int(cursor or 0)
    found = await service.listed(context, principal.org_id, offset=offset, limit=page_size + 1)
    more = len(found) > page_size
    return DictionaryList(
        pronunciation_dictionaries=[DictionaryOut.of(row) for row in found[:page_size]],
        next_cursor=str(offset + page_size) if more else None,
        has_more=more,
    )


@router.get(
    "/pronunciation-dictionaries/{dictionary_id}",
    summary="One pronunciation dictionary",
    response_model=DictionaryOut,
    responses=error_responses(404),
)
async def get_dictionary(
    dictionary_id: DictionaryId, context: Context, principal: Keeper
) -> DictionaryOut:
    return DictionaryOut.of(await service.get(context, principal.org_id, dictionary_id))


@router.post(
    "/pronunciation-dictionaries/{dictionary_id}/add-rules",
    summary="Add rules (each replaces a rule for the same text): a new version",
    response_model=VersionOut,
    responses=error_responses(400, 404),
    openapi_extra=json_request_body(RulesIn),
)
async def add_rules(
    dictionary_id: DictionaryId, request: Request, context: Context, principal: Keeper
) -> VersionOut:
    body = await parse_json(request, RulesIn)
    changed = await service.add_rules(context, principal.org_id, dictionary_id, stored(body.rules))
    return VersionOut.of(changed)


@router.post(
    "/pronunciation-dictionaries/{dictionary_id}/remove-rules",
    summary="Remove the rules for some texts: a new version",
    response_model=VersionOut,
    responses=error_responses(400, 404),
    openapi_extra=json_request_body(RuleStrings),
)
async def remove_rules(
    dictionary_id: DictionaryId, request: Request, context: Context, principal: Keeper
) -> VersionOut:
    body = await parse_json(request, RuleStrings)
    changed = await service.remove_rules(
        context, principal.org_id, dictionary_id, body.rule_strings
    )
    return VersionOut.of(changed)


@router.get(
    "/pronunciation-dictionaries/{dictionary_id}/{version_id}/download",
    summary="A version's rules as a PLS file",
    response_class=Response,
    responses={
        200: {"content": {pls.MEDIA_TYPE: {"schema": {"type": "string"}}}},
        **error_responses(404),
    },
)
async def download(
    dictionary_id: DictionaryId, version_id: VersionId, context: Context, principal: Keeper
) -> Response:
    dictionary, rules = await service.rules_of(context, principal.org_id, dictionary_id, version_id)
    return Response(
        pls.write(rules, dictionary.language),
        media_type=pls.MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{dictionary.id}.pls"'},
    )


@router.patch(
    "/pronunciation-dictionaries/{dictionary_id}",
    summary="Rename a pronunciation dictionary, archive or restore it, or make it a default",
    response_model=DictionaryOut,
    responses=error_responses(400, 404),
    openapi_extra=json_request_body(DictionaryPatch),
)
async def update_dictionary(
    dictionary_id: DictionaryId, request: Request, context: Context, principal: Keeper
) -> DictionaryOut:
    body = await parse_json(request, DictionaryPatch)
    changed = await service.update(
        context,
        principal.org_id,
        dictionary_id,
        name=body.name,
        archived=body.archived,
        default=body.default,
    )
    return DictionaryOut.of(changed)


@router.delete(
    "/pronunciation-dictionaries/{dictionary_id}",
    summary="Delete a pronunciation dictionary and all its versions",
    response_model=Deleted,
    responses=error_responses(404),
)
async def delete_dictionary(
    dictionary_id: DictionaryId, context: Context, principal: Keeper
) -> Deleted:
    await service.remove(context, principal.org_id, dictionary_id)
    return Deleted(id=dictionary_id)
