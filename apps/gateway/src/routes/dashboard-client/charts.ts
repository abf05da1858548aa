/** Hand-written SVG charts: time series, bars, legends. */
import { el, svg, swatch } from './dom.ts'
import { fmtAxis, ok, scale } from './format.ts'

/** The span of the time axis grows with the history the gateway holds, between these. */
const MIN_SPAN_MS = 30_000
const MAX_SPAN_MS = 300_000

interface Margins {
  l: number
  r: number
  t: number
  b: number
}

export interface Point {
  t: number
  v: number | null
}

export interface Series {
  name: string
  color: string
  points: Point[]
  area?: boolean
  width?: number
}

export interface LineChartOptions {
  /** Time of the right edge (the newest sample), ms since the epoch. */
  t1: number
  yFmt: (v: number) => string
  testid: string
  integer?: boolean
  series: Series[]
}

function yGrid(root: SVGElement, m: Margins, W: number, ih: number, sc: { max: number; step: number }, fmt: (v: number) => string): void {
  for (let v = 0; v <= sc.max + sc.step / 2; v += sc.step) {
    const yy = m.t + ih - (v / sc.max) * ih
    root.append(svg('line', { x1: m.l, x2: W - m.r, y1: yy, y2: yy, class: v === 0 ? 'axis' : 'grid' }))
    root.append(svg('text', { x: m.l - 6, y: yy + 3.5, 'text-anchor': 'end', text: fmt(v) }))
  }
}

/** Time series lines (optionally with an area) over the last 30 s to 5 min. */
export function lineChart(host: HTMLElement, opt: LineChartOptions): void {
  const W = Math.max(160, host.clientWidth)
  const H = Math.max(80, host.clientHeight)
  const m: Margins = { l: 46, r: 8, t: 8, b: 18 }
  const iw = W - m.l - m.r
  const ih = H - m.t - m.b
  const t1 = opt.t1
  let oldest = t1
  for (const s of opt.series) {
    const first = s.points[0]
    if (first && first.t < oldest) oldest = first.t
  }
  const span = Math.min(MAX_SPAN_MS, Math.max(MIN_SPAN_MS, Math.ceil((t1 - oldest) / 10_000) * 10_000))
  const t0 = t1 - span
  let max = 0
  for (const s of opt.series) {
    for (const p of s.points) {
      if (ok(p.v) && p.t >= t0 && p.v > max) max = p.v
    }
  }
  const sc = scale(max * 1.05, opt.integer)
  const x = (t: number) => m.l + ((t - t0) / span) * iw
  const y = (v: number) => m.t + ih - (v / sc.max) * ih
  const root = svg('svg', {
    class: 'chart',
    width: W,
    height: H,
    viewBox: `0 0 ${W} ${H}`,
    'data-testid': opt.testid,
    'data-max': max,
    'data-span': span,
    'data-points': opt.series.reduce((a, s) => Math.max(a, s.points.length), 0),
  })
  yGrid(root, m, W, ih, sc, opt.yFmt)
  const tick = span > 120_000 ? 60 : span > 60_000 ? 30 : 10
  for (let s = 0; s <= span / 1000; s += tick) {
    const anchor = s === 0 ? 'end' : s >= span / 1000 ? 'start' : 'middle'
    const label = s === 0 ? 'now' : s >= 60 && s % 60 === 0 ? `−${s / 60} min` : `−${s} s`
    root.append(svg('text', { x: x(t1 - s * 1000), y: H - 4, 'text-anchor': anchor, text: label }))
  }
  for (const ser of opt.series) {
    let d = ''
    let pen = false
    let first: Point | undefined
    let last: (Point & { v: number }) | undefined
    let gaps = false
    for (const p of ser.points) {
      if (p.t < t0 || !ok(p.v)) {
        if (pen) gaps = true
        pen = false
        continue
      }
      d += `${pen ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`
      pen = true
      first ??= p
      last = { t: p.t, v: p.v }
    }
    if (ser.area && first && last && first.t !== last.t && !gaps) {
      const area = `${d}L${x(last.t).toFixed(1)},${y(0)}L${x(first.t).toFixed(1)},${y(0)}Z`
      root.append(svg('path', { d: area, fill: ser.color, 'fill-opacity': 0.13, stroke: 'none' }))
    }
    if (d) {
      root.append(svg('path', { d, fill: 'none', stroke: ser.color, 'stroke-width': ser.width ?? 2, 'stroke-linejoin': 'round', 'stroke-linecap': 'round' }))
    }
    if (last) root.append(svg('circle', { cx: x(last.t), cy: y(last.v), r: 3, fill: ser.color }))
  }
  if (!opt.series.some((s) => s.points.length > 0)) {
    root.append(svg('text', { x: m.l + iw / 2, y: m.t + ih / 2, 'text-anchor': 'middle', text: 'collecting samples…' }))
  }
  host.replaceChildren(root)
}

export interface Bar {
  label: string
  value: number
}

/** Vertical bars with their counts on top. */
export function barChart(host: HTMLElement, bars: readonly Bar[], opt: { testid: string; color: string }): void {
  const W = Math.max(160, host.clientWidth)
  const H = Math.max(80, host.clientHeight)
  const m: Margins = { l: 40, r: 6, t: 14, b: 30 }
  const iw = W - m.l - m.r
  const ih = H - m.t - m.b
  const max = bars.reduce((a, b) => Math.max(a, b.value), 0)
  const sc = scale(max, true)
  const root = svg('svg', {
    class: 'chart',
    width: W,
    height: H,
    viewBox: `0 0 ${W} ${H}`,
    'data-testid': opt.testid,
    'data-counts': bars.map((b) => b.value).join(','),
    'data-total': bars.reduce((a, b) => a + b.value, 0),
  })
  yGrid(root, m, W, ih, sc, fmtAxis)
  const bw = iw / Math.max(1, bars.length)
  bars.forEach((b, k) => {
    const h = (b.value / sc.max) * ih
    const cx = m.l + k * bw + bw / 2
    root.append(
      svg('rect', {
        x: cx - bw * 0.36,
        y: m.t + ih - h,
        width: bw * 0.72,
        height: Math.max(h, b.value > 0 ? 1 : 0),
        rx: 2,
        fill: opt.color,
        'fill-opacity': 0.85,
        'data-testid': 'batch-bar',
        'data-count': b.value,
      }),
    )
    if (b.value > 0) root.append(svg('text', { x: cx, y: m.t + ih - h - 3, 'text-anchor': 'middle', class: 'val', text: fmtAxis(b.value) }))
    root.append(svg('text', { x: cx, y: H - 16, 'text-anchor': 'middle', text: b.label }))
  })
  root.append(svg('text', { x: m.l + iw / 2, y: H - 2, 'text-anchor': 'middle', text: 'items per batch' }))
  host.replaceChildren(root)
}

export interface LegendItem {
  name: string
  color: string
  value: string
}

export function legend(host: HTMLElement, items: readonly LegendItem[]): void {
  host.replaceChildren(...items.map((it) => el('span', null, swatch(it.color), `${it.name} `, el('b', { text: it.value }))))
}
