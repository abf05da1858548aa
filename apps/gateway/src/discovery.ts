import {
  decodeValue,
  SERVICE_NAME,
  serviceSubject,
  type CohortEndpointData,
  type InferenceStatsData,
  type ModelMeta,
  type ServiceEndpointInfo,
  type ServiceEndpointStats,
  type ServiceInfoResponse,
  type ServiceStatsResponse,
  type Subjects,
} from '@cohort/protocol'
import type { Transport } from '@cohort/transport'

/**
 * What the workers on the bus serve and how they are: the `cohort.discover` broadcast, the NATS
 * services protocol (`$SRV.INFO`, `$SRV.STATS`), readiness and the `GET /v2/workers` view
 * (docs/architecture.md#discovery). Apart from the send path (upstream.ts): nothing here is on a
 * request's way.
 */
export class Discovery {
  constructor(
    readonly transport: Transport,
    readonly subjects: Subjects,
    /** Each broadcast waits at most min(this, 250 ms) for its answers. */
    readonly metaTimeoutMs: number,
  ) {}

  /** Every model any worker serves right now (merged by name; ready if any worker is). */
  async discover(): Promise<{ models: ModelMeta[]; workers: number }> {
    const replies = await this.transport.requestAll(this.subjects.discover(), new Uint8Array(0), {
      timeoutMs: Math.min(this.metaTimeoutMs, 250),
    })
    const byName = new Map<string, ModelMeta>()
    for (const r of replies) {
      // Any worker (or anything on the subject) answers: the value and its entries may be anything.
      let v: { models?: (ModelMeta | null)[] } | null
      try {
        v = decodeValue(r) as { models?: (ModelMeta | null)[] } | null
      } catch {
        continue // One broken worker must not break discovery for every model.
      }
      for (const m of Array.isArray(v?.models) ? v.models : []) {
        if (typeof m?.name !== 'string') {
          continue
        }
        const prev = byName.get(m.name)
        // A repository model's versions, served by one or more workers, merge into one list.
        const versions = [...new Set([...(prev?.versions ?? []), ...(Array.isArray(m.versions) ? m.versions : [])])].sort(
          (a, b) => b.length - a.length || (b < a ? -1 : b > a ? 1 : 0),
        )
        byName.set(m.name, prev ? { ...prev, ready: prev.ready || m.ready, versions } : { ...m, versions })
      }
    }
    return { models: [...byName.values()].sort((a, b) => a.name.localeCompare(b.name)), workers: replies.length }
  }

  /**
   * The `$SRV.<verb>.cohort-worker` answers of every Cohort worker on this subject prefix (NATS
   * services protocol, ADR-32). Unreadable answers and other services' answers are skipped.
   */
  async services(verb: 'INFO'): Promise<ReceivedInfo[]>
  async services(verb: 'STATS'): Promise<ReceivedStats[]>
  async services(verb: 'INFO' | 'STATS' = 'INFO'): Promise<(ReceivedInfo | ReceivedStats)[]> {
    const replies = await this.transport.requestAll(serviceSubject(verb, SERVICE_NAME), new Uint8Array(0), {
      timeoutMs: Math.min(this.metaTimeoutMs, 250),
    })
    const type = `io.nats.micro.v1.${verb.toLowerCase()}_response`
    const prefix = this.subjects.infer('')
    const out: (ReceivedInfo | ReceivedStats)[] = []
    for (const r of replies) {
      let v: ReceivedInfo | ReceivedStats | null
      try {
        v = JSON.parse(textDecoder.decode(r)) as ReceivedInfo | ReceivedStats | null
      } catch {
        continue
      }
      if (v?.type !== type || v.name !== SERVICE_NAME || typeof v.id !== 'string' || !Array.isArray(v.endpoints)) {
        continue
      }
      // Workers of another deployment (another subject prefix) on the same NATS are not ours.
      if (v.metadata?.['subject_prefix'] !== undefined && `${v.metadata['subject_prefix']}.infer.` !== prefix) {
        continue
      }
      const endpoints = (v.endpoints as unknown[]).filter((e) => typeof (e as { name?: unknown } | null)?.name === 'string')
      out.push({ ...v, endpoints } as typeof v)
    }
    return out.sort((a, b) => a.id.localeCompare(b.id))
  }

  /**
   * Readiness from the services protocol: the serving (not draining) workers, the models they serve
   * and whether every model has a ready worker. Falls back to `cohort.discover` when no worker
   * answers `$SRV` (older workers).
   */
  async readiness(): Promise<{ ready: boolean; models: number; workers: number }> {
    const infos = await this.services('INFO')
    if (infos.length === 0) {
      const { models, workers } = await this.discover()
      const ready = workers > 0 && models.length > 0 && models.every((m) => m.ready)
      return { ready, models: models.length, workers }
    }
    const serving = infos.filter((i) => i.metadata?.['state'] !== 'draining')
    const models = new Map<string, boolean>()
    for (const w of serving) {
      for (const e of w.endpoints) {
        const model = e.metadata?.['model'] ?? e.name
        models.set(model, (models.get(model) ?? false) || e.metadata?.['ready'] === 'true')
      }
    }
    const ready = serving.length > 0 && models.size > 0 && [...models.values()].every(Boolean)
    return { ready, models: models.size, workers: serving.length }
  }

  /** Every worker with its models, batching settings and request counters (for `GET /v2/workers`). */
  async workers(): Promise<WorkerSummary[]> {
    const [infos, stats] = await Promise.all([this.services('INFO'), this.services('STATS')])
    const statsById = new Map(stats.map((s) => [s.id, s]))
    const ids = [...new Set([...infos.map((i) => i.id), ...stats.map((s) => s.id)])].sort()
    const infoById = new Map(infos.map((i) => [i.id, i]))
    return ids.map((id): WorkerSummary => {
      const info = infoById.get(id)
      const st = statsById.get(id)
      const names = [...new Set([...(info?.endpoints ?? []), ...(st?.endpoints ?? [])].map((e) => e.name))]
      const endpoints = names.map((name): WorkerEndpointSummary => {
        const ie = info?.endpoints.find((e) => e.name === name)
        const se = st?.endpoints.find((e) => e.name === name)
        const md = ie?.metadata ?? {}
        const num = (k: string) => (md[k] !== undefined && md[k] !== '' && Number.isFinite(Number(md[k])) ? Number(md[k]) : null)
        return {
          model: md['model'] ?? name,
          subject: ie?.subject ?? se?.subject ?? '',
          queue_group: ie?.queue_group ?? se?.queue_group ?? '',
          ready: md['ready'] === 'true',
          max_batch_size: num('max_batch_size'),
          max_delay_ms: num('max_delay_ms'),
          policy: md['policy'] ?? null,
          concurrency: num('concurrency'),
          requests: se?.num_requests ?? null,
          errors: se?.num_errors ?? null,
          last_error: se?.last_error ?? null,
          average_processing_ms: se ? se.average_processing_time / 1e6 : null,
          queued: se?.data?.queued ?? null,
          running: se?.data?.running ?? null,
          batches: se?.data?.batches ?? null,
          mean_batch_size: se?.data?.mean_batch_size ?? null,
        }
      })
      const sum = (k: 'requests' | 'errors' | 'queued' | 'batches') => endpoints.reduce((a, e) => a + (e[k] ?? 0), 0)
      return {
        id,
        version: info?.version ?? st?.version ?? '',
        state: (info ?? st)?.metadata?.['state'] ?? 'serving',
        started: st?.started ?? null,
        models: endpoints.map((e) => e.model),
        stats: { requests: sum('requests'), errors: sum('errors'), queued: sum('queued'), batches: sum('batches') },
        endpoints,
      }
    })
  }
}

const textDecoder = new TextDecoder()

/** Metadata as it may arrive: a sender may leave it out or send null. */
type ReceivedMetadata = Record<string, string> | null | undefined

/**
 * A `$SRV.INFO` answer as {@link Discovery.services} returns it: the type, name, id and each
 * endpoint's name are checked; other services on the bus and older workers may leave the rest out
 * (metadata above all), so readers check it.
 */
export type ReceivedInfo = Omit<ServiceInfoResponse, 'metadata' | 'endpoints'> & {
  metadata?: ReceivedMetadata
  endpoints: (Omit<ServiceEndpointInfo, 'metadata'> & { metadata?: ReceivedMetadata })[]
}

/** A `$SRV.STATS` answer as {@link Discovery.services} returns it (see {@link ReceivedInfo}): `data` and its fields may be missing. */
export type ReceivedStats = Omit<ServiceStatsResponse, 'metadata' | 'endpoints'> & {
  metadata?: ReceivedMetadata
  endpoints: (Omit<ServiceEndpointStats, 'data'> & { data?: ReceivedEndpointData | null })[]
}

/** An endpoint's `data` in a received `$SRV.STATS` answer. */
export type ReceivedEndpointData = Partial<Omit<CohortEndpointData, 'inference'>> & { inference?: Partial<InferenceStatsData> | null }

/** One model on one worker, as `GET /v2/workers` shows it (null where the worker did not say). */
export interface WorkerEndpointSummary {
  model: string
  subject: string
  queue_group: string
  ready: boolean
  max_batch_size: number | null
  max_delay_ms: number | null
  policy: string | null
  concurrency: number | null
  /** Inference requests received since the worker started. */
  requests: number | null
  /** Requests answered with an error. */
  errors: number | null
  last_error: string | null
  /** Mean receipt-to-reply time in the worker, ms. */
  average_processing_ms: number | null
  queued: number | null
  running: number | null
  batches: number | null
  mean_batch_size: number | null
}

/** One worker, as `GET /v2/workers` shows it. */
export interface WorkerSummary {
  id: string
  version: string
  /** `serving` or `draining`. */
  state: string
  /** ISO 8601 start time. */
  started: string | null
  models: string[]
  /** Totals over the worker's models. */
  stats: { requests: number; errors: number; queued: number; batches: number }
  endpoints: WorkerEndpointSummary[]
}
