#!/usr/bin/env node
// The images' HEALTHCHECK: GET http://127.0.0.1:$COHORT_HEALTH_PORT$COHORT_HEALTH_PATH (defaults:
// PORT or 8080, /v2/health/ready) and exit 0 on 200, 1 on anything else (503 while loading or
// draining, no answer within COHORT_HEALTH_TIMEOUT_MS, default 2000 ms). Plain Node, no dependency:
// the slim images have no curl. The worker images point it at the worker's --metrics-port (9090).
const port = process.env.COHORT_HEALTH_PORT ?? process.env.PORT ?? '8080'
const path = process.env.COHORT_HEALTH_PATH ?? '/v2/health/ready'
const timeoutMs = Number(process.env.COHORT_HEALTH_TIMEOUT_MS ?? 2000)
const url = `http://127.0.0.1:${port}${path}`
try {
  const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) })
  await r.body?.cancel()
  if (r.status !== 200) {
    console.error(`healthcheck: ${url} answered ${r.status}`)
    process.exit(1)
  }
} catch (e) {
  console.error(`healthcheck: ${url}: ${e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e)}`)
  process.exit(1)
}
