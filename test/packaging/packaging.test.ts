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

/**
 * The environment of a user's shell: no npm_* variables of the npm run that started vitest, and no
 * ONNXRUNTIME_NODE_INSTALL (.ci/run exports it for its own `npm ci`).
 */
const userEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && !/^ONNXRUNTIME_NODE_INSTALL/.test(k))) as Record<string, string>

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
  // Every publishable workspace in one npm run (scripts/pack.mjs: the prepack work of all of them in
  // one tsc run, then one `npm pack --workspace ...`).
  execFileSync(process.execPath, [join(REPO, 'scripts/pack.mjs'), packs], { env: userEnv, stdio: 'pipe' })
  // The folder as `npm init -y` leaves it (npm 11: "type": "commonjs").
  execFileSync('npm', ['init', '-y'], { cwd: app, env: userEnv, stdio: 'pipe' })
  // The one command docs/packages.md gives: npm passes --onnxruntime-node-install=skip to install
  // scripts as npm_config_onnxruntime_node_install, which onnxruntime-node's installer reads. Without
  // it, npm 11.19 runs that installer (allowScripts is not inherited from this repository), which
  // fails here: api.nuget.org is not reachable. userEnv carries no ONNXRUNTIME_NODE_INSTALL.
  execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--onnxruntime-node-install=skip', ...readdirSync(packs).map((f) => join(packs, f))], {
    cwd: app,
    env: userEnv,
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
      expect(
        listing.filter((x) => x.endsWith('.test.ts')),
        f,
      ).toEqual([])
      expect(
        listing.some((x) => /^package\/src\/.*\.ts$/.test(x)),
        f,
      ).toBe(true)
      expect(
        listing.some((x) => /^package\/dist\/.*\.d\.ts$/.test(x)),
        f,
      ).toBe(true)
      expect(listing, f).toContain('package/LICENSE')
    }
    // Every `types` target of every package's exports is in the installed package.
    for (const w of publishable()) {
      const pj = JSON.parse(readFileSync(join(w, 'package.json'), 'utf8')) as {
        name: string
        license: string
        exports: Record<string, { types: string }>
        scripts: Record<string, string>
      }
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
    writeFileSync(
      join(tc, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'nodenext', target: 'es2022', strict: true, noEmit: true, types: [] }, include: ['*.ts'] }),
    )
    writeFileSync(join(tc, 'my-predictor.ts'), readmePredictor())
    const tsc = () => execFileSync(process.execPath, [TSC, '-p', tc], { cwd: tc, env: userEnv, encoding: 'utf8', stdio: 'pipe' })
    expect(() => tsc()).not.toThrow()
    writeFileSync(
      join(tc, 'wrong.ts'),
      "import { Type, definePredictor } from '@cohort/predictor'\nexport default definePredictor({ name: 'w', input: Type.Object({ text: Type.String() }), predict: (xs) => xs.map((x) => x.txet) })\n",
    )
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

  it('npx cohort serve drains on SIGTERM to npx (npm exits without passing it on; the server notices its parent gone)', async () => {
    const proc = spawn('npx', ['cohort', 'serve', '--port', '0'], { cwd: app, env: userEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    const seen = (re: RegExp, ms: number) =>
      new Promise<RegExpMatchArray>((res, rej) => {
        const t = setTimeout(() => rej(new Error(`timed out waiting for ${re}:\n${out}`)), ms)
        const on = (d: Buffer) => {
          out += d.toString()
          const m = re.exec(out)
          if (m) {
            clearTimeout(t)
            res(m)
          }
        }
        proc.stdout.on('data', on)
        proc.stderr.on('data', on)
        on(Buffer.alloc(0))
      })
    try {
      const url = (await seen(/serving .* on (http:\/\/\S+)/, 90_000))[1]!
      expect((await fetch(`${url}/v2/health/ready`)).status).toBe(200)
      proc.kill('SIGTERM')
      await seen(/parent process \d+ exited, draining/, 10_000)
      await seen(/worker drained/, 30_000)
      // The server is gone, not re-parented and still serving.
      let refused = false
      for (let i = 0; i < 100 && !refused; i++) {
        refused = await fetch(`${url}/v2/health/ready`).then(
          () => false,
          () => true,
        )
        await new Promise((r) => setTimeout(r, 100))
      }
      expect(refused).toBe(true)
    } finally {
      proc.kill('SIGKILL')
      // When the drain failed, the re-parented server (its pid is in its JSON log lines) must not outlive the test.
      const pid = Number(/"pid":(\d+)/.exec(out)?.[1])
      if (pid) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // gone, as it should be
        }
      }
    }
  }, 150_000)
})
