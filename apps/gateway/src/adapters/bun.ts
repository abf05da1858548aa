/**
 * Entry of the gateway on Bun (`bun apps/gateway/src/adapters/bun.ts`; Bun runs the TypeScript as is).
 * Environment: `NATS_WS_URL` (default `ws://127.0.0.1:4223`), `PORT` (default 8080; 0 picks one),
 * `HOST` (default 127.0.0.1), `COHORT_TIMEOUT_MS`. One NATS connection (Bun has a global WebSocket).
 * @see docs/edge.md
 * @module
 */
import { wsconnect } from '@nats-io/nats-core'
import { createEdgeGateway } from '../edge/handler.ts'

/** The part of Bun's API used here (no Bun types in this repo). */
interface BunApi {
  env: Record<string, string | undefined>
  serve(o: { port: number; hostname: string; fetch: (req: Request) => Promise<Response> }): {
    port: number
    hostname: string
    stop(force?: boolean): void
  }
}

const bun = (globalThis as { Bun?: BunApi }).Bun
if (!bun) {
  throw new Error('apps/gateway/src/adapters/bun.ts runs on Bun: bun apps/gateway/src/adapters/bun.ts')
}
const env = bun.env
const natsUrl = env['NATS_WS_URL'] ?? 'ws://127.0.0.1:4223'
const gateway = createEdgeGateway({
  scope: 'shared',
  connect: () => wsconnect({ servers: natsUrl, name: 'cohort-edge-bun', reconnect: false }),
  gateway: env['COHORT_TIMEOUT_MS'] ? { requestTimeoutMs: Number(env['COHORT_TIMEOUT_MS']) } : {},
})
const server = bun.serve({
  port: Number(env['PORT'] ?? '8080'),
  hostname: env['HOST'] ?? '127.0.0.1',
  fetch: (req) => gateway.fetch(req),
})
console.log(`cohort: edge gateway (bun) on http://${server.hostname}:${server.port} -> NATS ${natsUrl}`)
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    server.stop()
    void gateway.close().finally(() => process.exit(0))
  })
}
