"""LitServe serving the demo MLP. Request {"input": [256 floats]} -> {"logits": [10 floats]} at POST /predict.
Defaults: LitAPI(max_batch_size=1, batch_timeout=0.0), i.e. no batching. Tuned: PEER_MAX_BATCH /
PEER_MAX_DELAY_MS (batch_timeout in seconds = ms / 1000). One worker, one API server."""

import numpy as np
import litserve as ls

import common


class DemoAPI(ls.LitAPI):
    def setup(self, device):
        self.model = common.Model()

    def decode_request(self, request):
        return np.asarray(request["input"], dtype=np.float32)

    def batch(self, inputs):
        return np.stack(inputs)

    def predict(self, x):
        return self.model.run(x)

    def unbatch(self, output):
        return list(output)

    def encode_response(self, output):
        out = np.asarray(output)
        return {"logits": (out[0] if out.ndim == 2 else out).tolist()}


if __name__ == "__main__":
    kw = {}
    if common.MAX_BATCH is not None:
        kw["max_batch_size"] = common.MAX_BATCH
    if common.MAX_DELAY_MS is not None:
        kw["batch_timeout"] = common.MAX_DELAY_MS / 1000
    server = ls.LitServer(DemoAPI(**kw), accelerator="cpu", devices=1, workers_per_device=1)
    server.run(host="127.0.0.1", port=common.PORT, num_api_servers=1, generate_client_file=False)
