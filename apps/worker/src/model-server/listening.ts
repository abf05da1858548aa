import { encodeReply, toWireError, type Subjects } from '@cohort/protocol'
import { consume, type Transport, type TransportMessage, type TransportSubscription } from '@cohort/transport'

/** Options of {@link Listening}. */
export interface ListeningOptions {
  transport: Transport
  subjects: Subjects
  /** Model name. */
  name: string
  /** See ModelServerOptions.capacityAware. @default true */
  capacityAware?: boolean | undefined
  /** See ModelServerOptions.highWater. @default 2 * batchCap * concurrency */
  highWater?: number | undefined
  /** Executor slots of the runner. */
  concurrency: number
  /** The queue the capacity is regulated by. */
  engine: { readonly queued: number; readonly batchCap: number }
  /** True once the server is closing: no more regulation, no room. */
  closing: () => boolean
  /** Inference messages (main and overflow subjects). */
  onInfer: (m: TransportMessage) => void
  /** Metadata requests. */
  onMeta: (m: TransportMessage) => void
  /** Cancellation notices. */
  onCancel: (m: TransportMessage) => void
}

/**
 * The model's subscriptions and capacity regulation: the main subject is listened to only while
 * fewer than `highWater` items are queued (resumed at half of it); the overflow, metadata and
 * cancel subjects always.
 */
export class Listening {
  readonly #o: ListeningOptions
  #subs: TransportSubscription[] = []
  #inferSub: TransportSubscription | undefined
  #inferLoop: Promise<void> = Promise.resolve()
  #overflowSub: TransportSubscription | undefined
  #loops: Promise<void>[] = []
  #paused = false
  /** Times the worker stopped listening on the main subject because it was full. */
  pauses = 0

  constructor(o: ListeningOptions) {
    this.#o = o
  }

  /** Subscribe to the model's subjects. */
  start(): void {
    const { transport: t, subjects: s, name } = this.#o
    this.#listenMain()
    this.#overflowSub = t.subscribe(s.overflow(name), { queue: s.queue(name), bounded: true, replies: 'pack' })
    const metaSub = t.subscribe(s.meta(name), { queue: s.queue(name) })
    const cancelSub = t.subscribe(s.cancel(name))
    this.#subs = [this.#overflowSub, metaSub, cancelSub]
    this.#loops = [this.#consume(this.#overflowSub, this.#o.onInfer), this.#consume(metaSub, this.#o.onMeta), this.#consume(cancelSub, this.#o.onCancel)]
  }

  /** True while the worker is not listening on the main subject (full). */
  get paused(): boolean {
    return this.#paused
  }

  /** Items the engine takes before the main subject would pause. */
  room(): number {
    return this.#o.closing() ? 0 : this.#highWater() - this.#o.engine.queued
  }

  /** Stop or resume listening on the main subject according to the queue depth. */
  regulate(): void {
    if (this.#o.closing() || !(this.#o.capacityAware ?? true)) {
      return
    }
    const q = this.#o.engine.queued
    const high = this.#highWater()
    if (!this.#paused && q >= high) {
      this.#paused = true
      this.pauses++
      void this.#inferSub?.drain().catch(() => undefined)
    } else if (this.#paused && q <= Math.floor(high / 2)) {
      this.#paused = false
      this.#listenMain()
    }
  }

  /** Stop taking inference messages and wait until every one received has been handed on. */
  async drainInfer(): Promise<void> {
    await Promise.all([this.#inferSub?.drain(), this.#overflowSub?.drain()].map((p) => (p ?? Promise.resolve()).catch(() => undefined)))
    await this.#inferLoop
    await this.#loops[0]
  }

  /** Drop every subscription. */
  unsubscribe(): void {
    for (const s of [...this.#subs, this.#inferSub]) {
      s?.unsubscribe()
    }
  }

  #highWater(): number {
    return this.#o.highWater ?? 2 * this.#o.engine.batchCap * this.#o.concurrency
  }

  #listenMain(): void {
    const { transport: t, subjects: s, name } = this.#o
    const sub = t.subscribe(s.infer(name), { queue: s.queue(name), bounded: true, replies: 'pack' })
    this.#inferSub = sub
    this.#inferLoop = this.#consume(sub, this.#o.onInfer)
  }

  #consume(sub: TransportSubscription, fn: (m: TransportMessage) => unknown): Promise<void> {
    // Never let one bad message, or a subscription that fails (permissions), end the worker.
    return consume(sub, fn, (e, m) => {
      if (m) {
        m.respond(encodeReply({ v: 1, id: '', error: toWireError(e) }))
      } else {
        console.error(`cohort: subscription for model "${this.#o.name}" ended: ${e instanceof Error ? e.message : String(e)}`)
      }
    })
  }
}
