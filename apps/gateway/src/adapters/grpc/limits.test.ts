// The gRPC port's size and connection bounds, on a local port (grpc-js client and server).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { InProcessTransport } from '@cohort/transport'
import { PROTO_DIR, grpcServerChannelOptions, startGrpcServer, type GrpcServerHandle } from './server.ts'

/** A gRPC message as the proto-loader client takes and gives it (keepCase, longs as strings). */
type Msg = Record<string, unknown>
/** The dynamic client proto-loader makes: grpc.Client plus one method per RPC. */
type OipClient = InstanceType<grpc.ServiceClientConstructor>

/** The dynamic `inference.GRPCInferenceService` client constructor of the loaded proto. */
function inferenceService(def: protoLoader.PackageDefinition): grpc.ServiceClientConstructor {
  return (grpc.loadPackageDefinition(def) as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } }).inference.GRPCInferenceService
}

describe('gRPC bounds', () => {
  const transport = new InProcessTransport()
  let server: GrpcServerHandle
  let client: OipClient
  const call = (method: string, req: Msg): Promise<Msg> =>
    new Promise((resolve, reject) => client[method]!(req, (e: grpc.ServiceError | null, r: Msg) => (e ? reject(e) : resolve(r))))

  beforeAll(async () => {
    server = await startGrpcServer({ transport, port: 0, maxMessageBytes: 4096, connectionLimits: { maxConnectionIdleMs: 300 } })
    const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true })
    const GRPCInferenceService = inferenceService(def)
    client = new GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure())
  })

  afterAll(async () => {
    client?.close()
    await server?.close()
    await transport.close()
  })

  it('refuses a request message past maxMessageBytes with RESOURCE_EXHAUSTED and keeps serving', async () => {
    const big = { model_name: 'm', inputs: [{ name: 'x', datatype: 'UINT8', shape: [8192], contents: {} }], raw_input_contents: [Buffer.alloc(8192)] }
    await expect(call('ModelInfer', big)).rejects.toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED })
    expect(await call('ServerLive', {})).toEqual({ live: true })
  })

  it('closes a connection left idle past maxConnectionIdleMs (the client reconnects on its next call)', async () => {
    expect(await call('ServerLive', {})).toEqual({ live: true })
    const ch = client.getChannel()
    expect(ch.getConnectivityState(false)).toBe(grpc.connectivityState.READY)
    await expect.poll(() => ch.getConnectivityState(false), { timeout: 10_000, interval: 50 }).not.toBe(grpc.connectivityState.READY)
    expect(await call('ServerLive', {})).toEqual({ live: true })
  })

  it('sets bounded defaults for slow and greedy clients', () => {
    expect(grpcServerChannelOptions(1024)).toMatchObject({
      'grpc.max_receive_message_length': 1024,
      'grpc.max_concurrent_streams': 100,
      'grpc-node.max_session_memory': 64,
      'grpc.max_connection_idle_ms': 300_000,
      'grpc.max_connection_age_ms': 1_800_000,
      'grpc.keepalive_timeout_ms': 20_000,
    })
  })
})
