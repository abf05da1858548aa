import { CohortError, encodeCancel } from '@cohort/protocol'
import { decodePrediction, encodePrediction, isTerminal, WebhookSender, type Prediction } from '@cohort/predictions'
import type { JobQueue } from '@cohort/transport'
import type { Upstream } from '../upstream.ts'
import type { PredictionJobOptions, PredictionJobs } from './types.ts'

/**
 * Async predictions in NATS JetStream: the record in the predictions KV bucket, the job id on the
 * model's work-queue subject. Workers pull the jobs into their batch engines, store the result and
 * send the webhooks; any gateway answers GET from the bucket, so a gateway restart loses nothing.
 */
export class DurableJobs implements PredictionJobs {
  readonly kind = 'jetstream'
  readonly #q: JobQueue
  readonly #up: Upstream
  /** Sends the `completed` webhook of a cancel (the workers send all the others). */
  readonly webhooks: WebhookSender

  constructor(q: JobQueue, up: Upstream, o: PredictionJobOptions = {}) {
    this.#q = q
    this.#up = up
    this.webhooks = new WebhookSender(o.webhooks)
  }

  async submit(p: Prediction): Promise<{ prediction: Prediction; created: boolean }> {
    const r = await this.#q.create(p.id, encodePrediction(p))
    const stored = decodePrediction(r.value)
    if (r.created || stored.status === 'starting') {
      // Enqueue also when the record exists but never started: an earlier gateway may have died
      // between storing and enqueueing. The stream drops a repeat of the same id (its msgID).
      await this.#q.enqueue(stored.model, stored.id)
    }
    return { prediction: stored, created: r.created }
  }

  async get(id: string): Promise<Prediction | undefined> {
    const r = await this.#q.get(id)
    return r ? decodePrediction(r.value) : undefined
  }

  async cancel(id: string): Promise<Prediction | undefined> {
    for (let i = 0; i < 20; i++) {
      const r = await this.#q.get(id)
      if (!r) {
        return undefined
      }
      const p = decodePrediction(r.value)
      if (isTerminal(p.status)) {
        return p
      }
      const next: Prediction = { ...p, status: 'canceled', completed_at: new Date().toISOString() }
      if (await this.#q.update(id, encodePrediction(next), r.revision)) {
        // Drop it from the worker queue that holds it (a job not yet pulled is skipped when pulled).
        this.#up.transport.publish(this.#up.subjects.cancel(p.model), encodeCancel({ v: 1, id }))
        this.webhooks.send(next, 'completed')
        return next
      }
    }
    throw new CohortError('INTERNAL', `prediction ${id} kept changing while being canceled`)
  }

  async wait(id: string, timeoutMs: number): Promise<Prediction | undefined> {
    const until = Date.now() + timeoutMs
    let pause = 20
    for (;;) {
      const p = await this.get(id)
      if (!p || isTerminal(p.status) || Date.now() >= until) {
        return p
      }
      await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(1, until - Date.now()))))
      pause = Math.min(250, pause * 2)
    }
  }

  close(): Promise<void> {
    this.webhooks.close()
    return Promise.resolve()
  }
}
