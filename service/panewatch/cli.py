"""The ``panewatch`` command: classify captures, explain a verdict, serve, wait (the lab plugs in)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import fixtures as fixture_files
from . import plugins
from .access.roles import Role
from .backends import BACKENDS, ScreenLike, make_screen
from .config import ConfigError, add_settings_arguments, flags_from_namespace, settings_or_error
from .manifest import CompiledManifest, ManifestError, ManifestStore, bundled_manifest_dir
from .screen import Screen
from .sinks import transcript
from .states import State
from .tail import strip_tail

EXIT_USAGE = 2
#: The roles a user may have, as the CLI spells them.
ROLES = [str(role) for role in Role]


class CliError(Exception):
    """A user mistake: printed as one line, exit code 2."""


def _store(extra_dir: str | None) -> ManifestStore:
    store = ManifestStore.from_dirs(bundled_manifest_dir(), extra_dir)
    for err in store.errors.values():
        print(f"panewatch: manifest refused: {err}", file=sys.stderr)
    return store


def _manifest(store: ManifestStore, agent: str) -> CompiledManifest:
    manifest = store.get(agent)
    if manifest is None:
        known = ", ".join(store.agents()) or "none"
        raise CliError(f"unknown agent {agent!r} (known: {known})")
    return manifest


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


def render(data: bytes, rows: int, cols: int, backend: str = "pyte") -> ScreenLike:
    """A fresh screen of this size after ``data`` (on ``backend``'s emulator)."""
    screen = Screen(rows, cols) if backend == "pyte" else make_screen(backend, rows, cols)
    screen.feed(data)
    return screen


def _screen_of(path: str, args: argparse.Namespace) -> ScreenLike:
    """The screen a raw capture (at --rows x --cols) or a .cast recording (at its moment --at) shows."""
    if path.endswith(".cast"):
        try:
            return transcript.replay(transcript.read_cast(path), args.at)
        except transcript.CastError as exc:
            raise CliError(str(exc)) from None
    if args.at is not None:
        raise CliError(f"--at needs a .cast recording, not {path}")
    return render(_read(path), args.rows, args.cols)


def _add_screen_args(p: argparse.ArgumentParser, many: bool) -> None:
    p.add_argument("--agent", default="claude", help="manifest to classify with (default: claude)")
    p.add_argument("--rows", type=int, default=32, help="terminal rows (default 32; a .cast gives its own)")
    p.add_argument("--cols", type=int, default=120, help="terminal columns (default 120; a .cast gives its own)")
    p.add_argument(
        "--at",
        type=float,
        metavar="SECONDS",
        help="for .cast recordings: the moment to look at, in seconds (default: the end)",
    )
    p.add_argument("--manifests", metavar="DIR", help="extra manifest folder, overriding the bundled ones")
    if many:
        p.add_argument("files", nargs="+", metavar="FILE", help="raw PTY capture(s) or .cast recording(s)")
    else:
        p.add_argument("file", metavar="FILE", help="raw PTY capture or .cast recording")


def cmd_classify(args: argparse.Namespace) -> int:
    manifest = _manifest(_store(args.manifests), args.agent)
    results = []
    for path in args.files:
        screen = _screen_of(path, args)
        verdict = manifest.classify(screen.lines(), screen.title, screen.cursor.row)
        results.append({"file": path, "state": verdict.state, "rule": verdict.rule})
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=2))
    else:
        for r in results:
            print(f"{r['file']} {r['state']} {r['rule'] or '-'}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    manifest = _manifest(_store(args.manifests), args.agent)
    screen = _screen_of(args.file, args)
    lines = screen.lines()
    width = screen.cols
    print(f"screen {screen.rows}x{screen.cols}  cursor {screen.cursor.row},{screen.cursor.col}  title {screen.title!r}")
    print("┌" + "─" * width + "┐")
    for line in lines:
        print("│" + line.ljust(width)[:width] + "│")
    print("└" + "─" * width + "┘")
    verdict = manifest.classify(lines, screen.title, screen.cursor.row)
    print(f"agent {manifest.agent} (manifest {manifest.manifest.version}, {manifest.path})")
    for i, trace in enumerate(manifest.explain(lines, screen.title, screen.cursor.row), 1):
        mark = "MATCH" if trace.matched else "no   "
        print(f"{i:2}. {mark} {trace.state:<8} {trace.name}  [{trace.region}]  {trace.reason}")
        for ev in trace.evidence:
            print(f"           matched: {ev!r}")
    print(f"verdict: {verdict.state} ({verdict.rule or 'no rule'}): {verdict.why}")
    return 0


def cmd_cast_to_raw(args: argparse.Namespace) -> int:
    """A moment of a recording as a raw fixture file: every output byte up to --at."""
    try:
        moment = transcript.raw_until(transcript.read_cast(args.file), args.at)
    except transcript.CastError as exc:
        raise CliError(str(exc)) from None
    try:
        Path(args.output).write_bytes(moment.data)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(
        f"wrote {len(moment.data)} bytes to {args.output}; replay it at rows = {moment.rows}, cols = {moment.cols}",
        file=sys.stderr,
    )
    if moment.resized:
        print(
            "panewatch: the terminal was resized before this moment; a raw file replays at one size, "
            "so its screen may differ from the recording's",
            file=sys.stderr,
        )
    return 0


def cmd_fixtures(args: argparse.Namespace) -> int:
    root = Path(args.dir) if args.dir else fixture_files.default_root()
    folders = fixture_files.find_folders(root)
    if not folders:
        raise CliError(f"no fixture folder (with {fixture_files.TRUTH_FILE}) under {root}")
    store = _store(args.manifests)
    forced = _manifest(store, args.agent) if args.agent else None
    total = tail_ok = screen_ok = 0
    rows_out = []
    per_agent: dict[str, list[int]] = {}  # agent -> [captures, right, false blocked]
    for folder in folders:
        for fx in fixture_files.load_folder(folder):
            manifest = forced or _manifest(store, fx.agent)
            data = fx.read()
            screen = render(data, fx.truth.rows, fx.truth.cols, args.backend)
            on_screen = manifest.classify(screen.lines(), screen.title, screen.cursor.row)
            on_tail = manifest.classify(strip_tail(data))
            total += 1
            tail_ok += on_tail.state == fx.truth.state
            screen_ok += on_screen.state == fx.truth.state
            counts = per_agent.setdefault(f"{fx.agent} {fx.agent_version}", [0, 0, 0])
            counts[0] += 1
            counts[1] += on_screen.state == fx.truth.state
            counts[2] += on_screen.state == State.blocked and fx.truth.state != State.blocked
            rows_out.append(
                (str(fx.path.relative_to(root)), fx.truth.state, on_tail.state, on_screen.state, on_screen.rule or "-")
            )
    name_w = max(len(r[0]) for r in rows_out)
    print(f"{'fixture':<{name_w}}  truth    last 8 KB, stripped   emulated screen  rule")
    for name, truth, tail, scr, rule in rows_out:
        t = f"{tail}{'' if tail == truth else '  ✗'}"
        s = f"{scr}{'' if scr == truth else '  ✗'}"
        print(f"{name:<{name_w}}  {truth:<8} {t:<21} {s:<16} {rule}")
    false_blocked = sum(c[2] for c in per_agent.values())
    if forced is not None:  # one manifest on every agent's screens: how far it gets on each
        print(f"\nthe {forced.agent!r} manifest on every agent's captures:")
        for agent, (n, right, fb) in sorted(per_agent.items()):
            print(f"  {agent:<24} {right:>3}/{n:<3} right ({100 * right / n:3.0f} %), {fb} false blocked")
    print(f"false blocked (read blocked, truly not): {false_blocked}")
    print(f"correct: tail {tail_ok}/{total}, screen {screen_ok}/{total}")
    if forced is not None:  # a best guess is judged by what it must never do: read a prompt that is not
        return 0 if false_blocked == 0 else 1
    return 0 if screen_ok == total else 1


def cmd_serve(args: argparse.Namespace) -> int:
    from .server import serve

    try:
        settings = settings_or_error(flags_from_namespace(args))
    except ConfigError as exc:
        raise CliError(f"bad configuration: {exc}") from None
    return serve(settings)


def cmd_wait(args: argparse.Namespace) -> int:
    from .client import wait_for_state

    return wait_for_state(args.session, args.until, timeout=args.timeout, url=args.url, token=args.token)


def cmd_pair(args: argparse.Namespace) -> int:
    from .client import pair

    return pair(
        url=args.url,
        token=None,
        token_file=args.token_file,
        state_dir=args.state_dir,
        image=args.image,
        qr=not args.no_qr,
        user=args.user,
        role=args.role,
    )


def cmd_users(args: argparse.Namespace) -> int:
    """``panewatch users list|add NAME|set-role NAME ROLE|remove NAME`` on the running server."""
    from .client import users

    if args.action != "list" and not args.name:
        raise CliError(f"users {args.action} needs the user's NAME")
    role = args.role or args.role_arg
    if (args.action == "set-role" and not role) or (role and role not in ROLES):
        raise CliError(f"users {args.action}: the ROLE is one of {', '.join(ROLES)}")
    return users(args.action, args.name, role, url=args.url, token_file=args.token_file, state_dir=args.state_dir)


def cmd_policy(args: argparse.Namespace) -> int:
    """``panewatch policy check FILE`` (0: valid, 1: refused, saying where and why), or the
    running server's kill switch (``pause`` / ``resume``)."""
    if args.action == "check":
        from .policy import PolicyError, parse_policy

        if not args.file:
            raise CliError("policy check needs the FILE to check")
        try:
            rules = parse_policy(Path(args.file)).rules
        except PolicyError as exc:
            print(f"policy refused: {exc}", file=sys.stderr)
            return 1
        screen_only = sum(r.screen_only for r in rules)
        print(
            f"{args.file}: {len(rules)} rules, valid"
            + (f" ({screen_only} act on screen text alone)" if screen_only else "")
        )
        return 0
    from .client import policy_switch

    return policy_switch(args.action, url=args.url, token_file=args.token_file, state_dir=args.state_dir)


def cmd_attach(args: argparse.Namespace) -> int:
    from .attach import AttachError, exec_attach
    from .config import default_state_dir

    state_dir = Path(args.state_dir or os.environ.get("PANEWATCH_STATE_DIR") or default_state_dir())
    try:
        exec_attach(state_dir, args.session)
    except AttachError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot run tmux: {exc.strerror or exc}") from None
    return 0  # not reached: tmux replaced this process


def cmd_ledger(args: argparse.Namespace) -> int:
    """``verify`` (exit 0 intact, 1 naming the first bad row) and ``export`` (JSON lines), off-line:
    the registry file is opened read-only, a running server need not stop."""
    import sqlite3

    from .config import default_state_dir
    from .registry import REGISTRY_FILE
    from .sinks.ledger import LedgerQuery, export_lines, open_read_only, verify

    state_dir = Path(args.state_dir or os.environ.get("PANEWATCH_STATE_DIR") or default_state_dir())
    try:
        db = open_read_only(state_dir / REGISTRY_FILE)
        if args.action == "verify":
            count, broken = verify(db)
            if broken is not None:
                print(f"ledger broken at {broken} ({count} rows before it intact)", file=sys.stderr)
                return 1
            print(f"ledger intact: {count} rows")
            return 0
        for line in export_lines(db, LedgerQuery(session=args.session, actor=args.actor)):
            sys.stdout.write(line + "\n")
        return 0
    except FileNotFoundError as exc:
        raise CliError(f"{exc}: is --state-dir the server's state folder?") from None
    except sqlite3.Error as exc:
        raise CliError(f"cannot read the ledger in {state_dir / REGISTRY_FILE}: {exc}") from None


def run_plugin(name: str, argv: list[str]) -> int:
    """``panewatch NAME ...`` for a command another distribution plugs in (the lab, the bench)."""
    runner = plugins.find(name)
    if runner is None:
        print(f"panewatch {name}: not installed.\n\n{plugins.install_hint(name)}", file=sys.stderr)
        return EXIT_USAGE
    return runner(argv)


def _add_fixtures(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", help="fixture folder or root (default: the bundled fixtures/)")
    p.add_argument("--manifests", metavar="DIR", help="extra manifest folder")
    p.add_argument("--backend", choices=BACKENDS, default="pyte", help="screen emulator (default pyte)")
    p.add_argument(
        "--agent",
        metavar="NAME",
        help="classify every capture with this manifest (e.g. generic), print its accuracy per agent; exit 1 on a false blocked",
    )
    p.set_defaults(func=cmd_fixtures)


def _add_pair(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="the server (default: $PANEWATCH_URL, else http://127.0.0.1:8765)")
    p.add_argument(
        "--token-file", metavar="FILE", help="the API token's file (default: $PANEWATCH_TOKEN, else the kept one)"
    )
    p.add_argument("--state-dir", metavar="DIR", help="the server's state folder, where it keeps its token")
    p.add_argument("--image", metavar="FILE", help="also save the QR code as FILE (.png or .svg)")
    p.add_argument("--no-qr", action="store_true", help="print the code and URL only")
    p.add_argument("--user", metavar="NAME", help="the device's user (default: default, an owner)")
    p.add_argument("--role", choices=ROLES, help="the user's role (made with it when new; default viewer)")
    p.set_defaults(func=cmd_pair)


def _add_users(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["list", "add", "set-role", "remove"])
    p.add_argument("name", nargs="?", metavar="NAME", help="the user")
    p.add_argument("role_arg", nargs="?", metavar="ROLE", help="set-role: the new role (viewer, operator or owner)")
    p.add_argument("--role", choices=ROLES, help="add: its role (default viewer)")
    _add_server_args(p)
    p.set_defaults(func=cmd_users)


def _add_server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="the server (default: $PANEWATCH_URL, else http://127.0.0.1:8765)")
    p.add_argument(
        "--token-file", metavar="FILE", help="the API token's file (default: $PANEWATCH_TOKEN, else the kept one)"
    )
    p.add_argument("--state-dir", metavar="DIR", help="the server's state folder, where it keeps its token")


def _add_wait(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="session id")
    p.add_argument("--until", required=True, choices=[str(state) for state in State])
    p.add_argument("--timeout", type=float, default=None, help="seconds (default: wait forever)")
    p.add_argument("--url", help="service URL (default: $PANEWATCH_URL or http://127.0.0.1:8765)")
    p.add_argument("--token", help="API token (default: $PANEWATCH_TOKEN)")
    p.set_defaults(func=cmd_wait)


def _add_ledger(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["verify", "export"])
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="the server's state folder (default: $PANEWATCH_STATE_DIR, else $XDG_STATE_HOME/panewatch)",
    )
    p.add_argument("--session", help="export: only this session's rows")
    p.add_argument(
        "--actor", help="export: only this actor's rows (a user's name, or an actor's id: a device, token, rule)"
    )
    p.set_defaults(func=cmd_ledger)


def _add_policy(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["check", "pause", "resume"])
    p.add_argument("file", nargs="?", metavar="FILE", help="check: the policy file")
    p.add_argument("--url", help="pause/resume: the server (default: $PANEWATCH_URL, else http://127.0.0.1:8765)")
    p.add_argument(
        "--token-file", metavar="FILE", help="the API token's file (default: $PANEWATCH_TOKEN, else the kept one)"
    )
    p.add_argument("--state-dir", metavar="DIR", help="the server's state folder, where it keeps its token")
    p.set_defaults(func=cmd_policy)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="panewatch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("classify", help="classify raw PTY captures or .cast recordings: FILE STATE RULE")
    _add_screen_args(p, many=True)
    p.add_argument("--json", action="store_true", help="print a JSON array of {file, state, rule}")
    p.set_defaults(func=cmd_classify)

    p = sub.add_parser("explain", help="show the emulated screen and every rule's outcome")
    _add_screen_args(p, many=False)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("cast-to-raw", help="turn a moment of a .cast recording into a raw fixture file")
    p.add_argument("file", metavar="FILE", help="asciicast v2 recording (GET /api/sessions/ID/transcript)")
    p.add_argument("--at", type=float, metavar="SECONDS", help="the moment, in seconds (default: the end)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.raw", help="raw file to write")
    p.set_defaults(func=cmd_cast_to_raw)

    _add_fixtures(sub.add_parser("fixtures", help="truth vs byte-tail vs emulated-screen verdicts for fixture folders"))

    p = sub.add_parser("serve", help="run the service (HTTP, WebSockets, dashboard)")
    add_settings_arguments(p)  # every option of the Settings model, e.g. --transcripts DIR
    p.set_defaults(func=cmd_serve)

    _add_wait(sub.add_parser("wait", help="wait until a session reaches a state (exit 0), or time out (exit 1)"))

    _add_pair(
        sub.add_parser("pair", help="pair a phone: a one-time code (5 minutes) and its QR from the running server")
    )

    _add_users(sub.add_parser("users", help="people and roles on the running server: list, add, set-role, remove"))
    _add_policy(
        sub.add_parser("policy", help="the approval policy: check a file, or pause / resume the running server's")
    )

    p = sub.add_parser("attach", help="open a session's pane in this terminal (tmux host; detach with C-b d)")
    p.add_argument("session", help="session id (or its name, when only one session has it)")
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="the server's state folder (default: $PANEWATCH_STATE_DIR, else $XDG_STATE_HOME/panewatch)",
    )
    p.set_defaults(func=cmd_attach)

    _add_ledger(
        sub.add_parser(
            "ledger", help="the ledger of decisions: verify its chain (exit 1 naming the bad row), export it"
        )
    )

    installed = plugins.available()
    for name in plugin_names():  # parsed by the plugin itself: see main()
        help_ = plugins.KNOWN.get(name, f"(from {installed[name]})" if name in installed else "")
        if name not in installed:
            help_ += " [not installed: see `panewatch " + name + "`]"
        p = sub.add_parser(name, help=help_, add_help=False)
        p.set_defaults(func=None)
    return parser


def plugin_names() -> list[str]:
    """The lab's commands (installed or not: then they say how to get them), then any others."""
    return [*plugins.KNOWN, *sorted(set(plugins.available()) - set(plugins.KNOWN))]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in plugin_names():
            return run_plugin(argv[0], argv[1:])
        args = build_parser().parse_args(argv)
        code: int = args.func(args)
        return code
    except CliError as exc:
        print(f"panewatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ManifestError as exc:
        print(f"panewatch: manifest refused: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
