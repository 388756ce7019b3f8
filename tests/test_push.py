"""Web Push on a hand-moved clock: what is pushed, to whom, what a receipt does, escalation once
per prompt, suppression per device, a push service's 404/410 and 5xx. No process, no socket:
the push service and the webhook are ASGI apps behind httpx's ASGI transport; every payload is
decrypted with the subscription's private key and every VAPID JWT verified (push_support)."""

from __future__ import annotations

import time

import httpx
import pytest
from py_vapid import Vapid
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from panewatch.clock import ManualClock
from panewatch.sinks.notify import Notifier
from panewatch.sinks.push import NOT_RECEIVING_AFTER, SEEN_S, Pusher, PushRefused, check_endpoint
from push_support import BrowserKeys, PushService, vapid_claims

pytestmark = pytest.mark.unit

PROMPT = {"id": "prompt-1", "kind": "options", "options": [{"option": 1, "label": "Yes"}, {"option": 2, "label": "No"}]}


class Hook:
    """A webhook receiver (ASGI): every JSON body it got."""

    def __init__(self) -> None:
        self.got: list[dict] = []

        async def post(request: Request) -> JSONResponse:
            self.got.append(await request.json())
            return JSONResponse({})

        self.app = Starlette(routes=[Route("/hook", post, methods=["POST"])])


class Rig:
    def __init__(self, chain: tuple[str, ...] = ("webhook",), prompt: dict | None = PROMPT) -> None:
        self.clock = ManualClock()
        self.service = PushService()
        self.hook = Hook()
        self.prompt = prompt
        self.notifier = Notifier(
            clock=self.clock.time,
            wall=self.clock.time,
            webhook="http://hook.test/hook",
            transport=httpx.ASGITransport(self.hook.app),
        )
        vapid = Vapid()
        vapid.generate_keys()
        self.pusher = Pusher(
            db=None,
            vapid=vapid,
            subject="mailto:ops@example.com",
            notifier=self.notifier,
            prompt_of=lambda sid: self.prompt,
            clock=self.clock,
            wall=self.clock.time,
            transport=httpx.ASGITransport(self.service.app()),
            ack_s=30.0,
            chain=chain,
        )
        self.keys: dict[str, BrowserKeys] = {}

    def subscribe(self, name: str, device: str | None = None):
        keys = self.keys[name] = BrowserKeys()
        sub = keys.subscription(f"https://push.test/push/{name}")
        return self.pusher.subscribe(
            sub["endpoint"], sub["keys"]["p256dh"], sub["keys"]["auth"], device=device or name, name=name
        )

    def blocked(self, session: str = "s1", request: dict | None = None):
        return self.notifier.on_transition(
            session=session,
            name="pane",
            agent="claude",
            prev="working",
            state="blocked",
            source="screen",
            rule="permission_dialog",
            why="a permission dialog",
            request=request,
        )

    async def settle(self) -> None:
        await self.pusher.drain()
        await self.notifier.drain()

    def payloads(self, name: str) -> list[dict]:
        return [self.keys[name].decrypt(r.body) for r in self.service.received if r.path == f"/push/{name}"]


async def test_a_blocked_pane_is_pushed_encrypted_and_signed_with_its_prompt():
    rig = Rig()
    rig.subscribe("phone")
    rig.blocked()
    await rig.settle()
    (request,) = rig.service.received
    assert request.headers["content-encoding"] == "aes128gcm"
    assert request.headers["urgency"] == "high" and int(request.headers["ttl"]) > 0
    claims = vapid_claims(request.headers["authorization"], rig.pusher.public_key)
    assert claims["aud"] == "https://push.test" and claims["sub"] == "mailto:ops@example.com"
    assert claims["exp"] > rig.clock.time()
    (payload,) = rig.payloads("phone")
    assert payload["session"] == "s1" and payload["state"] == "blocked" and payload["prompt_id"] == "prompt-1"
    # no request read from the pane: the rule's reason stands in for the question
    assert payload["request"] == {"question": "a permission dialog", "tool": "", "subject": ""}
    assert [a["title"] for a in payload["actions"]] == ["Yes", "No"]  # two options fit as actions
    assert payload["options"] == [{"label": "Yes", "option": 1}, {"label": "No", "option": 2}]
    assert payload["receipt_id"] and payload["title"] == "pane needs you"
    assert rig.hook.got == []  # the webhook waits for the escalation: a device is subscribed


async def test_the_push_says_what_is_asked_and_a_long_subject_is_cut_to_fit():
    rig = Rig()
    rig.subscribe("phone")
    ask = {"question": "Do you want to proceed?", "tool": "Bash", "subject": "rm -rf build", "source": "hook"}
    rig.blocked(request=ask)
    await rig.settle()
    (payload,) = rig.payloads("phone")
    assert payload["request"] == {"question": "Do you want to proceed?", "tool": "Bash", "subject": "rm -rf build"}
    assert payload["body"] == "claude asks: Do you want to proceed? rm -rf build"  # messages.toml [blocked]
    rig.notifier.answered("s1")
    huge = {**ask, "subject": "x" * 5000}  # a heredoc as the command: cleaned to 400, then halved to fit
    rig.blocked(request=huge)
    await rig.settle()
    raw = rig.service.received[-1].body
    assert len(raw) <= 4096
    second = rig.payloads("phone")[-1]
    assert second["request"]["question"] == "Do you want to proceed?"
    assert 40 <= len(second["request"]["subject"]) <= 400 and set(second["request"]["subject"]) <= {"x", "…"}


async def test_three_options_or_more_carry_no_actions():
    options = [{"option": n, "label": f"choice {n}"} for n in (1, 2, 3)]
    rig = Rig(prompt={"id": "p", "options": options})
    rig.subscribe("phone")
    rig.blocked()
    await rig.settle()
    (payload,) = rig.payloads("phone")
    assert payload["actions"] == [] and len(payload["options"]) == 3


async def test_no_receipt_within_ack_escalates_to_the_webhook_once():
    rig = Rig()
    rig.subscribe("phone")
    rig.blocked()
    await rig.settle()
    rig.clock.advance(29.0)
    await rig.settle()
    assert rig.hook.got == []
    rig.clock.advance(2.0)
    await rig.settle()
    (escalated,) = rig.hook.got
    assert escalated["session"] == "s1" and "no receipt within 30 s" in escalated["escalated"]
    rig.clock.advance(600.0)  # once per prompt: never a storm
    await rig.settle()
    assert len(rig.hook.got) == 1 and rig.pusher.counts["escalated"] == 1


async def test_a_receipt_in_time_stops_the_escalation():
    rig = Rig()
    sub = rig.subscribe("phone")
    rig.blocked()
    await rig.settle()
    (payload,) = rig.payloads("phone")
    rig.clock.advance(10.0)
    assert rig.pusher.receipt(payload["receipt_id"], "shown")
    rig.clock.advance(100.0)
    await rig.settle()
    assert rig.hook.got == []
    assert sub.last_receipt == rig.clock.time() - 100.0 and sub.unacked == 0
    assert not rig.pusher.receipt("no-such-receipt", "shown")


async def test_an_answered_prompt_does_not_escalate():
    rig = Rig()
    rig.subscribe("phone")
    rig.blocked()
    await rig.settle()
    rig.prompt = None  # answered from the terminal meanwhile: the pane shows no prompt now
    rig.clock.advance(31.0)
    await rig.settle()
    assert rig.hook.got == []


async def test_the_chain_goes_on_to_a_backup_device_then_the_webhook():
    rig = Rig(chain=("device:tablet", "webhook"))
    rig.subscribe("phone")
    rig.subscribe("tablet")
    rig.blocked()
    await rig.settle()
    assert rig.payloads("tablet") == [] and len(rig.payloads("phone")) == 1  # the backup waits its turn
    rig.clock.advance(31.0)
    await rig.settle()
    (backup,) = rig.payloads("tablet")
    assert backup["prompt_id"] == "prompt-1" and rig.hook.got == []
    rig.clock.advance(31.0)
    await rig.settle()
    assert len(rig.hook.got) == 1
    rig.clock.advance(300.0)
    await rig.settle()
    assert len(rig.hook.got) == 1 and len(rig.payloads("tablet")) == 1


async def test_a_push_is_suppressed_only_for_the_device_that_shows_the_session():
    rig = Rig()
    rig.subscribe("desk")
    rig.subscribe("phone")
    rig.pusher.seen("desk", ["s1"])  # the desk's focused, visible page shows s1
    rig.blocked("s1")
    rig.blocked("s2")
    await rig.settle()
    assert [p["session"] for p in rig.payloads("desk")] == ["s2"]
    assert sorted(p["session"] for p in rig.payloads("phone")) == ["s1", "s2"]
    assert rig.pusher.counts["suppressed"] == 1
    rig.clock.advance(SEEN_S + 1)  # the page stopped saying so (hidden, closed): pushed again
    rig.notifier.forget("s1")
    rig.blocked("s1")
    await rig.settle()
    assert [p["session"] for p in rig.payloads("desk")] == ["s2", "s1"]


async def test_gone_subscriptions_are_removed_and_failures_retried_and_counted():
    rig = Rig(chain=())
    gone = rig.subscribe("gone")
    flaky = rig.subscribe("flaky")
    broken = rig.subscribe("broken")
    rig.service.statuses = {"gone": [410], "flaky": [503, 201], "broken": [500, 500, 500]}
    rig.blocked()
    await rig.settle()
    assert rig.pusher.get(gone.id) is None and rig.pusher.counts["removed"] == 1
    assert flaky.sent == 1 and flaky.failed == 0
    assert broken.sent == 0 and broken.failed == 1
    assert rig.pusher.counts["retried"] == 1 + 2
    assert [r.path for r in rig.service.received].count("/push/broken") == 3


async def test_a_device_without_receipts_is_not_receiving():
    rig = Rig(chain=())
    sub = rig.subscribe("phone")
    for n in range(NOT_RECEIVING_AFTER):
        assert sub.receiving
        rig.blocked(f"s{n}")
        await rig.settle()
    assert not sub.receiving
    (device,) = rig.pusher.by_device()
    assert device["without_receipt"] == NOT_RECEIVING_AFTER and device["receiving"] is False
    last = rig.payloads("phone")[-1]
    rig.pusher.receipt(last["receipt_id"], "shown")
    assert sub.receiving and rig.pusher.by_device()[0]["last_receipt"] == rig.clock.time()


async def test_the_test_push_says_which_step_failed():
    rig = Rig(chain=())
    ok = rig.subscribe("phone")
    rig.service.statuses = {"phone": [201, 403]}
    result = await rig.pusher.test(ok.id, wait_s=0.01)  # nobody shows it: the worker's step fails
    assert [(s["step"], s["ok"]) for s in result["steps"]] == [
        ("subscription", True),
        ("push service", True),
        ("service worker", False),
    ]
    assert "no receipt" in result["steps"][-1]["detail"] and not result["ok"]
    result = await rig.pusher.test(ok.id, wait_s=0.01)
    assert result["steps"][1] == {
        "step": "push service",
        "ok": False,
        "status": 403,
        "detail": "the push service answered 403: ",
    }
    (payload,) = rig.payloads("phone")[:1]
    assert payload["kind"] == "test"


def test_endpoints_must_be_https_or_allowed_loopback():
    assert check_endpoint("https://fcm.googleapis.com/fcm/send/x", False)
    assert check_endpoint("http://127.0.0.1:9/push/x", True)
    for endpoint, allow, why in (
        ("http://127.0.0.1:9/push/x", False, "push_allow_loopback"),
        ("http://push.example/x", True, "https"),
        ("ftp://push.example/x", False, "https"),
        ("https:///nohost", False, "no host"),
    ):
        with pytest.raises(PushRefused, match=why):
            check_endpoint(endpoint, allow)


async def test_many_subscriptions_are_encrypted_off_the_loop_in_time():
    rig = Rig(chain=())
    for n in range(40):
        rig.subscribe(f"d{n}")
    start = time.perf_counter()
    rig.blocked()
    await rig.settle()
    spent = time.perf_counter() - start
    assert len(rig.service.received) == 40
    assert all(rig.payloads(f"d{n}")[0]["prompt_id"] == "prompt-1" for n in range(40))
    print(f"40 pushes encrypted, signed and sent (ASGI transport) in {spent * 1000:.1f} ms")


async def test_a_session_restricted_to_other_users_is_not_pushed_to_their_devices():
    from panewatch.access.roles import Role
    from panewatch.access.users import Users

    rig = Rig()
    users = Users(None)
    for name in ("amy", "bob"):
        users.add(name, Role.operator)
        users.assign(f"{name}-phone", name)
    users.restrict("s1", ["amy"])
    rig.pusher.may_see = users.device_may_see
    rig.subscribe("amy", device="amy-phone")
    rig.subscribe("bob", device="bob-phone")
    rig.subscribe("desk", device="token")  # the API token's own subscription: an owner's
    rig.blocked("s1")
    rig.blocked("s2")
    await rig.settle()
    assert sorted(p["session"] for p in rig.payloads("amy")) == ["s1", "s2"]
    assert [p["session"] for p in rig.payloads("bob")] == ["s2"]
    assert sorted(p["session"] for p in rig.payloads("desk")) == ["s1", "s2"]
