import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { isValidModelName, isValidVersion } from '@cohort/protocol'

/** The file of a version that makes it loadable. */
export const MODEL_FILE = 'model.onnx'
/** A model's per-model configuration, beside its version folders. */
export const CONFIG_FILE = 'config.json'

/** One version folder as found on disk. */
export interface ScannedVersion {
  version: string
  dir: string
  /** `DIR/<model>/<version>/model.onnx`, when present. */
  file: string | undefined
  /** Names, sizes and modification times of the folder's files: changes when any file does. */
  signature: string
}

/** One model folder as found on disk. */
export interface ScannedModel {
  name: string
  dir: string
  versions: ScannedVersion[]
  /** The raw `config.json` text and its signature (absent: no config file). */
  config: { text: string; signature: string } | undefined
  /** Folders and files that are no version (named in the index). */
  ignored: string[]
}

/** The model folders of a repository: every entry of `dir` that is a folder with a valid model name. */
export async function listModels(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true })
  return entries.filter((e) => e.isDirectory() && isValidModelName(e.name)).map((e) => e.name).sort()
}

/** Scan one model folder; undefined when it does not exist (any more). */
export async function scanModel(repo: string, name: string): Promise<ScannedModel | undefined> {
  const dir = join(repo, name)
  let entries
  try {
    entries = await readdir(dir, { withFileTypes: true })
  } catch {
    return undefined
  }
  const versions: ScannedVersion[] = []
  const ignored: string[] = []
  let config: ScannedModel['config']
  for (const e of entries) {
    if (e.isDirectory() && isValidVersion(e.name)) {
      const v = await scanVersion(join(dir, e.name), e.name)
      if (v) {
        versions.push(v)
      }
    } else if (e.isFile() && e.name === CONFIG_FILE) {
      try {
        const p = join(dir, e.name)
        const [text, st] = await Promise.all([readFile(p, 'utf8'), stat(p)])
        config = { text, signature: `${st.size}:${st.mtimeMs}` }
      } catch {
        // Removed between readdir and read: as if absent.
      }
    } else if (!e.name.startsWith('.')) {
      ignored.push(e.name)
    }
  }
  return { name, dir, versions, config, ignored }
}

async function scanVersion(dir: string, version: string): Promise<ScannedVersion | undefined> {
  let entries
  try {
    entries = await readdir(dir, { withFileTypes: true })
  } catch {
    return undefined
  }
  const parts: string[] = []
  let file: string | undefined
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    try {
      const st = await stat(join(dir, e.name))
      parts.push(`${e.name}:${st.size}:${st.mtimeMs}`)
      if (e.name === MODEL_FILE && st.isFile()) {
        file = join(dir, e.name)
      }
    } catch {
      // Removed meanwhile.
    }
  }
  return { version, dir, file, signature: parts.join('|') }
}
