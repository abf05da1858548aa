import { readFileSync } from 'node:fs'
import { credsAuthenticator, type ConnectionOptions } from '@nats-io/transport-node'
import { CliError } from './cli-error.ts'

type Values = Record<string, string | boolean | string[] | undefined>

/** NATS authentication and TLS flags, shared by `serve`, `gateway` and `worker`. */
export const NATS_AUTH_OPTIONS = {
  'nats-user': { type: 'string' },
  'nats-pass': { type: 'string' },
  'nats-token': { type: 'string' },
  'nats-creds': { type: 'string' },
  'nats-tls-ca': { type: 'string' },
  'nats-tls-cert': { type: 'string' },
  'nats-tls-key': { type: 'string' },
  'kv-replicas': { type: 'string' },
} as const

/** Help text of {@link NATS_AUTH_OPTIONS}. */
export const NATS_AUTH_HELP = `  --nats-user U          NATS user (also $COHORT_NATS_USER); with --nats-pass
  --nats-pass P          NATS password (prefer $COHORT_NATS_PASS: flags show in ps)
  --nats-token T         NATS token (prefer $COHORT_NATS_TOKEN)
  --nats-creds FILE      NATS credentials file (JWT + NKey seed; decentralized auth)
  --nats-tls-ca FILE     CA that signed the NATS server's certificate (turns TLS on)
  --nats-tls-cert FILE   client certificate for NATS mutual TLS (with --nats-tls-key)
  --nats-tls-key FILE    key of --nats-tls-cert
  --kv-replicas N        replicas of the KV buckets this process creates (also $COHORT_KV_REPLICAS;
                         default 1; 3 on a 3-node JetStream cluster)`

/** `--kv-replicas` (or `COHORT_KV_REPLICAS`): replicas of the KV buckets this process creates. */
export function kvReplicas(v: Values): number {
  const raw = str(v, 'kv-replicas', 'COHORT_KV_REPLICAS')
  if (raw === undefined) {
    return 1
  }
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1 || n > 5) {
    throw new CliError(`--kv-replicas must be an integer from 1 to 5, got "${raw}"`)
  }
  return n
}

function str(v: Values, flag: string, env?: string): string | undefined {
  const x = v[flag]
  if (typeof x === 'string' && x !== '') {
    return x
  }
  const e = env ? process.env[env] : undefined
  return e ? e : undefined
}

function readable(flag: string, path: string): Uint8Array {
  try {
    return readFileSync(path)
  } catch (e) {
    throw new CliError(`cannot read --${flag} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e))}`)
  }
}

/**
 * Connection options for NATS authentication and TLS from the flags (and `COHORT_NATS_USER`,
 * `COHORT_NATS_PASS`, `COHORT_NATS_TOKEN`). One method at most: user/password, token or creds file.
 */
export function natsAuthOptions(v: Values): Partial<ConnectionOptions> {
  const user = str(v, 'nats-user', 'COHORT_NATS_USER')
  const pass = str(v, 'nats-pass', 'COHORT_NATS_PASS')
  const token = str(v, 'nats-token', 'COHORT_NATS_TOKEN')
  const creds = str(v, 'nats-creds')
  const methods = [user !== undefined || pass !== undefined, token !== undefined, creds !== undefined].filter(Boolean).length
  if (methods > 1) {
    throw new CliError('give one NATS authentication: --nats-user/--nats-pass, --nats-token or --nats-creds')
  }
  if ((user === undefined) !== (pass === undefined)) {
    throw new CliError('--nats-user and --nats-pass go together')
  }
  const out: Partial<ConnectionOptions> = {}
  if (user !== undefined && pass !== undefined) {
    out.user = user
    out.pass = pass
  }
  if (token !== undefined) {
    out.token = token
  }
  if (creds !== undefined) {
    const bytes = readable('nats-creds', creds)
    try {
      out.authenticator = credsAuthenticator(bytes)
    } catch (e) {
      throw new CliError(`--nats-creds ${creds} is not a NATS credentials file: ${e instanceof Error ? e.message : String(e)}`)
    }
  }
  const ca = str(v, 'nats-tls-ca')
  const cert = str(v, 'nats-tls-cert')
  const key = str(v, 'nats-tls-key')
  if ((cert === undefined) !== (key === undefined)) {
    throw new CliError('--nats-tls-cert and --nats-tls-key go together')
  }
  if (ca !== undefined || cert !== undefined) {
    const tls: NonNullable<ConnectionOptions['tls']> = {}
    if (ca !== undefined) {
      tls.ca = Buffer.from(readable('nats-tls-ca', ca)).toString('utf8')
    }
    if (cert !== undefined && key !== undefined) {
      tls.cert = Buffer.from(readable('nats-tls-cert', cert)).toString('utf8')
      tls.key = Buffer.from(readable('nats-tls-key', key)).toString('utf8')
    }
    out.tls = tls
  }
  return out
}
