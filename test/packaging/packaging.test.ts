// The packages as a user gets them: `npm pack` every publishable workspace (libs/*, apps/*; bench
// and test/support stay private), install the tarballs into a fresh folder outside this checkout
// (third-party packages from the npm registry or its cache; none of this repo's .npmrc or
// workspaces), then run the README's predictor example and the tabular pipeline example from there
// with the installed `cohort` command.
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'

const REPO = resolve(import.meta.dirname, '../..')
const dir = mkdtempSync(join(tmpdir(), 'cohort-packaging-'))
const packs = join(dir, 'packs')
const app = join(dir, 'app')

/** The environment of a user's shell: no npm_* variables of the npm run that started vitest. */
const userEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))) as Record<string, string>

function publishable(): string[] {
  const out: string[] = []
  for (const group of ['libs', 'apps']) {
    for (const d of readdirSync(join(REPO, group))) {
      const pj = join(REPO, group, d, 'package.json')
      if (existsSync(pj) && JSON.parse(readFileSync(pj, 'utf8')).private !== true) {
        out.push(join(REPO, group, d))
      }
    }
  }
  return out
}

/** Run `cohort serve ARGS` in the app folder until it prints its URL; returns the URL and a stop(). */
async function serve(args: string[]): Promise<{ url: string; stop(): Promise<void> }> {
  const proc = spawn(join(app, 'node_modules/.bin/cohort'), ['serve', '--port', '0', ...args], { cwd: app, env: userEnv, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  const url = await new Promise<string>((res, rej) => {
    const t = setTimeout(() => rej(new Error(`cohort serve did not start:\n${out}`)), 90_000)
    const on = (d: Buffer) => {
      out += d.toString()
      const m = /serving .* on (http:\/\/\S+)/.exec(out)
      if (m) {
        clearTimeout(t)
        res(m[1]!)
      }
    }
    proc.stdout.on('data', on)
    proc.stderr.on('data', on)
    proc.once('exit', (code) => {
      clearTimeout(t)
      rej(new Error(`cohort serve exited ${code}:\n${out}`))
    })
  })
  return {
    url,
    stop: async () => {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once('exit', r))
        proc.kill('SIGTERM')
        await exited
      }
    },
  }
}

beforeAll(() => {
  mkdirSync(packs)
  mkdirSync(app)
  for (const w of publishable()) {
    execFileSync('npm', ['pack', '--silent', '--pack-destination', packs], { cwd: w, env: userEnv, stdio: 'pipe' })
  }
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'my-app', private: true, type: 'module' }))
  // CPU by default: ONNXRUNTIME_NODE_INSTALL=skip is what the README tells users for a CPU-only
  // install (onnxruntime-node's own postinstall would otherwise fetch CUDA on linux/x64).
  execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...readdirSync(packs).map((f) => join(packs, f))], {
    cwd: app,
    env: { ...userEnv, ONNXRUNTIME_NODE_INSTALL: 'skip' },
    stdio: 'pipe',
  })
}, 400_000)

afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

describe('installed from packed tarballs, outside the checkout', () => {
  it('installs real copies (no links into this repository), without test files', () => {
    for (const p of ['cohort', '@cohort/predictor', '@cohort/pipeline', '@cohort/worker', '@cohort/protocol']) {
      const at = join(app, 'node_modules', p)
      expect(lstatSync(at).isSymbolicLink()).toBe(false)
      expect(realpathSync(at).startsWith(REPO)).toBe(false)
    }
    const listing = readdirSync(packs).flatMap((f) => execFileSync('tar', ['tzf', join(packs, f)], { encoding: 'utf8' }).split('\n'))
    expect(listing.filter((f) => f.endsWith('.test.ts'))).toEqual([])
    expect(listing).toContain('package/src/index.ts')
  })

  it("runs the README's my-predictor.ts with the installed cohort command", async () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8')
    const m = /## Batch predictors in TypeScript\s+```ts\n([\s\S]*?)```/.exec(readme)
    expect(m).not.toBeNull()
    writeFileSync(join(app, 'my-predictor.ts'), m![1]!)
    const s = await serve(['--predictor', './my-predictor.ts'])
    try {
      const r = await fetch(`${s.url}/models/shout/predictions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: { text: 'hi', times: 2 } }),
      })
      expect(r.status).toBe(200)
      expect((await r.json()).output).toEqual({ text: 'HIHI' })
    } finally {
      await s.stop()
    }
  }, 120_000)

  it('runs the tabular pipeline example (preprocess -> ONNX -> postprocess) copied out of the checkout', async () => {
    const ex = join(app, 'tabular')
    mkdirSync(ex)
    for (const f of ['cohort.config.ts', 'features.ts', 'model.ts']) {
      copyFileSync(join(REPO, 'examples/tabular', f), join(ex, f))
    }
    const s = await serve(['./tabular'])
    try {
      const r = await fetch(`${s.url}/models/tabular/predictions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: { pclass: 1, sex: 'female', age: 29, fare: 211.3, embarked: 'S' } }),
      })
      expect(r.status).toBe(200)
      const body = await r.json()
      expect(body.status).toBe('succeeded')
      expect(['survived', 'died']).toContain(body.output.label)
      expect(body.output.probability).toBeGreaterThan(0)
    } finally {
      await s.stop()
    }
  }, 120_000)
})
