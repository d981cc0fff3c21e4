"""What the engine needs of an API client, as Protocols: the boundary between the engine and ``KubeClient``.

The engine, the preflight checks and the watch threads depend on these Protocols, never on ``KubeClient`` itself:
``KubeClient`` satisfies them structurally (checked by mypy at the bottom of this module), and the unit tests'
in-memory API server (``tests/support/fake_kube.py``) implements them too, so tests hand it to the engine without
a cast and mypy checks that it still fits whenever the engine asks for more. Only the code that builds a client
(handlers, cli, the benchmarks) names ``KubeClient``.

Why a module of its own rather than inside ``kube/client.py``: the contract is short and is read on its own, by
whoever writes a fake or a new engine call, apart from the transport (TLS, rate limiting, retries, HTTP) it sits
on. It lives in the ``kube`` layer because ``kube/watch.py`` and ``kube/shared_watch.py``, below the engine, take
a client too.

``Reader`` is what the preflight checks use (reads only); ``WatchSource`` is what one watch thread uses (a list,
then a stream); ``KubeApi``, both and more, is the whole surface the engine uses: asynchronous reads and writes on
the event loop, the shared watches' identity (``server``, ``shared``) and the counters the run's status reports
(``limiter``, ``max_in_flight``, ``requests``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from csibench.kube.client import Json, TokenBucket


class WatchStream(Protocol):
    """An open streaming GET (a watch): urllib3's response, or a fake's."""

    @property
    def status(self) -> int: ...

    @property
    def data(self) -> bytes: ...

    def stream(self, amt: int | None, /) -> Iterator[bytes]:
        """The body in blocks (``None``: as they come)."""
        ...

    def shutdown(self) -> None:
        """Unblock a read in progress on another thread (stopping the watch)."""
        ...

    def release_conn(self) -> None: ...


class Reader(Protocol):
    """Reads on the event loop: all the preflight checks (``preflight/discovery.py``) may do."""

    async def get(self, path: str, query: dict[str, str] | None = None) -> Json | None:
        """The object or list; None for a 404."""
        ...


class WatchSource(Protocol):
    """What a watch thread (``kube/watch.py``) uses, on its own thread: a list, then a stream from its version."""

    def request_sync(self, method: str, path: str, body: Json | None = None,
                     query: dict[str, str] | None = None) -> Json:
        """One request on the calling thread; errors as ``ApiError`` (a missing object: 404)."""
        ...

    def stream(self, path: str, query: dict[str, str]) -> WatchStream:
        """Open a watch on the calling thread; the caller reads and closes it."""
        ...


class KubeApi(Reader, WatchSource, Protocol):
    """Everything the engine asks of a client (see ``KubeClient`` for each member's contract)."""

    @property
    def server(self) -> str:
        """The API server's URL: what clients that may share a watch have in common."""
        ...

    def shared(self) -> KubeApi:
        """A client of the same server for the operator's shared watches (reads TLS files: off the loop)."""
        ...

    @property
    def limiter(self) -> TokenBucket:
        """The client's rate limit and the time it has throttled (both reported in the run's status)."""
        ...

    @property
    def max_in_flight(self) -> int: ...

    @property
    def requests(self) -> int:
        """Requests sent so far (the run's status reports them)."""
        ...

    async def create(self, path: str, body: Json, on_send: Callable[[float], None] | None = None,
                     dry_run: bool = False) -> bool:
        """True if created; False if it already existed (409 AlreadyExists)."""
        ...

    async def delete(self, path: str, propagation: str = "Background", query: dict[str, str] | None = None,
                     on_send: Callable[[float], None] | None = None, uid: str | None = None,
                     grace_seconds: int | None = None) -> bool:
        """True if it deleted; False for a 404. With ``uid``, only the object with that uid; with
        ``grace_seconds``, that grace period instead of the object's own (a pod's terminationGracePeriodSeconds)."""
        ...

    async def admits(self, method: str, path: str, body: Json) -> str | None:
        """A DELETE or merge PATCH asked as a server-side dry run: None if the API server would admit it (or the
        object is gone), else what it said (RBAC, an admission policy)."""
        ...

    async def can_i(self, verb: str, resource: str, namespace: str, group: str = "") -> bool:
        """Whether this client may ``verb`` ``resource`` (``deployments/scale``: a subresource) in ``namespace`` (a
        SelfSubjectAccessReview)."""
        ...

    async def merge_patch(self, path: str, body: Json, on_send: Callable[[float], None] | None = None) -> Json | None:
        """The patched object; None for a 404. A ``metadata.uid`` in the body is a precondition."""
        ...

    async def text(self, path: str, query: dict[str, str] | None = None) -> str:
        """A GET whose answer is text (``pods/log``); errors as ``ApiError``."""
        ...


if TYPE_CHECKING:
    from csibench.kube.client import KubeClient

    def _the_client_satisfies_the_protocol(client: KubeClient) -> KubeApi:
        return client
