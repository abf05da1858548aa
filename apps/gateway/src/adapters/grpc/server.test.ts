// The gRPC adapter on a local port over an InProcessTransport with a real CohortWorker
// (TypeScript predictor): API-key metadata, BYTES through typed contents, idempotent close.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { decodeBytesElements } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { Type, definePredictor } from '@cohort/predictor'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { PROTO_DIR, startGrpcServer, type GrpcServerHandle } from './server.ts'

const shout = definePredictor({
  name: 'shout',
  input: Type.Object({ text: Type.String() }),
  predict: (xs) => xs.map((x) => x.text.toUpperCase()),
})

type Msg = Record<string, any>

describe('gRPC server', () => {
  const transport = new InProcessTransport()
  const worker = new CohortWorker({ transport, runners: [new PredictorRunner(shout)] })
  let server: GrpcServerHandle
  let client: grpc.Client & Record<string, any>

  const call = (method: string, req: Msg, key?: string): Promise<Msg> =>
    new Promise((resolve, reject) => {
      const md = new grpc.Metadata()
      if (key) md.set('authorization', `Bearer ${key}`)
      client[method](req, md, (e: grpc.ServiceError | null, r: Msg) => (e ? reject(e) : resolve(r)))
    })

  beforeAll(async () => {
    await worker.start()
    server = await startGrpcServer({ transport, port: 0, apiKeys: ['k1'] })
    const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
    const pkg = grpc.loadPackageDefinition(def) as any
    client = new pkg.inference.GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
  })

  afterAll(async () => {
    client?.close()
    await server?.close()
    await worker.drain()
    await transport.close()
  })

  it('needs an API key in the authorization metadata when keys are set', async () => {
    await expect(call('ServerLive', {})).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED })
    await expect(call('ServerLive', {}, 'wrong')).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED })
    expect(await call('ServerLive', {}, 'k1')).toEqual({ live: true })
  })

  it('runs a predictor through typed bytes_contents and answers raw BYTES', async () => {
    const r = await call(
      'ModelInfer',
      { model_name: 'shout', inputs: [{ name: 'text', datatype: 'BYTES', shape: [2], contents: { bytes_contents: [Buffer.from('ab'), Buffer.from('héllo')] } }] },
      'k1',
    )
    expect(r['outputs'][0]['datatype']).toBe('BYTES')
    const out = decodeBytesElements(new Uint8Array(r['raw_output_contents'][0]), 2).map((b) => new TextDecoder().decode(b))
    expect(out).toEqual(['AB', 'HÉLLO'])
  })

  it('close() is idempotent', async () => {
    const s = await startGrpcServer({ transport, port: 0 })
    const a = s.close()
    expect(s.close()).toBe(a)
    await a
  })
})
