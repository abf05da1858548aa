// Durable async predictions on the 3-node NATS cluster with JetStream (R3 stream and buckets,
// --kv-replicas 3), gateway and two workers on their own hosts: the NATS node that the running
// jobs' worker is connected to is killed (SIGKILL) while its batch runs. Every job must end
// succeeded with its own result (nothing lost), its result recorded once (one `completed` webhook),
// and the runs at the model are counted (at-least-once: a run may repeat after a redelivery).
import { afterAll, expect, it } from 'vitest'
import { sleepyLogPath, sleepyRuns, waitRunning, webhookReceiver } from '@cohort/test-support'
import { Lab } from './support/cluster.ts'
import { closeAgent } from './support/load.ts'

const lab = new Lab()
let hooks: Awaited<ReturnType<typeof webhookReceiver>> | undefined
afterAll(async () => {
  closeAgent()
  hooks?.server.close()
  await lab.close()
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

it("jobs running when their worker's NATS node is killed all end succeeded, each result recorded once", async () => {
  for (const h of ['n1', 'n2', 'n3', 'gw', 'w1', 'w2']) lab.net.addHost(h)
  const { urls } = await lab.nats(['n1', 'n2', 'n3'], { jetstream: true })
  hooks = await webhookReceiver('/', lab.net.clientIp)
  const log = sleepyLogPath()
  const args = ['--kv-replicas', '3', '--job-ack-wait-ms', '3000', '--max-batch-size', '8']
  // w1 alone first, so that it pulls the jobs; w2 joins to take what w1 cannot finish.
  const w1 = await lab.worker('w1', urls, 'js-a', { args, env: { SLEEPY_LOG: log } })
  const gw = await lab.gateway('gw', urls, ['--kv-replicas', '3'])

  const N = 12
  const xs = Array.from({ length: N }, (_, i) => 500 + i)
  for (const x of xs) {
    // A cluster that has just formed may not have its R3 records bucket ready: the gateway answers
    // 503 JOBS_UNAVAILABLE with Retry-After, and a client retries, as docs/errors.md says (the same
    // id, so a retried PUT is the same job). Bounded: 10 tries.
    let r = { status: 0, text: '' }
    for (let attempt = 0; attempt < 10; attempt++) {
      const res = await fetch(`${gw.url}/models/sleepy/predictions/job-${x}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', prefer: 'respond-async' },
        body: JSON.stringify({ input: { x, sleepMs: 2500 }, webhook: hooks.url, webhook_events_filter: ['completed'] }),
      })
      r = { status: res.status, text: await res.text() }
      if (r.status !== 503 || !r.text.includes('JOBS_UNAVAILABLE')) break
      await new Promise((ok) => setTimeout(ok, 1000))
    }
    expect(r.status, r.text).toBe(202)
  }
  // Kill the node w1 is connected to while its first batch runs.
  await waitRunning(log, 500, 60_000)
  let victim = ''
  for (const n of ['n1', 'n2', 'n3']) {
    if ((await lab.clients(n)).includes('cohort-worker')) victim = n
  }
  expect(victim, 'the node of worker js-a').not.toBe('')
  const node = lab.procs.find((p) => p.label === `nats-${victim}`)!
  node.proc.kill('SIGKILL')
  const killedAt = Date.now()
  const w2 = await lab.worker(
    'w2',
    urls.filter((u) => !u.includes(lab.net.host(victim).ip)),
    'js-b',
    { args, env: { SLEEPY_LOG: log } },
  )

  // Every job ends succeeded with its own y.
  const finals = new Map<number, { status: string; output?: { y: number }; attempts?: number; error?: string | null }>()
  const until = Date.now() + 120_000
  while (finals.size < N && Date.now() < until) {
    for (const x of xs) {
      if (finals.has(x)) continue
      const r = await fetch(`${gw.url}/predictions/job-${x}`).then(
        (r) => r.json() as Promise<{ status: string }>,
        () => undefined,
      )
      if (r && ['succeeded', 'failed', 'canceled'].includes(r.status)) finals.set(x, r)
    }
    await sleep(250)
  }
  const runs = sleepyRuns(log)
  const report = {
    killed: victim,
    jobs: N,
    finished: finals.size,
    succeeded: [...finals.values()].filter((f) => f.status === 'succeeded').length,
    lastFinishedAfterKillMs: Date.now() - killedAt,
    runsPerJob: xs.map((x) => runs.get(x) ?? 0),
    attempts: xs.map((x) => finals.get(x)?.attempts ?? 0),
  }
  console.log(`netns jobs-cluster: ${JSON.stringify(report)}`)
  expect(xs.map((x) => ({ x, status: finals.get(x)?.status, y: finals.get(x)?.output?.y, error: finals.get(x)?.error ?? null }))).toEqual(
    xs.map((x) => ({ x, status: 'succeeded', y: 2 * x, error: null })),
  )
  for (const x of xs) {
    expect(runs.get(x) ?? 0, `runs of job ${x}`).toBeGreaterThanOrEqual(1)
  }
  // Recorded once: one completed webhook per job (after any redelivery has had its ack wait).
  await sleep(4000)
  for (const x of xs) {
    expect(hooks.got.filter((h) => h.body.id === `job-${x}` && h.event === 'completed').length, `completed webhooks of job ${x}`).toBe(1)
  }
  await Promise.all([w1.kill('SIGKILL'), w2.kill('SIGKILL')])
}, 240_000)
