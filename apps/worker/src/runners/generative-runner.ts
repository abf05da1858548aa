import { generateMetrics, type GenerateMetrics, type Registry } from '@cohort/metrics'
import { CohortError, type Generator, type GeneratorGauges, type ModelMeta } from '@cohort/protocol'
import { measuredGenerator } from './generation-metrics.ts'
import type { ItemResult, ModelRunner, PreparedItem } from './types.ts'

/** Makes a model's {@link Generator}: the default export of a generator module (`--generative NAME=PATH`). */
export type GeneratorFactory = (o: { name: string; path: string }) => Generator | Promise<Generator>

/**
 * A generative model (docs/generative.md) as the worker's model server sees it: its metadata
 * (`kind: 'generative'`) and its {@link Generator}, which runs every request with `generate`
 * (`model-server/generations.ts`). It runs no batches: the generator batches per step itself, and
 * a request without `generate` is refused naming the APIs that serve it.
 */
export class GenerativeRunner implements ModelRunner {
  readonly concurrency = 1
  readonly batchDefaults = { maxBatchSize: 1, maxDelayMs: 0 }
  #generator: Generator | undefined
  #metrics: GenerateMetrics | undefined
  #closed = false

  constructor(
    readonly name: string,
    readonly make: () => Generator | Promise<Generator>,
  ) {}

  /** The generator, once started. */
  get generator(): Generator {
    if (!this.#generator) {
      throw new CohortError('NOT_READY', `generative model "${this.name}" is not started`)
    }
    return this.#generator
  }

  /** Registers the `cohort_generate_*` metrics; the generator, once started, feeds them. */
  instrument(registry: Registry): void {
    const m = generateMetrics(registry)
    this.#metrics = m
    const model = this.name
    const gauge = (pick: (g: GeneratorGauges) => number) => (): [{ model: string }, number][] => {
      const g = this.#generator?.gauges?.()
      return g ? [[{ model }, pick(g)]] : []
    }
    m.running.collect(gauge((g) => g.running))
    m.waiting.collect(gauge((g) => g.waiting))
    m.kvTokens.collect(gauge((g) => g.kvTokens))
    m.kvBudget.collect(gauge((g) => g.kvBudgetTokens))
    m.kvUsage.collect(gauge((g) => (g.kvBudgetTokens > 0 ? g.kvTokens / g.kvBudgetTokens : 0)))
    m.preemptions.collect(gauge((g) => g.preemptions))
  }

  async start(): Promise<void> {
    if (!this.#generator) {
      const g = await this.make()
      this.#generator = this.#metrics ? measuredGenerator(g, this.#metrics, this.name) : g
    }
  }

  meta(): ModelMeta {
    return {
      name: this.name,
      versions: ['1'],
      platform: 'cohort_generative',
      inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }],
      outputs: [{ name: 'text_output', datatype: 'BYTES', shape: [1] }],
      kind: 'generative',
      ready: this.#generator !== undefined && !this.#closed,
      maxBatchSize: 0,
      maxDelayMs: 0,
      ...(this.#generator ? { generative: { ...this.#generator.info } } : {}),
    }
  }

  prepare(): PreparedItem[] {
    throw new CohortError(
      'BAD_REQUEST',
      `model "${this.name}" is generative: send POST /v2/models/${this.name}/generate, /v1/completions or /v1/chat/completions (docs/generative.md)`,
    )
  }

  runBatch(): Promise<ItemResult[]> {
    return Promise.reject(new CohortError('INTERNAL', `generative model "${this.name}" runs no batches`))
  }

  async close(): Promise<void> {
    if (this.#closed) {
      return
    }
    this.#closed = true
    await this.#generator?.close()
  }
}
