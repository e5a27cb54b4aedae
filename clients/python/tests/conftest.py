"""Fixtures of the client's tests: a fresh recorder directory and `afr serve` on it.

Tests import `afr_client` from this checkout (the directory above), installed or not.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from afr_serve import AFR_BIN, Server  # noqa: E402


@pytest.fixture
def recorder_dir():
    # A short path: a Unix socket's path is limited to about 100 bytes.
    tmp = Path(tempfile.mkdtemp(prefix="afr-py-"))
    d = tmp / "afr"
    subprocess.run(
        [str(AFR_BIN), "--dir", str(d), "init"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield d
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def start(recorder_dir):
    """start(*args) -> a running Server on the test's recorder; stopped (exit 0) afterwards."""
    started = []

    def go(*args):
        s = Server(recorder_dir, *args)
        started.append(s)
        return s

    yield go
    for s in started:
        if s.proc.poll() is None:
            code, err = s.stop()
            assert code == 0, err
