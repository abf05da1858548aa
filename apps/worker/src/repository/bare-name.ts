import { encodeValue, type Subjects } from '@cohort/protocol'
import type { Transport } from '@cohort/transport'
import type { ModelServer } from '../model-server.ts'
import { Listening } from '../model-server/listening.ts'

/** Options of {@link BareName}. */
export interface BareNameOptions {
  transport: Transport
  /** The worker's subjects (bare: no version). */
  subjects: Subjects
  name: string
  capacityAware: boolean
  /** The model's loaded versions, newest first (for metadata). */
  versions: () => string[]
  /** Every loaded version's server (cancel notices go to all). */
  all: () => ModelServer[]
}

/**
 * A repository model's bare subjects (`cohort.infer.<model>`, overflow, meta, cancel): what
 * arrives there goes to the newest version's server, which may change at any time (a new version
 * loaded). The main subject is regulated by that server's queue, as its own is.
 */
export class BareName {
  readonly #o: BareNameOptions
  readonly #listening: Listening
  #target: ModelServer | undefined
  #closing: Promise<void> | undefined

  constructor(o: BareNameOptions) {
    this.#o = o
    const target = () => this.#target
    this.#listening = new Listening({
      transport: o.transport,
      subjects: o.subjects,
      name: o.name,
      capacityAware: o.capacityAware,
      get concurrency() {
        return target()?.runner.concurrency ?? 1
      },
      engine: {
        get queued() {
          return target()?.engine.queued ?? 0
        },
        get batchCap() {
          return target()?.engine.batchCap ?? 1
        },
      },
      closing: () => this.#closing !== undefined,
      onInfer: (m) => this.#take().take(m),
      onMeta: (m) => m.respond(encodeValue({ ...this.#take().meta(), versions: o.versions() })),
      onCancel: (m) => {
        for (const s of o.all()) {
          s.cancel(m)
        }
      },
    })
  }

  /** Send bare-name work to `server` from now on (the first call subscribes). */
  point(server: ModelServer): void {
    if (this.#target === server) {
      return
    }
    if (this.#target) {
      this.#target.onQueueChange = undefined
    }
    const first = this.#target === undefined
    this.#target = server
    server.onQueueChange = () => this.#listening.regulate()
    if (first) {
      this.#listening.start()
    }
    this.#listening.regulate()
  }

  #take(): ModelServer {
    // Never undefined once subscribed: point() sets it before start().
    return this.#target as ModelServer
  }

  /** Stop taking work on the bare subjects; what was received has been handed on once it resolves. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#listening.drainInfer()
      this.#listening.unsubscribe()
      if (this.#target) {
        this.#target.onQueueChange = undefined
      }
    })()
    return this.#closing
  }
}
