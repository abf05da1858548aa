/**
 * The Cohort gateway: a pure Hono app speaking the Open Inference Protocol (and Cog-style
 * predictions) that forwards each request over the transport to the model's workers.
 * @module
 */
export * from './app.ts'
export { createGatewayCore, newGatewayId, type GatewayCore } from './core.ts'
export * from './options.ts'
export * from './upstream.ts'
export * from './liveness.ts'
export * from './packer.ts'
export * from './deadline.ts'
export * from './body.ts'
export * from './door.ts'
export * from './door-wait.ts'
export * from './worker-waits.ts'
