"""Walking a generated OpenAPI schema, for the tests of both CRDs."""

from __future__ import annotations

from typing import Any


def walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every node of the schema with its path (``spec.dataPath.workloads[].name``)."""
    found = [(path, schema)]
    for name, sub in (schema.get("properties") or {}).items():
        found += walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        found += walk(schema["items"], f"{path}[]")
    return found
