"""No test, fixture or benchmark installs or builds a component: ``make deps`` does, beforehand.

A build inside a test runs against the test's timeout on a fresh machine (a cold helm build is
minutes), and an install from a test hides what a new user must run. The scan reads every Python
file under tests/ and bench/ and flags string literals (docstrings aside) and literal argument
lists that name an installer or a builder: apt, buildah, debootstrap, Maven, ``go build``, pip's
install, or one of the builder scripts under scripts/. The lookup helper
(tests/support/components.py) runs only ``scripts/deps --check``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILDER_SCRIPTS = {
    "go-tools",
    "go-test-binaries",
    "k8s-binaries",
    "k8s-node-binaries",
    "k8s-image",
    "kafka-dist",
}
COMMAND = re.compile(
    r"(^|[\s/])(apt-get|apt|dpkg|buildah|debootstrap|mvn)(\s|$)"
    r"|(^|\s)go (build|install|get|mod download)\b"
    r"|(^|\s)pip3? install\b"
    r"|dependency:(copy|get)"
    r"|scripts/(" + "|".join(sorted(BUILDER_SCRIPTS)) + r")\b"
)
# a file allowed one kind of call, and why
ALLOWED = {
    "tests/integration/test_wheel.py": "installs the wheel under test, a local file, without deps",
}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def findings(source: str) -> list[str]:
    """The installer or builder calls named in ``source``, as ``line: text``."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            texts.append(node.value)
            if node.value in BUILDER_SCRIPTS:
                texts.append(f"scripts/{node.value}")
        elif isinstance(node, ast.List | ast.Tuple | ast.Call):
            parts = node.elts if isinstance(node, ast.List | ast.Tuple) else node.args
            words = [
                p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)
            ]
            texts.append(" ".join(words))
        found += [f"{node.lineno}: {t!r}" for t in texts if COMMAND.search(t)]  # type: ignore[attr-defined]
    return found


def _sources() -> list[Path]:
    return sorted(p for top in ("tests", "bench") for p in (REPO / top).rglob("*.py"))


@pytest.mark.parametrize(
    "source",
    [
        'subprocess.run(["apt-get", "install", "-y", "x"])',
        'subprocess.run(["go", "build", "-o", out, "."])',
        'run("buildah", "build", "-t", tag)',
        'subprocess.run([sys.executable, "-m", "pip", "install", "atheris"])',
        'subprocess.run(["mvn", "-q", "dependency:copy-dependencies"])',
        'SCRIPT = REPO / "scripts" / "k8s-image"',
        'cmd = "debootstrap --variant=minbase bookworm /tmp/x"',
    ],
)
def test_the_scan_finds_an_installer_or_a_builder(source: str) -> None:
    assert findings(source)


def test_the_scan_leaves_docstrings_and_lookups_alone() -> None:
    source = '''
def f():
    """Built by scripts/k8s-image (buildah) and go build; make deps runs apt-get."""
    return component("image"), ["--k8s-image", "img:1"], ScriptedPump("go", batch=False)
'''
    assert findings(source) == []


def test_no_test_fixture_or_benchmark_installs_or_builds() -> None:
    offenders = []
    for path in _sources():
        rel = path.relative_to(REPO).as_posix()
        if rel in ALLOWED or path == Path(__file__):
            continue
        offenders += [f"{rel}:{hit}" for hit in findings(path.read_text())]
    assert offenders == [], "install or build in tests/bench (move it to scripts/deps):\n" + (
        "\n".join(offenders)
    )
