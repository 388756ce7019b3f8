"""People and roles: what each role may do, in one mapping the API's door consults.

``viewer`` sees (sessions, screens, the ledger, the policy, its own push subscriptions);
``operator`` also answers, types, sends keys, creates, renames, resizes, resumes and deletes
sessions; ``owner`` also edits the policy (the kill switch), pairs and revokes devices and
manages users. The API token and a dashboard login made from it act as ``owner``.

Every request is checked here and nowhere else: :func:`needed` maps a route (its method and
path template, as the router matched it) to the least role that may use it; a route the
mapping does not name needs ``viewer`` to read and ``owner`` to write, so a new write route is
closed until someone says who may use it. A refusal is a 403 whose reason names the missing
role (:func:`refusal`); a WebSocket is closed with :data:`CLOSE_FORBIDDEN` and that reason.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CLOSE_FORBIDDEN", "KEYS", "ROUTE_ROLES", "WEBSOCKET", "Role", "needed", "refusal"]

#: The close code of a WebSocket refused for its role (as 403 for HTTP).
CLOSE_FORBIDDEN = 4403
#: The pseudo-methods of the mapping: opening a WebSocket, and keys sent over the terminal's.
WEBSOCKET = "WS"
KEYS = "KEYS"


class Role(StrEnum):
    viewer = "viewer"
    operator = "operator"
    owner = "owner"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def covers(self, other: Role) -> bool:
        """This role may do what ``other`` may."""
        return self.rank >= other.rank


_RANK = {Role.viewer: 0, Role.operator: 1, Role.owner: 2}

_SID = "/api/sessions/{sid}"
#: (method, path template) → the least role that may use it; the rest: GET viewer, writes owner.
ROUTE_ROLES: dict[tuple[str, str], Role] = {
    ("POST", "/api/sessions"): Role.operator,
    ("PATCH", _SID): Role.operator,
    ("DELETE", _SID): Role.operator,
    ("POST", f"{_SID}/send"): Role.operator,
    ("POST", f"{_SID}/answer"): Role.operator,
    ("POST", f"{_SID}/resize"): Role.operator,
    ("POST", f"{_SID}/resume"): Role.operator,
    ("POST", f"{_SID}/cancel"): Role.operator,
    (KEYS, "/ws/sessions/{sid}/term"): Role.operator,
    # a viewer is told about prompts too: its own push subscriptions, and what its page shows
    ("POST", "/api/push/subscriptions"): Role.viewer,
    ("DELETE", "/api/push/subscriptions/{sub_id}"): Role.viewer,
    ("POST", "/api/push/test"): Role.viewer,
    ("POST", "/api/push/seen"): Role.viewer,
    ("POST", "/logout"): Role.viewer,
    # who is who: owners only (a viewer reads its own entry at /api/me)
    ("GET", "/api/devices"): Role.owner,
    ("GET", "/api/users"): Role.owner,
}
#: Methods that only read.
_READS = frozenset({"GET", "HEAD", WEBSOCKET})


def needed(method: str, template: str) -> Role:
    """The least role that may use ``method`` on the route ``template``."""
    found = ROUTE_ROLES.get((method, template))
    if found is not None:
        return found
    return Role.viewer if method in _READS else Role.owner


def refusal(need: Role, have: Role) -> str | None:
    """None when ``have`` covers ``need``; else the reason a 403 (or a 4403 close) gives."""
    return None if have.covers(need) else f"needs role {need} (you are {have})"
