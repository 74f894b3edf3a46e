"""The edges of HTTP, over raw sockets against `voice-service serve`: malformed requests,
slow and abandoned ones, and more connections than the node takes.

Deadlines in these tests are generous bounds for a loaded machine (tens of seconds against
server timeouts of one or two); no test passes or fails on how fast something happened.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers.servers import Server, running_server
from tests.helpers.waiting import eventually

REQUEST_ID = re.compile(r"^req_[0-9a-f]{24}$")
PATIENCE = 60.0  # seconds a test waits for something the server does within one or two
SLOW_CONNECTIONS = 150
CONNECTION_CAP = SLOW_CONNECTIONS + 10


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Short timeouts, so that tests see them fire."""
    with running_server(
        tmp_path_factory.mktemp("strict"),
        header_timeout_seconds="2",
        body_timeout_seconds="2",
    ) as server:
        yield server


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A header deadline no test reaches, and a small connection cap."""
    with running_server(
        tmp_path_factory.mktemp("crowded"),
        header_timeout_seconds="600",
        max_connections=str(CONNECTION_CAP),
    ) as server:
        yield server


# --- raw HTTP ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def connect(server: Server) -> socket.socket:
    sock = socket.create_connection(server.address, timeout=PATIENCE)
    return sock


def read_to_end(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def parse(raw: bytes) -> RawResponse:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return RawResponse(int(status_line.split()[1]), headers, body)


def exchange(server: Server, request: bytes) -> RawResponse:
    """Send the bytes; read the answer up to the server's closing of the connection."""
    with connect(server) as sock:
        sock.sendall(request)
        return parse(read_to_end(sock))


def assert_envelope(response: RawResponse, status: int) -> dict[str, str]:
    assert response.status == status, response
    assert response.headers["content-type"] == "application/json"
    assert response.headers["connection"] == "close"
    assert REQUEST_ID.match(response.headers["x-request-id"])
    error: dict[str, str] = json.loads(response.body)["error"]
    assert set(error) == {"code", "message", "request_id"}
    assert error["code"] == "INVALID_REQUEST"
    assert error["request_id"] == response.headers["x-request-id"]
    # The one serializer: compact separators, as every other error body.
    assert (
        response.body
        == json.dumps({"error": error}, separators=(",", ":"), ensure_ascii=False).encode()
    )
    return error


def upload_head(server: Server, key: str, path: str, content_length: int) -> bytes:
    return (
        f"POST /api/v1/{path} HTTP/1.1\r\nHost: {server.address[0]}\r\n"
        f"Authorization: Bearer {key}\r\n"
        "Content-Type: multipart/form-data; boundary=b0undary\r\n"
        f"Content-Length: {content_length}\r\n\r\n"
        "--b0undary\r\n"
        'Content-Disposition: form-data; name="file"; filename="clip.wav"\r\n'
        "Content-Type: audio/wav\r\n\r\n"
    ).encode()


# --- what the server holds -----------------------------------------------------------------


def log_row(server: Server, request_id: str) -> sqlite3.Row | None:
    rows = server.query("SELECT * FROM request_log WHERE request_id = ?", request_id)
    return rows[0] if rows else None


def open_files(pid: int) -> list[str]:
    targets = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed while listing
            targets.append(fd.readlink().as_posix())
    return targets


def temporary_files(pid: int) -> int:
    """Open files already unlinked: the multipart parser's spooled uploads."""
    return sum(target.endswith("(deleted)") for target in open_files(pid))


def client_connections(pid: int) -> int:
    """TCP connections the server holds open (its listening socket excluded).

    Counted by distinct inode: the kernel writes /proc/net/tcp a page at a time, so a table
    that changes while it is read (connections closing) can list a socket twice."""
    inodes = {t[len("socket:[") : -1] for t in open_files(pid) if t.startswith("socket:[")}
    held: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and fields[3] != "0A":  # 0A: listening
                held.add(fields[9])
    return len(held)


def new_key(server: Server) -> tuple[str, str]:
    key = server.cli("keys", "create", server.org_id)
    return key["id"], key["secret"]


# --- malformed HTTP (answered before the app sees a request) -------------------------------

MALFORMED = {
    "url-over-64k": b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "folded-header": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n",
    "nul-in-header": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: b\x00c\r\n\r\n",
    "control-char-in-header": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: b\x01c\r\n\r\n",
    "bare-lf": b"GET / HTTP/1.1\nHost: x\n\n",
    "length-and-chunked": (
        b"POST /api/v1/asr HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "unknown-method": b"FOO / HTTP/1.1\r\nHost: x\r\n\r\n",
    "tls-client-hello": bytes.fromhex("16030100a5010000a10303") + bytes(32),
    "http2-preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
}


@pytest.mark.parametrize("request_bytes", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_http_gets_the_envelope_and_a_request_id(
    strict: Server, request_bytes: bytes
) -> None:
    assert_envelope(exchange(strict, request_bytes), 400)


@pytest.mark.parametrize(
    ("name", "method", "path"),
    [
        ("url-over-64k", "GET", "/" + "a" * 2047),  # cut to the column's width
        ("nul-in-header", "GET", "/"),
        ("length-and-chunked", "POST", "/api/v1/asr"),
        ("unknown-method", "-", "-"),  # the parser never got a method
        ("tls-client-hello", "-", "-"),
        ("http2-preface", "PRI", "*"),
    ],
)
def test_malformed_http_is_logged_with_what_the_parser_read(
    strict: Server, name: str, method: str, path: str
) -> None:
    response = exchange(strict, MALFORMED[name])
    # Committed before the answer was written, as for every response.
    row = log_row(strict, response.headers["x-request-id"])
    assert row is not None
    assert (row["org_id"], row["method"], row["path"]) == (None, method, path)
    assert (row["status"], row["error_code"]) == (400, "INVALID_REQUEST")


def test_bad_chunk_size_in_a_started_request_is_answered_by_the_app(strict: Server) -> None:
    # The headers were valid, so the request is already the app's: it answers, under the
    # caller's organization, and the connection closes.
    request = (
        f"POST /api/v1/asr HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {strict.api_key}\r\n"
        "Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n"
        "zz\r\nabc\r\n0\r\n\r\n"
    ).encode()
    error = assert_envelope(exchange(strict, request), 400)
    assert "chunk" in error["message"]
    row = log_row(strict, error["request_id"])
    assert row is not None
    assert (row["org_id"], row["status"]) == (strict.org_id, 400)


# --- slow headers --------------------------------------------------------------------------


def test_headers_not_complete_in_time_get_408_and_the_connection_closed(strict: Server) -> None:
    response = exchange(strict, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    error = assert_envelope(response, 408)
    row = log_row(strict, error["request_id"])
    assert row is not None
    assert (row["method"], row["path"], row["status"]) == ("GET", "/healthz", 408)


def test_trickled_headers_do_not_extend_the_deadline(strict: Server) -> None:
    # One byte at a time, 600 of them over at least a minute: the 2 s deadline, counted
    # from the first byte, ends the connection long before the headers could be complete.
    sent = 0
    with connect(strict) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        while sent < 600 and not select.select([sock], [], [], 0.1)[0]:
            try:
                sock.sendall(b"a")
            except OSError:  # the server closed between our looks
                break
            sent += 1
        try:
            answer = read_to_end(sock)
        except ConnectionResetError:
            answer = b""
    assert sent < 600
    assert answer == b"" or parse(answer).status == 408


def test_connection_that_sends_nothing_is_closed(strict: Server) -> None:
    with connect(strict) as sock:
        assert read_to_end(sock) == b""  # closed with no answer: there was no request


# --- slow and abandoned bodies -------------------------------------------------------------


def test_stalled_upload_gets_408_envelope(strict: Server) -> None:
    with connect(strict) as sock:
        sock.sendall(upload_head(strict, strict.api_key, "asr", 1_000_000) + bytes(1000))
        error = assert_envelope(parse(read_to_end(sock)), 408)
    row = log_row(strict, error["request_id"])
    assert row is not None
    assert (row["org_id"], row["status"], row["error_code"]) == (
        strict.org_id,
        408,
        "INVALID_REQUEST",
    )


def test_stalled_uploads_release_their_temporary_files(strict: Server) -> None:
    baseline = temporary_files(strict.pid)
    spooled = 2 * 1024 * 1024  # past the parser's 1 MiB in memory: it spools to disk
    head = upload_head(strict, strict.api_key, "speech-to-text", 2 * spooled)
    stalled = [connect(strict) for _ in range(3)]
    try:
        for sock in stalled:
            sock.sendall(head + bytes(spooled))
        # The check can see the files: they are open while the uploads hang.
        assert eventually(lambda: temporary_files(strict.pid) > baseline)
        for sock in stalled:  # the clients keep their sockets open; the server gives up
            assert parse(read_to_end(sock)).status == 408
        assert eventually(lambda: temporary_files(strict.pid) == baseline)
    finally:
        for sock in stalled:
            sock.close()


def test_client_that_disconnects_mid_upload_is_logged_as_499_not_a_failure(
    strict: Server,
) -> None:
    key_id, key = new_key(strict)  # a key of its own, to find the row by
    log_offset = strict.log.stat().st_size
    with connect(strict) as sock:
        sock.sendall(upload_head(strict, key, "speech-to-text", 4_000_000) + bytes(500_000))

    def rows() -> list[sqlite3.Row]:
        return strict.query("SELECT * FROM request_log WHERE key_id = ?", key_id)

    assert eventually(lambda: bool(rows()))
    [row] = rows()
    assert (row["status"], row["error_code"]) == (499, "CLIENT_CLOSED_REQUEST")
    billed = "SELECT * FROM usage_records WHERE request_id = ?"
    assert strict.query(billed, row["request_id"]) == []
    server_log = strict.log.read_text()[log_offset:]
    assert "Traceback" not in server_log
    assert "ERROR" not in server_log


# --- many connections ----------------------------------------------------------------------


def test_health_checks_succeed_while_150_slow_connections_are_open(crowded: Server) -> None:
    slow = [connect(crowded) for _ in range(SLOW_CONNECTIONS)]
    try:
        for sock in slow:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        statuses = [httpx.get(f"{crowded.root}/healthz").status_code for _ in range(30)]
        assert statuses == [200] * 30
        for sock in slow:  # more bytes, as a slowloris sends, then all still held
            sock.sendall(b"a")
        assert client_connections(crowded.pid) >= SLOW_CONNECTIONS
        for sock in slow:
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):  # open, and nothing was answered
                sock.recv(1)
    finally:
        for sock in slow:
            sock.close()


def test_connections_over_the_cap_are_closed_at_once(crowded: Server) -> None:
    assert eventually(lambda: client_connections(crowded.pid) == 0)
    excess = 5
    sockets = [connect(crowded) for _ in range(CONNECTION_CAP + excess)]
    try:
        refused: set[socket.socket] = set()

        def collect_refusals() -> bool:
            readable, _, _ = select.select(sockets, [], [], 0.1)
            for sock in readable:
                assert sock.recv(1) == b""  # closed without a byte: no plain-text 503
                refused.add(sock)
            return len(refused) >= excess

        assert eventually(collect_refusals)
        assert len(refused) == excess
        # Eventually: a page of the table read while it changes may also miss a socket.
        assert eventually(lambda: client_connections(crowded.pid) == CONNECTION_CAP)
        # A freed place is taken again.
        next(sock for sock in sockets if sock not in refused).close()
        assert eventually(lambda: client_connections(crowded.pid) < CONNECTION_CAP)
        assert httpx.get(f"{crowded.root}/healthz").status_code == 200
    finally:
        for sock in sockets:
            sock.close()
