// `#platform` in browsers, workerd and any other runtime (every condition but `node`): no local files, no
// folder on disk; Web Workers where there are any.
import type { Platform } from './platform.ts'
import { webWorkers } from './web-workers.ts'

export const localFiles: Platform['localFiles'] = undefined
export const folderStorage: Platform['folderStorage'] = undefined

/** Web Workers where the runtime has them (pages, Web Workers); none in workerd. */
export const workers: Platform['workers'] = /* @__PURE__ */ webWorkersHere()

function webWorkersHere(): Platform['workers'] {
  return typeof Worker === 'function' && typeof URL.createObjectURL === 'function' ? webWorkers : undefined
}
