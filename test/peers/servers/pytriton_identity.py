"""Triton's own serving tax (`cohort bench tax --targets triton`, bench/src/tax.ts): an identity
function through PyTriton, so that what is measured is Triton's path around the model (its C++
HTTP front end, JSON, the dynamic batcher, the hand-off to the Python backend stub and on to this
process), as `cohort bench tax` measures Cohort's with an ONNX Identity model. OIP JSON at
POST /v2/models/m/infer, input `in` FP32 [batch, PEER_FEATURES], output `out`.
Settings: PEER_PORT (HTTP; gRPC PEER_PORT + 1, metrics PEER_PORT + 2), PEER_FEATURES (default 64),
PEER_MAX_BATCH (default 32), dynamic batcher with max_queue_delay_microseconds 0 (PyTriton's
default). One model instance."""

import os
import sysconfig

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

PORT = int(os.environ.get("PEER_PORT") or 8000)
FEATURES = int(os.environ.get("PEER_FEATURES") or 64)
MAX_BATCH = int(os.environ.get("PEER_MAX_BATCH") or 32)


@batch
def infer(**inputs):
    return {"out": inputs["in"]}


if __name__ == "__main__":
    # As pytriton_server.py: the backend stub must load this interpreter's libpython.
    libdir = sysconfig.get_config_var("LIBDIR")
    os.environ["LD_LIBRARY_PATH"] = ":".join(p for p in [libdir, os.environ.get("LD_LIBRARY_PATH", "")] if p)
    config = TritonConfig(http_address="127.0.0.1", http_port=PORT, grpc_address="127.0.0.1",
                          grpc_port=PORT + 1, metrics_port=PORT + 2)
    with Triton(config=config) as triton:
        triton.bind(
            model_name="m",
            infer_func=infer,
            inputs=[Tensor(name="in", dtype=np.float32, shape=(FEATURES,))],
            outputs=[Tensor(name="out", dtype=np.float32, shape=(FEATURES,))],
            config=ModelConfig(max_batch_size=MAX_BATCH, batcher=DynamicBatcher()),
            strict=False,
        )
        print(f"pytriton ready on http://127.0.0.1:{PORT}", flush=True)
        triton.serve()
