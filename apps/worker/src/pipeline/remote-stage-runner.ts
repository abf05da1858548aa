import { CohortError, decodeReply, encodeRequest, isErrorCode, type InferReply, type InferRequest, type Subjects } from '@cohort/protocol'
import { decodeStageResults, encodeStagePart, type StageContext, type StageRunner } from '@cohort/pipeline'
import { ItemError } from '@cohort/predictor'
import type { Transport } from '@cohort/transport'

/** Default in-flight batches from one host to a remote stage. */
export const DEFAULT_REMOTE_CONCURRENCY = 4
/** Default most stage batches coalesced into one message. */
export const DEFAULT_REMOTE_MAX_PARTS = 16
/** Request timeout when an item has no deadline, ms. */
const NO_DEADLINE_TIMEOUT_MS = 30_000

/** Options of {@link RemoteStageRunner}. */
export interface RemoteStageRunnerOptions {
  transport: Transport
  subjects: Subjects
  pipeline: string
  stage: string
  /** Batches in flight at once (overlap across processes). @default 4 */
  concurrency?: number
  /**
   * Most stage batches sent in one message: batches handed to the runner in the same run of
   * microtasks travel together, one part each. @default 16
   */
  maxParts?: number
}

interface Waiting {
  items: unknown[]
  ctx: StageContext
  /** Per item, its result or an Error. */
  resolve(rs: unknown[]): void
  reject(e: unknown): void
}

/**
 * Runs a stage on another worker (`cohort worker <dir> --stage <name>`). Each batch the host's
 * stage engine forms is ONE part of a request on `cohort.stage.<pipeline>.<stage>`: the batch
 * columnar (`encodeStagePart`: one typed array per tensor field, row offsets for ragged ones)
 * with its items' deadlines; batches handed over in the same run of microtasks share one message
 * (up to `maxParts`). The stage worker queues each part as one entry and answers each part with
 * one columnar result (`decodeStageResults`), so nothing is encoded, queued or answered per item.
 */
export class RemoteStageRunner implements StageRunner {
  readonly concurrency: number
  readonly #o: RemoteStageRunnerOptions
  readonly #maxParts: number
  #seq = 0
  #waiting: Waiting[] = []
  #flushQueued = false

  constructor(o: RemoteStageRunnerOptions) {
    this.#o = o
    this.concurrency = o.concurrency ?? DEFAULT_REMOTE_CONCURRENCY
    this.#maxParts = Math.max(1, o.maxParts ?? DEFAULT_REMOTE_MAX_PARTS)
  }

  run(items: unknown[], ctx: StageContext): Promise<unknown[]> {
    if (items.length === 0) {
      return Promise.resolve([])
    }
    return new Promise((resolve, reject) => {
      this.#waiting.push({ items, ctx, resolve, reject })
      if (!this.#flushQueued) {
        this.#flushQueued = true
        void Promise.resolve().then(() => this.#flush())
      }
    })
  }

  #flush(): void {
    this.#flushQueued = false
    const all = this.#waiting
    this.#waiting = []
    for (let at = 0; at < all.length; at += this.#maxParts) {
      const parts = all.slice(at, at + this.#maxParts)
      this.#send(parts).catch((e: unknown) => parts.forEach((w) => w.reject(e)))
    }
  }

  async #send(parts: Waiting[]): Promise<void> {
    const { transport: t, subjects: s, pipeline, stage } = this.#o
    const now = Date.now()
    // The message lives until the latest deadline of its items (any item without one: the default).
    let deadline = 0
    for (const w of parts) {
      for (const d of w.ctx.deadlines) {
        deadline = Math.max(deadline, Number.isFinite(d) ? d : now + NO_DEADLINE_TIMEOUT_MS)
      }
    }
    const live: Waiting[] = []
    for (const w of parts) {
      if (w.ctx.deadlines.every((d) => d <= now)) {
        w.resolve(w.items.map(() => new ItemError(`deadline passed before stage ${stage}`, 'DEADLINE_EXCEEDED')))
      } else {
        live.push(w)
      }
    }
    const [first] = live
    if (first === undefined) {
      return
    }
    const req: InferRequest = {
      v: 1,
      id: `${pipeline}.${stage}.${(this.#seq++).toString(36)}.${Math.random().toString(36).slice(2, 8)}`,
      model: `${pipeline}.${stage}`,
      deadline,
      items: live.map((w) => encodeStagePart(w.items, w.ctx.deadlines)),
    }
    const bytes = encodeRequest(req)
    const opts = { timeoutMs: deadline - now, signal: first.ctx.signal }
    let raw: Uint8Array
    try {
      raw = await t.request(s.stage(pipeline, stage), bytes, opts)
    } catch (e) {
      // A full worker leaves the main subject; the overflow subject always has every worker.
      if (!(e instanceof CohortError && e.code === 'NO_WORKER')) {
        throw e
      }
      raw = await t.request(`${s.stage(pipeline, stage)}.overflow`, bytes, { ...opts, timeoutMs: Math.max(1, deadline - Date.now()) }).catch((e2: unknown) => {
        throw e2 instanceof CohortError && e2.code === 'NO_WORKER'
          ? new CohortError('NO_WORKER', `no worker serves stage ${stage} of ${pipeline} (start: cohort worker <dir> --stage ${stage})`)
          : e2
      })
    }
    const reply = decodeReply(raw)
    if (reply.error) {
      throw new CohortError(isErrorCode(reply.error.code) ? reply.error.code : 'INTERNAL', `stage ${stage}: ${reply.error.message}`)
    }
    live.forEach((w, k) => {
      try {
        w.resolve(partResults(reply, k, w.items.length, stage))
      } catch (e) {
        w.reject(e)
      }
    })
  }
}

/** The results of part `k` of a stage reply: its columnar results, or its failure for each item. */
function partResults(reply: InferReply, k: number, n: number, stage: string): unknown[] {
  const err = reply.errors?.[k]
  if (err) {
    const e = new ItemError(err.message, isErrorCode(err.code) ? err.code : 'PREDICTOR_FAILED')
    return new Array<unknown>(n).fill(e)
  }
  try {
    return decodeStageResults(reply.items?.[k], n)
  } catch (e) {
    throw new CohortError('INTERNAL', `stage ${stage} answered a part it was not asked: ${e instanceof Error ? e.message : String(e)}`)
  }
}
