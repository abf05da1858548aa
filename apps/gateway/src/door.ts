/**
 * The inference door: the one place every inference call passes through, whatever its codec (REST
 * OIP, bulk, Cog predictions, generate, OpenAI, gRPC) or producer (async jobs, the Redis bridge).
 * {@link InferenceDoor.serve} runs the steps itself, in a fixed order: the model name, admission
 * per origin (admission.ts: the in-flight bound, the event-loop-lag check, the worker-wait check
 * once the model is known), then the codec's decode, the deadline and the send (the codec calls
 * {@link Passage.infer}, which judges a model named late before it sends), the codec's encode, and
 * the count. It also owns the request id and the gateway span, authentication and rate limiting
 * for codecs without middleware (gRPC), the retry flag, the reply grace, item errors and the
 * metrics labels. See docs/architecture.md#the-inference-door.
 * @module
 */
import {
  answerError,
  CohortError,
  fromWire,
  isValidModelName,
  type GenerateInput,
  type GenerativeSlo,
  type InferReply,
  type ModelMeta,
  type InferRequest,
  type TokenStep,
  type WireError,
  type WireTensor,
} from '@cohort/protocol'
import { frozenLabels, type GatewayMetrics, type Labels } from '@cohort/metrics'
import { InflightBudget, type AbortSignalLike, type InflightLimits } from '@cohort/transport'
import type { TraceCarrier } from '@cohort/observability'
import { admitAtDoor, deadlineAfter, effectiveTimeoutMs } from './lag-check.ts'
import { RequestObservation, type ObservationOptions, type ObservedCall } from './observe.ts'
import type { JwtAuthOptions, RateLimitOptions } from './options.ts'
import type { Upstream } from './upstream.ts'
import { Authenticator } from './middleware/auth/credentials.ts'
import { ModelSlos, SLO_TTL_MS } from './slo.ts'
import { DOOR_CHECKS, WorkerWaitCheck, type DoorCheck, type WorkerWaitOptions } from './wait-check.ts'
import type { AdmissionTicket } from './admission-control.ts'
import { DEADLINE_CODES, DEADLINE_SUMMARY, RefusalLog } from './refusal.ts'
import { ADMISSION, checkModelPath, inflightOverloaded, inflightTooLarge, type Admission, type Origin } from './admission.ts'
import { TokenBuckets } from './middleware/rate-limit/index.ts'

/** Grace after the deadline before the gateway stops waiting: the worker's own 504 usually wins. */
export const REPLY_GRACE_MS = 50
/**
 * The same for a generation: its generator ends it at its first step past the deadline (finish
 * reason `deadline`, with the output so far), which may be a step and a round trip late.
 */
export const GENERATION_REPLY_GRACE_MS = 1000

/** Options of {@link InferenceDoor}. */
export interface DoorOptions extends ObservationOptions {
  upstream: Upstream
  metrics: GatewayMetrics
  /**
   * Longest deadline of a request, ms: the cap of every client deadline, and the deadline of a
   * request whose client sends none when its model announces no SLO.
   */
  requestTimeoutMs: number
  /**
   * Apply the server-side SLO each model's workers announce (`ModelMeta.slo`) as the deadline of
   * requests whose client sends none (docs/batching.md#server-side-slo). @default true
   */
  serverSlo?: boolean
  /** The runtime's queueing delay now (Node: event-loop delay), ms; see {@link admitAtDoor} (the event-loop-lag check). */
  queueDelayMs?: (() => number) | undefined
  /**
   * The worker-wait check at the door (wait-check.ts; docs/batching.md#admission-at-the-door):
   * refuse before reading the body when no worker's queue-wait estimate meets the deadline. Needs
   * worker-loss detection (the estimates come with heartbeats and v2 accept notices); `false`
   * turns it off. @default {} (on, with the defaults of {@link WorkerWaitOptions})
   */
  workerWait?: WorkerWaitOptions | false | undefined
  /** Credentials checked by {@link InferenceDoor.authorize} (codecs without HTTP middleware). */
  apiKeys?: string[] | undefined
  jwt?: JwtAuthOptions | undefined
  /** Per-client token buckets applied by {@link InferenceDoor.authorize}. */
  rateLimit?: RateLimitOptions | undefined
  /**
   * The gateway's in-flight bound ({@link InferenceDoor.inflight}): requests with bodies and their
   * bytes held at once, shared by every codec of the gateway. `false` turns it off. @default {}
   */
  inflight?: InflightLimits | false | undefined
  /**
   * Refusals (503 OVERLOADED) and failures by the deadline (504 DEADLINE_EXCEEDED, 400
   * DEADLINE_TOO_SHORT) are not logged one by one: they are counted, and one aggregated `warn`
   * line of each is written at most every this many ms (refusal.ts). @default 10000
   */
  refusalLogIntervalMs?: number | undefined
}

/** Label value for a model in request metrics: unknown or invalid names share one series (bounded memory). */
export function metricModel(model: string, code: string): string {
  return code === 'MODEL_NOT_FOUND' || code === 'NOT_FOUND' || !isValidModelName(model) ? '_unknown' : model
}

/**
 * The first failed item's error of a reply, if any, its message naming the item: `item <i>: ...`
 * with `i` its index in the request (a one-item envelope that is item `index` of a larger call, as
 * in bulk, has the worker's `item 0:` corrected to `item <index>:`), for errors about the item (4xx, and 500: the predictor failed on it).
 * Capacity and timing errors (503, 504, 499) keep their message: retrying, not the item, is the cure.
 */
export function itemError(reply: InferReply, index?: number): CohortError | undefined {
  const errs = reply.errors ?? []
  let at = -1
  let first: WireError | undefined
  for (let i = 0; i < errs.length; i++) {
    const x = errs[i]
    if (x) {
      at = i
      first = x
      break
    }
  }
  if (first === undefined) {
    return undefined
  }
  const e = fromWire(first)
  // Capacity and timing (503, 504, 499: a full queue, a drain, a deadline) are not about the item.
  if (!namesItem(e.status)) {
    return e
  }
  const i = index ?? at
  const msg = /^item \d+: /.test(e.message) ? e.message.replace(/^item \d+: /, `item ${i}: `) : errs.length > 1 && index === undefined ? `item ${i}: ${e.message}` : e.message
  return msg === e.message ? e : new CohortError(e.code, msg, e.retryAfterS !== undefined ? { retryAfterS: e.retryAfterS } : {})
}

function namesItem(status: number): boolean {
  return (status >= 400 && status < 499) || status === 500
}

/** Throw the first failed item's error, if any (named by its index). */
export function firstItemError(reply: InferReply): void {
  const e = itemError(reply)
  if (e) {
    throw e
  }
}

/** One prediction's outcome: its output, or its error (never thrown). */
export type ItemOutcome = { output: unknown; computeMs?: number | undefined; error?: undefined } | { error: WireError; output?: undefined }

/** What a call puts in the envelope besides id, model and deadline. */
export interface DoorPayload {
  tensors?: Record<string, WireTensor>
  items?: unknown[]
  outputs?: string[]
  priority?: number
  /** The model version asked for (`/v2/models/{m}/versions/{v}/...`); absent: the bare name. */
  version?: string
  /** A generation (generative models; docs/generative.md). */
  generate?: GenerateInput
}

/** How a call waits: its budget, whether it may be resent on worker loss, the client's abort. */
export interface SendOptions {
  /** Absolute deadline, ms since the epoch. @default the passage's deadline */
  deadline?: number
  /** Envelope id. @default the passage's request id */
  id?: string
  /** Safe to resend to another worker if the one holding it is lost. @default false */
  retryable?: boolean
  signal?: AbortSignalLike | undefined
  /** A streamed generation's token deltas, in order, before the reply. */
  onDelta?: ((s: TokenStep) => void) | undefined
}

/**
 * Send one envelope and wait for its reply, `REPLY_GRACE_MS` past its deadline. The one call of
 * `Upstream.infer` for inference (door passages, async jobs, the Redis bridge).
 */
export function doorSend(up: Upstream, req: InferRequest, o: Omit<SendOptions, 'deadline' | 'id'> = {}): Promise<InferReply> {
  const grace = req.generate ? GENERATION_REPLY_GRACE_MS : REPLY_GRACE_MS
  return up.infer(req, Math.max(1, req.deadline - Date.now()) + grace, o.signal, { retryable: o.retryable === true, onDelta: o.onDelta })
}

/**
 * Run one item (a Cog input) and answer its outcome; errors, request-level ones included, become
 * the outcome's error. `index` names the item in messages (bulk).
 */
export async function runItem(
  up: Upstream,
  r: { model: string; input: unknown; deadline: number; id?: string; trace?: TraceCarrier | undefined; tenant?: string },
  o: Omit<SendOptions, 'deadline' | 'id'> & { index?: number; onUnexpected?: (e: unknown) => void } = {},
): Promise<ItemOutcome> {
  try {
    const reply = await doorSend(
      up,
      { v: 1, id: r.id ?? crypto.randomUUID(), model: r.model, deadline: r.deadline, items: [r.input], ...r.trace, ...(r.tenant !== undefined ? { tenant: r.tenant } : {}) },
      o,
    )
    const e = itemError(reply, o.index)
    if (e) {
      return { error: { code: e.code, message: e.message } }
    }
    return { output: reply.items?.[0] ?? null, computeMs: reply.timing?.[0]?.computeMs }
  } catch (x) {
    if (!(x instanceof CohortError)) {
      o.onUnexpected?.(x)
    }
    const ce = x instanceof CohortError ? x : new CohortError('INTERNAL', 'internal error')
    return { error: { code: ce.code, message: ce.message } }
  }
}

/** The envelope's `tenant` field of a call: its client id, at most 128 characters (none when anonymous). */
function tenantOf(a: { tenant?: string | undefined }): { tenant?: string } {
  return a.tenant ? { tenant: a.tenant.slice(0, 128) } : {}
}

/** What a codec knows of a call before reading its body. */
export interface Arrival extends ObservedCall {
  /** Where the call comes from: its admission ({@link ADMISSION}). */
  origin: Origin
  /** The model named by the call ('' until known; {@link Passage.model} may set it later). */
  model: string
  /** The model version the call names (checked with the name before admission). */
  version?: string | undefined
  /** A timeout the codec read before the door (gRPC's `timeout` parameter, µs): part of the budget admission judges. */
  timeoutParamUs?: unknown
  /**
   * The call's bytes, for origins whose in-flight room the door holds ({@link AdmissionPolicy.inflight}
   * `door`: gRPC, whose message is already buffered): held from entry to the end of the call.
   */
  holdBytes?: number | undefined
  /** `x-cohort-timeout-ms` (or its equivalent): shortens the server deadline. */
  timeoutHeader?: string | undefined
  /** `x-cohort-ttft-timeout-ms`: a generation's time-to-first-token budget (docs/generative.md#deadlines-and-the-server-slo). */
  ttftHeader?: string | undefined
  /** A deadline the transport carries (a gRPC deadline), ms since the epoch. */
  deadlineAt?: number | undefined
  /**
   * The authenticated client (`key:<i>`, `jwt:<sub>`): the tenant of the call's envelopes, for
   * the workers' fair shares. Absent (auth off): the one anonymous tenant.
   */
  tenant?: string | undefined
  /**
   * How long the call had waited before the door saw it, ms: from its arrival (the Node listener:
   * the connection's accept, or the first bytes of a keep-alive connection's next request) to now.
   * Taken off its deadline; a call that already waited its whole budget is refused at once
   * (503 OVERLOADED, check `arrival_wait`).
   */
  waitedMs?: number | undefined
  /** Called with the passage once made (HTTP: to answer its `traceparent`). */
  entered?: ((p: Passage) => void) | undefined
  /**
   * The door's admission of this call, already judged at the listener ({@link InferenceDoor.admit},
   * early.ts): {@link Passage.enter} uses it instead of judging the call again.
   */
  admission?: Admission | undefined
}

/** A prediction produced inside the gateway ({@link InferenceDoor.predict}). */
export interface PredictionCall {
  origin: 'job' | 'bridge'
  /** The route of its span and logs (e.g. `job`, `bridge redis`). */
  route: string
  model: string
  input: unknown
  /** Absolute deadline, ms since the epoch. */
  deadline: number
  /** The envelope id (the prediction's id). @default random */
  id?: string | undefined
  tenant?: string | undefined
  /** Safe to resend to another worker on worker loss. @default false */
  retryable?: boolean
  signal?: AbortSignalLike | undefined
}

/** One call through the door: its observation, deadline and sends. Made by {@link InferenceDoor.serve}. */
export class Passage {
  readonly obs: RequestObservation
  /** Count this call in the request metrics when it ends (bulk counts its items instead). */
  counted = true
  /** The delay taken off the deadline: the larger of the event-loop lag and the arrival wait, ms. */
  #lag = 0
  /** The event loop's lag at entry, ms: the gateway's own delay a reply waits too. */
  #loopLag = 0
  /** The admission controller's ticket of a call judged by estimates (its outcome goes back). */
  #ticket: AdmissionTicket | undefined
  /** The deadline of the call's envelope, once sent (ms since the epoch). */
  #sentDeadline: number | undefined
  /** The door check that refused the call, if one did. */
  #check: DoorCheck | undefined
  /** True once the client sent a deadline of its own (header, parameter, transport deadline). */
  #clientTimed = false
  #code = 'OK'
  #open = false
  /** The worker-wait check ran (or does not apply). */
  #judged = false
  /** Bytes held in the door's in-flight bound (undefined: none). */
  #held: number | undefined
  readonly #t0 = performance.now()

  constructor(
    readonly door: InferenceDoor,
    readonly arrival: Arrival,
  ) {
    this.obs = new RequestObservation(door.o, arrival, arrival.model)
  }

  get model(): string {
    return this.obs.model
  }
  set model(m: string) {
    this.obs.model = m
  }

  /** The envelope id of the call. */
  get requestId(): string {
    return this.obs.requestId
  }

  /** The W3C fields an envelope carries: the gateway span as the worker's parent. */
  get trace(): TraceCarrier | undefined {
    return this.obs.trace
  }

  /**
   * The door's steps before the codec runs (called by {@link InferenceDoor.serve}): the model name
   * when the call names one, then admission by origin ({@link ADMISSION}): room in the in-flight
   * bound (when the door holds it), the event-loop-lag check (503 OVERLOADED when the runtime's
   * queueing delay already exceeds this call's budget; otherwise the delay is taken off its
   * deadline), and the worker-wait check when the model is known (else before the first send;
   * {@link WorkerWaitCheck}). Each check's refusal counts in `cohort_door_refusals_total{check}`.
   * Over HTTP the budget is the header's (a `parameters.timeout` in the body is not seen yet).
   */
  enter(): void {
    const a = this.arrival
    if (a.model !== '') {
      checkModelPath(a.model, a.version)
    }
    if (ADMISSION[a.origin].inflight === 'door') {
      this.#hold(a.holdBytes ?? 0)
    }
    const adm = a.admission ?? this.door.admit(a)
    if (adm.refused) {
      this.#refused(adm.refused, adm.check)
      throw adm.refused
    }
    this.#lag = adm.lag
    this.#loopLag = adm.loopLag
    this.#judged = adm.judged
    this.#admitted(adm)
  }

  #admitted(adm: { ticket?: AdmissionTicket | undefined; probe?: boolean | undefined }): void {
    this.#ticket = adm.ticket
    if (adm.probe === true) {
      this.door.o.metrics.doorProbes.inc({ model: metricModel(this.model, 'OK') })
    }
  }

  /** Room for the call in the door's in-flight bound, until {@link Passage.end}. */
  #hold(bytes: number): void {
    const budget = this.door.inflight
    if (budget === undefined) {
      return
    }
    if (bytes > budget.maxBytes) {
      throw inflightTooLarge(budget, bytes)
    }
    if (!budget.tryAdmit(bytes)) {
      throw inflightOverloaded(budget)
    }
    this.#held = bytes
  }

  /** The worker-wait check, once, as soon as the model is known (a call that named it late). */
  #judge(): void {
    if (this.#judged || !isValidModelName(this.model)) {
      return // not known yet, or not a model: the send answers it
    }
    this.#judged = true
    const v = this.door.judgeWait(this.arrival, this.model, this.#lag, this.#loopLag)
    if (v.refused) {
      this.#refused(v.refused, v.check)
      throw v.refused
    }
    this.#admitted(v)
  }

  #refused(e: unknown, check: DoorCheck): void {
    if (e instanceof CohortError && e.code === 'OVERLOADED') {
      this.#check = check
      this.door.o.metrics.doorRefusals.inc({ model: metricModel(this.model, e.code), check })
    }
  }

  /**
   * The call's budget, ms. A client deadline (the timeout header, `paramUs` µs, a transport
   * deadline) is used as sent, up to `requestTimeoutMs`: it may shorten or lengthen the model's
   * SLO (Triton's `allow_timeout_override`). Without one: the model's announced SLO (as last
   * seen; {@link Passage.infer} waits for it the first time), else `requestTimeoutMs`.
   */
  timeoutMs(paramUs?: unknown): number {
    const b = this.door.budgetOf(this.arrival, this.model, paramUs)
    if (b.client) {
      this.#clientTimed = true
    }
    return b.ms
  }

  /**
   * {@link Passage.timeoutMs}, with the model's SLO when the client sent no deadline: the cached one
   * once a worker answered for the model (a stale one is refreshed in the background, never on this
   * request's path: issue 28), else learnt first (a promise only then).
   */
  #budget(timeoutMs: number | undefined): number | Promise<number> {
    const t = timeoutMs ?? this.timeoutMs()
    const slos = this.door.slos
    if (this.#clientTimed || slos === undefined || this.model === '') {
      return t
    }
    const within = (slo: number | undefined) => (slo !== undefined ? Math.min(t, slo) : t)
    return slos.has(this.model) ? within(slos.peek(this.model)) : slos.get(this.model).then(within)
  }

  /**
   * A generation's budgets, ms (docs/generative.md#deadlines-and-the-server-slo). The whole
   * generation: the client's timeout header as sent (up to `requestTimeoutMs`), else the model's
   * announced `generationMs` (capped the same), else `requestTimeoutMs`. The first token: the
   * client's `x-cohort-ttft-timeout-ms` as sent, else the model's `ttftMs`, within the whole
   * budget; none when neither is set. Waits for the model's SLO the first time.
   */
  async generationBudget(): Promise<{ timeoutMs: number; ttftMs: number | undefined }> {
    const server = this.door.o.requestTimeoutMs
    const header = this.arrival.timeoutHeader ?? ''
    const ttftHeader = this.arrival.ttftHeader ?? ''
    let ttftClient: number | undefined
    if (ttftHeader !== '') {
      ttftClient = Number(ttftHeader)
      if (!Number.isFinite(ttftClient) || ttftClient <= 0) {
        throw new CohortError('BAD_REQUEST', `x-cohort-ttft-timeout-ms must be a positive number of milliseconds, got "${ttftHeader.slice(0, 64)}"`)
      }
    }
    const slo = this.model !== '' && this.door.generationSlos ? await this.door.generationSlos.get(this.model) : undefined
    let timeoutMs = effectiveTimeoutMs(server, header, undefined)
    if (header === '' && slo?.generationMs !== undefined) {
      timeoutMs = Math.min(server, slo.generationMs)
    }
    const ttft = ttftClient ?? slo?.ttftMs
    return { timeoutMs, ttftMs: ttft === undefined ? undefined : Math.min(ttft, timeoutMs) }
  }

  /** The absolute deadline of a budget, less the admission delay (503 when nothing is left). */
  deadline(timeoutMs: number): number {
    return deadlineAfter(timeoutMs, this.#lag)
  }

  /** Send the call's envelope and answer the reply; the first failed item is thrown, named by its index. */
  async infer(payload: DoorPayload, o: SendOptions & { timeoutMs?: number } = {}): Promise<InferReply> {
    this.#judge()
    let deadline = o.deadline
    if (deadline === undefined) {
      const b = this.#budget(o.timeoutMs)
      deadline = this.deadline(typeof b === 'number' ? b : await b)
    }
    const req: InferRequest = {
      v: 1,
      id: o.id ?? this.requestId,
      model: this.model,
      deadline,
      ...payload,
      ...tenantOf(this.arrival),
      ...this.trace,
    }
    this.obs.sent(req)
    this.#sentDeadline = req.deadline
    const reply = await doorSend(this.door.o.upstream, req, o)
    firstItemError(reply)
    return reply
  }

  /** One item of a multi-prediction call (bulk): its outcome, counted and logged on its own. */
  async item(input: unknown, index: number, o: { deadline: number; signal?: AbortSignalLike | undefined }): Promise<ItemOutcome> {
    this.#judge()
    const t0 = performance.now()
    const id = crypto.randomUUID()
    const model = this.model
    const out = await runItem(
      this.door.o.upstream,
      { model, input, deadline: o.deadline, id, trace: this.trace, ...tenantOf(this.arrival) },
      { signal: o.signal, index, onUnexpected: (e) => this.door.o.onUnexpectedError(e, { ...this.obs.fields(), requestId: id, index }) },
    )
    const code = out.error?.code ?? 'OK'
    if (out.error) {
      this.obs.failedItem(id, index, out.error.code, out.error.message)
    }
    this.door.count(model, code, t0)
    return out
  }

  /** The response outlives the handler (a stream): call {@link Passage.end} when it is done. */
  keepOpen(): void {
    this.#open = true
  }

  /**
   * Record a failure; answers what to throw (see {@link RequestObservation.fail}). A refusal for
   * load (503 OVERLOADED: a door check, the in-flight bound, a worker's full queue) is not logged
   * on its own: it is counted, and the door's {@link RefusalLog} writes one aggregated line; so is a
   * failure by the deadline (504 DEADLINE_EXCEEDED, 400 DEADLINE_TOO_SHORT), in its own summary line.
   */
  fail(e: unknown, status?: number): CohortError {
    if (e instanceof CohortError && e.code === 'OVERLOADED' && status === undefined) {
      this.#code = e.code
      this.door.refusals.note(this.#check ?? (this.#sentDeadline === undefined ? 'door' : 'worker'), this.model)
      return this.obs.refused(e)
    }
    if (e instanceof CohortError && DEADLINE_CODES.has(e.code) && status === undefined) {
      this.#code = e.code
      this.door.deadlineFailures.note(e.code, this.model)
      return this.obs.refused(e)
    }
    const ce = this.obs.fail(e, status)
    this.#code = ce.code
    return ce
  }

  /** Count the call, give back its in-flight room and end its span. Idempotent (the span's end is). */
  end(): void {
    if (this.#ticket !== undefined) {
      this.#outcome(this.#ticket)
      this.#ticket = undefined
    }
    if (this.#held !== undefined) {
      this.door.inflight?.release(this.#held)
      this.#held = undefined
    }
    if (this.counted) {
      this.counted = false
      this.door.count(this.model, this.#code, this.#t0)
    }
    this.obs.end()
  }

  /**
   * An admitted call's outcome back to the admission controller: late when answered past its
   * deadline or past 80% of its budget (the ticket's `lateAt`), 504, or refused by the worker (the
   * door let in what the worker could not take); on time otherwise. Other failures (bad input, cancels) say nothing of load.
   */
  #outcome(t: AdmissionTicket): void {
    const ctl = this.door.workerWait?.control
    const code = this.#code
    if (ctl === undefined || this.#sentDeadline === undefined) {
      return
    }
    if (code === 'OK') {
      ctl.outcome(t, Date.now() > this.#sentDeadline)
    } else if (code === 'DEADLINE_EXCEEDED' || code === 'OVERLOADED') {
      ctl.outcome(t, true)
    }
  }

  /** @internal */
  get isOpen(): boolean {
    return this.#open
  }
}

/** The inference door of one gateway (HTTP app or gRPC server). */
export class InferenceDoor {
  readonly #auth: Authenticator | undefined
  readonly #buckets: TokenBuckets | undefined
  /** The SLOs the workers announce, unless `serverSlo` is false. */
  readonly slos: ModelSlos | undefined
  /** The generative models' budgets the workers announce (`ModelMeta.generative.slo`), unless `serverSlo` is false. */
  readonly generationSlos: ModelSlos<GenerativeSlo, ModelMeta> | undefined
  /** The worker-wait check, unless `workerWait` is false or there is no worker-loss detection (no estimates). */
  readonly workerWait: WorkerWaitCheck | undefined
  /**
   * The in-flight bound of the gateway (unless `inflight` is false): HTTP's middleware holds room
   * in it before a body is read; other codecs through {@link Arrival.holdBytes}.
   */
  readonly inflight: InflightBudget | undefined
  /** The aggregated log of this door's refusals (no line per refusal). */
  readonly refusals: RefusalLog
  /** Failures by the deadline (504 DEADLINE_EXCEEDED, 400 DEADLINE_TOO_SHORT), logged aggregated like refusals. */
  readonly deadlineFailures: RefusalLog

  constructor(readonly o: DoorOptions) {
    this.refusals = new RefusalLog(o.logger, o.refusalLogIntervalMs !== undefined ? { intervalMs: o.refusalLogIntervalMs } : {})
    this.deadlineFailures = new RefusalLog(o.logger, { ...(o.refusalLogIntervalMs !== undefined ? { intervalMs: o.refusalLogIntervalMs } : {}), message: DEADLINE_SUMMARY })
    this.slos = o.serverSlo === false ? undefined : new ModelSlos<number, Pick<ModelMeta, 'slo'>>((m) => o.upstream.heldMeta(m))
    this.generationSlos =
      o.serverSlo === false
        ? undefined
        : new ModelSlos(
            (m) => o.upstream.heldMeta(m),
            SLO_TTL_MS,
            Date.now,
            (m) => m.generative?.slo,
          )
    const lv = o.upstream.liveness
    this.workerWait = o.workerWait === false || lv === undefined ? undefined : new WorkerWaitCheck(lv.waits, o.workerWait)
    this.inflight = o.inflight === false ? undefined : new InflightBudget(o.inflight)
    this.#auth = Authenticator.of(o)
    this.#buckets = o.rateLimit ? new TokenBuckets(o.rateLimit) : undefined
  }

  /**
   * Judge a call before its body is read (the steps of {@link Passage.enter} after the model name
   * and the in-flight room; early.ts calls it at the listener): for origins with checks
   * ({@link ADMISSION}), the event-loop-lag check (refused when the runtime's queueing delay
   * already exceeds the call's budget; otherwise the delay is taken off its deadline), the
   * arrival-wait check (a call that already waited its budget is refused; else the wait is taken
   * off), then the worker-wait check when the model is known ({@link WorkerWaitCheck}). A bad
   * timeout header throws (400 BAD_REQUEST). Over HTTP the budget is the header's (a
   * `parameters.timeout` in the body is not seen yet).
   */
  admit(a: Arrival): Admission {
    if (!ADMISSION[a.origin].checks) {
      return { lag: 0, loopLag: 0, judged: true }
    }
    let loopLag: number
    try {
      loopLag = admitAtDoor(this.o.requestTimeoutMs, a.timeoutHeader, this.o.queueDelayMs)
    } catch (e) {
      if (e instanceof CohortError && e.code === 'OVERLOADED') {
        return { refused: e, check: DOOR_CHECKS.eventLoopLag }
      }
      throw e
    }
    let lag = loopLag
    const waited = a.waitedMs ?? 0
    if (waited > lag) {
      const deadlineAt = ADMISSION[a.origin].budget === 'own' ? a.deadlineAt : undefined
      const budget = deadlineAt !== undefined ? deadlineAt - Date.now() + waited : this.budgetOf(a, a.model, a.timeoutParamUs).ms
      if (waited >= budget) {
        const e = answerError(
          'OVERLOADED',
          `the request waited ${Math.ceil(waited)} ms before the gateway could judge it, not less than its ${Math.round(budget)} ms budget (arrival-wait check)`,
          { retryAfterS: 1 },
        )
        return { refused: e, check: DOOR_CHECKS.arrivalWait }
      }
      lag = waited
    }
    if (!isValidModelName(a.model)) {
      return { lag, loopLag, judged: false } // not known yet, or not a model: the send answers it
    }
    const v = this.judgeWait(a, a.model, lag, loopLag)
    return v.refused ? v : { lag, loopLag, judged: true, ticket: v.ticket, probe: v.probe }
  }

  /**
   * The worker-wait check of a call for `model` after a delay of `lagMs` (of which `loopLagMs` is
   * the event loop's): refused by it, or admitted with the controller's ticket (none without the check).
   */
  judgeWait(
    a: Arrival,
    model: string,
    lagMs: number,
    loopLagMs: number,
  ): { refused: CohortError; check: DoorCheck } | { refused?: undefined; ticket?: AdmissionTicket | undefined; probe?: boolean | undefined } {
    const ww = this.workerWait
    if (ww === undefined) {
      return {}
    }
    const deadlineAt = ADMISSION[a.origin].budget === 'own' ? a.deadlineAt : undefined
    const left = deadlineAt !== undefined ? deadlineAt - Date.now() : this.budgetOf(a, model, a.timeoutParamUs).ms
    const v = ww.judge(model, a.tenant?.slice(0, 128) ?? '', left - lagMs, loopLagMs, left)
    if (!v.admit) {
      return { refused: v.error, check: DOOR_CHECKS.workerWait }
    }
    return { ticket: v.ticket, probe: v.probe }
  }

  /**
   * A call's budget, ms ({@link Passage.timeoutMs}), and whether the client set it. A client
   * deadline (the timeout header, `paramUs` µs, a transport deadline) is used as sent, up to
   * `requestTimeoutMs`; without one: the model's announced SLO as last seen, else `requestTimeoutMs`.
   */
  budgetOf(a: Arrival, model: string, paramUs?: unknown): { ms: number; client: boolean } {
    const server = this.o.requestTimeoutMs
    let t = effectiveTimeoutMs(server, a.timeoutHeader, paramUs)
    const at = a.deadlineAt
    if (at !== undefined && Number.isFinite(at)) {
      t = Math.min(t, Math.max(1, at - Date.now()))
    }
    if (t < server || (a.timeoutHeader ?? '') !== '' || (typeof paramUs === 'number' && paramUs > 0) || at !== undefined) {
      return { ms: t, client: true }
    }
    const slo = model !== '' ? this.slos?.peek(model) : undefined
    return { ms: slo !== undefined ? Math.min(t, slo) : t, client: false }
  }

  /**
   * Authenticate and rate-limit a call for codecs without HTTP middleware (gRPC): the client id
   * (`key:<i>`, `jwt:<sub>`, else `ip:<address>`). UNAUTHORIZED/FORBIDDEN as over REST; beyond
   * the rate limit RATE_LIMITED with `retryAfterS`. `limited: false` skips the rate limit (health).
   */
  async authorize(authorization: string | undefined, address: string | undefined, limited = true): Promise<string | undefined> {
    const client = this.#auth ? await this.#auth.authenticate(authorization) : undefined
    if (this.#buckets && limited) {
      const key = client ?? `ip:${address ?? 'unknown'}`
      const wait = this.#buckets.take(key)
      if (wait > 0) {
        throw new CohortError('RATE_LIMITED', `rate limit of ${this.#buckets.rate} requests/s (burst ${this.#buckets.burst}) exceeded`, { retryAfterS: wait })
      }
    }
    return client
  }

  /**
   * Serve one call: the door's own steps first ({@link Passage.enter}: the model name, admission
   * by origin), then `run`, the codec: it decodes, sends through the passage and encodes. Failures are recorded
   * (log, span, metrics code) and rethrown as CohortErrors unless `onError` answers them; the call is
   * counted and its span ended when `run` settles (or at {@link Passage.end} after {@link Passage.keepOpen}).
   */
  async serve<T>(a: Arrival, run: (p: Passage) => Promise<T>, onError?: (e: unknown, p: Passage) => T): Promise<T> {
    const p = new Passage(this, a)
    a.entered?.(p)
    try {
      p.enter()
      return await run(p)
    } catch (e) {
      if (onError) {
        return onError(e, p)
      }
      throw p.fail(e)
    } finally {
      if (!p.isOpen) {
        p.end()
      }
    }
  }

  /**
   * One prediction that enters the door on its own (an in-memory async job, a Redis bridge entry):
   * the same steps as any call (admission by `origin`, the span, the request metrics, the tenant),
   * one item sent with `deadline`; its outcome, never thrown (an admission refusal is its error).
   */
  predict(r: PredictionCall): Promise<ItemOutcome> {
    const a: Arrival = { origin: r.origin, method: 'POST', route: r.route, model: r.model, deadlineAt: r.deadline, requestId: r.id, tenant: r.tenant }
    return this.serve<ItemOutcome>(
      a,
      async (p) => {
        const reply = await p.infer({ items: [r.input] }, { deadline: r.deadline, retryable: r.retryable === true, signal: r.signal })
        return { output: reply.items?.[0] ?? null, computeMs: reply.timing?.[0]?.computeMs }
      },
      (e, p) => {
        const ce = p.fail(e)
        return { error: { code: ce.code, message: ce.message } }
      },
    )
  }

  /** Count one request (or bulk item) in `cohort_requests_total` and its duration. */
  count(model: string, code: string, t0: number): void {
    const l = this.#countLabels(metricModel(model, code))
    this.o.metrics.requests.inc(l.requests(code))
    this.o.metrics.duration.observe(l.duration, (performance.now() - t0) / 1000)
  }

  /** Frozen label sets per model label ({model}, and {model, code} by code), made once each: no object or series key per count. */
  readonly #labels = new Map<string, { requests: (code: string) => Labels; duration: Labels }>()

  #countLabels(model: string): { requests: (code: string) => Labels; duration: Labels } {
    let l = this.#labels.get(model)
    if (l === undefined) {
      // As many as the series they name (the registry keeps one per label set anyway).
      const duration = Object.freeze({ model })
      l = { requests: frozenLabels(duration, 'code'), duration }
      this.#labels.set(model, l)
    }
    return l
  }
}
