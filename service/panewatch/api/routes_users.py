"""People and roles: the users over the paired devices (owners only, by ``access.roles``' mapping),
who the caller is (``/api/me``, anyone signed in), and a session's restriction to named users."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from ..access.devices import Devices
from ..access.roles import Role
from ..access.users import NAME_PATTERN, User, Users
from ..engine import EngineAPI
from ..errors import Unavailable
from .deps import engine_of, require_token, who_of

router = APIRouter(tags=["users"], dependencies=[Depends(require_token)])
UserName = Annotated[str, Field(pattern=NAME_PATTERN, description="1–32 of a-z 0-9 . _ -")]


def users_here(request: Request) -> Users:
    users: Users | None = getattr(request.app.state, "users", None)
    if users is None:
        raise Unavailable("this server keeps no users (no session registry)")
    return users


U = Annotated[Users, Depends(users_here)]


class Me(BaseModel):
    """Who is asking: the API token or a dashboard login (owners), or a device of a user."""

    kind: str
    id: str
    name: str
    user: str | None
    role: Role


class DeviceView(BaseModel):
    id: str
    name: str
    created: float
    last_seen: float | None
    revoked: float | None


class UserView(BaseModel):
    name: str
    role: Role
    created: float
    devices: list[DeviceView] = Field(description="its paired devices, revoked ones marked")


class UserList(BaseModel):
    users: list[UserView]
    restricted: dict[str, list[str]] = Field(
        default_factory=dict, description="the sessions restricted to named users: session id → its users"
    )


class NewUser(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: UserName
    role: Role = Role.viewer


class RoleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Role


class UserRemoved(BaseModel):
    removed: str
    revoked: list[str] = Field(description="its devices, revoked with it")


class SessionUsers(BaseModel):
    model_config = ConfigDict(extra="forbid")
    users: list[UserName] = Field(max_length=100, description="only these users (and owners) see it; [] opens it")


class SessionAccess(BaseModel):
    session: str
    users: list[str] = Field(description="the users it is restricted to; empty: everyone may see it")


def _devices(request: Request) -> Devices:
    devices: Devices = request.app.state.devices
    return devices


def view(user: User, devices: Devices, users: Users) -> UserView:
    found = [devices.get(d) for d in users.devices_of(user.name)]
    shown = [DeviceView.model_validate(d.as_dict()) for d in found if d is not None]
    return UserView(
        name=user.name, role=user.role, created=user.created, devices=sorted(shown, key=lambda d: d.created)
    )


@router.get("/api/me")
async def me(request: Request) -> Me:
    who = who_of(request)
    return Me(kind=who.kind, id=who.id, name=who.name, user=who.user, role=who.role)


@router.get("/api/users")
async def list_users(request: Request, users: U) -> UserList:
    return UserList(users=[view(u, _devices(request), users) for u in users.all()], restricted=users.restrictions())


@router.post("/api/users", status_code=201)
async def add_user(body: NewUser, request: Request, users: U) -> UserView:
    return view(users.add(body.name, body.role), _devices(request), users)


@router.patch("/api/users/{name}")
async def set_role(name: str, body: RoleBody, request: Request, users: U) -> UserView:
    return view(users.set_role(name, body.role), _devices(request), users)


@router.delete(
    "/api/users/{name}",
    responses={409: {"description": "the caller's own user: the device asking would be revoked by its own hand"}},
)
async def remove_user(name: str, request: Request, users: U) -> UserRemoved:
    """Forget the user and revoke its devices at once (their sockets close with 4401). Your own
    user is refused: another owner (or the API token, always an owner) removes it."""
    if name == who_of(request).user:
        raise HTTPException(
            409, f"{name} is you: removing it would revoke this device; another owner or the API token can"
        )
    revoked = [d for d in users.remove(name) if await _devices(request).revoke(d)]
    return UserRemoved(removed=name, revoked=revoked)


@router.get("/api/sessions/{sid}/users")
async def session_users(sid: str, users: U, engine: Annotated[EngineAPI, Depends(engine_of)]) -> SessionAccess:
    await engine.get(sid)  # 404 for no such session
    return SessionAccess(session=sid, users=sorted(users.restricted_to(sid)))


@router.put("/api/sessions/{sid}/users")
async def restrict_session(
    sid: str, body: SessionUsers, users: U, engine: Annotated[EngineAPI, Depends(engine_of)]
) -> SessionAccess:
    """Restrict the session to these users (owners always see it); [] opens it to everyone."""
    await engine.get(sid)
    return SessionAccess(session=sid, users=sorted(users.restrict(sid, body.users)))
