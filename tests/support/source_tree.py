"""A small source tree written for a test of a checker that reads source files (imports, layers)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_tree(root: Path, files: Mapping[str, str]) -> None:
    """Write each relative path's text under ``root``, making its folders."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
