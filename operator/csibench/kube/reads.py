"""Reading one object by name through a list: the operator may list and watch most kinds, not get them
(deploy/base's least-privilege RBAC), so a fresh read of one object is a list with a ``metadata.name`` field
selector. The name is checked as a Kubernetes name first, so a name from a status or a spec cannot widen the
selector to other objects."""

from __future__ import annotations

from csibench.api.validation import is_dns_subdomain
from csibench.kube.api import Reader
from csibench.kube.client import Json
from csibench.kube.resources import InvalidName, Resource


async def read_by_name(client: Reader, resource: Resource, namespace: str | None, name: str) -> Json | None:
    """The object ``name`` of ``resource`` (in ``namespace`` when namespaced), or None when there is none."""
    if not is_dns_subdomain(name):
        raise InvalidName(f"{name!r} is not a valid object name")
    listing = await client.get(resource.path(namespace), query={"fieldSelector": f"metadata.name={name}"}) or {}
    items = listing.get("items") or []
    return dict(items[0]) if items else None
