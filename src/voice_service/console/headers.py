"""What every response under /console carries, whoever made it.

Pages get the full set from `render` and `redirect`; this covers what does not pass
through them: the Try it audio, voice previews, static files, the JSON errors the
console's script asks for, and the answers the app's middleware gives for a request that
failed or was refused before any route. Pure ASGI, outside the request middleware, so
that even its 500 goes through here."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voice_service.console.pages import CONSOLE_PREFIX
from voice_service.console.security import SECURITY_HEADERS

# A browser must never guess a type other than the one sent (audio or JSON run as script
# or styled as HTML). The page-only headers (CSP, no-store, ...) stay with the pages.
EVERY_RESPONSE = {"X-Content-Type-Options": SECURITY_HEADERS["X-Content-Type-Options"]}


def is_console_path(path: str) -> bool:
    return path == CONSOLE_PREFIX or path.startswith(f"{CONSOLE_PREFIX}/")


class ConsoleHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_console_path(scope["path"]):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in EVERY_RESPONSE.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)
