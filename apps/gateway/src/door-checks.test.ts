// The door's two checks through the HTTP app (InProcessTransport): the worker-wait check refuses,
// before the body is read and without publishing, what a worker's heartbeat estimate says cannot
// finish in time; both checks count in cohort_door_refusals_total under their own `check` label.
// A body of '{ not json' tells whether it was read: a read body answers 400.
import { describe, expect, it } from 'vitest'
import { Registry } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { encodeHeartbeat, subjects } from '@cohort/protocol'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { createApp } from './app.ts'
import type { GatewayOptions } from './options.ts'
import { PROTO_DIR, startGrpcServer } from './adapters/grpc/server.ts'

const subj = subjects('cohort')

/** A worker whose queue for `m` is 5 s deep (its heartbeat carries the estimate). */
async function deepQueue(transport: InProcessTransport): Promise<void> {
  transport.publish(subj.heartbeat(), encodeHeartbeat({ v: 1, id: 'w1', intervalMs: 60_000, proto: 2, models: { m: { queued: 1000, waitMs: 5_000, serviceMs: 10 } } }))
  await new Promise((r) => setTimeout(r, 10))
}

async function setup(o: Partial<GatewayOptions> = {}) {
  const transport = new InProcessTransport()
  const registry = new Registry()
  const app = createApp({ transport, registry, ...o })
  const published: string[] = []
  for (const s of [subj.infer('m'), subj.overflow('m')]) {
    const sub = transport.subscribe(s)
    void (async () => {
      for await (const m of sub) published.push(m.subject)
    })()
  }
  await deepQueue(transport)
  const post = (timeoutMs = '1000') =>
    app.request('/v2/models/m/infer', { method: 'POST', headers: { 'content-type': 'application/json', 'x-cohort-timeout-ms': timeoutMs }, body: '{ not json' })
  const refusals = (check: string) => {
    const line = registry
      .render()
      .split('\n')
      .find((l) => l.startsWith('cohort_door_refusals_total{') && l.includes(`check="${check}"`))
    return line ? Number(line.split(' ').pop()) : 0
  }
  return { transport, published, post, refusals }
}

describe('the door checks in the HTTP app', () => {
  it('worker-wait: after one probe, refuses 503 OVERLOADED + Retry-After before reading the body, publishing nothing', async () => {
    // One probe, then none within the test: with the default 100 ms between probes, a loaded
    // machine's pause between the two posts made the second one a probe too (read: 400).
    const { transport, published, post, refusals } = await setup({ workerWait: { probeIntervalMs: 1e9 } })
    const probe = await post()
    expect(probe.status).toBe(400) // the probe passed the door: its body was read
    const res = await post()
    expect(res.status).toBe(503)
    expect(Number(res.headers.get('retry-after'))).toBe(5)
    expect(await res.json()).toMatchObject({ code: 'OVERLOADED', error: expect.stringMatching(/refused at the door \(worker-wait check\)/) })
    expect(published).toEqual([])
    expect([refusals('worker_wait'), refusals('event_loop_lag')]).toEqual([1, 0])
    // A deadline the estimate meets passes the door.
    expect((await post('10000')).status).toBe(400)
    await transport.close()
  })

  it('worker-wait off (workerWait: false): the same request is read', async () => {
    const { transport, post, refusals } = await setup({ workerWait: false })
    for (let i = 0; i < 3; i++) expect((await post()).status).toBe(400)
    expect(refusals('worker_wait')).toBe(0)
    await transport.close()
  })

  it('event-loop-lag: counted under its own label', async () => {
    const { transport, post, refusals } = await setup({ adapter: { queueDelayMs: () => 5000 } })
    expect((await post()).status).toBe(503)
    expect([refusals('event_loop_lag'), refusals('worker_wait')]).toEqual([1, 0])
    await transport.close()
  })

  it('over gRPC the worker-wait refusal is RESOURCE_EXHAUSTED with cohort-code OVERLOADED and retry-after', async () => {
    const transport = new InProcessTransport()
    // One probe, then none within the test (a loaded machine may take longer than the default 100 ms between calls).
    const server = await startGrpcServer({ transport, port: 0, workerWait: { probeIntervalMs: 1e9 } })
    await deepQueue(transport)
    const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
    const { GRPCInferenceService } = (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference
    const client = new GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
    const req = { model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], contents: { fp32_contents: [1] } }] }
    const call = () =>
      new Promise<grpc.ServiceError | null>((resolve) => client['ModelInfer']!(req, new grpc.Metadata(), { deadline: Date.now() + 1000 }, (e: grpc.ServiceError | null) => resolve(e)))
    const probe = await call() // passes the door; no worker serves m
    expect(probe?.metadata.get('cohort-code')).not.toEqual(['OVERLOADED'])
    const e = await call()
    expect(e?.code).toBe(grpc.status.RESOURCE_EXHAUSTED)
    expect(e?.metadata.get('cohort-code')).toEqual(['OVERLOADED'])
    expect(e?.details).toMatch(/worker-wait check/)
    expect(Number(e?.metadata.get('retry-after')[0])).toBeGreaterThanOrEqual(1)
    client.close()
    await server.close()
    await transport.close()
  })
})
