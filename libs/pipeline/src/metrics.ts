import { BATCH_SIZE_BUCKETS, DURATION_BUCKETS_S, type Registry } from '@cohort/metrics'

/**
 * Per-stage metrics of pipelines, labelled `{pipeline, stage}` (see docs/pipelines.md#metrics).
 * Register once per registry.
 */
export function pipelineMetrics(r: Registry) {
  return {
    queueDepth: r.gauge('cohort_stage_queue_depth', 'Items queued before a pipeline stage, by pipeline and stage.'),
    queue: r.histogram('cohort_stage_queue_duration_seconds', 'Time an item waited before its pipeline stage batch started.', DURATION_BUCKETS_S),
    batchSize: r.histogram('cohort_stage_batch_size', 'Items per pipeline stage batch.', BATCH_SIZE_BUCKETS),
    compute: r.histogram('cohort_stage_compute_duration_seconds', 'Compute time per pipeline stage batch (in process, or the remote round trip).', DURATION_BUCKETS_S),
    items: r.counter('cohort_stage_items_total', 'Items leaving a pipeline stage, by pipeline, stage and code.'),
  }
}

/** Typed handles of {@link pipelineMetrics}. */
export type PipelineMetrics = ReturnType<typeof pipelineMetrics>
