"""What a name or value must be before it may reach a URL, a label or a manifest: one definition, two uses.

Every rule here is enforced twice: at admission, by the CRD schema generated from the models (a pattern, or a
CEL rule in ``x-kubernetes-validations``), and again in code when the operator parses a spec, because a run may
have been stored before the CRD had the rule. A namespace name that is not a DNS label (``"victim#"``,
``".."``) would otherwise change which REST path a request lands on; a label value with a trailing newline
passes a regex that uses ``$``. So Python checks use ``re.fullmatch`` and the CRD patterns are anchored.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_SUBDOMAIN_MAX = 253
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_VALUE_MAX = 63
# A qualified label key: optional DNS-subdomain prefix and "/", then a name of 1-63 characters.
LABEL_KEY_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                     r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_KEY_MAX = DNS_SUBDOMAIN_MAX + 1 + LABEL_VALUE_MAX
# A storage size: a plain decimal with an optional binary or decimal suffix (what PVCs are usually given).
SIZE_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
SIZE_MAX = "1Pi"  # no array provisions more per volume; past 8Ei a byte count overflows int64
# A resource quantity (requests/limits): also milli-, micro- and nano- units (e.g. cpu: 250m).
RESOURCE_QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(n|u|m|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
# An image reference without whitespace or shell metacharacters: registry/path:tag@digest.
IMAGE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$"
IMAGE_MAX = 512
RESERVED_LABEL_PREFIX = "csibench.io/"
RESERVED_LABEL_KEYS = frozenset({"app.kubernetes.io/managed-by"})
SYSTEM_NAMESPACE_PREFIX = "kube-"
DEFAULT_OPERATOR_NAMESPACE = "csibench-system"

_SUFFIX_FACTORS: dict[str, Decimal] = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    **{suffix: Decimal(10) ** (3 * power) for power, suffix in enumerate("kMGTPE", start=1)},
    **{f"{suffix}i": Decimal(2) ** (10 * power) for power, suffix in enumerate("KMGTPE", start=1)},
}
_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)(n|u|m|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")


def is_dns_label(value: str) -> bool:
    return len(value) <= DNS_LABEL_MAX and re.fullmatch(DNS_LABEL_PATTERN[1:-1], value) is not None


def is_dns_subdomain(value: str) -> bool:
    return len(value) <= DNS_SUBDOMAIN_MAX and re.fullmatch(DNS_SUBDOMAIN_PATTERN[1:-1], value) is not None


def is_label_value(value: str) -> bool:
    return len(value) <= LABEL_VALUE_MAX and re.fullmatch(LABEL_VALUE_PATTERN[1:-1], value) is not None


def is_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (len(name) <= LABEL_VALUE_MAX and len(prefix) <= DNS_SUBDOMAIN_MAX
            and re.fullmatch(LABEL_KEY_PATTERN[1:-1], key) is not None)


def is_reserved_label_key(key: str) -> bool:
    """Keys the operator sets itself to mark ownership; a user's value would forge or hide it."""
    return key.startswith(RESERVED_LABEL_PREFIX) or key in RESERVED_LABEL_KEYS


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes quantity (the forms the patterns above allow) as an exact number; ValueError otherwise."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a quantity such as 1Gi, 500M or 250m")
    try:
        return Decimal(match.group(1)) * _SUFFIX_FACTORS[match.group(2) or ""]
    except InvalidOperation as error:  # pragma: no cover - the pattern admits only plain decimals
        raise ValueError(f"{text!r} is not a quantity") from error


def size_in_bounds(value: str, what: str) -> str:
    """A volume size in (0, SIZE_MAX], or a ValueError naming the field."""
    if not 0 < parse_quantity(value) <= parse_quantity(SIZE_MAX):
        raise ValueError(f"{what} must be greater than 0 and at most {SIZE_MAX}, not {value}")
    return value


def labels_only(labels: dict[str, str], what: str) -> dict[str, str]:
    """Labels (a node selector) whose keys and values are valid, or a ValueError naming each problem."""
    problems = label_problems(labels, what)
    if problems:
        raise ValueError("; ".join(problems))
    return labels


def label_problems(labels: dict[str, str], what: str) -> list[str]:
    """Why these labels cannot go on an object, one sentence each (empty when they can)."""
    problems = []
    for key, value in labels.items():
        if not is_label_key(key):
            problems.append(f"{what} key {key!r} is not a valid label key (an optional DNS-subdomain prefix and "
                            "'/', then 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)")
        if not is_label_value(value):
            problems.append(f"{what} {key!r}: value {value!r} is not a valid label value (at most 63 "
                            "alphanumerics, '-', '_' or '.', starting and ending alphanumeric)")
    return problems


def namespace_problem(name: str, operator_namespace: str) -> str | None:
    """Why benchmark objects may not go into this namespace, or None."""
    if not is_dns_label(name):
        return f"targetNamespace {name!r} is not a valid namespace name (a DNS-1123 label)"
    if name.startswith(SYSTEM_NAMESPACE_PREFIX):
        return f"targetNamespace {name!r} is a system namespace; benchmark objects never go there"
    if name == operator_namespace:
        return f"targetNamespace {name!r} is the operator's own namespace; benchmark objects never go there"
    return None
