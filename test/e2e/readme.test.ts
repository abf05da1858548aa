// The README's quick start, as printed: `npm start`, then its curl commands.
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { spawn } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ifStarted } from '@cohort/test-support'

const ROOT = new URL('../../', import.meta.url).pathname
const README = readFileSync(new URL('README.md', `file://${ROOT}`), 'utf8')

function block(tag: string): string {
  const m = README.match(new RegExp(`<!-- readme-test: ${tag} -->\\s*\`\`\`bash\\n([\\s\\S]*?)\`\`\``))
  if (!m?.[1]) {
    throw new Error(`README has no block tagged ${tag}`)
  }
  return m[1]
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

function bash(cmd: string): Promise<string> {
  return new Promise((resolve, reject) => execFile('bash', ['-c', cmd], { timeout: 20_000 }, (e, out, err) => (e ? reject(new Error(`${e.message}\n${err}`)) : resolve(out))))
}

describe('README quick start', () => {
  let port = 0
  let proc: ReturnType<typeof spawn>
  beforeAll(async () => {
    port = await freePort()
    proc = spawn('npm', ['start'], { cwd: ROOT, env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    let out = ''
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`npm start did not come up:\n${out}`)), 45_000)
      const on = (d: Buffer) => {
        out += d.toString()
        if (out.includes('serving demo on')) {
          clearTimeout(t)
          resolve()
        }
      }
      proc.stdout?.on('data', on)
      proc.stderr?.on('data', on)
    })
  })
  afterAll(() => {
    const pid = ifStarted(proc)?.pid
    if (pid) {
      process.kill(-pid, 'SIGTERM')
    }
  })

  it('serves the curl example of the README', async () => {
    const out = await bash(block('infer').replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`))
    const body = JSON.parse(out)
    expect(body.model_name).toBe('demo')
    expect(body.outputs[0]).toMatchObject({ name: 'logits', datatype: 'FP32', shape: [1, 10] })
    expect(body.outputs[0].data).toHaveLength(10)
    expect(body.outputs[0].data.every((v: unknown) => typeof v === 'number' && Number.isFinite(v))).toBe(true)
  })

  it('serves the bulk example as NDJSON: one line per input, the bad one failed alone', async () => {
    const out = await bash(block('bulk').replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`))
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines.map((l) => l.index).sort()).toEqual([0, 1, 2])
    const byIndex = new Map(lines.map((l) => [l.index, l]))
    expect(byIndex.get(0)).toMatchObject({ status: 'succeeded' })
    expect(byIndex.get(0).output.logits).toHaveLength(10)
    expect(byIndex.get(1)).toMatchObject({ status: 'failed' })
    expect(byIndex.get(2)).toMatchObject({ status: 'succeeded' })
  })

  it('serves the Cog-style example with the same numbers', async () => {
    const a = JSON.parse(await bash(block('infer').replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)))
    const b = JSON.parse(await bash(block('predictions').replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)))
    expect(b.status).toBe('succeeded')
    expect(b.output.logits).toEqual(a.outputs[0].data)
  })
})
