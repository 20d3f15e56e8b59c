"""The intensity feed: readings for every zone in use, kept in memory.

Request handlers only ever call the synchronous lookups (:meth:`IntensityFeed.get`,
:meth:`IntensityFeed.table`, :meth:`IntensityFeed.mean_over`,
:meth:`IntensityFeed.status`); they read plain dicts and never wait for I/O. All
provider I/O happens in the background refresher, through the cache
(:mod:`webhook.feed.cache`).

One module per job:

- :mod:`.memory`: what each provider last answered and what the feed answers from it
  (:class:`Snapshot`, :class:`ZoneStatus`, staleness and fallback);
- :mod:`.refresh`: keeping those answers up to date (single flight, Redis leases);
- :mod:`.fetch`: one provider call turned into a cache entry (TTL, error backoff);
- :mod:`.forecasts`: the mean over a coming horizon;
- :mod:`.history`: the hourly history, the outlook built on it, and the provider's
  forecasts as issued each hour;
- :mod:`.judging`: which of the provider's forecast and the day-ahead profile ranked a
  zone's hours better (the ``best`` outlook);
- :mod:`.publish`: the answers as Prometheus metrics;
- :mod:`.core`: :class:`IntensityFeed`, which joins them and runs the background loop.

Freshness and fallback: a failed refresh keeps the last good reading
(stale-while-revalidate). Once a reading's period ended more than
``feed.max_age_seconds`` ago it is stale: :meth:`IntensityFeed.get` answers with the
first provider in the chain that has a non-stale reading, and the refresher asks the
next providers. If none has one, the newest reading is served flagged ``stale=True``.
The reading's ``source`` starts with the name of the provider that answered
(``electricitymaps:...``, ``static:...``), and :meth:`IntensityFeed.status` says why
earlier providers did not.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webhook.feed.core import IntensityFeed
    from webhook.feed.memory import Snapshot, ZoneStatus

__all__ = ["IntensityFeed", "Snapshot", "ZoneStatus"]


def __getattr__(name: str) -> Any:
    """The feed's names, imported when first asked for: a module that needs only a part
    of the feed (``feed.history``, ``feed.judging``) does not load the providers' HTTP
    stack with it, so ``carbonshift --help`` answers at once."""
    if name == "IntensityFeed":
        from webhook.feed.core import IntensityFeed  # noqa: PLC0415 - deferred on purpose

        return IntensityFeed
    if name in ("Snapshot", "ZoneStatus"):
        from webhook.feed import memory  # noqa: PLC0415 - deferred on purpose

        return getattr(memory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
