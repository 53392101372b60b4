"""The model-cache claim binds on a cloud's default storage class unless told otherwise:
EKS (gp2/gp3), GKE (standard-rwo) and AKS (managed-csi) offer ReadWriteOnce only, and a
ReadWriteMany claim there stays Pending with no pod scheduled and no error anywhere."""

from __future__ import annotations

import pytest

from tests.support.services import llmservice
from tokenfleet.api import parse_llmservice
from tokenfleet.render.storage import model_cache_claim


def _claim(storage: dict[str, object]) -> dict[str, object]:
    service = parse_llmservice(llmservice("m", storage=storage))
    claim = model_cache_claim(service)
    assert claim is not None
    return claim


def test_the_default_access_mode_is_read_write_once() -> None:
    spec = _claim({"size": "50Gi"})["spec"]
    assert spec == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "50Gi"}},
    }


@pytest.mark.parametrize("mode", ["ReadWriteMany", "ReadOnlyMany", "ReadWriteOncePod"])
def test_an_explicit_access_mode_is_kept(mode: str) -> None:
    claim = _claim({"accessMode": mode, "storageClassName": "efs"})
    assert claim["spec"]["accessModes"] == [mode]  # type: ignore[index]
