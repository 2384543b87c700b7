"""What pyproject.toml cannot say: every package under the top-level folders (a model's wing
included, found by itself) installs as `preemptd.<folder>...`, so nothing collides with other
distributions (`daemon` and `events` are taken on PyPI). `preemptd` itself is a namespace."""

from setuptools import find_packages, setup

FOLDERS = ("events", "projections", "scheduling", "daemon", "migrations")

setup(
    packages=[f"preemptd.{name}" for name in find_packages(include=[pattern for folder in FOLDERS for pattern in (folder, f"{folder}.*")])],
    package_dir={f"preemptd.{folder}": folder for folder in FOLDERS},
)
