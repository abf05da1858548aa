"""Triton Inference Server through PyTriton: Triton's dynamic batcher in front of its Python
backend, which forwards each batch to the function below (onnxruntime in this process). Speaks the
Open Inference Protocol like Cohort: POST /v2/models/demo/infer with OIP JSON.
Defaults: ModelConfig() = max_batch_size 4, DynamicBatcher() = max_queue_delay_microseconds 0.
Tuned: ModelConfig(max_batch_size=PEER_MAX_BATCH, batcher=DynamicBatcher(max_queue_delay_microseconds=
PEER_MAX_DELAY_MS * 1000)). One model instance (infer_func_count 1); Triton's metrics port is
PEER_PORT + 2, its gRPC port PEER_PORT + 1."""

import os
import sysconfig

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

import common

model = common.Model()


@batch
def infer(input):
    return {"logits": model.run(input)}


if __name__ == "__main__":
    # Triton's Python-backend stub links libpython3.X.so dynamically; make it load the one of the
    # interpreter that runs this venv (not an older system copy with the same soname, whose C
    # modules do not match this interpreter's standard library).
    libdir = sysconfig.get_config_var("LIBDIR")
    os.environ["LD_LIBRARY_PATH"] = ":".join(p for p in [libdir, os.environ.get("LD_LIBRARY_PATH", "")] if p)
    kw = {}
    if common.MAX_BATCH is not None:
        kw["max_batch_size"] = common.MAX_BATCH
    if common.MAX_DELAY_MS is not None:
        kw["batcher"] = DynamicBatcher(max_queue_delay_microseconds=int(common.MAX_DELAY_MS * 1000))
    config = TritonConfig(http_address="127.0.0.1", http_port=common.PORT, grpc_address="127.0.0.1",
                          grpc_port=common.PORT + 1, metrics_port=common.PORT + 2)
    with Triton(config=config) as triton:
        triton.bind(
            model_name="demo",
            infer_func=infer,
            inputs=[Tensor(name="input", dtype=np.float32, shape=(256,))],
            outputs=[Tensor(name="logits", dtype=np.float32, shape=(10,))],
            config=ModelConfig(**kw),
            strict=False,
        )
        print(f"pytriton ready on http://127.0.0.1:{common.PORT}", flush=True)
        triton.serve()
