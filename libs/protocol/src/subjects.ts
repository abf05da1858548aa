/**
 * NATS subject names. One subject and one queue group per model.
 * @module
 */

/** Default subject prefix. */
export const DEFAULT_SUBJECT_PREFIX = 'cohort'

/** Model names are kept to NATS-token-safe characters. */
export const MODEL_NAME_RE = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/

/** True when `name` is a valid model name (no wildcards, dots only inside). */
export function isValidModelName(name: string): boolean {
  return MODEL_NAME_RE.test(name) && !name.includes('..') && !name.endsWith('.')
}

/** A subject prefix: one or more NATS tokens of letters, digits, `_` and `-`, joined by dots. */
const PREFIX_RE = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

/**
 * The NATS KV bucket names of one subject prefix: `<prefix>-models` (the model directory) and
 * `<prefix>-config` (runtime configuration), dots in the prefix becoming `_` (bucket names allow no
 * dots). The default prefix keeps the historical names `cohort-models` and `cohort-config`, so two
 * deployments on one NATS server with different prefixes never share a bucket.
 * @throws RangeError for a prefix that is not NATS-token-safe.
 */
export function kvBuckets(prefix: string = DEFAULT_SUBJECT_PREFIX): { models: string; config: string } {
  if (!PREFIX_RE.test(prefix)) {
    throw new RangeError(`subject prefix must be dot-separated tokens of letters, digits, _ and -, got ${JSON.stringify(prefix)}`)
  }
  const base = prefix.replaceAll('.', '_')
  return { models: `${base}-models`, config: `${base}-config` }
}

/** Subject builder for one prefix. */
export function subjects(prefix: string = DEFAULT_SUBJECT_PREFIX) {
  return {
    /** Inference requests for a model (queue group {@link queue}). */
    infer: (model: string) => `${prefix}.infer.${model}`,
    /**
     * Overflow for a model's requests: every worker always listens here (queue group), while it
     * listens on {@link infer} only when it has spare capacity. The gateway falls back to it when
     * no worker has capacity.
     */
    overflow: (model: string) => `${prefix}.overflow.${model}`,
    /** Model metadata requests (queue group {@link queue}). */
    meta: (model: string) => `${prefix}.meta.${model}`,
    /** Cancellation notices for a model, to every worker (no queue group). */
    cancel: (model: string) => `${prefix}.cancel.${model}`,
    /** Discovery: every worker answers with the models it serves. */
    discover: () => `${prefix}.discover`,
    /** Worker heartbeats (every worker publishes, every gateway listens; see {@link Heartbeat}). */
    heartbeat: () => `${prefix}.heartbeat`,
    /**
     * A gateway's inbox (protocol v2): each pack is published with the reply subject
     * `<inbox>.<seq>`, and the worker's acceptance notice and reply packs go there; the gateway
     * subscribes to `<inbox>.>`. Workers publish protocol-v2 answers only under `<prefix>.gw.`.
     */
    inbox: (gatewayId: string) => `${prefix}.gw.${gatewayId}`,
    /** Acceptance notices for one gateway instance (the request's `ack` field). */
    accept: (gatewayId: string) => `${prefix}.accept.${gatewayId}`,
    /** The queue group of a model's workers. */
    queue: (model: string) => `${prefix}.q.${model}`,
    /** Requests for one stage of a pipeline served on its own workers (remote placement). */
    stage: (pipeline: string, stage: string) => `${prefix}.stage.${pipeline}.${stage}`,
    /** The queue group of a pipeline stage's workers. */
    stageQueue: (pipeline: string, stage: string) => `${prefix}.q.stage.${pipeline}.${stage}`,
  }
}

/** The subject set type. */
export type Subjects = ReturnType<typeof subjects>
