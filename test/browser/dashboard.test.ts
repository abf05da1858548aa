// The live dashboard in a real browser: `cohort serve` (embedded, demo model + the sleep-based
// predictor) under background load, `/dashboard` in headless Chromium (playwright-core with
// Debian's /usr/bin/chromium; no browser download). The numbers on the page must move while load
// runs; the screenshot lands in docs/dashboard.png.
import { existsSync, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type Browser, type Page } from 'playwright-core'
import { SLEEPY_PREDICTOR, spawnCohort, type CliProcess } from '@cohort/test-support'

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium'
const SCREENSHOT = fileURLToPath(new URL('../../docs/dashboard.png', import.meta.url))
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Background traffic: a varying number of concurrent clients, so batch sizes and queues move. */
function startLoad(base: string) {
  let stop = false
  let sent = 0
  let failed = 0
  const started = Date.now()
  const row = Array.from({ length: 256 }, (_, i) => i / 256)
  const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    sent++
    try {
      const r = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
      await r.arrayBuffer()
      if (r.status !== 200) {
        failed++
      }
    } catch {
      failed++
    }
  }
  // Sleepy: 2..40 clients in a slow wave; each request sleeps 20 ms per batch in the worker.
  const client = async (k: number) => {
    while (!stop) {
      const t = (Date.now() - started) / 1000
      const active = 2 + Math.round(38 * (0.5 + 0.5 * Math.sin(t / 3)))
      if (k >= active) {
        await sleep(50)
        continue
      }
      // One in 40 asks for an impossible deadline: it is shed, which the dashboard shows.
      const doomed = Math.random() < 1 / 40
      await post('/models/sleepy/predictions', { input: { x: k } }, doomed ? { 'x-cohort-timeout-ms': '1' } : {})
    }
  }
  // Demo (the ONNX MLP): a steady trickle.
  const demo = async () => {
    while (!stop) {
      await post('/v2/models/demo/infer', { inputs: [{ name: 'input', shape: [1, 256], datatype: 'FP32', data: row }] })
      await sleep(15)
    }
  }
  const all = Promise.all([...Array.from({ length: 40 }, (_, k) => client(k)), demo(), demo()])
  return {
    stats: () => ({ sent, failed }),
    async stop() {
      stop = true
      await all
    },
  }
}

/** What the page shows now, read from the DOM by data-testid. */
async function read(page: Page) {
  return page.evaluate(() => {
    const q = (sel: string) => document.querySelector(sel)
    const hist = q('[data-testid="batch-hist"]')
    return {
      rps: Number(q('[data-testid="kpi-rps"]')?.getAttribute('data-value') ?? NaN),
      rpsText: q('[data-testid="kpi-rps"]')?.textContent ?? '',
      p99: Number(q('[data-testid="kpi-p99"]')?.getAttribute('data-value') ?? NaN),
      modelRps: Number((q('[data-testid="model-rps"][data-model="sleepy"]')?.textContent ?? '').replace(/,/g, '')),
      requests: Number((q('[data-testid="model-requests"][data-model="sleepy"]')?.textContent ?? '').replace(/,/g, '')),
      batchCounts: hist?.getAttribute('data-counts') ?? '',
      batchTotal: Number(hist?.getAttribute('data-total') ?? NaN),
      batchesTotal: Number((q('[data-testid="batches-total"]')?.textContent ?? '').replace(/,/g, '')),
      workers: document.querySelectorAll('[data-testid="worker-row"]').length,
      status: q('[data-testid="status"]')?.textContent ?? '',
    }
  })
}

describe('dashboard in headless Chromium', () => {
  let serve: CliProcess
  let base = ''
  let browser: Browser | undefined
  let load: ReturnType<typeof startLoad> | undefined

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`no Chromium at ${CHROMIUM} (install it: apt-get install chromium, or set CHROMIUM_PATH)`)
    }
    serve = spawnCohort(['serve', '--model', 'demo', '--predictor', SLEEPY_PREDICTOR, '--port', '0', '--threads', '1'], { SLEEPY_MS: '20' })
    const m = await serve.waitFor(/serving .* on (http:\/\/[^\s]+)/, 90_000)
    base = m[1]!
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true })
  })

  afterAll(async () => {
    await load?.stop()
    await browser?.close()
    await serve?.stop()
  })

  it('shows throughput, latency and batch sizes that move under load', async () => {
    load = startLoad(base)
    const page = await browser!.newPage({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 })
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(e.message))
    page.on('console', (msg) => {
      if (msg.type() === 'error') {
        errors.push(msg.text())
      }
    })
    await page.goto(`${base}/dashboard#sleepy`)
    // Rates need two samples (the page polls every second).
    await page.waitForFunction(
      () => Number(document.querySelector('[data-testid="kpi-rps"]')?.getAttribute('data-value')) > 0 &&
        Number(document.querySelector('[data-testid="batch-hist"]')?.getAttribute('data-total')) > 0,
      undefined,
      { timeout: 30_000, polling: 200 },
    )
    const first = await read(page)
    await page.waitForTimeout(2000)
    const second = await read(page)

    expect(first.rps).toBeGreaterThan(0)
    expect(second.rps).toBeGreaterThan(0)
    expect(second.modelRps).toBeGreaterThan(0)
    expect(second.p99).toBeGreaterThan(0)
    // The throughput number and the batch histogram changed between the two reads.
    expect([first.rps, first.requests]).not.toEqual([second.rps, second.requests])
    expect(second.requests).toBeGreaterThan(first.requests)
    expect(first.batchTotal).toBeGreaterThan(0)
    expect(second.batchCounts).not.toBe(first.batchCounts)
    expect(second.batchesTotal).toBeGreaterThan(first.batchesTotal)
    expect(second.workers).toBeGreaterThanOrEqual(2) // one worker, two model servers
    expect(second.status).toContain('live')

    // Let the charts gather some history, then keep a picture of the page under load.
    await page.waitForTimeout(Number(process.env['DASHBOARD_SCREENSHOT_WAIT_MS'] ?? 20_000))
    mkdirSync(dirname(SCREENSHOT), { recursive: true })
    await page.screenshot({ path: SCREENSHOT, type: 'png' })
    expect(errors).toEqual([])
    expect(load.stats().sent).toBeGreaterThan(200)
  })
})
