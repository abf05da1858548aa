// The gRPC form of the Open Inference Protocol (inference.GRPCInferenceService, served by
// `cohort gateway --grpc-port`) driven by a @grpc/grpc-js client, and Triton-style statistics
// (`/v2/models/{m}/stats`, gRPC ModelStatistics) checked against /metrics. Real nats-server,
// worker and gateway processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { PROTO_DIR } from '@cohort/gateway/grpc'
import { demoMlpReference } from '@cohort/onnx-builder'
import { encodeBytesElements } from '@cohort/protocol'
import { parsePrometheus } from '@cohort/metrics'
import { getJson, postJson, spawnCohort, startNatsServer, writeModelFixtures, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'

/** A gRPC message as the proto-loader client takes and gives it (keepCase, longs as strings). */
type Msg = Record<string, unknown>
/** The dynamic client proto-loader makes: grpc.Client plus one method per RPC. */
type OipClient = InstanceType<grpc.ServiceClientConstructor>
type Unary<T> = (req: Msg, md: grpc.Metadata, cb: (e: grpc.ServiceError | null, r: T) => void) => void

/** The parts of the answers these tests read (uint64 fields arrive as strings). */
type OutputTensor = { name: string; datatype: string; shape: string[] }
interface InferResponse {
  id: string
  model_version: string
  outputs: OutputTensor[]
  raw_output_contents: Buffer[]
}
interface ModelConfigResponse {
  config: { input: Msg[]; max_batch_size: string | number }
}
interface StreamResponse {
  error_message: string
  infer_response: { id: string }
}
interface ModelStatisticsResponse {
  model_stats: [{ inference_stats: { success: { count: string } } }]
}
/** One entry of `batch_stats` in the REST statistics answer. */
type BatchStat = { batch_size: number; compute_infer: { count: number } }

function loadClient(addr: string): OipClient {
  const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
  const { GRPCInferenceService } = (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference
  return new GRPCInferenceService(addr, grpc.credentials.createInsecure())
}

const DEMO_X = new Float32Array(2 * 256).map((_, i) => Math.cos(i * 0.11))
const DEMO_Y = demoMlpReference(DEMO_X, 2)

describe('gRPC inference service and Triton statistics', () => {
  let nats: NatsServerHandle
  let worker: CliProcess
  let gw: CliProcess
  let http: string
  let workerMetrics: string
  let client: OipClient

  const call = <T = Msg>(method: string, req: Msg): Promise<T> =>
    new Promise((resolve, reject) => (client[method] as Unary<T>).call(client, req, new grpc.Metadata(), (e, r) => (e ? reject(e) : resolve(r))))
  const callError = async (method: string, req: Msg): Promise<grpc.ServiceError> => {
    try {
      await call(method, req)
    } catch (e) {
      return e as grpc.ServiceError
    }
    throw new Error(`${method} succeeded`)
  }

  beforeAll(async () => {
    nats = await startNatsServer()
    const fx = writeModelFixtures()
    worker = spawnCohort(['worker', '--nats', nats.url, '--threads', '1', '--metrics-port', '0', '--model', 'demo', '--model', `identity=${fx.identity}`])
    const [, wm] = await worker.waitFor(/worker metrics on (http:\/\/\S+\/metrics)/, 90_000)
    workerMetrics = wm!
    await worker.waitFor(/serving/, 90_000)
    gw = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--grpc-port', '0'])
    const [, grpcPort] = await gw.waitFor(/grpc on 127\.0\.0\.1:(\d+)/, 60_000)
    const [, httpPort] = await gw.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
    http = `http://127.0.0.1:${httpPort}`
    client = loadClient(`127.0.0.1:${grpcPort}`)
  })

  afterAll(async () => {
    ifStarted(client)?.close()
    await Promise.all(allStarted(worker, gw).map((p) => p.stop('SIGKILL')))
    await ifStarted(nats)?.stop()
  })

  it('health, server and model metadata, config', async () => {
    expect(await call('ServerLive', {})).toEqual({ live: true })
    expect(await call('ServerReady', {})).toEqual({ ready: true })
    expect(await call('ModelReady', { name: 'demo', version: '' })).toEqual({ ready: true })
    expect(await call('ModelReady', { name: 'demo', version: '2' })).toEqual({ ready: false })
    expect(await call('ModelReady', { name: 'nope', version: '' })).toEqual({ ready: false })
    const sm = await call('ServerMetadata', {})
    expect(sm['extensions']).toContain('statistics')
    const md = await call('ModelMetadata', { name: 'demo', version: '1' })
    expect(md['inputs']).toEqual([{ name: 'input', datatype: 'FP32', shape: ['-1', '256'] }])
    const cfg = (await call<ModelConfigResponse>('ModelConfig', { name: 'demo', version: '' }))['config']
    expect(cfg['input'][0]).toMatchObject({ name: 'input', data_type: 'TYPE_FP32', dims: ['256'] })
    expect(Number(cfg['max_batch_size'])).toBeGreaterThan(0)
  })

  it('ModelInfer with typed contents (fp32_contents) answers raw_output_contents matching the reference MLP', async () => {
    const r = await call<InferResponse>('ModelInfer', {
      model_name: 'demo',
      id: 'typed-1',
      inputs: [{ name: 'input', datatype: 'FP32', shape: [2, 256], contents: { fp32_contents: Array.from(DEMO_X) } }],
    })
    expect(r['id']).toBe('typed-1')
    expect(r['model_version']).toBe('1')
    expect(r['outputs']).toMatchObject([{ name: 'logits', datatype: 'FP32', shape: ['2', '10'] }])
    const raw = r['raw_output_contents'][0] as Buffer
    const got = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength))
    expect(got.length).toBe(20)
    got.forEach((v, i) => expect(v).toBeCloseTo(DEMO_Y[i]!, 4))
  })

  it('ModelInfer with raw_input_contents round-trips INT64, FP16 and BYTES through the identity model; requested outputs only', async () => {
    const dts = ['BOOL', 'UINT8', 'INT8', 'UINT16', 'INT16', 'INT32', 'INT64', 'UINT32', 'UINT64', 'FP16', 'FP32', 'FP64'] as const
    const size: Record<string, number> = { BOOL: 1, UINT8: 1, INT8: 1, UINT16: 2, INT16: 2, INT32: 4, INT64: 8, UINT32: 4, UINT64: 8, FP16: 2, FP32: 4, FP64: 8 }
    const raws: Buffer[] = []
    const inputs: Msg[] = []
    for (const dt of dts) {
      const b = Buffer.alloc(4 * size[dt]!)
      for (let i = 0; i < b.length; i++) b[i] = (i * 37 + dt.length) & (dt === 'BOOL' ? 1 : 0x3f)
      raws.push(b)
      inputs.push({ name: `in_${dt}`, datatype: dt, shape: [2, 2] })
    }
    const int64 = new BigInt64Array([-(2n ** 62n), 2n ** 62n + 1n, 9007199254740993n, -1n])
    raws[dts.indexOf('INT64')] = Buffer.from(int64.buffer)
    const strings = encodeBytesElements(['a', 'h\u00e9llo', '', 'x'.repeat(300)])
    raws.push(Buffer.from(strings))
    inputs.push({ name: 'in_BYTES', datatype: 'BYTES', shape: [2, 2] })
    const r = await call<InferResponse>('ModelInfer', {
      model_name: 'identity',
      inputs,
      raw_input_contents: raws,
      outputs: [{ name: 'out_INT64' }, { name: 'out_FP16' }, { name: 'out_BYTES' }],
    })
    expect(r['outputs'].map((o: Msg) => o['name'])).toEqual(['out_INT64', 'out_FP16', 'out_BYTES'])
    expect(Buffer.compare(r['raw_output_contents'][0]!, raws[dts.indexOf('INT64')]!)).toBe(0)
    expect(Buffer.compare(r['raw_output_contents'][1]!, raws[dts.indexOf('FP16')]!)).toBe(0)
    expect(Buffer.compare(r['raw_output_contents'][2]!, Buffer.from(strings))).toBe(0)
  })

  it('errors map to gRPC status codes with the stable code in metadata', async () => {
    const input = { name: 'input', datatype: 'FP32', shape: [1, 256], contents: { fp32_contents: new Array(256).fill(0) } }
    const unknown = await callError('ModelInfer', { model_name: 'nope', inputs: [input] })
    expect(unknown.code).toBe(grpc.status.NOT_FOUND)
    expect(unknown.metadata.get('cohort-code')).toEqual(['MODEL_NOT_FOUND'])
    const version = await callError('ModelInfer', { model_name: 'demo', model_version: '7', inputs: [input] })
    expect(version.code).toBe(grpc.status.NOT_FOUND)
    const wrongName = await callError('ModelInfer', { model_name: 'demo', inputs: [{ ...input, name: 'x' }] })
    expect(wrongName.code).toBe(grpc.status.INVALID_ARGUMENT)
    const short = await callError('ModelInfer', { model_name: 'demo', inputs: [{ ...input, contents: { fp32_contents: [1, 2] } }] })
    expect(short.code).toBe(grpc.status.INVALID_ARGUMENT)
    const fp16Typed = await callError('ModelInfer', { model_name: 'identity', inputs: [{ name: 'in_FP16', datatype: 'FP16', shape: [1, 2], contents: {} }] })
    expect(fp16Typed.code).toBe(grpc.status.INVALID_ARGUMENT)
    const unimpl = await callError('RepositoryIndex', {})
    expect(unimpl.code).toBe(grpc.status.UNIMPLEMENTED)
  })

  it('ModelStreamInfer answers each request on the stream, errors as error_message', async () => {
    const stream = client['ModelStreamInfer']!() as grpc.ClientDuplexStream<Msg, StreamResponse>
    const got: StreamResponse[] = []
    const done = new Promise<void>((resolve, reject) => {
      stream.on('data', (m: StreamResponse) => got.push(m))
      stream.on('end', () => resolve())
      stream.on('error', reject)
    })
    const input = { name: 'input', datatype: 'FP32', shape: [2, 256], contents: { fp32_contents: Array.from(DEMO_X) } }
    stream.write({ model_name: 'demo', id: 's1', inputs: [input] })
    stream.write({ model_name: 'demo', id: 's2', inputs: [{ ...input, name: 'wrong' }] })
    stream.write({ model_name: 'demo', id: 's3', inputs: [input] })
    stream.end()
    await done
    expect(got).toHaveLength(3)
    const ok = got.filter((m) => m['error_message'] === '')
    expect(ok.map((m) => m['infer_response']['id']).sort()).toEqual(['s1', 's3'])
    const failed = got.find((m) => m['error_message'] !== '')!
    expect(failed['infer_response']['id']).toBe('s2')
  })

  it('/v2/models/demo/stats counts what ran: it agrees with the gateway and worker /metrics', async () => {
    const before = await snapshot()
    const n = 7
    for (let i = 0; i < n; i++) {
      const r = await postJson(`${http}/v2/models/demo/infer`, {
        inputs: [{ name: 'input', datatype: 'FP32', shape: [2, 256], data: Array.from(DEMO_X) }],
      })
      expect(r.status).toBe(200)
    }
    // One more over gRPC: counted by the workers and in the gateway's cohort_requests_total alike.
    await call('ModelInfer', { model_name: 'demo', inputs: [{ name: 'input', datatype: 'FP32', shape: [2, 256], contents: { fp32_contents: Array.from(DEMO_X) } }] })
    // Fails in the worker (unknown input name): a failed request that reached the model.
    const bad = await postJson(`${http}/v2/models/demo/infer`, { inputs: [{ name: 'nope', datatype: 'FP32', shape: [1, 1], data: [1] }] })
    expect(bad.status).toBe(400)
    const after = await snapshot()
    const d = (k: keyof typeof before) => after[k] - before[k]
    expect(d('success')).toBe(n + 1)
    expect(d('gatewayOk')).toBe(n + 1)
    expect(d('fail')).toBe(1)
    expect(d('gatewayFailed')).toBe(1)
    expect(d('inferences')).toBe(2 * (n + 1))
    expect(d('executions')).toBeGreaterThan(0)
    // Batches: Triton's execution_count and batch_stats equal the worker's batch-size histogram.
    expect(after.executions).toBe(after.workerBatches)
    expect(after.batchItems).toBe(after.workerBatchItems)
    expect(after.batchCount).toBe(after.executions)
    expect(after.computeNs).toBeGreaterThan(0)
    // gRPC ModelStatistics gives the same numbers; the versioned route too.
    const g = await call<ModelStatisticsResponse>('ModelStatistics', { name: 'demo', version: '' })
    expect(Number(g['model_stats'][0]['inference_stats']['success']['count'])).toBe(after.success)
    const v = await getJson(`${http}/v2/models/demo/versions/1/stats`)
    expect(v.body.model_stats[0].inference_count).toBe(after.inferences)
    expect((await getJson(`${http}/v2/models/demo/versions/2/stats`)).status).toBe(404)
    expect((await getJson(`${http}/v2/models/nope/stats`)).status).toBe(404)
    const all = await getJson(`${http}/v2/models/stats`)
    expect(all.body.model_stats.map((s: Msg) => s['name'])).toEqual(['demo', 'identity'])
  })

  it('the gateway and worker processes expose process, runtime and ORT instance metrics', async () => {
    const r = await postJson(`${http}/v2/models/demo/infer`, {
      inputs: [{ name: 'input', datatype: 'FP32', shape: [2, 256], data: Array.from(DEMO_X) }],
    })
    expect(r.status).toBe(200)
    const gm = parsePrometheus(await (await fetch(`${http}/metrics`)).text())
    const wm = parsePrometheus(await (await fetch(workerMetrics)).text())
    for (const [who, m] of [
      ['gateway', gm],
      ['worker', wm],
    ] as const) {
      expect(m.get('process_cpu_seconds_total'), who).toBeGreaterThan(0)
      expect(m.get('process_resident_memory_bytes'), who).toBeGreaterThan(10 * 1024 * 1024)
      const start = m.get('process_start_time_seconds')!
      expect(start, who).toBeGreaterThan(Date.now() / 1000 - 600)
      expect(start, who).toBeLessThanOrEqual(Date.now() / 1000 + 1)
      expect(m.get('nodejs_heap_size_used_bytes'), who).toBeGreaterThan(0)
      expect(m.get('nodejs_eventloop_lag_seconds'), who).toBeGreaterThanOrEqual(0)
      expect(
        [...m.keys()].some((k) => k.startsWith('nodejs_version_info{')),
        who,
      ).toBe(true)
    }
    // ORT instances live in the worker: the demo's instance and its inline lane (a batch predicted
    // to run in under inlineRunMs runs on the main thread, instance="inline": which one a batch
    // takes depends on the machine's speed) ran at least the batches counted.
    const batches = wm.get('cohort_batch_size_count{model="demo"}')!
    expect(batches).toBeGreaterThan(0)
    const runs = (instance: string) => wm.get(`cohort_ort_runs_total{instance="${instance}",model="demo",result="ok"}`) ?? 0
    expect(runs('0') + runs('inline')).toBeGreaterThanOrEqual(batches)
    expect(runs('0')).toBeGreaterThan(0) // the warm-up run at least
    expect(wm.get('cohort_ort_busy_seconds_total{instance="0",model="demo"}')).toBeGreaterThan(0)
    expect(wm.get('cohort_ort_instances{model="demo",state="live"}')).toBe(1)
    expect(wm.get('cohort_ort_instances{model="demo",state="dead"}')).toBe(0)
    expect(
      [...gm.keys()].some((k) => k.startsWith('cohort_ort_')),
      'no ORT metrics in the gateway',
    ).toBe(false)
  })

  async function snapshot() {
    const s = (await getJson(`${http}/v2/models/demo/stats`)).body.model_stats[0]
    const gm = await (await fetch(`${http}/metrics`)).text()
    const wm = await (await fetch(workerMetrics)).text()
    /** Sum of the samples of `name` whose labels match every pattern (label order does not matter). */
    const metric = (text: string, name: string, ...labels: RegExp[]) =>
      text
        .split('\n')
        .filter((l) => l.startsWith(`${name}{`) && labels.every((re) => re.test(l.slice(0, l.lastIndexOf('}') + 1))))
        .reduce((a, l) => a + Number(l.trim().split(/\s+/).at(-1)), 0)
    return {
      success: s.inference_stats.success.count as number,
      fail: s.inference_stats.fail.count as number,
      inferences: s.inference_count as number,
      executions: s.execution_count as number,
      computeNs: s.inference_stats.compute_infer.ns as number,
      batchCount: (s.batch_stats as BatchStat[]).reduce((a, b) => a + b['compute_infer']['count'], 0),
      batchItems: (s.batch_stats as BatchStat[]).reduce((a, b) => a + b['batch_size'] * b['compute_infer']['count'], 0),
      gatewayOk: metric(gm, 'cohort_requests_total', /model="demo"/, /code="OK"/),
      gatewayFailed: metric(gm, 'cohort_requests_total', /model="demo"/, /code="(?!OK")/),
      workerBatches: metric(wm, 'cohort_batch_size_count', /model="demo"/),
      workerBatchItems: metric(wm, 'cohort_batch_size_sum', /model="demo"/),
    }
  }
})
