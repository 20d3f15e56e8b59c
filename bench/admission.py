"""Admission throughput and latency over TLS on one core, against /healthz as the ceiling.

Server pinned to core 0, wrk pinned to core 1, keep-alive connections, a
PropagationPolicy CREATE review for three member clusters. Targets: mutate throughput
at least 70% of the /healthz ceiling; p99 under 5 ms at half of the maximum mutate load.
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


def main(seconds: int = 10) -> dict[str, object]:
    """Run the admission benchmark, print and record the results."""
    with tempfile.TemporaryDirectory() as tmp, server(CONFIG) as srv:
        body = Path(tmp) / "review.json"
        body.write_text(json.dumps(REVIEW))
        wrk(srv, "/healthz", seconds=2)  # warm-up
        wrk(srv, "/mutate", seconds=2, body_file=body)
        ceiling = wrk(srv, "/healthz", seconds=seconds)
        mutate = wrk(srv, "/mutate", seconds=seconds, body_file=body)
        half = wrk(
            srv, "/mutate", seconds=seconds, body_file=body, connections=8, rate=mutate.rps / 2
        )
    ratio = mutate.rps / ceiling.rps
    results = {
        "machine": machine(),
        "healthz": dataclasses.asdict(ceiling),
        "mutate": dataclasses.asdict(mutate),
        "mutate_half_load": dataclasses.asdict(half),
        "ratio": ratio,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "admission.json").write_text(json.dumps(results, indent=2) + "\n")
    table = "\n".join(
        [
            "| run (TLS, keep-alive, server on 1 core) | req/s | p50 ms | p99 ms | server CPU µs/req |",
            "|---|---:|---:|---:|---:|",
            _row("`GET /healthz`, 32 connections (ceiling)", ceiling),
            _row("`POST /mutate` PropagationPolicy, 32 connections", mutate),
            _row(f"`POST /mutate` at half load ({half.rps:.0f} req/s), 8 connections", half),
            "",
            f"Mutate throughput is **{ratio:.0%}** of the `/healthz` ceiling (target ≥ 70%); "
            f"p99 at half load **{half.p99_ms:.2f} ms** (target < 5 ms). Machine: {machine()}.",
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


if __name__ == "__main__":
    main()
