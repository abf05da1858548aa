// gRPC gets the gateway's worker-loss handling through the inference door: a request held by a
// worker whose heartbeats stop is answered UNAVAILABLE (cohort-code WORKER_LOST) at once rather
// than at its deadline, and one with an `id` is resent to a live worker, which answers it.
// Real gRPC client and server, InProcessTransport, a real CohortWorker and a hand-made "zombie"
// worker that accepts requests, heartbeats, and never replies.
import { afterEach, describe, expect, it } from 'vitest'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { decodeRequest, encodeAccept, encodeHeartbeat, subjects } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { PROTO_DIR, startGrpcServer } from './server.ts'

const subj = subjects('cohort')
const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f()
})

const double = definePredictor({
  name: 'double',
  input: Type.Object({ x: Type.Number() }),
  output: Type.Object({ y: Type.Number() }),
  predict: (xs) => xs.map((i) => ({ y: 2 * i.x })),
})

/** Accepts every request of `model`, heartbeats every 100 ms, never replies; `die()` stops it all. */
function zombie(t: InProcessTransport, model: string) {
  let held = 0
  const sub = t.subscribe(subj.infer(model), { queue: subj.queue(model) })
  const beat = () => t.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'zombie', intervalMs: 100 }))
  beat()
  const timer = setInterval(beat, 100)
  void (async () => {
    for await (const m of sub) {
      const req = decodeRequest(m.data)
      held++
      if (req.ack) t.publish(req.ack, encodeAccept({ v: 1, id: req.id, worker: 'zombie' }))
    }
  })()
  const die = () => {
    clearInterval(timer)
    sub.unsubscribe()
  }
  cleanups.push(die)
  return { held: () => held, die }
}

type OutputTensor = { name: string; datatype: string; shape: string[] }
/** The parts of a ModelInferResponse this test reads. */
interface InferResponse {
  outputs: [OutputTensor, ...OutputTensor[]]
  raw_output_contents: [Buffer, ...Buffer[]]
}

async function setup(workers: number) {
  const transport = new InProcessTransport()
  const z = zombie(transport, 'double')
  for (let i = 0; i < workers; i++) {
    const w = new CohortWorker({ transport, runners: [new PredictorRunner(double)], id: `live-${i}`, heartbeatMs: 100 })
    await w.start()
    cleanups.push(() => w.drain())
  }
  const server = await startGrpcServer({ transport, port: 0, workerLoss: { checkIntervalMs: 20 } })
  const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
  const { GRPCInferenceService } = (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference
  const client = new GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
  cleanups.push(() => transport.close())
  cleanups.push(() => server.close())
  cleanups.push(() => client.close())
  const infer = (x: number, id = ''): Promise<InferResponse> =>
    new Promise((resolve, reject) => {
      const req = { model_name: 'double', id, inputs: [{ name: 'x', datatype: 'FP64', shape: [1], contents: { fp64_contents: [x] } }] }
      client['ModelInfer']!(req, new grpc.Metadata(), { deadline: Date.now() + 20_000 }, (e: grpc.ServiceError | null, r: InferResponse) => (e ? reject(e) : resolve(r)))
    })
  return { z, infer }
}

describe('gRPC: a worker lost while holding a request', () => {
  it('answers UNAVAILABLE with cohort-code WORKER_LOST soon after its heartbeats stop, not at the deadline', async () => {
    const { z, infer } = await setup(0)
    const pending = infer(1).then(
      () => undefined,
      (e: unknown) => e as grpc.ServiceError,
    )
    while (z.held() === 0) await new Promise((r) => setTimeout(r, 5))
    z.die()
    const e = await pending
    expect(e?.code).toBe(grpc.status.UNAVAILABLE)
    expect(e?.metadata.get('cohort-code')).toEqual(['WORKER_LOST'])
    expect(e?.metadata.get('retry-after')).toEqual(['1'])
  }, 15_000)

  it('resends a request with an id to another worker, which answers it', async () => {
    const { z, infer } = await setup(1)
    // The in-process queue group alternates: the zombie gets one of the first two requests.
    const a = infer(5, 'req-5')
    const b = infer(6, 'req-6')
    while (z.held() === 0) await new Promise((r) => setTimeout(r, 5))
    z.die()
    const ys = (await Promise.all([a, b])).map((r) => {
      const buf = new Uint8Array(r['raw_output_contents'][0]).slice().buffer
      return r['outputs'][0]['datatype'] === 'FP64' ? new Float64Array(buf)[0] : Number(new BigInt64Array(buf)[0])
    })
    expect(ys).toEqual([10, 12])
  }, 15_000)
})
