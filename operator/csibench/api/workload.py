"""The workload image's defaults: the release's image and the variable that overrides it for the operator.

The command line sets the variable (``--workload-image``) and prints the default in its help; the engine reads both
when a data-path or database step names no image. Here, below both, so the command line need not load the engine.
"""

from __future__ import annotations

DEFAULT_WORKLOAD_IMAGE = "ghcr.io/csibench/workload:0.1.0"
WORKLOAD_IMAGE_ENV = "CSIBENCH_WORKLOAD_IMAGE"
