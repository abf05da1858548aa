import { describe, expect, it } from 'vitest'
import { Registry, parsePrometheus } from './index.ts'

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
})
