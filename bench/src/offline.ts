import * as ort from 'onnxruntime-node'
import { percentile } from './stats.ts'

/** One point of the offline curve. */
export interface OfflinePoint {
  /** Batch size (rows per session.run). */
  batch: number
  /** Mean wall time of one session.run at this batch size, in ms. */
  msPerBatch: number
  /** Median wall time of one session.run, in ms. */
  p50Ms: number
  /** batch / msPerBatch, in items per second. */
  itemsPerSec: number
  /** Timed iterations. */
  iterations: number
  /** CPU ms of this process (every thread, ORT's included) per item, over the timed runs. */
  cpuMsPerItem: number
}

/** Options of {@link offlineCurve}. */
export interface OfflineOptions {
  /** ONNX file with input `input` FP32 [-1, 256] (the demo MLP). */
  path: string
  /** ORT intra-op threads (the served worker gets the same). */
  threads: number
  /** Batch sizes to measure. */
  batches: number[]
  /** Timed seconds per batch size (after warm-up). */
  seconds: number
  /** ONNX Runtime execution provider. @default cpu */
  ep?: string
  /** Features per row. @default 256 */
  features?: number
  /** Let idle ORT pool threads spin (the worker's default is not to). @default false */
  allowSpinning?: boolean
}

/** Batch sizes 1, 2, 4, ... below `max`, plus `max` itself. */
export function batchSizes(max: number): number[] {
  const out: number[] = []
  for (let b = 1; b < max; b *= 2) {
    out.push(b)
  }
  out.push(max)
  return out
}

/**
 * The offline baseline: onnxruntime-node in this process with the worker's session options
 * (`graphOptimizationLevel: 'all'`, `intraOpNumThreads: threads`, `interOpNumThreads: 1`, no
 * spinning), timing
 * back-to-back `session.run` calls per batch size after a warm-up.
 */
export async function offlineCurve(o: OfflineOptions): Promise<OfflinePoint[]> {
  const features = o.features ?? 256
  const session = await ort.InferenceSession.create(o.path, {
    executionProviders: [o.ep ?? 'cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: o.threads,
    interOpNumThreads: 1,
    // As the worker (ort-host.mjs): idle pool threads do not spin.
    extra: { session: { intra_op: { allow_spinning: o.allowSpinning ? '1' : '0' } } },
  })
  const points: OfflinePoint[] = []
  try {
    for (const b of o.batches) {
      const data = Float32Array.from({ length: b * features }, () => Math.random() * 2 - 1)
      const feeds = { input: new ort.Tensor('float32', data, [b, features]) }
      // Warm-up: at least 10 runs and 200 ms.
      const warmUntil = performance.now() + 200
      for (let i = 0; i < 10 || performance.now() < warmUntil; i++) {
        await session.run(feeds)
      }
      const times: number[] = []
      const cpu0 = process.cpuUsage()
      const start = performance.now()
      const until = start + o.seconds * 1000
      while (times.length < 10 || performance.now() < until) {
        const t0 = performance.now()
        await session.run(feeds)
        times.push(performance.now() - t0)
      }
      const total = performance.now() - start
      const cpu = process.cpuUsage(cpu0)
      const msPerBatch = total / times.length
      points.push({
        batch: b,
        msPerBatch,
        p50Ms: percentile(times, 50),
        itemsPerSec: (b * 1000) / msPerBatch,
        iterations: times.length,
        cpuMsPerItem: (cpu.user + cpu.system) / 1000 / (times.length * b),
      })
    }
  } finally {
    await session.release()
  }
  return points
}

/** The offline point with the most items/s (any batch size). */
export function offlineBest(curve: OfflinePoint[]): OfflinePoint | undefined {
  return [...curve].sort((a, b) => b.itemsPerSec - a.itemsPerSec)[0]
}

/**
 * Linear interpolation of `field` at a (fractional) batch size between the two nearest measured
 * sizes (the batch clamped to the measured range); NaN on an empty curve. Returns the clamped batch too.
 */
function interpolate(curve: OfflinePoint[], batch: number, field: 'cpuMsPerItem' | 'msPerBatch'): { b: number; v: number } {
  const pts = [...curve].sort((a, b) => a.batch - b.batch)
  const first = pts[0]
  const last = pts[pts.length - 1]
  if (!first || !last || !Number.isFinite(batch)) {
    return { b: Number.NaN, v: Number.NaN }
  }
  const b = Math.min(Math.max(batch, first.batch), last.batch)
  let lo = first
  let hi = last
  for (const p of pts) {
    if (p.batch <= b) {
      lo = p
    }
    if (p.batch >= b) {
      hi = p
      break
    }
  }
  const v = hi.batch === lo.batch ? lo[field] : lo[field] + ((b - lo.batch) / (hi.batch - lo.batch)) * (hi[field] - lo[field])
  return { b, v }
}

/** Offline CPU ms per item at a (fractional) batch size, interpolated linearly in the batch size (clamped). */
export function offlineCpuPerItemAt(curve: OfflinePoint[], batch: number): number {
  return interpolate(curve, batch, 'cpuMsPerItem').v
}

/**
 * Offline items/s at a (fractional) batch size, interpolating ms/batch linearly between the
 * two nearest measured sizes (clamped to the measured range).
 */
export function offlineItemsPerSecAt(curve: OfflinePoint[], batch: number): number {
  const { b, v } = interpolate(curve, batch, 'msPerBatch')
  return (b * 1000) / v
}
