import {
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
import type { Transport, TransportMessage } from '@cohort/transport'
import type { ModelTelemetry } from '../tracing.ts'
import type { ReplySink } from './reply-sink.ts'
import type { ServerStats } from './stats.ts'

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
   * How often the gateways of running generations are asked whether they still listen (a `tokens`
   * notice without steps, sent as a request on the pack's reply subject); a gateway that has no
   * responder there any more (it went away) has its generations cancelled. 0: never. @default 1000
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
  constructor(readonly replies: ReplySink) {}

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
      this.replies.publish(encodeNotice({ v: 2, t: 'tokens', steps }))
    }
    for (const [end] of this.#ends.splice(0)) {
      end()
    }
  }
}

/**
 * Requests with `generate` for a generative model: handed to the model's {@link Generator}, which
 * batches every running sequence per step itself (no BatchEngine). Streamed requests that came in a
 * pack get their deltas as `tokens` notices (one per step per pack, {@link StepSink}); every request
 * gets its final reply (`generated`, or `error`) once. Cancel notices free the slot at the next step.
 * See docs/generative.md.
 */
export class Generations {
  readonly #o: GenerationsOptions
  readonly #running = new Map<string, { cancel(): void }>()
  readonly #steps = new WeakMap<ReplySink, StepSink>()
  /** Running generations by their pack's reply subject (for the gateway probe). */
  readonly #byReply = new Map<string, Set<string>>()
  #probe: ReturnType<typeof setInterval> | undefined
  #idle: (() => void)[] = []

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
    const span = tel.startRequest(req)
    const input = req.generate!
    const steps = sink && input.stream ? this.#stepSink(sink) : undefined
    let ended = false
    const finish = (reply: InferReply) => {
      if (ended) {
        return
      }
      ended = true
      if (this.#running.get(req.id) === handle) {
        this.#running.delete(req.id)
      }
      this.#forget(m.reply, req.id)
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
        let ids = this.#byReply.get(m.reply)
        if (!ids) {
          ids = new Set()
          this.#byReply.set(m.reply, ids)
        }
        ids.add(req.id)
        this.#startProbe()
      }
    }
  }

  #forget(reply: string | undefined, id: string): void {
    const ids = reply !== undefined ? this.#byReply.get(reply) : undefined
    if (ids?.delete(id) && ids.size === 0) {
      this.#byReply.delete(reply!)
      if (this.#byReply.size === 0 && this.#probe !== undefined) {
        clearInterval(this.#probe)
        this.#probe = undefined
      }
    }
  }

  /** Ask every gateway with running generations whether it still listens; cancel those of one gone. */
  #startProbe(): void {
    const every = this.#o.probeMs ?? 1000
    if (this.#probe !== undefined || !(every > 0)) {
      return
    }
    const probe = encodeNotice({ v: 2, t: 'tokens', steps: [] })
    this.#probe = setInterval(() => {
      for (const [reply, ids] of this.#byReply) {
        this.#o.transport.request(reply, probe, { timeoutMs: Math.max(every * 5, 5000) }).catch((e: unknown) => {
          // NO_WORKER: nobody subscribes to the gateway's inbox any more. A slow answer is no proof.
          if ((e as { code?: unknown })?.code === 'NO_WORKER') {
            this.#o.tel.logger.warn({ model: this.#o.name, reply, generations: ids.size }, 'the gateway of these generations went away; cancelling them')
            for (const id of ids) this.cancel(id)
          }
        })
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

  #stepSink(sink: ReplySink): StepSink {
    let s = this.#steps.get(sink)
    if (!s) {
      s = new StepSink(sink)
      this.#steps.set(sink, s)
    }
    return s
  }
}
