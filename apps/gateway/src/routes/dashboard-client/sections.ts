/** The page's panels, each drawn from one {@link DashboardData}. */
import type { Bucket, DashboardData, ModelView, Tally } from '../dashboard-view.ts'
import { barChart, type Bar } from './charts.ts'
import { byId, el, empty, swatch, type Child } from './dom.ts'
import { fmtInt, fmtMs, fmtRate, ok } from './format.ts'

export const COLORS = ['#4cc9f0', '#f72585', '#90be6d', '#f9c74f', '#b388ff', '#ff8c42', '#43aa8b', '#f94144'] as const
const REASONS: Record<string, string> = { idle: '#4cc9f0', full: '#90be6d', deadline: '#f9c74f', timer: '#b388ff' }
const SHEDS: Record<string, string> = {
  overloaded: '#f94144',
  admission: '#e76f51',
  deadline: '#f9c74f',
  doomed: '#ff8c42',
  cancelled: '#8d99ae',
  closed: '#6c757d',
}
const OTHER = '#8d99ae'

/** A model's colour: by its place in the model list, so that every panel agrees. */
export function colorOf(data: DashboardData, name: string): string {
  const i = data.models.findIndex((m) => m.name === name)
  return COLORS[(i < 0 ? 0 : i) % COLORS.length] ?? OTHER
}

function split(s: string): [string, string] {
  const i = s.lastIndexOf(' ')
  return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)]
}

export function renderKpis(data: DashboardData, m: ModelView | undefined): void {
  const c = m?.current
  const kpi = (label: string, value: Child, unit: string, testid: string, extra: string, raw?: number | null) =>
    el(
      'div',
      { class: `kpi${extra ? ` ${extra}` : ''}` },
      el('div', { class: 'label', text: label }),
      el('div', { class: 'value', 'data-testid': testid, 'data-value': raw }, value, unit ? el('small', { text: unit }) : null),
    )
  const p50 = split(fmtMs(c?.p50Ms))
  const p99 = split(fmtMs(c?.p99Ms))
  byId('kpis').replaceChildren(
    kpi(`model · last ${data.currentS} s`, m ? [swatch(colorOf(data, m.name)), m.name] : '–', '', 'kpi-model', 'model'),
    kpi('throughput', fmtRate(c?.rps), 'req/s', 'kpi-rps', '', c?.rps),
    kpi('latency p50', p50[0], p50[1], 'kpi-p50', '', c?.p50Ms),
    kpi('latency p99', p99[0], p99[1], 'kpi-p99', '', c?.p99Ms),
    kpi('mean batch', ok(c?.meanBatch) ? c.meanBatch.toFixed(1) : '–', 'items', 'kpi-batch', '', c?.meanBatch),
    kpi('queued', fmtInt(c?.queueDepth), 'items', 'kpi-queue', '', c?.queueDepth),
    kpi('shed', data.workerMetrics ? fmtRate(c?.shedPerS) : '–', data.workerMetrics ? '/s' : '', 'kpi-shed', '', c?.shedPerS),
  )
}

export function renderModels(data: DashboardData, sel: string | undefined, select: (name: string) => void): void {
  const body = byId('models', HTMLTableElement).tBodies.item(0)
  if (!body) {
    throw new Error('dashboard: #models has no tbody')
  }
  body.replaceChildren(
    ...data.models.map((m) => {
      const c = m.current
      return el(
        'tr',
        { class: m.name === sel ? 'sel' : '', 'data-model': m.name, title: `show ${m.name}`, onclick: () => select(m.name) },
        el('td', null, swatch(colorOf(data, m.name)), m.name),
        el('td', { class: 'n', 'data-testid': 'model-rps', 'data-model': m.name, text: fmtRate(c.rps) }),
        el('td', { class: 'n', text: fmtMs(c.p50Ms) }),
        el('td', { class: 'n', text: fmtMs(c.p99Ms) }),
        el('td', { class: 'n', text: data.workerMetrics ? fmtRate(c.itemsPerS) : '–' }),
        el('td', { class: 'n', text: ok(c.meanBatch) ? c.meanBatch.toFixed(1) : '–' }),
        el('td', { class: 'n', text: fmtInt(c.queueDepth) }),
        el('td', { class: 'n', text: data.workerMetrics ? fmtRate(c.shedPerS) : '–' }),
        el('td', { class: 'n', text: fmtRate(c.errorsPerS) }),
        el('td', { class: 'n', 'data-testid': 'model-requests', 'data-model': m.name, 'data-value': m.totals.requests, text: fmtInt(m.totals.requests) }),
      )
    }),
  )
}

/** Bucket bounds as JSON sends them: `Infinity` arrives as null. */
function bound(b: Bucket): number {
  return ok(b.le) ? b.le : Infinity
}

function bucketLabel(buckets: readonly Bucket[], i: number): string {
  const b = buckets[i]
  if (b === undefined) {
    throw new RangeError(`no bucket ${i}`)
  }
  const hi = bound(b)
  const before = i > 0 ? buckets[i - 1] : undefined
  const prev = before ? bound(before) : 0
  if (!Number.isFinite(hi)) return `>${prev}`
  const lo = i === 0 ? 1 : Math.floor(prev) + 1
  return lo >= hi ? String(hi) : `${lo}–${hi}`
}

export function renderBatch(data: DashboardData, m: ModelView | undefined): void {
  const host = byId('chart-batch')
  byId('batch-caption').textContent = m ? `${m.name} · last ${data.windowS} s` : ''
  byId('batch-total').replaceChildren(
    el('span', null, 'batches ', el('b', { 'data-testid': 'batches-total', 'data-value': m?.totals.batches ?? 0, text: fmtInt(m?.totals.batches ?? 0) })),
    el('span', null, 'mean ', el('b', { text: m && ok(m.current.meanBatch) ? m.current.meanBatch.toFixed(1) : '–' })),
  )
  if (!data.workerMetrics) {
    empty(host, 'The batch-size histogram is a worker metric: in distributed mode scrape each worker’s --metrics-port /metrics (counts and means above come from $SRV.STATS).')
    return
  }
  const win = m?.batchSizes.window ?? []
  const total = m?.batchSizes.total ?? []
  let maxBatch = 0
  for (const w of data.workers) {
    for (const x of w.models) {
      if (m && x.name === m.name && x.maxBatchSize > maxBatch) maxBatch = x.maxBatchSize
    }
  }
  // Buckets up to the one holding the model's max batch size (or the largest batch seen).
  let n = Math.min(total.length, 4)
  let prev: Bucket | undefined
  total.forEach((b, i) => {
    if (b.count > 0 || (win[i]?.count ?? 0) > 0) n = Math.max(n, i + 1)
    if (Number.isFinite(bound(b)) && (prev === undefined || bound(prev) < maxBatch)) n = Math.max(n, i + 1)
    prev = b
  })
  const bars: Bar[] = win.slice(0, n).map((b, i) => ({ label: bucketLabel(win, i), value: b.count }))
  if (bars.length === 0) {
    empty(host, 'no batches yet')
    return
  }
  barChart(host, bars, { testid: 'batch-hist', color: m ? colorOf(data, m.name) : COLORS[0] })
}

function tally(data: DashboardData, title: string, win: Tally, total: Tally, colors: Record<string, string>, testid: string): HTMLElement {
  const keys = Object.keys(colors)
  for (const k of Object.keys(total)) {
    if (!keys.includes(k)) keys.push(k)
  }
  const sumW = keys.reduce((a, k) => a + (win[k] ?? 0), 0)
  const stack = el(
    'div',
    { class: 'stack', title: `${title} over the last ${data.windowS} s` },
    keys.map((k) => {
      const share = sumW > 0 ? ((win[k] ?? 0) / sumW) * 100 : 0
      return share > 0 ? el('div', { title: `${k} ${Math.round(share)}%`, style: { width: `${share}%`, background: colors[k] ?? OTHER } }) : null
    }),
  )
  const rows: Child[] = [el('span', { class: 'h', text: title }), el('span', { class: 'h n', text: `${data.windowS} s` }), el('span', { class: 'h n', text: 'total' })]
  for (const k of keys) {
    const w = win[k] ?? 0
    rows.push(
      el('span', { class: w > 0 ? '' : 'muted' }, swatch(colors[k] ?? OTHER), k),
      el('span', { class: `n${w > 0 ? '' : ' muted'}`, 'data-testid': `${testid}-${k}`, text: fmtInt(w) }),
      el('span', { class: 'n muted', text: fmtInt(total[k] ?? 0) }),
    )
  }
  return el('div', { class: 'tally' }, stack, el('div', { class: 'rows' }, rows))
}

export function renderDispatch(data: DashboardData, m: ModelView | undefined): void {
  const host = byId('dispatch')
  byId('dispatch-caption').textContent = m ? `${m.name} · last ${data.windowS} s` : ''
  if (!data.workerMetrics) {
    empty(host, 'Dispatch reasons and sheds are worker metrics: in distributed mode scrape each worker’s --metrics-port /metrics.')
    return
  }
  if (!m) {
    empty(host, 'no model')
    return
  }
  host.replaceChildren(
    el(
      'div',
      { class: 'tallies' },
      tally(data, 'dispatch', m.dispatch.window, m.dispatch.total, REASONS, 'dispatch'),
      tally(data, 'shed', m.shed.window, m.shed.total, SHEDS, 'shed'),
    ),
  )
}

export function renderWorkers(data: DashboardData): void {
  const host = byId('workers')
  const ws = data.workers
  const servers = ws.reduce((a, w) => a + w.models.length, 0)
  byId('workers-caption').textContent = `${ws.length}${ws.length === 1 ? ' worker · ' : ' workers · '}${servers}${servers === 1 ? ' model server' : ' model servers'}`
  if (ws.length === 0) {
    empty(host, 'no worker answered on the bus')
    return
  }
  const rows: Child[] = []
  for (const w of ws) {
    rows.push(
      el(
        'tr',
        { class: 'wk' },
        el(
          'td',
          { colspan: 5 },
          el('span', { class: 'wid', text: w.id }),
          w.state ? el('span', { class: w.state === 'serving' ? 'state ok' : 'state notready', text: w.state }) : null,
        ),
      ),
    )
    for (const x of w.models) {
      const cap = 2 * Math.max(1, x.maxBatchSize || 1) * Math.max(1, x.concurrency ?? 1)
      const busy = x.queued + (x.running ?? 0)
      const frac = Math.min(1, busy / cap)
      let tip = `${x.queued} queued, ${x.running ?? 0} running of ${cap} (2 × max batch × concurrency)`
      if (x.cost) tip += `; learned t(b) = ${x.cost.a.toFixed(2)} + ${x.cost.c.toFixed(3)}·b ms`
      const barColor = frac > 0.75 ? '#f85149' : frac > 0.4 ? '#f9c74f' : '#3fb950'
      rows.push(
        el(
          'tr',
          { 'data-testid': 'worker-row', title: tip },
          el('td', null, swatch(colorOf(data, x.name)), x.name, x.ready ? null : el('span', { class: 'notready', text: ' not ready' })),
          el('td', null, el('div', { class: 'bar' }, el('div', { style: { width: `${Math.max(frac * 100, busy > 0 ? 4 : 0).toFixed(1)}%`, background: barColor } }))),
          el('td', { class: 'n', text: fmtInt(x.queued) + (x.running !== undefined ? ` / ${fmtInt(x.running)}` : '') }),
          el('td', { class: 'n', text: fmtRate(x.rps) }),
          el('td', { class: 'muted', text: `${x.policy ?? '–'} · ${x.maxBatchSize}` }),
        ),
      )
      const notes: string[] = []
      if (x.cost) notes.push(`learned t(b) = ${x.cost.a.toFixed(1)} + ${x.cost.c.toFixed(2)}·b ms`)
      if (ok(x.avgProcessingMs) && x.requests) notes.push(`${fmtMs(x.avgProcessingMs)} in worker`)
      if (ok(x.meanBatchSize) && x.batches) notes.push(`${fmtInt(x.batches)} batches of ${x.meanBatchSize.toFixed(1)}`)
      if (notes.length) rows.push(el('tr', { class: 'note' }, el('td', { colspan: 5, text: notes.join(' · ') })))
    }
  }
  host.replaceChildren(
    el(
      'table',
      { class: 'workers' },
      el(
        'thead',
        null,
        el(
          'tr',
          null,
          el('th', { text: 'model' }),
          el('th', { text: 'load' }),
          el('th', { class: 'n', text: 'queued / run' }),
          el('th', { class: 'n', text: 'req/s' }),
          el('th', { text: 'policy' }),
        ),
      ),
      el('tbody', null, rows),
    ),
  )
}
