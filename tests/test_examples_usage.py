"""Examples and benchmarks as a new user runs them: --help, a missing optional package, a client that goes away
(issue 14.5)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(str(p.relative_to(ROOT)) for p in [*(ROOT / "examples").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")])


def _env() -> dict:
    import response_templates

    # The scripts import the same response_templates as this test run (installed, or the source tree).
    home = str(Path(response_templates.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [home, os.environ.get("PYTHONPATH")])),
            "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_honours_help(script):
    result = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True,
                            timeout=120, env=_env(), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {Path(script).name}"), result.stdout
    assert "Traceback" not in result.stderr


def test_batch_dataset_without_datasets_says_what_to_install():
    # `datasets` made unimportable, as in an environment that lacks it.
    code = (
        "import runpy, sys; sys.modules['datasets'] = None; "
        f"sys.argv = ['batch_dataset.py']; sys.path.insert(0, {str(ROOT / 'examples')!r}); "
        f"runpy.run_path({str(ROOT / 'examples' / 'batch_dataset.py')!r}, run_name='__main__')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "needs the `datasets` package: pip install datasets" in result.stderr
    assert '".[datasets]"' in result.stderr


def test_the_datasets_extra_exists():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extras = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^datasets = \[\s*"datasets', extras, re.M), extras


def test_openai_server_client_disconnect_prints_no_traceback():
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "openai_server.py"), "--port", "0", "--token-delay", "0.02"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
    )
    try:
        line = server.stdout.readline()
        port = int(re.search(r":(\d+)/v1", line).group(1))
        body = b'{"model": "qwen3-demo", "messages": [{"role": "user", "content": "hi"}], "stream": true}'
        for _ in range(3):  # a few clients that read the first event and hang up mid-stream
            with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
                client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                received = b""
                while b"data: " not in received:  # the headers, then the first event
                    chunk = client.recv(4096)
                    assert chunk, received
                    received += chunk
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        time.sleep(2.5)  # the server keeps writing tokens to the closed connections meanwhile
        assert server.poll() is None, "the server died"
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "ConnectionResetError" not in err, err
