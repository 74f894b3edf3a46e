"""Signing in and out, and the list of the account's organizations."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response

from voice_service.accounts import sign_in as signing
from voice_service.accounts.organizations import orgs_for
from voice_service.console.auth import (
    MAX_FORM_FIELD_BYTES,
    MAX_FORM_FIELDS,
    ActingUser,
    SignedInUser,
    checked_form,
)
from voice_service.console.pages import CONSOLE_PREFIX, redirect, render
from voice_service.console.security import (
    PRE_SESSION_COOKIE,
    PRE_SESSION_SECONDS,
    SESSION_COOKIE,
    check_pre_session_csrf,
    clear_cookie,
    client_ip,
    new_pre_session_token,
    set_cookie,
)
from voice_service.core.errors import RateLimited
from voice_service.tenancy.users import MAX_EMAIL_LENGTH, InvalidEmail, normalize_email
from voice_service.web.context import AppContext
from voice_service.web.deps import Context

logger = logging.getLogger(__name__)
router = APIRouter()

WRONG_CREDENTIALS = "Incorrect email or password."
# Attempts a minute from one client address, whatever emails they name: the per-account
# throttle alone lets one address try one password on each of many accounts.
SIGN_INS_PER_ADDRESS = 20


@router.get("/")
async def home(request: Request, context: Context) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    if token and await signing.signed_in_user(context, token) is not None:
        return redirect(f"{CONSOLE_PREFIX}/orgs")
    return redirect(f"{CONSOLE_PREFIX}/sign-in")


@router.get("/sign-in")
async def sign_in_page(request: Request, context: Context) -> Response:
    return _sign_in_form(request, context)


def _sign_in_form(
    request: Request,
    context: AppContext,
    *,
    status: int = 200,
    error: str | None = None,
    email: str = "",
    retry_after: int | None = None,
) -> Response:
    token = request.cookies.get(PRE_SESSION_COOKIE)
    if token is None or status == 200:
        token = new_pre_session_token(context.hasher)
    response = render(
        request, "sign_in.html", status=status, csrf_token=token, error=error, email=email
    )
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    set_cookie(request, response, PRE_SESSION_COOKIE, token, PRE_SESSION_SECONDS)
    return response


@router.post("/sign-in")
async def sign_in(request: Request, context: Context) -> Response:
    form = await request.form(max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FORM_FIELD_BYTES)
    cookie = request.cookies.get(PRE_SESSION_COOKIE)
    check_pre_session_csrf(request, context.hasher, cookie, form.get("csrf_token"))
    typed = str(form.get("email", ""))
    password = str(form.get("password", ""))
    ip = client_ip(request)
    try:
        await context.limiter.hit(f"console-sign-in:{ip}", SIGN_INS_PER_ADDRESS)
    except RateLimited as limited:
        seconds = int(limited.headers["Retry-After"])
        logger.warning(
            "sign-in refused: more than %d attempts a minute from %s", SIGN_INS_PER_ADDRESS, ip
        )
        return _sign_in_form(
            request,
            context,
            status=429,
            email=typed[:MAX_EMAIL_LENGTH],
            error=f"Too many sign-ins from your address. Try again in {seconds} seconds.",
            retry_after=seconds,
        )
    try:
        email = normalize_email(typed)
    except InvalidEmail:
        return _sign_in_form(
            request,
            context,
            status=400,
            email=typed[:MAX_EMAIL_LENGTH],
            error="Enter your email address, such as name@example.com.",
        )
    outcome = await signing.attempt(context, context.password_checks, email, password, ip)
    return _answer(request, context, email, outcome)


def _answer(
    request: Request,
    context: AppContext,
    email: str,
    outcome: signing.SignInOutcome,
) -> Response:
    """The page or redirect that tells the browser how its attempt went."""
    match outcome:
        case signing.Started(token=token, lifetime=lifetime):
            response = redirect(f"{CONSOLE_PREFIX}/orgs")
            set_cookie(request, response, SESSION_COOKIE, token, int(lifetime.total_seconds()))
            clear_cookie(request, response, PRE_SESSION_COOKIE)
            return response
        case signing.Throttled(seconds=seconds):
            error = f"Too many failed sign-ins for this email. Try again in {seconds} seconds."
            return _sign_in_form(
                request, context, status=429, email=email, error=error, retry_after=seconds
            )
        case signing.Busy():
            return _sign_in_form(
                request,
                context,
                status=503,
                email=email,
                error="Too many sign-ins at this moment. Try again in a few seconds.",
                retry_after=1,
            )
        case signing.WrongCredentials():
            return _sign_in_form(request, context, status=401, email=email, error=WRONG_CREDENTIALS)
        case signing.Refused(reason=reason):
            return _sign_in_form(request, context, status=403, email=email, error=reason)


@router.post("/sign-out")
async def sign_out(request: Request, context: Context, actor: ActingUser) -> Response:
    await checked_form(request, actor.user)
    token = request.cookies.get(SESSION_COOKIE, "")
    await signing.sign_out(context, token, actor)
    response = redirect(f"{CONSOLE_PREFIX}/sign-in")
    clear_cookie(request, response, SESSION_COOKIE)
    return response


@router.get("/orgs")
async def orgs_page(request: Request, context: Context, user: SignedInUser) -> Response:
    orgs = await orgs_for(context, user)
    return render(request, "orgs.html", user=user, orgs=orgs)
