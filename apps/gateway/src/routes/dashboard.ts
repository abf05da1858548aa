import type { Context, Hono } from 'hono'
import { decodeValue } from '@cohort/protocol'
import type { Registry } from '@cohort/metrics'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'
import { DASHBOARD_CSS, DASHBOARD_HTML, DASHBOARD_JS } from './dashboard-bundle.ts'
import { DashboardHistory, mergeWorkers, snapshotFromFamilies, workerFromDiscovery, type DashboardHistoryOptions, type WorkerInfo } from './dashboard-data.ts'

/** The page loads only its own script, style and data: no inline code, no third party. */
const PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/** Longest wait for the workers' discovery answers per sample (they arrive within a few ms). */
const WORKERS_TIMEOUT_MS = 200

/** Options of {@link registerDashboard} beyond the gateway's (tests). */
export interface DashboardOptions extends DashboardHistoryOptions {
  /** Clock, ms since the epoch. @default Date.now */
  now?: () => number
}

/**
 * Mount the live dashboard: `GET /dashboard` (the page, its `dashboard/app.js` and
 * `dashboard/app.css`) and `GET /dashboard/data` (JSON, polled every second by the page).
 *
 * The data comes from this gateway's registry (`Registry.collect()`: request counts and latency;
 * in embedded mode also the worker's batching metrics) and from the workers over the bus
 * (`$SRV.INFO`/`$SRV.STATS` summaries and discovery: queue, running items, batch counters, learned
 * cost). Samples go into a ring buffer: every `dashboard.sampleMs` in the background when set (a
 * page opened now shows the last minutes), and when a page polls. Rates and latency percentiles
 * are computed between samples.
 *
 * The page and its assets carry no data and are open; `dashboard/data` is behind authentication
 * like every route (the page asks for a key, keeps it in sessionStorage and sends it as a bearer).
 */
export function registerDashboard(app: Hono, o: ResolvedGatewayOptions, up: Upstream, registry: Registry, d: DashboardOptions = {}): void {
  const now = d.now ?? Date.now
  const settings = o.dashboard
  const history = new DashboardHistory({ ...(settings.keep !== undefined ? { keep: settings.keep } : {}), ...d })
  const timeoutMs = Math.min(o.metaTimeoutMs, WORKERS_TIMEOUT_MS)
  let workers: WorkerInfo[] = []
  let workersSource = 'none'
  let sampling: Promise<void> | undefined

  const discovered = async (): Promise<WorkerInfo[]> => {
    const replies = await up.transport.requestAll(up.subjects.discover(), new Uint8Array(0), { timeoutMs }).catch(() => [])
    const out: WorkerInfo[] = []
    replies.forEach((r, i) => {
      try {
        const w = workerFromDiscovery(decodeValue(r), `worker-${i + 1}`)
        if (w) {
          out.push(w)
        }
      } catch {
        // One unreadable answer must not hide the others.
      }
    })
    return out
  }

  const sample = async (): Promise<void> => {
    const [services, disc] = await Promise.all([up.workers().catch(() => []), discovered()])
    workers = mergeWorkers(services, disc)
    workersSource = services.length > 0 ? '$SRV.INFO/STATS + discovery' : 'discovery'
    history.add(snapshotFromFamilies(registry.collect(), now(), workers))
  }
  // Concurrent asks (several open pages, the background sampler) share one sample.
  const sampleOnce = (): Promise<void> =>
    (sampling ??= sample().finally(() => {
      sampling = undefined
    }))

  const sampleMs = settings.sampleMs ?? 0
  if (sampleMs > 0 && !settings.signal?.aborted) {
    const timer = setInterval(() => {
      if (history.due(now())) {
        void sampleOnce().catch(() => undefined)
      }
    }, sampleMs)
    ;(timer as { unref?: () => void }).unref?.()
    settings.signal?.addEventListener('abort', () => clearInterval(timer), { once: true })
  }

  app.get('/dashboard', (c) => page(c, DASHBOARD_HTML, 'text/html; charset=utf-8', { 'content-security-policy': PAGE_CSP }))
  app.get('/dashboard/', (c) => c.redirect('../dashboard', 302))
  app.get('/dashboard/app.js', (c) => page(c, DASHBOARD_JS, 'text/javascript; charset=utf-8'))
  app.get('/dashboard/app.css', (c) => page(c, DASHBOARD_CSS, 'text/css; charset=utf-8'))
  app.get('/dashboard/data', async (c) => {
    if (history.due(now())) {
      await sampleOnce()
    }
    c.header('cache-control', 'no-store')
    return c.json(history.view(workers, workersSource))
  })
}

function page(c: Context, body: string, type: string, extra: Record<string, string> = {}): Response {
  return c.body(body, 200, {
    'content-type': type,
    'cache-control': 'no-cache',
    'x-content-type-options': 'nosniff',
    ...extra,
  })
}
