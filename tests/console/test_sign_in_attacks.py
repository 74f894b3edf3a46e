"""Sign-in under attack, over HTTP against a real server: password checks off the event
loop, the limit per client address, the throttle per account whatever an email's padding,
parallel attempts that cannot outrun it, and sign-in forms only the server can issue.

Each test signs in from client addresses of its own (see `console_client`)."""

from __future__ import annotations

import itertools
import threading
import uuid
from collections import Counter

import httpx

from tests.helpers.console import PASSWORD, Customer, cli, console_client, csrf_token, new_customer
from tests.helpers.servers import Server
from tests.helpers.waiting import eventually
from voice_service.accounts.throttle import FREE_FAILURES
from voice_service.console.security import PRE_SESSION_COOKIE
from voice_service.console.sign_in import SIGN_INS_PER_ADDRESS

WRONG = "not the password at all"
GETS_PER_CHECK = 5
_flood_addresses = itertools.count(1)


def attempt(
    server: Server, email: str, password: str, address: str | None = None
) -> httpx.Response:
    with console_client(server, address) as client:
        page = client.get("/console/sign-in")
        return client.post(
            "/console/sign-in",
            data={"email": email, "password": password, "csrf_token": csrf_token(page.text)},
        )


def audit_actions(server: Server, customer: Customer) -> Counter[str]:
    return Counter(event["action"] for event in cli(server, "audit", customer.account_id))


def test_a_sign_in_flood_leaves_the_api_at_full_speed(server: Server) -> None:
    tenant = new_customer(server, "flood-watcher@example.com", "Flood Watcher")
    key = cli(server, "keys", "create", tenant.org_id, "--rate-limit", "100000")
    answered: list[int] = []
    stop = threading.Event()

    def flood() -> None:  # made-up emails, each from a new address: every one is checked
        while not stop.is_set():
            address = f"203.0.113.{next(_flood_addresses) % 250 + 1}"
            response = attempt(server, f"{uuid.uuid4().hex}@flood.example", WRONG, address)
            answered.append(response.status_code)

    flooders = [threading.Thread(target=flood) for _ in range(4)]
    for thread in flooders:
        thread.start()
    request_ids: list[str] = []
    try:
        assert eventually(lambda: len(answered) >= 4)  # the flood is on
        checked_before = answered.count(401)
        with httpx.Client(
            base_url=server.base_url,
            headers={"Authorization": f"Bearer {key['secret']}"},
            timeout=60,
        ) as api:
            # Asked until the flood has had eight more passwords checked meanwhile.
            while answered.count(401) - checked_before < 8 and len(request_ids) < 5000:
                request_ids.append(api.get("/voices").headers["x-request-id"])
        checked_during = answered.count(401) - checked_before
    finally:
        stop.set()
        for thread in flooders:
            thread.join()
    assert checked_during >= 8, Counter(answered)

    # The server's own log: how many GET /voices it answered while it checked passwords.
    # With the checks on the event loop each one stopped every other request for its whole
    # length, and the API answered a request or two per check; off it, dozens.
    gets = "SELECT created_at FROM request_log WHERE key_id = ? ORDER BY created_at"
    assert eventually(lambda: len(server.query(gets, key["id"])) == len(request_ids))
    answered_at = [row["created_at"] for row in server.query(gets, key["id"])]
    checks = server.query(
        "SELECT COUNT(*) AS n FROM request_log WHERE path = '/console/sign-in' "
        "AND status = 401 AND created_at BETWEEN ? AND ?",
        answered_at[0],
        answered_at[-1],
    )[0]["n"]
    assert checks >= 4
    assert len(answered_at) >= GETS_PER_CHECK * checks, (len(answered_at), checks)


def test_sign_ins_are_limited_per_client_address(server: Server) -> None:
    address = "198.51.100.7"
    for number in range(SIGN_INS_PER_ADDRESS):
        email = f"guess-{number}@example.com"
        assert attempt(server, email, WRONG, address).status_code == 401
    refused = attempt(server, "one-more@example.com", WRONG, address)
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) >= 1
    assert "Too many sign-ins from your address" in refused.text
    assert attempt(server, "one-more@example.com", WRONG, "198.51.100.8").status_code == 401


def test_a_padded_email_counts_against_its_account(server: Server) -> None:
    carol = new_customer(server, "carol@a.example", "Carol Org")
    padded = ["carol@a.example", "  CAROL@A.Example\u2003", "\u3000carol@a.example\u00a0\u2029"]
    for number in range(FREE_FAILURES):
        assert attempt(server, padded[number % len(padded)], WRONG).status_code == 401
    for email in padded:
        refused = attempt(server, email, PASSWORD)
        assert refused.status_code == 429, email
        assert "vs_console=" not in refused.headers.get("set-cookie", "")
    # Whitespace inside is no address at all: refused before any lookup or sign-in.
    inside = attempt(server, "carol@a.example" + "\u2003" * 310 + "x", PASSWORD)
    assert inside.status_code == 400
    assert "vs_console=" not in inside.headers.get("set-cookie", "")
    actions = audit_actions(server, carol)
    assert actions["sign_in_failed"] == FREE_FAILURES
    assert actions["sign_in_throttled"] == len(padded)
    assert actions["sign_in"] == 0


def test_parallel_sign_ins_cannot_outrun_the_throttle(server: Server) -> None:
    dave = new_customer(server, "dave@example.com", "Dave Org")
    for _ in range(FREE_FAILURES - 1):
        assert attempt(server, dave.email, WRONG).status_code == 401
    clients = [console_client(server) for _ in range(12)]
    tokens = [csrf_token(client.get("/console/sign-in").text) for client in clients]
    start = threading.Barrier(len(clients))
    statuses: list[int] = []

    def post(client: httpx.Client, token: str) -> None:
        start.wait()
        form = {"email": dave.email, "password": WRONG, "csrf_token": token}
        statuses.append(client.post("/console/sign-in", data=form).status_code)

    threads = [
        threading.Thread(target=post, args=pair) for pair in zip(clients, tokens, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for client in clients:
        client.close()
    assert Counter(statuses) == {401: 1, 429: 11}  # the fifth attempt ran; none after it
    assert attempt(server, dave.email, PASSWORD).status_code == 429
    actions = audit_actions(server, dave)
    assert actions["sign_in_failed"] == FREE_FAILURES
    assert actions["sign_in_throttled"] == 12


def test_a_sign_in_form_token_must_be_one_the_server_issued(
    server: Server, alice: Customer
) -> None:
    with console_client(server) as client:
        issued = csrf_token(client.get("/console/sign-in").text)
        client.cookies.clear()
        signed, signature = issued.rsplit(".", 1)
        forged = f"{signed}.{signature[:-1]}{'1' if signature.endswith('0') else '0'}"
        for token in ("made-up-by-an-attacker", forged):
            response = client.post(
                "/console/sign-in",
                data={"email": alice.email, "password": PASSWORD, "csrf_token": token},
                headers={"Cookie": f"{PRE_SESSION_COOKIE}={token}"},
            )
            assert response.status_code == 403, token
        signed_in = client.post(
            "/console/sign-in",
            data={"email": alice.email, "password": PASSWORD, "csrf_token": issued},
            headers={"Cookie": f"{PRE_SESSION_COOKIE}={issued}"},
        )
        assert signed_in.status_code == 303
