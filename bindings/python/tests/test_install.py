"""The package as users install it: `maturin build --release` writes a wheel, which installs
into a fresh virtual environment with no Rust toolchain on PATH and no package index, and runs
the README's example and the crash demo from there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from conftest import PACKAGE

maturin = shutil.which("maturin")


def toolchain_free_path() -> str:
    """PATH without the directories that hold cargo or rustc."""
    kept = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "cargo").exists() and not (Path(d) / "rustc").exists()]
    return os.pathsep.join(kept)


@pytest.mark.skipif(
    maturin is None and not os.environ.get("STEPJOURNAL_WHEEL") and os.environ.get("CI") != "true",
    reason="maturin is not installed (pip install maturin) and STEPJOURNAL_WHEEL names no wheel",
)
def test_the_wheel_installs_without_rust_and_runs_the_example_and_the_crash_demo(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheel_from_env = os.environ.get("STEPJOURNAL_WHEEL")
    if wheel_from_env:
        wheel = Path(wheel_from_env)
    else:
        built = subprocess.run(
            [str(maturin), "build", "--release", "--out", str(wheels)],
            cwd=PACKAGE,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert built.returncode == 0, built.stdout + built.stderr
        [wheel] = list(wheels.glob("stepjournal-*.whl"))
    assert "abi3" in wheel.name, wheel.name

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    path = f"{env_dir / 'bin'}{os.pathsep}{toolchain_free_path()}"
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    env = {"PATH": path, "HOME": str(tmp_path), "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", str(wheel)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    where = subprocess.run(
        [str(python), "-c", "import stepjournal, stepjournal._native as n; print(stepjournal.__file__); print(n.__file__)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert all(str(env_dir) in line for line in where.stdout.split()), where.stdout

    for example, args in [("example.py", [str(tmp_path / "data")]), ("crash_demo.py", [])]:
        copy = tmp_path / example
        shutil.copy(PACKAGE / "examples" / example, copy)
        done = subprocess.run([str(python), str(copy), *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, f"{example}: {done.stdout}{done.stderr}"
        if example == "example.py":
            assert done.stdout.strip() == "{'saved': 'user-42/seat=window'}"
        else:
            assert '"ok": true' in done.stdout.strip().split("\n")[-1]
