"""The voices page: the catalogue (searched by name and language) and the organization's
clones, previews, cloning from a file or a recording, deleting a clone, and the "Try it"
panel."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request, Response
from pydantic import ValidationError

from voice_service.cloning.schemas import MAX_DESCRIPTION_LENGTH, MAX_NAME_LENGTH
from voice_service.cloning.service import (
    MIN_SPEECH_SECONDS,
    CloneRequest,
    clone_request,
    clone_voice,
    delete_voice,
)
from voice_service.console.acting import act_for_org
from voice_service.console.auth import (
    ActingUser,
    CurrentOrg,
    PageNotFound,
    SignedInUser,
    checked_form,
)
from voice_service.console.pages import CONSOLE_PREFIX, redirect, render
from voice_service.console.previews import Previews
from voice_service.console.security import check_csrf
from voice_service.console.voice_search import CatalogueSearch, languages
from voice_service.core.errors import ApiError, InvalidRequest, describe_errors
from voice_service.core.models import Organization
from voice_service.core.vocabulary import Service
from voice_service.engines.manner import SPEEDS
from voice_service.engines.world.analysis import MAX_ANALYSIS_SECONDS
from voice_service.pronunciation import service as pronunciation
from voice_service.pronunciation.schemas import LocatorIn
from voice_service.speech.schemas import MAX_TEXT_LENGTH, SpeechRequest, VoiceSettings
from voice_service.speech.service import synthesize_speech
from voice_service.tenancy.console_sessions import SignedIn
from voice_service.voices.listing import voices_of
from voice_service.voices.service import find_clone, visible_voice
from voice_service.web.deps import Context
from voice_service.web.ledgers import ledger_of
from voice_service.web.uploads import receive_upload

router = APIRouter()

# The text of the consent checkbox, stored as the clone's consent when it is ticked.
CONSENT = (
    "I confirm that I have the speaker's permission to clone this voice and to use the "
    "recording for that purpose."
)
# Previews are not billed: this bounds the synthesis one user can ask of the cluster (the
# limiter's window is a minute; in Redis, where configured, it is shared by every node).
# Enough to click through the whole catalogue and clones; a script gets 429.
PREVIEWS_PER_MINUTE = 30


async def get_previews(request: Request) -> Previews:
    previews: Previews = request.app.state.console_previews
    return previews


def _sample_seconds(context: Context) -> dict[str, str] | None:
    """What this node's own cloner takes of a sample, as its analysis says (no figure of the
    page's own to drift); None where a provider clones, whose limits are its own."""
    if context.providers.cloner() is not None:
        return None
    return {"least": f"{MIN_SPEECH_SECONDS:g}", "used": f"{MAX_ANALYSIS_SECONDS:g}"}


@router.get("/orgs/{org_id}/voices")
async def voices_page(
    request: Request,
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    q: str = "",
    language: str = "",
    cloned: str = "",
) -> Response:
    """`q` and `language` search the catalogue; `cloned` names the clone just made (the
    clone form's redirect), shown with a notice and highlighted."""
    return await _voices_page(request, context, user, org, text=q, language=language, cloned=cloned)


@router.get("/orgs/{org_id}/voices/clone")
async def clone_page(user: SignedInUser, org: CurrentOrg) -> Response:
    # The URL a failed clone's page has: reloaded (after the script made its history entry
    # a GET, or typed), it is the voices page.
    return redirect(_voices_url(org))


def _voices_url(org: Organization, **query: str) -> str:
    url = f"{CONSOLE_PREFIX}/orgs/{org.id}/voices"
    return f"{url}?{urlencode(query)}" if query else url


async def _voices_page(
    request: Request,
    context: Context,
    user: SignedIn,
    org: Organization,
    *,
    status: int = 200,
    error: str | None = None,
    form: dict[str, str] | None = None,
    text: str = "",
    language: str = "",
    cloned: str = "",
) -> Response:
    voices = await voices_of(context, org.id)
    catalogue, clones = voices.catalogue, voices.clones
    offered = languages(catalogue)
    search = CatalogueSearch.of(text, language, offered)
    new_clone = next((voice for voice in clones if voice.id == cloned), None)
    kept = await pronunciation.listed(
        context, org.id, offset=0, limit=pronunciation.MAX_DICTIONARIES
    )
    return render(
        request,
        "voices.html",
        user=user,
        org=org,
        status=status,
        error=error,
        notice=f"Voice “{new_clone.name}” cloned." if new_clone else None,
        form=form or {},
        catalogue=catalogue,
        found=search.apply(catalogue),
        search=search,
        languages=offered,
        clones=clones,
        new_clone_id=new_clone.id if new_clone else None,
        consent=CONSENT,
        max_name=MAX_NAME_LENGTH,
        max_description=MAX_DESCRIPTION_LENGTH,
        max_text=MAX_TEXT_LENGTH,
        speeds=SPEEDS,
        dictionaries=[dictionary for dictionary in kept if dictionary.archived_at is None],
        sample=_sample_seconds(context),
        max_upload_mb=context.settings.max_upload_bytes // (1024 * 1024),
    )


@router.get("/orgs/{org_id}/voices/{voice_id}/preview")
async def preview(
    voice_id: str,
    request: Request,
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    previews: Annotated[Previews, Depends(get_previews)],
) -> Response:
    await context.limiter.hit(
        f"console-preview:{user.user_id}", PREVIEWS_PER_MINUTE, subject="your voice previews"
    )
    voice = await visible_voice(context, org.id, voice_id)
    if voice is None:
        raise PageNotFound()
    audio = await previews.get(context, voice, ledger_of(request))
    return Response(audio, media_type="audio/mpeg", headers={"Cache-Control": "private"})


@router.post("/orgs/{org_id}/text-to-speech")
async def try_it(
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    """The "Try it" panel: billed and logged as the organization's text-to-speech request;
    errors come back in the API's envelope, which the page shows."""
    form = await checked_form(request, user)
    principal = await act_for_org(request, context, org, Service.TEXT_TO_SPEECH)
    dictionary = str(form.get("pronunciation_dictionary_id") or "")
    try:
        body = SpeechRequest(
            text=str(form.get("text", "")),
            voice_id=str(form.get("voice_id", "")),
            voice_settings=VoiceSettings(speed=str(form.get("speed") or 1)),
            pronunciation_dictionary_locators=_locators(dictionary),
        )
    except ValidationError as exc:
        raise InvalidRequest(describe_errors(exc.errors())) from None
    audio = await synthesize_speech(context, principal, ledger_of(request), body)
    return Response(audio, media_type="audio/mpeg")


def _locators(chosen: str) -> list[LocatorIn] | None:
    """Try it's dictionary: the organization's defaults (""), none, or one of its own."""
    if not chosen:
        return None
    if chosen == "none":
        return []
    return [LocatorIn(pronunciation_dictionary_id=chosen)]


@router.post("/orgs/{org_id}/voices/clone")
async def clone_action(
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg, actor: ActingUser
) -> Response:
    fields: dict[str, str] = {}
    try:
        async with receive_upload(
            request, context.settings.max_upload_bytes, context.uploads_dir
        ) as upload:
            fields = upload.fields
            check_csrf(request, user.csrf_token, fields.get("csrf_token"))
            clone = _clone_request(fields)
            principal = await act_for_org(request, context, org, Service.CLONING)
            voice = await clone_voice(
                context, principal, ledger_of(request), clone, upload.path, actor
            )
    except ApiError as exc:
        ledger_of(request).failed(exc.code)
        form = {k: fields.get(k, "") for k in ("name", "description")}
        return await _voices_page(
            request, context, user, org, status=exc.status, error=exc.message, form=form
        )
    # Post/redirect/get: a reload shows the page again rather than cloning again. The
    # request-log row already says 201, as the API's clone does.
    return redirect(_voices_url(org, cloned=voice.id))


def _clone_request(fields: dict[str, str]) -> CloneRequest:
    if fields.get("consent") != "yes":
        raise InvalidRequest("Tick the consent box: a voice is cloned only with permission.")
    description = fields.get("description", "").strip() or None
    return clone_request(fields.get("name", ""), description, consent=CONSENT)


@router.get("/orgs/{org_id}/voices/{voice_id}/delete")
async def delete_page(
    voice_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    voice = await find_clone(context, org.id, voice_id)
    if voice is None:
        raise PageNotFound()
    return render(request, "voice_delete.html", user=user, org=org, voice=voice)


@router.post("/orgs/{org_id}/voices/{voice_id}/delete")
async def delete_action(
    voice_id: str, request: Request, context: Context, org: CurrentOrg, actor: ActingUser
) -> Response:
    await checked_form(request, actor.user)
    principal = await act_for_org(request, context, org, None)
    await delete_voice(context, principal, voice_id, actor)  # another org's or unknown id: 404
    return redirect(_voices_url(org))
