import {
  CohortError,
  encodeNotice,
  fromWire,
  toWireError,
  type GenerateResult,
  type Generator,
  type InferReply,
  type InferRequest,
  type TokenDelta,
  type TokenStep,
  type WireError,
} from '@cohort/protocol'
import { consume, type Transport, type TransportMessage, type TransportSubscription } from '@cohort/transport'
import type { ModelTelemetry } from '../tracing.ts'
import type { ReplySink } from './reply-sink.ts'
import type { ServerStats } from './stats.ts'

/** Default probe period of a gateway's pack of generations that sent no tokens message (`generationProbeMs`). */
export const DEFAULT_GENERATION_PROBE_MS = 1000

/** Options of {@link Generations}. */
export interface GenerationsOptions {
  /** Model name. */
  name: string
  /** The model's generator (started before the first request arrives). */
  generator: () => Generator
  workerId: string
  tel: ModelTelemetry
  stats: ServerStats
  transport: Transport
  /**
   * The slow fallback of gone-gateway detection: a pack with running generations that sent no
   * `tokens` message for this long (non-streamed generations, sequences still waiting for a slot)
   * gets an empty one. Every `tokens` message carries this worker's watch subject as its reply
   * subject, so NATS answers one that finds no subscriber (the gateway went away) with a
   * no-responders status, and that pack's generations are cancelled (docs/generative.md#streaming-over-nats).
   * 0: no fallback (streamed generations are still watched at every step). @default 1000
   */
  probeMs?: number | undefined
  /** Send a request's final reply (through its pack's {@link ReplySink} when it came in one). */
  respond: (m: TransportMessage, reply: InferReply, t0: number, sink: ReplySink | undefined) => InferReply
}

/**
 * The token deltas of one pack's streamed generations, coalesced per engine step: every delta the
 * generator hands out in one synchronous step loop leaves in one `tokens` notice on the pack's
 * reply subject (protocol v2), at the end of that microtask. Final replies of the pack that end in
 * the same step wait for that notice, so a request's deltas always arrive before its reply.
 */
class StepSink {
  #steps: TokenStep[] = []
  #ends: [() => void][] = []
  #scheduled = false
  constructor(
    readonly replies: ReplySink,
    /** The reply subject of this pack's `tokens` messages (no-responders statuses come there). */
    readonly watch: () => string | undefined,
  ) {}

  delta(id: string, d: TokenDelta): void {
    const step: TokenStep = { id, tokens: d.tokens, text: d.text }
    if (d.logprobs !== undefined) step.logprobs = d.logprobs
    this.#steps.push(step)
    this.#schedule()
  }

  /** Run `end` (the final reply) after the deltas of this step are published. */
  end(end: () => void): void {
    if (this.#steps.length === 0 && !this.#scheduled) {
      end()
      return
    }
    this.#ends.push([end])
    this.#schedule()
  }

  #schedule(): void {
    if (!this.#scheduled) {
      this.#scheduled = true
      queueMicrotask(() => this.flush())
    }
  }

  flush(): void {
    this.#scheduled = false
    const steps = this.#steps.splice(0)
    if (steps.length > 0) {
      this.replies.publish(encodeNotice({ v: 2, t: 'tokens', steps }), this.watch())
    }
    for (const [end] of this.#ends.splice(0)) {
      end()
    }
  }
}

/** A pack's running generations, watched for its gateway going away. */
interface Watched {
  ids: Set<string>
  /** Its watch subject is `<inbox>.<key>`. */
  key: string
  /** Date.now() of its last `tokens` message. */
  sentAt: number
  /** Its gateway was found gone (its generations are cancelled). */
  gone?: boolean
}

/**
 * Requests with `generate` for a generative model: handed to the model's {@link Generator}, which
 * batches every running sequence per step itself (no BatchEngine). Streamed requests that came in a
 * pack get their deltas as `tokens` notices (one per step per pack, {@link StepSink}); every request
 * gets its final reply (`generated`, or `error`) once. Cancel notices free the slot at the next step,
 * and so does a gateway that went away: each `tokens` message names this worker's watch inbox as its
 * reply subject, and NATS answers one that finds no subscriber with a no-responders status there.
 * See docs/generative.md.
 */
export class Generations {
  readonly #o: GenerationsOptions
  readonly #running = new Map<string, { cancel(): void }>()
  readonly #steps = new WeakMap<ReplySink, StepSink>()
  /** Running generations by their pack's reply subject (a gateway inbox), watched for the gateway going away. */
  readonly #packs = new Map<string, Watched>()
  /** The pack reply subject of each watch key. */
  readonly #byKey = new Map<string, string>()
  /** This worker's watch inbox (`<inbox>.<key>` per pack), subscribed on first use. */
  #inbox: string | undefined
  #sub: TransportSubscription | undefined
  #keys = 0
  #probe: ReturnType<typeof setInterval> | undefined
  #idle: (() => void)[] = []
  #closed = false
  /** Packs whose gateway was found gone (no-responders status), for tests and logs. */
  gatewaysGone = 0

  constructor(o: GenerationsOptions) {
    this.#o = o
  }

  /** Generations running (or waiting in the generator) on this worker. */
  get running(): number {
    return this.#running.size
  }

  /** Start one generation; its reply goes out through `respond` when it ends. */
  submit(m: TransportMessage, req: InferRequest, t0: number, sink: ReplySink | undefined): void {
    const { tel, stats, generator, workerId } = this.#o
    const input = req.generate
    if (input === undefined) {
      throw new CohortError('INTERNAL', `request ${req.id} has no generate input`)
    }
    const span = tel.startRequest(req)
    const steps = sink && input.stream ? this.#stepSink(sink, m.reply) : undefined
    // finish() sets it, possibly synchronously inside generator().submit() below.
    let ended = false as boolean
    const finish = (reply: InferReply) => {
      if (ended) {
        return
      }
      ended = true
      if (this.#running.get(req.id) === handle) {
        this.#running.delete(req.id)
      }
      this.#forget(sink ? m.reply : undefined, req.id)
      const send = () => {
        stats.item(reply.error ? reply.error.code : 'OK', req.tenant)
        tel.endRequest(span, this.#o.respond(m, reply, t0, sink), 1)
        if (this.#running.size === 0) {
          for (const f of this.#idle.splice(0)) f()
        }
      }
      if (steps) {
        steps.end(send)
      } else {
        send()
      }
    }
    let handle: { cancel(): void } | undefined
    if (req.deadline <= Date.now()) {
      finish({ v: 1, id: req.id, error: { code: 'DEADLINE_EXCEEDED', message: 'deadline passed before the generation started' } })
      return
    }
    try {
      handle = generator().submit(input, req.deadline, {
        delta: (d) => {
          if (!ended && steps && (d.tokens.length > 0 || d.text !== '')) {
            steps.delta(req.id, d)
          }
        },
        done: (r: GenerateResult) => finish({ v: 1, id: req.id, generated: r, worker: workerId }),
        error: (e: WireError) => finish({ v: 1, id: req.id, error: fromWire(e).toWire() }),
      })
    } catch (e) {
      finish({ v: 1, id: req.id, error: toWireError(e, 'BAD_REQUEST') })
      return
    }
    if (!ended) {
      this.#running.set(req.id, handle)
      if (sink && m.reply) {
        this.#watchPack(m.reply).ids.add(req.id)
      }
    }
  }

  /** The watch state of a pack reply subject (made on first use; the inbox subscribed then). */
  #watchPack(reply: string): Watched {
    let w = this.#packs.get(reply)
    if (!w) {
      const key = (this.#keys++).toString(36)
      w = { ids: new Set(), key, sentAt: 0 }
      this.#packs.set(reply, w)
      this.#byKey.set(key, reply)
      this.#listen()
      this.#startProbe()
    }
    return w
  }

  /** The reply subject of a pack's `tokens` messages (undefined without a watch inbox). */
  #watchSubject(reply: string | undefined): string | undefined {
    const w = reply !== undefined ? this.#packs.get(reply) : undefined
    if (!w || this.#inbox === undefined) {
      return undefined
    }
    w.sentAt = Date.now()
    return `${this.#inbox}.${w.key}`
  }

  #forget(reply: string | undefined, id: string): void {
    if (reply === undefined) {
      return
    }
    const w = this.#packs.get(reply)
    if (w?.ids.delete(id) && w.ids.size === 0) {
      this.#packs.delete(reply)
      this.#byKey.delete(w.key)
      if (this.#packs.size === 0 && this.#probe !== undefined) {
        clearInterval(this.#probe)
        this.#probe = undefined
      }
    }
  }

  /** Subscribe to this worker's watch inbox: a no-responders status there names a pack whose gateway is gone. */
  #listen(): void {
    if (this.#sub !== undefined || this.#closed) {
      return
    }
    const t = this.#o.transport
    this.#inbox = t.newInbox()
    const prefix = `${this.#inbox}.`
    this.#sub = t.subscribe(`${prefix}>`)
    void consume(
      this.#sub,
      (m) => {
        // Anything else here (an older gateway answering its probe) says the gateway listens.
        if (m.noResponders) {
          this.#gone(m.subject.slice(prefix.length))
        }
      },
      (e) =>
        this.#o.tel.logger.warn(
          { model: this.#o.name, err: e instanceof Error ? e.message : String(e) },
          'the watch inbox of generations failed; gone gateways are no longer noticed',
        ),
    )
  }

  /** The gateway of pack `key` no longer subscribes to its reply subject: cancel its generations. */
  #gone(key: string): void {
    const reply = this.#byKey.get(key)
    const w = reply !== undefined ? this.#packs.get(reply) : undefined
    if (!w || w.gone) {
      return
    }
    w.gone = true
    this.gatewaysGone++
    this.#o.tel.logger.warn({ model: this.#o.name, reply, generations: w.ids.size }, 'the gateway of these generations went away; cancelling them')
    for (const id of w.ids) this.cancel(id)
  }

  /**
   * The slow fallback: every `probeMs`, a pack that sent no `tokens` message since (non-streamed
   * generations, sequences waiting for a slot) gets an empty one, with the watch reply subject.
   */
  #startProbe(): void {
    const every = this.#o.probeMs ?? DEFAULT_GENERATION_PROBE_MS
    if (this.#probe !== undefined || !(every > 0)) {
      return
    }
    const probe = encodeNotice({ v: 2, t: 'tokens', steps: [] })
    this.#probe = setInterval(() => {
      const now = Date.now()
      for (const [reply, w] of this.#packs) {
        const watch = !w.gone && now - w.sentAt >= every ? this.#watchSubject(reply) : undefined
        if (watch !== undefined) {
          this.#o.transport.publish(reply, probe, { reply: watch })
        }
      }
    }, every)
    ;(this.#probe as { unref?: () => void }).unref?.()
  }

  /** A cancel notice: the generation's slot is freed at the generator's next step. */
  cancel(id: string): boolean {
    const h = this.#running.get(id)
    h?.cancel()
    return h !== undefined
  }

  /** Resolves once no generation runs (drain). */
  idle(): Promise<void> {
    if (this.#running.size === 0) {
      return Promise.resolve()
    }
    return new Promise((resolve) => this.#idle.push(resolve))
  }

  /** Stop watching for gone gateways (after the generator closed). Idempotent. */
  close(): void {
    this.#closed = true
    this.#sub?.unsubscribe()
    if (this.#probe !== undefined) {
      clearInterval(this.#probe)
      this.#probe = undefined
    }
  }

  #stepSink(sink: ReplySink, reply: string | undefined): StepSink {
    let s = this.#steps.get(sink)
    if (!s) {
      s = new StepSink(sink, () => this.#watchSubject(reply))
      this.#steps.set(sink, s)
    }
    return s
  }
}
