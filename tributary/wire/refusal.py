"""How a pump names the reason it refused a write, as structured detail beside the
gRPC status (several reasons share UNAVAILABLE, so the status alone cannot tell
them apart, and message text is not a contract).

The pump sends its reason in the trailing metadata key :data:`REFUSAL_KEY` of a
unary ``WriteBinlog`` refusal and in the ``reasons`` field of a
``WriteBinlogsResp``. Invariant: a reason in :data:`PREWRITE_ELSEWHERE` means
the pump refused before storing anything and cannot take prewrites now (it is
not online, it cannot renew its registration in etcd, its disk is nearly full):
another pump may take the prewrite at once. A Go pump sends no reason.
"""

from __future__ import annotations

REFUSAL_KEY = "tributary-refusal"

NOT_ONLINE = "not-online"
NOT_REGISTERED = "not-registered"
DISK_FULL = "disk-full"

PREWRITE_ELSEWHERE = frozenset({NOT_ONLINE, NOT_REGISTERED, DISK_FULL})
