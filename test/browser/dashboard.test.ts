// The live dashboard in a real browser: `cohort serve` (embedded, demo model + the sleep-based
// predictor) under background load, `/dashboard` in headless Chromium (playwright-core with
// Debian's /usr/bin/chromium; no browser download). The numbers on the page must move while load
// runs and, once it stops, equal what `/metrics` says; a page opened later shows the history the
// gateway sampled before it; with `--api-key` the page asks for a key and then shows the data.
// The screenshot goes to a temporary file; only `npm run docs:dashboard-screenshot` (which sets
// DASHBOARD_SCREENSHOT=docs/dashboard.png) replaces the tracked picture.
import { existsSync, mkdirSync, mkdtempSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type Browser, type Page } from 'playwright-core'
import { parsePrometheus } from '@cohort/metrics'
import { SLEEPY_PREDICTOR, spawnCohort, type CliProcess, ifStarted } from '@cohort/test-support'

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium'
/** Where the screenshot goes: a temporary file unless DASHBOARD_SCREENSHOT names one. */
const SCREENSHOT = process.env['DASHBOARD_SCREENSHOT'] ? resolve(process.env['DASHBOARD_SCREENSHOT']) : join(mkdtempSync(join(tmpdir(), 'cohort-dashboard-')), 'dashboard.png')
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** Samples the charts gather before the picture; a page opened later must show at least these. */
const HISTORY_POINTS = 8

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
      requestsValue: Number(q('[data-testid="model-requests"][data-model="sleepy"]')?.getAttribute('data-value') ?? NaN),
      demoRequestsValue: Number(q('[data-testid="model-requests"][data-model="demo"]')?.getAttribute('data-value') ?? NaN),
      rpsPoints: Number(q('[data-testid="chart-rps"]')?.getAttribute('data-points') ?? NaN),
      batchCounts: hist?.getAttribute('data-counts') ?? '',
      batchTotal: Number(hist?.getAttribute('data-total') ?? NaN),
      batchesTotal: Number((q('[data-testid="batches-total"]')?.textContent ?? '').replace(/,/g, '')),
      batchesValue: Number(q('[data-testid="batches-total"]')?.getAttribute('data-value') ?? NaN),
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
    await ifStarted(serve)?.stop()
  })

  it('shows throughput, latency and batch sizes that move under load, then the counts /metrics has', async () => {
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
      () =>
        Number(document.querySelector('[data-testid="kpi-rps"]')?.getAttribute('data-value')) > 0 &&
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

    // Let the charts gather some history (HISTORY_POINTS samples, one per poll of the page), then
    // keep a picture of the page under load. Only the picture for the docs
    // (`npm run docs:dashboard-screenshot`) waits longer, for fuller charts.
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid="chart-rps"]')?.getAttribute('data-points')) >= n, HISTORY_POINTS, {
      timeout: 60_000,
      polling: 250,
    })
    await page.waitForTimeout(Number(process.env['DASHBOARD_SCREENSHOT_WAIT_MS'] ?? (process.env['DASHBOARD_SCREENSHOT'] ? 20_000 : 0)))
    const pointsBefore = (await read(page)).rpsPoints
    mkdirSync(dirname(SCREENSHOT), { recursive: true })
    await page.screenshot({ path: SCREENSHOT, type: 'png' })
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(10_000)
    console.log(`dashboard: screenshot in ${SCREENSHOT}`)
    expect(load.stats().sent).toBeGreaterThan(200)

    // Load stops: every counter settles, and the page must show what /metrics says.
    await load.stop()
    const text = await (await fetch(`${base}/metrics`)).text()
    const m = parsePrometheus(text)
    // All result codes of one model's requests (labels render sorted: code, then model).
    const requestsOf = (model: string) => [...m].filter(([k]) => k.startsWith('cohort_requests_total{') && k.endsWith(`model="${model}"}`)).reduce((a, [, v]) => a + v, 0)
    const want = { sleepy: requestsOf('sleepy'), demo: requestsOf('demo'), batches: m.get('cohort_batch_size_count{model="sleepy"}') }
    expect(want.sleepy).toBeGreaterThan(0)
    expect(want.demo).toBeGreaterThan(0)
    expect(want.batches).toBeGreaterThan(0)
    // The page samples each second: wait until it has caught up, then compare.
    await page
      .waitForFunction(
        (w) => {
          const v = (sel: string) => Number(document.querySelector(sel)?.getAttribute('data-value'))
          return (
            v('[data-testid="model-requests"][data-model="sleepy"]') === w.sleepy &&
            v('[data-testid="model-requests"][data-model="demo"]') === w.demo &&
            v('[data-testid="batches-total"]') === w.batches
          )
        },
        want,
        { timeout: 15_000, polling: 250 },
      )
      .catch(() => undefined) // the assertions below say what differs
    const shown = await read(page)
    expect({ sleepy: shown.requestsValue, demo: shown.demoRequestsValue, batches: shown.batchesValue }).toEqual(want)
    // The formatted text is the same number.
    expect(shown.requests).toBe(want.sleepy)
    expect(shown.batchesTotal).toBe(want.batches)

    // A page opened now shows the history the gateway sampled before it (not "collecting samples").
    const later = await browser!.newPage({ viewport: { width: 1280, height: 800 } })
    await later.goto(`${base}/dashboard#sleepy`)
    await later.waitForFunction(() => document.querySelector('[data-testid="chart-rps"]') !== null, undefined, { timeout: 10_000 })
    const fresh = await read(later)
    // At least the samples the first page had drawn before the load stopped (a page without the
    // gateway's history would start from one).
    expect(fresh.rpsPoints, 'points on the throughput chart at the first render').toBeGreaterThanOrEqual(Math.max(pointsBefore, HISTORY_POINTS))
    await later.close()
    expect(errors).toEqual([])
  })
})

describe('dashboard in headless Chromium with authentication on', () => {
  let serve: CliProcess
  let base = ''
  let browser: Browser | undefined

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`no Chromium at ${CHROMIUM} (install it: apt-get install chromium, or set CHROMIUM_PATH)`)
    }
    serve = spawnCohort(['serve', '--model', 'demo', '--port', '0', '--threads', '1', '--api-key', 'dash-key'])
    const m = await serve.waitFor(/serving .* on (http:\/\/[^\s]+)/, 90_000)
    base = m[1]!
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true })
  })

  afterAll(async () => {
    await browser?.close()
    await ifStarted(serve)?.stop()
  })

  it('asks for a key, keeps it in sessionStorage, sends it as a bearer header and never in the URL', async () => {
    const page = await browser!.newPage()
    const dataRequests: { url: string; auth: string | undefined }[] = []
    page.on('request', (r) => {
      if (r.url().includes('/dashboard/data')) {
        dataRequests.push({ url: r.url(), auth: r.headers()['authorization'] })
      }
    })
    await page.goto(`${base}/dashboard`)
    await page.waitForSelector('[data-testid="auth"]:not([hidden])', { timeout: 10_000 })
    expect(await page.textContent('[data-testid="status"]')).toContain('key required')
    // A wrong key is refused and the form stays.
    await page.fill('[data-testid="auth-key"]', 'wrong')
    await page.click('[data-testid="auth-submit"]')
    await page.waitForFunction(() => document.getElementById('auth-note')?.textContent.includes('refused'), undefined, { timeout: 10_000 })
    await page.fill('[data-testid="auth-key"]', 'dash-key')
    await page.click('[data-testid="auth-submit"]')
    await page.waitForFunction(() => document.querySelector('[data-testid="status"]')?.textContent.includes('live'), undefined, { timeout: 10_000 })
    expect(await page.isHidden('[data-testid="auth"]')).toBe(true)
    expect(await page.evaluate(() => sessionStorage.getItem('cohort.dashboard.key'))).toBe('dash-key')
    // A reload in the same tab needs no key again.
    await page.reload()
    await page.waitForFunction(() => document.querySelector('[data-testid="status"]')?.textContent.includes('live'), undefined, { timeout: 10_000 })
    expect(dataRequests.some((r) => r.auth === 'Bearer dash-key')).toBe(true)
    expect(dataRequests.every((r) => !r.url.includes('dash-key') && !r.url.includes('?'))).toBe(true)
    await page.close()
  })
})
