import { startGrpcServer, type GrpcServerHandle } from '@cohort/gateway/grpc'
import type { GatewayCore } from '@cohort/gateway'
import { knobHelp, knobOptions, knobValues, type KnobTable } from './knobs.ts'

/** `--grpc-port`: the gRPC form of the Open Inference Protocol, off by default. */
export const GRPC_KNOBS = Object.freeze({
  'grpc-port': {
    kind: 'int',
    arg: 'N',
    min: 0,
    help: ["also serve inference.GRPCInferenceService (Triton's gRPC protocol) on this", 'port, on the same host (off by default; 0 picks a free port). See docs/protocol.md'],
  },
} as const satisfies KnobTable)

export const GRPC_OPTIONS = knobOptions(GRPC_KNOBS)
export const GRPC_HELP = knobHelp(GRPC_KNOBS)

/**
 * Start the gRPC server when `--grpc-port` is given, serving the HTTP app's own gateway core (one
 * gateway id, one door: the same deadline, body limit, credentials, rate limit, worker-loss retry,
 * admission, in-flight bound, tracer, logger and metrics as HTTP); prints `cohort: grpc on
 * HOST:PORT`. Undefined when the flag is absent.
 */
export async function startGrpcFromFlags(v: Record<string, unknown>, host: string, core: GatewayCore): Promise<GrpcServerHandle | undefined> {
  const port = knobValues(GRPC_KNOBS, v)['grpc-port']
  if (port === undefined) {
    return undefined
  }
  const server = await startGrpcServer({ core, host, port })
  console.log(`cohort: grpc on ${host}:${server.port}`)
  return server
}
