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
  type TokenStep,
} from '@cohort/protocol'
import type { AbortSignalLike, Transport } from '@cohort/transport'
import type { WorkerLiveness } from './liveness.ts'
import { Discovery, type ReceivedInfo, type ReceivedStats, type WorkerSummary } from './discovery.ts'
import { ServeWhileRefresh } from './meta-cache.ts'
import { Packer, type PackerOptions } from './packer.ts'

/**
 * The gateway's side of the bus: the send path (infer, with worker-loss retry and the overflow
 * subject), metadata, cancellation. Discovery (`discover`, `services`, `readiness`, `workers`) is
 * {@link Discovery} (discovery.ts); the methods of that name here delegate to it.
 */
export class Upstream {
  /** Protocol v2 packing (with worker-loss detection only: it needs the workers' heartbeats). */
  readonly packer: Packer | undefined
  /** What workers serve and how they are (discovery.ts): apart from the send path. */
  readonly discovery: Discovery

  constructor(
    readonly transport: Transport,
    readonly subjects: Subjects,
    readonly metaTimeoutMs: number,
    /** Worker-loss detection (docs/architecture.md#worker-loss); none: wait for the deadline. */
    readonly liveness?: WorkerLiveness,
    /** Protocol v2 packs (docs/protocol.md#protocol-v2); false: always one request per message (v1). */
    pack: PackerOptions | false = {},
  ) {
    this.packer = liveness && pack !== false ? new Packer(transport, subjects, liveness, pack) : undefined
    this.discovery = new Discovery(transport, subjects, metaTimeoutMs)
  }

  /** {@link meta} of a model as last answered (the gateway's copy; see meta-cache.ts). */
  readonly #metas = new ServeWhileRefresh<ModelMeta>((model) => this.meta(model))
  /** {@link discover} as last answered, when it found a model. */
  readonly #served = new ServeWhileRefresh<{ models: ModelMeta[]; workers: number }>(
    () => this.discover(),
    undefined,
    undefined,
    (d) => d.models.length > 0,
  )

  /**
   * A model's metadata for a request's path (default model, chat template, schema, SLO): the
   * gateway's copy, refreshed in the background, not a round trip per request. Errors as {@link meta}
   * when no copy is held. Endpoints that report the state (ready, config) call {@link meta}.
   */
  heldMeta(model: string): Promise<ModelMeta> {
    return this.#metas.get(model)
  }

  /** {@link discover} for a request's path: the gateway's copy while it refreshes (an empty answer is not kept). */
  heldModels(): Promise<{ models: ModelMeta[]; workers: number }> {
    return this.#served.get('')
  }

  /**
   * Send a request and wait for its reply; on client abort, tell the workers to drop its
   * queued items. When the worker holding it is lost, resend it to another worker if `retryable`
   * or if no worker ever accepted it (at most `liveness.maxRetries` times, within `timeoutMs`), else
   * fail with WORKER_LOST (503).
   * Throws CohortError (request-level failures and the first failed item).
   */
  async infer(
    req: InferRequest,
    timeoutMs: number,
    signal: AbortSignalLike | undefined,
    opts: { retryable?: boolean; onDelta?: ((s: TokenStep) => void) | undefined } = {},
  ): Promise<InferReply> {
    const lv = this.liveness
    // A streamed generation that sent the client any delta cannot be resent: its output has begun.
    // An object, not a `let`: the callback sets it, which the compiler's narrowing cannot see.
    const progress = { streamed: false }
    const delta = opts.onDelta
    const onDelta = delta
      ? (s: TokenStep) => {
          progress.streamed = true
          delta(s)
        }
      : undefined
    if (!lv) {
      return this.#inferOnce(req, timeoutMs, signal, onDelta)
    }
    const started = Date.now()
    for (let attempt = 0; ; attempt++) {
      // A retry gets its own id: the cancel notice sent for the lost attempt must not drop it.
      const id = attempt === 0 ? req.id : `${req.id}~${attempt}`
      const t = lv.track(id, signal)
      try {
        const left = Math.max(1, timeoutMs - (Date.now() - started))
        // The first attempt sends the request as it is: a copy per request only for a retry.
        return await this.#inferOnce(attempt === 0 ? req : { ...req, id }, left, t.signal, onDelta)
      } catch (e) {
        // REPLY_LOST: the gateway's own connection moved to another NATS server and the reply did
        // not come (@cohort/transport's reconnect guard); as retryable as a lost worker.
        const replyLost = e instanceof CohortError && e.code === 'REPLY_LOST'
        if (t.lost === undefined && !replyLost) {
          throw e
        }
        // Never accepted: it never reached a worker, so it is safe to resend whatever the client said.
        const safe = (opts.retryable || t.unaccepted) && !progress.streamed
        if (safe && attempt < lv.maxRetries && timeoutMs - (Date.now() - started) > 1 && !signal?.aborted) {
          continue
        }
        if (t.lost === undefined) {
          throw e
        }
        const tried = attempt + 1
        throw new CohortError(
          'WORKER_LOST',
          progress.streamed
            ? `${t.lost} while streaming a generation; the stream ended early (its deltas so far were sent); retry the request`
            : `${t.lost}; the request may or may not have run (${tried} attempt${tried > 1 ? 's' : ''}${opts.retryable ? '' : ', not marked safe to retry: send an Idempotency-Key header'})`,
          { retryAfterS: 1 },
        )
      } finally {
        t.release()
      }
    }
  }

  /**
   * Whether `model` is served without versions (true), as a repository model (false), or is not in
   * the metadata or discovery the gateway holds (undefined). No round trip: held copies only.
   */
  #unversioned(model: string): boolean | undefined {
    const m = this.#metas.peek(model) ?? this.#served.peek('')?.models.find((x) => x.name === model)
    return m === undefined ? undefined : m.version === undefined
  }

  /**
   * One attempt. A request for version "1" of a model the gateway holds as served without versions
   * goes straight to the bare subjects (`version` kept in the envelope): one send, not three. Else
   * (a repository model, or one not seen yet) it tries the version's subjects first and, finding no
   * worker there, the bare subjects: a model without versions serves "1" there, and a repository
   * model whose newest is another version answers MODEL_NOT_FOUND
   * (docs/protocol.md#subjects-and-who-may-publish-where). A held copy that is out of date costs
   * the other order's fallback, never a wrong answer.
   */
  #inferOnce(req: InferRequest, timeoutMs: number, signal: AbortSignalLike | undefined, onDelta?: (s: TokenStep) => void): Promise<InferReply> {
    // Not async: a request without version "1" is the attempt itself, no promise of its own around it.
    if (req.version !== '1') {
      return this.#inferOn(req, req.version, timeoutMs, signal, onDelta)
    }
    return this.#inferVersionOne(req, timeoutMs, signal, onDelta)
  }

  async #inferVersionOne(req: InferRequest, timeoutMs: number, signal: AbortSignalLike | undefined, onDelta?: (s: TokenStep) => void): Promise<InferReply> {
    const order: (string | undefined)[] = this.#unversioned(req.model) === true ? [undefined, '1'] : ['1', undefined]
    const started = Date.now()
    try {
      return await this.#inferOn(req, order[0], timeoutMs, signal, onDelta)
    } catch (e) {
      if (!(e instanceof CohortError && (e.code === 'NO_WORKER' || e.code === 'MODEL_NOT_FOUND') && e.cause !== undefined)) {
        throw e
      }
      return this.#inferOn(req, order[1], Math.max(1, timeoutMs - (Date.now() - started)), signal, onDelta)
    }
  }

  async #inferOn(req: InferRequest, version: string | undefined, timeoutMs: number, signal: AbortSignalLike | undefined, onDelta?: (s: TokenStep) => void): Promise<InferReply> {
    const pk = this.packer
    const lv = this.liveness
    // A generation goes in a pack even before any heartbeat was heard: only workers that speak v2
    // serve generative models, and its deltas need the pack's reply subject.
    // A request whose tensors alone are over the pack size never fits one: it is encoded once, with `ack`.
    const tensorBytes = pk && lv ? tensorBytesOf(req) : 0
    if (pk && lv && (lv.protocol >= 2 || req.generate !== undefined) && tensorBytes <= pk.maxBytes) {
      // A bus that carries values (in-process) takes the request itself: no encode, no decode.
      const carry = this.transport.publishValue !== undefined
      const body = carry ? req : encodeRequest(req)
      const size = carry ? tensorBytes + ENVELOPE_BYTES : (body as Uint8Array).byteLength
      // Over the bus bound (a small in-process maxMessageBytes): the encoded path below checks it exactly.
      if (size <= this.transport.maxMessageBytes && pk.accepts(req.id, size)) {
        let reply: InferReply
        try {
          reply = await pk.send(req.model, req.id, body, timeoutMs, signal, version, onDelta, size)
        } catch (e) {
          throw await this.#failed(req, e)
        }
        if (reply.error) {
          throw fromWire(reply.error)
        }
        return reply
      }
    }
    const bytes = encodeRequest(lv ? { ...req, ack: lv.ackSubject } : req)
    if (bytes.byteLength > this.transport.maxMessageBytes) {
      throw new CohortError('PAYLOAD_TOO_LARGE', `encoded request of ${bytes.byteLength} bytes exceeds the bus limit (maxMessageBytes) of ${this.transport.maxMessageBytes} bytes`)
    }
    let raw: Uint8Array
    const started = Date.now()
    const opts = { timeoutMs, ...(signal ? { signal } : {}) }
    try {
      try {
        raw = await this.transport.request(this.subjects.infer(req.model, version), bytes, opts)
      } catch (e) {
        if (!(e instanceof CohortError && e.code === 'NO_WORKER')) {
          throw e
        }
        // No worker with spare capacity listens on the main subject: every worker listens on
        // the overflow subject and queues there (up to its bound).
        opts.timeoutMs = Math.max(1, timeoutMs - (Date.now() - started))
        raw = await this.transport.request(this.subjects.overflow(req.model, version), bytes, opts)
      }
    } catch (e) {
      throw await this.#failed(req, e)
    }
    const reply = fromWorker(() => decodeReply(raw))
    if (reply.error) {
      throw fromWire(reply.error)
    }
    return reply
  }

  /**
   * Metadata of a model (of one version, with `version`) from any of its workers; 404 if unknown
   * (or that version is not served), 503 if known but unserved. Version "1" falls back to the
   * bare subject as {@link infer} does.
   */
  async meta(model: string, version?: string): Promise<ModelMeta> {
    const ask = async (v: string | undefined) => {
      const raw = await this.transport.request(this.subjects.meta(model, v), new Uint8Array(0), {
        timeoutMs: this.metaTimeoutMs,
      })
      return fromWorker(() => decodeValue(raw) as ModelMeta)
    }
    if (version === '1' && this.#unversioned(model) === true) {
      // Held as served without versions: its "1" is the bare subject's (one round trip, not two).
      const m = await ask(undefined).catch(() => undefined)
      if (m && m.version === undefined) {
        return m
      }
    }
    try {
      return await ask(version)
    } catch (e) {
      if (!(e instanceof CohortError && e.code === 'NO_WORKER')) {
        throw e
      }
      if (version === '1') {
        const m = await ask(undefined).catch(() => undefined)
        if (m && (m.version === undefined || m.version === '1')) {
          return m
        }
      }
      if (version !== undefined) {
        const known = await this.transport.directory.known(model).catch(() => undefined)
        throw known === false
          ? new CohortError('MODEL_NOT_FOUND', `model "${model}" is not served by any worker`, { cause: e })
          : new CohortError('MODEL_NOT_FOUND', `model "${model}" has no version "${version}" served right now`, { cause: e })
      }
      throw await this.#noWorker(model, e)
    }
  }

  /** Every model any worker serves right now ({@link Discovery.discover}). */
  discover(): Promise<{ models: ModelMeta[]; workers: number }> {
    return this.discovery.discover()
  }

  /** The `$SRV.<verb>.cohort-worker` answers of this deployment's workers ({@link Discovery.services}). */
  services(verb: 'INFO'): Promise<ReceivedInfo[]>
  services(verb: 'STATS'): Promise<ReceivedStats[]>
  services(verb: 'INFO' | 'STATS' = 'INFO'): Promise<(ReceivedInfo | ReceivedStats)[]> {
    return verb === 'INFO' ? this.discovery.services('INFO') : this.discovery.services('STATS')
  }

  /** Readiness from the services protocol ({@link Discovery.readiness}). */
  readiness(): Promise<{ ready: boolean; models: number; workers: number }> {
    return this.discovery.readiness()
  }

  /** Every worker with its models, settings and counters, for `GET /v2/workers` ({@link Discovery.workers}). */
  workers(): Promise<WorkerSummary[]> {
    return this.discovery.workers()
  }

  /** A request that got no reply: tell the workers to drop it (cancelled, expired); name the missing model. */
  async #failed(req: InferRequest, e: unknown): Promise<unknown> {
    if (e instanceof CohortError && (e.code === 'CANCELLED' || e.code === 'DEADLINE_EXCEEDED')) {
      this.transport.publish(this.subjects.cancel(req.model), encodeCancel({ v: 1, id: req.id }))
    }
    if (e instanceof CohortError && e.code === 'NO_WORKER') {
      if (req.version !== undefined) {
        // No worker serves that version (even on its overflow subject): not a matter of retrying.
        return new CohortError('MODEL_NOT_FOUND', `model "${req.model}" has no version "${req.version}" served right now`, { cause: e })
      }
      return this.#noWorker(req.model, e)
    }
    return e
  }

  async #noWorker(model: string, cause: Error): Promise<CohortError> {
    const known = await this.transport.directory.known(model).catch(() => undefined)
    if (known === false) {
      return new CohortError('MODEL_NOT_FOUND', `model "${model}" is not served by any worker`, { cause })
    }
    return new CohortError('NO_WORKER', `no worker is serving model "${model}" right now`, { cause, retryAfterS: 1 })
  }
}

/** What a request's pack bound counts beside its tensor bytes when it is carried as a value (ids, names, shapes). */
const ENVELOPE_BYTES = 256

/** The summed tensor bytes of a request (a lower bound of its encoded size). */
function tensorBytesOf(req: InferRequest): number {
  let n = 0
  for (const k in req.tensors) {
    n += req.tensors[k]?.bytes.byteLength ?? 0
  }
  return n
}

/** Decode what a worker sent; an unreadable message is the worker's fault (500), not the client's. */
function fromWorker<T>(decode: () => T): T {
  try {
    return decode()
  } catch (e) {
    throw new CohortError('INTERNAL', `a worker sent an unreadable reply: ${e instanceof Error ? e.message : 'decode failed'}`, { cause: e })
  }
}
