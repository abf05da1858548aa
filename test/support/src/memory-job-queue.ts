import type { JobDelivery, JobQueue } from '@cohort/transport'

interface Msg {
  model: string
  id: string
  deliveries: number
  /** Not deliverable before this time (ms): in flight until its ack wait ends, or after a nak delay. */
  notBefore: number
  acked: boolean
}

/**
 * A {@link JobQueue} in memory for unit tests of what sits on top of it (the worker's JobRunner, the
 * gateway's DurableJobs), modelled on the JetStream one: records with revisions and compare-and-set,
 * a work queue deduplicated by id, deliveries counted (without limit, as `createNatsJobQueue`
 * configures its consumer), ack wait, nak delay, `working()` extensions. Also records what happened
 * (`log`) for assertions, and can swallow deliveries (`swallow`: as if sent to a dead worker).
 */
export class MemoryJobQueue implements JobQueue {
  readonly maxDeliver: number
  readonly #records = new Map<string, { value: Uint8Array; revision: number }>()
  readonly #msgs: Msg[] = []
  readonly #seen = new Set<string>()
  #revision = 0
  #closed = false
  /** What happened, in order: `enqueue <id>`, `deliver <id> <n>`, `ack <id>`, `nak <id>`. */
  readonly log: string[] = []
  /** Make the next `n` updates fail as if the record had moved on (a concurrent writer). */
  failUpdates = 0
  /** Deliver the next `n` jobs to nobody (a dead worker's pull request): they come back after the ack wait. */
  swallow = 0

  constructor(o: { maxDeliver?: number } = {}) {
    this.maxDeliver = o.maxDeliver ?? 10
  }

  create(id: string, record: Uint8Array): Promise<{ created: boolean; value: Uint8Array; revision: number }> {
    const cur = this.#records.get(id)
    if (cur) {
      return Promise.resolve({ created: false, value: cur.value, revision: cur.revision })
    }
    const revision = ++this.#revision
    this.#records.set(id, { value: record, revision })
    return Promise.resolve({ created: true, value: record, revision })
  }

  get(id: string): Promise<{ value: Uint8Array; revision: number } | undefined> {
    const cur = this.#records.get(id)
    return Promise.resolve(cur ? { ...cur } : undefined)
  }

  update(id: string, record: Uint8Array, revision: number): Promise<boolean> {
    const cur = this.#records.get(id)
    if (this.failUpdates > 0) {
      this.failUpdates--
      if (cur) {
        cur.revision = ++this.#revision // someone else wrote it
      }
      return Promise.resolve(false)
    }
    if (!cur || cur.revision !== revision) {
      return Promise.resolve(false)
    }
    this.#records.set(id, { value: record, revision: ++this.#revision })
    return Promise.resolve(true)
  }

  enqueue(model: string, id: string): Promise<void> {
    this.log.push(`enqueue ${id}`)
    if (this.#seen.has(id)) {
      return Promise.resolve() // the stream's duplicate window (msgID)
    }
    this.#seen.add(id)
    this.#msgs.push({ model, id, deliveries: 0, notBefore: 0, acked: false })
    return Promise.resolve()
  }

  /** Jobs not acked yet (in the stream). */
  pending(model?: string): string[] {
    return this.#msgs.filter((m) => !m.acked && (model === undefined || m.model === model)).map((m) => m.id)
  }

  async pull(model: string, max: number, o: { ackWaitMs: number; expiresMs: number }): Promise<JobDelivery[]> {
    const until = Date.now() + o.expiresMs
    for (;;) {
      if (this.#closed) {
        return []
      }
      const now = Date.now()
      const ready = this.#msgs.filter((m) => m.model === model && !m.acked && m.notBefore <= now).slice(0, max)
      while (this.swallow > 0 && ready.length > 0) {
        this.swallow--
        this.#deliver(ready.shift()!, o.ackWaitMs) // counted, never seen
      }
      if (ready.length > 0) {
        return ready.map((m) => this.#deliver(m, o.ackWaitMs))
      }
      if (now >= until) {
        return []
      }
      await new Promise((r) => setTimeout(r, 5))
    }
  }

  #deliver(m: Msg, ackWaitMs: number): JobDelivery {
    m.deliveries++
    m.notBefore = Date.now() + ackWaitMs
    this.log.push(`deliver ${m.id} ${m.deliveries}`)
    const n = m.deliveries
    const current = () => m.deliveries === n && !m.acked // a stale delivery's ack does nothing
    return {
      id: m.id,
      deliveries: n,
      ack: () => {
        if (current()) {
          m.acked = true
          this.log.push(`ack ${m.id}`)
        }
      },
      nak: (delayMs = 0) => {
        if (current()) {
          m.notBefore = Date.now() + delayMs
          this.log.push(`nak ${m.id}`)
        }
      },
      working: () => {
        if (current()) {
          m.notBefore = Date.now() + ackWaitMs
        }
      },
    }
  }

  close(): Promise<void> {
    this.#closed = true
    return Promise.resolve()
  }
}
