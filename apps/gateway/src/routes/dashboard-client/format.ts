/** Number formats of the page. */

/** A finite number (not null, undefined or NaN). */
export function ok(v: number | null | undefined): v is number {
  return v !== null && v !== undefined && Number.isFinite(v)
}

export function fmtRate(v: number | null | undefined): string {
  if (!ok(v)) return '–'
  if (v === 0) return '0'
  if (v >= 100) return Math.round(v).toLocaleString('en-US')
  if (v >= 10) return v.toFixed(1)
  return v.toFixed(2)
}

export function fmtMs(v: number | null | undefined): string {
  if (!ok(v)) return '–'
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 1 : 2) + ' s'
  if (v >= 100) return v.toFixed(0) + ' ms'
  if (v >= 10) return v.toFixed(1) + ' ms'
  return v.toFixed(2) + ' ms'
}

export function fmtInt(v: number | null | undefined): string {
  return ok(v) ? Math.round(v).toLocaleString('en-US') : '–'
}

export function fmtAxis(v: number): string {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`
  return String(+v.toPrecision(3))
}

export function fmtMsAxis(v: number): string {
  return v === 0 ? '0' : v >= 1000 ? `${+(v / 1000).toPrecision(3)} s` : `${+v.toPrecision(3)} ms`
}

export function fmtBytes(v: number | null | undefined): string {
  if (!ok(v)) return '–'
  if (v >= 1024 ** 3) return (v / 1024 ** 3).toFixed(2) + ' GiB'
  if (v >= 1024 ** 2) return (v / 1024 ** 2).toFixed(0) + ' MiB'
  return (v / 1024).toFixed(0) + ' KiB'
}

/** A y scale of 3 to 5 round steps covering `max`. */
export function scale(max: number, integer = false): { max: number; step: number } {
  const raw = Math.max(max, integer ? 1 : 1e-9) / 5
  const e = Math.pow(10, Math.floor(Math.log10(raw)))
  const f = raw / e
  let step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * e
  if (integer) step = Math.max(1, Math.round(step))
  if (!(max > 0)) return { max: integer ? 4 : 1, step: integer ? 1 : 0.25 }
  return { max: Math.ceil(max / step - 1e-9) * step, step }
}
