/**
 * The knob tables of the model and batching flags (`cohort serve`, `cohort worker`): one row per
 * flag ({@link knobs.ts}). The batching rows are checked by `@cohort/batching`'s
 * `BATCHING_FIELDS` (the same bounds as admin patches and config.json) and show its defaults; only
 * given values are passed on ({@link knobGiven}), as they are one layer over config.json and the
 * engine's defaults (docs/repository.md#configuration).
 * @module
 */
import { BATCHING_FIELDS, DEFAULT_BATCHING, DEFAULT_START_CAP, POLICIES, type BatchingKey } from '@cohort/batching'
import {
  DEFAULT_BATCH_TIMEOUT_FLOOR_MS,
  DEFAULT_BATCH_TIMEOUT_MULTIPLE,
  DEFAULT_INLINE_RUN_MS,
  DEFAULT_ONNX_BATCH_LIMIT,
  DEFAULT_PAD_VALUE,
  DEFAULT_TTFT_SLO_MS,
} from '@cohort/worker'
import { knobGiven, knobHelp, knobOptions, type Knob, type KnobTable, type KnobValues } from './knobs.ts'

/** ORT sessions per model when --instances is not given. */
export const DEFAULT_INSTANCES = 1
/** ONNX Runtime execution provider when --ep is not given. */
export const DEFAULT_EP = 'cpu'

/** A batching field's check, for a knob row. */
const field = (key: BatchingKey) => ({ valid: (v: unknown) => BATCHING_FIELDS[key].valid(v), expect: BATCHING_FIELDS[key].expect })

/** The model flags. */
export const MODEL_KNOBS = Object.freeze({
  model: {
    kind: 'list',
    arg: 'SPEC[,K=V...]',
    help: [
      'ONNX model: demo | heavy | NAME=PATH.onnx | PATH.onnx (repeatable), with',
      'its own flags after commas, over the global ones: max-batch-size=N,',
      'max-delay-ms=MS, policy=P, max-queue=N, max-batch-cost=N, no-admission,',
      'no-auto-batch, warmup=off|N|NxA:B (N runs at batch sizes A, B; default 1x1)',
    ],
  },
  predictor: { kind: 'list', arg: 'FILE', help: ['TypeScript/JS module exporting definePredictor(...) (repeatable)'] },
  generative: {
    kind: 'list',
    arg: 'NAME=PATH',
    help: ['generative model (docs/generative.md): PATH a module (.ts/.js) whose default', 'export makes a Generator, or an ONNX decoder (.onnx) (repeatable)'],
  },
  'ttft-slo-ms': {
    kind: 'number',
    arg: 'MS',
    default: DEFAULT_TTFT_SLO_MS,
    help: ['ONNX decoders: the time-to-first-token SLO they announce, the budget of a', 'generation whose client sets none'],
  },
  'generation-slo-ms': {
    kind: 'number',
    arg: 'MS',
    help: ['ONNX decoders: the whole-generation SLO they announce (default none: the', "gateway's request timeout)"],
  },
  ep: { kind: 'string', arg: 'cpu|webgpu|cuda', default: DEFAULT_EP, help: ['ONNX Runtime execution provider'] },
  instances: { kind: 'int', arg: 'N', default: DEFAULT_INSTANCES, help: ['ORT sessions per model: threads on cpu, processes on GPU EPs'] },
  'ort-processes': { kind: 'bool', help: ['run every ORT instance in a child process, even on cpu (a stuck', 'session.run() can then be killed at --batch-timeout-ms)'] },
  threads: {
    kind: 'int',
    arg: 'N',
    help: ['ORT intra-op threads per instance (default: (cores - 1) / instances, at', 'least 1: one core is left to the serving path; pool threads never spin)'],
  },
  'inline-run-ms': {
    kind: 'number',
    arg: 'MS',
    default: DEFAULT_INLINE_RUN_MS,
    help: ['--model ONNX models on cpu: a batch predicted to run in at most MS runs on', 'the main thread when nothing waits behind it, no hand-off to an ORT thread (0: never)'],
  },
} as const satisfies KnobTable)

/** The batching flags: the `flags` layer of every model. */
export const BATCHING_KNOBS = Object.freeze({
  'max-batch-size': {
    kind: 'int',
    arg: 'N',
    check: field('maxBatchSize'),
    help: [`hard cap of items per batch (default: ONNX models ${DEFAULT_ONNX_BATCH_LIMIT}, predictors their own)`],
  },
  'no-auto-batch': {
    kind: 'bool',
    help: ['ONNX: keep the batch cap at --max-batch-size (default: the worker tunes it', `within [1, max] for items/s under the latency budget; starts at ${DEFAULT_START_CAP})`],
  },
  'max-delay-ms': { kind: 'number', arg: 'MS', check: field('maxDelayMs'), default: DEFAULT_BATCHING.maxDelayMs, help: ['max hold time of the timer policy'] },
  'batch-timeout-ms': {
    kind: 'number',
    arg: 'MS',
    help: [
      'per-batch time limit: a batch past it fails with 504 BATCH_TIMEOUT and its',
      `runner restarts (default max(${DEFAULT_BATCH_TIMEOUT_FLOOR_MS}, ${DEFAULT_BATCH_TIMEOUT_MULTIPLE} x learned t(b)); 0: none)`,
    ],
  },
  policy: {
    kind: 'string',
    arg: POLICIES.join('|'),
    check: field('policy'),
    default: DEFAULT_BATCHING.policy,
    help: ['batching policy (default {default}: dispatch at once when idle)'],
  },
  'max-queue': { kind: 'int', arg: 'N', check: field('maxQueue'), default: DEFAULT_BATCHING.maxQueue, help: ['queued items per model before 503'] },
  'no-admission': {
    kind: 'bool',
    help: ['eager/deadline: queue items even when they are estimated to finish late', '(default: refuse them on arrival with 503 OVERLOADED)'],
  },
  'max-batch-cost': {
    kind: 'number',
    arg: 'N',
    check: field('maxBatchCost'),
    help: ['cost units per batch (tokens, pixels: product of dynamic dims; default no limit)'],
  },
  'max-tenant-queue': {
    kind: 'int',
    arg: 'N',
    min: 0,
    check: field('maxTenantQueue'),
    default: DEFAULT_BATCHING.maxTenantQueue,
    help: ['queued items per tenant (API key, JWT subject) before 503 (default {default}: only', '--max-queue)'],
  },
  'slo-ms': {
    kind: 'number',
    arg: 'MS',
    check: field('sloMs'),
    default: DEFAULT_BATCHING.sloMs,
    help: ['server-side SLO: the deadline of requests whose client sends none (default', '{default}: derived, max(1000, 4 x learned t(max-batch-size)); 2000 before a sample)'],
  },
  pad: { kind: 'bool', help: ['ONNX: batch items of different lengths by bucket, padded to the longest'] },
  'pad-value': { kind: 'number', arg: 'V', min: -Infinity, default: DEFAULT_PAD_VALUE, help: ['value in padded positions'] },
  'mask-input': { kind: 'string', arg: 'NAME', help: ['ONNX input Cohort fills with the attention mask (1 real, 0 padding)'] },
  buckets: { kind: 'string', arg: 'A,B,C', defaultText: 'powers of two', help: ['length bucket bounds'] },
} as const satisfies Record<string, Knob>)

/** Options shared by serve and worker. */
export const MODEL_OPTIONS = { ...knobOptions(MODEL_KNOBS), ...knobOptions(BATCHING_KNOBS) }
/** Help text of the shared model flags ({@link BATCHING_HELP} has the batching ones). */
export const MODEL_HELP = knobHelp(MODEL_KNOBS)
/** Help text of the shared batching flags. */
export const BATCHING_HELP = knobHelp(BATCHING_KNOBS)

/** The model and batching flags the command line gave (nothing for the absent ones), checked, frozen. */
export function modelKnobs(v: Record<string, unknown>): KnobValues<typeof MODEL_KNOBS> & KnobValues<typeof BATCHING_KNOBS> {
  return Object.freeze({ ...knobGiven(MODEL_KNOBS, v, {}), ...knobGiven(BATCHING_KNOBS, v, {}) })
}
