// The public entries of @cohort/gateway and @cohort/worker list their API by name: no module of
// either package re-exports another whole (`export * from`), so internals stay internal. And the
// main entries load and export what the CLI, the tests and the docs use.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { COHORT_VERSION } from '@cohort/protocol'
import * as gateway from './index.ts'

const apps = fileURLToPath(new URL('../../', import.meta.url))

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === 'node_modules' ? [] : sources(join(dir, e.name))) : e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  )
}

describe('package entries', () => {
  it('no `export *` in @cohort/gateway or @cohort/worker', () => {
    const whole = ['gateway', 'worker']
      .flatMap((p) => sources(join(apps, p, 'src')))
      .filter((f) => /^export \* from /m.test(readFileSync(f, 'utf8')))
      .map((f) => f.slice(apps.length))
    expect(whole).toEqual([])
  })

  it("COHORT_VERSION (GET /v2, gRPC ServerMetadata, the workers' service info) is every workspace package's version", () => {
    const versions = ['cli', 'gateway', 'worker'].map((p) => (JSON.parse(readFileSync(join(apps, p, 'package.json'), 'utf8')) as { version: string }).version)
    expect(new Set(versions)).toEqual(new Set([COHORT_VERSION]))
  })

  it('@cohort/gateway exports its core, app, door and admission by name', () => {
    for (const name of ['createApp', 'createGatewayCore', 'InferenceDoor', 'Upstream', 'WorkerLiveness', 'ADMISSION', 'DEFAULT_REQUEST_TIMEOUT_MS', 'readBody', 'declaredLength']) {
      expect(gateway, name).toHaveProperty(name)
    }
    expect(gateway).not.toHaveProperty('doorSend')
  })
})
