/**
 * Prometheus metrics for Cohort: a tiny runtime-agnostic registry and the named metric sets.
 * See docs/metrics.md.
 * @module
 */
export * from './registry.ts'
export * from './cohort-metrics.ts'
export * from './quantile.ts'
export * from './runtime-metrics.ts'
