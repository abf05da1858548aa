/**
 * Entry of the gateway on Cloudflare workerd (`workerd serve config.capnp`): bundle it with
 * `apps/gateway/src/adapters/edge-bundle.ts`. Bindings: `NATS_WS_URL` (e.g. `ws://127.0.0.1:4223`), and
 * optionally `COHORT_TIMEOUT_MS`. One NATS connection per request (workerd ties I/O objects to the
 * request that made them).
 * @see docs/edge.md
 * @module
 */
import { wsconnect } from '@nats-io/nats-core'
import { createEdgeGateway, type EdgeGateway } from './handler.ts'
import { fetchWebSocketFactory } from './ws-factory.ts'

/** The bindings this worker reads. */
export interface WorkerdEnv {
  NATS_WS_URL: string
  COHORT_TIMEOUT_MS?: string
}

/** The part of workerd's ExecutionContext used here. */
interface Ctx {
  waitUntil(p: Promise<unknown>): void
}

let gateway: EdgeGateway | undefined

export default {
  fetch(req: Request, env: WorkerdEnv, ctx: Ctx): Promise<Response> {
    gateway ??= createEdgeGateway({
      scope: 'request',
      connect: () => wsconnect({ servers: env.NATS_WS_URL, wsFactory: fetchWebSocketFactory, reconnect: false, name: 'cohort-edge-workerd' }),
      gateway: env.COHORT_TIMEOUT_MS ? { requestTimeoutMs: Number(env.COHORT_TIMEOUT_MS) } : {},
    })
    return gateway.fetch(req, (p) => ctx.waitUntil(p))
  },
}
