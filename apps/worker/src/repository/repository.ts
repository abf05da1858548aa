import { basename } from 'node:path'
import type { BatchingConfig } from '@cohort/batching'
import { decodeValue, encodeValue, isValidModelName, type RepositoryAnswer, type RepositoryEntry, type RepositoryRequest, type Subjects } from '@cohort/protocol'
import { consume, type Transport, type TransportMessage, type TransportSubscription } from '@cohort/transport'
import type { Logger } from '@cohort/observability'
import type { Registry } from '@cohort/metrics'
import type { TSchema } from '@sinclair/typebox'
import type { ModelServer } from '../model-server.ts'
import type { ModelRunner } from '../runners/types.ts'
import type { ExecutionProvider } from '../ort/ort-pool.ts'
import type { PaddingOptions } from '../runners/padding.ts'
import { OnnxRunner } from '../runners/onnx-runner.ts'
import { describePolicy, jsonSyntaxError, newestFirst, parseModelConfig, selectVersions, type RepositoryModelConfig } from './model-config.ts'
import { listModels, scanModel, ENTRY_FILES_TEXT, type ScanOptions, type ScannedModel, type ScannedVersion, type VersionKind } from './scan.ts'
import { checkConfigFor, importConfig, pipelineVersion, predictorVersion, type VersionRunner } from './modules.ts'
import { BareName } from './bare-name.ts'

/** Flags of the command line that apply to every repository model, over its `config.json` or `config.ts` (ONNX flags: ONNX models only). */
export interface RepositoryFlags {
  ep?: ExecutionProvider
  instances?: number
  threads?: number
  processes?: boolean
  padding?: PaddingOptions
}

/** What a repository needs from its worker to serve a version. */
export interface RepositoryHost {
  /** Build (not start) the server of a started runner with the worker's shared options. */
  server(runner: ModelRunner, o: { version: string; subjects: Subjects; fileBatching: Partial<BatchingConfig>; outputSchema?: TSchema | undefined }): ModelServer
  /** The server starts serving: count it among the worker's (discovery, $SRV, metrics). */
  add(s: ModelServer): void
  /** The server has drained. */
  remove(s: ModelServer): void
}

/** Options of {@link ModelRepository}. */
export interface ModelRepositoryOptions {
  /** The repository folder: `DIR/<model>/<version>/model.onnx` (or `model.ts`, `pipeline.ts`), `DIR/<model>/config.json` (or `config.ts`). */
  dir: string
  /**
   * Scan the repository this often for new, changed and removed versions (0: never; load and
   * unload then come only from `POST /v2/repository/models/{m}/load|unload`).
   * @default 0
   */
  pollMs?: number
  /**
   * Serve model folders and entry files that are symbolic links leading outside `dir` (off: such
   * versions are UNAVAILABLE, the index says why; docs/repository.md#symbolic-links). @default false
   */
  allowLinksOutside?: boolean
  transport: Transport
  /** The worker's subjects (the repository adds the version tokens). */
  subjects: Subjects
  workerId: string
  logger: Logger
  host: RepositoryHost
  flags?: RepositoryFlags
  /** Capacity-aware distribution on the bare subjects too (ModelServerOptions.capacityAware). @default true */
  capacityAware?: boolean
  /** Pipeline versions' stage metrics go here. */
  registry?: Registry
  /**
   * Build the runner of one version (not started).
   * @default by its entry file: an OnnxRunner of `model.onnx`, a predictor thread of `model.ts`, a pipeline of `pipeline.ts`
   */
  runner?: (v: VersionToLoad) => Promise<VersionRunner>
}

/** One version to load, as {@link ModelRepositoryOptions.runner} gets it. */
export interface VersionToLoad {
  /** The repository's model name (what it is served as). */
  name: string
  version: string
  /** The entry file (`model.onnx`, `model.ts`, `pipeline.ts`, ...). */
  file: string
  kind: VersionKind
  config: RepositoryModelConfig
  /** `config.json`, `config.ts`, ... (for messages). */
  configName: string
  flags: RepositoryFlags
  /** Changes whenever the version's files or the config do (a module is imported afresh). */
  tag: string
}

export type { VersionRunner }

interface Loaded {
  server: ModelServer
  signature: string
}

/** One model of the repository on this worker. */
interface ModelState {
  name: string
  loaded: Map<string, Loaded>
  /** Versions that failed to load, with the signature that failed (retried when it changes, or on load). */
  failed: Map<string, { signature: string; reason: string }>
  loading: Set<string>
  /** The last scan (for the index). */
  scan: ScannedModel | undefined
  /** The signatures seen by the previous poll (a version loads once two polls agree). */
  seen: Map<string, string>
  /** Versions with an entry file whose folder changed since the previous poll. */
  waiting: Set<string>
  config: RepositoryModelConfig | undefined
  configSignature: string | undefined
  configError: string | undefined
  /** The configuration file's name (`config.json`, `config.ts`, ...), for messages. */
  configName: string
  /** Unloaded by request: polling leaves it out until it is loaded again. */
  unloaded: boolean
  bare: BareName | undefined
  /** Changes to this model, one at a time. */
  chain: Promise<void>
  busy: number
}

type Mode = 'start' | 'poll' | 'load'

/** The signature of a version with the model's config: a change to either reloads it. */
const sigOf = (versionSig: string, configSig: string | undefined) => `${configSig ?? '-'}#${versionSig}`

/**
 * A worker's model repository (docs/repository.md): loads the versions each model's version
 * policy selects, each on its own subjects (`cohort.infer.<model>.<version>`), the newest also on
 * the model's bare subjects; answers index, load and unload requests; polls for changes.
 * A new version starts serving before the one it replaces stops taking work, and the old one
 * drains (finishes what it holds); a version that fails to load leaves what serves in place.
 */
export class ModelRepository {
  readonly #o: ModelRepositoryOptions
  readonly #models = new Map<string, ModelState>()
  readonly #drains = new Set<Promise<void>>()
  /** Rejects when `close()` begins: a version still loading stops waiting for its start. */
  readonly #abandon: Promise<never>
  #abandonLoads: (e: Error) => void = () => undefined
  #subs: TransportSubscription[] = []
  #timer: ReturnType<typeof setTimeout> | undefined
  #closing: Promise<void> | undefined
  #polling: Promise<void> = Promise.resolve()
  readonly #scanOptions: ScanOptions

  constructor(o: ModelRepositoryOptions) {
    this.#o = o
    this.#scanOptions = { allowLinksOutside: o.allowLinksOutside === true }
    this.#abandon = new Promise<never>((_, reject) => (this.#abandonLoads = reject))
    this.#abandon.catch(() => undefined)
    if (o.pollMs !== undefined && !(Number.isFinite(o.pollMs) && o.pollMs >= 0)) {
      throw new RangeError(`pollMs must be a number of ms >= 0, got ${o.pollMs}`)
    }
  }

  /** Load every model found, then answer control requests and start polling (when on). */
  async start(): Promise<void> {
    let names: string[]
    try {
      names = await listModels(this.#o.dir)
    } catch (e) {
      throw new Error(`model repository ${this.#o.dir} cannot be read: ${e instanceof Error ? e.message : String(e)}`)
    }
    for (const n of names) {
      await this.#change(n, 'start')
    }
    const t = this.#o.transport
    const s = this.#o.subjects
    const serve = (op: 'index' | 'load' | 'unload', fn: (r: RepositoryRequest) => Promise<RepositoryAnswer> | RepositoryAnswer) => {
      const sub = t.subscribe(s.repository(op))
      this.#subs.push(sub)
      void consume(
        sub,
        async (m: TransportMessage) => m.respond(encodeValue(await fn(readRequest(m.data)))),
        (e) => this.#o.logger.error({ workerId: this.#o.workerId, err: e }, `model repository: ${op} subscription failed`),
      )
    }
    serve('index', () => this.index())
    serve('load', (r) => this.#requested(r, 'load'))
    serve('unload', (r) => this.#requested(r, 'unload'))
    this.#schedulePoll()
  }

  /** Every model of the repository with each version's state (this worker's view). */
  index(model?: string): RepositoryAnswer {
    const models: RepositoryEntry[] = []
    for (const st of [...this.#models.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      if (model === undefined || st.name === model) {
        models.push(...this.#entries(st))
      }
    }
    const busy = [...this.#models.values()].filter((m) => m.busy > 0 && (model === undefined || m.name === model)).map((m) => m.name)
    return { worker: this.#o.workerId, models, busy }
  }

  /** Load (rescan) one model now: new, changed and (re)tried versions, under its version policy. */
  load(model: string): Promise<void> {
    return this.#change(model, 'load')
  }

  /** Stop serving every version of a model (each finishes what it holds); polling leaves it out until loaded. */
  unload(model: string): Promise<void> {
    const st = this.#models.get(model)
    if (!st) {
      return Promise.resolve()
    }
    return this.#serialize(st, () => {
      st.unloaded = true
      this.#retire(st, [...st.loaded.keys()])
      this.#o.logger.info({ workerId: this.#o.workerId, model }, 'model repository: model unloaded')
      return Promise.resolve()
    })
  }

  /** Polls of the repository done (for tests). */
  polls = 0

  /**
   * Stop polling and answering; abandon a version still loading (it fails, its runner is closed);
   * stop the bare-name listeners (the servers drain with the worker). Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      clearTimeout(this.#timer)
      for (const s of this.#subs) {
        s.unsubscribe()
      }
      // A load still running (a long or hung setup()) is abandoned, not waited for: it fails and
      // its runner is closed (a predictor thread ends, setup's signal aborts), so the worker drains
      // what serves and exits.
      this.#abandonLoads(new Error('the worker is shutting down'))
      await this.#polling
      await Promise.all([...this.#models.values()].map((m) => m.chain))
      await Promise.all([...this.#models.values()].map((m) => m.bare?.close() ?? Promise.resolve()))
      await Promise.all([...this.#drains])
    })()
    return this.#closing
  }

  async #requested(r: RepositoryRequest, op: 'load' | 'unload'): Promise<RepositoryAnswer> {
    const model = r.model
    if (typeof model !== 'string' || !isValidModelName(model)) {
      return { ...this.index(''), error: `"${String(model)}" is not a valid model name` }
    }
    if (!this.#models.has(model) && (op === 'unload' || (await scanModel(this.#o.dir, model, this.#scanOptions)) === undefined)) {
      return { ...this.index(model), error: `no folder ${model} in the model repository` }
    }
    // Answer at once, with the change under way (busy); the gateway polls the index until it is done.
    const st = this.#state(model)
    st.busy++
    const done = op === 'load' ? this.load(model) : this.unload(model)
    const answer = this.index(model)
    st.busy--
    void done.catch(() => undefined)
    return answer
  }

  #state(name: string): ModelState {
    let st = this.#models.get(name)
    if (!st) {
      st = {
        name,
        loaded: new Map(),
        failed: new Map(),
        loading: new Set(),
        scan: undefined,
        seen: new Map(),
        waiting: new Set(),
        config: undefined,
        configSignature: undefined,
        configError: undefined,
        configName: 'config.json',
        unloaded: false,
        bare: undefined,
        chain: Promise.resolve(),
        busy: 0,
      }
      this.#models.set(name, st)
    }
    return st
  }

  #serialize(st: ModelState, fn: () => Promise<void>): Promise<void> {
    st.busy++
    const run = st.chain.then(fn).finally(() => st.busy--)
    st.chain = run.catch((e: unknown) => this.#o.logger.error({ workerId: this.#o.workerId, model: st.name, err: e }, 'model repository: change failed'))
    return run
  }

  #change(name: string, mode: Mode): Promise<void> {
    const st = this.#state(name)
    return this.#serialize(st, () => this.#reconcile(st, mode))
  }

  /** Bring one model to what its folder and version policy say. */
  async #reconcile(st: ModelState, mode: Mode): Promise<void> {
    if (this.#closing) {
      return
    }
    if (mode === 'load') {
      st.unloaded = false
      st.failed.clear()
    } else if (st.unloaded) {
      return
    }
    const scan = await scanModel(this.#o.dir, st.name, this.#scanOptions)
    st.scan = scan
    if (!scan) {
      // The folder is gone: every version stops.
      this.#retire(st, [...st.loaded.keys()])
      return
    }
    // config.json (or config.ts): a bad one keeps what serves (with its old config) and loads nothing new.
    if (scan.configConflict !== undefined || scan.config?.signature !== st.configSignature || st.config === undefined) {
      const cfgName = scan.config?.name ?? 'config.json'
      try {
        if (scan.configConflict !== undefined) {
          throw new RangeError(scan.configConflict)
        }
        const c = scan.config
        const raw = c === undefined ? undefined : c.text !== undefined ? parseJson(c.text) : await importConfig(c.file, c.signature)
        st.config = parseModelConfig(raw, cfgName, c?.text)
        st.configSignature = scan.config?.signature
        st.configName = cfgName
        st.configError = undefined
      } catch (e) {
        st.configError = scan.configConflict ?? `${st.name}/${cfgName}: ${e instanceof Error ? e.message : String(e)}`
        this.#o.logger.error({ workerId: this.#o.workerId, model: st.name, err: st.configError }, 'model repository: configuration rejected')
        if (mode !== 'poll' || st.seen.size === 0) {
          st.seen = new Map(scan.versions.map((v) => [v.version, v.signature]))
        }
        return
      }
    }
    const config = st.config
    const prevSeen = st.seen
    st.seen = new Map(scan.versions.map((v) => [v.version, v.signature]))
    // A version is complete when model.onnx is there and (when polling) nothing in its folder
    // changed since the previous poll (docs/repository.md#polling).
    const complete = new Map<string, string>()
    for (const v of scan.versions) {
      if (v.file !== undefined && v.kind !== undefined && (mode !== 'poll' || prevSeen.get(v.version) === v.signature)) {
        complete.set(v.version, sigOf(v.signature, st.configSignature))
      }
    }
    st.waiting = new Set(scan.versions.filter((v) => v.kind !== undefined && !complete.has(v.version)).map((v) => v.version))
    const onDisk = new Set(scan.versions.map((v) => v.version))
    for (;;) {
      const candidates = new Set<string>()
      for (const [v, sig] of complete) {
        if (st.failed.get(v)?.signature !== sig) {
          candidates.add(v)
        }
      }
      // What serves stays a candidate while its folder exists (a half-copied update waits).
      for (const v of st.loaded.keys()) {
        if (onDisk.has(v)) {
          candidates.add(v)
        }
      }
      const desired = selectVersions(config.versionPolicy, candidates)
      const next = desired.find((v) => {
        const sig = complete.get(v)
        const l = st.loaded.get(v)
        return sig !== undefined && (!l || l.signature !== sig) && st.failed.get(v)?.signature !== sig
      })
      if (next === undefined) {
        this.#retire(
          st,
          [...st.loaded.keys()].filter((v) => !desired.includes(v)),
        )
        this.#point(st)
        return
      }
      const v = scan.versions.find((x) => x.version === next) as ScannedVersion & { file: string; kind: VersionKind }
      await this.#loadVersion(st, v, config, complete.get(next) as string)
    }
  }

  /** A load stops where it finds the worker shutting down (close() may run during any of its awaits). */
  #stopIfClosing(): void {
    if (this.#closing) {
      throw new Error('the worker is shutting down')
    }
  }

  async #loadVersion(st: ModelState, v: ScannedVersion & { file: string; kind: VersionKind }, config: RepositoryModelConfig, signature: string): Promise<void> {
    const log = this.#o.logger
    const flags = this.#o.flags ?? {}
    const version = v.version
    st.loading.add(version)
    let runner: ModelRunner | undefined
    const t0 = Date.now()
    try {
      const build = this.#o.runner ?? ((x: VersionToLoad) => defaultRunner(x, this.#o.registry))
      const made = await build({ name: st.name, version, file: v.file, kind: v.kind, config, configName: st.configName, flags, tag: signature })
      runner = made.runner
      this.#stopIfClosing()
      await Promise.race([runner.start(), this.#abandon])
      this.#stopIfClosing()
      const server = this.#o.host.server(runner, {
        version,
        subjects: versionSubjects(this.#o.subjects, version),
        fileBatching: config.batching,
        ...(made.outputSchema !== undefined ? { outputSchema: made.outputSchema } : {}),
      })
      await server.start()
      this.#o.host.add(server)
      const old = st.loaded.get(version)
      st.loaded.set(version, { server, signature })
      st.failed.delete(version)
      if (old) {
        this.#drain(st, old.server)
      }
      log.info({ workerId: this.#o.workerId, model: st.name, version, ms: Date.now() - t0, reloaded: old !== undefined }, 'model repository: version loaded')
    } catch (e) {
      const reason = `failed to load ${st.name}/${version}/${basename(v.file)}: ${e instanceof Error ? e.message : String(e)}`
      st.failed.set(version, { signature, reason })
      log.error({ workerId: this.#o.workerId, model: st.name, version, err: reason }, 'model repository: version failed to load; what serves stays')
      await runner?.close().catch(() => undefined)
    } finally {
      st.loading.delete(version)
    }
    // Point the bare name at the newest at once, so a new version takes bare-name work before an
    // old one stops.
    this.#point(st)
  }

  /** Stop serving `versions` of a model: each drains (finishes what it holds), then leaves. */
  #retire(st: ModelState, versions: string[]): void {
    for (const v of versions) {
      const l = st.loaded.get(v)
      if (l) {
        st.loaded.delete(v)
        this.#point(st)
        this.#drain(st, l.server)
      }
    }
    this.#point(st)
  }

  #drain(st: ModelState, server: ModelServer): void {
    const p = server
      .drain()
      .catch((e: unknown) => this.#o.logger.error({ workerId: this.#o.workerId, model: st.name, version: server.version, err: e }, 'model repository: drain failed'))
      .finally(() => {
        this.#o.host.remove(server)
        this.#drains.delete(p)
      })
    this.#drains.add(p)
  }

  /** The bare name's target: the newest loaded version (none loaded: the bare subjects close). */
  #point(st: ModelState): void {
    const newest = newestFirst(st.loaded.keys())[0]
    const target = newest === undefined ? undefined : st.loaded.get(newest)?.server
    if (target === undefined) {
      const b = st.bare
      st.bare = undefined
      if (b) {
        const p = b.close()
        this.#drains.add(p)
        void p.finally(() => this.#drains.delete(p))
      }
      return
    }
    st.bare ??= new BareName({
      transport: this.#o.transport,
      subjects: this.#o.subjects,
      name: st.name,
      capacityAware: this.#o.capacityAware ?? true,
      versions: () => newestFirst(st.loaded.keys()),
      all: () => [...st.loaded.values()].map((l) => l.server),
    })
    st.bare.point(target)
  }

  #entries(st: ModelState): RepositoryEntry[] {
    const out = new Map<string, RepositoryEntry>()
    const name = st.name
    const policy = st.config ? describePolicy(st.config.versionPolicy) : undefined
    for (const v of st.scan?.versions ?? []) {
      const f = st.failed.get(v.version)
      let reason: string
      if (st.configError !== undefined) {
        reason = st.configError
      } else if (f) {
        reason = f.reason
      } else if (v.conflict !== undefined) {
        reason = `${name}/${v.version}: ${v.conflict}`
      } else if (v.file === undefined) {
        reason = `incomplete: none of ${ENTRY_FILES_TEXT} in ${name}/${v.version}`
      } else if (st.unloaded) {
        reason = 'unloaded'
      } else if (st.waiting.has(v.version)) {
        reason = 'waiting for its folder to stay unchanged for one poll'
      } else {
        reason = `not selected by the version policy (${policy ?? 'latest 1'})`
      }
      out.set(v.version, { name, version: v.version, state: 'UNAVAILABLE', reason })
    }
    for (const v of st.loaded.keys()) {
      const f = st.failed.get(v)
      out.set(v, { name, version: v, state: 'READY', ...(f ? { reason: `serving the previous files: ${f.reason}` } : {}) })
    }
    for (const v of st.loading) {
      out.set(v, { name, version: v, state: 'LOADING' })
    }
    return newestFirst(out.keys()).map((v) => out.get(v) as RepositoryEntry)
  }

  #schedulePoll(): void {
    const ms = this.#o.pollMs ?? 0
    if (!(ms > 0) || this.#closing) {
      return
    }
    this.#timer = setTimeout(() => {
      this.#polling = this.#poll().finally(() => this.#schedulePoll())
    }, ms)
    this.#timer.unref()
  }

  async #poll(): Promise<void> {
    let names: string[]
    try {
      names = await listModels(this.#o.dir)
    } catch (e) {
      this.#o.logger.error({ workerId: this.#o.workerId, err: e }, 'model repository: poll cannot read the folder')
      return
    }
    const all = new Set([...names, ...this.#models.keys()])
    await Promise.all([...all].map((n) => this.#change(n, 'poll').catch(() => undefined)))
    this.polls++
  }
}

function readRequest(data: Uint8Array): RepositoryRequest {
  if (data.byteLength === 0) {
    return {}
  }
  try {
    const v: unknown = decodeValue(data)
    return typeof v === 'object' && v !== null && 'model' in v && typeof v.model === 'string' ? { model: v.model } : {}
  } catch {
    return {}
  }
}

/** A version's subjects: the per-model subjects of `base` with the version token. */
export function versionSubjects(base: Subjects, version: string): Subjects {
  return {
    ...base,
    infer: (m, v) => base.infer(m, v ?? version),
    overflow: (m, v) => base.overflow(m, v ?? version),
    meta: (m, v) => base.meta(m, v ?? version),
    cancel: (m, v) => base.cancel(m, v ?? version),
    queue: (m, v) => base.queue(m, v ?? version),
  }
}

/**
 * The default runner of a version, by its entry file: `model.onnx` with the config's settings and
 * the flags over them; a predictor module in a thread of its own; a pipeline with every stage in
 * process. A predictor or pipeline whose config sets fields that do not apply to it is refused.
 */
export async function defaultRunner(v: VersionToLoad, registry?: Registry): Promise<VersionRunner> {
  const { config: c, flags: f } = v
  if (v.kind === 'onnx') {
    return { runner: onnxRunner(v.name, v.file, c, f) }
  }
  checkConfigFor(v.kind, c, `${v.name}/${v.configName}`)
  return v.kind === 'predictor'
    ? predictorVersion(v.name, v.file, v.tag)
    : pipelineVersion(v.name, v.file, v.tag, {
        ...(registry ? { registry } : {}),
        onnx: {
          ...((f.ep ?? c.ep) !== undefined ? { ep: f.ep ?? c.ep } : {}),
          ...((f.instances ?? c.instances) !== undefined ? { instances: f.instances ?? c.instances } : {}),
          ...((f.threads ?? c.threads) !== undefined ? { threads: f.threads ?? c.threads } : {}),
        },
      })
}

function onnxRunner(name: string, file: string, c: RepositoryModelConfig, f: RepositoryFlags): ModelRunner {
  const instances = f.instances ?? c.instances
  const threads = f.threads ?? c.threads
  const padding = f.padding ?? c.padding
  const processes = f.processes ?? c.processes
  return new OnnxRunner({
    name,
    path: file,
    ep: f.ep ?? c.ep ?? 'cpu',
    ...(instances !== undefined ? { instances } : {}),
    ...(threads !== undefined ? { intraOpNumThreads: threads } : {}),
    ...(padding !== undefined ? { padding } : {}),
    ...(processes !== undefined ? { processes } : {}),
    ...(c.warmup !== undefined ? { warmup: c.warmup } : {}),
  })
}

/** JSON.parse with the line of a syntax error. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch (e) {
    throw jsonSyntaxError(text, e)
  }
}
