"""BentoML serving the demo MLP with adaptive batching. Request {"input": [[256 floats]]} (a batch
of one row: a batchable API concatenates requests along dimension 0) -> a [1,10] JSON list at
POST /predict. Run as `bentoml serve bentoml_server:Demo --port PEER_PORT`. One worker.
Defaults: @bentoml.api(batchable=True) (its max_batch_size and max_latency_ms defaults). Tuned:
max_batch_size=PEER_MAX_BATCH, max_latency_ms=PEER_MAX_LATENCY_MS (BentoML has no fixed batch
delay: its dispatcher learns one; max_latency_ms is the latency budget it keeps to, answering 503
beyond it)."""

import bentoml
import numpy as np

import common

API_KW = {"batchable": True}
if common.MAX_BATCH is not None:
    API_KW["max_batch_size"] = common.MAX_BATCH
if common.env_float("PEER_MAX_LATENCY_MS") is not None:
    API_KW["max_latency_ms"] = int(common.env_float("PEER_MAX_LATENCY_MS"))


@bentoml.service(workers=1)
class Demo:
    def __init__(self):
        self.model = common.Model()

    @bentoml.api(**API_KW)
    def predict(self, input: np.ndarray) -> np.ndarray:
        return self.model.run(input)
