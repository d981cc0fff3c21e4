"""A status written as merge patches of what changed, for the controllers that keep their whole status in memory
(a suite, a schedule): one patch per change, not one per pass, and the first write sends every field, so a null
removes what an earlier operator wrote and this one no longer says."""

from __future__ import annotations

from typing import Any

from csibench.kube.api import KubeApi


class StatusPatcher:
    def __init__(self, client: KubeApi, status_path: str) -> None:
        self.client, self.status_path = client, status_path
        self.written: dict[str, Any] | None = None

    async def write(self, body: dict[str, Any]) -> None:
        """Patch the fields of ``body`` (a status as JSON) that differ from the last write; nothing if none do."""
        changed = body if self.written is None else {k: v for k, v in body.items() if self.written.get(k) != v}
        if not changed:
            return
        await self.client.merge_patch(self.status_path, {"status": changed})
        self.written = body
