// The tax benchmark's arithmetic: CPU time from /proc, medians of rounds, the printed ratios.
import { describe, expect, it } from 'vitest'
import { cpuMicros, formatTax, medians, type TaxTarget } from './tax.ts'

const t = (target: string, procs: [string, number][], extra: Partial<TaxTarget> = {}): TaxTarget => ({
  target,
  requestsPerSec: 1000,
  items: 1,
  procs: procs.map(([name, usPerRequest]) => ({ name, usPerRequest })),
  totalUsPerRequest: procs.reduce((a, [, v]) => a + v, 0),
  natsInPerRequest: Number.NaN,
  natsOutPerRequest: Number.NaN,
  p50Ms: 1,
  ...extra,
})

describe('cohort bench tax', () => {
  it.runIf(process.platform === 'linux')('reads a process CPU time from /proc that grows while it computes', () => {
    const a = cpuMicros(process.pid)
    // Compute until this process has used 50 ms of CPU (by process.cpuUsage, not wall time: a busy
    // machine may give it little of 60 ms), several of /proc's 10 ms clock ticks.
    const cpu0 = process.cpuUsage()
    let x = 0
    while (process.cpuUsage(cpu0).user + process.cpuUsage(cpu0).system < 50_000) {
      for (let i = 0; i < 10_000; i++) x += Math.sqrt(x + 1)
    }
    expect(x).toBeGreaterThan(0)
    expect(cpuMicros(process.pid)).toBeGreaterThan(a)
  })

  it('takes the median of each number per target over rounds', () => {
    const m = medians([
      [t('a', [['p', 10]]), t('b', [['q', 1]])],
      [t('b', [['q', 3]]), t('a', [['p', 30]])],
      [t('a', [['p', 20]]), t('b', [['q', 2]])],
    ])
    expect(m.map((r) => [r.target, r.procs[0]?.usPerRequest, r.totalUsPerRequest])).toEqual([
      ['a', 20, 20],
      ['b', 2, 2],
    ])
  })

  it('prints the ratios against the floors and leaves out the base runs', () => {
    const out = formatTax(
      [
        t('bare node:http', [['node:http', 40]]),
        t(
          'nats.js request-reply',
          [
            ['nats-server', 5],
            ['responder', 5],
            ['requester', 20],
          ],
          { natsInPerRequest: 2, natsOutPerRequest: 2 },
        ),
        t('cohort serve', [['cohort serve', 60]]),
        t(
          'gateway + nats-server + worker',
          [
            ['gateway', 50],
            ['nats-server', 10],
            ['worker', 30],
          ],
          { natsInPerRequest: 0.25, natsOutPerRequest: 0.25 },
        ),
        t('gateway + nats-server + worker (base)', [
          ['gateway', 500],
          ['nats-server', 100],
          ['worker', 300],
        ]),
      ],
      'meta',
    )
    expect(out).toContain('serve/http 1.50')
    expect(out).toContain('dist/serve 1.50')
    expect(out).toContain('dist nats-server/nats.js nats-server 2.00')
    expect(out).toContain('dist published per request 0.25')
    expect(out).toContain('| gateway + nats-server + worker (base) |')
    expect(out).toContain('dist / dist (base): total 0.10, gateway 0.10')
  })

  it('prints the ratios of the new paths: --processes 2, gRPC, bulk per item, and against Triton', () => {
    const out = formatTax(
      [
        t('cohort serve', [['cohort serve', 60]]),
        t('gateway + nats-server + worker', [
          ['gateway', 100],
          ['nats-server', 20],
          ['worker', 80],
        ]),
        t('gateway --processes 2 + nats-server + worker', [
          ['gateway primary', 1],
          ['gateway 1', 52],
          ['gateway 2', 53],
          ['nats-server', 20],
          ['worker', 80],
        ]),
        t('gRPC: gateway + nats-server + worker', [
          ['gateway', 150],
          ['nats-server', 20],
          ['worker', 80],
        ]),
        t(
          'bulk 16: gateway + nats-server + worker',
          [
            ['gateway', 50],
            ['nats-server', 10],
            ['worker', 40],
          ],
          { perItem: true },
        ),
        t('Triton (PyTriton, identity function)', [
          ['tritonserver', 50],
          ['Python backend stub', 100],
          ['Python (PyTriton)', 50],
        ]),
      ],
      'meta',
    )
    expect(out).toContain('--processes 2 / 1: total 1.03 (target <= 1.1), gateway processes 1.06')
    expect(out).toContain('gRPC / HTTP (dist): total 1.25, gateway 1.50')
    expect(out).toContain('| bulk 16: gateway + nats-server + worker (per item) |')
    expect(out).toContain('bulk per item / one request (dist): total 0.50, gateway 0.50, worker 0.50')
    expect(out).toContain('dist/Triton total 1.00 (target <= 1), serve/Triton total 0.30, gateway/tritonserver 2.00')
  })
})
