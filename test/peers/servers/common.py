"""Shared parts of the peer servers: the ONNX session (onnxruntime CPU, 1 intra-op thread, like
`cohort serve --threads 1`), the peer's settings from the environment, and a tiny side HTTP
endpoint that reports how many batches and items the handler ran (mean batch size for every peer,
counted the same way in each: in the Python function that calls `session.run`).

Environment (set by `cohort bench peers`, apps/cli/src/bench/peers-targets.ts):
  PEER_MODEL       path of the ONNX model (input `input` FP32 [batch,256], output `logits`)
  PEER_PORT        HTTP port of the server
  PEER_STATS_PORT  port of the side endpoint (GET / -> {"batches": n, "items": m})
  PEER_MAX_BATCH   max batch size ("" = the peer's default)
  PEER_MAX_DELAY_MS  batching delay in ms ("" = the peer's default)
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import onnxruntime as ort


def env_int(name):
    v = os.environ.get(name, "")
    return int(v) if v else None


def env_float(name):
    v = os.environ.get(name, "")
    return float(v) if v else None


MODEL = os.environ.get("PEER_MODEL", "")
PORT = env_int("PEER_PORT") or 8000
STATS_PORT = env_int("PEER_STATS_PORT")
MAX_BATCH = env_int("PEER_MAX_BATCH")
MAX_DELAY_MS = env_float("PEER_MAX_DELAY_MS")


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.batches = 0
        self.items = 0

    def add(self, n):
        with self.lock:
            self.batches += 1
            self.items += n


COUNTERS = Counters()
_stats_started = False


def start_stats_server():
    """Serve {"batches", "items"} on PEER_STATS_PORT in a daemon thread (once per process)."""
    global _stats_started
    if _stats_started or not STATS_PORT:
        return
    _stats_started = True

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            with COUNTERS.lock:
                body = json.dumps({"batches": COUNTERS.batches, "items": COUNTERS.items}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", STATS_PORT), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


class Model:
    """The demo MLP in onnxruntime (CPU, intra_op_num_threads=1, sequential execution)."""

    def __init__(self, path=None):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(path or MODEL, sess_options=opts, providers=["CPUExecutionProvider"])
        start_stats_server()

    def run(self, x):
        """x: FP32 [n, 256] (or [256]: one item) -> logits [n, 10]; counts one batch of n."""
        x = np.asarray(x, dtype=np.float32)
        if x.ndim == 1:
            x = x[None, :]
        COUNTERS.add(x.shape[0])
        return self.session.run(["logits"], {"input": x})[0]
