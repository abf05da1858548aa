import { readFileSync } from 'node:fs'
import { credsAuthenticator, type ConnectionOptions } from '@nats-io/transport-node'
import { CliError } from './cli-error.ts'
import { knobHelp, knobOptions, knobValues, type Knob, type KnobTable } from './knobs.ts'

type Values = Record<string, string | boolean | string[] | undefined>

/** Replicas of the KV buckets a process creates when --kv-replicas is not given. */
export const DEFAULT_KV_REPLICAS = 1
/** Most KV replicas (JetStream's limit). */
export const MAX_KV_REPLICAS = 5

/** NATS authentication and TLS knobs, shared by `serve`, `gateway` and `worker` ({@link knobs.ts}). */
export const NATS_AUTH_KNOBS = Object.freeze({
  'nats-user': { kind: 'string', arg: 'U', env: 'COHORT_NATS_USER', help: ['NATS user (also {default}); with --nats-pass'] },
  'nats-pass': { kind: 'string', arg: 'P', env: 'COHORT_NATS_PASS', help: ['NATS password (prefer {default}: flags show in ps)'] },
  'nats-token': { kind: 'string', arg: 'T', env: 'COHORT_NATS_TOKEN', help: ['NATS token (prefer {default})'] },
  'nats-creds': { kind: 'string', arg: 'FILE', help: ['NATS credentials file (JWT + NKey seed; decentralized auth)'] },
  'nats-tls-ca': { kind: 'string', arg: 'FILE', help: ["CA that signed the NATS server's certificate (turns TLS on)"] },
  'nats-tls-cert': { kind: 'string', arg: 'FILE', help: ['client certificate for NATS mutual TLS (with --nats-tls-key)'] },
  'nats-tls-key': { kind: 'string', arg: 'FILE', help: ['key of --nats-tls-cert'] },
  'kv-replicas': {
    kind: 'int',
    arg: 'N',
    env: 'COHORT_KV_REPLICAS',
    default: DEFAULT_KV_REPLICAS,
    max: MAX_KV_REPLICAS,
    help: ['replicas of the KV buckets this process creates', '(default {default}; 3 on a 3-node JetStream cluster)'],
  },
} as const satisfies KnobTable)

/** NATS authentication and TLS flags, shared by `serve`, `gateway` and `worker`. */
export const NATS_AUTH_OPTIONS = knobOptions(NATS_AUTH_KNOBS)
/** Help text of {@link NATS_AUTH_OPTIONS}. */
export const NATS_AUTH_HELP = knobHelp(NATS_AUTH_KNOBS)

/** `--kv-replicas` (or `COHORT_KV_REPLICAS`): replicas of the KV buckets this process creates. */
export function kvReplicas(v: Values): number {
  return knobValues({ 'kv-replicas': NATS_AUTH_KNOBS['kv-replicas'] }, { 'kv-replicas': v['kv-replicas'] || undefined })['kv-replicas']
}

function str(v: Values, flag: keyof typeof NATS_AUTH_KNOBS): string | undefined {
  const x = v[flag]
  if (typeof x === 'string' && x !== '') {
    return x
  }
  const env: string | undefined = (NATS_AUTH_KNOBS[flag] as Knob).env
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
  const user = str(v, 'nats-user')
  const pass = str(v, 'nats-pass')
  const token = str(v, 'nats-token')
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
