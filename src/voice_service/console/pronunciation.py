"""The pronunciation page: the organization's dictionaries, newest first, and a new one made
from a PLS file; one dictionary's page: the rules of its latest version, that version as a
PLS file, and whether it is one of the organization's defaults; deleting one. Every action
is its twin's in api/pronunciation.py (pronunciation/service.py), scoped by the organization
in the URL."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Final, TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response

from voice_service.console.auth import (
    ActingUser,
    CurrentOrg,
    PageNotFound,
    SignedInUser,
    checked_form,
)
from voice_service.console.pages import CONSOLE_PREFIX, redirect, render
from voice_service.console.security import check_csrf, secure_headers
from voice_service.console.words import quantity
from voice_service.core.errors import ApiError, NotFound
from voice_service.core.models import Organization
from voice_service.core.vocabulary import megabytes
from voice_service.pronunciation import pls, service
from voice_service.pronunciation.rules import MAX_RULES
from voice_service.pronunciation.schemas import (
    MAX_DESCRIPTION_LENGTH,
    MAX_NAME_LENGTH,
    MAX_PLS_BYTES,
    form_fields,
)
from voice_service.tenancy.console_sessions import SignedIn
from voice_service.web.deps import Context
from voice_service.web.uploads import receive_upload

router = APIRouter()
T = TypeVar("T")

# A dictionary holds up to MAX_RULES: past this many the page stops, and the file has all.
RULES_SHOWN: Final = 1000
ALPHABET_NAMES: Final = {"ipa": "IPA", "cmu-arpabet": "CMU Arpabet"}


@router.get("/orgs/{org_id}/pronunciation")
async def dictionaries_page(
    request: Request,
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    created: str = "",
) -> Response:
    """`created` names the dictionary just made (the upload form's redirect), shown with a
    notice and highlighted."""
    return await _dictionaries_page(request, context, user, org, created=created)


async def _dictionaries_page(
    request: Request,
    context: Context,
    user: SignedIn,
    org: Organization,
    *,
    status: int = 200,
    error: str | None = None,
    form: dict[str, str] | None = None,
    created: str = "",
) -> Response:
    # An organization holds at most MAX_DICTIONARIES: one page lists them all.
    dictionaries = await service.listed(context, org.id, offset=0, limit=service.MAX_DICTIONARIES)
    new = next((found for found in dictionaries if found.id == created), None)
    notice = None
    if new is not None:
        notice = f"Dictionary “{new.name}” created with {quantity(new.latest_rules, 'rule')}."
    return render(
        request,
        "pronunciation.html",
        user=user,
        org=org,
        status=status,
        error=error,
        notice=notice,
        form=form or {},
        dictionaries=dictionaries,
        new_id=new.id if new else None,
        max_name=MAX_NAME_LENGTH,
        max_description=MAX_DESCRIPTION_LENGTH,
        max_size=megabytes(MAX_PLS_BYTES),
        max_rules=MAX_RULES,
    )


@router.post("/orgs/{org_id}/pronunciation")
async def create_action(
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg, actor: ActingUser
) -> Response:
    fields: dict[str, str] = {}
    try:
        async with receive_upload(
            request, MAX_PLS_BYTES, context.uploads_dir, what="a PLS file"
        ) as upload:
            fields = upload.fields
            check_csrf(request, user.csrf_token, fields.get("csrf_token"))
            name, description = form_fields(fields)
            document = await asyncio.to_thread(upload.path.read_bytes)
        dictionary = await service.create_from_file(
            context, org.id, name, document, description=description, actor=actor
        )
    except ApiError as exc:  # a file refused, too large, too many rules: said on the page
        shown = {key: fields.get(key, "") for key in ("name", "description")}
        return await _dictionaries_page(
            request, context, user, org, status=exc.status, error=exc.message, form=shown
        )
    # Post/redirect/get: a reload shows the list again rather than uploading again.
    return redirect(f"{_list_url(org)}?{urlencode({'created': dictionary.id})}")


@router.get("/orgs/{org_id}/pronunciation/{dictionary_id}")
async def dictionary_page(
    dictionary_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    return await _dictionary_page(dictionary_id, request, context, user, org)


@router.post("/orgs/{org_id}/pronunciation/{dictionary_id}/default")
async def default_action(
    dictionary_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    form = await checked_form(request, user)
    try:
        await _found(
            service.update(context, org.id, dictionary_id, default=form.get("default") == "true")
        )
    except ApiError as exc:  # a fourth default: said on the page
        return await _dictionary_page(
            dictionary_id, request, context, user, org, status=exc.status, error=exc.message
        )
    return redirect(f"{_list_url(org)}/{dictionary_id}")


async def _dictionary_page(
    dictionary_id: str,
    request: Request,
    context: Context,
    user: SignedIn,
    org: Organization,
    *,
    status: int = 200,
    error: str | None = None,
) -> Response:
    found = await _found(service.get(context, org.id, dictionary_id))
    # Versions never change: the rules shown are the latest's as it was read just now, and
    # the download link names that version, so the file holds what the page shows.
    dictionary, rules = await _found(
        service.rules_of(context, org.id, dictionary_id, found.latest_version_id)
    )
    return render(
        request,
        "pronunciation_dictionary.html",
        user=user,
        org=org,
        dictionary=dictionary,
        version_id=found.latest_version_id,
        rules=rules[:RULES_SHOWN],
        total=len(rules),
        alphabets=ALPHABET_NAMES,
        error=error,
        status=status,
    )


@router.get("/orgs/{org_id}/pronunciation/{dictionary_id}/{version_id}/download")
async def download(
    dictionary_id: str, version_id: str, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    dictionary, rules = await _found(service.rules_of(context, org.id, dictionary_id, version_id))
    response = Response(
        pls.write(rules, dictionary.language),
        media_type=pls.MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{dictionary.id}.pls"'},
    )
    return secure_headers(response)


@router.get("/orgs/{org_id}/pronunciation/{dictionary_id}/delete")
async def delete_page(
    dictionary_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    dictionary = await _found(service.get(context, org.id, dictionary_id))
    return render(request, "pronunciation_delete.html", user=user, org=org, dictionary=dictionary)


@router.post("/orgs/{org_id}/pronunciation/{dictionary_id}/delete")
async def delete_action(
    dictionary_id: str, request: Request, context: Context, org: CurrentOrg, actor: ActingUser
) -> Response:
    await checked_form(request, actor.user)
    await _found(service.remove(context, org.id, dictionary_id, actor=actor))
    return redirect(_list_url(org))


def _list_url(org: Organization) -> str:
    return f"{CONSOLE_PREFIX}/orgs/{org.id}/pronunciation"


async def _found(work: Awaitable[T]) -> T:
    """What `work` finds; another organization's dictionary is as unknown as one that never
    was: the console's own 404 page."""
    try:
        return await work
    except NotFound:
        raise PageNotFound() from None
