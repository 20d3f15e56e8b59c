"""The one check of a grid zone key written by hand (the config's zones, a scenario's):
every command refuses the same mistake with the same line and exit status 2, pointing to
the key meant (``pl``: PL, ``France``: FR). Which zones the providers serve is checked
after, by :func:`webhook.feed.zones.check_config`."""

from __future__ import annotations

from webhook.model.regions import country_zones, zone_for_region
from webhook.model.validation import InvalidInput


def zone_problem(zone: str) -> str | None:
    """Why ``zone`` is not a grid zone key, with the key meant; None when it may be one."""
    meant = country_zones(zone)
    region = zone_for_region(None, zone)
    if region is not None and zone != region:
        return (
            f"{zone!r} is a cloud region, not a grid zone key; did you mean {region}? (or set "
            f"region: {zone} instead of zone)"
        )
    if meant:
        return f"{zone!r} is a country, not a grid zone key; did you mean {' or '.join(meant)}?"
    if zone != zone.upper():
        return f"grid zone keys are upper case, got {zone!r}; did you mean {zone.upper()}?"
    return None


def check_zone(zone: str, path: str) -> None:
    """Refuse ``zone`` at ``path`` (:class:`InvalidInput`) when it is not a grid zone key."""
    problem = zone_problem(zone)
    if problem is not None:
        raise InvalidInput(path, problem)
