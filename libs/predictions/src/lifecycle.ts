import { finishPrediction, type Prediction } from './predictions.ts'
import type { WebhookSender } from './webhooks.ts'

/** What running a prediction gave: its output (and compute time), or its error. */
export interface PredictionOutcome {
  output?: unknown
  error?: { code: string; message: string } | undefined
  computeMs?: number | undefined
}

/** A worker reply's outcome for its one item: the request's error, else the item's, else the output. */
export function outcomeOf(reply: {
  error?: { code: string; message: string } | undefined
  errors?: ({ code: string; message: string } | null | undefined)[] | undefined
  items?: unknown[] | undefined
  timing?: ({ computeMs?: number } | undefined)[] | undefined
}): PredictionOutcome {
  const err = reply.error ?? reply.errors?.find((e) => e !== null && e !== undefined) ?? undefined
  return err ? { error: { code: err.code, message: err.message } } : { output: reply.items?.[0] ?? null, computeMs: reply.timing?.[0]?.computeMs }
}

/**
 * The one Cog prediction lifecycle: each step gives the next record and sends the webhooks Cog
 * sends at it (`start` when processing begins; `output` then `completed` when it ends; `completed`
 * on cancel). Where the record is stored (memory, JetStream KV, Redis) is the caller's: it stores
 * the record a step returns, then calls the matching announcement once the store succeeded.
 */
export class PredictionLifecycle {
  constructor(readonly webhooks: WebhookSender) {}

  /** The record once processing begins (a first `started_at` is kept; `attempts` when known). */
  start(p: Prediction, o: { attempts?: number; now?: Date } = {}): Prediction {
    return {
      ...p,
      status: 'processing',
      started_at: p.started_at ?? (o.now ?? new Date()).toISOString(),
      ...(o.attempts !== undefined ? { attempts: o.attempts } : {}),
    }
  }

  /** Announce a start (webhook `start`). */
  started(p: Prediction): void {
    this.webhooks.send(p, 'start')
  }

  /** The record after its run: `succeeded`, `failed` with the code, or `canceled` (a CANCELLED error). */
  finish(p: Prediction, outcome: PredictionOutcome, now?: Date): Prediction {
    return finishPrediction(p, outcome, now)
  }

  /** Announce a finished record: `output` (when it succeeded), then `completed`. */
  finished(p: Prediction): void {
    if (p.status === 'succeeded') {
      this.webhooks.send(p, 'output')
    }
    this.webhooks.send(p, 'completed')
  }

  /** The record canceled now, its `completed` webhook sent. */
  cancel(p: Prediction, now = new Date()): Prediction {
    const c: Prediction = { ...p, status: 'canceled', completed_at: now.toISOString() }
    this.webhooks.send(c, 'completed')
    return c
  }
}
