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

/** A model version: a positive integer without leading zeros, as in Triton's repository layout. */
export const VERSION_RE = /^[1-9][0-9]{0,17}$/

/** True when `v` is a valid model version (`"1"`, `"2"`, ...). */
export function isValidVersion(v: string): boolean {
  return VERSION_RE.test(v)
}

/**
 * A model name as one subject token (docs/protocol.md#subjects-and-who-may-publish-where): `%`
 * written `%25` and `.` written `%2E`, so a dotted name never spans tokens and a version can
 * follow as its own token. Names without `.` or `%` are unchanged, so their subjects are the v1
 * subjects.
 */
export function modelToken(model: string): string {
  return model.includes('.') || model.includes('%') ? model.replaceAll('%', '%25').replaceAll('.', '%2E') : model
}

/** The inverse of {@link modelToken}. */
export function modelFromToken(token: string): string {
  return token.includes('%') ? token.replaceAll('%2E', '.').replaceAll('%25', '%') : token
}

/** `<model token>` or `<model token>.<version>`. */
function target(model: string, version?: string): string {
  return version === undefined ? modelToken(model) : `${modelToken(model)}.${version}`
}

/**
 * Subject builder for one prefix. The per-model subjects take an optional version: without one
 * they are the model's bare subjects (served by the version policy's newest version, or by a model
 * that has no versions), with one the subjects of that version only (`cohort.infer.<model>.<version>`).
 */
export function subjects(prefix: string = DEFAULT_SUBJECT_PREFIX) {
  return {
    /** Inference requests for a model (queue group {@link queue}). */
    infer: (model: string, version?: string) => `${prefix}.infer.${target(model, version)}`,
    /**
     * Overflow for a model's requests: every worker always listens here (queue group), while it
     * listens on {@link infer} only when it has spare capacity. The gateway falls back to it when
     * no worker has capacity.
     */
    overflow: (model: string, version?: string) => `${prefix}.overflow.${target(model, version)}`,
    /** Model metadata requests (queue group {@link queue}). */
    meta: (model: string, version?: string) => `${prefix}.meta.${target(model, version)}`,
    /** Cancellation notices for a model, to every worker (no queue group). */
    cancel: (model: string, version?: string) => `${prefix}.cancel.${target(model, version)}`,
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
    queue: (model: string, version?: string) => `${prefix}.q.${target(model, version)}`,
    /** Requests for one stage of a pipeline served on its own workers (remote placement). */
    stage: (pipeline: string, stage: string) => `${prefix}.stage.${modelToken(pipeline)}.${stage}`,
    /** The queue group of a pipeline stage's workers. */
    stageQueue: (pipeline: string, stage: string) => `${prefix}.q.stage.${modelToken(pipeline)}.${stage}`,
    /**
     * Model repository control (docs/repository.md): `index`, `load` and `unload` requests from a
     * gateway to every worker holding a repository (no queue group; each answers).
     */
    repository: (op: 'index' | 'load' | 'unload') => `${prefix}.repo.${op}`,
  }
}

/** The subject set type. */
export type Subjects = ReturnType<typeof subjects>
