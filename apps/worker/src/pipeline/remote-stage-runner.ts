import { CohortError, decodeReply, encodeRequest, isErrorCode, type InferRequest, type Subjects } from '@cohort/protocol'
import { fromWireValue, toWireValue, type StageContext, type StageRunner } from '@cohort/pipeline'
import { ItemError } from '@cohort/predictor'
import type { Transport } from '@cohort/transport'

/** Default in-flight batches from one host to a remote stage. */
export const DEFAULT_REMOTE_CONCURRENCY = 4
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
}

/** One item of a stage request: its deadline (`d`, epoch ms, 0 for none) and value (`v`, wire form). */
export interface StageWireItem {
  d: number
  v: unknown
}

/**
 * Runs a stage on another worker (`cohort worker <dir> --stage <name>`): each batch the host's
 * stage engine forms goes as one request on `cohort.stage.<pipeline>.<stage>` carrying every
 * item's remaining deadline; the remote worker batches across hosts and answers per item.
 */
export class RemoteStageRunner implements StageRunner {
  readonly concurrency: number
  readonly #o: RemoteStageRunnerOptions
  #seq = 0

  constructor(o: RemoteStageRunnerOptions) {
    this.#o = o
    this.concurrency = o.concurrency ?? DEFAULT_REMOTE_CONCURRENCY
  }

  async run(items: unknown[], ctx: StageContext): Promise<(unknown | Error)[]> {
    const { transport: t, subjects: s, pipeline, stage } = this.#o
    const now = Date.now()
    const finite = ctx.deadlines.filter((d) => Number.isFinite(d))
    const deadline = finite.length === ctx.deadlines.length && finite.length > 0 ? Math.max(...finite) : now + NO_DEADLINE_TIMEOUT_MS
    if (deadline <= now) {
      return items.map(() => new ItemError(`deadline passed before stage ${stage}`, 'DEADLINE_EXCEEDED'))
    }
    const req: InferRequest = {
      v: 1,
      id: `${pipeline}.${stage}.${(this.#seq++).toString(36)}.${Math.random().toString(36).slice(2, 8)}`,
      model: `${pipeline}.${stage}`,
      deadline,
      items: items.map((v, i): StageWireItem => {
        const d = ctx.deadlines[i] ?? 0
        return { d: Number.isFinite(d) ? d : 0, v: toWireValue(v) }
      }),
    }
    const bytes = encodeRequest(req)
    const opts = { timeoutMs: deadline - now, signal: ctx.signal }
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
    const out = reply.items ?? []
    return items.map((_, i) => {
      const err = reply.errors?.[i]
      if (err) {
        return new ItemError(err.message, isErrorCode(err.code) ? err.code : 'PREDICTOR_FAILED')
      }
      return fromWireValue(out[i])
    })
  }
}
