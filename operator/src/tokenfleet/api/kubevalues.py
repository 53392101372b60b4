"""Kubernetes value rules the API server enforces on the objects the operator writes.

A spec value copied into a Deployment or PVC must pass the API server's validation there,
or the operator would find out halfway through an apply. The same rules, checked when the
LLMService is parsed, give one error naming the LLMService field instead
(k8s.io/apimachinery/pkg/util/validation and pkg/api/resource).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator

# metadata.labels / annotations keys: an optional DNS-1123 subdomain prefix and a name.
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_NAME = re.compile(rf"^{_NAME}$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# resource.Quantity: a decimal number with an optional SI / binary suffix or exponent.
QUANTITY = re.compile(
    r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][0-9]+)?$"
)
MAX_ANNOTATIONS_BYTES = 256 * 1024  # TotalAnnotationSizeLimitB


def check_label_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    fix = "use [prefix/]name: name of at most 63 letters, digits, '-', '_' or '.', "
    fix += "starting and ending with a letter or digit; prefix a DNS subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        raise ValueError(f"{key!r} is not a valid label / annotation key; {fix}")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ValueError(f"{key!r} is not a valid key: invalid prefix {prefix!r}; {fix}")
    return key


def check_label_value(value: str) -> str:
    if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
        raise ValueError(
            f"{value!r} is not a valid label value; use at most 63 letters, digits, '-', '_' "
            "or '.', starting and ending with a letter or digit (or the empty string)"
        )
    return value


def check_quantity(value: Any) -> Any:
    """An int or a quantity string, not negative (the API server rejects both otherwise)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity; write e.g. 8, 7500m or 64Gi")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} is negative; quantities must be at least 0")
        return value
    if not isinstance(value, str) or not QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a quantity; write e.g. 8, 7500m or 64Gi")
    return value


def check_positive_quantity(value: Any) -> Any:
    check_quantity(value)
    number = re.match(r"^[0-9.]*", str(value))
    if not number or not number.group() or float(number.group()) <= 0:
        raise ValueError(f"{value!r} must be more than zero; write e.g. 100Gi")
    return value


def check_annotations(annotations: dict[str, str]) -> dict[str, str]:
    size = sum(len(k) + len(v) for k, v in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        raise ValueError(
            f"annotations total {size} bytes, more than the API server's {MAX_ANNOTATIONS_BYTES}; "
            "move large data into a ConfigMap"
        )
    return annotations


AFFINITY_KINDS = ("nodeAffinity", "podAffinity", "podAntiAffinity")


def check_affinity(affinity: dict[str, Any] | None) -> dict[str, Any] | None:
    """The top of a core/v1 Affinity: only its three kinds, each an object. Deeper
    structure is left to the API server, which the operator asks (a dry-run) first."""
    if affinity is None:
        return None
    unknown = sorted(set(affinity) - set(AFFINITY_KINDS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; an affinity has {', '.join(AFFINITY_KINDS)}")
    bad = sorted(k for k, v in affinity.items() if not isinstance(v, dict))
    if bad:
        raise ValueError(f"{bad} must be objects (see kubectl explain pod.spec.affinity)")
    return affinity


LabelKey = Annotated[str, AfterValidator(check_label_key)]
LabelValue = Annotated[str, AfterValidator(check_label_value)]
Labels = dict[LabelKey, LabelValue]
Annotations = Annotated[dict[LabelKey, str], AfterValidator(check_annotations)]
