/**
 * The engine's counters and gauges as plain numbers (the app exports them, e.g. as Prometheus
 * metrics), and hooks for per-step and per-generation figures (benchmarks).
 * @module
 */
import type { FinishReason, GenerationTiming, GenerationWatcher } from '@cohort/protocol'

export interface EngineMetrics {
  /** Sequences holding a slab row (prefilling or decoding). Gauge. */
  running: number
  /** Sequences waiting for admission (new or preempted). Gauge. */
  waiting: number
  /** KV tokens held in the slab by the running sequences (at most kvBudgetTokens). Gauge. */
  kvTokens: number
  kvBudgetTokens: number
  /** kvTokens / kvBudgetTokens. Gauge. */
  kvUsage: number
  /** Bytes of the KV slab now allocated. Gauge. */
  kvSlabBytes: number
  /** Sequences preempted (their KV dropped, recomputed later). Counter. */
  preemptions: number
  /** Slab row copies (a sequence left or finished its prefill) and capacity changes. Counters. */
  kvRowMoves: number
  kvSlabResizes: number
  steps: number
  sessionRuns: number
  /** Steps with a decode run, and the rows of those runs summed (mean running batch = decodeRowsSum / decodeSteps). Counters. */
  decodeSteps: number
  decodeRowsSum: number
  /** Tokens run through prefill (recomputation included). Counter. */
  prefillTokens: number
  /** Tokens sampled. Counter. */
  generatedTokens: number
  /** Time to first token: count and sum of ms over generations that got one. */
  ttftCount: number
  ttftMsSum: number
  /** Time per output token of each finished generation with 2+ tokens: count and sum of ms. */
  tpotCount: number
  tpotMsSum: number
  /** Wall ms of all steps, and of the session runs inside them (the rest is serving overhead). */
  stepMsSum: number
  runMsSum: number
  /** Generations ended, by reason. Counters. */
  finished: Record<FinishReason | 'error', number>
}

export function emptyMetrics(budget: number): EngineMetrics {
  return {
    running: 0,
    waiting: 0,
    kvTokens: 0,
    kvBudgetTokens: budget,
    kvUsage: 0,
    kvSlabBytes: 0,
    preemptions: 0,
    kvRowMoves: 0,
    kvSlabResizes: 0,
    steps: 0,
    sessionRuns: 0,
    decodeSteps: 0,
    decodeRowsSum: 0,
    prefillTokens: 0,
    generatedTokens: 0,
    ttftCount: 0,
    ttftMsSum: 0,
    tpotCount: 0,
    tpotMsSum: 0,
    stepMsSum: 0,
    runMsSum: 0,
    finished: { stop: 0, length: 0, cancelled: 0, deadline: 0, error: 0 },
  }
}

/** One step, for {@link EngineObserver.step}. */
export interface StepInfo {
  /** Sequences in the batched decode run. */
  decodeRows: number
  prefillTokens: number
  /** ms inside `session.run`. */
  runMs: number
  stepMs: number
}

/** One ended generation, for {@link EngineObserver.finished}. */
export interface FinishedInfo extends GenerationTiming {
  e2eMs: number
  preemptions: number
}

/** Synchronous hooks; must not throw. `firstToken` is called as the token is sampled, `finished` before the sink's `done`/`error`. */
export interface EngineObserver extends GenerationWatcher {
  step?(s: StepInfo): void
  finished?(f: FinishedInfo): void
}
