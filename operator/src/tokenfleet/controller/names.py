"""Which LLMService uses which derived object name, across LLMServices, in this process.

Names are derived from the LLMService's name (`x`, `x-lws`, `x-model-cache`), so two
LLMServices can derive the same one: the LLMService named `x-lws` renders a Service `x-lws`,
and the LeaderWorkerSet `x-lws` of LLMService `x` makes the LWS controller create its
headless Service `x-lws` (names the operator does not write but must not let others take
are claimed as well: `implied`). The ownership check (ownership.py)
refuses a name whose object exists and belongs to another owner, but two reconciles
running at once both see it absent and the second server-side apply takes the object
over. A claim is taken before any write, in one step with no await (so atomic on the event
loop), and held until the object is pruned or its LLMService forgotten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Key = tuple[str, str, str]  # (kind, namespace, name)
Owner = tuple[str, str]  # (namespace, LLMService name)


def implied(manifest: Mapping[str, Any]) -> list[Key]:
    """Names a manifest makes someone else create: the LWS controller names its headless
    Service after the LeaderWorkerSet."""
    meta = manifest["metadata"]
    key: Key = (str(manifest["kind"]), str(meta["namespace"]), str(meta["name"]))
    if key[0] == "LeaderWorkerSet":
        return [key, ("Service", key[1], key[2])]
    return [key]


def collision_message(key: Key, owner: Owner, holder: Owner) -> str:
    kind, namespace, name = key
    return (
        f"{kind} {namespace}/{name} is a name both LLMService {owner[1]} and LLMService "
        f"{holder[1]} derive; LLMService {holder[1]} has it, so nothing of {owner[1]} is "
        f"written: rename one of them (metadata.name)"
    )


class NameClaims:
    def __init__(self) -> None:
        self._holders: dict[Key, Owner] = {}
        self._by_owner: dict[Owner, set[Key]] = {}

    def claim(self, owner: Owner, manifests: Iterable[Mapping[str, Any]]) -> list[str]:
        """Claim every manifest's name for `owner`; messages (and no claim) on a collision."""
        keys = [key for m in manifests for key in implied(m)]
        taken = [
            collision_message(key, owner, holder)
            for key in keys
            if (holder := self._holders.get(key)) is not None and holder != owner
        ]
        if taken:
            return taken
        for key in keys:
            self._holders[key] = owner
        self._by_owner.setdefault(owner, set()).update(keys)
        return []

    def release(self, key: Key) -> None:
        owner = self._holders.pop(key, None)
        if owner is not None:
            self._by_owner.get(owner, set()).discard(key)

    def forget(self, owner: Owner) -> None:
        for key in self._by_owner.pop(owner, set()):
            if self._holders.get(key) == owner:
                del self._holders[key]
