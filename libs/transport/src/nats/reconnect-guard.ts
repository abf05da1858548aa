import type { NatsConnection } from '@nats-io/nats-core'
import { CohortError } from '@cohort/protocol'

/** Default wait for a reply after the connection is back, for a request in flight across the move: 5 s. */
export const DEFAULT_RECONNECT_REPLY_GRACE_MS = 5_000

/** One watched request of a {@link ReconnectGuard}. */
export interface ReconnectWatch {
  /** Rejects with REPLY_LOST once the connection moved and `graceMs` passed without a reply. */
  readonly lost: Promise<never>
  /** The request settled: stop watching. Idempotent. */
  release(): void
}

/**
 * While a NATS connection is between servers (a server restart or lame-duck mode, a network cut),
 * the server has no subscription for its inbox, and replies published in that gap are dropped. A
 * request in flight across such a move may therefore never get its reply. The guard gives each such
 * request `graceMs` after the reconnect for a reply (one published after the move still arrives);
 * then it fails with REPLY_LOST (503, retryable) instead of waiting for its deadline.
 * @see docs/reliability.md#lame-duck-mode
 */
export class ReconnectGuard {
  readonly #moved = new Set<() => void>()
  readonly #graceMs: number

  /** @param graceMs wait after a reconnect, ms; 0 turns the guard off. @default 5000 */
  constructor(status: Pick<NatsConnection, 'status'>, graceMs = DEFAULT_RECONNECT_REPLY_GRACE_MS) {
    if (!(graceMs >= 0)) {
      throw new RangeError(`reconnectReplyGraceMs must be >= 0, got ${graceMs}`)
    }
    this.#graceMs = graceMs
    if (graceMs > 0) {
      void (async () => {
        for await (const s of status.status()) {
          if (s.type === 'reconnect') {
            for (const f of [...this.#moved]) {
              f()
            }
          }
        }
      })().catch(() => undefined)
    }
  }

  /** Watch one request on `subject` until {@link ReconnectWatch.release}. */
  watch(subject: string): ReconnectWatch {
    let timer: ReturnType<typeof setTimeout> | undefined
    let onMove = (): void => undefined
    const lost = new Promise<never>((_, reject) => {
      onMove = () => {
        timer ??= setTimeout(
          () =>
            reject(
              new CohortError(
                'REPLY_LOST',
                `the NATS connection moved to another server while the request on ${subject} was in flight, and no reply came within ${Math.round(this.#graceMs)} ms after it; retry`,
                { retryAfterS: 1 },
              ),
            ),
          this.#graceMs,
        )
      }
    })
    lost.catch(() => undefined)
    if (this.#graceMs > 0) {
      this.#moved.add(onMove)
    }
    return {
      lost,
      release: () => {
        this.#moved.delete(onMove)
        if (timer) {
          clearTimeout(timer)
        }
      },
    }
  }

  /**
   * Call `fn(movedAt)` each time the connection moved, once `graceMs` passed after the move (replies
   * to requests sent before `movedAt`, epoch ms, that have not come by then are lost). Returns a
   * function that stops the calls. Never called when the guard is off (graceMs 0).
   */
  onMoved(fn: (movedAt: number) => void): () => void {
    const timers = new Set<ReturnType<typeof setTimeout>>()
    const onMove = () => {
      const at = Date.now()
      const t = setTimeout(() => {
        timers.delete(t)
        fn(at)
      }, this.#graceMs)
      timers.add(t)
    }
    if (this.#graceMs > 0) {
      this.#moved.add(onMove)
    }
    return () => {
      this.#moved.delete(onMove)
      for (const t of timers) {
        clearTimeout(t)
      }
    }
  }
}
