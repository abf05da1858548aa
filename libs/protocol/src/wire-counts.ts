/**
 * Messages this process encoded and decoded as msgpack, and tensor bytes it copied to join rows
 * (`concatRows`; runners count their batch assembly), for the per-request budget tests
 * (docs/architecture.md#per-request-budgets): increments, never read on a request's path.
 * @module
 */
export const wireCounts = { encodes: 0, decodes: 0, copies: 0 }
