"""The ``admission.k8s.io/v1`` AdmissionReview as kube-apiserver sends it, decoded in one
pass by msgspec structs: the whole request (:class:`AdmissionRequest`), only its head
(:class:`Head`: which object and what is done), or what the decision memo keys on
(:class:`WireRequest`: metadata and the spec as raw JSON). A malformed envelope raises
:class:`~webhook.model.validation.InvalidInput` naming the field (HTTP 400).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

import msgspec

from webhook.model import validation

API_VERSION: Final = "admission.k8s.io/v1"


class GroupVersionKind(msgspec.Struct, frozen=True, gc=False):
    """``request.kind``: what the object is."""

    group: str = ""
    version: str = ""
    kind: str = ""


Object = dict[str, Any]


class Head(msgspec.Struct, frozen=True, gc=False):
    """The fields of ``request`` that say which object and what is done to it."""

    uid: Annotated[str, msgspec.Meta(min_length=1)]
    kind: GroupVersionKind = GroupVersionKind()
    operation: str = ""
    namespace: str = ""
    name: str = ""


class AdmissionRequest(Head, frozen=True, gc=False):
    """``request``: the fields carbonshift reads (others are accepted and ignored)."""

    object: Object | None = None
    oldObject: Object | None = None  # noqa: N815 - the API's field name
    dryRun: bool = False  # noqa: N815


R = TypeVar("R", bound=Head)


class AdmissionReview(msgspec.Struct, Generic[R], frozen=True, gc=False):
    """An ``admission.k8s.io/v1`` AdmissionReview as kube-apiserver sends it."""

    request: R
    apiVersion: Literal["admission.k8s.io/v1"] = API_VERSION  # noqa: N815
    kind: Literal["AdmissionReview"] = "AdmissionReview"


FULL = validation.decoder(AdmissionReview[AdmissionRequest])


class Metadata(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    generateName: str = ""  # noqa: N815
    namespace: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class Keyed(msgspec.Struct, frozen=True, gc=False):
    """What a memo key is made of: metadata and the spec as raw JSON (the rest of the
    object, managedFields and all, is skipped, not built)."""

    metadata: Metadata = Metadata()
    spec: msgspec.Raw = msgspec.Raw(b"null")


class WireRequest(Head, frozen=True, gc=False):
    """``request`` as the server first decodes it: enough to key and answer from the
    memo; the objects themselves are only built on a miss."""

    object: Keyed | None = None


WIRE = validation.decoder(AdmissionReview[WireRequest])
HEAD = validation.decoder(AdmissionReview[Head])


def parse(body: bytes) -> AdmissionRequest:
    """Decode and check the envelope; returns its ``request``."""
    return validation.decode(body, FULL).request


def request_of(data: Mapping[str, Any]) -> AdmissionRequest:
    """A ``request`` built in Python (previews, tests), checked like a decoded one."""
    return validation.convert(data, AdmissionRequest, "request")
