"""Loading manifests: one file parsed and validated (errors say where), and the store that
keeps every agent's manifest fresh from its folders."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ._matching import CompiledManifest
from ._schema import Manifest, ManifestError

_TOML_LINE = re.compile(r"at line (\d+)")


def _line_of_rule(source: str, index: int) -> int | None:
    """Line number of the ``index``-th (0-based) ``[[rules]]`` header."""
    seen = -1
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip() == "[[rules]]":
            seen += 1
            if seen == index:
                return number
    return None


def _line_of_key(source: str, key: str, after: int = 0) -> int | None:
    """Line of ``key =`` at the top level, or inside the table whose header is line ``after``."""
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number, line in enumerate(source.splitlines(), 1):
        if number <= after:
            continue
        if line.strip().startswith("[["):
            return None
        if pattern.match(line):
            return number
    return None


def parse_manifest(path: Path, source: str | None = None) -> Manifest:
    """Read and validate one manifest file, or raise ``ManifestError`` saying where and why."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8") if source is None else source
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(path, f"cannot read: {exc}") from None
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_LINE.search(str(exc))
        line = int(m.group(1)) if m else (len(source.splitlines()) if "end of document" in str(exc) else None)
        raise ManifestError(path, f"TOML syntax: {exc}", line=line) from None
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err["loc"]
        where = ".".join(str(p) for p in loc)
        reason = f"{where}: {err['msg']}" if where else err["msg"]
        if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
            index = loc[1]
            rules = data.get("rules") or []
            name = rules[index].get("name") if index < len(rules) and isinstance(rules[index], dict) else None
            detail = ".".join(str(p) for p in loc[2:])
            reason = f"({name or 'unnamed'}) {detail + ': ' if detail else ''}{err['msg']}"
            line = _line_of_rule(source, index)
            if line and len(loc) >= 3:
                line = _line_of_key(source, "not" if loc[2] == "not_" else str(loc[2]), after=line) or line
            raise ManifestError(path, reason, line=line, rule=index + 1) from None
        line = _line_of_key(source, str(loc[0])) if loc else None
        raise ManifestError(path, reason, line=line) from None


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def bundled_manifest_dir() -> Path:
    """``manifests/`` shipped in the wheel, or the repository's when running from a checkout."""
    here = Path(__file__).resolve().parent.parent  # the panewatch package
    packaged = here / "manifests"
    return packaged if packaged.is_dir() else here.parent.parent / "manifests"


@dataclass
class ManifestStore:
    """All agents' manifests from one or more folders; later folders override earlier ones.

    ``reload_if_changed`` re-reads files whose mtime moved. A file that fails keeps the last
    good version of that agent in force and its error is kept in ``errors`` for the API.
    """

    dirs: list[Path]
    _raw: dict[Path, tuple[int, Manifest]] = field(default_factory=dict)
    errors: dict[Path, ManifestError] = field(default_factory=dict)
    _by_agent: dict[str, CompiledManifest] = field(default_factory=dict)
    _by_process: dict[str, str] = field(default_factory=dict)
    generation: int = 0

    @classmethod
    def from_dirs(cls, *dirs: Path | str | None) -> ManifestStore:
        store = cls([Path(d) for d in dirs if d])
        store.reload_if_changed()
        return store

    def _files(self) -> list[Path]:
        files: list[Path] = []
        for d in self.dirs:
            if d.is_dir():
                files.extend(sorted(d.glob("*.toml")))
            elif d.is_file():
                files.append(d)
        return files

    def reload_if_changed(self) -> list[ManifestError]:
        """Re-read changed files; return the errors found in this pass (previous good kept)."""
        files = self._files()
        new_errors: list[ManifestError] = []
        changed = False
        for path in files:
            mtime = _mtime(path)
            known = self._raw.get(path)
            previous_error = self.errors.get(path)
            if known and known[0] == mtime and not previous_error:
                continue
            if previous_error and getattr(previous_error, "mtime_ns", None) == mtime:
                continue
            try:
                manifest = parse_manifest(path)
            except ManifestError as exc:
                exc.mtime_ns = mtime  # type: ignore[attr-defined]
                self.errors[path] = exc
                new_errors.append(exc)
                continue
            self.errors.pop(path, None)
            self._raw[path] = (mtime, manifest)
            changed = True
        gone = [p for p in self._raw if p not in files]
        for path in gone:
            del self._raw[path]
            changed = True
        for path in [p for p in self.errors if p not in files]:
            del self.errors[path]
        if changed or not self._by_agent:
            new_errors.extend(self._rebuild())
        return new_errors

    def _rebuild(self) -> list[ManifestError]:
        plain: dict[str, tuple[Path, int, Manifest]] = {}
        for path in self._files():  # folder order: later overrides earlier
            if path in self._raw:
                mtime, manifest = self._raw[path]
                plain[manifest.agent] = (path, mtime, manifest)
        errors: list[ManifestError] = []
        by_agent: dict[str, CompiledManifest] = {}
        for agent, (path, mtime, manifest) in plain.items():
            try:
                resolved = self._resolve(manifest, plain, set())
            except ManifestError as exc:
                errors.append(exc)
                if agent in self._by_agent:
                    by_agent[agent] = self._by_agent[agent]
                continue
            by_agent[agent] = CompiledManifest.build(resolved, path, mtime)
        self._by_agent = by_agent
        self._by_process = {p: agent for agent, cm in by_agent.items() for p in cm.manifest.processes}
        self.generation += 1
        return errors

    def _resolve(self, manifest: Manifest, plain: dict[str, tuple[Path, int, Manifest]], seen: set[str]) -> Manifest:
        if manifest.extends is None:
            return manifest
        if manifest.extends in seen or manifest.extends == manifest.agent:
            raise ManifestError(plain[manifest.agent][0], f"extends: cycle through {manifest.extends!r}")
        if manifest.extends not in plain:
            raise ManifestError(plain[manifest.agent][0], f"extends: no manifest for agent {manifest.extends!r}")
        base = self._resolve(plain[manifest.extends][2], plain, seen | {manifest.agent})
        names = {r.name for r in manifest.rules}
        return manifest.model_copy(
            update={
                "rules": manifest.rules + [r for r in base.rules if r.name not in names],
                "extends": None,
            }
        )

    def get(self, agent: str) -> CompiledManifest | None:
        return self._by_agent.get(agent)

    def for_process(self, program: str | None) -> CompiledManifest | None:
        """The manifest whose ``processes`` name this program (basename, any case of path)."""
        if not program:
            return None
        agent = self._by_process.get(os.path.basename(program))
        return self._by_agent.get(agent) if agent else None

    def agents(self) -> list[str]:
        return sorted(self._by_agent)
