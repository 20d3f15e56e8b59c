"""Energy measured by Kepler (v0.10+), read from the Prometheus that scrapes it.

Kepler exports per-pod and per-node counters (``kepler_pod_cpu_joules_total`` with
``pod_name``, ``pod_namespace``, ``state``, ``zone``; ``kepler_node_cpu_joules_total``
with ``zone``, ``path``; every series also carries ``node_name``). ``zone`` is a RAPL
energy zone; zones overlap (``package`` includes ``core`` and ``uncore``; ``psys`` is the
whole platform), so every query selects one zone (``accounting.kepler_zone``) and nothing
is ever summed across zones. Kepler does not know which member cluster it runs in: the
Prometheus scrape configuration (or the members' external labels) adds that as the label
``accounting.kepler_cluster_label``.

Each accounting pass asks for the counters' increase over the interval it accounts:

    sum by (<cluster>, pod_namespace, pod_name) (increase(kepler_pod_cpu_joules_total{zone="package"}[300s]))
    sum by (node_name) (increase(kepler_node_cpu_joules_total{zone="package"}[300s]))
"""  # noqa: E501

from __future__ import annotations

import aiohttp

from webhook.decision.accounting import PodJoules
from webhook.prometheus import promql

POD_METRIC = "kepler_pod_cpu_joules_total"
NODE_METRIC = "kepler_node_cpu_joules_total"


def _selector(zone: str) -> str:
    return '{zone="' + zone.replace("\\", "\\\\").replace('"', '\\"') + '"}'


def _window(seconds: float) -> str:
    return f"{max(1, round(seconds))}s"


class Kepler:
    """Kepler's joules over a window, from the Prometheus at ``url``."""

    def __init__(self, url: str, *, zone: str, cluster_label: str, timeout: float = 10.0) -> None:
        self.url = url
        self.zone = zone
        self.cluster_label = cluster_label
        self.timeout = aiohttp.ClientTimeout(total=timeout)

    def pod_query(self, seconds: float) -> str:
        by = f"{self.cluster_label}, pod_namespace, pod_name"
        increase = f"increase({POD_METRIC}{_selector(self.zone)}[{_window(seconds)}])"
        return f"sum by ({by}) ({increase})"

    def node_query(self, seconds: float) -> str:
        increase = f"increase({NODE_METRIC}{_selector(self.zone)}[{_window(seconds)}])"
        return f"sum by (node_name) ({increase})"

    async def pods(self, seconds: float) -> list[PodJoules]:
        """Every pod's joules over the last ``seconds`` (raises ``QueryError``)."""
        async with aiohttp.ClientSession(timeout=self.timeout) as session:
            samples = await promql.instant(session, self.url, self.pod_query(seconds))
        return [
            PodJoules(
                cluster=labels.get(self.cluster_label, ""),
                namespace=labels.get("pod_namespace", ""),
                pod=labels.get("pod_name", ""),
                joules=value,
            )
            for labels, value in samples
        ]

    async def nodes(self, seconds: float) -> dict[str, float]:
        """Node name -> joules over the last ``seconds`` (raises ``QueryError``)."""
        async with aiohttp.ClientSession(timeout=self.timeout) as session:
            samples = await promql.instant(session, self.url, self.node_query(seconds))
        return {labels.get("node_name", ""): value for labels, value in samples}
