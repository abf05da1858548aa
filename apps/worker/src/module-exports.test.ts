// A user's module as tsx hands it over: an ESM namespace as is, a CommonJS-compiled .ts file (a
// folder without "type": "module") through its `__esModule` wrapper.
import { describe, expect, it } from 'vitest'
import { moduleExports } from './module-exports.ts'

describe('moduleExports', () => {
  it('returns an ESM namespace as it is', () => {
    const ns = { default: { name: 'p' }, other: 1 }
    expect(moduleExports(ns)).toBe(ns)
  })

  it("returns the author's exports from tsx's CommonJS wrapper", () => {
    const inner = { __esModule: true, default: { name: 'p' }, named: { name: 'q' } }
    expect(moduleExports({ default: inner })).toBe(inner)
  })

  it('leaves a default export that merely is an object alone', () => {
    const ns = { default: { __esModule: false, name: 'p' } }
    expect(moduleExports(ns)).toBe(ns)
  })
})
