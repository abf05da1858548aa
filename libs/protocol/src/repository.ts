/**
 * The model repository's control messages (docs/repository.md#load-and-unload): a gateway asks
 * every worker holding a repository on `<prefix>.repo.index|load|unload`, each answers for itself.
 * @module
 */

/** A version's state in the repository index (Triton's names). */
export type RepositoryState = 'READY' | 'UNAVAILABLE' | 'LOADING'

/** One version of one model in a worker's repository index. */
export interface RepositoryEntry {
  name: string
  version: string
  state: RepositoryState
  /** Why a version is not READY (a load error, the version policy, an unload, an incomplete folder). */
  reason?: string
}

/** The request on `<prefix>.repo.load` and `<prefix>.repo.unload` (and, without `model`, `index`). */
export interface RepositoryRequest {
  model?: string
}

/** A worker's answer: its index (for `load`/`unload`: of that model, as it is once the change has started). */
export interface RepositoryAnswer {
  worker: string
  models: RepositoryEntry[]
  /** Models with a load, unload or poll in progress on this worker. */
  busy: string[]
  /** Set when the request was refused (an unknown model folder, a bad name). */
  error?: string
}
