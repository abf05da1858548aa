/**
 * Prometheus metrics for Cohort: a tiny runtime-agnostic registry and the named metric sets.
 * See docs/metrics.md.
 * @module
 */
export {
  BATCH_SIZE_BUCKETS,
  Counter,
  DURATION_BUCKETS_S,
  frozenLabels,
  Gauge,
  Histogram,
  type HistogramSample,
  type Labels,
  type MetricFamily,
  parsePrometheus,
  PROMETHEUS_CONTENT_TYPE,
  Registry,
  renderFamilies,
  renderFamily,
  type Sample,
} from './registry.ts'
export {
  gatewayMetrics,
  type GatewayMetrics,
  generateMetrics,
  type GenerateMetrics,
  ortMetrics,
  type OrtMetrics,
  workerMetrics,
  type WorkerMetrics,
} from './cohort-metrics.ts'
export { bucketCounts, bucketDeltas, type CumulativeBucket, histogramQuantile } from './quantile.ts'
export { type EventLoopLag, GC_BUCKETS_S, runtimeMetrics, type RuntimeSource } from './runtime-metrics.ts'
