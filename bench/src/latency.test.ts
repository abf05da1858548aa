import { describe, expect, it } from 'vitest'
import { LATENCY_WARMUP, ctxSwitches, formatLatency } from './latency.ts'

describe('formatLatency', () => {
  it('prints ratios to the floor and to the base run', () => {
    const out = formatLatency(
      [
        { target: 'bare node:http', requests: 100, p50Ms: 0.5, p99Ms: 1, cpuUsPerRequest: 40 },
        { target: 'cohort serve (embedded ONNX)', requests: 50, p50Ms: 1.5, p99Ms: 4, cpuUsPerRequest: 120, ctxPerRequest: { voluntary: 1.5, involuntary: 0.25 } },
        { target: 'cohort serve (embedded ONNX) (base)', requests: 25, p50Ms: 3, p99Ms: 8, cpuUsPerRequest: 240 },
      ],
      'test',
    )
    expect(out).toContain('| cohort serve (embedded ONNX) | 50 | 1.50 | 4.00 | 3.0x | 120 | 3.0x | 1.50 + 0.25 |')
    expect(out).toContain('| bare node:http | 100 | 0.50 | 1.00 | 1.0x | 40 | 1.0x | - |')
    expect(out).toContain('cohort serve (embedded ONNX) / base: p50 0.5x, p99 0.5x, CPU 0.5x')
  })

  it('prints no ratio without a floor', () => {
    const out = formatLatency([{ target: 'gateway + nats-server + worker', requests: 1, p50Ms: 2, p99Ms: 3, cpuUsPerRequest: 9 }], 'test')
    expect(out).toContain('| gateway + nats-server + worker | 1 | 2.00 | 3.00 | - | 9 | - | - |')
  })
})

describe('LATENCY_WARMUP', () => {
  it('warms at concurrency before the lone-request phase, ending at c=1', () => {
    expect(LATENCY_WARMUP[0]).toEqual({ connections: 16, seconds: 2 })
    expect(LATENCY_WARMUP.at(-1)).toEqual({ connections: 1, seconds: 1 })
  })
})

describe('ctxSwitches', () => {
  it('sums every thread of a live process, and reads 0 for a pid that is gone', () => {
    const c = ctxSwitches(process.pid)
    expect(c.voluntary + c.involuntary).toBeGreaterThan(0)
    expect(ctxSwitches(2 ** 22 + 1)).toEqual({ voluntary: 0, involuntary: 0 })
  })
})
