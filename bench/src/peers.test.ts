import { describe, expect, it } from 'vitest'
import { demoBody } from './bodies.ts'
import { parsePaCsv } from './peers-pa.ts'
import { peerTargets, summaryTable } from './peers-report.ts'
import type { TargetResult } from './peers-run.ts'
import { parsePeers, parseVariants, peerBody, peerEnv, peerPath, peerTarget, type Tuning } from './peers-targets.ts'
import type { StepResult } from './step-stats.ts'

const tuning: Tuning = { maxBatchSize: 32, delayMs: { triton: 2, ray: 3, litserve: 4 }, bentomlMaxLatencyMs: 40.2 }

describe('peer request bodies', () => {
  const floats = (JSON.parse(demoBody()) as { inputs: [{ data: number[] }] }).inputs[0].data

  it('sends every peer the same 256 floats as Cohort', () => {
    expect(floats).toHaveLength(256)
    expect(peerBody('triton')).toBe(demoBody())
    expect((JSON.parse(peerBody('ray')) as { input: number[] }).input).toEqual(floats)
    expect((JSON.parse(peerBody('litserve')) as { input: number[] }).input).toEqual(floats)
    // BentoML's batchable API concatenates along dimension 0: one request is one row.
    expect((JSON.parse(peerBody('bentoml')) as { input: number[][] }).input).toEqual([floats])
  })

  it('posts to each peer its own predict path', () => {
    expect(peerPath('triton')).toBe('/v2/models/demo/infer')
    expect(peerPath('litserve')).toBe('/predict')
  })
})

describe('peer settings', () => {
  it('sets nothing for the defaults variant', () => {
    expect(peerEnv('ray', 'default', tuning)).toEqual({})
  })

  it('passes max batch and delay (or BentoML max_latency_ms) to the tuned variant', () => {
    expect(peerEnv('ray', 'tuned', tuning)).toEqual({ PEER_MAX_BATCH: '32', PEER_MAX_DELAY_MS: '3' })
    expect(peerEnv('bentoml', 'tuned', tuning)).toEqual({ PEER_MAX_BATCH: '32', PEER_MAX_LATENCY_MS: '41' })
  })

  it('counts LitServe at its defaults as not batching', () => {
    const o = { root: '/nonexistent', modelPath: '/m.onnx' }
    expect(peerTarget('litserve', 'default', tuning, o).batching).toBe(false)
    expect(peerTarget('litserve', 'tuned', tuning, o).batching).toBe(true)
    expect(peerTarget('triton', 'tuned', tuning, o).name).toBe('triton-tuned')
  })

  it('refuses to start a peer without the venv', async () => {
    const t = peerTarget('triton', 'default', tuning, { root: '/nonexistent', modelPath: '/m.onnx' })
    await expect(t.start(() => undefined)).rejects.toThrow(/test\/peers\/setup\.sh/)
  })

  it('rejects unknown peers and variants', () => {
    expect(parsePeers('triton, ray')).toEqual(['triton', 'ray'])
    expect(() => parsePeers('triton,torchserve')).toThrow(/unknown peer "torchserve"/)
    expect(() => parseVariants('default,best')).toThrow(/unknown variant "best"/)
  })
})

function step(p50: number, goodput = 0): StepResult {
  return { p50, goodput, rate: 10, meanBatch: 2 } as StepResult
}

function result(name: string, capacityAtSlo: number, lowP50: number, batching = true): TargetResult {
  return {
    name,
    description: name,
    batching,
    capacity: { tool: 'wrk', requests: 1, seconds: 1, requestsPerSec: capacityAtSlo * 1.2, p50Ms: 1, p99Ms: 2, non2xx: 0, socketErrors: 0, meanBatch: 3 },
    floor: undefined,
    low: step(lowP50),
    sweep: [],
    search: [],
    capacityAtSlo,
    atSlo: step(lowP50),
    atSloOpen: false,
    overload: step(lowP50 * 3, capacityAtSlo),
    wallS: 1,
    startS: 1,
  }
}

describe('issue 8 targets', () => {
  it('are met when Cohort has 1.5x the best peer capacity and the lowest p50 among batching peers', () => {
    // LitServe at its defaults does not batch: its lower p50 does not count.
    const t = peerTargets({ targets: [result('cohort', 1500, 2), result('triton', 1000, 3), result('litserve', 400, 1, false)] })
    expect(t?.capacity.met).toBe(true)
    expect(t?.capacity.value).toBeCloseTo(1.5)
    expect(t?.lowP50.met).toBe(true)
  })

  it('are missed when a peer comes closer or answers faster', () => {
    const t = peerTargets({ targets: [result('cohort', 1400, 2), result('triton', 1000, 1.9), result('ray', 300, 5)] })
    expect(t?.capacity.met).toBe(false)
    expect(t?.capacity.text).toContain('triton')
    expect(t?.lowP50.met).toBe(false)
    expect(t?.lowP50.text).toContain('triton')
  })

  it('do not count cohort-tuned as a peer (a tuned Cohort faster than Cohort at its defaults is not a rival)', () => {
    const t = peerTargets({ targets: [result('cohort', 1500, 2), result('cohort-tuned', 3000, 1), result('triton', 1000, 3)] })
    expect(t?.capacity.met).toBe(true)
    expect(t?.capacity.text).toContain('triton')
    expect(t?.lowP50.text).toContain('triton')
    expect(peerTargets({ targets: [result('cohort', 1, 1), result('cohort-tuned', 1, 1)] })).toBeUndefined()
  })

  it('are undefined without Cohort or without peers', () => {
    expect(peerTargets({ targets: [result('triton', 1, 1)] })).toBeUndefined()
    expect(peerTargets({ targets: [result('cohort', 1, 1)] })).toBeUndefined()
  })

  it('print ratios against the Cohort row', () => {
    const out = summaryTable({ targets: [result('cohort', 1000, 2), result('ray', 250, 8)] })
    const ray = out.split('\n').find((l) => l.trim().startsWith('ray')) as string
    expect(ray).toContain('0.25')
    expect(ray).toContain('4.00')
  })
})

describe('perf_analyzer CSV', () => {
  it('reads throughput and latency percentiles (µs -> ms) by column name', () => {
    const csv = [
      'Concurrency,Inferences/Second,Client Send,p50 latency,p90 latency,p95 latency,p99 latency,Avg latency',
      '16,1234.5,10,12000,14000,15000,21000,12500',
      '1,300.2,10,3100,3500,3600,4200,3200',
    ].join('\n')
    expect(parsePaCsv(csv)).toEqual([
      { concurrency: 1, throughput: 300.2, p50Ms: 3.1, p99Ms: 4.2 },
      { concurrency: 16, throughput: 1234.5, p50Ms: 12, p99Ms: 21 },
    ])
  })
})
