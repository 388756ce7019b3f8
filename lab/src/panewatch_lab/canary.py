"""A version canary: does the bundled manifest still read a given CLI version right?

Installs that version into a scratch prefix, runs the agent's capture plan against the mock
(the same two witnesses decide each label: the screen and the mock's log), classifies every
capture with the bundled manifest and prints kind × size → expected / got. Exits 1 on any
drift — a capture read wrong (naming the rule that decided, or "no rule") or a capture the
new version no longer lets the plan take (the plan's own screen checks failed, so its words
or screens changed).

    panewatch lab canary --agent gemini --version 0.60.0 [--sizes 32x120,24x80]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch_lab.agent_labs import LABS
from panewatch_lab.capture import replay
from panewatch_lab.capture_plan import load_plan
from panewatch_lab.cli import DEFAULT_SIZES, parse_sizes


@dataclass(frozen=True)
class Row:
    kind: str
    size: str
    expected: str
    got: str  # a state, or "refused"
    rule: str | None
    detail: str

    @property
    def drift(self) -> bool:
        return self.got != self.expected


def install(agent: str, version: str, prefix: Path) -> str:
    """The CLI of ``version`` (``latest`` allowed) installed into ``prefix``."""
    if agent == "claude":
        import subprocess

        from panewatch_lab.agent_labs import npm_install_command

        subprocess.run(npm_install_command("@anthropic-ai/claude-code", version, prefix), check=True)
        return str(prefix / "node_modules" / ".bin" / "claude")
    from panewatch_lab.agent_labs import get_lab

    return get_lab(agent).install(version, prefix)


def package_of(agent: str) -> tuple[str, str]:
    """(package, kind) of the agent's CLI: an npm package or a PyPI distribution."""
    if agent == "claude":
        return "@anthropic-ai/claude-code", "npm"
    from panewatch_lab.agent_labs import get_lab

    lab = get_lab(agent)
    return lab.package, lab.kind


def installed_version(agent: str, prefix: Path) -> str | None:
    """The version an install into ``prefix`` actually put there (what ``latest`` resolved to),
    read from the package's own metadata: npm's package.json, or the venv's dist-info."""
    package, kind = package_of(agent)
    if kind == "npm":
        try:
            meta = json.loads((prefix / "node_modules" / package / "package.json").read_text())
        except (OSError, ValueError):
            return None
        version = meta.get("version") if isinstance(meta, dict) else None
        return version if isinstance(version, str) else None
    from importlib.metadata import distributions

    wanted = package.lower().replace("_", "-")
    for site in sorted(prefix.glob("lib/python*/site-packages")):
        for dist in distributions(path=[str(site)]):
            if (dist.metadata["Name"] or "").lower().replace("_", "-") == wanted:
                return dist.version
    return None


#: The screen of the first refused capture (what a new version shows instead), for the report.
REFUSED_SCREEN: list[str] = []


def run(agent: str, binary: str, sizes: Sequence[tuple[int, int]], jobs: int) -> list[Row]:
    plan = load_plan(agent)
    if agent == "claude":
        from panewatch_lab.capture import capture_all as claude_capture_all

        done, failed = claude_capture_all(plan, binary, sizes, plan.capture, jobs=jobs, attempts=2)
    else:
        from panewatch_lab.agent_capture import capture_all
        from panewatch_lab.agent_labs import get_lab

        done, failed = capture_all(get_lab(agent), plan, binary, sizes, plan.capture, jobs=jobs, attempts=2)
    manifest = ManifestStore.from_dirs(bundled_manifest_dir()).get(agent)
    if manifest is None:
        raise SystemExit(f"no bundled manifest for {agent}")
    rows: list[Row] = []
    for c in done:
        screen = replay(c.data, c.rows, c.cols)
        verdict = manifest.classify(screen.lines(), screen.title, screen.cursor.row)
        rows.append(
            Row(
                c.spec.kind,
                f"{c.rows}x{c.cols}",
                c.spec.state,
                verdict.state,
                verdict.rule,
                verdict.evidence[:60] if verdict.rule else "no rule matched",
            )
        )
    if failed and not REFUSED_SCREEN:
        REFUSED_SCREEN.extend(line for line in failed[0].error.screen if line.strip())
    for f in failed:
        rows.append(Row(f.spec.kind, f"{f.rows}x{f.cols}", f.spec.state, "refused", None, f.error.reason[:120]))
    order = {"blocked": 0, "working": 1, "idle": 2}
    return sorted(rows, key=lambda r: (order.get(r.expected, 9), r.kind, r.size))


def table(rows: Sequence[Row], sizes: Sequence[tuple[int, int]]) -> str:
    size_names = [f"{r}x{c}" for r, c in sizes]
    kinds: dict[tuple[str, str], dict[str, Row]] = {}
    for row in rows:
        kinds.setdefault((row.expected, row.kind), {})[row.size] = row
    head = "| kind | expected | " + " | ".join(size_names) + " |"
    out = [head, "|" + "---|" * (2 + len(size_names))]
    for (expected, kind), by_size in kinds.items():
        cells = []
        for size in size_names:
            row = by_size.get(size)
            if row is None:
                cells.append("–")
            elif row.drift:
                cells.append(f"**{row.got}** ({row.rule or row.detail})")
            else:
                cells.append(f"{row.got} ({row.rule})")
        out.append(f"| {kind} | {expected} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None, prog: str = "panewatch lab canary") -> int:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    p.add_argument("--agent", required=True, choices=["claude", *sorted(LABS)])
    p.add_argument("--version", default="latest", help="the CLI version to check (default latest)")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes(DEFAULT_SIZES))
    p.add_argument("--prefix", help="install here instead of a scratch folder (kept)")
    p.add_argument("--bin", help="use this CLI instead of installing one")
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    scratch = None
    version = args.version
    try:
        if args.bin:
            binary = args.bin
        else:
            prefix = Path(args.prefix) if args.prefix else Path(scratch := tempfile.mkdtemp(prefix="panewatch-canary-"))
            print(f"installing {args.agent} {args.version} into {prefix}", file=sys.stderr)
            binary = install(args.agent, args.version, prefix)
            resolved = installed_version(args.agent, prefix)
            if resolved and resolved != args.version:
                version = f"{args.version} ({resolved})"
            print(f"installed {args.agent} {resolved or 'of an unknown version'}", file=sys.stderr)
        rows = run(args.agent, binary, args.sizes, args.jobs)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"{args.agent} {version}: bundled manifest vs the capture plan's labels")
    print(table(rows, args.sizes))
    drift = [r for r in rows if r.drift]
    for r in drift:
        why = f"rule {r.rule!r}" if r.rule else ("no rule matched" if r.got != "refused" else r.detail)
        print(f"DRIFT {r.expected}-{r.kind} {r.size}: got {r.got} ({why})")
    if REFUSED_SCREEN:
        print("the first refused capture's screen:\n" + "\n".join(f"    │{line}" for line in REFUSED_SCREEN))
    print(f"{len(rows) - len(drift)}/{len(rows)} as expected")
    return 1 if drift else 0


if __name__ == "__main__":
    sys.exit(main())
