// gRPC and REST through the same inference door: the same credentials (API key, JWT) accepted and
// refused with the same codes, the same rate limit (429 over REST is RESOURCE_EXHAUSTED over gRPC),
// the same tenant on the envelope (fair shares), and the gateway span parented by the caller's
// `traceparent` metadata. Real gRPC client and server
// on a local port, a real CohortWorker (TypeScript predictor) over an InProcessTransport.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { sign } from 'hono/jwt'
import { InMemorySpanExporter, SimpleSpanProcessor, BasicTracerProvider } from '@opentelemetry/sdk-trace-base'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { createApp } from '../../app.ts'
import type { GatewayOptions } from '../../options.ts'
import { PROTO_DIR, startGrpcServer, type GrpcServerHandle, type GrpcServerOptions } from './server.ts'

const shout = definePredictor({
  name: 'shout',
  input: Type.Object({ text: Type.String() }),
  predict: (xs) => xs.map((x) => x.text.toUpperCase()),
})

/** A gRPC message as the proto-loader client takes and gives it (keepCase, longs as strings). */
type Msg = Record<string, unknown>
/** The dynamic client proto-loader makes: grpc.Client plus one method per RPC. */
type OipClient = InstanceType<grpc.ServiceClientConstructor>
const SECRET = 'parity-secret-0123456789abcdef0123'
const now = () => Math.floor(Date.now() / 1000)
const token = (claims: Record<string, unknown> = {}, secret = SECRET) => sign({ sub: 'alice', exp: now() + 600, scope: 'infer', ...claims }, secret, 'HS256')

function client(port: number): OipClient {
  const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
  const { GRPCInferenceService } = (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference
  return new GRPCInferenceService(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
}

const inferReq = { model_name: 'shout', inputs: [{ name: 'text', datatype: 'BYTES', shape: [1], contents: { bytes_contents: [Buffer.from('hi')] } }] }
const restBody = JSON.stringify({ inputs: [{ name: 'text', datatype: 'BYTES', shape: [1], data: ['hi'] }] })

describe('gRPC auth parity with REST (one inference door)', () => {
  const transport = new InProcessTransport()
  const worker = new CohortWorker({ transport, runners: [new PredictorRunner(shout)] })
  const servers: GrpcServerHandle[] = []
  const clients: grpc.Client[] = []

  /** The same security settings as a REST app and a gRPC server. */
  async function pair(sec: Pick<GatewayOptions, 'apiKeys' | 'jwt' | 'rateLimit'>, extra: Partial<GrpcServerOptions> = {}) {
    const app = createApp({ transport, workerLoss: false, ...sec })
    const s = await startGrpcServer({ transport, port: 0, ...sec, ...extra })
    servers.push(s)
    const c = client(s.port)
    clients.push(c)
    const call = <T = Msg>(method: string, req: Msg, authorization?: string, md = new grpc.Metadata()): Promise<T> =>
      new Promise((resolve, reject) => {
        if (authorization !== undefined) md.set('authorization', authorization)
        c[method]!(req, md, (e: grpc.ServiceError | null, r: T) => (e ? reject(e) : resolve(r)))
      })
    const rest = (authorization?: string) =>
      app.request('/v2/models/shout/infer', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(authorization !== undefined ? { authorization } : {}) },
        body: restBody,
      })
    return { call, rest }
  }

  /** The gRPC status of a call (OK or the error's code) and its `cohort-code`. */
  const outcome = async (p: Promise<Msg>): Promise<[number, string]> => {
    try {
      await p
      return [grpc.status.OK, 'OK']
    } catch (e) {
      const se = e as { code: grpc.status; metadata?: grpc.Metadata } // a ServiceError, or any error with a code
      return [se.code, String(se.metadata?.get('cohort-code')[0] ?? '')]
    }
  }
  /** The REST status of a response and its code. */
  const restOutcome = async (r: Response): Promise<[number, string]> => [r.status, r.ok ? 'OK' : ((await r.json()) as { code: string }).code]
  const GRPC_OF: Record<number, number> = { 200: grpc.status.OK, 401: grpc.status.UNAUTHENTICATED, 403: grpc.status.PERMISSION_DENIED, 429: grpc.status.RESOURCE_EXHAUSTED }

  beforeAll(async () => {
    await worker.start()
  })

  afterAll(async () => {
    for (const c of clients) c.close()
    for (const s of servers) await s.close()
    await worker.drain()
    await transport.close()
  })

  it('accepts and refuses API keys and JWTs over gRPC exactly as over REST', async () => {
    const { call, rest } = await pair({ apiKeys: ['k1'], jwt: { secret: SECRET, scope: 'infer' } })
    const cases: [string, string | undefined][] = [
      ['API key', 'Bearer k1'],
      ['valid JWT', `Bearer ${await token()}`],
      ['no credentials', undefined],
      ['unknown key', 'Bearer nope'],
      ['not Bearer', 'Basic k1'],
      ['expired JWT', `Bearer ${await token({ exp: now() - 60, iat: now() - 600 })}`],
      ['JWT with another secret', `Bearer ${await token({}, 'another-secret-0123456789abcdef')}`],
      ['JWT without the scope', `Bearer ${await token({ scope: 'read' })}`],
    ]
    const seen: string[] = []
    for (const [what, authorization] of cases) {
      const [status, code] = await restOutcome(await rest(authorization))
      const [gstatus, gcode] = await outcome(call('ModelInfer', inferReq, authorization))
      expect([what, gstatus, gcode], what).toEqual([what, GRPC_OF[status], code])
      seen.push(`${what}:${code}`)
    }
    // Both outcomes are exercised: the parity is not two servers refusing everything.
    expect(seen).toEqual([
      'API key:OK',
      'valid JWT:OK',
      'no credentials:UNAUTHORIZED',
      'unknown key:UNAUTHORIZED',
      'not Bearer:UNAUTHORIZED',
      'expired JWT:UNAUTHORIZED',
      'JWT with another secret:UNAUTHORIZED',
      'JWT without the scope:FORBIDDEN',
    ])
    const r = await call<{ raw_output_contents: [Buffer, ...Buffer[]] }>('ModelInfer', inferReq, `Bearer ${await token()}`)
    expect(new TextDecoder().decode(new Uint8Array(r['raw_output_contents'][0]).subarray(4))).toBe('HI')
  })

  it('rate-limits gRPC calls per client: RESOURCE_EXHAUSTED with retry-after where REST says 429', async () => {
    const rateLimit = { requestsPerSecond: 0.01, burst: 2 }
    const { call, rest } = await pair({ apiKeys: ['k1', 'k2'], rateLimit })
    const rests = [await restOutcome(await rest('Bearer k1')), await restOutcome(await rest('Bearer k1')), await restOutcome(await rest('Bearer k1'))]
    expect(rests.map((x) => x[0])).toEqual([200, 200, 429])
    const grpcs = [await outcome(call('ModelInfer', inferReq, 'Bearer k1')), await outcome(call('ModelInfer', inferReq, 'Bearer k1'))]
    let limited: grpc.ServiceError | undefined
    try {
      await call('ModelInfer', inferReq, 'Bearer k1')
    } catch (e) {
      limited = e as grpc.ServiceError
    }
    expect(grpcs.map((x) => x[0])).toEqual([grpc.status.OK, grpc.status.OK])
    expect(limited?.code).toBe(grpc.status.RESOURCE_EXHAUSTED)
    expect(limited?.metadata.get('cohort-code')).toEqual(['RATE_LIMITED'])
    expect(Number(limited?.metadata.get('retry-after')[0])).toBeGreaterThanOrEqual(1)
    // Another client has its own bucket; health RPCs are never limited.
    expect((await outcome(call('ModelInfer', inferReq, 'Bearer k2')))[0]).toBe(grpc.status.OK)
    expect(await call('ServerLive', {}, 'Bearer k1')).toEqual({ live: true })
  })

  it('bills a gRPC call to its tenant (API key index, JWT subject) exactly as REST does', async () => {
    const { call, rest } = await pair({ apiKeys: ['k1', 'k2'], jwt: { secret: SECRET, scope: 'infer' } })
    /** Items the worker answered for `tenant` (its per-tenant fair-share metric, labelled from the envelope's `tenant`). */
    const items = (tenant: string) =>
      worker.registry
        .render()
        .split('\n')
        .filter((l) => l.startsWith('cohort_tenant_items_total{') && l.includes(`tenant="${tenant}"`))
        .reduce((n, l) => n + Number(l.split(' ').pop()), 0)
    const before = { key: items('key:1'), jwt: items('jwt:bob'), anon: items('_anonymous') }
    await call('ModelInfer', inferReq, 'Bearer k2')
    await call('ModelInfer', inferReq, `Bearer ${await token({ sub: 'bob' })}`)
    expect({ key: items('key:1') - before.key, jwt: items('jwt:bob') - before.jwt }).toEqual({ key: 1, jwt: 1 })
    expect((await rest('Bearer k2')).status).toBe(200)
    expect((await rest(`Bearer ${await token({ sub: 'bob' })}`)).status).toBe(200)
    expect({ key: items('key:1') - before.key, jwt: items('jwt:bob') - before.jwt, anon: items('_anonymous') - before.anon }).toEqual({ key: 2, jwt: 2, anon: 0 })
  })

  it('parents the gateway span on the traceparent metadata of a gRPC call', async () => {
    const exporter = new InMemorySpanExporter()
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    const { call } = await pair({}, { tracer: provider.getTracer('test') })
    const md = new grpc.Metadata()
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    md.set('traceparent', `00-${traceId}-00f067aa0ba902b7-01`)
    await call('ModelInfer', inferReq, undefined, md)
    const spans = exporter.getFinishedSpans().filter((s) => s.name === 'cohort.gateway.infer')
    expect(spans).toHaveLength(1)
    expect(spans[0]!.spanContext().traceId).toBe(traceId)
    expect(spans[0]!.attributes['http.route']).toBe('/inference.GRPCInferenceService/ModelInfer')
    await provider.shutdown()
  })
})
