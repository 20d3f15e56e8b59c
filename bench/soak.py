"""Soak: ten minutes of mixed admissions and scores at half of the measured maximum.

``carbonshift serve`` (pinned to core 0, static data) first gets its maximum measured
for ``POST /mutate`` (every review distinct) and for ``POST /v1/karmada/score`` (100
clusters) alone. Then, for ten one-minute segments, two wrk processes on core 1 send
both at once, each paced at a quarter of its own maximum, so together they ask for half
of what the server can do. After every minute the server's resident memory and open
file descriptors are read and each stream's p99 is recorded.

Targets: no failed request; resident memory grows less than 5 % from minute 2 to the
last minute; open file descriptors flat (within 4 of minute 2); p99 flat (the last
minute's within 1.5x of the median minute's, for both streams). Results in
``bench/results/soak.json`` and a plot in ``bench/results/soak.png``.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.admission import CONFIG, reviews
from bench.harness import RESULTS, Server, WrkResult, machine, server, write_table, wrk
from bench.score import ENDPOINT, body

MINUTES = 10
SCORE_CLUSTERS = 100
TARGET_RSS_GROWTH = 0.05
TARGET_FD_DRIFT = 4
TARGET_P99_RATIO = 1.5


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def mixed(
    srv: Server, seconds: int, reviews_file: Path, score_file: Path, rates: tuple[float, float]
) -> tuple[WrkResult, WrkResult]:
    """Admissions and scores at once, each paced at its rate."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        admissions = pool.submit(
            wrk, srv, "/mutate", seconds=seconds, connections=8, bodies_file=reviews_file,
            rate=rates[0],
        )  # fmt: skip
        scores = pool.submit(
            wrk, srv, ENDPOINT, seconds=seconds, connections=4, body_file=score_file,
            rate=rates[1],
        )  # fmt: skip
        return admissions.result(), scores.result()


TOP_SECONDS = 10
"""Length of each run that measures a maximum before the soak."""


def main(seconds: int = 60, minutes: int = MINUTES, **_: Any) -> dict[str, Any]:
    """Run the soak (``seconds`` per segment, ``minutes`` segments), record and plot it."""
    with tempfile.TemporaryDirectory() as tmp:
        reviews_file, score_file = Path(tmp) / "distinct.jsonl", Path(tmp) / "score.json"
        reviews(reviews_file, fresh=False)
        score_file.write_bytes(body(SCORE_CLUSTERS))
        with server(CONFIG) as srv:
            wrk(srv, "/mutate", seconds=2, bodies_file=reviews_file)  # warm-up
            top_mutate = wrk(srv, "/mutate", seconds=TOP_SECONDS, bodies_file=reviews_file)
            top_score = wrk(srv, ENDPOINT, seconds=TOP_SECONDS, body_file=score_file)
            rates = (top_mutate.rps / 4, top_score.rps / 4)
            print(
                f"[soak] maxima: {top_mutate.rps:.0f} admissions/s, {top_score.rps:.0f} scores/s;"
                f" soaking at {rates[0]:.0f} + {rates[1]:.0f} req/s, {minutes} x {seconds} s"
            )
            samples = []
            for minute in range(1, minutes + 1):
                admissions, scores = mixed(srv, seconds, reviews_file, score_file, rates)
                sample = {
                    "minute": minute,
                    "rss_mb": rss_mb(srv.pid),
                    "fds": open_fds(srv.pid),
                    "mutate_rps": admissions.rps,
                    "mutate_p99_ms": admissions.p99_ms,
                    "score_rps": scores.rps,
                    "score_p99_ms": scores.p99_ms,
                    "requests": admissions.requests + scores.requests,
                }
                samples.append(sample)
                print(f"[soak] minute {minute}/{minutes}: RSS {sample['rss_mb']:.1f} MB, "
                      f"{sample['fds']} fds, p99 {admissions.p99_ms:.2f} / {scores.p99_ms:.2f} ms",
                      flush=True)  # fmt: skip
    results = {
        "machine": machine(),
        "max_mutate_rps": top_mutate.rps,
        "max_score_rps": top_score.rps,
        "rates": rates,
        "segment_seconds": seconds,
        "samples": samples,
        **verdict(samples),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "soak.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(samples, RESULTS / "soak.png")
    table = render(results)
    print(table)
    write_table("soak", table)
    return results


def verdict(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The targets, measured from minute 2 (the first minute warms caches and pools)."""
    steady = samples[1:] if len(samples) > 1 else samples
    first, last = steady[0], steady[-1]
    growth = last["rss_mb"] / first["rss_mb"] - 1
    drift = max(abs(s["fds"] - first["fds"]) for s in steady)
    ratios = {
        stream: last[f"{stream}_p99_ms"] / statistics.median(s[f"{stream}_p99_ms"] for s in steady)
        for stream in ("mutate", "score")
    }
    met = (
        growth < TARGET_RSS_GROWTH
        and drift <= TARGET_FD_DRIFT
        and all(r <= TARGET_P99_RATIO for r in ratios.values())
    )
    return {"rss_growth": growth, "fd_drift": drift, "p99_ratios": ratios, "met": met}


def plot(samples: list[dict[str, Any]], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    minutes = [s["minute"] for s in samples]
    fig, (memory, latency) = plt.subplots(1, 2, figsize=(11, 4))
    memory.plot(minutes, [s["rss_mb"] for s in samples], marker="o", label="RSS MB")
    memory.set_xlabel("minute")
    memory.set_ylabel("resident memory (MB)")
    fds = memory.twinx()
    fds.plot(minutes, [s["fds"] for s in samples], color="tab:gray", ls="--", label="open fds")
    fds.set_ylabel("open file descriptors (dashed)")
    memory.set_ylim(bottom=0, top=max(s["rss_mb"] for s in samples) * 1.3)
    fds.set_ylim(bottom=0, top=max(s["fds"] for s in samples) * 2)
    memory.set_title("carbonshift serve under the soak")
    latency.plot(minutes, [s["mutate_p99_ms"] for s in samples], marker="o", label="/mutate p99")
    latency.plot(minutes, [s["score_p99_ms"] for s in samples], marker="s", label="score p99")
    latency.set_xlabel("minute")
    latency.set_ylabel("p99 latency (ms)")
    latency.set_ylim(bottom=0)
    latency.legend()
    for ax in (memory, latency):
        ax.grid(alpha=0.3)
        ax.set_xticks(minutes)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def render(r: dict[str, Any]) -> str:
    samples = r["samples"]
    first, last = samples[1] if len(samples) > 1 else samples[0], samples[-1]
    total = sum(s["requests"] for s in samples)
    ratios = r["p99_ratios"]
    return "\n".join(
        [
            "| soak: admissions + scores at half the maximum | minute 2 | last minute | target |",
            "|---|---:|---:|---:|",
            f"| resident memory | {first['rss_mb']:.1f} MB | {last['rss_mb']:.1f} MB"
            f" | growth {r['rss_growth']:+.1%} (< {TARGET_RSS_GROWTH:.0%}) |",
            f"| open file descriptors | {first['fds']} | {last['fds']}"
            f" | drift {r['fd_drift']} (≤ {TARGET_FD_DRIFT}) |",
            f"| `/mutate` p99 | {first['mutate_p99_ms']:.2f} ms | {last['mutate_p99_ms']:.2f} ms"
            f" | last / median {ratios['mutate']:.2f} (≤ {TARGET_P99_RATIO}) |",
            f"| score (100 clusters) p99 | {first['score_p99_ms']:.2f} ms"
            f" | {last['score_p99_ms']:.2f} ms | last / median {ratios['score']:.2f}"
            f" (≤ {TARGET_P99_RATIO}) |",
            "",
            f"{len(samples)} x {r['segment_seconds']} s at {r['rates'][0]:.0f} admissions/s +"
            f" {r['rates'][1]:.0f} scores/s (a quarter of each maximum:"
            f" {r['max_mutate_rps']:.0f} and {r['max_score_rps']:.0f} req/s), {total:,} requests,"
            f" none failed. Targets {'met' if r['met'] else 'NOT met'}."
            f" Plot: `bench/results/soak.png`. Machine: {r['machine']}.",
        ]
    )
