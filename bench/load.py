"""HTTP/1.1 GET load generator, run in its own process: `python -m bench.load URL [options]`.

Raw asyncio streams on uvloop with keep-alive connections and a minimal response parser
(status line + Content-Length), because a full client such as httpx costs more CPU per
request than the bare server does and would become the bottleneck. Prints one JSON object:
requests, errors, rps, p50/p99 latency in ms, and the client's own CPU use in cores, so a
run can show that the client was not what limited it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import uvloop


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN when there are no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


async def _worker(
    host: str,
    port: int,
    request: bytes,
    record_from: float,
    until: float,
    interval: float,
    tally: Tally,
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    next_start = time.perf_counter()
    try:
        while (started := time.perf_counter()) < until:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = _content_length(head)
            await reader.readexactly(length)
            if started >= record_from:
                tally.latencies.append(time.perf_counter() - started)
                if head[9:12] != b"200":
                    tally.errors += 1
            if interval:  # paced mode: a fixed request rate, not as fast as possible
                next_start += interval
                await asyncio.sleep(max(0.0, next_start - time.perf_counter()))
    finally:
        writer.close()


def _content_length(head: bytes) -> int:
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    raise ValueError("response without Content-Length")  # both servers always send it


async def run(
    url: str, headers: list[str], concurrency: int, duration: float, warmup: float, rate: float
) -> dict[str, float]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [f"GET {parts.path} HTTP/1.1", f"Host: {host}:{port}", *headers]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    tally = Tally()
    start = time.perf_counter()
    record_from = start + warmup
    until = record_from + duration
    interval = concurrency / rate if rate else 0.0
    cpu_before = time.process_time()
    await asyncio.gather(
        *(
            _worker(host, port, request, record_from, until, interval, tally)
            for _ in range(concurrency)
        )
    )
    # Counts the warm-up too, a slight overestimate of the client's share.
    cpu = (time.process_time() - cpu_before) / (time.perf_counter() - start)
    done = len(tally.latencies)
    return {
        "requests": done,
        "errors": tally.errors,
        "rps": done / duration,
        "p50_ms": percentile(tally.latencies, 50) * 1000,
        "p99_ms": percentile(tally.latencies, 99) * 1000,
        "mean_ms": statistics.fmean(tally.latencies) * 1000 if done else float("nan"),
        "client_cpu_cores": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="GET load generator")
    parser.add_argument("url")
    parser.add_argument("--header", action="append", default=[], help="'Name: value'")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=1.0, help="unrecorded seconds first")
    parser.add_argument("--rate", type=float, default=0.0, help="total req/s; 0 = unpaced")
    args = parser.parse_args()
    result = uvloop.run(
        run(args.url, args.header, args.concurrency, args.duration, args.warmup, args.rate)
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
