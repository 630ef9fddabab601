"""`gpubalance serve` as a real subprocess: SIGHUP reload, JSON access log, hash-key."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson

from gateway_testkit import chat, emulator, free_port, post, run
from gpubalance.gateway import hash_key


def _yaml(port: int, log: Path, pools: list[tuple[str, str, str]]) -> str:
    lines = [f"port: {port}", f"access_log: {log}", "log_flush_s: 0.05", "pools:"]
    for name, model, url in pools:
        lines += [
            f"  - name: {name}",
            f"    models: [{model}]",
            f"    backends: [{{name: {name}b, url: '{url}'}}]",
        ]
    return "\n".join(lines) + "\n"


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    import urllib.request

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            with urllib.request.urlopen(url + "/health", timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("gateway did not start")


def test_sighup_reload_and_access_log(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "access.jsonl"
    cfg = tmp_path / "gw.yaml"
    with emulator("m") as e1, emulator("m2") as e2:
        cfg.write_text(_yaml(port, log, [("a", "m", e1.url)]))
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpubalance.cli.main", "serve", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, proc)

            async def models() -> list[str]:
                async with aiohttp.ClientSession() as s, s.get(url + "/v1/models") as r:
                    return [m["id"] for m in (await r.json())["data"]]

            async def ask(model: str) -> int:
                async with aiohttp.ClientSession() as s:
                    return (await post(s, url + "/v1/chat/completions", chat(model, 3)))[0]

            assert run(models()) == ["m"]
            assert run(ask("m2")) == 404
            cfg.write_text(_yaml(port, log, [("a", "m", e1.url), ("b", "m2", e2.url)]))
            proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 5
            while run(models()) != ["m", "m2"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert run(models()) == ["m", "m2"]
            assert run(ask("m2")) == 200
            cfg.write_text("pools: [oops")  # a broken file keeps the running config
            proc.send_signal(signal.SIGHUP)
            time.sleep(0.3)
            assert run(ask("m")) == 200 and proc.poll() is None
            time.sleep(0.3)  # > log_flush_s
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=10)
    recs = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    ok = [r for r in recs if r["status"] == 200]
    assert [(r["model"], r["backend"]) for r in ok] == [("m2", "bb"), ("m", "ab")]
    r = ok[0]
    # "hello world" = ceil(11/4) = 3 tokens + 4 per message
    assert (r["input_tokens"], r["output_tokens"], r["endpoint"]) == (7, 3, "chat")
    assert r["latency_s"] >= r["ttft_s"] > 0
    assert next(x["status"] for x in recs if x["model"] == "m2") == 404


def test_hash_key_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpubalance.cli.main", "serve", "hash-key", "s3cret"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == hash_key("s3cret")
    # sha256("s3cret") computed independently
    import hashlib

    assert hash_key("s3cret") == hashlib.sha256(b"s3cret").hexdigest()


def test_bad_config_is_one_line_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "gw.yaml"
    p.write_text("pools:\n  - name: a\n    backends: []\n")
    out = subprocess.run(
        [sys.executable, "-m", "gpubalance.cli.main", "serve", str(p)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "gw.yaml:3" in out.stderr and "pools.0.backends" in out.stderr
