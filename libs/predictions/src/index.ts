/**
 * Cog-style predictions: the record (`GET /predictions/{id}`, webhook bodies), its one lifecycle
 * (starting -> processing -> succeeded | failed | canceled, with the webhooks each step sends) and
 * webhook delivery. Shared by the gateway (in-memory jobs), the workers (durable jobs) and the
 * Redis bridge. Pure and runtime-agnostic: the HTTP client is injected. See docs/predictions.md.
 * @module
 */
export * from './predictions.ts'
export * from './webhooks.ts'
export * from './lifecycle.ts'
