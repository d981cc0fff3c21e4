"""The API models' common base: unknown fields refused, camelCase names as given, enums kept as enums."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False, populate_by_name=True)
