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
import { ifStarted } from '@cohort/test-support'

const shout = definePredictor({
  name: 'shout',
  input: Type.Object({ text: Type.String() }),
  predict: (xs) => xs.map((x) => x.text.toUpperCase()),
})

/** A gRPC message as the proto-loader client takes and gives it (keepCase, longs as strings). */
type Msg = Record<string, unknown>
/** The dynamic client proto-loader makes: grpc.Client plus one method per RPC. */
type OipClient = InstanceType<grpc.ServiceClientConstructor>
type OutputTensor = { name: string; datatype: string; shape: string[] }
/** The parts of a ModelInferResponse these tests read. */
interface InferResponse {
  outputs: [OutputTensor, ...OutputTensor[]]
  raw_output_contents: [Buffer, ...Buffer[]]
}

/** The dynamic `inference.GRPCInferenceService` client constructor of the loaded proto. */
function inferenceService(def: protoLoader.PackageDefinition): grpc.ServiceClientConstructor {
  return (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference.GRPCInferenceService
}

describe('gRPC server', () => {
  const transport = new InProcessTransport()
  const worker = new CohortWorker({ transport, runners: [new PredictorRunner(shout)] })
  let server: GrpcServerHandle
  let client: OipClient

  const call = <T = Msg>(method: string, req: Msg, key?: string): Promise<T> =>
    new Promise((resolve, reject) => {
      const md = new grpc.Metadata()
      if (key) md.set('authorization', `Bearer ${key}`)
      client[method]!(req, md, (e: grpc.ServiceError | null, r: T) => (e ? reject(e) : resolve(r)))
    })

  beforeAll(async () => {
    await worker.start()
    server = await startGrpcServer({ transport, port: 0, apiKeys: ['k1'] })
    const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
    const GRPCInferenceService = inferenceService(def)
    client = new GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
  })

  afterAll(async () => {
    ifStarted(client)?.close()
    await ifStarted(server)?.close()
    await worker.drain()
    await transport.close()
  })

  it('needs an API key in the authorization metadata when keys are set', async () => {
    await expect(call('ServerLive', {})).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED })
    await expect(call('ServerLive', {}, 'wrong')).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED })
    expect(await call('ServerLive', {}, 'k1')).toEqual({ live: true })
  })

  it('runs a predictor through typed bytes_contents and answers raw BYTES', async () => {
    const r = await call<InferResponse>(
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
