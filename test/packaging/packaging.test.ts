// The packages as a user gets them: `npm pack` every publishable workspace (libs/*, apps/*; bench
// and test/support stay private) with its declaration files built, install the tarballs into a
// fresh folder outside this checkout made as `npm init -y` makes one (npm 11: "type": "commonjs";
// third-party packages from the npm registry or its cache; none of this repo's workspaces or
// settings), then from there: `cohort --version`, the README's predictor example (in that folder
// and in a "type": "module" one), the tabular pipeline example, and the user's own `tsc` over
// the predictor against the shipped `.d.ts` (docs/packages.md).
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'

const REPO = resolve(import.meta.dirname, '../..')
const TSC = join(REPO, 'node_modules/typescript/bin/tsc')
const PREPACK = 'node ../../scripts/prepack.mjs'
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

/** Run `cohort serve ARGS` in `cwd` (the app folder) until it prints its URL; returns the URL and a stop(). */
async function serve(args: string[], cwd = app): Promise<{ url: string; stop(): Promise<void> }> {
  const proc = spawn(join(app, 'node_modules/.bin/cohort'), ['serve', '--port', '0', ...args], { cwd, env: userEnv, stdio: ['ignore', 'pipe', 'pipe'] })
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

/** The README's `my-predictor.ts`. */
function readmePredictor(): string {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8')
  const m = /## Batch predictors in TypeScript\s+```ts\n([\s\S]*?)```/.exec(readme)
  expect(m).not.toBeNull()
  return m![1]!
}

/** POST the README predictor's request to `url` and check its answer. */
async function shout(url: string): Promise<void> {
  const r = await fetch(`${url}/models/shout/predictions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: { text: 'hi', times: 2 } }),
  })
  expect(r.status).toBe(200)
  expect((await r.json()).output).toEqual({ text: 'HIHI' })
}

beforeAll(() => {
  mkdirSync(packs)
  mkdirSync(app)
  // What each package's `prepack` does (scripts/prepack.mjs: dist/*.d.ts and LICENSE), for all of
  // them in one tsc run; then pack without running prepack again. Those files exist only while packing.
  const dirs = publishable()
  execFileSync(process.execPath, [join(REPO, 'scripts/prepack.mjs'), '--all'], { env: userEnv, stdio: 'pipe' })
  try {
    for (const w of dirs) {
      execFileSync('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', packs], { cwd: w, env: userEnv, stdio: 'pipe' })
    }
  } finally {
    execFileSync(process.execPath, [join(REPO, 'scripts/prepack.mjs'), '--clean', ...dirs], { env: userEnv, stdio: 'pipe' })
  }
  // The folder as `npm init -y` leaves it (npm 11: "type": "commonjs").
  execFileSync('npm', ['init', '-y'], { cwd: app, env: userEnv, stdio: 'pipe' })
  // CPU by default: ONNXRUNTIME_NODE_INSTALL=skip is what the README tells users for a CPU-only
  // install (onnxruntime-node's own postinstall would otherwise fetch CUDA on linux/x64).
  execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...readdirSync(packs).map((f) => join(packs, f))], {
    cwd: app,
    env: { ...userEnv, ONNXRUNTIME_NODE_INSTALL: 'skip' },
    stdio: 'pipe',
  })
}, 600_000)

afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

describe('installed from packed tarballs, outside the checkout', () => {
  it('installs real copies (no links into this repository), without test files, with .d.ts beside the sources and the licence text', () => {
    expect(JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')).type).not.toBe('module')
    for (const p of ['@cohort/cli', '@cohort/predictor', '@cohort/pipeline', '@cohort/worker', '@cohort/protocol']) {
      const at = join(app, 'node_modules', p)
      expect(lstatSync(at).isSymbolicLink()).toBe(false)
      expect(realpathSync(at).startsWith(REPO)).toBe(false)
    }
    for (const f of readdirSync(packs)) {
      const listing = execFileSync('tar', ['tzf', join(packs, f)], { encoding: 'utf8' }).split('\n')
      expect(listing.filter((x) => x.endsWith('.test.ts')), f).toEqual([])
      expect(listing.some((x) => /^package\/src\/.*\.ts$/.test(x)), f).toBe(true)
      expect(listing.some((x) => /^package\/dist\/.*\.d\.ts$/.test(x)), f).toBe(true)
      expect(listing, f).toContain('package/LICENSE')
    }
    // Every `types` target of every package's exports is in the installed package.
    for (const w of publishable()) {
      const pj = JSON.parse(readFileSync(join(w, 'package.json'), 'utf8')) as { name: string; license: string; exports: Record<string, { types: string }>; scripts: Record<string, string> }
      expect(pj.scripts['prepack'], pj.name).toBe(PREPACK)
      expect(pj.license, pj.name).toBe('Apache-2.0')
      for (const e of Object.values(pj.exports)) {
        expect(existsSync(join(app, 'node_modules', pj.name, e.types)), `${pj.name} ${e.types}`).toBe(true)
      }
    }
  })

  it('cohort --version prints the version of the installed @cohort/cli', () => {
    const version = (JSON.parse(readFileSync(join(app, 'node_modules/@cohort/cli/package.json'), 'utf8')) as { version: string }).version
    expect(execFileSync(join(app, 'node_modules/.bin/cohort'), ['--version'], { cwd: app, env: userEnv, encoding: 'utf8' }).trim()).toBe(`cohort ${version}`)
  }, 60_000)

  it('installs CPU only: onnxruntime-node without the CUDA provider files', () => {
    const bin = join(app, 'node_modules/onnxruntime-node/bin/napi-v6', process.platform, process.arch)
    expect(readdirSync(bin).some((f) => f.startsWith('libonnxruntime') || f.startsWith('onnxruntime'))).toBe(true)
    expect(readdirSync(bin).filter((f) => f.includes('providers_cuda'))).toEqual([])
  })

  it("runs the README's my-predictor.ts with the installed cohort command (npm init's folder)", async () => {
    writeFileSync(join(app, 'my-predictor.ts'), readmePredictor())
    const s = await serve(['--predictor', './my-predictor.ts'])
    try {
      await shout(s.url)
    } finally {
      await s.stop()
    }
  }, 120_000)

  it('runs it from a "type": "module" folder too', async () => {
    const esm = join(app, 'esm')
    mkdirSync(esm)
    writeFileSync(join(esm, 'package.json'), JSON.stringify({ name: 'my-esm-app', private: true, type: 'module' }))
    writeFileSync(join(esm, 'my-predictor.ts'), readmePredictor())
    const s = await serve(['--predictor', './my-predictor.ts'], esm)
    try {
      await shout(s.url)
    } finally {
      await s.stop()
    }
  }, 120_000)

  it("type-checks the user's predictor with the user's own tsc settings against the shipped .d.ts, and catches a type error", () => {
    const tc = join(app, 'typecheck')
    mkdirSync(tc)
    // A common user tsconfig: Node's module resolution, strict, none of this repository's options
    // (no allowImportingTsExtensions, no custom conditions). skipLibCheck off: the .d.ts are checked too.
    writeFileSync(join(tc, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', target: 'es2022', strict: true, noEmit: true, types: [] }, include: ['*.ts'] }))
    writeFileSync(join(tc, 'my-predictor.ts'), readmePredictor())
    const tsc = () => execFileSync(process.execPath, [TSC, '-p', tc], { cwd: tc, env: userEnv, encoding: 'utf8', stdio: 'pipe' })
    expect(() => tsc()).not.toThrow()
    writeFileSync(join(tc, 'wrong.ts'), "import { Type, definePredictor } from '@cohort/predictor'\nexport default definePredictor({ name: 'w', input: Type.Object({ text: Type.String() }), predict: (xs) => xs.map((x) => x.txet) })\n")
    let out = ''
    try {
      tsc()
    } catch (e) {
      out = String((e as { stdout?: string }).stdout ?? e)
    }
    expect(out).toMatch(/wrong\.ts.*Property 'txet' does not exist/)
  }, 240_000)

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
