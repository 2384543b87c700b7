"""preemptd installs under one name, `preemptd`, so that it lives beside other distributions:
python-daemon provides `import daemon` and Events `import events`, the names of two of the
repository's folders."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("events", "projections", "scheduling", "daemon", "migrations")


def run(*command: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd, timeout=600)
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def copy_of_the_sources(source: Path) -> Path:
    """What a clone holds of the package and its lock, in `source` (an existing directory)."""
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in (*FOLDERS, "requirements"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return source


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the sources as they are, built from a copy: a `build/` left in the checkout
    by an earlier build cannot slip stale files into it, and the checkout is not written."""
    source, out = copy_of_the_sources(tmp_path_factory.mktemp("source")), tmp_path_factory.mktemp("wheel")
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", out, source)
    [built] = out.glob("preemptd-*.whl")
    return built


def test_the_wheel_has_preemptd_as_its_only_top_level_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")} == {"preemptd"}


def test_every_package_of_the_repository_is_in_the_wheel(wheel: Path) -> None:
    """A new wing (a folder under scheduling/) is found without being listed anywhere."""
    packages = {str(init.parent.relative_to(ROOT)) for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")}
    assert "scheduling/yunikorn" in packages
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert sorted(p for p in packages if f"preemptd/{p}/__init__.py" not in shipped) == []
    assert "preemptd/migrations/script.py.mako" in shipped
    assert "preemptd/daemon/cli/report_page/report.js" in shipped, "the report's assets travel with the command that writes it"


@pytest.mark.slow
def test_preemptd_installs_beside_python_daemon_and_events_and_all_three_work(wheel: Path, tmp_path: Path) -> None:
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python, pip = env / "bin" / "python", (env / "bin" / "python", "-m", "pip", "--quiet", "--disable-pip-version-check")
    run(*pip, "install", "python-daemon", "Events", wheel)
    # Away from the checkout, whose folders `daemon` and `events` would shadow the installed ones.
    run(python, "-c", "import daemon, events; daemon.DaemonContext; events.Events().on_change += print", cwd=tmp_path)
    checked = run(env / "bin" / "preemptd", "simulate", ROOT / "examples" / "general.yaml", "--check", "--quiet", cwd=tmp_path)
    assert checked == ""
    assert "preemptd 0." in run(env / "bin" / "preemptd", "--version", cwd=tmp_path)
    run(*pip, "uninstall", "--yes", "Events")
    run(env / "bin" / "preemptd", "simulate", ROOT / "examples" / "general.yaml", "--check", "--quiet", cwd=tmp_path)
    run(python, "-c", "import daemon; daemon.DaemonContext", cwd=tmp_path)


@pytest.mark.parametrize(
    "page",
    ["README.md", "CONTRIBUTING.md", *sorted(str(p.relative_to(ROOT)) for p in [*(ROOT / "docs").glob("*.md"), *(ROOT / "scheduling").glob("*/README.md")])],
)
def test_every_command_in_the_docs_is_written_as_the_first_session_writes_it(page: str) -> None:
    """The first session runs `.venv/bin/preemptd ...`; the model sections wrote `preemptd ...`,
    which a reader pasting them after it found missing. Every command line in the docs' code
    (fenced, or indented four spaces) calls the installed command by that path."""
    import re

    text = (ROOT / page).read_text()
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    indented = re.findall(r"(?m)^    (?!\s)(.*)$", text)
    lines = [line for block in fenced for line in block.splitlines()] + indented
    bare = [
        line
        for line in lines
        if re.search(r"(^|[\s;&|(])preemptd (?!is |\w+\.\w)", line)
        and ".venv/bin/preemptd" not in line
        and not line.lstrip().startswith(("#", "level=", "ts=", "{", "-", "|"))
    ]
    assert not bare, bare


# The lock: both README commands install every dependency from requirements/, pinned with hashes.

LOCKS = {"run": ROOT / "requirements" / "run.txt", "test": ROOT / "requirements" / "test.txt"}


def pins(lock: Path) -> dict[str, tuple[str, str, int]]:
    """A lock's pins: name -> (version, environment marker, how many hashes)."""
    import re

    found = {}
    for entry in re.split(r"\n(?=\S)", lock.read_text()):
        pin = re.match(r"([A-Za-z0-9._-]+)==([^\s;\\]+)(?:\s*;\s*([^\\\n]+))?", entry)
        if pin:
            found[canonical(pin[1])] = (pin[2], (pin[3] or "").strip(), entry.count("--hash=sha256:"))
    return found


def canonical(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def declared(extra: str | None) -> list:
    """pyproject.toml's ranges: the dependencies, and an extra's."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + (project["optional-dependencies"][extra] if extra else [])
    return [Requirement(text) for text in wanted]


@pytest.mark.parametrize(("lock", "extra"), [("run", None), ("test", "test")])
def test_the_lock_pins_every_declared_dependency_within_its_range_with_hashes(lock: str, extra: str | None) -> None:
    """A dependency added to pyproject.toml without refreshing the lock (CONTRIBUTING.md says
    how) would be missing from an install: the README's commands install the lock, then
    preemptd with --no-deps."""
    pinned = pins(LOCKS[lock])
    outside = [
        f"{r} (lock: {pinned.get(canonical(r.name), ('none',))[0]})"
        for r in declared(extra)
        if canonical(r.name) not in pinned or pinned[canonical(r.name)][0] not in r.specifier
    ]
    assert outside == [], "refresh the lock"
    assert [name for name, (_, _, hashes) in pinned.items() if hashes == 0] == []
    assert "setuptools" in pinned, "what builds preemptd (--no-build-isolation) is locked too"


def test_the_run_lock_is_the_test_lock_without_the_test_tools() -> None:
    run, test = pins(LOCKS["run"]), pins(LOCKS["test"])
    assert {name: pin for name, pin in test.items() if name in run} == run


def test_the_readme_ci_and_contributing_install_from_the_lock() -> None:
    import re

    readme = (ROOT / "README.md").read_text()
    first, second = re.findall(r"```sh\n(python3 -m venv .*)\n```", readme)[:2]
    assert "pip install -r requirements/run.txt && .venv/bin/pip install --no-deps --no-build-isolation -e ." in first and first.endswith("preemptd run")
    assert "pip install -r requirements/test.txt && .venv/bin/pip install --no-deps --no-build-isolation -e ." in second and second.endswith("pytest")
    assert second in (ROOT / ".ci" / "run").read_text().splitlines(), ".ci/run runs exactly the README's test command"
    assert second in (ROOT / "CONTRIBUTING.md").read_text()


@pytest.mark.slow
def test_the_readmes_setup_installs_exactly_the_lock(tmp_path: Path) -> None:
    """The README's test command, up to the tests, run in a copy of the sources: the virtual
    environment holds the lock's pins (those whose marker applies here), and nothing else."""
    import re

    from packaging.markers import Marker

    source = copy_of_the_sources(tmp_path)
    [second] = re.findall(r"```sh\n(python3 -m venv .*pytest)\n```", (ROOT / "README.md").read_text())
    setup = second.removesuffix("&& .venv/bin/pytest").strip()
    run("bash", "-c", setup.replace("python3", sys.executable, 1), cwd=source)
    frozen = run(source / ".venv" / "bin" / "python", "-m", "pip", "list", "--format=freeze", "--exclude", "pip", "--exclude", "preemptd")
    installed = {canonical(name): version for name, version in (line.split("==") for line in frozen.split())}
    expected = {name: version for name, (version, marker, _) in pins(LOCKS["test"]).items() if not marker or Marker(marker).evaluate()}
    assert installed == expected
    assert "preemptd 0." in run(source / ".venv" / "bin" / "preemptd", "--version")
