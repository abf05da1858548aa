import {
  CohortError,
  decodeReply,
  decodeValue,
  encodeCancel,
  encodeRequest,
  fromWire,
  type InferReply,
  type InferRequest,
  type ModelMeta,
  type Subjects,
} from '@cohort/protocol'
import type { AbortSignalLike, Transport } from '@cohort/transport'

/** The gateway's side of the bus: infer, metadata, discovery, cancellation. */
export class Upstream {
  constructor(
    readonly transport: Transport,
    readonly subjects: Subjects,
    readonly metaTimeoutMs: number,
  ) {}

  /**
   * Send a request and wait for its reply; on client abort, tell the workers to drop its
   * queued items. Throws CohortError (request-level failures and the first failed item).
   */
  async infer(req: InferRequest, timeoutMs: number, signal: AbortSignalLike | undefined): Promise<InferReply> {
    const bytes = encodeRequest(req)
    if (bytes.byteLength > this.transport.maxPayload) {
      throw new CohortError(
        'PAYLOAD_TOO_LARGE',
        `encoded request of ${bytes.byteLength} bytes exceeds the bus limit (NATS max_payload) of ${this.transport.maxPayload} bytes`,
      )
    }
    let raw: Uint8Array
    const started = Date.now()
    const opts = { timeoutMs, ...(signal ? { signal } : {}) }
    try {
      try {
        raw = await this.transport.request(this.subjects.infer(req.model), bytes, opts)
      } catch (e) {
        if (!(e instanceof CohortError && e.code === 'NO_WORKER')) {
          throw e
        }
        // No worker with spare capacity listens on the main subject: every worker listens on
        // the overflow subject and queues there (up to its bound).
        opts.timeoutMs = Math.max(1, timeoutMs - (Date.now() - started))
        raw = await this.transport.request(this.subjects.overflow(req.model), bytes, opts)
      }
    } catch (e) {
      if (e instanceof CohortError && (e.code === 'CANCELLED' || e.code === 'DEADLINE_EXCEEDED')) {
        this.transport.publish(this.subjects.cancel(req.model), encodeCancel({ v: 1, id: req.id }))
      }
      if (e instanceof CohortError && e.code === 'NO_WORKER') {
        throw await this.#noWorker(req.model, e)
      }
      throw e
    }
    const reply = fromWorker(() => decodeReply(raw))
    if (reply.error) {
      throw fromWire(reply.error)
    }
    return reply
  }

  /** Metadata of a model from any of its workers; 404 if unknown, 503 if known but unserved. */
  async meta(model: string): Promise<ModelMeta> {
    try {
      const raw = await this.transport.request(this.subjects.meta(model), new Uint8Array(0), {
        timeoutMs: this.metaTimeoutMs,
      })
      return fromWorker(() => decodeValue(raw) as ModelMeta)
    } catch (e) {
      if (e instanceof CohortError && e.code === 'NO_WORKER') {
        throw await this.#noWorker(model, e)
      }
      throw e
    }
  }

  /** Every model any worker serves right now (merged by name; ready if any worker is). */
  async discover(): Promise<{ models: ModelMeta[]; workers: number }> {
    const replies = await this.transport.requestAll(this.subjects.discover(), new Uint8Array(0), {
      timeoutMs: Math.min(this.metaTimeoutMs, 250),
    })
    const byName = new Map<string, ModelMeta>()
    for (const r of replies) {
      let v: { models?: ModelMeta[] }
      try {
        v = decodeValue(r) as { models?: ModelMeta[] }
      } catch {
        continue // One broken worker must not break discovery for every model.
      }
      for (const m of Array.isArray(v?.models) ? v.models : []) {
        if (typeof m?.name !== 'string') {
          continue
        }
        const prev = byName.get(m.name)
        byName.set(m.name, prev ? { ...prev, ready: prev.ready || m.ready } : m)
      }
    }
    return { models: [...byName.values()].sort((a, b) => a.name.localeCompare(b.name)), workers: replies.length }
  }

  async #noWorker(model: string, cause: Error): Promise<CohortError> {
    const known = await this.transport.directory.known(model).catch(() => undefined)
    if (known === false) {
      return new CohortError('MODEL_NOT_FOUND', `model "${model}" is not served by any worker`, { cause })
    }
    return new CohortError('NO_WORKER', `no worker is serving model "${model}" right now`, { cause, retryAfterS: 1 })
  }
}

/** Decode what a worker sent; an unreadable message is the worker's fault (500), not the client's. */
function fromWorker<T>(decode: () => T): T {
  try {
    return decode()
  } catch (e) {
    throw new CohortError('INTERNAL', `a worker sent an unreadable reply: ${e instanceof Error ? e.message : 'decode failed'}`, { cause: e })
  }
}
