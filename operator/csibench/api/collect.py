"""What a run asks Prometheus over each step's window (spec.collect), and what it got back (status).

Users ask what the CSI machinery itself costs while it works ("createVolume of 1000 volumes cost the provisioner
40 CPU-seconds"), and kube-burner-style PromQL per step. A query is evaluated over the step's window, which starts
when the step's clock starts and ends once Prometheus has scraped every target after the clock stopped (the run
waits for that before the next step, so the window's end is quiet). Four readings of a query over that window:
``Instant`` (its value at the end), ``Increase`` (a counter's value at the end minus at the start, per series:
exact to the scrapes, no extrapolation), ``Rate`` (that increase per second of step time) and ``Max`` (its highest
value over the window, at the scrape resolution).

Queries are text the run's author wrote; the run only substitutes a few placeholders, each a label value escaped
for a PromQL string (``$run``, ``$namespace``, ``$storageClass``) or a regular expression of container names
(``$machinery``); any other ``$name`` is refused at admission, so a run's name can never change a query's shape.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.parse
from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field, field_validator, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model

MAX_COLLECT_QUERIES = 16
MAX_COLLECTED_VALUES = 48  # per step: series of every query together
MAX_SERIES_LABELS = 8
QUERY_MAX = 2000
QUERY_NAME_PATTERN = r"^[a-z][a-zA-Z0-9]{0,39}$"
UNIT_PATTERN = r"^[A-Za-z][A-Za-z0-9/%-]{0,15}$"
# The operator's own Prometheus (``--prometheus-url``), for runs whose spec.collect names none; the command line sets
# it, the engine reads it.
PROMETHEUS_URL_ENV = "CSIBENCH_PROMETHEUS_URL"
# Set by the operator's --allow-link-local-prometheus: its own --prometheus-url may be link-local (never a run's).
PROMETHEUS_ALLOW_LINK_LOCAL_ENV = "CSIBENCH_PROMETHEUS_ALLOW_LINK_LOCAL"
# http(s), a host (DNS name or IPv4), an optional port and path: no user info, query string or fragment, so the
# URL the operator builds from it is always ``<url>/api/v1/...``.
PROMETHEUS_URL_PATTERN = r"^https?://[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?(/[A-Za-z0-9._~-]+)*/?$"
# Where clouds serve instance metadata (credentials): link-local addresses, a few others, and their usual names. A
# run may not point the operator there (a confused deputy reading the node's credentials); numeric hosts in the
# resolver's legacy forms (2852039166, 0xa9fea9fe, 0251.0376.0251.0376) are refused at admission as a whole, and
# read as the address they are by the models. The client checks the address it connects to as well.
METADATA_ADDRESSES = frozenset({"100.100.100.200", "168.63.129.16", "fd00:ec2::254", "fd20:ce::254"})
METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "instance-data", "instance-data.ec2.internal"})
# Admission refuses the metadata names and addresses as written, and numeric hosts in any form but canonical dotted
# decimal (a number whose labels are all digits or 0x-hex must be four decimal octets without leading zeros).
_NUMERIC_HOST = "^https?://(0[xX][0-9a-fA-F]*|[0-9]+)([.](0[xX][0-9a-fA-F]*|[0-9]+))*[.]?([:/]|$)"
_DOTTED_DECIMAL = "^https?://(0|[1-9][0-9]{0,2})([.](0|[1-9][0-9]{0,2})){3}([:/]|$)"
_METADATA_HOST = ("^https?://(169[.]254[.][0-9]+[.][0-9]+|100[.]100[.]100[.]200|168[.]63[.]129[.]16|"
                  "(?i:metadata|metadata[.]google[.]internal|instance-data|instance-data[.]ec2[.]internal)[.]?)"
                  "([:/]|$)")
PROMETHEUS_URL_RULES = (
    (f"!self.matches('{_METADATA_HOST}')",
     "prometheusUrl may not name a link-local or cloud metadata address"),
    (f"!self.matches('{_NUMERIC_HOST}') || self.matches('{_DOTTED_DECIMAL}')",
     "prometheusUrl may name an IPv4 address only in dotted decimal (no 2852039166, 0xa9fea9fe, 0251.0.0.1)"),
)
PLACEHOLDERS = ("run", "namespace", "storageClass", "machinery")
PLACEHOLDER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# Containers of the CSI machinery costed by default (as sidecar images name their containers), besides what the
# preflight found serving the class and what spec.collect.components adds.
PROFILE_QUERY_NAMES = ("cpuSeconds", "peakMemoryBytes")
DEFAULT_MACHINERY = ("csi-provisioner", "csi-attacher", "csi-snapshotter", "csi-resizer", "snapshot-controller",
                     "csi-sim-driver")


class Aggregation(StrEnum):
    INSTANT = "Instant"
    INCREASE = "Increase"
    RATE = "Rate"
    MAX = "Max"


class CollectProfile(StrEnum):
    CSI_MACHINERY = "CSIMachinery"
    NONE = "None"



ContainerName = Annotated[str, Field(max_length=v.DNS_LABEL_MAX, pattern=v.DNS_LABEL_PATTERN)]
PROFILE_RULE = ("self.profile == 'None' || !has(self.queries) || "
                "!self.queries.exists(q, q.name in ['cpuSeconds', 'peakMemoryBytes'])",
                "query names cpuSeconds and peakMemoryBytes are the CSIMachinery profile's; choose others")

def placeholder_problems(query: str) -> list[str]:
    """``$name`` placeholders a query may not use (pure)."""
    return [f"unknown placeholder ${name} (known: {', '.join('$' + p for p in PLACEHOLDERS)})"
            for name in PLACEHOLDER.findall(query) if name not in PLACEHOLDERS]


NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def forbidden_address(address: str) -> bool:
    """A link-local address (169.254.0.0/16, fe80::/10) or a known metadata service's address (pure)."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address):
        if str(parsed) in METADATA_ADDRESSES or parsed.is_link_local:
            return True
        # An IPv4 address inside an IPv6 one: mapped, 6to4 (2002::/16) or NAT64 (64:ff9b::/96) reach it as well.
        embedded = parsed.ipv4_mapped or parsed.sixtofour or (
            ipaddress.IPv4Address(int(parsed) & 0xFFFFFFFF) if parsed in NAT64 else None)
        if embedded is None:
            return False
        parsed = embedded
    return parsed.is_link_local or str(parsed) in METADATA_ADDRESSES


def forbidden_prometheus_host(url: str) -> str | None:
    """Why a Prometheus URL may not be asked (a port out of range, a metadata service's name, or an address that is
    link-local or a metadata service's in any numeric form the resolver accepts), or None (pure: no lookup)."""
    parts = urllib.parse.urlsplit(url)
    try:
        if parts.port == 0:
            return "port 0 is no port"
    except ValueError:  # urllib: "Port out of range 0-65535"
        return "its port is not a port (1-65535)"
    host = (parts.hostname or "").rstrip(".").lower()
    if host in METADATA_HOSTS:
        return f"{host} is a cloud metadata service's name"
    try:
        address = socket.inet_ntoa(socket.inet_aton(host))  # 2852039166 and 0xa9fea9fe are 169.254.169.254
    except OSError:
        address = host
    if forbidden_address(address):
        return f"{host} is a link-local or cloud metadata address ({address})"
    return None


class CollectQuery(_Model):
    """One PromQL query evaluated over each step's window."""

    name: str = Field(..., pattern=QUERY_NAME_PATTERN, max_length=40,
                      description="Name in status and the report, camelCase (e.g. apiserverRequests).")
    query: str = Field(..., min_length=1, max_length=QUERY_MAX,
                       json_schema_extra={"x-kubernetes-validations": [{
                           "rule": "self.findAll('[$][A-Za-z_][A-Za-z0-9_]*').all(p, p in "
                                   "['$run', '$namespace', '$storageClass', '$machinery'])",
                           "message": "a query may use only the placeholders $run, $namespace, $storageClass and "
                                      "$machinery"}]},
                       description="PromQL. Placeholders: $run, $namespace (the run's target namespace), "
                                   "$storageClass (escaped label values, for use inside quotes) and $machinery (a "
                                   "regular expression of the CSI machinery's container names).")
    aggregation: Aggregation = Field(Aggregation.INCREASE,
                                     description="Instant (value at the window's end), Increase (a counter's end "
                                                 "minus start, per series), Rate (Increase per second of step "
                                                 "time) or Max (highest value over the window).")
    unit: str | None = Field(None, pattern=UNIT_PATTERN, description="Unit shown with the values, e.g. CPU-s, "
                                                                      "bytes, requests.")

    @field_validator("query")
    @classmethod
    def _known_placeholders(cls, value: str) -> str:
        problems = placeholder_problems(value)
        if any(ord(c) < 32 and c not in "\t\n" for c in value):
            problems.append("control characters are not allowed")
        if problems:
            raise ValueError("; ".join(problems))
        return value


class CollectSpec(_Model):
    """PromQL over every step's window: the CSI machinery's cost by default, and queries of your own."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_enum_values=False, json_schema_extra={
        "x-kubernetes-validations": [{"rule": PROFILE_RULE[0], "message": PROFILE_RULE[1]}]})

    prometheusUrl: str | None = Field(
        None, max_length=256, pattern=PROMETHEUS_URL_PATTERN,
        json_schema_extra={"x-kubernetes-validations": [{"rule": rule, "message": message}
                                                        for rule, message in PROMETHEUS_URL_RULES]},
        description="Prometheus to ask, e.g. http://prometheus.monitoring:9090 (default: the operator's "
                    "--prometheus-url). Link-local and cloud metadata addresses are refused.")
    profile: CollectProfile = Field(
        CollectProfile.CSI_MACHINERY,
        description="CSIMachinery: CPU-seconds (cpuSeconds) and peak memory (peakMemoryBytes) per container of the "
                    "CSI machinery per step, from cAdvisor's container_* series or, where the components are "
                    "scraped themselves, their process_* series; None: only the queries below.")
    components: list[ContainerName] = Field(
        default_factory=list, max_length=16,
        description="More container names to cost with the profile (e.g. the driver's own container); the "
                    "sidecars found by the preflight and the usual sidecar names are costed anyway.")
    queries: list[CollectQuery] = Field(default_factory=list, max_length=MAX_COLLECT_QUERIES,
                                        description="Queries of your own, evaluated over each step's window.")
    settleTimeoutSeconds: int = Field(
        120, ge=1, le=3600,
        description="After each step, the run waits until Prometheus has scraped every target since the step's "
                    "clock stopped (so the window holds the step's last seconds), at most this long.")

    @field_validator("prometheusUrl")
    @classmethod
    def _not_metadata(cls, value: str | None) -> str | None:
        if value is not None and (problem := forbidden_prometheus_host(value)) is not None:
            raise ValueError(f"prometheusUrl: {problem}; a run may not ask it")
        return value

    @field_validator("components")
    @classmethod
    def _components_are_labels(cls, value: list[str]) -> list[str]:
        problems = [f"component {name!r} is not a container name (a DNS label)" for name in value
                    if not v.is_dns_label(name)]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("queries")
    @classmethod
    def _unique_names(cls, value: list[CollectQuery]) -> list[CollectQuery]:
        names = [query.name for query in value]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"query names must be unique: {', '.join(repeated)}")
        return value

    @model_validator(mode="after")
    def _profile_names_free(self) -> CollectSpec:
        if self.profile == CollectProfile.CSI_MACHINERY:
            taken = sorted({q.name for q in self.queries} & set(PROFILE_QUERY_NAMES))
            if taken:
                raise ValueError(f"query names {', '.join(taken)} are the CSIMachinery profile's; choose others")
        return self


class CollectedValue(_Model):
    """One series of one query over one step's window."""

    query: str = Field(..., description="The query's name (cpuSeconds, peakMemoryBytes, or one of spec.collect).")
    labels: dict[str, str] = Field(default_factory=dict, description="The series' labels (at most 8).")
    value: float = Field(..., description="The reading over the window (see the query's aggregation).")
    unit: str | None = Field(None, description="Unit of the value.")


class StepCollection(_Model):
    """What Prometheus said about one step's window."""

    start: str = Field(..., description="Window start (RFC 3339, ms): the step's clock started.")
    end: str = Field(..., description="Window end (RFC 3339, ms): every target scraped after the clock stopped.")
    values: list[CollectedValue] = Field(default_factory=list, max_length=MAX_COLLECTED_VALUES,
                                         description="Per query and series, the reading over the window.")
