import type { ModelResult } from './policy-report.ts'

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf']
const W = 760
const H = 460
const M = { l: 70, r: 170, t: 40, b: 55 }

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/** A round step for about `n` linear ticks up to `max`. */
function niceStep(max: number, n = 6): number {
  const raw = max / n
  const p = 10 ** Math.floor(Math.log10(raw))
  const m = raw / p
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p
}

/** 1-2-5 ticks of a log axis between lo and hi. */
function logTicks(lo: number, hi: number): number[] {
  const out: number[] = []
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e
      if (v >= lo && v <= hi) {
        out.push(v)
      }
    }
  }
  return out
}

/**
 * Hand-written SVG (no dependencies) of p99 latency of the 200 answers (log scale) against
 * throughput (200 answers per second), one line per policy config: the rate sweep and the SLO
 * search steps of one model, with the SLO as a dashed line.
 */
export function latencyThroughputSvg(m: ModelResult): string {
  const series = m.configs.map((c) => ({
    name: c.config.name,
    pts: [...c.sweep, ...c.search]
      .filter((s) => s.ok > 0 && Number.isFinite(s.p99))
      .sort((a, b) => a.rate - b.rate)
      .map((s) => ({ x: s.throughput, y: s.p99 })),
  }))
  const all = series.flatMap((s) => s.pts)
  const maxX = Math.max(1, ...all.map((p) => p.x)) * 1.05
  const ys = [...all.map((p) => p.y), ...(Number.isFinite(m.sloMs) ? [m.sloMs] : [])]
  const yLo = Math.max(0.01, Math.min(...ys, 1) / 1.5)
  const yHi = Math.max(...ys, 2) * 1.5
  const pw = W - M.l - M.r
  const ph = H - M.t - M.b
  const sx = (x: number) => M.l + (x / maxX) * pw
  const sy = (y: number) => M.t + ph - ((Math.log10(y) - Math.log10(yLo)) / (Math.log10(yHi) - Math.log10(yLo))) * ph
  const o: string[] = []
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`)
  o.push(`<rect width="${W}" height="${H}" fill="#fff"/>`)
  const title = `${m.name}: p99 latency vs throughput per policy (t(1) ${m.t1Ms.toFixed(2)} ms, SLO ${m.sloMs.toFixed(1)} ms)`
  o.push(`<text x="${M.l}" y="22" font-size="14" font-weight="bold">${esc(title)}</text>`)
  const step = niceStep(maxX)
  for (let x = 0; x <= maxX; x += step) {
    o.push(`<line x1="${sx(x).toFixed(1)}" y1="${M.t}" x2="${sx(x).toFixed(1)}" y2="${M.t + ph}" stroke="#eee"/>`)
    o.push(`<text x="${sx(x).toFixed(1)}" y="${M.t + ph + 16}" text-anchor="middle">${Math.round(x)}</text>`)
  }
  for (const y of logTicks(yLo, yHi)) {
    o.push(`<line x1="${M.l}" y1="${sy(y).toFixed(1)}" x2="${M.l + pw}" y2="${sy(y).toFixed(1)}" stroke="#eee"/>`)
    o.push(`<text x="${M.l - 6}" y="${(sy(y) + 4).toFixed(1)}" text-anchor="end">${y}</text>`)
  }
  o.push(`<rect x="${M.l}" y="${M.t}" width="${pw}" height="${ph}" fill="none" stroke="#444"/>`)
  o.push(`<text x="${M.l + pw / 2}" y="${H - 14}" text-anchor="middle">throughput (200 answers per second)</text>`)
  o.push(`<text x="18" y="${M.t + ph / 2}" text-anchor="middle" transform="rotate(-90 18 ${M.t + ph / 2})">p99 latency of 200 answers (ms, log scale)</text>`)
  if (Number.isFinite(m.sloMs)) {
    const y = sy(m.sloMs).toFixed(1)
    o.push(`<line x1="${M.l}" y1="${y}" x2="${M.l + pw}" y2="${y}" stroke="#000" stroke-dasharray="6 4"/>`)
    o.push(`<text x="${M.l + pw - 4}" y="${(Number(y) - 5).toFixed(1)}" text-anchor="end">SLO ${m.sloMs.toFixed(1)} ms</text>`)
  }
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length] as string
    if (s.pts.length > 1) {
      const d = s.pts.map((p) => `${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join(' ')
      o.push(`<polyline points="${d}" fill="none" stroke="${color}" stroke-width="2"/>`)
    }
    for (const p of s.pts) {
      o.push(`<circle cx="${sx(p.x).toFixed(1)}" cy="${sy(p.y).toFixed(1)}" r="3" fill="${color}"/>`)
    }
    const ly = M.t + 10 + i * 20
    o.push(`<line x1="${M.l + pw + 15}" y1="${ly}" x2="${M.l + pw + 40}" y2="${ly}" stroke="${color}" stroke-width="2"/>`)
    o.push(`<text x="${M.l + pw + 46}" y="${ly + 4}">${esc(s.name)}</text>`)
  })
  o.push(`<text x="${M.l + pw + 15}" y="${M.t + 20 + series.length * 20}" fill="#666">open-loop Poisson;</text>`)
  o.push(`<text x="${M.l + pw + 15}" y="${M.t + 35 + series.length * 20}" fill="#666">sweep + SLO search</text>`)
  o.push('</svg>')
  return o.join('\n') + '\n'
}
