/**
 * The door at the listener: judge an inference request from its head alone, before the HTTP
 * framework builds anything for it (docs/reliability.md#refusals-under-overload). A runtime adapter
 * calls {@link EarlyDoor.judge} with the request line and headers as its server parsed them; a
 * refusal is answered from the returned status, headers and body (no Request, no Response, no
 * middleware, no body read), an admission travels with the request to the route, which uses it
 * instead of judging again ({@link Arrival.admission}). The judgement is the door's own
 * ({@link InferenceDoor.admit}) and so is the accounting of a refusal (metrics, the aggregated
 * log, the span): only where it runs changes.
 *
 * It judges only what it can judge alone: `POST /v2/models/{m}[/versions/{v}]/infer` with a plain
 * (unencoded, valid) name, with no CORS origin to answer, no rate limit, not while draining, with
 * either no authentication or one of the API keys (a token, a wrong key: the route's answer), and
 * a body small enough to drain (refusal.ts). Anything else, and any request it admits, goes on to
 * the app as before.
 * @module
 */
import { CohortError, isValidModelName } from '@cohort/protocol'
import { TRACEPARENT, TRACESTATE } from '@cohort/observability'
import type { ResolvedGatewayOptions } from './options.ts'
import { Passage, type Arrival, type InferenceDoor } from './door.ts'
import { checkModelPath, type Admission } from './admission.ts'
import { errorBody, retryAfterOf } from './errors.ts'
import { Authenticator } from './middleware/auth/credentials.ts'
import { closesConnection } from './refusal.ts'
import { REQUEST_ID_RE } from './observe.ts'

/** What a runtime's server knows of a request before any handler runs. */
export interface RequestHead {
  method: string
  /** The request target as sent: path and query. */
  url: string
  /** A header's value (names lower-case), `undefined` when absent. */
  header(name: string): string | undefined
  /** How long the request waited before this judgement, ms (the adapter's `arrivedAt`). */
  waitedMs?: number | undefined
}

/** An answer given at the listener: status, headers and a JSON body. */
export interface EarlyAnswer {
  status: number
  headers: Record<string, string>
  body: string
}

/** The listener's judgement of a request: answered here, admitted (the route goes on with it), or not judged. */
export type EarlyDecision = { answer: EarlyAnswer; admission?: undefined } | { answer?: undefined; admission: Admission } | undefined

/** The infer route, with and without a version (the app's route paths, for spans and logs). */
const INFER = /^\/v2\/models\/([^/?#%]+)(?:\/versions\/([^/?#%]+))?\/infer(?:\?.*)?$/
const ROUTE = '/v2/models/:model/infer'
const VERSIONED_ROUTE = '/v2/models/:model/versions/:version/infer'

/** See the module's documentation. */
export class EarlyDoor {
  readonly #auth: Authenticator | undefined
  readonly #off: boolean

  constructor(
    readonly door: InferenceDoor,
    readonly o: ResolvedGatewayOptions,
  ) {
    this.#auth = Authenticator.of(o)
    // With a rate limit the route answers 429 before the door; with JWT only, no key can match.
    this.#off = o.rateLimit !== undefined || (this.#auth !== undefined && (o.apiKeys ?? []).length === 0)
  }

  /** Judge `head` (see the module's documentation); `undefined`: the app judges it. */
  judge(head: RequestHead): EarlyDecision {
    if (this.#off || head.method !== 'POST') {
      return undefined
    }
    const m = INFER.exec(head.url)
    const model = m?.[1]
    if (model === undefined || !isValidModelName(model)) {
      return undefined
    }
    const version = m?.[2]
    if ((this.o.cors !== undefined && head.header('origin') !== undefined) || this.o.draining?.() === true) {
      return undefined
    }
    if (closesConnection('POST', head.header('content-length'), head.header('transfer-encoding'))) {
      return undefined // a body too large to drain: the route's lingering close
    }
    let tenant: string | undefined
    if (this.#auth !== undefined) {
      tenant = this.#auth.keyClient(head.header('authorization'))
      if (tenant === undefined) {
        return undefined // the route answers 401 (or verifies a token)
      }
    }
    const a: Arrival = {
      origin: 'infer',
      method: 'POST',
      route: version === undefined ? ROUTE : VERSIONED_ROUTE,
      model,
      ...(version !== undefined ? { version } : {}),
      traceparent: head.header(TRACEPARENT),
      tracestate: head.header(TRACESTATE),
      timeoutHeader: head.header('x-cohort-timeout-ms'),
      tenant,
      waitedMs: head.waitedMs,
    }
    let admission: Admission
    try {
      checkModelPath(model, version)
      admission = this.door.admit(a)
    } catch {
      return undefined // a bad timeout header, a bad version: the route's 400/404
    }
    if (!admission.refused) {
      return { admission }
    }
    return { answer: this.#refuse({ ...a, admission }, head.header('x-request-id')) }
  }

  /**
   * Answer a refused call: the door's passage records it (metrics, the aggregated log, the span).
   * Its request id is the client's `x-request-id` when worth echoing, else its own (as the app's `responseIds`).
   */
  #refuse(arrival: Arrival, theirs: string | undefined): EarlyAnswer {
    const own = theirs === undefined || !REQUEST_ID_RE.test(theirs)
    const requestId = own ? crypto.randomUUID() : theirs
    const a: Arrival = own ? { ...arrival, requestId } : { ...arrival, clientRequestId: requestId }
    const p = new Passage(this.door, a)
    let e: CohortError
    try {
      p.enter()
      e = new CohortError('INTERNAL', 'internal error') // unreachable: the admission is a refusal
    } catch (x) {
      e = p.fail(x)
    } finally {
      p.end()
    }
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': requestId }
    const retry = retryAfterOf(e)
    if (retry !== undefined) {
      headers['retry-after'] = retry
    }
    const tp = p.trace?.traceparent
    if (tp !== undefined) {
      headers['traceparent'] = tp
    }
    return { status: e.status, headers, body: JSON.stringify(errorBody(e)) }
  }
}
