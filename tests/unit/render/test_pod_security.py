"""Every example and render case, rendered, against Pod Security Standards "restricted".

The rules are the profile's, written out from the Kubernetes documentation (Pod Security
Standards, policy version v1.30): baseline (no host namespaces / ports / paths, no
privileged, no added capabilities but the default set, no custom sysctls / procMount /
AppArmor / SELinux types) and restricted (volume types, allowPrivilegeEscalation false,
runAsNonRoot, runAsUser != 0, seccomp RuntimeDefault or Localhost, capabilities drop ALL
and add at most NET_BIND_SERVICE). Pure: no cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.render_cases import CASES_DIR
from tokenfleet.commands.render import load_documents, render_documents

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
CASES = sorted(CASES_DIR.glob("*.yaml"))
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
    "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    spec = manifest.get("spec") or {}
    if manifest["kind"] == "Deployment":
        return [spec["template"]["spec"]]
    if manifest["kind"] == "LeaderWorkerSet":
        group = spec["leaderWorkerTemplate"]
        return [t["spec"] for t in (group.get("leaderTemplate"), group["workerTemplate"]) if t]
    return []


def violations(pod: dict[str, Any]) -> set[str]:
    """The restricted-profile rules this pod spec breaks (empty: it passes)."""
    found: set[str] = set()
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(host):
            found.add(host)
    pod_ctx = pod.get("securityContext") or {}
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.add(f"volume {volume['name']}: {sorted(kinds)}")
    for container in [*(pod.get("initContainers") or []), *pod["containers"]]:
        ctx = container.get("securityContext") or {}
        where = container["name"]
        # Container settings override the pod's.
        setting = {**pod_ctx, **ctx}.get
        if ctx.get("privileged"):
            found.add(f"{where}: privileged")
        if any(p.get("hostPort") for p in container.get("ports") or []):
            found.add(f"{where}: hostPort")
        if ctx.get("allowPrivilegeEscalation") is not False:
            found.add(f"{where}: allowPrivilegeEscalation")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.add(f"{where}: capabilities.drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.add(f"{where}: capabilities.add")
        if setting("runAsNonRoot") is not True:
            found.add(f"{where}: runAsNonRoot")
        if setting("runAsUser") == 0:
            found.add(f"{where}: runAsUser 0")
        seccomp = (setting("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.add(f"{where}: seccompProfile")
        if ctx.get("procMount") not in (None, "Default"):
            found.add(f"{where}: procMount")
    if pod_ctx.get("sysctls"):
        found.add("sysctls")
    return found


def is_picker(manifest: dict[str, Any]) -> bool:
    labels = manifest["metadata"]["labels"]
    return labels.get("app.kubernetes.io/component") == "endpoint-picker"


def rendered(path: Path, picker: bool = False) -> list[tuple[str, dict[str, Any], bool]]:
    """(LLMService name, pod spec, whether it uses the non-root recipe) of the engine pods,
    or with `picker` of the endpoint picker's (spec.routing)."""
    docs = load_documents(str(path))
    out = []
    for r in render_documents(docs, path.name):
        recipe = r.service.spec.pod_template.security_context is not None
        chosen = [m for m in r.manifests if is_picker(m) == picker]
        out += [(r.service.name, pod, recipe) for m in chosen for pod in pod_specs(m)]
    return out


@pytest.mark.parametrize("path", EXAMPLES + CASES, ids=lambda p: p.name)
def test_every_engine_pod_passes_restricted_but_for_the_user_it_runs_as(path: Path) -> None:
    pods = rendered(path)
    assert pods, f"{path.name} rendered no pod"
    for name, pod, recipe in pods:
        assert pod["automountServiceAccountToken"] is False, name
        allowed = set() if recipe else {f"{c['name']}: runAsNonRoot" for c in pod["containers"]}
        assert violations(pod) <= allowed, name


def test_every_endpoint_picker_pod_passes_restricted_in_full() -> None:
    """The picker's image runs as a non-root user (65532), so nothing is left to the user;
    it keeps its API token, which it needs to watch its pool and the engine pods."""
    pods = [pod for path in EXAMPLES + CASES for _, pod, _ in rendered(path, picker=True)]
    assert len(pods) >= 3
    for pod in pods:
        assert violations(pod) == set()
        assert pod["automountServiceAccountToken"] is True


def test_the_non_root_recipe_passes_restricted_in_full_with_a_writable_home() -> None:
    pods = rendered(REPO / "examples" / "llama-3.1-8b-nonroot.yaml")
    for _, pod, recipe in pods:
        assert recipe and violations(pod) == set()
        assert pod["securityContext"]["fsGroup"] == 1000  # the cache PVC is writable
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert env["HOME"].startswith("/model-cache/") and "/model-cache" in mounts


def test_the_checker_catches_what_it_checks() -> None:
    """The rules above are not vacuous: a root, privileged pod breaks each of them."""
    bad = {
        "hostNetwork": True,
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "securityContext": {"runAsUser": 0},
        "containers": [
            {
                "name": "c",
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
            }
        ],
    }
    assert violations(bad) == {
        "hostNetwork", "volume h: ['hostPath']", "c: privileged", "c: hostPort",
        "c: allowPrivilegeEscalation", "c: capabilities.drop ALL", "c: capabilities.add",
        "c: runAsNonRoot", "c: runAsUser 0", "c: seccompProfile",
    }  # fmt: skip
