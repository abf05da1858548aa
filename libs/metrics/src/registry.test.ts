import { describe, expect, it } from 'vitest'
import { Counter, Registry, frozenLabels, parsePrometheus, renderFamilies, runtimeMetrics, type RuntimeSource } from './index.ts'

describe('Registry', () => {
  it('renders counters, gauges and cumulative histograms', () => {
    const r = new Registry()
    r.counter('c_total', 'c').inc({ model: 'a', code: '200' }, 2)
    r.gauge('g', 'g').set({ model: 'a' }, 3)
    const h = r.histogram('h_seconds', 'h', [0.001, 0.01])
    h.observe({ model: 'a' }, 0.0005)
    h.observe({ model: 'a' }, 0.005)
    h.observe({ model: 'a' }, 5)
    const m = parsePrometheus(r.render())
    expect(m.get('c_total{code="200",model="a"}')).toBe(2)
    expect(m.get('g{model="a"}')).toBe(3)
    expect(m.get('h_seconds_bucket{model="a",le="0.001"}')).toBe(1)
    expect(m.get('h_seconds_bucket{model="a",le="0.01"}')).toBe(2)
    expect(m.get('h_seconds_bucket{model="a",le="+Inf"}')).toBe(3)
    expect(m.get('h_seconds_count{model="a"}')).toBe(3)
    expect(m.get('h_seconds_sum{model="a"}')).toBeCloseTo(5.0055)
  })

  it('returns the same metric for the same name and refuses a type clash', () => {
    const r = new Registry()
    expect(r.counter('x', 'x')).toBe(r.counter('x', 'x'))
    expect(() => r.gauge('x', 'x')).toThrow(TypeError)
  })

  it('escapes label values', () => {
    const r = new Registry()
    r.counter('c', 'c').inc({ m: 'a"b\\c\nd' })
    expect(r.render()).toContain('c{m="a\\"b\\\\c\\nd"} 1')
  })

  it('collects the same series as data that it renders as text', () => {
    const r = new Registry()
    r.counter('c_total', 'c').inc({ model: 'a' }, 2)
    r.gauge('g', 'g').collect(() => [[{ model: 'b' }, 5]])
    r.histogram('h_seconds', 'h', [0.1, 1]).observe({ model: 'a' }, 0.5)
    const families = r.collect()
    expect(families).toEqual([
      { name: 'c_total', help: 'c', type: 'counter', samples: [{ labels: { model: 'a' }, value: 2 }] },
      { name: 'g', help: 'g', type: 'gauge', samples: [{ labels: { model: 'b' }, value: 5 }] },
      {
        name: 'h_seconds',
        help: 'h',
        type: 'histogram',
        samples: [
          {
            labels: { model: 'a' },
            buckets: [
              { le: 0.1, count: 0 },
              { le: 1, count: 1 },
              { le: Infinity, count: 1 },
            ],
            sum: 0.5,
            count: 1,
          },
        ],
      },
    ])
    expect(renderFamilies(families)).toBe(r.render())
  })

  it('adds up collectors of one metric instead of keeping only the last one', () => {
    const r = new Registry()
    const g = r.gauge('depth', 'd')
    g.collect(() => [[{ model: 'a' }, 1]])
    g.collect(() => [[{ pipeline: 'p', stage: 's' }, 2]])
    const c = r.counter('cpu_seconds_total', 'c')
    let cpu = 1.5
    c.collect(() => [[{}, cpu]])
    const m = parsePrometheus(r.render())
    expect(m.get('depth{model="a"}')).toBe(1)
    expect(m.get('depth{pipeline="p",stage="s"}')).toBe(2)
    expect(m.get('cpu_seconds_total')).toBe(1.5)
    cpu = 2.25
    expect(parsePrometheus(r.render()).get('cpu_seconds_total')).toBe(2.25)
  })
})

describe('runtimeMetrics', () => {
  it('reads the source at collect time and records garbage collections by kind', () => {
    let user = 1
    let gc: ((kind: string, s: number) => void) | undefined
    const source: RuntimeSource = {
      cpu: () => ({ user, system: 0.5 }),
      memory: () => ({ rss: 1000, heapTotal: 300, heapUsed: 200, external: 50 }),
      startTimeS: 1_700_000_000.4,
      version: 'v20.19.0',
      eventLoopLag: () => ({ mean: 0.002, p50: 0.001, p99: 0.01, max: 0.02 }),
      onGc: (fn) => {
        gc = fn
      },
    }
    const r = new Registry()
    runtimeMetrics(r, source)
    gc!('minor', 0.0005)
    gc!('major', 0.05)
    user = 3
    const m = parsePrometheus(r.render())
    expect(m.get('process_cpu_user_seconds_total')).toBe(3)
    expect(m.get('process_cpu_system_seconds_total')).toBe(0.5)
    expect(m.get('process_cpu_seconds_total')).toBe(3.5)
    expect(m.get('process_resident_memory_bytes')).toBe(1000)
    expect(m.get('process_start_time_seconds')).toBe(1_700_000_000)
    expect(m.get('nodejs_heap_size_used_bytes')).toBe(200)
    expect(m.get('nodejs_external_memory_bytes')).toBe(50)
    expect(m.get('nodejs_eventloop_lag_seconds')).toBe(0.002)
    expect(m.get('nodejs_eventloop_lag_p99_seconds')).toBe(0.01)
    expect(m.get('nodejs_version_info{major="20",minor="19",patch="0",version="v20.19.0"}')).toBe(1)
    expect(m.get('nodejs_gc_duration_seconds_count{kind="minor"}')).toBe(1)
    expect(m.get('nodejs_gc_duration_seconds_bucket{kind="major",le="0.01"}')).toBe(0)
    expect(m.get('nodejs_gc_duration_seconds_bucket{kind="major",le="0.1"}')).toBe(1)
  })

  it('leaves out the readings a runtime does not have', () => {
    const r = new Registry()
    runtimeMetrics(r, { cpu: () => ({ user: 0, system: 0 }), memory: () => ({ rss: 1, heapTotal: 1, heapUsed: 1, external: 0 }), startTimeS: 0 })
    const names = r.collect().map((f) => f.name)
    expect(names).toContain('process_cpu_seconds_total')
    expect(names).not.toContain('nodejs_eventloop_lag_seconds')
    expect(names).not.toContain('nodejs_version_info')
  })
})

describe('frozen label sets', () => {
  it('count into the same series as plain objects, in any key order, one object per value', () => {
    const c = new Counter('x_total', 'x')
    const of = frozenLabels(Object.freeze({ model: 'm' }), 'code')
    expect(of('OK')).toBe(of('OK'))
    expect(Object.isFrozen(of('OK'))).toBe(true)
    c.inc(of('OK'))
    c.inc({ code: 'OK', model: 'm' })
    c.inc(of('OK'), 2)
    expect(c.get({ model: 'm', code: 'OK' })).toBe(4)
    expect(c.render()).toContain('x_total{code="OK",model="m"} 4')
  })
})
