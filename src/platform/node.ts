// `#platform` under Node, Deno and Bun (the `node` condition): local files, a cache folder on disk, worker_threads.
import { cacheFolder } from './node-cache-folder.ts'
import { nodeFiles } from './node-files.ts'
import { nodeWorkers } from './node-workers.ts'
import type { Platform } from './platform.ts'

export const localFiles: Platform['localFiles'] = nodeFiles
export const folderStorage: Platform['folderStorage'] = cacheFolder
export const workers: Platform['workers'] = nodeWorkers
