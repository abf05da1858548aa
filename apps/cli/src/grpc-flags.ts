import { startGrpcServer, type GrpcServerHandle } from '@cohort/gateway/grpc'
import type { GatewayOptions } from '@cohort/gateway'
import type { Transport } from '@cohort/transport'
import type { Registry } from '@cohort/metrics'
import { intFlag } from './args.ts'

/** `--grpc-port`: the gRPC form of the Open Inference Protocol, off by default. */
export const GRPC_OPTIONS = {
  'grpc-port': { type: 'string' },
} as const

export const GRPC_HELP = `  --grpc-port N          also serve inference.GRPCInferenceService (Triton's gRPC protocol) on this
                         port, on the same host (off by default; 0 picks a free port). See docs/protocol.md`

/**
 * Start the gRPC server when `--grpc-port` is given (same transport, deadline, body limit,
 * credentials (API keys and JWT), rate limit, worker-loss retry, admission (both door checks), tracer, logger and
 * metrics registry as the HTTP gateway); prints `cohort: grpc on HOST:PORT`. Undefined when the flag is absent.
 */
export async function startGrpcFromFlags(
  v: Record<string, unknown>,
  host: string,
  transport: Transport,
  gw: Partial<GatewayOptions>,
  registry: Registry,
): Promise<GrpcServerHandle | undefined> {
  const port = intFlag('grpc-port', v['grpc-port'], 0)
  if (port === undefined) {
    return undefined
  }
  const server = await startGrpcServer({
    transport,
    host,
    port,
    registry,
    ...(gw.apiKeys ? { apiKeys: gw.apiKeys } : {}),
    ...(gw.jwt ? { jwt: gw.jwt } : {}),
    ...(gw.rateLimit ? { rateLimit: gw.rateLimit } : {}),
    ...(gw.workerLoss !== undefined ? { workerLoss: gw.workerLoss } : {}),
    ...(gw.workerWait !== undefined ? { workerWait: gw.workerWait } : {}),
    ...(gw.adapter?.queueDelayMs ? { queueDelayMs: gw.adapter.queueDelayMs.bind(gw.adapter) } : {}),
    ...(gw.tracer ? { tracer: gw.tracer } : {}),
    ...(gw.logger ? { logger: gw.logger } : {}),
    ...(gw.requestTimeoutMs ? { requestTimeoutMs: gw.requestTimeoutMs } : {}),
    ...(gw.maxBodyBytes ? { maxMessageBytes: gw.maxBodyBytes } : {}),
    ...(gw.subjectPrefix ? { subjectPrefix: gw.subjectPrefix } : {}),
  })
  console.log(`cohort: grpc on ${host}:${server.port}`)
  return server
}
