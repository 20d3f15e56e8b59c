"""Waiting for CRDs to be Established (``devtools.sandbox.plane.wait_established``): a CRD
just created, listed without conditions yet, is waited for instead of failing the wait, as
``kubectl wait --for=condition=Established`` does on it."""

from __future__ import annotations

import pytest

from devtools.sandbox import SandboxError
from devtools.sandbox.plane import ESTABLISHED, conditions, wait_established

FRESH = "foreignclusters.core.liqo.io \n"
"""A CRD just created: its ``status.conditions`` is null, the jsonpath range prints none."""
NAMED = "foreignclusters.core.liqo.io NamesAccepted=True,Established=False,\n"
SERVED = "foreignclusters.core.liqo.io NamesAccepted=True,Established=True,\n"
OTHER = "virtualnodes.offloading.liqo.io NamesAccepted=True,Established=True,\n"


class Kubectl:
    """Answers ``kubectl get crd`` with one listing after another (the last repeats), on a
    fake clock that each sleep moves."""

    def __init__(self, *listings: str) -> None:
        self.listings = list(listings)
        self.calls: list[tuple[str, ...]] = []
        self.now = 0.0

    def __call__(self, *args: str) -> str:
        self.calls.append(args)
        return self.listings.pop(0) if len(self.listings) > 1 else self.listings[0]

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, *names: str, timeout: float = 60.0) -> None:
        wait_established(self, names, timeout=timeout, clock=lambda: self.now, sleep=self.sleep)


def test_the_listing_is_read_with_and_without_conditions() -> None:
    assert conditions(FRESH + SERVED.replace("foreign", "other")) == {
        "foreignclusters.core.liqo.io": [],
        "otherclusters.core.liqo.io": ["NamesAccepted=True", "Established=True"],
    }
    assert conditions("") == {}


def test_a_fresh_crd_is_waited_for_until_established() -> None:
    kubectl = Kubectl(FRESH + OTHER, NAMED + OTHER, SERVED + OTHER)
    kubectl.wait("foreignclusters.core.liqo.io", "virtualnodes.offloading.liqo.io")
    assert kubectl.calls == [("get", "crd", "-o", f"jsonpath={ESTABLISHED}")] * 3
    assert kubectl.now == 1.0  # two polls of 0.5 s


def test_a_crd_not_listed_yet_is_waited_for() -> None:
    kubectl = Kubectl(OTHER, OTHER + SERVED)
    kubectl.wait("foreignclusters.core.liqo.io")
    assert len(kubectl.calls) == 2


def test_without_names_every_listed_crd_is_waited_for() -> None:
    kubectl = Kubectl("", FRESH + OTHER, SERVED + OTHER)
    kubectl.wait()
    assert len(kubectl.calls) == 3  # nothing listed is not done either


def test_past_the_deadline_the_error_names_what_was_seen() -> None:
    kubectl = Kubectl(OTHER + FRESH)
    with pytest.raises(SandboxError) as failed:
        kubectl.wait("foreignclusters.core.liqo.io", "missing.example.com", timeout=5.0)
    assert str(failed.value) == (
        "CRDs not Established after 5 s: foreignclusters.core.liqo.io (no conditions), "
        "missing.example.com (not listed)"
    )
    assert kubectl.now == 5.0
    kubectl = Kubectl(NAMED)
    with pytest.raises(SandboxError, match=r"\(NamesAccepted=True,Established=False\)$"):
        kubectl.wait(timeout=1.0)
