/** A per-item or per-request failure with a stable code from the error registry. */
export interface WireError {
  code: string
  message: string
  /** Seconds the client should wait before retrying (503 OVERLOADED): sent as `Retry-After`. */
  retryAfterS?: number
}
