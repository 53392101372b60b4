"""Leader election's first-run check: say it when kopf's peering CRDs are missing.

With a peering name (the default, for two replicas with leader election), kopf pauses every
watch until its peering CRD is served, and says nothing about it: the operator looks up
but reconciles nothing. This watch checks discovery at startup and then every
`interval` seconds, logging one line at ERROR for as long as the CRD is missing (what is
missing and the two ways out), and one line when it appears.

Chosen over falling back to standalone: a replica cannot tell that it is the only one
without the very peering objects that are missing, and two replicas that both fell back
(a rolling update, two replicas in the chart) would both write. The message is also on
/healthz (probe "peering"); it does not fail liveness, since a restart cannot install a CRD.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import kopf

from tokenfleet.controller.kube import ApiError, KubeClient

PEERING_API = "kopf.dev/v1"
# Once a minute: soon enough to notice within a `kubectl logs`, quiet enough (60 lines an
# hour) not to bury other logs; kopf retries a failed login at the same period.
RECHECK_SECONDS = 60.0
log = logging.getLogger("tokenfleet.peering")


def peering_plural(clusterwide: bool) -> str:
    """kopf uses the cluster-scoped peering for a cluster-wide operator, else namespaced."""
    return "clusterkopfpeerings" if clusterwide else "kopfpeerings"


def missing_message(plural: str, peering: str) -> str:
    return (
        f"leader election (peering {peering!r}) is waiting: kopf's peering CRD "
        f"{plural}.kopf.dev is not installed, so no LLMService is reconciled; install the "
        "chart's CRDs (kubectl apply --server-side -f charts/tokenfleet/crds/) or, for a "
        "single replica, restart with --standalone"
    )


class PeeringWatch:
    def __init__(
        self, kube: KubeClient, peering: str, clusterwide: bool, interval: float = RECHECK_SECONDS
    ) -> None:
        self.kube = kube
        self.peering = peering
        self.plural = peering_plural(clusterwide)
        self.interval = interval
        self.missing: bool | None = None  # None: not checked yet
        self._task: asyncio.Task[None] | None = None

    async def check(self) -> bool:
        """True when the CRD is missing (logs the one line); False once it is served."""
        try:
            served = await self.kube.has_resource(PEERING_API, self.plural)
        except (ApiError, httpx.HTTPError) as error:  # discovery failed: say so, look again
            log.error("cannot check for kopf's peering CRD %s: %s", self.plural, error)
            return True
        was_missing, self.missing = self.missing, not served
        if self.missing:
            log.error(missing_message(self.plural, self.peering))
        elif was_missing:
            log.info("kopf's peering CRD %s.kopf.dev is installed: leader election resumes",
                     self.plural)  # fmt: skip
        return self.missing

    async def run(self) -> None:
        while True:
            try:
                missing = await self.check()
            except kopf.TemporaryError:  # not logged in yet (startup runs before login)
                await asyncio.sleep(1.0)
                continue
            if not missing:
                return
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name="tokenfleet-peering-check")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def watch_peering(
    registry: kopf.OperatorRegistry,
    kube: KubeClient,
    peering: str,
    clusterwide: bool,
    interval: float = RECHECK_SECONDS,
) -> PeeringWatch:
    """Add the check to an operator's registry: started after login, stopped at exit."""
    watch = PeeringWatch(kube, peering, clusterwide, interval)

    @kopf.on.startup(registry=registry, id="peering-check")
    async def start(**_: Any) -> None:
        watch.start()

    @kopf.on.cleanup(registry=registry, id="peering-check")
    async def stop(**_: Any) -> None:
        await watch.stop()

    @kopf.on.probe(registry=registry, id="peering")
    def probe(**_: Any) -> str:
        if watch.missing:
            return f"waiting: {watch.plural}.kopf.dev not installed (or run --standalone)"
        return "unknown" if watch.missing is None else "installed"

    return watch
