// TLS smoke test with a self-signed certificate made here by openssl: `cohort serve --tls-cert
// --tls-key` called over node:https (with --api-key and --max-body-bytes), talking to a nats-server
// that requires TLS through --nats-tls-ca. A bad certificate, or no CA, stops the command with one line.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SLEEPY_PREDICTOR, spawnCohort, startNatsServer, type CliProcess, type NatsServerHandle, type JsonBody, ifStarted } from '@cohort/test-support'

let dir = ''
let serve: CliProcess
let nats: NatsServerHandle
let port = 0

function httpsCall(path: string, o: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: JsonBody }> {
  return new Promise((resolve, reject) => {
    const data = o.body === undefined ? undefined : JSON.stringify(o.body)
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: o.method ?? (data ? 'POST' : 'GET'),
        rejectUnauthorized: false, // self-signed
        headers: { ...(data ? { 'content-type': 'application/json' } : {}), ...o.headers },
      },
      (res) => {
        let text = ''
        res.on('data', (d: Buffer) => (text += d.toString()))
        res.on('end', () => {
          let body: unknown = text
          try {
            body = JSON.parse(text)
          } catch {
            // text
          }
          resolve({ status: res.statusCode ?? 0, body })
        })
      },
    )
    req.on('error', reject)
    req.end(data)
  })
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cohort-tls-'))
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=127.0.0.1',
      '-days',
      '1',
      // nats.js checks the name "localhost" when --nats names an IP address.
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  )
  nats = await startNatsServer({ extraConfig: `tls { cert_file: "${join(dir, 'cert.pem')}", key_file: "${join(dir, 'key.pem')}" }` })
  serve = spawnCohort([
    'serve',
    '--port',
    '0',
    '--threads',
    '1',
    '--predictor',
    SLEEPY_PREDICTOR,
    '--nats',
    nats.url,
    '--nats-tls-ca',
    join(dir, 'cert.pem'),
    '--tls-cert',
    join(dir, 'cert.pem'),
    '--tls-key',
    join(dir, 'key.pem'),
    '--api-key',
    'tls-key-1',
    '--max-body-bytes',
    '4096',
  ])
  const [, p] = await serve.waitFor(/serving sleepy on https:\/\/127\.0\.0\.1:(\d+)/, 60_000)
  port = Number(p)
})

afterAll(async () => {
  await ifStarted(serve)?.stop('SIGKILL')
  await ifStarted(nats)?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('HTTPS (--tls-cert / --tls-key)', () => {
  it('answers over TLS', async () => {
    expect((await httpsCall('/v2/health/ready')).status).toBe(200)
    const r = await httpsCall('/models/sleepy/predictions', { body: { input: { x: 4 } }, headers: { authorization: 'Bearer tls-key-1' } })
    expect(r.status).toBe(200)
    expect(r.body.output).toMatchObject({ y: 8 })
    expect((await httpsCall('/v2')).status).toBe(401)
    expect(serve.output()).toMatch(/auth 1 API key, rate limit off, cors off, https/)
  })

  it('applies --max-body-bytes', async () => {
    const big = await httpsCall('/models/sleepy/predictions', {
      body: { input: { x: 1 }, pad: 'p'.repeat(5000) },
      headers: { authorization: 'Bearer tls-key-1' },
    })
    expect(big.status).toBe(413)
    expect(big.body.code).toBe('PAYLOAD_TOO_LARGE')
  })

  it('refuses a NATS server whose certificate it cannot verify (no --nats-tls-ca)', async () => {
    const noCa = spawnCohort(['serve', '--port', '0', '--nats', nats.url, '--predictor', SLEEPY_PREDICTOR])
    expect(await noCa.exited).toBe(1)
    expect(noCa.output().trim()).toMatch(/^cohort: cannot connect to NATS at nats:\/\/127\.0\.0\.1:\d+: self-signed certificate$/)
  })

  it('refuses plain HTTP on the TLS port: the connection is closed without an HTTP answer', async () => {
    const r = await fetch(`http://127.0.0.1:${port}/v2/health/live`).then(
      (x) => ({ status: x.status }),
      (e: unknown) => ({ error: e instanceof Error ? e.message : String(e), cause: ((e as { cause?: { code?: string } }).cause ?? {}).code }),
    )
    // A plain request to a TLS listener is not a TLS ClientHello: the server drops the socket, and
    // the client sees it closed before any response (never a status, 200 or otherwise).
    expect(r).toEqual({ error: 'fetch failed', cause: 'UND_ERR_SOCKET' })
  })

  it('stops with one line on a certificate that does not parse', async () => {
    writeFileSync(join(dir, 'bad.pem'), 'not a certificate\n')
    const bad = spawnCohort(['serve', '--port', '0', '--predictor', SLEEPY_PREDICTOR, '--tls-cert', join(dir, 'bad.pem'), '--tls-key', join(dir, 'key.pem')])
    expect(await bad.exited).toBe(1)
    expect(bad.output().trim()).toMatch(/^cohort: --tls-cert \S+bad\.pem \/ --tls-key \S+: .+$/)
    const half = spawnCohort(['serve', '--port', '0', '--tls-cert', join(dir, 'cert.pem')])
    expect(await half.exited).toBe(1)
    expect(half.output().trim()).toBe('cohort: --tls-cert and --tls-key go together')
  })
})
