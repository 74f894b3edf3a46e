"""What every console response and form carries: security headers, the session cookie's
attributes, and the CSRF check of state-changing requests."""

from __future__ import annotations

import hmac
import secrets
import time

from fastapi import Request, Response

from voice_service.tenancy.keys import SecretHasher

SESSION_COOKIE = "vs_console"
# Before sign-in there is no session to hold a CSRF token: the sign-in form's token is
# matched against this cookie instead (double submit), and must be one this service signed.
PRE_SESSION_COOKIE = "vs_console_csrf"
PRE_SESSION_SECONDS = 3600
COOKIE_PATH = "/console"

# No inline script or style anywhere: the console's one script and stylesheet are files.
# blob: for the audio the "Try it" panel receives; data: for the chart's inline icons.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "media-src 'self' blob:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Pages show keys, usage and logs: no shared or back-button cache keeps them.
    "Cache-Control": "no-store",
}


class CsrfRefused(Exception):
    """A state-changing request without this session's token, or from another origin."""


def secure_headers(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )


def clear_cookie(request: Request, response: Response, name: str) -> None:
    response.delete_cookie(
        name,
        path=COOKIE_PATH,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )


def client_ip(request: Request) -> str | None:
    return request.client.host if request.client else None


def new_pre_session_token(hasher: SecretHasher) -> str:
    """A sign-in form's CSRF token: when it was issued, a nonce, and their HMAC under the
    service's pepper, so a pair an attacker made up is refused on every node."""
    issued = f"{int(time.time())}.{secrets.token_urlsafe(24)}"
    return f"{issued}.{_pre_session_signature(hasher, issued)}"


def check_pre_session_csrf(
    request: Request, hasher: SecretHasher, cookie: str | None, submitted: object
) -> None:
    """`check_csrf` for the sign-in form, whose token must also be ours and recent."""
    check_csrf(request, cookie, submitted)
    assert cookie is not None
    issued, _, signature = cookie.rpartition(".")
    seconds, _, _nonce = issued.partition(".")
    if not hmac.compare_digest(signature.encode(), _pre_session_signature(hasher, issued).encode()):
        raise CsrfRefused()
    if not seconds.isascii() or not seconds.isdigit():
        raise CsrfRefused()
    if not 0 <= time.time() - int(seconds) <= PRE_SESSION_SECONDS:
        raise CsrfRefused()


def _pre_session_signature(hasher: SecretHasher, issued: str) -> str:
    return hasher.hash(f"console-sign-in-csrf:{issued}")


def check_csrf(request: Request, expected: str | None, submitted: object) -> None:
    """Refuse unless the form carried `expected` and, when the browser says where the
    request came from, it came from this site."""
    origin = request.headers.get("origin")
    if origin is not None and origin != _own_origin(request):
        raise CsrfRefused()
    if not expected or not isinstance(submitted, str):
        raise CsrfRefused()
    if not hmac.compare_digest(expected.encode(), submitted.encode()):
        raise CsrfRefused()


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"
