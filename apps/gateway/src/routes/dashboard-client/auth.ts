/**
 * Credentials for `dashboard/data` when the gateway has authentication on: an API key or JWT
 * entered on the page, kept in sessionStorage (this tab only, gone when it closes) and sent as
 * `Authorization: Bearer`. Never in the URL, which would leak into logs and history.
 */
import { byId } from './dom.ts'

const KEY = 'cohort.dashboard.key'

/** The stored key, if any (sessionStorage may be unavailable, e.g. in a sandboxed frame). */
export function storedKey(): string | undefined {
  try {
    return sessionStorage.getItem(KEY) ?? undefined
  } catch {
    return undefined
  }
}

function store(key: string | undefined): void {
  try {
    if (key) sessionStorage.setItem(KEY, key)
    else sessionStorage.removeItem(KEY)
  } catch {
    // Without storage the key lives as long as the page.
  }
}

let memoryKey: string | undefined

/** Headers of a data request. */
export function authHeaders(): Record<string, string> {
  const key = storedKey() ?? memoryKey
  return key ? { authorization: `Bearer ${key}` } : {}
}

/** Whether a key is in use. */
export function hasKey(): boolean {
  return (storedKey() ?? memoryKey) !== undefined
}

/**
 * Wire the key form and the "forget key" button; `changed` runs after either (poll again).
 */
export function setupAuth(changed: () => void): void {
  const form = byId('auth', HTMLFormElement)
  const input = byId('auth-key', HTMLInputElement)
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    const key = input.value.trim()
    if (!key) return
    memoryKey = key
    store(key)
    input.value = ''
    showAuth(false)
    changed()
  })
  byId('forget-key').addEventListener('click', () => {
    memoryKey = undefined
    store(undefined)
    changed()
  })
  showForget()
}

function showForget(): void {
  byId('forget-key').hidden = !hasKey()
}

/** Show or hide the key form, with a note on why it shows. */
export function showAuth(show: boolean, note = ''): void {
  byId('auth').hidden = !show
  byId('auth-note').textContent = note
  showForget()
  if (show) byId('auth-key', HTMLInputElement).focus()
}
