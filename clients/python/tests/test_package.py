"""`pip install ./clients/python` gives an importable, typed package."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]


def test_pip_installs_the_package(tmp_path):
    setuptools = pytest.importorskip("setuptools", reason="no build backend (setuptools) here")
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) < (70, 1):
        # An older setuptools builds wheels only with the `wheel` package beside it.
        pytest.importorskip("wheel", reason=f"setuptools {setuptools.__version__} needs `wheel`")
    # A copy: building in place would leave build/ and *.egg-info in the checkout.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(HERE / name, src / name)
    shutil.copytree(HERE / "afr_client", src / "afr_client",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "site"
    # Offline: no index, and the build backend this Python already has.
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-index", "--no-deps", "--no-build-isolation", "--target", str(target), str(src)],
        check=True,
    )
    probe = (
        "import afr_client, pathlib; p = pathlib.Path(afr_client.__file__).parent; "
        "print(p); print((p / 'py.typed').is_file()); print(afr_client.__version__); "
        "print(sorted(afr_client.__all__))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
        check=True, capture_output=True, text=True, cwd=tmp_path,
    ).stdout.splitlines()
    assert out[0] == str(target / "afr_client") and out[1] == "True"
    import afr_client

    assert out[2] == afr_client.__version__
    assert "Recorder" in out[3] and "AsyncRecorder" in out[3] and "Client" in out[3]
