"""The project's commands in processes of their own, as an operator runs them: from the
project's folder, with the environment of the suite minus the service's own settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.config import ENVIRONMENT

PROJECT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# gunicorn as `make run` starts it: its interpreter optimized (-OO), so that a worker holds
# no docstring (bench/README.md, "A worker's memory").
GUNICORN = [str(BIN / "python"), "-OO", "-m", "gunicorn"]


def service_env(**settings: str) -> dict[str, str]:
    """This process's environment without the service's settings, plus `settings`."""
    return {k: v for k, v in os.environ.items() if k not in ENVIRONMENT} | settings


def run(
    command: list[str],
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float = 60,
) -> subprocess.CompletedProcess:
    """`command` run to its end, with `env` (None: this process's); with `check`, it must
    succeed."""
    completed = subprocess.run(
        command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if check:
        assert completed.returncode == 0, completed.stderr
    return completed


def run_flask(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`flask --app app <args>`, which must succeed."""
    return run([str(BIN / "flask"), "--app", "app", *args], env)
