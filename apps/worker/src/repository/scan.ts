import { readdir, readFile, realpath, stat } from 'node:fs/promises'
import { join, sep } from 'node:path'
import { isValidModelName, isValidVersion } from '@cohort/protocol'

/** The file of a version that makes it an ONNX model. */
export const MODEL_FILE = 'model.onnx'
/** The files of a version that make it a predictor (a module exporting one `definePredictor`). */
export const PREDICTOR_FILES = ['model.ts', 'model.mts', 'model.js', 'model.mjs'] as const
/** The files of a version that make it a pipeline (a module whose default export is `definePipeline` or a one-model `defineConfig`). */
export const PIPELINE_FILES = ['pipeline.ts', 'pipeline.mts', 'pipeline.js', 'pipeline.mjs'] as const
/** A model's per-model configuration, beside its version folders: `config.json`, or a module whose default export is the same object. */
export const CONFIG_FILES = ['config.json', 'config.ts', 'config.mts', 'config.js', 'config.mjs'] as const
/** The JSON form of the per-model configuration. */
export const CONFIG_FILE = 'config.json'

/** What a version folder serves. */
export type VersionKind = 'onnx' | 'predictor' | 'pipeline'

/** The kind of a version folder's entry file, or undefined for any other file. */
export function kindOf(fileName: string): VersionKind | undefined {
  if (fileName === MODEL_FILE) {
    return 'onnx'
  }
  if ((PREDICTOR_FILES as readonly string[]).includes(fileName)) {
    return 'predictor'
  }
  return (PIPELINE_FILES as readonly string[]).includes(fileName) ? 'pipeline' : undefined
}

/** Every entry file a version folder may hold, for messages. */
export const ENTRY_FILES_TEXT = `${MODEL_FILE}, model.{ts,mts,js,mjs} (a predictor) or pipeline.{ts,mts,js,mjs} (a pipeline)`

/** One version folder as found on disk. */
export interface ScannedVersion {
  version: string
  dir: string
  /** The version's one entry file (`model.onnx`, `model.ts`, `pipeline.ts`, ...), when it holds exactly one. */
  file: string | undefined
  /** What `file` is. */
  kind: VersionKind | undefined
  /** Set when the folder holds more than one entry file: the version is refused with this reason. */
  conflict: string | undefined
  /** Names, sizes and modification times of the folder's files: changes when any file does. */
  signature: string
}

/** A model's configuration file as found on disk. */
export interface ScannedConfig {
  /** The file's path. */
  file: string
  /** `config.json`, `config.ts`, ... */
  name: string
  /** The text of `config.json` (modules are imported, not read). */
  text: string | undefined
  /** Size and modification time. */
  signature: string
}

/** One model folder as found on disk. */
export interface ScannedModel {
  name: string
  dir: string
  versions: ScannedVersion[]
  /** The configuration file (absent: none, or more than one: see `configConflict`). */
  config: ScannedConfig | undefined
  /** Set when the folder holds more than one configuration file: the model loads nothing new. */
  configConflict: string | undefined
  /** Folders and files that are no version (named in the index). */
  ignored: string[]
}

/** The model folders of a repository: every entry of `dir` that is a folder with a valid model name. */
export async function listModels(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true })
  return entries
    .filter((e) => e.isDirectory() && isValidModelName(e.name))
    .map((e) => e.name)
    .sort()
}

/** Options of {@link scanModel}. */
export interface ScanOptions {
  /**
   * Serve model folders and entry files that are symbolic links resolving outside the repository
   * root. Off: such a version is refused (UNAVAILABLE, the index names the link and where it leads),
   * so a link cannot make the worker load files the repository's owner did not put there.
   * @default false
   */
  allowLinksOutside?: boolean
}

/** True when the resolved path `p` is `root` or inside it. */
function inside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(sep) ? root : root + sep)
}

/** Why `path` (inside the repository as named) is refused: it resolves outside `root`; undefined when it does not. */
async function outsideReason(root: string | undefined, path: string, shown: string): Promise<string | undefined> {
  if (root === undefined) {
    return undefined
  }
  const real = await realpath(path).catch(() => undefined)
  return real !== undefined && !inside(root, real)
    ? `${shown} resolves to ${real}, outside the repository ${root}: a symbolic link may not lead out of the repository (ScanOptions.allowLinksOutside)`
    : undefined
}

/** Scan one model folder; undefined when it does not exist (any more). */
export async function scanModel(repo: string, name: string, o: ScanOptions = {}): Promise<ScannedModel | undefined> {
  const dir = join(repo, name)
  let entries
  try {
    entries = await readdir(dir, { withFileTypes: true })
  } catch {
    return undefined
  }
  const root = o.allowLinksOutside === true ? undefined : await realpath(repo).catch(() => undefined)
  const dirOutside = await outsideReason(root, dir, name)
  const versions: ScannedVersion[] = []
  const ignored: string[] = []
  const configs: ScannedConfig[] = []
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (e.isDirectory() && isValidVersion(e.name)) {
      const v = await scanVersion(join(dir, e.name), e.name, root, dirOutside)
      if (v) {
        versions.push(v)
      }
    } else if (e.isFile() && (CONFIG_FILES as readonly string[]).includes(e.name)) {
      try {
        const p = join(dir, e.name)
        const [text, st] = await Promise.all([e.name === CONFIG_FILE ? readFile(p, 'utf8') : undefined, stat(p)])
        configs.push({ file: p, name: e.name, text, signature: `${e.name}:${st.size}:${st.mtimeMs}` })
      } catch {
        // Removed between readdir and read: as if absent.
      }
    } else if (!e.name.startsWith('.')) {
      ignored.push(e.name)
    }
  }
  const configConflict = dirOutside ?? (configs.length > 1 ? `${name} has ${configs.map((c) => c.name).join(' and ')}: keep one configuration file` : undefined)
  return { name, dir, versions, config: configs.length === 1 ? configs[0] : undefined, configConflict, ignored }
}

async function scanVersion(dir: string, version: string, root: string | undefined, dirOutside: string | undefined): Promise<ScannedVersion | undefined> {
  let entries
  try {
    entries = await readdir(dir, { withFileTypes: true })
  } catch {
    return undefined
  }
  const parts: string[] = []
  const found: string[] = []
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    try {
      const st = await stat(join(dir, e.name))
      parts.push(`${e.name}:${st.size}:${st.mtimeMs}`)
      if (kindOf(e.name) !== undefined && st.isFile()) {
        found.push(e.name)
      }
    } catch {
      // Removed meanwhile.
    }
  }
  const one = found.length === 1 ? found[0] : undefined
  const outside = dirOutside ?? (one === undefined ? undefined : await outsideReason(root, join(dir, one), `${version}/${one}`))
  return {
    version,
    dir,
    file: one === undefined || outside !== undefined ? undefined : join(dir, one),
    kind: one === undefined || outside !== undefined ? undefined : kindOf(one),
    conflict: outside ?? (found.length > 1 ? `${found.join(' and ')} in one version folder: a version holds one of ${ENTRY_FILES_TEXT}` : undefined),
    signature: parts.join('|'),
  }
}
