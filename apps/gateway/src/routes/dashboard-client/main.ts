/**
 * The live dashboard page: polls `dashboard/data` every second and draws it. Entry of the bundle
 * (../dashboard-build.ts writes ../dashboard-bundle.ts).
 */
import type { DashboardData, ModelView } from '../dashboard-view.ts'
import { authHeaders, hasKey, setupAuth, showAuth } from './auth.ts'
import { lineChart, legend, type Point } from './charts.ts'
import { byId } from './dom.ts'
import { fmtAxis, fmtInt, fmtMs, fmtMsAxis, fmtRate } from './format.ts'
import { colorOf, renderBatch, renderDispatch, renderKpis, renderModels, renderWorkers } from './sections.ts'

const POLL_MS = 1000

let data: DashboardData | undefined
let selected: string | undefined = decodeURIComponent(location.hash.slice(1)) || undefined
let lastOk = 0
let timer: ReturnType<typeof setTimeout> | undefined

function pick(d: DashboardData): string | undefined {
  if (selected && d.models.some((m) => m.name === selected)) return selected
  let best: ModelView | undefined
  for (const m of d.models) {
    if (!best || m.totals.requests > best.totals.requests) best = m
  }
  return best?.name
}

function select(name: string): void {
  selected = name
  history.replaceState(null, '', `#${encodeURIComponent(name)}`)
  render()
}

type SeriesKey = Exclude<keyof ModelView['series'], 't'>

function points(model: ModelView, key: SeriesKey): Point[] {
  const values = model.series[key]
  return model.series.t.map((t, i) => ({ t, v: values[i] ?? null }))
}

function render(): void {
  const d = data
  if (!d) return
  const sel = pick(d)
  const m = d.models.find((x) => x.name === sel)
  byId('mode').textContent = d.workerMetrics ? 'embedded · gateway + worker metrics' : 'distributed · gateway metrics + worker stats over NATS'
  renderKpis(d, m)
  renderModels(d, sel, select)
  const color = (name: string) => colorOf(d, name)
  lineChart(byId('chart-rps'), {
    t1: d.now,
    yFmt: fmtAxis,
    testid: 'chart-rps',
    series: d.models.map((x) => ({ name: x.name, color: color(x.name), points: points(x, 'rps'), area: x.name === sel, width: x.name === sel ? 2.2 : 1.6 })),
  })
  legend(
    byId('legend-rps'),
    d.models.map((x) => ({ name: x.name, color: color(x.name), value: fmtRate(x.current.rps) })),
  )
  byId('lat-model').textContent = m ? `${m.name} · end to end` : ''
  lineChart(byId('chart-lat'), {
    t1: d.now,
    yFmt: fmtMsAxis,
    testid: 'chart-lat',
    series: m
      ? [
          { name: 'p99', color: '#f72585', points: points(m, 'p99Ms'), area: true },
          { name: 'p50', color: '#4cc9f0', points: points(m, 'p50Ms'), area: true },
        ]
      : [],
  })
  legend(
    byId('legend-lat'),
    m
      ? [
          { name: 'p50', color: '#4cc9f0', value: fmtMs(m.current.p50Ms) },
          { name: 'p99', color: '#f72585', value: fmtMs(m.current.p99Ms) },
        ]
      : [],
  )
  lineChart(byId('chart-queue'), {
    t1: d.now,
    yFmt: fmtAxis,
    testid: 'chart-queue',
    integer: true,
    series: d.models.map((x) => ({ name: x.name, color: color(x.name), points: points(x, 'queueDepth'), width: x.name === sel ? 2 : 1.5 })),
  })
  legend(
    byId('legend-queue'),
    d.models.map((x) => ({ name: x.name, color: color(x.name), value: fmtInt(x.current.queueDepth) })),
  )
  renderBatch(d, m)
  renderDispatch(d, m)
  renderWorkers(d)
}

function status(live: boolean, text: string): void {
  byId('status').className = `status ${live ? 'live' : 'down'}`
  byId('status-text').textContent = text
}

/** An answer that is not the data. */
class HttpError extends Error {
  constructor(readonly status: number) {
    super(`HTTP ${status}`)
  }
}

async function poll(): Promise<void> {
  clearTimeout(timer)
  const started = Date.now()
  try {
    const r = await fetch('dashboard/data', { cache: 'no-store', headers: { accept: 'application/json', ...authHeaders() } })
    if (!r.ok) throw new HttpError(r.status)
    data = (await r.json()) as DashboardData
    lastOk = Date.now()
    showAuth(false)
    render()
    status(true, `live · ${new Date(lastOk).toLocaleTimeString('en-GB')}`)
  } catch (e) {
    const code = e instanceof HttpError ? e.status : 0
    if (code === 401 || code === 403) {
      showAuth(true, hasKey() ? `the gateway refused this key (HTTP ${code})` : 'authentication is on: enter an API key or token')
      status(false, 'key required')
    } else {
      const last = lastOk ? ` · last data ${new Date(lastOk).toLocaleTimeString('en-GB')}` : ''
      status(false, `disconnected (${e instanceof Error ? e.message : 'error'})${last}`)
    }
  }
  timer = setTimeout(() => void poll(), Math.max(100, POLL_MS - (Date.now() - started)))
}

let resizeTimer: ReturnType<typeof setTimeout> | undefined
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer)
  resizeTimer = setTimeout(render, 100)
})
window.addEventListener('hashchange', () => {
  selected = decodeURIComponent(location.hash.slice(1)) || undefined
  render()
})
setupAuth(() => void poll())
void poll()
