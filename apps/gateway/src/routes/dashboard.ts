import type { Hono } from 'hono'
import type { Registry } from '@cohort/metrics'
import type { ResolvedGatewayOptions } from '../options.ts'
import type { Upstream } from '../upstream.ts'

/** Mount the live dashboard (`/dashboard`) and its data endpoints. */
export function registerDashboard(_app: Hono, _o: ResolvedGatewayOptions, _up: Upstream, _registry: Registry): void {
  // The dashboard is added here.
}
