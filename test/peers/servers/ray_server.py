"""Ray Serve serving the demo MLP with @serve.batch. Request {"input": [256 floats]} ->
{"logits": [10 floats]} at POST /. One replica (num_cpus=1).
Defaults: @serve.batch() (its max_batch_size and batch_wait_timeout_s defaults) and the deployment's
default max_ongoing_requests. Tuned: @serve.batch(max_batch_size=PEER_MAX_BATCH,
batch_wait_timeout_s=PEER_MAX_DELAY_MS/1000) and max_ongoing_requests = 4 x max batch."""

import signal
import sys
import time

import numpy as np
import ray
from ray import serve
from starlette.requests import Request

import common

BATCH_KW = {}
DEPLOY_KW = {}
if common.MAX_BATCH is not None:
    BATCH_KW["max_batch_size"] = common.MAX_BATCH
    DEPLOY_KW["max_ongoing_requests"] = 4 * common.MAX_BATCH
if common.MAX_DELAY_MS is not None:
    BATCH_KW["batch_wait_timeout_s"] = common.MAX_DELAY_MS / 1000


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 1}, **DEPLOY_KW)
class Demo:
    def __init__(self, path):
        self.model = common.Model(path)

    @serve.batch(**BATCH_KW)
    async def predict(self, xs):
        out = self.model.run(np.stack(xs))
        return [row.tolist() for row in out]

    async def __call__(self, request: Request):
        body = await request.json()
        return {"logits": await self.predict(np.asarray(body["input"], dtype=np.float32))}


if __name__ == "__main__":
    # Replicas inherit this environment (PEER_*, PYTHONPATH with this folder, OMP_NUM_THREADS=1).
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": common.PORT})
    serve.run(Demo.bind(common.MODEL), name="demo", route_prefix="/")
    print(f"ray serve ready on http://127.0.0.1:{common.PORT}/", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    while not stop:
        time.sleep(0.2)
    serve.shutdown()
    ray.shutdown()
    sys.exit(0)
