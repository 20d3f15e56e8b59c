"""Admission throughput and latency over TLS on one core, against an echo floor.

Server pinned to core 0, wrk pinned to core 1, keep-alive connections, PropagationPolicy
CREATE reviews for three member clusters, every review distinct (own uid and policy
name, as an API server sends them; identical specs may be answered from the decision
memo). The echo floor (:mod:`bench.floor`) is the same aiohttp + uvloop + TLS stack
that parses each review with orjson and answers ``allowed: true`` with its uid.
Targets: carbonshift at least 0.70 of the echo's requests/s; p99 under 5 ms at half of
carbonshift's own maximum. Every review a fresh decision is reported, with no target.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

from bench.harness import RESULTS, machine, server, write_table, wrk

CONFIG = """\
zone: DE
clusters:
  member-fr: {zone: FR}
  member-de: {zone: DE}
  member-pl: {zone: PL}
"""

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "bench-0001",
        "kind": {"group": "policy.karmada.io", "version": "v1alpha1", "kind": "PropagationPolicy"},
        "resource": {
            "group": "policy.karmada.io",
            "version": "v1alpha1",
            "resource": "propagationpolicies",
        },
        "requestKind": {
            "group": "policy.karmada.io",
            "version": "v1alpha1",
            "kind": "PropagationPolicy",
        },
        "namespace": "shop",
        "operation": "CREATE",
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
        "object": {
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "annotations": {"carbonshift.io/max-clusters": "2"},
            },
            "spec": {
                "resourceSelectors": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
                ],
                "placement": {
                    "clusterAffinity": {"clusterNames": ["member-fr", "member-de", "member-pl"]},
                    "replicaScheduling": {"replicaSchedulingType": "Divided"},
                },
            },
        },
        "oldObject": None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    },
}


DISTINCT_REVIEWS = 20_000
"""More distinct reviews than the decision memo holds."""


def reviews(path: Path, *, fresh: bool, count: int = DISTINCT_REVIEWS) -> None:
    """One review per line, each with its own uid and policy name, as an API server sends
    them. ``fresh``: each also with its own max-intensity, so no two decide alike and
    every one is decided afresh (no memo hits)."""
    with path.open("w") as out:
        for i in range(count):
            review = json.loads(json.dumps(REVIEW))
            request = review["request"]
            request["uid"] = f"7f6c1a2e-0000-4000-8000-{i:012d}"
            request["name"] = request["object"]["metadata"]["name"] = f"web-{i:06d}"
            if fresh:
                annotations = request["object"]["metadata"]["annotations"]
                annotations["carbonshift.io/max-intensity"] = f"{900 + i / 1000:.3f}"
            out.write(json.dumps(review) + "\n")


TARGET_RATIO = 0.70
TARGET_P99_MS = 5.0


def main(seconds: int = 10) -> dict[str, object]:
    """Run the admission benchmark, print and record the results."""
    with tempfile.TemporaryDirectory() as tmp:
        distinct, fresh_file = Path(tmp) / "distinct.jsonl", Path(tmp) / "fresh.jsonl"
        reviews(distinct, fresh=False)
        reviews(fresh_file, fresh=True)
        with server(CONFIG, module="bench.floor") as floor_srv:
            wrk(floor_srv, "/mutate", seconds=2, bodies_file=distinct)  # warm-up
            echo = wrk(floor_srv, "/mutate", seconds=seconds, bodies_file=distinct)
        with server(CONFIG) as srv:
            wrk(srv, "/healthz", seconds=2)  # warm-up
            wrk(srv, "/mutate", seconds=2, bodies_file=distinct)
            ceiling = wrk(srv, "/healthz", seconds=seconds)
            mutate = wrk(srv, "/mutate", seconds=seconds, bodies_file=distinct)
            half = wrk(
                srv, "/mutate", seconds=seconds, bodies_file=distinct, connections=8,
                rate=mutate.rps / 2,
            )  # fmt: skip
            fresh = wrk(srv, "/mutate", seconds=seconds, bodies_file=fresh_file)
            fresh_half = wrk(
                srv, "/mutate", seconds=seconds, bodies_file=fresh_file, connections=8,
                rate=fresh.rps / 2,
            )  # fmt: skip
    ratio = mutate.rps / echo.rps
    results = {
        "machine": machine(),
        "healthz": dataclasses.asdict(ceiling),
        "echo": dataclasses.asdict(echo),
        "mutate": dataclasses.asdict(mutate),
        "mutate_half_load": dataclasses.asdict(half),
        "mutate_fresh": dataclasses.asdict(fresh),
        "mutate_fresh_half_load": dataclasses.asdict(fresh_half),
        "ratio": ratio,
        "ratio_fresh": fresh.rps / echo.rps,
        "ratio_healthz": mutate.rps / ceiling.rps,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "admission.json").write_text(json.dumps(results, indent=2) + "\n")
    met = ratio >= TARGET_RATIO and half.p99_ms < TARGET_P99_MS
    table = "\n".join(
        [
            "| run (TLS, keep-alive, server on 1 core, wrk on the other) | req/s | p50 ms "
            "| p99 ms | server CPU µs/req |",
            "|---|---:|---:|---:|---:|",
            _row("`GET /healthz`, 32 connections (for scale)", ceiling),
            _row("echo floor: parse each review, answer allowed (`bench/floor.py`)", echo),
            _row("`POST /mutate`, every review distinct (uid, name), 32 connections", mutate),
            _row(f"every review distinct, half load ({half.rps:.0f} req/s), 8 conn.", half),
            _row("`POST /mutate`, every review a fresh decision (no memo hits)", fresh),
            _row(f"fresh decisions, half load ({fresh_half.rps:.0f} req/s), 8 conn.", fresh_half),
            "",
            f"carbonshift answers distinct reviews at **{ratio:.2f}** of the echo floor's "
            f"requests/s (target ≥ {TARGET_RATIO:.2f}), p99 **{half.p99_ms:.2f} ms** at half "
            f"of its own maximum (target < {TARGET_P99_MS:g} ms): "
            f"{'met' if met else 'NOT met'}. Every review a fresh decision: "
            f"**{fresh.rps / echo.rps:.2f}** of the floor, p99 at half load "
            f"**{fresh_half.p99_ms:.2f} ms** (no target). Machine: {machine()}.",
        ]
    )
    print(table)
    write_table("admission", table)
    return results


def _row(name: str, r: object) -> str:
    d = dataclasses.asdict(r)  # type: ignore[call-overload]
    return (
        f"| {name} | {d['rps']:.0f} | {d['p50_ms']:.2f} | {d['p99_ms']:.2f} "
        f"| {d['cpu_us_per_request']:.0f} |"
    )
