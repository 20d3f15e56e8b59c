"""Per-workload figures over a window from Prometheus (``carbonshift report --prometheus``)."""

from __future__ import annotations

import datetime

import aiohttp

from webhook.model.errors import QueryError, UsageError
from webhook.prometheus import promql

Key = tuple[str, str, str, str, str]
METRICS = (
    "carbonshift_energy_kwh_total",
    "carbonshift_emissions_grams_total",
    "carbonshift_counterfactual_emissions_grams_total",
)
BY = "kind, namespace, name, signal, method"


def _window(since: datetime.timedelta) -> str:
    return f"{max(60, int(since.total_seconds()))}s"


async def increases(url: str, since: datetime.timedelta) -> dict[Key, list[float]]:
    """``(kind, namespace, name, signal, method) -> [kWh, grams, counterfactual grams]``
    the counters rose by over ``since`` (the leader's series, whichever replica led)."""
    out: dict[Key, list[float]] = {}
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for index, metric in enumerate(METRICS):
            query = f"sum by ({BY}) (increase({metric}[{_window(since)}]))"
            try:
                samples = await promql.instant(session, url, query)
            except QueryError as exc:
                raise UsageError(f"--prometheus: {exc}") from None
            for labels, value in samples:
                key = tuple(str(labels.get(k, "")) for k in BY.split(", "))
                row = out.setdefault(key, [0.0, 0.0, 0.0])  # type: ignore[arg-type]
                row[index] = value
    return out
