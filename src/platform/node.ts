// `#platform` under Node, Deno and Bun (the `node` condition): local files and a cache folder on disk.
import { cacheFolder } from './node-cache-folder.ts'
import { nodeFiles } from './node-files.ts'
import type { Platform } from './platform.ts'

export const localFiles: Platform['localFiles'] = nodeFiles
export const folderStorage: Platform['folderStorage'] = cacheFolder
