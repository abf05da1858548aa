import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node'
import { CliError } from './cli-error.ts'

/**
 * Connect to NATS or fail with one clear line. `auth`: authentication and TLS options
 * (see `natsAuthOptions` in nats-auth.ts).
 */
export async function connectNats(servers: string, name: string, auth: Partial<ConnectionOptions> = {}): Promise<NatsConnection> {
  try {
    return await connect({
      servers: servers.split(','),
      name,
      timeout: 5_000,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      // Capturing a stack trace for every request costs more than the request itself.
      noAsyncTraces: true,
      ...auth,
    })
  } catch (e) {
    throw new CliError(`cannot connect to NATS at ${servers}: ${e instanceof Error ? e.message : String(e)}`)
  }
}
