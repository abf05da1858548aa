import { startGrpcServer, type GrpcServerHandle } from '@cohort/gateway/grpc'
import type { GatewayCore } from '@cohort/gateway'
import { intFlag } from './args.ts'

/** `--grpc-port`: the gRPC form of the Open Inference Protocol, off by default. */
export const GRPC_OPTIONS = {
  'grpc-port': { type: 'string' },
} as const

export const GRPC_HELP = `  --grpc-port N          also serve inference.GRPCInferenceService (Triton's gRPC protocol) on this
                         port, on the same host (off by default; 0 picks a free port). See docs/protocol.md`

/**
 * Start the gRPC server when `--grpc-port` is given, serving the HTTP app's own gateway core (one
 * gateway id, one door: the same deadline, body limit, credentials, rate limit, worker-loss retry,
 * admission, in-flight bound, tracer, logger and metrics as HTTP); prints `cohort: grpc on
 * HOST:PORT`. Undefined when the flag is absent.
 */
export async function startGrpcFromFlags(v: Record<string, unknown>, host: string, core: GatewayCore): Promise<GrpcServerHandle | undefined> {
  const port = intFlag('grpc-port', v['grpc-port'], 0)
  if (port === undefined) {
    return undefined
  }
  const server = await startGrpcServer({ core, host, port })
  console.log(`cohort: grpc on ${host}:${server.port}`)
  return server
}
