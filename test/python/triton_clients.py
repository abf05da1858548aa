"""Drive a Cohort gateway with Triton's own, unmodified Python clients (tritonclient.http and
tritonclient.grpc) and check every answer. Run by test/python/tritonclient.test.ts:

    .venv/bin/python triton_clients.py --http 127.0.0.1:PORT --grpc 127.0.0.1:PORT --expect demo.json

`--expect` holds the demo MLP's input rows and reference logits (computed in TypeScript). Prints
one JSON line per check; exits 1 on the first failed one.
"""
import argparse
import json
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

ap = argparse.ArgumentParser()
ap.add_argument("--http", required=True)
ap.add_argument("--grpc", required=True)
ap.add_argument("--expect", required=True)
args = ap.parse_args()
expect = json.load(open(args.expect))
X = np.array(expect["input"], dtype=np.float32)
LOGITS = np.array(expect["logits"], dtype=np.float32)


def check(name, ok, detail=""):
    print(json.dumps({"check": name, "ok": bool(ok), "detail": str(detail)[:300]}), flush=True)
    if not ok:
        sys.exit(1)


def identity_inputs(mod, binary):
    """All 13 inputs of the identity fixture (the model needs every one), 3 items of 2 each."""
    vals = {
        "BOOL": np.array([[True, False], [False, True], [True, True]]),
        "UINT8": np.array([[0, 255], [1, 2], [3, 4]], dtype=np.uint8),
        "INT8": np.array([[-128, 127], [0, 1], [2, 3]], dtype=np.int8),
        "UINT16": np.array([[0, 65535], [1, 2], [3, 4]], dtype=np.uint16),
        "INT16": np.array([[-32768, 32767], [0, 1], [2, 3]], dtype=np.int16),
        "INT32": np.array([[-(2**31), 2**31 - 1], [0, 1], [2, 3]], dtype=np.int32),
        "INT64": np.array([[-(2**62), 2**62 + 1], [0, -1], [9007199254740993, 3]], dtype=np.int64),
        "UINT32": np.array([[0, 2**32 - 1], [1, 2], [3, 4]], dtype=np.uint32),
        "UINT64": np.array([[0, 2**63 + 5], [1, 2], [3, 4]], dtype=np.uint64),
        "FP16": np.array([[0.5, -2.25], [65504, 1e-3], [3.0, -0.0]], dtype=np.float16),
        "FP32": np.array([[1.5, -2.5], [3.25, 1e-7], [-4.0, 0.0]], dtype=np.float32),
        "FP64": np.array([[1.0 / 3, -2.5], [1e300, 0.0], [5.0, 6.0]], dtype=np.float64),
        "BYTES": np.array([[b"a", "\u20ac sign".encode()], ["h\u00e9llo".encode(), b""], [b"x" * 300, b"z"]], dtype=np.object_),
    }
    inputs = []
    for dt, v in vals.items():
        i = mod.InferInput(f"in_{dt}", list(v.shape), dt)
        if binary is None:
            i.set_data_from_numpy(v)
        else:
            i.set_data_from_numpy(v, binary_data=binary)
        inputs.append(i)
    return vals, inputs


def same(a, b):
    if a.dtype == np.object_ or b.dtype == np.object_:
        as_bytes = lambda x: x.encode() if isinstance(x, str) else bytes(x)  # noqa: E731 (JSON BYTES come back as str)
        return a.shape == b.shape and all(as_bytes(x) == as_bytes(y) for x, y in zip(a.ravel(), b.ravel()))
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


# ---------------------------------------------------------------- HTTP
h = httpclient.InferenceServerClient(url=args.http)
check("http live", h.is_server_live())
check("http ready", h.is_server_ready())
check("http model ready", h.is_model_ready("demo"))
check("http model ready, version 1", h.is_model_ready("demo", "1"))
check("http model not ready, version 2", not h.is_model_ready("demo", "2"))
sm = h.get_server_metadata()
check("http server metadata", "binary_tensor_data" in sm["extensions"] and "statistics" in sm["extensions"], sm)
md = h.get_model_metadata("demo")
check("http model metadata", md["inputs"][0]["name"] == "input" and md["outputs"][0]["name"] == "logits", md)
cfg = h.get_model_config("demo")
check("http model config", cfg["max_batch_size"] > 0 and cfg["input"][0]["dims"] == [256], cfg)

for binary in (True, False):
    i = httpclient.InferInput("input", list(X.shape), "FP32")
    i.set_data_from_numpy(X, binary_data=binary)
    o = httpclient.InferRequestedOutput("logits", binary_data=binary)
    r = h.infer("demo", [i], outputs=[o], request_id=f"req-{binary}")
    got = r.as_numpy("logits")
    check(f"http demo infer binary={binary}", got is not None and np.allclose(got, LOGITS, atol=1e-4), got)
    check(f"http id echo binary={binary}", r.get_response()["id"] == f"req-{binary}", r.get_response())

for binary in (True, False):
    vals, inputs = identity_inputs(httpclient, binary)
    outs = [httpclient.InferRequestedOutput(f"out_{dt}", binary_data=binary) for dt in vals]
    r = h.infer("identity", inputs, outputs=outs)
    for dt, v in vals.items():
        got = r.as_numpy(f"out_{dt}")
        check(f"http identity {dt} binary={binary}", got is not None and same(got, v), got)

# Requested outputs: only the ones asked for come back.
vals, inputs = identity_inputs(httpclient, True)
r = h.infer("identity", inputs, outputs=[httpclient.InferRequestedOutput("out_FP16"), httpclient.InferRequestedOutput("out_BYTES", binary_data=False)])
names = [o["name"] for o in r.get_response()["outputs"]]
check("http requested outputs", names == ["out_FP16", "out_BYTES"], names)
check("http requested FP16 (binary)", same(r.as_numpy("out_FP16"), vals["FP16"]))
check("http requested BYTES (json)", same(r.as_numpy("out_BYTES"), vals["BYTES"]))

# Errors: unknown model, wrong input name.
try:
    miss = httpclient.InferInput("input", list(X.shape), "FP32")
    miss.set_data_from_numpy(X)
    h.infer("no-such-model", [miss])
    check("http unknown model fails", False)
except InferenceServerException as e:
    check("http unknown model fails", str(e.status()) == "404", e)

st = h.get_inference_statistics("demo")
s = st["model_stats"][0]
check("http statistics", s["name"] == "demo" and s["inference_stats"]["success"]["count"] >= 2 and s["execution_count"] >= 1, s)

# ---------------------------------------------------------------- gRPC
g = grpcclient.InferenceServerClient(url=args.grpc)
check("grpc live", g.is_server_live())
check("grpc ready", g.is_server_ready())
check("grpc model ready", g.is_model_ready("demo"))
check("grpc model not ready, version 2", not g.is_model_ready("demo", "2"))
gsm = g.get_server_metadata(as_json=True)
check("grpc server metadata", "statistics" in gsm["extensions"], gsm)
gmd = g.get_model_metadata("demo", as_json=True)
check("grpc model metadata", gmd["inputs"][0]["name"] == "input" and gmd["inputs"][0]["shape"] == ["-1", "256"], gmd)
gcfg = g.get_model_config("demo", as_json=True)["config"]
check("grpc model config", gcfg["input"][0]["data_type"] == "TYPE_FP32" and gcfg["input"][0]["dims"] == ["256"], gcfg)

i = grpcclient.InferInput("input", list(X.shape), "FP32")
i.set_data_from_numpy(X)
r = g.infer("demo", [i], outputs=[grpcclient.InferRequestedOutput("logits")], request_id="g-1")
check("grpc demo infer", np.allclose(r.as_numpy("logits"), LOGITS, atol=1e-4), r.as_numpy("logits"))
check("grpc id echo", r.get_response().id == "g-1", r.get_response().id)

vals, inputs = identity_inputs(grpcclient, None)
r = g.infer("identity", inputs, outputs=[grpcclient.InferRequestedOutput(f"out_{dt}") for dt in vals])
for dt, v in vals.items():
    got = r.as_numpy(f"out_{dt}")
    check(f"grpc identity {dt}", got is not None and same(got, v), got)

try:
    g.infer("no-such-model", [i])
    check("grpc unknown model fails", False)
except InferenceServerException as e:
    check("grpc unknown model fails", e.status() == "StatusCode.NOT_FOUND", e)
try:
    bad = grpcclient.InferInput("nope", list(X.shape), "FP32")
    bad.set_data_from_numpy(X)
    g.infer("demo", [bad])
    check("grpc wrong input fails", False)
except InferenceServerException as e:
    check("grpc wrong input fails", e.status() == "StatusCode.INVALID_ARGUMENT", e)

# ModelStreamInfer: several requests on one stream, each answered.
results = queue.Queue()
g.start_stream(callback=lambda result, error: results.put((result, error)))
for k in range(3):
    g.async_stream_infer("demo", [i], request_id=f"s-{k}")
got = [results.get(timeout=30) for _ in range(3)]
g.stop_stream()
ok = all(e is None and np.allclose(res.as_numpy("logits"), LOGITS, atol=1e-4) for res, e in got)
check("grpc stream infer", ok and sorted(res.get_response().id for res, _ in got) == ["s-0", "s-1", "s-2"], got)

gst = g.get_inference_statistics("demo", as_json=True)
check("grpc statistics", int(gst["model_stats"][0]["inference_stats"]["success"]["count"]) >= 6, gst)
print(json.dumps({"done": True}))
