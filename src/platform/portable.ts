// `#platform` in browsers, workerd and any other runtime (every condition but `node`): no local files, no
// folder on disk.
import type { Platform } from './platform.ts'

export const localFiles: Platform['localFiles'] = undefined
export const folderStorage: Platform['folderStorage'] = undefined
