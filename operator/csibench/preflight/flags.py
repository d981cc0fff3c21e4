"""Reading a Go binary's flags from a container spec, the way the binary itself would see them (pure).

Real-world specs spell flags every way Go's ``flag`` package accepts: ``--a=b``, ``-a=b``, ``--a b`` (the value as
the next argument), bare booleans, all split between ``command`` and ``args``, sometimes inside a ``sh -c`` line,
and with ``$(VAR)`` references the kubelet expands from the container's env. The last occurrence of a flag wins
and parsing stops at ``--`` or the first non-flag argument, as in Go (``--leader-election false`` ends it: a
boolean takes no separate value). Durations are Go durations ("10s", "1m30s", "500ms").
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

# Flags that take no value: "--leader-election" alone means true, and Go stops parsing at a non-flag argument
# after one, so "--leader-election false" must not read "false" as its value.
BOOLEAN_FLAGS = frozenset({
    "leader-election", "extra-create-metadata", "enable-capacity", "immediate-topology", "strict-topology",
    "enable-pvcref", "prevent-volume-mode-conversion", "enable-volume-group-snapshots", "logtostderr",
    "alsologtostderr", "enable-distributed-snapshotting", "enable-pprof", "handle-volume-inuse-error",
    "controller-publish-readonly", "default-allow-volume-expansion", "enable-node-deployment",
})
_ENV_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def expand_env(token: str, env: Mapping[str, str]) -> str:
    """``$(NAME)`` replaced by the env value the kubelet would put there; unknown references stay as written."""
    return _ENV_REFERENCE.sub(lambda match: env.get(match.group(1), match.group(0)), token)


def container_env(container: Mapping[str, Any]) -> dict[str, str]:
    """The container's literal env values (valueFrom cannot be resolved from the spec and is left out)."""
    return {str(item["name"]): str(item["value"]) for item in container.get("env") or []
            if isinstance(item, Mapping) and "name" in item and "value" in item}


SHELLS = frozenset({"sh", "bash", "ash", "dash"})
# Flags that always take a value, so "--kube-api-qps -1" reads -1 as its value, as Go's flag package does.
VALUE_FLAGS = frozenset({"kube-api-qps", "kube-api-burst", "worker-threads", "workers", "timeout",
                         "retry-interval-start", "retry-interval-max", "feature-gates", "csi-address", "v",
                         "kubeconfig", "drivername", "driver-name", "endpoint"})


def _argv(command: Sequence[str], args: Sequence[str]) -> list[str]:
    """The binary's own arguments: after the binary's name, or the line a shell runs (``sh -c "exec /bin
    --a=b"``, split as the shell would)."""
    tokens = [*command, *args]
    if tokens and tokens[0].rsplit("/", 1)[-1] in SHELLS and "-c" in tokens[:-1]:
        try:
            line = shlex.split(tokens[tokens.index("-c") + 1])
        except ValueError:
            return []
        tokens = line[1:] if line[:1] == ["exec"] else line
    return tokens[1:] if tokens and not tokens[0].startswith("-") else tokens


def parse_flags(command: Sequence[str], args: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every ``--name[=value]`` the binary would parse, by name without dashes; the last one wins. Parsing stops
    where Go's ``flag`` package stops: at ``--`` or at the first argument that is not a flag."""
    tokens = [expand_env(token, env or {}) for token in _argv(command, args)]
    flags: dict[str, str] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token == "--" or not token.startswith("-") or token == "-":
            break
        name, equals, value = token.lstrip("-").partition("=")
        if not equals:
            following = tokens[index] if index < len(tokens) else None
            if following is not None and (name in VALUE_FLAGS or
                                          (name not in BOOLEAN_FLAGS and not following.startswith("-"))):
                value = following
                index += 1
            else:
                value = "true"
        flags[name] = value
    return flags


def parse_duration(text: str) -> float | None:
    """A Go duration in seconds ("1m30s" -> 90.0); None when it is not one."""
    text = text.strip()
    if text == "0":
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def image_name_and_tag(image: str) -> tuple[str, str | None]:
    """``registry.k8s.io/sig-storage/csi-provisioner:v6.4.0@sha256:...`` -> ("csi-provisioner", "v6.4.0")."""
    reference = image.split("@", 1)[0]
    last = reference.rsplit("/", 1)[-1]
    name, colon, tag = last.partition(":")
    return name, (tag if colon and tag else None)
